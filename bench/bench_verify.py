#!/usr/bin/env python3
"""`envcheck env verify` of a TensorFlow env against a bare script doing the least such a
check can do (issue 21).

    python bench/bench_verify.py [--runs 9] [--preset tensorflow-cpu]

Makes a real env from the preset in a temporary home (the installer's cache warm or not:
untimed), then times, whole processes, interleaved after one warm-up each:

  verify     envcheck --home H env verify tf            (the default: sizes and times, hashing only
                                                          files whose times moved)
  bare       python bare.py SNAPSHOT                     (loads a JSON of {file: [size, ctime]} it
                                                          wrote at setup for every RECORD file, stats
                                                          each, compares: nothing else)
  hashes     envcheck --home H env verify tf --hashes   (every file hashed against its RECORD)

Target: verify / bare <= 1.5. Prints a table; raw samples to bench/results/verify.json.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import envcheck_cmd, interleaved, machine, wall_ms

HERE = Path(__file__).resolve().parent
TARGET = 1.5
BARE = """import json, os, sys
snapshot = json.load(open(sys.argv[1]))
bad = 0
for path, (size, ctime) in snapshot.items():
    try:
        st = os.lstat(path)
    except OSError:
        bad += 1
        continue
    if st.st_size != size or st.st_ctime_ns != ctime:
        bad += 1
print(len(snapshot), bad)
sys.exit(1 if bad else 0)
"""


def snapshot(env_dir: Path) -> dict[str, list[int]]:
    """{file: [size, ctime]} of every file a RECORD of the env lists (bytecode aside, as verify)."""
    out = {}
    for record in env_dir.glob("lib/python*/site-packages/*.dist-info/RECORD"):
        site = record.parent.parent
        with open(record, newline="", encoding="utf-8") as fh:
            for row in csv.reader(fh):
                if len(row) >= 2 and row[1].startswith("sha256=") and not row[0].endswith(".pyc"):
                    path = os.path.normpath(site / row[0])
                    st = os.lstat(path)
                    out[path] = [st.st_size, st.st_ctime_ns]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--preset", default="tensorflow-cpu")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="envcheck-bench-verify-"))
    try:
        home = scratch / "home"
        env = dict(os.environ)
        envcheck = [*envcheck_cmd(), "--home", str(home), "-q"]
        made = subprocess.run([*envcheck, "env", "create", "tf", "--preset", args.preset], env=env,
                              capture_output=True, text=True)
        if made.returncode != 0:
            sys.exit(made.stderr[-3000:])
        subprocess.run([*envcheck, "env", "verify", "tf"], env=env, check=True, capture_output=True)
        env_dir = home / "envs" / "tf"
        snap = scratch / "snapshot.json"
        snap.write_text(json.dumps(snapshot(env_dir)))
        bare = scratch / "bare.py"
        bare.write_text(BARE)
        files = sum(len(f) for _, _, f in os.walk(env_dir))
        timers = {"verify": lambda: wall_ms([*envcheck, "env", "verify", "tf"], env),
                  "bare": lambda: wall_ms([sys.executable, str(bare), str(snap)], env),
                  "hashes": lambda: wall_ms([*envcheck, "env", "verify", "tf", "--hashes"], env)}
        times = interleaved(timers, args.runs)
        med = {k: statistics.median(v) for k, v in times.items()}
        print(f"env of preset {args.preset}: {files} files, {len(json.loads(snap.read_text()))} recorded "
              f"(bytecode aside); {args.runs} rounds interleaved; load avg {os.getloadavg()[0]:.2f}\n")
        print("| command | median ms | min ms | max ms | x bare |\n|---|---:|---:|---:|---:|")
        for name, values in times.items():
            print(f"| {name} | {med[name]:.0f} | {min(values):.0f} | {max(values):.0f} | {med[name] / med['bare']:.2f} |")
        ratio = med["verify"] / med["bare"]
        print(f"\nverify / bare: {ratio:.2f}x (target <= {TARGET}x: {'met' if ratio <= TARGET else 'MISSED'}); "
              f"--hashes / bare: {med['hashes'] / med['bare']:.1f}x")
        (HERE / "results").mkdir(exist_ok=True)
        (HERE / "results" / "verify.json").write_text(json.dumps(
            {"machine": machine(), "preset": args.preset, "files": files, "times": times}, indent=2))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
