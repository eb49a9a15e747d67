#!/usr/bin/env python3
"""Mutation testing for graft: plant one small bug at a time and check that a test notices.

Each mutant in mutants.toml names a file, an exact snippet of it (found exactly once) and its
replacement, and the tests most likely to catch it. For every mutant the script

  1. applies the replacement in a scratch git worktree (never in your checkout),
  2. rebuilds that worktree's own release build incrementally (a mutant that does not compile
     is reported INVALID: fix the mutant, it says nothing about the tests),
  3. runs the mutant's listed tests first, then (unless --quick) the whole `meson test` suite,
     stopping at the first failure,
  4. restores the file,

and prints `CAUGHT by <test>` or `MISSED` per mutant, then the mutation score
(caught / (caught + missed)).

  tests/mutation/mutate.py --check             # every snippet found exactly once? (no build)
  tests/mutation/mutate.py --list              # the mutants, numbered
  tests/mutation/mutate.py --only 7 --quick    # one mutant, its listed tests only
  tests/mutation/mutate.py                     # the whole campaign (hours on 2 cores)

The scratch worktree defaults to /tmp/graft-mutation/tree (made with `git worktree add` at the
checkout's HEAD, so only committed code is mutated) and its build dir to <tree>/build-mutation,
configured once with --buildtype=release; later runs reuse both and rebuild incrementally.
See docs/mutation-testing.md.
"""
import argparse
import contextlib
import fcntl
import json
import os
import subprocess
import sys
import time
import tomllib
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
DEFAULT_LIST = HERE / "mutants.toml"
VERBOSE = 0  # --verbose N: lines of a catching test's output to show


class MutantError(Exception):
    pass


def load_mutants(path):
    with open(path, "rb") as f:
        data = tomllib.load(f)
    mutants = data.get("mutant", [])
    names = set()
    for i, m in enumerate(mutants, 1):
        for key in ("name", "file", "original", "replacement", "tests"):
            if key not in m:
                raise MutantError(f"mutant {i}: missing key '{key}'")
        if m["name"] in names:
            raise MutantError(f"mutant {i}: the name '{m['name']}' is used twice")
        names.add(m["name"])
        if m["original"] == m["replacement"]:
            raise MutantError(f"mutant {i} ({m['name']}): replacement equals the original")
        if not isinstance(m["tests"], list) or not m["tests"]:
            raise MutantError(f"mutant {i} ({m['name']}): 'tests' must be a non-empty list")
        m["index"] = i
    return mutants


def check_snippet(root, m):
    """The file's text, or MutantError when the snippet is missing or ambiguous."""
    path = Path(root) / m["file"]
    if not path.is_file():
        raise MutantError(f"{m['file']}: no such file")
    text = path.read_text(encoding="utf-8")
    n = text.count(m["original"])
    if n != 1:
        what = "not found" if n == 0 else f"found {n} times (ambiguous)"
        raise MutantError(f"{m['file']}: the original snippet is {what}")
    return text


def run(cmd, cwd=None, timeout=None, env=None):
    """(exit status, combined output); status 124 on timeout."""
    try:
        p = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, errors="replace", timeout=timeout, env=env)
        return p.returncode, p.stdout
    except subprocess.TimeoutExpired as e:
        out = e.stdout or ""
        if isinstance(out, bytes):
            out = out.decode(errors="replace")
        return 124, out


def git(*args, cwd=REPO, check=True):
    rc, out = run(["git", *args], cwd=cwd)
    if check and rc != 0:
        sys.exit(f"git {' '.join(args)} failed:\n{out}")
    return out.strip()


