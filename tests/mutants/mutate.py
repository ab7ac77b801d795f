#!/usr/bin/env python3
"""Mutation suite: the soundness bar of shardproof.

Every shipped example expected to be VERIFIED (its header says `# VERDICT: VERIFIED`)
is mutated (operators.py), each mutant is checked by the real binary, and every
mutant must come out REFUTED, UNKNOWN or as unusable input (exit 3), never
VERIFIED, unless harmless.txt lists it with the reason it computes the same.

    .venv/bin/python tests/mutants/mutate.py --shardproof build/shardproof [--fast]
        [--jobs N] [--only FIXTURE] [--op OPERATOR] [--list] [--keep DIR]

Exit 0: no false VERIFIED and kill rate >= --min-kill-rate; 1: otherwise;
2: the suite itself cannot run (an unmutated fixture is not VERIFIED, ...).
See docs/soundness.md."""

import argparse
import collections
import concurrent.futures
import copy
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time

import onnx
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import graphs as G  # noqa: E402
import operators  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(HERE))
EXAMPLES = os.path.join(ROOT, "specs", "examples")
HARMLESS = os.path.join(HERE, "harmless.txt")
# Small graphs whose mutants all run in a few seconds: the ctest subset.
FAST = ["mlp_tp2", "mlp_slice_tp2", "vocab_tp2"]
VERDICTS = {0: "VERIFIED", 1: "REFUTED", 2: "UNKNOWN", 3: "BAD-INPUT", 4: "INTERNAL-ERROR"}


class Fixture:
    def __init__(self, name):
        self.name = name
        self.spec_path = os.path.join(EXAMPLES, name + ".yaml")
        with open(self.spec_path) as f:
            self.spec = yaml.safe_load(f)
        impl = self.spec["implementation"]
        self.P = int(impl["world_size"])
        ranks = impl["ranks"]
        if isinstance(ranks, str):
            ranks = [ranks.replace("{r}", str(r)) for r in range(self.P)]
        self.rank_paths = [os.path.join(EXAMPLES, p) for p in ranks]
        self.ref_path = os.path.join(EXAMPLES, self.spec["reference"])
        self.models = [onnx.load(p) for p in self.rank_paths]
        self.placed = [G.placed_names(self.spec, m.graph) for m in self.models]


class Ctx:
    """One mutant's copies: rank models (cloned on first touch), spec, rank paths."""

    def __init__(self, fx):
        self.fx = fx
        self.spec = copy.deepcopy(fx.spec)
        self.ranks = list(fx.rank_paths)
        self.models, self.editors = {}, {}

    def model(self, r):
        if r not in self.models:
            self.models[r] = G.clone(self.fx.models[r])
        return self.models[r]

    def editor(self, r):
        if r not in self.editors:
            self.editors[r] = G.Editor(self.model(r))
        return self.editors[r]

    def write(self, where):
        """The mutant as files: edited rank graphs and a spec naming every model
        by absolute path."""
        os.makedirs(where, exist_ok=True)
        for r, m in self.models.items():
            self.ranks[r] = os.path.join(where, "rank%d.onnx" % r)
            onnx.save(m, self.ranks[r])
        self.spec["reference"] = self.fx.ref_path
        self.spec["implementation"]["ranks"] = self.ranks
        spec = os.path.join(where, "spec.yaml")
        with open(spec, "w") as f:
            yaml.safe_dump(self.spec, f, sort_keys=False)
        return spec


def verified_fixtures():
    """The examples whose header says `# VERDICT: VERIFIED` (tests/unit/e2e/ExampleHeader.h)."""
    names = []
    for f in sorted(os.listdir(EXAMPLES)):
        if not f.endswith(".yaml") or f.endswith(".relations.yaml"):
            continue
        with open(os.path.join(EXAMPLES, f)) as spec:
            for line in spec:
                if not line.startswith("#"):
                    break
                if re.match(r"#\s*VERDICT:\s*VERIFIED\s*$", line):
                    names.append(f[:-len(".yaml")])
                    break
    return names


def load_harmless(path):
    """harmless.txt: `MUTANT_ID  reason`, one a line; # starts a comment."""
    out = {}
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                line = "" if line.lstrip().startswith("#") else line.strip()
                if line:
                    key, _, reason = line.partition(" ")
                    out[key] = reason.strip()
    return out


