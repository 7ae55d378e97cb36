"""envcheck smoke runner's supervisor of a multi-device check run as processes, one per device
("ranks"), and the verdict of any multi-replica check. Standard library only, Python >= 3.7:
``smoke_runner.py`` loads it by path inside the env's interpreter and starts each rank as
itself with ``--rank``.
"""
import json
import os
import re
import selectors
import signal
import socket
import subprocess
import sys
import time

RUNNER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "smoke_runner.py")


def multi_verdict(devices, replicas, per_replica, sizes, loss_first, loss_last,
                  disagree, ms, baseline_ms, problems=(), how=""):
    """A multi-replica check's result; ``problems`` found by the caller are kept, ``how`` (the
    strategy in words) starts the detail."""
    problems = list(problems)
    if replicas != len(devices):
        problems.append("%d replicas for %d devices" % (replicas, len(devices)))
    if sizes != [per_replica] * replicas:
        problems.append("replicas got batches of %s, expected %d each" % (sizes, per_replica))
    if not loss_last < loss_first:
        problems.append("loss did not fall (%.6g -> %.6g)" % (loss_first, loss_last))
    if disagree:
        problems.append("replicas disagree on weights " + ", ".join(disagree))
    if ms is None:
        problems.append("the fit ran fewer than 2 steps")
    efficiency = round(baseline_ms / ms, 3) if ms and baseline_ms else None
    throughput = round(per_replica * replicas * 1000.0 / ms, 1) if ms else None
    detail = ("replica batches %s; loss %.4g -> %.4g; ms/step %s (one device: %s); "
              "%s samples/s" % (sizes, loss_first, loss_last,
                                "%.2f" % ms if ms else "n/a",
                                "%.2f" % baseline_ms if baseline_ms else "n/a",
                                "%.1f" % throughput if throughput else "n/a"))
    if how:
        detail = how + "; " + detail
    if problems:
        detail = "; ".join(problems) + "; " + detail
    return {"status": "fail" if problems else "pass", "replicas": replicas,
            "per_replica_batch": per_replica, "global_batch": per_replica * replicas,
            "scaling_efficiency": efficiency, "ms_per_step": round(ms, 3) if ms else None,
            "samples_per_s": throughput, "detail": detail}



LOOPBACK = "127.0.0.1"
# Errors a rank raises because another rank is gone or stuck: effects, listed after causes.
PEER_ERRORS = re.compile(r"timed out|timeout|connection (closed|reset|refused)|closed by peer|"
                         r"broken pipe|DistStoreError|DistNetworkError", re.IGNORECASE)


class Rank(object):
    """One rank process: how far it got (its progress lines), its result, how it ended."""

    def __init__(self, rank, device, popen):
        self.rank, self.device, self.popen = rank, device, popen
        self.phase, self.level = "starting python", 0
        self.result = None
        self.code = None  # its exit status, once seen; None: still running when stopped
        self.pending = {"out": b"", "err": b""}

    def feed(self, stream, chunk):
        lines = (self.pending[stream] + chunk).split(b"\n")
        self.pending[stream] = lines.pop()
        for line in lines:
            self.line(stream, line.decode("utf-8", "replace"))

    def close(self, stream):
        if self.pending[stream]:
            self.feed(stream, b"\n")

    def line(self, stream, text):
        if stream == "err":  # its own stderr, tagged, into the runner's (for diagnosis)
            sys.stderr.write("[rank %d] %s\n" % (self.rank, text))
            return
        word, _, rest = text.partition(" ")
        if word == "result":
            try:
                self.result = json.loads(rest)
            except ValueError:
                self.result = None
        elif word in ("phase", "step"):
            self.phase = rest if word == "phase" else "step %s" % rest
            self.level += 1

    @property
    def answered(self):
        return self.code == 0 and bool(self.result) and not self.result.get("error")

    def story(self, waited):
        """(order, words): why it gave no result; causes order before effects."""
        where = "rank %d (%s)" % (self.rank, self.device)
        last = " (last: %s)" % self.phase
        if self.code is None:
            return (1, self.level, self.rank), "%s: no answer within %.0f s%s" % (
                where, waited, last)
        if self.code < 0:
            return (0, self.level, self.rank), "%s crashed with %s%s" % (
                where, signal_name(-self.code), last)
        error = (self.result or {}).get("error")
        if not error:
            return (0, self.level, self.rank), "%s exited with code %d without a result%s" % (
                where, self.code, last)
        first = error.splitlines()[0][:300]
        order = 2 if PEER_ERRORS.search(first) else 0
        return (order, self.level, self.rank), "%s exited with code %d: %s%s" % (
            where, self.code, first, last)


def signal_name(number):
    try:
        return signal.Signals(number).name
    except ValueError:
        return "signal %d" % number


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        return sock.getsockname()[1]


