#!/usr/bin/env python3
"""check --sarif against the SARIF 2.1.0 JSON schema (sarif-schema-2.1.0.json
beside this file; its provenance is in README.md).

Runs the real binary on a VERIFIED example, two REFUTED ones (and one of them
again from a directory with a space in its name), three UNKNOWN runs (a check
that cannot decide, an operator shardproof does not model, a time budget of 0)
and a check whose relation file was hand-edited (SP006),
validates every log with jsonschema (the validator for the draft the schema's
"$schema" names, with its format checker), then checks what the schema cannot:
every ruleId is one of the driver's rules, a REFUTED log has an error on a
line, a VERIFIED log has no result, an UNKNOWN log no error, every region
points at a line of an existing file.

    .venv/bin/python tests/sarif/validate_sarif.py build/shardproof

jsonschema (and rfc3987 for the uri formats) of the project venv, pinned in
requirements.txt. Exit 0 when every log passes, 1 listing every violation with
its JSON path, 2 when the test cannot run."""

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.parse

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HERE = os.path.join(ROOT, "tests", "sarif")
SCHEMA = os.path.join(HERE, "sarif-schema-2.1.0.json")
# The file as shipped in @microsoft/sarif-multitool-linux 5.7.0 (README.md):
# an edit to it would silently change what "valid" means.
SCHEMA_SHA256 = "1c49a0f2b60444c71bb14878e21e0d882198eff4c539861b133093ad89ed798c"
EXAMPLES = "specs/examples"  # relative to ROOT, where the binary runs: the URIs stay relative

EXIT = {"VERIFIED": 0, "REFUTED": 1, "UNKNOWN": 2, "RELATIONS CHANGED": 5}


def die(msg):
    print(f"sarif_schema: cannot run: {msg}", file=sys.stderr)
    sys.exit(2)


def json_path(parts):
    return "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in parts)


def load_validator():
    try:
        import jsonschema
        from jsonschema.validators import validator_for
    except ImportError:
        die(f"no jsonschema module in {sys.executable}: run with the project venv's .venv/bin/python "
            "(tools/setup.sh makes it from requirements.txt)")
    with open(SCHEMA, "rb") as f:
        raw = f.read()
    digest = hashlib.sha256(raw).hexdigest()
    if digest != SCHEMA_SHA256:
        die(f"{SCHEMA} has sha256 {digest}, not the shipped file's {SCHEMA_SHA256} (see README.md)")
    schema = json.loads(raw.decode("utf-8-sig"))
    cls = validator_for(schema, default=None)
    if cls is None:
        die(f"jsonschema {jsonschema.__version__ if hasattr(jsonschema, '__version__') else ''} "
            f"has no validator for {schema.get('$schema')!r}")
    cls.check_schema(schema)
    checker = getattr(cls, "FORMAT_CHECKER", None) or jsonschema.FormatChecker()
    missing = [f for f in ("uri", "uri-reference") if f not in checker.checkers]
    if missing:
        print(f"sarif_schema: warning: formats {missing} are not checked (install rfc3987, pinned in requirements.txt)")
    return cls(schema, format_checker=checker), cls.__name__


def schema_errors(validator, log):
    """Every violation, one line each (an anyOf/oneOf failure with its branches)."""
    out = []
    for e in sorted(validator.iter_errors(log), key=lambda e: [str(p) for p in e.absolute_path]):
        line = f"{json_path(e.absolute_path)}: {e.message} (schema {'/'.join(map(str, e.absolute_schema_path))})"
        for sub in e.context or []:
            line += f"\n      branch {json_path(e.absolute_path) + json_path(sub.relative_path)[1:]}: {sub.message}"
        out.append(line)
    return out


