"""`shardproof check --html` in a real browser: each page is loaded in headless
Chromium (Debian's /usr/bin/chromium) after its inline script ran, and the DOM
is held to the `--json` report of the same run: verdict, counts, outputs, the
failing module, the replay's numbers, the layers folded as identical, the
collectives of the rank graphs. A screenshot of each page is kept.

Run by ctest in the project venv: .venv/bin/python test_html.py SHARDPROOF_BINARY ARTIFACT_DIR
"""
import collections
import html.parser
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import onnx

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CHROMIUM = os.environ.get("SHARDPROOF_CHROMIUM", "/usr/bin/chromium")
BINARY = os.path.join(ROOT, "build", "shardproof")
ARTIFACTS = os.path.join(ROOT, "build", "test-artifacts", "html")
COLLECTIVES = {"AllReduce", "AllGather", "ReduceScatter", "AllToAll"}
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


class Element:
    def __init__(self, tag, attrs, parent):
        self.tag, self.attrs, self.parent = tag, dict(attrs), parent
        self.children = []  # Elements and strings

    def classes(self):
        return (self.attrs.get("class") or "").split()

    def text(self):
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    def iter(self):
        yield self
        for c in self.children:
            if isinstance(c, Element):
                yield from c.iter()

    def ancestors(self):
        p = self.parent
        while p is not None:
            yield p
            p = p.parent