def run_ranks(devices, backend, job, threads, framework=None, entry=None, extra=None):
    """Start one process per device (this file with ``--rank``), the way a distributed
    launcher does (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR=127.0.0.1, MASTER_PORT a free
    port), each running ``rank_fit`` of the backend of ``framework`` (None: the first
    installed backend that has one; ``entry`` "PART:FUNCTION": that function of the
    framework's folder instead, given ``extra`` in its spec) over the process group
    ``backend``, and
    read their progress until all answered, one failed, or job["multi_timeout"] s passed
    (at level 3 each rank also times all-reduces after its fit: ``allreduce_in_rank``);
    then stop any still running. Their process group times out at 3/4 of that, so a rank
    waiting on a lost peer fails with its own error first. Returns the ranks and the seconds
    waited."""
    limit = float(job["multi_timeout"])
    spec = {"backend": backend, "steps": job.get("steps"), "batch": job.get("batch"),
            "seed": job.get("seed"), "threads": threads, "timeout": max(1.0, 0.75 * limit),
            "parent": os.getpid(), "framework": framework, "level": job.get("level", 2),
            "entry": entry}
    spec.update(extra or {})
    port = free_port()
    ranks = []
    selector = selectors.DefaultSelector()
    started = time.monotonic()
    try:
        for rank, device in enumerate(devices):
            env = dict(os.environ, MASTER_ADDR=LOOPBACK, MASTER_PORT=str(port), RANK=str(rank),
                       LOCAL_RANK=str(rank), WORLD_SIZE=str(len(devices)))
            if threads:
                env["OMP_NUM_THREADS"] = str(threads)
                if sys.platform.startswith("linux"):
                    env.setdefault("GLOO_SOCKET_IFNAME", "lo")
            popen = subprocess.Popen(
                [sys.executable, RUNNER, "--rank",
                 json.dumps(dict(spec, device=device))],
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
            ranks.append(Rank(rank, device, popen))
            selector.register(popen.stdout, selectors.EVENT_READ, (ranks[-1], "out"))
            selector.register(popen.stderr, selectors.EVENT_READ, (ranks[-1], "err"))
        watch(ranks, selector, started, limit)
    finally:
        waited = time.monotonic() - started
        for rank in ranks:
            if rank.code is None:
                rank.code = rank.popen.poll()
            if rank.code is None:
                rank.popen.kill()
        for rank in ranks:
            rank.popen.wait()
        drain(selector, time.monotonic() + 5.0)
    return ranks, waited


def watch(ranks, selector, started, limit):
    while True:
        for rank in ranks:
            if rank.code is None:
                rank.code = rank.popen.poll()
        if any(rank.code not in (None, 0) for rank in ranks):
            return
        if all(rank.code == 0 for rank in ranks) and not selector.get_map():
            return
        left = limit - (time.monotonic() - started)
        if left <= 0:
            return
        read_some(selector, min(left, 0.1))


def read_some(selector, timeout):
    for key, _ in selector.select(timeout):
        rank, stream = key.data
        chunk = os.read(key.fd, 65536)
        if chunk:
            rank.feed(stream, chunk)
        else:
            selector.unregister(key.fileobj)
            key.fileobj.close()
            rank.close(stream)


def drain(selector, until):
    """The rest of the ranks' output, once they have ended."""
    while selector.get_map() and time.monotonic() < until:
        read_some(selector, 0.1)
    for key in list(selector.get_map().values()):
        key.fileobj.close()
    selector.close()


def ddp_verdict(devices, ranks, waited, baseline_ms, job, how):
    if not all(rank.answered for rank in ranks):
        stories = sorted(rank.story(waited) for rank in ranks if not rank.answered)
        return {"status": "fail", "replicas": None, "per_replica_batch": None,
                "global_batch": None, "scaling_efficiency": None, "ms_per_step": None,
                "samples_per_s": None,
                "detail": "; ".join(words for _, words in stories) + "; " + how}
    results = [rank.result for rank in ranks]
    problems = ["rank %d ran on %s (weights on %s), not on %s"
                % (r["rank"], r["placed_on"], r["weights_on"], r["device"])
                for r in results if r["placed_on"] != r["device"] or r["weights_on"] != r["device"]]
    sizes = [r["sizes"][0] if len(set(r["sizes"])) == 1 else r["sizes"] for r in results]
    first = results[0]["weights"]
    disagree = [name for name in first
                if any(max(abs(a - b) for a, b in zip(first[name], r["weights"][name])) > 1e-5
                       for r in results[1:])]
    ms = max(r["ms_per_step"] for r in results)
    return multi_verdict(devices, len(ranks), job["batch"], sizes, results[0]["loss_first"],
                         results[0]["loss_last"], disagree, ms, baseline_ms, problems, how)


def die_with_parent(parent):
    """A rank ends with its runner, even one killed alone (Linux: PR_SET_PDEATHSIG)."""
    if sys.platform.startswith("linux"):
        import ctypes

        try:
            ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent:
        os._exit(1)