def alarm(validator, log):
    """The validator must reject a broken copy of a good log, or a pass means nothing."""
    bad = json.loads(json.dumps(log))
    res = bad["runs"][0]["results"][0]
    res["level"] = "fatal"
    res["locations"][0]["physicalLocation"]["region"]["startLine"] = 0
    res["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] = "has space:/x"
    bad["runs"][0]["tool"]["driver"]["rules"][0].pop("id")
    bad["runs"][0]["verdict"] = "REFUTED"
    found = {e.split(":")[0] for e in schema_errors(validator, bad)}
    want = {"$.runs[0].results[0].level", "$.runs[0].results[0].locations[0].physicalLocation.region.startLine",
            "$.runs[0].tool.driver.rules[0]", "$.runs[0]"}
    if "uri-reference" in getattr(validator, "format_checker").checkers:
        want.add("$.runs[0].results[0].locations[0].physicalLocation.artifactLocation.uri")
    if want - found:
        print(f"FAIL alarm: the validator missed {sorted(want - found)} in a broken log (found {sorted(found)})")
        return 1
    return 0


def content_errors(log, case):
    """What the schema cannot say: rules, levels and lines as docs/code-review.md states them."""
    errs = []
    try:
        runs = log["runs"]
        run = runs[0]
        driver = run["tool"]["driver"]
        results = run["results"]
    except (KeyError, IndexError, TypeError) as e:
        return [f"no runs[0].tool.driver / runs[0].results: {e!r}"]
    if len(runs) != 1:
        errs.append(f"$.runs: {len(runs)} runs, expected 1")
    if driver.get("name") != "shardproof":
        errs.append(f"$.runs[0].tool.driver.name: {driver.get('name')!r}, expected 'shardproof'")
    rule_ids = [r.get("id") for r in driver.get("rules", [])]
    if len(set(rule_ids)) != len(rule_ids):
        errs.append(f"$.runs[0].tool.driver.rules: duplicate ids {rule_ids}")
    verdict = run.get("properties", {}).get("verdict")
    expected_verdict = "VERIFIED" if case["verdict"] == "RELATIONS CHANGED" else case["verdict"]
    if verdict != expected_verdict:
        errs.append(f"$.runs[0].properties.verdict: {verdict!r}, expected {expected_verdict!r}")

    for i, res in enumerate(results):
        at = f"$.runs[0].results[{i}]"
        rid = res.get("ruleId")
        if rid is None:
            errs.append(f"{at}.ruleId: missing")
        elif rid not in rule_ids:
            errs.append(f"{at}.ruleId: {rid!r} is not one of the driver's rules {rule_ids}")
        locs = res.get("locations") or []
        if not locs:
            errs.append(f"{at}.locations: none; every result sits on a line")
        related = res.get("relatedLocations") or []
        for j, loc in enumerate(locs + related):
            where = f"{at}.locations[{j}]" if j < len(locs) else f"{at}.relatedLocations[{j - len(locs)}]"
            pl = loc.get("physicalLocation", {})
            start = pl.get("region", {}).get("startLine")
            if not isinstance(start, int) or start < 1:
                errs.append(f"{where}.physicalLocation.region.startLine: {start!r}, expected >= 1")
                continue
            uri = pl.get("artifactLocation", {}).get("uri", "")
            # Also without rfc3987's format check: only RFC 3986's characters.
            if re.search(r"[^A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=%]", uri):
                errs.append(f"{where}.physicalLocation.artifactLocation.uri: {uri!r} holds "
                            "characters a URI cannot (percent-encode them)")
            path = urllib.parse.unquote(uri)
            path = path if os.path.isabs(path) else os.path.join(ROOT, path)
            if not os.path.isfile(path):
                errs.append(f"{where}.physicalLocation.artifactLocation.uri: {uri!r} is no file")
                continue
            with open(path, encoding="utf-8", errors="replace") as f:
                n = sum(1 for _ in f)
            if start > n:
                errs.append(f"{where}: startLine {start} past the end of {uri} ({n} lines)")

    levels = [r.get("level") for r in results]
    rules = [r.get("ruleId") for r in results]
    if case["verdict"] == "VERIFIED" and results:
        errs.append(f"$.runs[0].results: {len(results)} results in a VERIFIED log, expected none")
    if case["verdict"] == "REFUTED":
        located_errors = [r for r in results if r.get("level") == "error" and any(
            isinstance(l.get("physicalLocation", {}).get("region", {}).get("startLine"), int)
            and l["physicalLocation"]["region"]["startLine"] >= 1 for l in r.get("locations", []))]
        if not located_errors:
            errs.append(f"$.runs[0].results: no result with level 'error' and a startLine >= 1 "
                        f"in a REFUTED log (levels {levels})")
    if case["verdict"] == "UNKNOWN":
        if not results:
            errs.append("$.runs[0].results: an UNKNOWN log without a result (its reason must be on the spec)")
        if "error" in levels:
            errs.append(f"$.runs[0].results: level 'error' in an UNKNOWN log: nothing was shown wrong ({levels})")
    for rid in case.get("rules", []):
        if rid not in rules:
            errs.append(f"$.runs[0].results: no {rid} result (rules {rules})")
    if case.get("python"):  # a captured model: the user's line among the related locations
        uris = [urllib.parse.unquote(l.get("physicalLocation", {}).get("artifactLocation", {}).get("uri", ""))
                for r in results for l in r.get("relatedLocations", [])]
        if not any(u.endswith(case["python"]) for u in uris):
            errs.append(f"$.runs[0].results[*].relatedLocations: no {case['python']} (related: {uris})")
    if case.get("changed_at"):
        uri, line = case["changed_at"]
        hits = [r for r in results if r.get("ruleId") == "SP006"]
        ok = [r for r in hits if r.get("level") == "error" and any(
            urllib.parse.unquote(l.get("physicalLocation", {}).get("artifactLocation", {}).get("uri", "")) == uri
            and l["physicalLocation"].get("region", {}).get("startLine") == line for l in r.get("locations", []))]
        if not ok:
            errs.append(f"$.runs[0].results: no SP006 error at {uri}:{line} (SP006 results: {json.dumps(hits)})")
    return errs


def run(binary, args, expect, what):
    r = subprocess.run([binary] + args, cwd=ROOT, capture_output=True, text=True)
    if r.returncode != EXIT[expect]:
        return f"{what}: `shardproof {' '.join(args)}` exited {r.returncode}, expected {EXIT[expect]} ({expect})\n" \
               + (r.stdout + r.stderr)[-2000:]
    return None


def prepare_changed_relation(binary, tmp):
    """infer writes mlp_tp2's relation file; fc1's recorded shard axis is
    hand-edited from 2 to 1, so a fresh check disagrees with it at that line."""
    rel = os.path.join(tmp, "mlp_tp2.relations.yaml")
    err = run(binary, ["infer", "--quiet", f"{EXAMPLES}/mlp_tp2.yaml", "-o", rel], "VERIFIED", "relations")
    if err:
        die(err)
    with open(rel) as f:
        text = f.read()
    old, new = "/fc1/MatMul_output_0@1, axis=2)", "/fc1/MatMul_output_0@1, axis=1)"
    at = text.find(old)
    if at < 0:
        die(f"{rel} records no '{old}' to edit:\n{text}")
    line = text.count("\n", 0, at) + 1
    with open(rel, "w") as f:
        f.write(text[:at] + new + text[at + len(old):])
    return rel, line


def prepare_unsupported_op(tmp):
    """mlp_tp2 with rank graphs that hold an operator shardproof does not model."""
    d = os.path.join(tmp, "unknown_op")
    os.makedirs(d)
    for m in ("mlp_ref.onnx", "mlp_unknown_op_rank0.onnx", "mlp_unknown_op_rank1.onnx"):
        shutil.copy(os.path.join(ROOT, EXAMPLES, m), d)
    with open(os.path.join(ROOT, EXAMPLES, "mlp_tp2.yaml")) as f:
        text = f.read()
    spec = os.path.join(d, "mlp_unknown_op.yaml")
    with open(spec, "w") as f:
        f.write(text.replace("mlp_tp2_rank{r}", "mlp_unknown_op_rank{r}"))
    return spec


def prepare_captured(tmp):
    """A Megatron-style GPT-2 block whose row-parallel linear lacks its g,
    captured with the PyTorch package: its nodes carry Python lines."""
    out = os.path.join(tmp, "captured")
    spec = os.path.join(tmp, "captured.yaml")
    for cmd in ([os.path.join(ROOT, "tools", "shardproof-torch"), "export",
                 os.path.join(ROOT, "tests", "models", "megatron", "gpt2.py:gpt2_tp_missing_g"),
                 "--world-size", "2", "--out", out, "-q"],
                [sys.argv[1], "init", os.path.join(out, "reference.onnx"), "--ranks",
                 os.path.join(out, "rank{r}.onnx"), "--world-size", "2", "-o", spec]):
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            die(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stdout}{r.stderr}")
    return spec


def prepare_spaced_path(tmp):
    """A REFUTED spec in a directory whose name is no URI as it stands: the
    log must carry it percent-encoded (uri-reference)."""
    d = os.path.join(tmp, "a dir with space")
    os.makedirs(d)
    for m in ("mlp_no_allreduce.yaml", "mlp_ref.onnx", "mlp_no_allreduce_rank0.onnx", "mlp_no_allreduce_rank1.onnx"):
        shutil.copy(os.path.join(ROOT, EXAMPLES, m), d)
    return os.path.join(d, "mlp_no_allreduce.yaml")


def main():
    if len(sys.argv) != 2:
        die("usage: validate_sarif.py SHARDPROOF_BINARY")
    binary = os.path.abspath(sys.argv[1])
    if not os.access(binary, os.X_OK):
        die(f"{binary} is not an executable")
    validator, validator_name = load_validator()

    failures = 0
    with tempfile.TemporaryDirectory(prefix="shardproof-sarif-") as tmp:
        rel, rel_line = prepare_changed_relation(binary, tmp)
        cases = [
            dict(name="verified", args=[f"{EXAMPLES}/mlp_tp2.yaml"], verdict="VERIFIED"),
            dict(name="refuted-mlp", args=["--witness", f"{EXAMPLES}/mlp_no_allreduce.yaml"], verdict="REFUTED"),
            dict(name="refuted-spaced-path", args=[prepare_spaced_path(tmp)], verdict="REFUTED"),
            dict(name="refuted-gpt", args=[f"{EXAMPLES}/gpt_no_attn_allreduce_tp2.yaml"], verdict="REFUTED"),
            dict(name="refuted-bug-classes", args=[f"{EXAMPLES}/pad_pool_leak.yaml"], verdict="REFUTED",
                 rules=["SP008", "SP009"]),
            dict(name="refuted-captured", args=[prepare_captured(tmp)], verdict="REFUTED", rules=["SP007"],
                 python="tests/models/megatron/tensor_parallel.py"),
            # Masked columns that are tiny, not zero: undecided, nothing shown wrong.
            dict(name="unknown-undecided", args=[f"{EXAMPLES}/pad_attn_finite.yaml"], verdict="UNKNOWN"),
            dict(name="unknown-unsupported-op", args=[prepare_unsupported_op(tmp)], verdict="UNKNOWN",
                 rules=["SP004"]),
            # No time at all: UNKNOWN before any failure, the bare verdict's result.
            dict(name="unknown-time-budget", args=["--time-budget", "0", f"{EXAMPLES}/mlp_tp2.yaml"],
                 verdict="UNKNOWN", rules=["SP005"]),
            dict(name="changed-relation", args=[f"{EXAMPLES}/mlp_tp2.yaml", "--relations", rel],
                 verdict="RELATIONS CHANGED", rules=["SP006"], changed_at=(rel, rel_line)),
        ]
        for case in cases:
            out = os.path.join(tmp, case["name"] + ".sarif")
            args = ["check", "--quiet"] + case["args"] + ["--sarif", out]
            err = run(binary, args, case["verdict"], case["name"])
            if err:
                print(f"FAIL {err}")
                failures += 1
                continue
            try:
                with open(out, encoding="utf-8") as f:
                    log = json.load(f)
            except (OSError, ValueError) as e:
                print(f"FAIL {case['name']}: {out} is no JSON: {e}")
                failures += 1
                continue
            problems = [f"schema: {e}" for e in schema_errors(validator, log)] + \
                       [f"content: {e}" for e in content_errors(log, case)]
            results = log.get("runs", [{}])[0].get("results", []) if isinstance(log, dict) else []
            summary = ", ".join(f"{r.get('ruleId')} {r.get('level')}" for r in results) or "no results"
            if problems:
                failures += 1
                print(f"FAIL {case['name']} (shardproof {' '.join(args)}): {len(problems)} violation(s)")
                for p in problems:
                    print(f"    {p}")
            else:
                print(f"ok   {case['name']}: {case['verdict']}, {summary}")
            if case["verdict"] == "REFUTED" and results and not problems:
                failures += alarm(validator, log)

    print(f"sarif_schema: {len(cases) - failures} passed, {failures} failed "
          f"({validator_name}, {os.path.relpath(SCHEMA, ROOT)})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
