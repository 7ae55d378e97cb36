#!/usr/bin/env python3
"""Interrupts never print a traceback (issue 18, point 2): the Ctrl-C test, and signal storms, N times.

  python bench/stress_ctrl_c.py test [--runs 50]
      runs tests/test_faults.py::test_ctrl_c_pressed_again_and_again_during_add_restores_the_env
      in a fresh pytest process each time and counts passes and failures.

  python bench/stress_ctrl_c.py storm [--runs 50] [--signal INT,TERM,HUP] [--seed N]
                                      [--commands add,create,provision,ranks,validate]
      each run picks a command and a signal, waits a random 0-1.5 s, then sends that signal
      every millisecond for a random 0-0.6 s, so signals land while the command works, in its
      clean-up, and during the interpreter's shutdown. A run passes when stderr holds no
      ``Traceback`` and no ``Exception ignored``, the exit status is one a signalled command
      may end with, and (for add and create) the env is as before and ``tmp/`` is empty.

      add       env add dl beta, from a find-links server that answers after a long pause
      create    env create, from the same server
      provision provision --preset tiny --no-smoke, from the same server
      ranks     run --nproc 2 -- python -c 'sleep' (the ranks' supervisor)
      validate  validate dl --no-smoke

Prints the counts and the stderr of each failure; stress only, not for CI.
"""
from __future__ import annotations

import argparse
import functools
import hashlib
import http.server
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

from _common import envcheck_cmd

REPO = Path(__file__).resolve().parent.parent
TEST = "tests/test_faults.py::test_ctrl_c_pressed_again_and_again_during_add_restores_the_env"
TINY = 'title = "tiny"\ndescription = "stress preset"\nkind = "cpu"\nframework = "tensorflow"\n' \
       'requires-python = ">=3.8"\npackages = ["alpha==1.0"]\n'
BAD_WORDS = ("Traceback", "Exception ignored")


def run_test(runs: int) -> int:
    failures = 0
    for number in range(1, runs + 1):
        proc = subprocess.run([sys.executable, "-m", "pytest", TEST, "-q", "-p", "no:cacheprovider"],
                              cwd=REPO, capture_output=True, text=True)
        if proc.returncode != 0:
            failures += 1
            print(f"run {number}: FAILED\n{proc.stdout[-3000:]}", flush=True)
    print(f"{TEST}: {runs - failures} passed, {failures} failed of {runs} runs")
    return 1 if failures else 0


# -- storms ----------------------------------------------------------------------------------