def generate(fx, cap, seed):
    """Every operator's mutants of one fixture; at most `cap` per operator,
    chosen by a seeded draw (the same mutants on every run)."""
    out = []
    for op in operators.OPERATORS:
        ms = list(op(fx))
        if cap and len(ms) > cap:
            rng = random.Random("%s:%s:%s" % (seed, fx.name, op.__name__))
            keep = sorted(rng.sample(range(len(ms)), cap))
            ms = [ms[i] for i in keep]
        out.extend(ms)
    return out


def run(binary, spec, timeout):
    t0 = time.monotonic()
    try:
        p = subprocess.run([binary, "check", spec], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=timeout, text=True)
        verdict = VERDICTS.get(p.returncode, "EXIT-%d" % p.returncode)
        out = p.stdout
    except subprocess.TimeoutExpired as e:
        verdict, out = "TIMEOUT", (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
    return verdict, time.monotonic() - t0, out


def first_line(out, verdict):
    """The report line that explains the verdict (for the per-mutant line)."""
    for line in out.splitlines():
        if verdict in line or "error" in line.lower():
            return line.strip()[:140]
    return ""


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shardproof", default=os.path.join(ROOT, "build", "shardproof"))
    ap.add_argument("--fast", action="store_true", help="only the small fixtures " + ", ".join(FAST))
    ap.add_argument("--only", action="append", default=[], help="fixture name (repeatable)")
    ap.add_argument("--op", action="append", default=[], help="operator name (repeatable)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--cap", type=int, default=None,
                    help="mutants per fixture and operator (default 2; --fast: 4; 0: all)")
    ap.add_argument("--seed", default="1")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per check (the unmutated fixtures get 3x)")
    ap.add_argument("--min-kill-rate", type=float, default=0.95,
                    help="share of non-harmless mutants that must not be VERIFIED, time out or crash")
    ap.add_argument("--min-refuted-rate", type=float, default=0.0,
                    help="share of non-harmless mutants that must be REFUTED (a regression floor)")
    ap.add_argument("--list", action="store_true", help="list the mutants, run nothing")
    ap.add_argument("--keep", help="write every mutant (spec, graphs, report) under this directory")
    ap.add_argument("--harmless", default=HARMLESS, help="the allowlist (default tests/mutants/harmless.txt)")
    ap.add_argument("--verbose", action="store_true", help="print each report's verdict line")
    args = ap.parse_args()
    cap = args.cap if args.cap is not None else (4 if args.fast else 2)

    names = verified_fixtures()
    if args.fast:
        names = [n for n in names if n in FAST]
    if args.only:
        unknown = set(args.only) - set(names)
        if unknown:
            sys.exit("mutate.py: not a VERIFIED fixture: " + ", ".join(sorted(unknown)))
        names = [n for n in names if n in args.only]
    known_ops = {op.__name__[3:].lower() for op in operators.OPERATORS}
    if set(o.lower() for o in args.op) - known_ops:
        sys.exit("mutate.py: operators are " + ", ".join(sorted(known_ops)))

    fixtures = [Fixture(n) for n in names]
    mutants = []
    for fx in fixtures:
        for m in generate(fx, cap, args.seed):
            if not args.op or m.op.lower() in [o.lower() for o in args.op]:
                mutants.append((fx, m))
    harmless = load_harmless(args.harmless)

    if args.list:
        for fx, m in mutants:
            print("%-60s %s" % (m.id, m.what))
        counts = collections.Counter(m.op for _, m in mutants)
        print("%d mutants over %d fixtures: %s" % (len(mutants), len(fixtures),
              ", ".join("%s %d" % kv for kv in sorted(counts.items()))))
        return 0

    if not os.access(args.shardproof, os.X_OK):
        sys.exit("mutate.py: no shardproof binary at %s (--shardproof)" % args.shardproof)
    work = args.keep or tempfile.mkdtemp(prefix="shardproof-mutants-")
    t_start = time.monotonic()

    # The unmutated fixtures first: if one is not VERIFIED the suite proves nothing.
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        base = pool.map(lambda fx: run(args.shardproof, fx.spec_path, 3 * args.timeout), fixtures)
        for fx, (verdict, secs, out) in zip(fixtures, base):
            if verdict != "VERIFIED":
                print(out)
                print("mutate.py: fixture %s is %s unmutated; expected VERIFIED" % (fx.name, verdict))
                return 2

    def one(job):
        k, (fx, m) = job
        where = os.path.join(work, "%04d_%s_%s" % (k, fx.name, m.op))
        ctx = Ctx(fx)
        m.apply(ctx)
        spec = ctx.write(where)
        verdict, secs, out = run(args.shardproof, spec, args.timeout)
        with open(os.path.join(where, "report.txt"), "w") as f:
            f.write("mutant %s: %s\n%s" % (m.id, m.what, out))
        return m, where, spec, verdict, secs, out

    results = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for m, where, spec, verdict, secs, out in pool.map(one, enumerate(mutants)):
            category = verdict
            if m.id in harmless:
                category = verdict + "-harmless"
            elif verdict == "VERIFIED":
                category = "FALSE-VERIFIED"
            results.append((m, where, spec, category, secs))
            line = "%-17s %6.2fs  %-20s %-18s %s" % (category, secs, m.fixture, m.op, m.loc)
            if args.verbose or category != "REFUTED":
                line += "   [%s] %s" % (m.what, first_line(out, verdict))
            print(line, flush=True)

    return summarise(results, harmless, args, time.monotonic() - t_start, work)


def summarise(results, harmless, args, wall, work):
    counts = collections.Counter(c for _, _, _, c, _ in results)
    total = len(results)
    refuted = counts["REFUTED"]
    # Harmless mutants (whatever their verdict) are neither kills nor misses.
    harmless_n = sum(v for c, v in counts.items() if c.endswith("-harmless"))
    judged = total - harmless_n
    killed = sum(counts[c] for c in ("REFUTED", "UNKNOWN", "BAD-INPUT"))
    kill_rate = killed / judged if judged else 1.0
    refuted_rate = refuted / judged if judged else 1.0
    print("\n== mutation suite summary ==")
    print("mutants           %d  (%d fixtures, %.1f s wall, %.1f s of checks, --jobs %d)" % (
        total, len({m.fixture for m, *_ in results}), wall, sum(r[4] for r in results), args.jobs))
    main = ("REFUTED", "UNKNOWN", "BAD-INPUT", "INTERNAL-ERROR", "TIMEOUT", "VERIFIED-harmless", "FALSE-VERIFIED")
    for c in main + tuple(sorted(set(counts) - set(main))):
        print("  %-17s %d" % (c, counts.get(c, 0)))
    per_op = collections.defaultdict(collections.Counter)
    for m, _, _, c, _ in results:
        per_op[m.op][c] += 1
    print("per operator:")
    for op, c in sorted(per_op.items()):
        print("  %-18s %s" % (op, ", ".join("%s %d" % kv for kv in sorted(c.items()))))
    print("kill rate (REFUTED, UNKNOWN or bad input; harmless excluded): %.1f%% (%d / %d; target %.0f%%)" % (
        100 * kill_rate, killed, judged, 100 * args.min_kill_rate))
    print("refuted rate (REFUTED; harmless excluded): %.1f%% (%d / %d; floor %.0f%%); REFUTED / all mutants %.1f%%" % (
        100 * refuted_rate, refuted, judged, 100 * args.min_refuted_rate, 100 * refuted / max(total, 1)))
    seen = {m.id for m, *_ in results}
    ok = True
    false = [(m, spec) for m, _, spec, c, _ in results if c == "FALSE-VERIFIED"]
    for m, spec in false:
        ok = False
        print("FALSE VERIFIED: %s (%s)\n  reproduce: %s check %s" % (m.id, m.what, args.shardproof, spec))
    for key in sorted(harmless):
        hit = [c for m, _, _, c, _ in results if m.id == key]
        if key in seen and hit and hit[0] != "VERIFIED-harmless":
            print("note: %s is listed harmless and came out %s" % (key, hit[0][:-len("-harmless")]))
    if kill_rate < args.min_kill_rate:
        ok = False
        print("FAIL: kill rate below target (timeouts or internal errors?)")
    if refuted_rate < args.min_refuted_rate:
        ok = False
        print("FAIL: refuted rate below its floor (counterexamples lost?)")
    if false or args.keep:
        print("mutants kept under %s" % work)
    else:
        shutil.rmtree(work, ignore_errors=True)
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