class DomBuilder(html.parser.HTMLParser):
    """The serialized DOM Chromium dumps, back into a tree (every element is
    closed explicitly there, so a stack suffices)."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.root = Element("#document", {}, None)
        self.stack = [self.root]

    def handle_starttag(self, tag, attrs):
        e = Element(tag, attrs, self.stack[-1])
        self.stack[-1].children.append(e)
        if tag not in VOID:
            self.stack.append(e)

    def handle_startendtag(self, tag, attrs):
        self.stack[-1].children.append(Element(tag, attrs, self.stack[-1]))

    def handle_endtag(self, tag):
        for i in range(len(self.stack) - 1, 0, -1):
            if self.stack[i].tag == tag:
                del self.stack[i:]
                return

    def handle_data(self, data):
        self.stack[-1].children.append(data)


class Page:
    def __init__(self, dom):
        b = DomBuilder()
        b.feed(dom)
        b.close()
        self.root = b.root
        self.all = list(self.root.iter())

    def by_id(self, id_):
        found = [e for e in self.all if e.attrs.get("id") == id_]
        assert len(found) == 1, f"expected one element with id {id_!r}, found {len(found)}"
        return found[0]

    def has_id(self, id_):
        return any(e.attrs.get("id") == id_ for e in self.all)

    def select(self, tag=None, cls=None, **attrs):
        out = []
        for e in self.all:
            if tag and e.tag != tag:
                continue
            if cls and cls not in e.classes():
                continue
            if any(e.attrs.get(k.replace("_", "-")) != v for k, v in attrs.items()):
                continue
            out.append(e)
        return out

    def number(self, id_):
        return int(self.by_id(id_).text().strip())


def run(cmd, timeout=600):
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def chromium(args, url):
    with tempfile.TemporaryDirectory() as profile:
        r = run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                 "--user-data-dir=" + profile, *args, url], timeout=180)
    if r.returncode != 0:
        raise AssertionError(f"chromium {' '.join(args)} {url} failed ({r.returncode}):\n{r.stderr[-3000:]}")
    return r.stdout


def module_path(node_name):
    """ir::Node::modulePath: '/layers.0/mlp/fc2/MatMul' -> 'layers.0.mlp.fc2'."""
    if not node_name.startswith("/"):
        return ""
    return ".".join(node_name[1:].split("/")[:-1])


def rank_collectives(report):
    """Collective nodes of each rank graph, counted from the ONNX files."""
    per_rank = []
    for path in report["ranks"]:
        model = onnx.load(os.path.join(ROOT, path), load_external_data=False)
        per_rank.append([(module_path(n.name), n.op_type) for n in model.graph.node
                         if n.op_type in COLLECTIVES and n.domain in ("com.microsoft", "shardproof")])
    return per_rank


def layer_rows(rows, module):
    return [r for r in rows if r["module"] == module or r["module"].startswith(module + ".")]


def identical_layers(rows, stack):
    """Layer k of `stack` -> the first earlier layer whose rows equal its own
    once layer numbers are made relative: computed here independently of the
    page, from the JSON rows."""
    numbers = sorted({int(m.group(1)) for r in rows
                      for m in [re.match(re.escape(stack) + r"\.(\d+)(\.|$)", r["module"])] if m})
    seen, same = {}, {}

    def rel(s, k):
        return re.sub(r"(?<![\w])" + re.escape(stack.split(".")[-1]) + r"\.(\d+)(?!\w)",
                      lambda m: "%s.{%d}" % (stack.split(".")[-1], int(m.group(1)) - k), s)

    for k in numbers:
        mine = layer_rows(rows, f"{stack}.{k}")
        sig = tuple((r["module"][len(f"{stack}.{k}"):], r["op"], r["status"], rel(r["tensor"], k),
                     rel(r["relation"], k)) for r in mine)
        if sig in seen:
            same[k] = seen[sig]
        else:
            seen[sig] = k
    return numbers, same


class HtmlPages(unittest.TestCase):
    pages = {}

    @classmethod
    def setUpClass(cls):
        if not os.access(CHROMIUM, os.X_OK):
            raise AssertionError(f"{CHROMIUM} not found: the --html test needs Debian's chromium "
                                 "(tools/setup.sh installs it; or apt-get install --no-install-recommends chromium)")
        os.makedirs(ARTIFACTS, exist_ok=True)

    def load(self, name, fragment=""):
        """Runs check --html --json on the example once; returns (Page, report, raw html)."""
        key = (name, fragment)
        if key in self.pages:
            return self.pages[key]
        page_path = os.path.join(ARTIFACTS, name + ".html")
        json_path = os.path.join(ARTIFACTS, name + ".json")
        if (name, "") not in self.pages:
            r = run([BINARY, "check", "--quiet", f"specs/examples/{name}.yaml", "--html", page_path,
                     "--json", json_path])
            self.assertIn(r.returncode, (0, 1, 2), r.stdout + r.stderr)
            chromium(["--screenshot=" + os.path.join(ARTIFACTS, name + ".png"), "--window-size=1280,2000",
                      "--hide-scrollbars"], "file://" + page_path)
            self.assertGreater(os.path.getsize(os.path.join(ARTIFACTS, name + ".png")), 10000)
        with open(json_path) as f:
            report = json.load(f)
        with open(page_path, encoding="utf-8") as f:
            raw = f.read()
        dom = chromium(["--dump-dom"], "file://" + page_path + fragment)
        with open(os.path.join(ARTIFACTS, name + (".fragment" if fragment else "") + ".dom.html"), "w") as f:
            f.write(dom)
        self.pages[key] = (Page(dom), report, raw)
        return self.pages[key]

    # --- what every page must show ------------------------------------------
    def check_common(self, name):
        page, report, raw = self.load(name)
        rows = report["relations"]
        body = page.select("body")[0]
        self.assertEqual(body.attrs.get("data-script"), "ok", "the inline script did not run to its end")
        self.assertEqual(int(body.attrs["data-rows"]), len(rows))
        # The embedded data is the --json report of the same run.
        data = json.loads(page.by_id("shardproof-data").text())
        self.assertEqual(data["report"], report)

        verdict = page.by_id("verdict")
        self.assertEqual(verdict.text().strip(), report["verdict"])
        self.assertIn("v-" + report["verdict"].lower(), verdict.classes())
        self.assertEqual(" ".join(page.by_id("reason").text().split()), " ".join(report["reason"].split()))
        self.assertEqual(page.by_id("spec-path").text(), report["spec"])
        self.assertEqual(page.by_id("reference-path").text(), report["reference"])
        self.assertEqual([li.text() for li in page.by_id("rank-paths").children if isinstance(li, Element)],
                         report["ranks"])

        proven = sum(o["verdict"] == "VERIFIED" for o in report["outputs"])
        self.assertEqual(page.number("count-reference-nodes"), report["stats"]["reference_nodes"])
        self.assertEqual(page.number("count-relations"), len(rows))
        self.assertEqual(page.number("count-outputs-proven"), proven)
        self.assertEqual(page.number("count-outputs"), len(report["outputs"]))
        self.assertEqual(page.number("count-failures"), len(report["failures"]))
        by_status = collections.Counter(r["status"] for r in rows)
        root = page.select("details", cls="mod", data_module="")
        self.assertEqual(len(root), 1)
        for status in ("input", "matched", "view", "unmatched", "unsupported"):
            self.assertEqual(page.number("count-status-" + status), by_status[status], status)
            self.assertEqual(int(root[0].attrs["data-" + status]), by_status[status], status)
        # Rows drawn in the tree, plus those of layers folded as identical
        # (drawn when opened), are every row of the table.
        tree = page.by_id("tree")
        drawn = collections.Counter(e.attrs["data-status"] for e in tree.iter()
                                    if e.tag == "tr" and "data-status" in e.attrs)
        folded = collections.Counter()
        for d in page.select("details", cls="identical"):
            if "mod" in d.classes() and not any("identical" in a.classes() for a in d.ancestors()):
                for status in by_status:
                    folded[status] += int(d.attrs["data-" + status])
        self.assertEqual(drawn + folded, by_status)

        outs = page.by_id("outputs-table").iter()
        self.assertEqual([(e.attrs["data-tensor"], e.attrs["data-verdict"]) for e in outs if "data-tensor" in e.attrs],
                         [(o["tensor"], o["verdict"]) for o in report["outputs"]])

        self.assertEqual(len([e for e in page.all if "failure" in e.classes()]), len(report["failures"]))
        failing = {e.attrs["data-module"] for e in page.select("details", cls="failing")}
        # Failures at a reference node or module; a top-level node's is the root's.
        self.assertEqual(failing, {f["module"] for f in report["failures"] if f["module"] or f["node"]})

        # Collectives: as many as the rank graphs hold, each joining every rank.
        per_rank = rank_collectives(report)
        sites = sum(len(p) for p in per_rank)
        bars = sum(max(collections.Counter(m for m, _ in p)[mod] for p in per_rank)
                   for mod in {m for p in per_rank for m, _ in p})
        self.assertEqual(page.number("count-collective-sites"), sites)
        self.assertEqual(page.number("count-collective-bars"), bars)
        self.assertEqual(page.number("count-collectives"), bars)
        drawn_bars = page.select("g", cls="collective")
        self.assertEqual(len(drawn_bars), bars)
        self.assertEqual(len(page.select("circle", cls="site")), sites)
        self.assertEqual(len(data["collectives"]), sites)
        ops = collections.Counter(op for p in per_rank for _, op in p)
        for op, n in ops.items():
            self.assertEqual(sum(len(g.attrs["data-ranks"].split(",")) for g in drawn_bars
                                 if g.attrs["data-op"] == op), n, op)

        # No network: nothing is loaded from anywhere.
        for e in page.all:
            for attr in ("src", "href", "data", "srcset", "action"):
                v = (e.attrs.get(attr) or "").strip().lower()
                self.assertFalse(v.startswith(("http:", "https:", "//", "ftp:")), f"<{e.tag} {attr}={v}>")
            self.assertNotEqual(e.tag, "link", "a <link> element")
            self.assertFalse(e.tag == "script" and "src" in e.attrs, "a <script src>")
        stripped = raw.replace('xmlns="http://www.w3.org/2000/svg"', "")
        self.assertNotRegex(stripped, r"https?://|@import|url\(")
        return page, report

    def check_refuted(self, name):
        page, report = self.check_common(name)
        self.assertEqual(report["verdict"], "REFUTED")
        first = report["failures"][0]
        section = page.by_id("first-failure")
        self.assertEqual(section.attrs["data-module"], first["module"])
        self.assertIn(" ".join(first["message"].split()), " ".join(section.text().split()))
        near = [e.text() for e in section.iter() if e.tag == "li" and e.parent.attrs.get("class") == "near"]
        self.assertEqual(near, first["rank_nodes"])
        # The bug class the check showed (a missing reduction here), as in --json and --sarif.
        shown = [e.text() for e in section.iter() if e.tag == "code" and "bug-class" in e.classes()]
        self.assertEqual(shown, [first["bug_class"]] if "bug_class" in first else [])
        if first["module"] or first["node"]:
            node = page.select("details", cls="failing", data_module=first["module"])
            self.assertEqual(len(node), 1)
            self.assertEqual(node[0].attrs.get("data-first-failure"), "true")
            for d in [node[0], *node[0].ancestors()]:
                if d.tag == "details" and "mod" in d.classes():
                    self.assertIn("open", d.attrs, d.attrs["data-module"])
        # The replay's two numbers: the first counterexample execution confirmed.
        confirmed = [f["counterexample"] for f in report["failures"]
                     if f.get("counterexample", {}).get("replayed") and "expected_value" in f["counterexample"]]
        self.assertTrue(confirmed, "the example should have a counterexample confirmed by replay")
        for id_, key in (("replay-expected", "expected_value"), ("replay-actual", "actual_value")):
            e = page.by_id(id_)
            self.assertTrue(math.isclose(float(e.attrs["data-value"]), confirmed[0][key], rel_tol=1e-12), id_)
            self.assertEqual(e.text(), "%.6g" % confirmed[0][key])
            self.assertTrue(any(a is section for a in e.ancestors()), f"{id_} not in the first failure")
        return page, report

    # --- the examples -------------------------------------------------------
    def test_verified_mlp(self):
        page, report = self.check_common("mlp_tp2")
        self.assertEqual(report["verdict"], "VERIFIED")
        self.assertFalse(page.has_id("first-failure"))
        self.assertEqual(page.select("details", cls="failing"), [])
        self.assertEqual(page.select("details", cls="has-failing"), [])

    def test_refuted_mlp_no_allreduce(self):
        page, report = self.check_refuted("mlp_no_allreduce")
        self.assertEqual(report["failures"][0]["module"], "fc2")
        # fc2's rank graphs hold no collective at all: the bug shows as its absence.
        self.assertEqual(page.number("count-collective-sites"), 0)
        self.assertTrue(page.has_id("no-collectives"))

    def test_refuted_gpt_no_attn_allreduce(self):
        page, report = self.check_refuted("gpt_no_attn_allreduce_tp2")
        self.assertEqual(report["failures"][0]["module"], "attn.o_proj")
        groups = [g.attrs["data-unit"] for g in page.select("details", cls="coll-group")]
        self.assertNotIn("attn", groups)  # its all-reduce is missing
        self.assertIn("mlp", groups)

    def test_unknown_pad_attn_finite(self):
        page, report = self.check_common("pad_attn_finite")
        self.assertEqual(report["verdict"], "UNKNOWN")
        self.assertIn("What stopped the proof", page.by_id("first-failure").text())
        # '/Softmax' is a top-level node: its failure marks the root.
        self.assertEqual([d.attrs["data-module"] for d in page.select("details", cls="failing")], [""])

    def test_layers_folded(self):
        page, report = self.check_common("gpt_l4_tp2")
        self.assertEqual(report["verdict"], "VERIFIED")
        layers = page.select("details", cls="layer")
        self.assertEqual([int(d.attrs["data-layer"]) for d in layers], [0, 1, 2, 3])
        numbers, same = identical_layers(report["relations"], "blocks")
        self.assertTrue(same, "the example should have layers identical up to their number")
        for d in layers:
            k = int(d.attrs["data-layer"])
            summary = next(c for c in d.children if isinstance(c, Element) and c.tag == "summary")
            if k in same:
                self.assertIn("identical", d.classes())
                self.assertEqual(int(d.attrs["data-identical-to"]), same[k])
                self.assertIn(f"identical to layer {same[k]}, proven once", summary.text())
                self.assertNotIn("open", d.attrs)  # stays folded
            else:
                self.assertNotIn("identical", d.classes())
            # One line per layer with a status strip.
            self.assertTrue(any("strip" in e.classes() for e in summary.iter()))
        # Collective groups of identical layers are marked too.
        self.assertTrue(page.select("details", cls="identical", data_unit="blocks.2"))
        # Opening a folded layer (here by the URL) draws its rows from the data block.
        k = min(same)
        opened, _, _ = self.load("gpt_l4_tp2", f"#module=blocks.{k}")
        node = opened.select("details", cls="layer", data_module=f"blocks.{k}")[0]
        self.assertIn("open", node.attrs)
        lazy = [e for e in node.iter() if "lazy" in e.classes()][0]
        expected = layer_rows(report["relations"], f"blocks.{k}")
        self.assertEqual(int(lazy.attrs["data-filled"]), len(expected))
        shown = [(e.attrs["data-module"], e.attrs["data-status"]) for e in lazy.iter() if e.tag == "tr"
                 and "data-status" in e.attrs]
        self.assertEqual(shown, [(r["module"], r["status"]) for r in expected])

    def test_failing_layer_opened(self):
        page, report = self.check_refuted("llama_l3_no_allreduce_down2_tp2")
        first = report["failures"][0]["module"]
        self.assertTrue(first.startswith("layers.2."), first)
        for d in page.select("details", cls="layer"):
            self.assertEqual("open" in d.attrs, d.attrs["data-module"] == "layers.2", d.attrs["data-module"])
        self.assertIn("has-failing", page.select("details", cls="layer", data_module="layers.2")[0].classes())


if __name__ == "__main__":
    if len(sys.argv) > 1:
        BINARY = os.path.abspath(sys.argv.pop(1))
    if len(sys.argv) > 1:
        ARTIFACTS = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=2)