class _Slow(http.server.SimpleHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 (http.server's name)
        time.sleep(30)  # the installer waits here; the storm ends it long before
        super().do_GET()

    def log_message(self, *args):
        pass

    def handle(self):
        try:
            super().handle()
        except OSError:  # the installer was stopped mid-answer
            pass


def _wheels(folder: Path) -> None:
    sys.path.insert(0, str(REPO / "tests"))
    from wheelhouse import build_wheel

    build_wheel(folder, "alpha", "1.0")
    build_wheel(folder, "beta", "1.0", requires=["alpha>=1.0"])


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(path.rglob("*")):
        h.update(str(p.relative_to(path)).encode())
        h.update(os.readlink(p).encode() if p.is_symlink() else p.read_bytes() if p.is_file() else b"")
    return h.hexdigest()


class Storm:
    def __init__(self, root: Path):
        self.root = root
        self.wheels = root / "wheels"
        _wheels(self.wheels)
        handler = functools.partial(_Slow, directory=str(self.wheels))
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_port}/"
        self.home = root / "home"
        (self.home / "presets").mkdir(parents=True)
        (self.home / "presets" / "tiny.toml").write_text(TINY)
        done = self.envcheck("env", "create", "dl", "--preset", "tiny", "--no-index", "--find-links",
                             str(self.wheels))
        if done.returncode != 0:
            sys.exit(f"could not create the env: {done.stderr}")
        self.before = _digest(self.home / "envs" / "dl")

    def envcheck(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([*envcheck_cmd(), *args], capture_output=True, text=True, env=self.environ())

    def environ(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
        return {**env, "ENVCHECK_HOME": str(self.home)}

    def argv(self, command: str) -> list[str]:
        slow = ["--no-index", "--find-links", self.url]
        return {"add": ["env", "add", "dl", "beta", *slow],
                "create": ["env", "create", "other", "--preset", "tiny", *slow],
                "provision": ["provision", "--preset", "tiny", "--no-smoke", *slow],
                "ranks": ["run", "--env", "dl", "--nproc", "2", "--", "python", "-c",
                          "import time; time.sleep(30)"],
                "validate": ["validate", "dl", "--no-smoke"]}[command]

    def once(self, command: str, sig: signal.Signals, rng: random.Random) -> str | None:
        """One storm; None when it passed, else why not."""
        proc = subprocess.Popen([*envcheck_cmd(), *self.argv(command)], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=self.environ())
        time.sleep(rng.uniform(0.0, 1.5))
        deadline = time.monotonic() + rng.uniform(0.0, 0.6)
        sent = 0
        while proc.poll() is None and (time.monotonic() < deadline or not sent):
            proc.send_signal(sig)
            sent += 1
            time.sleep(0.001)
        try:
            out, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            return f"still running 60 s after the storm\n{err[-2000:]}"
        allowed = {130, 128 + sig, -sig} | ({0, 1} if command == "validate" else set())
        if any(word in err for word in BAD_WORDS) or proc.returncode not in allowed:
            return f"exit {proc.returncode} after {sent} signals\n{err[-3000:]}"
        return self.env_intact(command)

    def env_intact(self, command: str) -> str | None:
        listing = self.envcheck("env", "list", "--json")
        if any(word in listing.stderr for word in BAD_WORDS):
            return f"env list: {listing.stderr[-2000:]}"
        states = {e["name"]: e["state"] for e in json.loads(listing.stdout)["envs"]}
        digest = _digest(self.home / "envs" / "dl")
        if command == "validate":  # it may store its report in the env
            self.before = digest
        if states.get("dl") != "ready" or digest != self.before:
            return f"env dl changed: {states}"
        for name in set(states) - {"dl"}:  # what create or provision made: it goes, and must be whole
            self.envcheck("env", "remove", name, "--yes")
            if states[name] != "ready":
                return f"an interrupted {command} left env {name} {states[name]}"
        leftovers = sorted(os.listdir(self.home / "tmp")) if (self.home / "tmp").is_dir() else []
        return f"tmp/ holds {leftovers}" if leftovers else None


def run_storms(runs: int, signals: list[signal.Signals], commands: list[str], seed: int) -> int:
    rng = random.Random(seed)
    counts: Counter[tuple[str, str, bool]] = Counter()
    root = Path(tempfile.mkdtemp(prefix="envcheck-storm-"))
    try:
        storm = Storm(root)
        for number in range(1, runs + 1):
            command, sig = rng.choice(commands), rng.choice(signals)
            why = storm.once(command, sig, rng)
            counts[(command, sig.name, why is None)] += 1
            if why is not None:
                print(f"run {number} ({command}, {sig.name}): FAILED: {why}", flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    failed = sum(n for (_, _, ok), n in counts.items() if not ok)
    for command in commands:
        for sig in signals:
            ok, bad = counts[(command, sig.name, True)], counts[(command, sig.name, False)]
            if ok or bad:
                print(f"{command:9} {sig.name:7} {ok} passed, {bad} failed")
    print(f"storms: {runs - failed} passed, {failed} failed of {runs} runs (seed {seed})")
    return 1 if failed else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=("test", "storm"))
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--signal", default="INT,TERM,HUP", help="comma-separated: INT, TERM, HUP")
    parser.add_argument("--commands", default="add,create,provision,ranks,validate")
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args()
    if args.mode == "test":
        return run_test(args.runs)
    signals = [signal.Signals[f"SIG{name.strip().upper()}"] for name in args.signal.split(",")]
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    return run_storms(args.runs, signals, [c.strip() for c in args.commands.split(",")], seed)


if __name__ == "__main__":
    sys.exit(main())
