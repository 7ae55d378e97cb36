#!/usr/bin/env python3
"""How long the quick test suite takes, before and after a change, side by side in one run.

    python bench/bench_tests.py --before REV [--after REV] [--marks "not slow and not fleet"]
                                [--coverage] [--work DIR]

Each revision gets its own git worktree and its own fresh venv (``python3.11 -m venv``, then
``pip install -e '.[test]'``, as CI does), so the envcheck the tests start in subprocesses is
that revision's code, not whatever this checkout has installed. The venvs are kept under
``--work`` (default /tmp/envcheck-bench-tests) and reused while the revision is the same.
Then, one after the other on the same machine: ``python -m pytest -q -p no:cacheprovider -m
MARKS`` in each worktree, wall time of the whole process. ``--coverage`` runs each with
``coverage run`` instead, subprocesses included (a ``.pth`` hook in each venv and
``COVERAGE_PROCESS_START``), and prints each revision's line coverage of ``envcheck/``; its
times are not the suite's (coverage slows it) and are not reported.

Prints a markdown table and writes bench/results/tests.json (or tests_coverage.json), and each
run's whole pytest output to bench/results/tests-before.log and tests-after.log. Timing only, no
assertions; a failing suite is reported as such, naming the tests that failed.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from _common import machine

ROOT = Path(__file__).resolve().parent.parent
COVERAGE_PTH = ("import os; os.environ.get('COVERAGE_PROCESS_START') and "
                "__import__('coverage').process_startup()\n")


def sh(*cmd: str, cwd: Path | None = None, env: dict | None = None) -> str:
    return subprocess.run(cmd, cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout


def prepare(rev: str, work: Path, coverage: bool) -> tuple[str, Path, Path]:
    """(commit, worktree, venv python) for ``rev``, made once per commit."""
    commit = sh("git", "rev-parse", rev, cwd=ROOT).strip()
    tree = work / commit[:12]
    python = tree / ".bench-venv" / "bin" / "python"
    if not tree.exists():
        sh("git", "worktree", "add", "--detach", str(tree), commit, cwd=ROOT)
    if not python.exists():
        sh("python3.11", "-m", "venv", str(tree / ".bench-venv"))
        sh(str(python), "-m", "pip", "install", "-q", "-e", ".[test]", cwd=tree)
    if coverage:
        sh(str(python), "-m", "pip", "install", "-q", "coverage")
        site = sh(str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").strip()
        Path(site, "zz_coverage_subprocess.pth").write_text(COVERAGE_PTH)
        (tree / ".coveragerc-bench").write_text(
            f"[run]\nsource = {tree / 'envcheck'}\nparallel = true\n"
            f"data_file = {tree / '.coverage-bench'}\n")
    return commit, tree, python


def run_suite(tree: Path, python: Path, marks: str, coverage: bool, log: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env["PATH"] = f"{python.parent}:{env['PATH']}"
    cmd = [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", marks]
    if coverage:
        rc = tree / ".coveragerc-bench"
        for old in tree.glob(".coverage-bench*"):
            old.unlink()
        env["COVERAGE_PROCESS_START"] = str(rc)
        cmd = [str(python), "-m", "coverage", "run", f"--rcfile={rc}", *cmd[1:]]
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    log.write_text(proc.stdout + proc.stderr)
    last = (proc.stdout.strip().splitlines() or [""])[-1]
    failed = [line.split()[1] for line in proc.stdout.splitlines() if line.startswith(("FAILED ", "ERROR "))]
    result = {"seconds": round(seconds, 1), "exit": proc.returncode, "summary": last.strip("= "),
              "failed": failed}
    if coverage:
        rcfile = f"--rcfile={tree / '.coveragerc-bench'}"
        subprocess.run([str(python), "-m", "coverage", "combine", rcfile], cwd=tree, env=env,
                       capture_output=True)
        report = subprocess.run([str(python), "-m", "coverage", "report", rcfile], cwd=tree,
                                env=env, capture_output=True, text=True).stdout
        total = re.search(r"^TOTAL\s+(\d+)\s+(\d+)\s+(\d+)%", report, re.M)
        if total:
            statements, missed = int(total[1]), int(total[2])
            result["coverage"] = {"statements": statements, "missed": missed,
                                  "percent": round(100 * (statements - missed) / statements, 2)}
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", required=True)
    parser.add_argument("--after", default="HEAD")
    parser.add_argument("--marks", default="not slow and not fleet")
    parser.add_argument("--coverage", action="store_true")
    parser.add_argument("--work", type=Path, default=Path("/tmp/envcheck-bench-tests"))
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    (ROOT / "bench" / "results").mkdir(parents=True, exist_ok=True)
    sides = {name: prepare(rev, args.work, args.coverage)
             for name, rev in (("before", args.before), ("after", args.after))}
    results = {}
    for name, (commit, tree, python) in sides.items():
        print(f"running the suite at {name} ({commit[:9]}) ...", file=sys.stderr, flush=True)
        log = ROOT / "bench" / "results" / f"tests{'_coverage' if args.coverage else ''}-{name}.log"
        results[name] = {"commit": commit, **run_suite(tree, python, args.marks, args.coverage, log)}
    print(f"\n`pytest -m '{args.marks}'`" + (" under coverage" if args.coverage else "") + "\n")
    if args.coverage:
        print("| revision | tests | line coverage of envcheck/ |\n|---|---|---|")
        for name, r in results.items():
            cov = r.get("coverage") or {}
            print(f"| {name} {r['commit'][:9]} | {r['summary']} | {cov.get('percent')}% "
                  f"({cov.get('missed')} of {cov.get('statements')} statements missed) |")
    else:
        print("| revision | tests | wall time |\n|---|---|---|")
        for name, r in results.items():
            print(f"| {name} {r['commit'][:9]} | {r['summary']} | {r['seconds']:.0f} s |")
        for name, r in results.items():
            for test in r["failed"]:
                print(f"failed in {name}: {test}")
        ratio = results["after"]["seconds"] / results["before"]["seconds"]
        print(f"\nafter / before: {ratio:.2f}x (target <= 0.5x)")
    out = ROOT / "bench" / "results" / ("tests_coverage.json" if args.coverage else "tests.json")
    out.write_text(json.dumps({"machine": machine(), "marks": args.marks, **results}, indent=2) + "\n")


if __name__ == "__main__":
    main()
