#!/usr/bin/env python3
"""What reading the installer's output for progress costs (issue 13, live progress).

Two ways to run an installer-like child that prints LINES lines, side by side:

  direct   the child writes straight into the log file (how envcheck ran installers before)
  read     ``installers.run_logged``: the child writes into a pipe, envcheck copies each line
           to the log unbuffered and hands it to the uv output reader, which feeds a view

Both run under ``processes.started`` (the guard included), in alternating order, ``--repeat``
times; the table shows the medians and the ratio read / direct. A real install prints
hundreds to a few thousand lines (pip: ~5 per package; uv: ~1 per package), so the default
LINES (20000) is well past what any install prints.

    python bench/bench_progress.py [--lines 20000] [--repeat 7]

Writes bench/results/progress.json. Timing only, no assertions.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _common import machine

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from envcheck import processes  # noqa: E402
from envcheck.envs.install_output import reader  # noqa: E402
from envcheck.envs.installers import run_logged  # noqa: E402
from envcheck.progress import Progress  # noqa: E402

CHILD = ("import sys\nfor i in range(int(sys.argv[1])):\n"
         "    print('Downloading package-%d (1.5MiB)' % i if i % 10 == 0 else ' + package-%d==1.0' % i)\n")


class Counting(Progress):
    """A view that only counts what it hears (the cost of drawing is rich's, not measured here)."""

    def __init__(self):
        self.events = 0

    def phase(self, name: str) -> None:
        self.events += 1

    def step(self, detail: str) -> None:
        self.events += 1


def direct(cmd: list[str], log: Path) -> float:
    started = time.perf_counter()
    with open(log, "a", encoding="utf-8") as fh:
        with processes.started(cmd, env=processes.clean_environ(), stdout=fh,
                               stderr=processes.STDOUT) as child:
            child.wait()
    return time.perf_counter() - started


def read(cmd: list[str], log: Path) -> float:
    started = time.perf_counter()
    run_logged(cmd, log, processes.clean_environ(), reader("uv", Counting()))
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lines", type=int, default=20000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    cmd = [sys.executable, "-c", CHILD, str(args.lines)]
    times: dict[str, list[float]] = {"direct": [], "read": []}
    with tempfile.TemporaryDirectory() as tmp:
        for round_ in range(args.repeat + 1):  # round 0 warms the page cache, untimed
            order = [("direct", direct), ("read", read)]
            for name, method in order if round_ % 2 else reversed(order):
                elapsed = method(cmd, Path(tmp) / f"{name}-{round_}.log")
                if round_:
                    times[name].append(elapsed)
    medians = {name: statistics.median(values) for name, values in times.items()}
    result = {"lines": args.lines, "repeat": args.repeat, "median_s": medians,
              "ratio_read_over_direct": medians["read"] / medians["direct"], "machine": machine()}
    (HERE / "results").mkdir(exist_ok=True)
    (HERE / "results" / "progress.json").write_text(json.dumps(result, indent=2) + "\n")
    print(f"| method | median s ({args.lines} lines, {args.repeat} runs) |\n|---|---|")
    for name, value in medians.items():
        print(f"| {name} | {value:.3f} |")
    print(f"\nread / direct: {result['ratio_read_over_direct']:.2f}x")


if __name__ == "__main__":
    main()
