"""The pull-request wiring (docs/code-review.md, "In a pull request"): the
workflow in docs/examples/github-review.yml runs tools/review.sh and hands its
files to three steps (SARIF upload, summary comment, page artifact). This test
runs that command line on a spec that breaks a layer's sharding and on passing
ones, and checks what each step would show: an annotation at the spec line,
a comment naming the module and the counterexample, a page where the failing
layer is marked; and the exit codes the verdict step turns into a red job.

Run by ctest in the project venv: .venv/bin/python test_review.py SHARDPROOF_BINARY
"""
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import unittest

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = os.path.join(ROOT, "specs", "examples")
WORKFLOW = os.path.join(ROOT, "docs", "examples", "github-review.yml")
REVIEW = os.path.join(ROOT, "tools", "review.sh")
BINARY = os.environ.get("SHARDPROOF_BINARY", os.path.join(ROOT, "build", "shardproof"))


def workflow_steps():
    with open(WORKFLOW) as f:
        wf = yaml.safe_load(f)
    (job,) = wf["jobs"].values()
    return job["steps"]


def review_out_dir(steps):
    """The --out DIR of the workflow's review.sh command."""
    for step in steps:
        for line in step.get("run", "").splitlines():
            if "tools/review.sh" in line:
                args = shlex.split(line)
                return args[args.index("--out") + 1]
    raise AssertionError("the workflow runs no tools/review.sh")


def review(out, *specs, extra=()):
    env = dict(os.environ, SHARDPROOF=BINARY)
    r = subprocess.run([REVIEW, "--out", out, *specs, *(["--", *extra] if extra else [])],
                       capture_output=True, text=True, env=env)
    return r.returncode, r.stdout + r.stderr


class Workflow(unittest.TestCase):
    def test_every_step_reads_what_review_writes(self):
        steps = workflow_steps()
        out = review_out_dir(steps)
        uses = {s.get("uses", "").split("@")[0]: s for s in steps}
        self.assertEqual(uses["github/codeql-action/upload-sarif"]["with"]["sarif_file"], f"{out}/sarif")
        self.assertEqual(uses["actions/upload-artifact"]["with"]["path"], f"{out}/")
        comment = [s for s in steps if "gh pr comment" in s.get("run", "")]
        self.assertEqual(len(comment), 1)
        self.assertIn(f"--body-file {out}/summary.md", comment[0]["run"])
        # The annotations and the comment come before the verdict fails the job.
        for s in (uses["github/codeql-action/upload-sarif"], uses["actions/upload-artifact"], comment[0]):
            self.assertEqual(s.get("if"), "always()")
        self.assertRegex(steps[-1]["run"], r"exit \$\{\{ steps\.check\.outputs\.code \}\}")


class ReviewRun(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="shardproof-review-")
        cls.out = os.path.join(cls.tmp, "review")
        cls.code, cls.log = review(cls.out, os.path.join(EXAMPLES, "mlp_no_allreduce.yaml"),
                                   os.path.join(EXAMPLES, "mlp_tp2.yaml"), extra=["--witness"])

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_a_refuted_spec_fails_the_job(self):
        self.assertEqual(self.code, 1, self.log)

    def test_the_annotation_sits_on_the_spec_line(self):
        with open(os.path.join(self.out, "sarif", "mlp_no_allreduce.sarif")) as f:
            log = json.load(f)
        errors = [r for r in log["runs"][0]["results"] if r["level"] == "error"]
        self.assertTrue(errors, log)
        loc = errors[0]["locations"][0]["physicalLocation"]
        self.assertTrue(loc["artifactLocation"]["uri"].endswith("mlp_no_allreduce.yaml"))
        with open(os.path.join(EXAMPLES, "mlp_no_allreduce.yaml")) as f:
            line = f.read().splitlines()[loc["region"]["startLine"] - 1]
        self.assertRegex(line, r"^\s+y:", "the annotation is not on the line placing output y")
        with open(os.path.join(self.out, "sarif", "mlp_tp2.sarif")) as f:
            self.assertEqual(json.load(f)["runs"][0]["results"], [])

    def test_the_comment_names_the_module_and_the_counterexample(self):
        with open(os.path.join(self.out, "summary.md")) as f:
            md = f.read()
        self.assertIn("## shardproof: REFUTED", md)
        self.assertIn("## shardproof: VERIFIED", md)
        self.assertIn("module `fc2`", md)
        self.assertRegex(md, r"reference \*\*-?[0-9.]+\*\*, implementation \*\*-?[0-9.]+\*\*")

    def test_the_page_marks_the_failing_layer(self):
        with open(os.path.join(self.out, "html", "mlp_no_allreduce.html")) as f:
            page = f.read()
        self.assertRegex(page, r'<details[^>]*class="[^"]*\bfailing\b[^"]*"[^>]*data-module="fc2"'
                               r'|<details[^>]*data-module="fc2"[^>]*class="[^"]*\bfailing\b')
        with open(os.path.join(self.out, "html", "mlp_tp2.html")) as f:
            self.assertNotRegex(f.read(), r'class="[^"]*\bfailing\b')