class Tree:
    """The scratch worktree and its build dir (or, with --in-place, this checkout and its
    build dir)."""

    def __init__(self, args):
        self.in_place = args.in_place
        if self.in_place:
            self.path = REPO
            self.build = Path(args.build).resolve() if args.build else REPO / "build"
        else:
            self.path = Path(args.worktree).resolve()
            self.build = (Path(args.build).resolve() if args.build
                          else self.path / "build-mutation")
        self.lock = args.build_lock
        self.rev = git("rev-parse", args.rev)
        self.held = False

    @contextlib.contextmanager
    def locked(self):
        """In place: hold the build lock from applying the mutant until it is restored, so that
        no other build on the machine compiles the mutated file."""
        if not (self.in_place and self.lock):
            yield
            return
        with open(self.lock, "a") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            self.held = True
            try:
                yield
            finally:
                self.held = False
                fcntl.flock(f, fcntl.LOCK_UN)

    def prepare(self):
        if self.in_place:
            if not (self.build / "build.ninja").exists():
                sys.exit(f"--in-place needs a configured build dir; {self.build} has none")
            return
        if not (self.path / ".git").exists():
            self.path.parent.mkdir(parents=True, exist_ok=True)
            print(f"creating worktree {self.path} at {self.rev[:12]}", flush=True)
            git("worktree", "add", "--detach", str(self.path), self.rev)
        else:  # an earlier campaign's tree: move it to the revision under test
            git("checkout", "--force", "--detach", self.rev, cwd=self.path)
        if not (self.build / "build.ninja").exists():
            print(f"configuring {self.build} (release)", flush=True)
            rc, out = run(["meson", "setup", str(self.build), "--buildtype=release"],
                          cwd=self.path)
            if rc != 0:
                sys.exit(f"meson setup failed:\n{out}")

    def ninja(self, targets, timeout):
        cmd = ["ninja", "-C", str(self.build), *targets]
        if self.lock and not self.held:
            cmd = ["flock", self.lock, *cmd]
        return run(cmd, timeout=timeout)

    def restore(self, rel, text):
        if self.in_place:  # the file's previous text, uncommitted edits included
            (self.path / rel).write_text(text, encoding="utf-8")
        else:
            git("checkout", "--", rel, cwd=self.path)


# The CLI smoke tests by their meson test name (tests/meson.build's cli_tests without extra args).
# test name -> the script under tests/tools and its arguments after the graft binary (paths
# relative to the tree), as tests/meson.build runs them.
CLI_SCRIPTS = {"cli": ("cli_smoke.sh",), "cli_json": ("cli_json.sh",),
               "cli_bert_abcnn": ("cli_smoke_bert_abcnn.sh",),
               "cli_predict": ("cli_smoke_predict.sh", "tests/fixtures/bert_hf")}


def parse_test(spec):
    """'test_nn:*safetensors*' -> ('test_nn', '*safetensors*'); 'cli' -> ('cli', None);
    'mpi2:test_dist:*Grad*' -> ('mpi2', 'test_dist:*Grad*') (the rest is a spec of its own)."""
    exe, _, flt = spec.partition(":")
    return exe, (flt or None)


def test_command(tree, spec):
    exe, flt = parse_test(spec)
    if exe in CLI_SCRIPTS:  # a CLI smoke test (tests/tools/*.sh, given the graft binary)
        script, *args = CLI_SCRIPTS[exe]
        return ["sh", str(tree.path / "tests/tools" / script), str(tree.build / "tools/graft"),
                *(str(tree.path / a) for a in args)]
    if exe == "isa":  # the CPU kernel copies (tests/ops/cpu_isa_levels.sh)
        return ["sh", str(tree.path / "tests/ops/cpu_isa_levels.sh"), str(tree.build / "tools/graft"),
                str(tree.build / "tests/test_graft"),
                str(tree.build / "libgraft.so.0.1.0")]
    if exe == "mpi2":  # the inner test on 2 MPI ranks (tests/nn/run_mpi.sh)
        return ["sh", str(tree.path / "tests/nn/run_mpi.sh")] + test_command(tree, flt)
    cmd = [str(tree.build / "tests" / exe)]
    if flt:
        cmd.append(f"-tc={flt}")
    return cmd


