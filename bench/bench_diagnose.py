#!/usr/bin/env python3
"""How fast and in how much memory `envcheck diagnose` reads a big log: against `grep -E` with the
same patterns (the floor) and against the implementation at an earlier revision, whole processes,
side by side in one run; and how many real failure lines it names with the right cause.

    python bench/bench_diagnose.py [--size-mb 200] [--runs 3] [--before REV]
    python bench/bench_diagnose.py --held-out      # recognition of the held-out lines only
    python bench/bench_diagnose.py --visible       # recognition of the lines developed against
    python bench/bench_diagnose.py --held-out --data bench/data/diagnose_lines_2.jsonl  # the second collection

Generates a SIZE MB training log (seeded: TensorFlow start-up and Keras progress bars redrawn
with \\r, PyTorch DDP and NCCL INFO lines, warnings, metrics), with one 300 KB line (a progress
bar that never got a newline, ending in a real failure) and five more real failure lines spread
through it; and a log a quarter of that size from the same generator, to show that time grows
linearly with size. Then, after one warm-up each, `--runs` interleaved rounds of:

- `envcheck diagnose LOG --json` on both logs;
- `grep -E -n -f PATTERNS LOG` on both: the catalogue's Python regexes translated to POSIX ERE
  (`(?:` to `(`, `\\d` to `[0-9]`, an inline `(?i)` to `[aA]` classes; GNU grep has `\\b`, `\\S`),
  run with LC_ALL=C as the fastest grep reads bytes;
- `wc -l LOG`: reading the file at all;
- with `--before REV`: `envcheck diagnose LOG --json` as the tree at git revision REV has it
  (its `envcheck/` package from `git archive`, first on PYTHONPATH), on both logs, in the same
  rounds: the time per byte after/before is the ratio of the two medians on the big log (issue 29's
  target: at most 1.5).

Wall time, and peak RSS of each process from /usr/bin/time. Hand patterns with look-arounds have
no ERE form and are left out of grep's set (grep is only the floor).

Targets (issue 10 point 19): time linear in size (the two sizes' ratio near 4), memory bounded
(peak RSS the same for both sizes, far below the log's size). Prints a markdown table and the
JSON document, which it also writes to bench/results/diagnose.json. Timing only, no assertions.
"""
from __future__ import annotations

import argparse
import compileall
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import envcheck_cmd, interleaved, machine, table

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
CATALOGUE = ROOT / "envcheck" / "data" / "catalogue.json"
LONG_LINE = 300_000

# (fraction of the log, a real failure line) — messages as the entries' linked threads quote them
FAILURES = [
    (0.2, "2019-07-21 23:23:06.228049: E tensorflow/stream_executor/cuda/cuda_driver.cc:828] failed to "
          "allocate 32.00M (33554432 bytes) from device: CUDA_ERROR_OUT_OF_MEMORY: out of memory"),
    (0.4, "2021-08-31 15:14:17.616013: W tensorflow/core/framework/op_kernel.cc:1767] OP_REQUIRES failed "
          "at nccl_ops.cc:104 : Internal: NCCL: unhandled system error. Set NCCL_DEBUG=WARN for detail."),
    (0.6, "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.69 GiB (GPU 0; 14.56 GiB "
          "total capacity; 649.97 MiB already allocated; 1.31 GiB free; 1.01 GiB reserved in total by "
          "PyTorch)"),
    (0.8, "RuntimeError: NCCL error in: /pytorch/torch/lib/c10d/ProcessGroupNCCL.cpp:911, unhandled cuda "
          "error, NCCL version 2.7.8"),
    (0.99, "/usr/lib/python3/site-packages/torch/cuda/__init__.py:52: UserWarning: CUDA initialization: "
           "Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU and "
           "installed a driver from http://www.nvidia.com/Download/index.aspx"),
]
LONG_LINE_END = ("2023-04-06 12:44:35.571376: W tensorflow/core/framework/op_kernel.cc:1830] OP_REQUIRES "
                 "failed at conv_ops_fused_impl.h:625 : UNIMPLEMENTED: DNN library is not found.")