class ExitCodes(unittest.TestCase):
    def test_verified_is_0(self):
        with tempfile.TemporaryDirectory() as tmp:
            code, log = review(os.path.join(tmp, "r"), os.path.join(EXAMPLES, "mlp_tp2.yaml"))
            self.assertEqual(code, 0, log)

    def test_a_changed_relation_is_5_and_its_line_is_annotated(self):
        with tempfile.TemporaryDirectory() as tmp:
            for f in ("mlp_tp2.yaml", "mlp_ref.onnx", "mlp_tp2_rank0.onnx", "mlp_tp2_rank1.onnx"):
                shutil.copy(os.path.join(EXAMPLES, f), tmp)
            spec = os.path.join(tmp, "mlp_tp2.yaml")
            rel = os.path.join(tmp, "mlp_tp2.relations.yaml")
            r = subprocess.run([BINARY, "infer", spec, "-o", rel], capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            with open(rel) as f:
                text = f.read()
            edited = text.replace("axis=1)", "axis=2)", 1)
            self.assertNotEqual(edited, text, "no relation with axis=1 to edit")
            with open(rel, "w") as f:
                f.write(edited)
            # The relation file beside the spec is picked up, and not checked as a spec.
            code, log = review(os.path.join(tmp, "r"), spec, rel)
            self.assertEqual(code, 5, log)
            self.assertEqual(sorted(os.listdir(os.path.join(tmp, "r", "sarif"))), ["mlp_tp2.sarif"])
            with open(os.path.join(tmp, "r", "sarif", "mlp_tp2.sarif")) as f:
                results = json.load(f)["runs"][0]["results"]
            self.assertIn("SP006", [x["ruleId"] for x in results])

    def test_bad_input_is_3_and_the_comment_says_why(self):
        with tempfile.TemporaryDirectory() as tmp:
            missing = os.path.join(tmp, "nowhere.yaml")
            code, log = review(os.path.join(tmp, "r"), os.path.join(EXAMPLES, "mlp_no_allreduce.yaml"), missing)
            self.assertEqual(code, 3, log)
            with open(os.path.join(tmp, "r", "summary.md")) as f:
                md = f.read()
            self.assertIn("error in `" + missing + "` (exit 3)", md)
            self.assertIn("## shardproof: REFUTED", md)

    def test_no_spec_is_a_usage_error(self):
        r = subprocess.run([REVIEW], capture_output=True, text=True)
        self.assertEqual(r.returncode, 64)
        self.assertIn("Usage: tools/review.sh", r.stderr)


if __name__ == "__main__":
    if len(sys.argv) > 1 and not sys.argv[1].startswith("-"):
        BINARY = os.path.abspath(sys.argv.pop(1))
    unittest.main()