def test_targets(spec):
    exe, flt = parse_test(spec)
    if exe == "mpi2":
        return test_targets(flt)
    if exe == "isa":
        return ["tools/graft", "tests/test_graft"]
    return ["tools/graft"] if exe in CLI_SCRIPTS else [f"tests/{exe}"]


def env_for_tests():
    env = dict(os.environ)
    env.setdefault("POCL_MAX_PTHREAD_COUNT", "2")
    return env


def full_suite(tree, timeout):
    """The first failing meson test's name, or None when all pass."""
    rc, out = run(["meson", "test", "-C", str(tree.build), "--no-rebuild", "--maxfail", "1",
                   "--print-errorlogs"], cwd=tree.path, timeout=timeout, env=env_for_tests())
    if rc == 0:
        return None
    log = tree.build / "meson-logs" / "testlog.json"
    failed = []
    if log.exists():
        for line in log.read_text(errors="replace").splitlines():
            try:
                r = json.loads(line)
            except json.JSONDecodeError:
                continue
            if r.get("result") not in ("OK", "SKIP", "EXPECTEDFAIL"):
                failed.append(r.get("name", "?"))
    if rc == 124:
        return "meson test (timeout)"
    return "meson:" + (failed[0] if failed else f"exit {rc}")


def try_mutant(tree, m, quick, build_timeout, test_timeout):
    """('CAUGHT', by) | ('MISSED', '') | ('INVALID', why)."""
    with tree.locked():
        try:
            return apply_and_test(tree, m, quick, build_timeout, test_timeout)
        finally:
            if tree.in_place:  # no binary in the shared build dir keeps the mutant
                tree.ninja(sorted({x for t in m["tests"] for x in test_targets(t)}), build_timeout)