def _tf_start(r: random.Random) -> str:
    t = f"2026-03-01 10:{r.randrange(60):02d}:{r.randrange(60):02d}.{r.randrange(10**6):06d}"
    return "\n".join([
        f"{t}: I tensorflow/core/util/port.cc:113] oneDNN custom operations are on. You may see "
        "slightly different numerical results due to floating-point round-off errors from "
        "different computation orders.",
        f"{t}: I tensorflow/core/platform/cpu_feature_guard.cc:182] This TensorFlow binary is "
        "optimized to use available CPU instructions in performance-critical operations.",
        *(f"{t}: I tensorflow/core/common_runtime/gpu/gpu_device.cc:1929] Created device "
          f"/job:localhost/replica:0/task:0/device:GPU:{g} with 78911 MB memory:  -> device: {g}, name: "
          f"NVIDIA A100-SXM4-80GB, pci bus id: 0000:{0x3b + g:02x}:00.0, compute capability: 8.0"
          for g in range(4)),
        f"{t}: I external/local_xla/xla/stream_executor/cuda/cuda_dnn.cc:454] Loaded cuDNN version 8906",
    ])


def _keras_epoch(r: random.Random) -> str:
    loss = r.uniform(0.05, 0.9)
    updates = "\r".join(f"{s:4d}/1875 [{'=' * (s * 30 // 1875):<30}] - ETA: {r.randrange(60)}s - loss: "
                        f"{loss:.4f} - accuracy: {1 - loss / 3:.4f}" for s in range(1, 1876, 375))
    return f"Epoch {r.randrange(1, 101)}/100\n{updates}"


def _torch_step(r: random.Random) -> str:
    rank, step = r.randrange(8), r.randrange(100_000)
    return (f"[rank{rank}] epoch {step // 5000} | step {step}/500000 | loss {r.uniform(1, 4):.4f} | "
            f"lr {r.uniform(1e-5, 3e-4):.2e} | grad_norm {r.uniform(0.1, 2):.3f} | "
            f"{r.uniform(900, 1300):.1f} samples/s | mem {r.uniform(30, 70):.1f}GiB")


def _nccl(r: random.Random) -> str:
    host, rank = f"node-{r.randrange(32)}:{r.randrange(10**5)}:{r.randrange(10**5)}", r.randrange(8)
    return r.choice([
        f"{host} [{rank}] NCCL INFO Channel {r.randrange(32):02d}/32 :    0   1   2   3   4   5   6   7",
        f"{host} [{rank}] NCCL INFO Connected all rings",
        f"{host} [{rank}] NCCL INFO comm 0x55d4{r.randrange(16**6):06x} rank {rank} nranks 8 cudaDev "
        f"{rank} busId {r.randrange(16**5):05x} - Init COMPLETE",
        f"{host} [{rank}] NCCL INFO Using network IB",
    ])


def _other(r: random.Random) -> str:
    return r.choice([
        "/usr/lib/python3.10/site-packages/torch/utils/data/dataloader.py:558: UserWarning: This "
        "DataLoader will create 16 worker processes in total. Our suggested max number of worker in "
        "current system is 8, which is smaller than what this DataLoader is going to create.",
        json.dumps({"step": r.randrange(10**6), "loss": round(r.uniform(1, 4), 4),
                    "tokens_per_s": r.randrange(30_000, 50_000), "gpu_util": r.randrange(90, 100)}),
        f"INFO:root:checkpoint saved to /scratch/run-{r.randrange(1000)}/ckpt-{r.randrange(10**5)}.pt",
        "WARNING:tensorflow:Using a while_loop for converting RngReadAndSkip cause there is no "
        "registered converter for this op.",
    ])