def apply_and_test(tree, m, quick, build_timeout, test_timeout):
    rel = m["file"]
    text = check_snippet(tree.path, m)
    (tree.path / rel).write_text(text.replace(m["original"], m["replacement"], 1),
                                 encoding="utf-8")
    try:
        targets = sorted({x for t in m["tests"] for x in test_targets(t)}) if quick else []
        rc, out = tree.ninja(targets, build_timeout)
        if rc != 0:
            errs = [l for l in out.splitlines() if "error" in l] or out.strip().splitlines()[-1:]
            first = errs[0][:200] if errs else "?"
            if not any(Path(rel).name in l for l in errs):
                # the failure is not in the mutated file: the tree itself does not build
                return "SKIPPED", f"build broken elsewhere: {first}"
            return "INVALID", first
        for spec in m["tests"]:
            rc, out = run(test_command(tree, spec), cwd=tree.build, timeout=test_timeout,
                          env=env_for_tests())
            if rc != 0:
                if VERBOSE:
                    print("\n".join(out.strip().splitlines()[-VERBOSE:]), flush=True)
                return "CAUGHT", spec + (" (timeout)" if rc == 124 else "")
        if not quick:
            by = full_suite(tree, test_timeout * 4)
            if by:
                return "CAUGHT", by
        return "MISSED", ""
    finally:
        tree.restore(rel, text)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mutants", default=str(DEFAULT_LIST), help="the mutant list (TOML)")
    ap.add_argument("--check", action="store_true",
                    help="validate the list against this checkout (no build) and exit")
    ap.add_argument("--list", action="store_true", help="print the numbered mutants and exit")
    ap.add_argument("--only", type=int, action="append", metavar="N",
                    help="run mutant N only (repeatable)")
    ap.add_argument("--from", dest="start", type=int, default=1, metavar="N",
                    help="start at mutant N")
    ap.add_argument("--quick", action="store_true",
                    help="run only each mutant's listed tests, not the whole suite")
    ap.add_argument("--worktree", default="/tmp/graft-mutation/tree")
    ap.add_argument("--build", default=None, help="build dir (default: <worktree>/build-mutation)")
    ap.add_argument("--rev", default="HEAD", help="the commit to mutate (default HEAD)")
    ap.add_argument("--build-lock", default=None, metavar="FILE",
                    help="run ninja under `flock FILE` (a machine shared with other builds)")
    ap.add_argument("--in-place", action="store_true",
                    help="mutate THIS checkout and build in ./build (or --build), listed tests "
                    "only (implies --quick); with --build-lock the lock is held from applying "
                    "each mutant until its file is restored. Only for files nobody else is "
                    "editing; use with --only")
    ap.add_argument("--build-timeout", type=int, default=3600)
    ap.add_argument("--test-timeout", type=int, default=900, help="seconds per test command")
    ap.add_argument("--json", default=None, metavar="FILE", help="also write results as JSON")
    ap.add_argument("--verbose", type=int, default=0, metavar="N",
                    help="show the last N lines of the output of the test that caught a mutant")
    args = ap.parse_args()
    global VERBOSE
    VERBOSE = args.verbose

    try:
        mutants = load_mutants(args.mutants)
    except (MutantError, tomllib.TOMLDecodeError) as e:
        sys.exit(f"{args.mutants}: {e}")

    if args.list:
        for m in mutants:
            print(f"{m['index']:3d}  {m['name']:<36} {m['file']:<34} {', '.join(m['tests'])}")
        return 0
    if args.check:
        bad = 0
        for m in mutants:
            try:
                check_snippet(REPO, m)
            except MutantError as e:
                bad += 1
                print(f"{m['index']:3d} {m['name']}: {e}")
        files = len({m["file"] for m in mutants})
        print(f"{len(mutants)} mutants in {files} files: "
              f"{len(mutants) - bad} ok, {bad} with a missing or ambiguous snippet")
        return 1 if bad else 0

    if args.in_place:
        args.quick = True
    chosen = [m for m in mutants
              if (not args.only or m["index"] in args.only) and m["index"] >= args.start]
    if not chosen:
        sys.exit("no mutant selected")
    tree = Tree(args)
    tree.prepare()
    if not tree.in_place:
        print("building the unmutated tree", flush=True)
        rc, out = tree.ninja([], args.build_timeout)
        if rc != 0:
            sys.exit(f"the unmutated tree does not build:\n{out[-4000:]}")
    results, counts = [], {"CAUGHT": 0, "MISSED": 0, "INVALID": 0, "SKIPPED": 0}
    for k, m in enumerate(chosen):
        if tree.in_place and tree.lock and k > 0:
            time.sleep(5)  # let other builds waiting on the shared lock take it in between
        t0 = time.monotonic()
        try:
            verdict, detail = try_mutant(tree, m, args.quick, args.build_timeout,
                                         args.test_timeout)
        except MutantError as e:
            verdict, detail = "INVALID", str(e)
        counts[verdict] += 1
        secs = time.monotonic() - t0
        line = {"CAUGHT": f"CAUGHT by {detail}", "MISSED": "MISSED",
                "INVALID": f"INVALID ({detail})", "SKIPPED": f"SKIPPED ({detail})"}[verdict]
        print(f"[{m['index']:3d}] {m['name']:<36} {line}   ({secs:.0f} s)", flush=True)
        results.append({"index": m["index"], "name": m["name"], "file": m["file"],
                        "verdict": verdict, "detail": detail, "seconds": round(secs, 1)})
    scored = counts["CAUGHT"] + counts["MISSED"]
    score = 100.0 * counts["CAUGHT"] / scored if scored else 0.0
    print(f"mutation score: {counts['CAUGHT']}/{scored} caught = {score:.1f}%"
          f"   ({counts['INVALID']} invalid, {counts['SKIPPED']} skipped"
          f"{', quick: listed tests only' if args.quick else ''})")
    missed = [r["name"] for r in results if r["verdict"] == "MISSED"]
    if missed:
        print("missed: " + ", ".join(missed))
    if args.json:
        Path(args.json).write_text(json.dumps({"score": score, "counts": counts,
                                               "results": results}, indent=2))
    return 0 if counts["MISSED"] == counts["INVALID"] == counts["SKIPPED"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