def write_log(path: Path, size: int, seed: int = 7) -> None:
    """A realistic log of about ``size`` bytes with the failures above at their fractions."""
    r = random.Random(seed)
    makers = [_tf_start, _keras_epoch, _torch_step, _nccl, _other]
    weights = [1, 10, 40, 25, 10]
    pending = sorted([*FAILURES, (0.5, None)], key=lambda item: item[0])
    with path.open("w", encoding="utf-8", newline="\n") as fh:
        while fh.tell() < size:
            block = [maker(r) for maker in r.choices(makers, weights, k=2000)]
            fh.write("\n".join(block) + "\n")
            while pending and fh.tell() >= pending[0][0] * size:
                _, line = pending.pop(0)
                if line is None:  # the 300 KB line: a progress bar never ended by a newline
                    bar = "\r".join(f"{s}/99999 [>.............................] - ETA: 1:02:03 - loss: "
                                    f"{r.uniform(0, 1):.4f}" for s in range(LONG_LINE // 70))
                    line = bar + "\r" + LONG_LINE_END
                fh.write(line + "\n")


def to_ere(pattern: str) -> str:
    """A catalogue pattern as POSIX ERE for GNU grep (its `\\b`, `\\S` extensions kept)."""
    out, i, fold = [], 0, pattern.startswith("(?i)")
    pattern = pattern[4:] if fold else pattern
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            out.append("[0-9]" if pattern[i + 1] == "d" else pattern[i:i + 2])
            i += 2
        elif c == "[":
            j = i + 1 + (pattern[i + 1] == "^")
            j += pattern[j] == "]"
            while pattern[j] != "]":
                j += 2 if pattern[j] == "\\" else 1
            out.append(pattern[i:j + 1].replace("\\t", "\t").replace("\\d", "0-9"))
            i = j + 1
        elif pattern.startswith("(?:", i):
            out.append("(")
            i += 3
        else:
            out.append(f"[{c.lower()}{c.upper()}]" if fold and c.isalpha() else c)
            i += 1
    return "".join(out)


def measured(cmd: list[str], env: dict[str, str], rss: list[float], out: list[str] | None = None) -> float:
    """Wall ms of one whole process; its peak RSS (MiB) is appended to ``rss``, its stdout to
    ``out`` if given. /usr/bin/time reports the RSS: a child of this Python process would count
    this process's own peak as its floor (vfork shares the memory until exec)."""
    with tempfile.NamedTemporaryFile("r") as report:
        start = time.perf_counter()
        proc = subprocess.run(["/usr/bin/time", "-f", "%M", "-o", report.name, *cmd], env=env, text=True,
                              stdout=subprocess.PIPE if out is not None else subprocess.DEVNULL,
                              stderr=subprocess.PIPE)
        wall = (time.perf_counter() - start) * 1000
        if proc.returncode not in (0, 1):  # diagnose and grep: 1 means found / not found
            sys.exit(f"{' '.join(cmd)} failed with {proc.returncode}: {proc.stderr[-2000:]}")
        rss.append(int(report.read().split()[-1]) / 1024)
    if out is not None:
        out.append(proc.stdout)
    return wall


def before_tree(rev: str, tmp: Path) -> Path:
    """The ``envcheck/`` package at git revision ``rev``, unpacked under ``tmp``."""
    tree = tmp / "before"
    tree.mkdir()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "envcheck"], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    return tree


def recognition(held_out: bool, data: str) -> None:
    from diagnose_recognition import measure, table

    result = measure(held_out, Path(data))
    print(f"{result['file']}, {result['lines']}: {result['count']} lines from {result['threads']} threads\n")
    print(table(result))
    print()
    print(json.dumps(result, indent=2))
    RESULTS.mkdir(parents=True, exist_ok=True)
    name = f"diagnose_{Path(data).stem}_{'held_out' if held_out else 'visible'}.json"
    (RESULTS / name).write_text(json.dumps(result, indent=2) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=200)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--before", metavar="REV",
                        help="also run the implementation at this git revision, in the same rounds")
    parser.add_argument("--dir", default=None, help="where to write the logs (default: a temp dir)")
    side = parser.add_mutually_exclusive_group()
    side.add_argument("--held-out", action="store_true", help="measure recognition on the held-out lines only")
    side.add_argument("--visible", action="store_true", help="measure recognition on the development lines")
    parser.add_argument("--data", default=str(ROOT / "bench" / "data" / "diagnose_lines.jsonl"),
                        help="the collection of real lines to measure on (default: the first)")
    args = parser.parse_args()
    if args.held_out or args.visible:
        sys.path.insert(0, str(ROOT))
        recognition(args.held_out, args.data)
        return
    compileall.compile_dir(str(ROOT / "envcheck"), quiet=1)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "ENVCHECK_HOME")}
    grep_env = {**env, "LC_ALL": "C"}
    tmp = Path(tempfile.mkdtemp(prefix="envcheck-bench-diagnose-", dir=args.dir))
    try:
        size = args.size_mb * 1_000_000
        big, quarter = tmp / f"train-{args.size_mb}mb.log", tmp / f"train-{args.size_mb // 4}mb.log"
        start = time.perf_counter()
        write_log(big, size)
        write_log(quarter, size // 4)
        generated_s = time.perf_counter() - start
        patterns = tmp / "patterns.ere"
        catalogue = json.loads(CATALOGUE.read_text())
        patterns.write_text("".join(to_ere(p) + "\n" for e in catalogue["entries"] for p in e["patterns"]
                                    if not any(look in p for look in ("(?=", "(?!", "(?<"))))

        findings = json.loads(subprocess.run(envcheck_cmd() + ["diagnose", str(big), "--json"], env=env,
                                             capture_output=True, text=True).stdout)["findings"]
        grep_lines = subprocess.run(["grep", "-E", "-c", "-f", str(patterns), str(big)], env=grep_env,
                                    capture_output=True, text=True).stdout.strip()

        names = {"big": f"`envcheck diagnose` {args.size_mb} MB", "grep": f"`grep -E` {args.size_mb} MB",
                 "wc": f"`wc -l` {args.size_mb} MB", "quarter": f"`envcheck diagnose` {args.size_mb // 4} MB",
                 "grep_quarter": f"`grep -E` {args.size_mb // 4} MB"}
        commands = {
            names["big"]: (envcheck_cmd() + ["diagnose", str(big), "--json"], env),
            names["grep"]: (["grep", "-E", "-n", "-f", str(patterns), str(big)], grep_env),
            names["wc"]: (["wc", "-l", str(big)], grep_env),
            names["quarter"]: (envcheck_cmd() + ["diagnose", str(quarter), "--json"], env),
            names["grep_quarter"]: (["grep", "-E", "-n", "-f", str(patterns), str(quarter)], grep_env),
        }
        before_findings = None
        if args.before:
            before_env = {**env, "PYTHONPATH": str(before_tree(args.before, tmp))}
            before_cmd = [sys.executable, "-P", "-m", "envcheck", "diagnose"]  # -P: not this checkout's envcheck
            names["before"] = f"`envcheck diagnose` {args.size_mb} MB at {args.before[:12]}"
            names["before_quarter"] = f"`envcheck diagnose` {args.size_mb // 4} MB at {args.before[:12]}"
            commands[names["before"]] = (before_cmd + [str(big), "--json"], before_env)
            commands[names["before_quarter"]] = (before_cmd + [str(quarter), "--json"], before_env)
            before_findings = json.loads(subprocess.run(before_cmd + [str(big), "--json"], env=before_env,
                                                        capture_output=True, text=True).stdout)["findings"]
        load_before = os.getloadavg()[0]
        rss: dict[str, list[float]] = {name: [] for name in commands}
        times = interleaved({name: (lambda cmd=cmd, e=e, name=name: measured(cmd, e, rss[name]))
                             for name, (cmd, e) in commands.items()}, args.runs)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    median = {name: statistics.median(v) for name, v in times.items()}
    peak = {name: max(v) for name, v in rss.items()}
    result = {
        "schema": "envcheck.bench.diagnose/1",
        "machine": machine(loadavg_start=load_before),
        "command": "python bench/bench_diagnose.py " + " ".join(sys.argv[1:]),
        "log": {"bytes": size, "long_line_bytes": LONG_LINE, "failure_lines": len(FAILURES) + 1,
                "generated_s": round(generated_s, 1)},
        "envcheck_findings": [(f["id"], f["line_number"]) for f in findings],
        "grep_matching_lines": int(grep_lines or 0),
        "runs": args.runs,
        "ms": {name: [round(v, 1) for v in values] for name, values in times.items()},
        "median_ms": {name: round(v, 1) for name, v in median.items()},
        "peak_rss_mib": {name: round(v, 1) for name, v in peak.items()},
        "ratio_envcheck_over_grep": round(median[names["big"]] / median[names["grep"]], 2),
        "ratio_size_4x_time": round(median[names["big"]] / median[names["quarter"]], 2),
        "mb_per_s": round(args.size_mb / (median[names["big"]] / 1000), 1),
        "before": None if not args.before else {
            "rev": args.before, "findings": [(f["id"], f["line_number"]) for f in before_findings],
            "median_ms": round(median[names["before"]], 1),
            "ratio_time_per_byte_after_over_before": round(median[names["big"]] / median[names["before"]], 2),
            "ratio_time_per_byte_after_over_before_quarter": round(median[names["quarter"]] / median[names["before_quarter"]], 2)},
    }
    print(f"{result['machine']['node']}: {os.cpu_count()} CPUs, load avg {load_before:.2f} -> "
          f"{os.getloadavg()[0]:.2f}, {args.runs} rounds, interleaved, 1 warm-up each\n")
    print(table(times, names["grep"], "× grep -E",
                {"peak RSS MiB": {n: f"{v:.0f}" for n, v in peak.items()}}))
    print()
    print(json.dumps(result, indent=2))
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "diagnose.json").write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
