"""envcheck smoke runner's level-3 figures: measured per device in the env's framework, timed
and reported here, whatever the framework. Standard library only, Python >= 3.7:
``smoke_runner.py`` loads it by path inside the env's interpreter (a job with "level": 3).

A backend that measures figures has ``figure_ops(device)``, returning an object with:

- ``host_memory``: the host memory its copies use, in words ("pinned (...)", "pageable (...)");
- ``copy_fns(nbytes)`` -> (h2d, d2h): each ``fn(reps)`` copies ``nbytes`` ``reps`` times
  host -> device (device -> host) and returns once the copies are done;
- ``matmul_support()`` -> {dtype: None, or why it is not measured} for "fp32", "fp16", "bf16";
- ``matmul_fn(n, dtype)`` -> ``fn(reps)``: ``reps`` n x n matmuls, returned once done (fp32
  without TF32);
- on a GPU, ``memory()`` -> {"free_bytes", "total_bytes", "limit_bytes" (the framework's own
  cap, or None), "source"}, ``allocate(nbytes)`` -> something holding ``nbytes`` of device
  memory, and ``release()``, called once the allocations are dropped.

And, for the multi-device check, ``allreduce_fn(devices, nbytes)`` -> ``fn(reps)``: ``reps``
all-reduces (sum) of ``nbytes`` per device (a backend whose multi-device check runs as
processes times it in each rank instead, see ``allreduce_figure``).

Level 3 times each figure as the fastest of a few batches (``timed``); the fleet's preflight
times the same operations as the median of several samples of at least 0.2 s each
(``sampled``, ``median_of``: a throttled or shared device shows over that long), each figure
function taking its clock.

Every figure is {"value", "unit", ...its facts, "error", "skipped"}: value None with "error"
(the measurement failed) or "skipped" (why it does not apply, e.g. memory on a CPU). No
expectation and no verdict here: envcheck's ``validation/figures.py`` judges them against
``gpu_expectations.json`` and the GPU model NVML reports.
"""
import ctypes
import math
import os
import time

GB = 1e9
MIB = 1 << 20
DTYPES = ("fp32", "fp16", "bf16")
# Sizes and time budgets: a CPU device adds about a second; a GPU a few seconds.
SIZES = {"cpu": {"copy_bytes": 32 * MIB, "matmul_n": 512, "allreduce_bytes": 8 * MIB,
                 "seconds": 0.15, "max_reps": 50},
         "gpu": {"copy_bytes": 256 * MIB, "matmul_n": 8192, "allreduce_bytes": 64 * MIB,
                 "seconds": 0.3, "max_reps": 200}}
MEMORY_FRACTION = 0.9   # of the free memory, allocated in MEMORY_CHUNKS chunks
MEMORY_CHUNKS = 16
MEMORY_CHUNKS_MIN = 1024  # a refused chunk is halved down to this fraction of the whole
BATCHES = 3  # timed batches per figure, the fastest counts
RANK_WARMUP, RANK_REPS = 2, 10  # all-reduces per rank of a multi-device check run as processes


def sampled(fn, min_seconds, samples, agree=None):
    """Preflight's timing, unlike ``timed``'s fastest batch: the median of ``samples`` timed
    samples, each ``reps`` calls sized to last at least ``min_seconds`` (a throttled or shared
    device shows over that long), after one untimed warm-up call and one timed call that
    sizes them. ``agree(seconds)`` (a collective's ranks) returns the slowest rank's figure,
    so every rank runs the same count and each sample counts its slowest rank. Returns
    (median seconds per call, reps, every sample's seconds per call)."""
    agree = agree or (lambda seconds: seconds)
    fn(1)
    started = time.perf_counter()
    fn(1)
    once = agree(max(time.perf_counter() - started, 1e-9))
    reps = max(1, int(math.ceil(min_seconds / once)))
    times = []
    for _ in range(samples):
        started = time.perf_counter()
        fn(reps)
        times.append(agree(time.perf_counter() - started) / reps)
    ordered = sorted(times)
    middle = len(ordered) // 2
    median = ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2.0
    return median, reps, times


def kind_of(device):
    return device.split(":")[0]


def figure(value, unit, **facts):
    facts.update(value=value, unit=unit)
    facts.setdefault("error", None)
    facts.setdefault("skipped", None)
    return facts


def failed(unit, exc):
    return figure(None, unit, error="%s: %s" % (type(exc).__name__, str(exc).splitlines()[0]
                                                 if str(exc) else ""))


def skipped(unit, why):
    return figure(None, unit, skipped=why)


def timed(fn, budget, max_reps):
    """(seconds per call, calls per batch): one untimed warm-up call (compiles, allocates),
    one timed call to size the batches, then BATCHES batches filling ``budget`` seconds
    together; the fastest batch counts (the others met a noisy neighbour or a cold cache)."""
    fn(1)
    started = time.perf_counter()
    fn(1)
    once = max(time.perf_counter() - started, 1e-9)
    reps = int(max(1, min(max_reps, budget / BATCHES // once)))
    best = None
    for _ in range(BATCHES):
        started = time.perf_counter()
        fn(reps)
        took = (time.perf_counter() - started) / reps
        best = took if best is None else min(best, took)
    return best, reps


def measure(backend, device):
    """Every figure of one device: {name: figure}."""
    kind = kind_of(device)
    size = SIZES[kind]
    hook = getattr(backend, "figure_ops", None)
    if hook is None:
        why = "this framework's backend measures no figures"
        return {name: skipped(unit, why) for name, unit in (
            ("copy_h2d", "GB/s"), ("copy_d2h", "GB/s"), ("matmul_fp32", "TFLOPS"),
            ("memory", "GB"))}
    ops = hook(device)
    figures = {}
    figures.update(copy_figures(ops, size))
    figures.update(matmul_figures(ops, size))
    if kind == "gpu":
        figures["memory"] = memory_figure(ops)
    else:
        figures["memory"] = skipped("GB", "a CPU device has no memory of its own to fill: "
                                          "the allocation figure is for GPUs")
    return figures


def fastest(size):
    """Level 3's clock: ``fn`` -> (seconds per call, facts), the fastest batch (``timed``)."""
    def clock(fn):
        seconds, reps = timed(fn, size["seconds"], size["max_reps"])
        return seconds, {"reps": reps}
    return clock


def median_of(min_seconds, samples, agree=None):
    """Preflight's clock: the median of ``samples`` samples of at least ``min_seconds`` each
    (``sampled``), every sample's figure kept."""
    def clock(fn):
        seconds, reps, times = sampled(fn, min_seconds, samples, agree)
        return seconds, {"reps": reps, "samples": [round(t, 9) for t in times],
                         "timing": "median of %d samples of >= %g s" % (samples, min_seconds)}
    return clock


def copy_figures(ops, size, clock=None, names=("copy_h2d", "copy_d2h")):
    """The copies' figures (``names``: both directions, or the one a CPU device has)."""
    clock = clock or fastest(size)
    nbytes = size["copy_bytes"]
    try:
        h2d, d2h = ops.copy_fns(nbytes)
    except Exception as exc:
        return {name: failed("GB/s", exc) for name in names}
    found = {}
    for name, fn in (("copy_h2d", h2d), ("copy_d2h", d2h)):
        if name not in names:
            continue
        try:
            seconds, facts = clock(fn)
            found[name] = figure(round(nbytes / seconds / GB, 3), "GB/s", bytes=nbytes,
                                 seconds=seconds, host_memory=ops.host_memory, **facts)
        except Exception as exc:
            found[name] = failed("GB/s", exc)
    return found


def matmul_figures(ops, size, clock=None):
    clock = clock or fastest(size)
    n = size["matmul_n"]
    found = {}
    try:
        support = ops.matmul_support()
    except Exception as exc:
        return {"matmul_fp32": failed("TFLOPS", exc)}
    for dtype in DTYPES:
        name = "matmul_" + dtype
        if support.get(dtype, "not measured by this backend"):
            found[name] = skipped("TFLOPS", support.get(dtype, "not measured by this backend"))
            continue
        try:
            seconds, facts = clock(ops.matmul_fn(n, dtype))
            found[name] = figure(round(2.0 * n ** 3 / seconds / 1e12, 4), "TFLOPS", n=n,
                                 dtype=dtype, seconds=seconds, **facts)
        except Exception as exc:
            found[name] = failed("TFLOPS", exc)
    return found


def memory_figure(ops):
    """Allocate MEMORY_FRACTION of the free memory (within the framework's own cap) in chunks,
    then let it all go: what was asked, what could be had. A chunk refused is asked again in
    halves, down to MEMORY_CHUNKS_MIN of the whole: an allocator whose free memory lies in
    pieces (XLA's, on a healthy H200, refused the 16th chunk of 5.9 GiB with 17 GB free) still
    gives it to a job's smaller tensors, so it counts as had."""
    try:
        ops.release()  # what the other figures left in the framework's cache counts as free
        seen = ops.memory()
    except Exception as exc:
        return failed("GB", exc)
    free, limit = seen["free_bytes"], seen.get("limit_bytes")
    room = min(free, limit) if limit is not None else free
    asked = int(MEMORY_FRACTION * max(room, 0))
    chunk = first = max(asked // MEMORY_CHUNKS, MIB)
    smallest = max(asked // MEMORY_CHUNKS_MIN, MIB)
    held, got, error, refused = [], 0, None, 0
    started = time.perf_counter()
    while got < asked:
        part = min(chunk, asked - got)
        try:
            held.append(ops.allocate(part))
        except Exception as exc:
            refused += 1
            error = "%s: %s" % (type(exc).__name__, (str(exc).splitlines() or [""])[0][:300])
            if part <= smallest:
                break
            chunk = max(part // 2, smallest)
            continue
        got += part
    if got >= asked:
        error = None  # every byte asked was had, some of it in smaller pieces
    seconds = time.perf_counter() - started
    del held[:]
    try:
        ops.release()
    except Exception:
        pass
    return figure(round(got / GB, 3), "GB", allocated_bytes=got, asked_bytes=asked,
                  free_bytes=free, total_bytes=seen.get("total_bytes"), limit_bytes=limit,
                  fraction=MEMORY_FRACTION, chunk_bytes=first, smallest_chunk_bytes=chunk,
                  refused=refused, seconds=round(seconds, 3),
                  source=seen.get("source"), error=error)


def busbw_figure(nbytes, seconds, world, reps, how, **facts):
    """nccl-tests' figures: algbw = bytes / time, busbw = algbw x 2(n-1)/n (GB/s)."""
    algbw = nbytes / seconds / GB
    return figure(round(algbw * 2.0 * (world - 1) / world, 3), "GB/s",
                  algbw=round(algbw, 3), bytes=nbytes, seconds=seconds, reps=reps,
                  devices=world, how=how, **facts)


def allreduce(backend, devices):
    """The all-reduce figure of a multi-device check run in this process."""
    size = SIZES["gpu" if any(kind_of(d) == "gpu" for d in devices) else "cpu"]
    hook = getattr(backend, "allreduce_fn", None)
    if hook is None:
        return skipped("GB/s", "this framework's backend measures no all-reduce")
    try:
        fn, how = hook(devices, size["allreduce_bytes"])
        seconds, reps = timed(fn, size["seconds"], size["max_reps"])
    except Exception as exc:
        return failed("GB/s", exc)
    return busbw_figure(size["allreduce_bytes"], seconds, len(devices), reps, how)


def allreduce_in_rank(run_one, sync, gpu):
    """Time all-reduces in one rank of a multi-device check run as processes: ``run_one()``
    starts one, ``sync()`` waits for the device. Every rank runs the same count (a collective
    needs all of them), so the count is fixed, not sized by time. Returns this rank's facts
    for ``allreduce_figure``."""
    size = SIZES["gpu" if gpu else "cpu"]
    for _ in range(RANK_WARMUP):
        run_one()
    sync()
    started = time.perf_counter()
    for _ in range(RANK_REPS):
        run_one()
    sync()
    seconds = (time.perf_counter() - started) / RANK_REPS
    return {"bytes": size["allreduce_bytes"], "seconds": seconds, "reps": RANK_REPS}


def allreduce_bytes(gpu):
    return SIZES["gpu" if gpu else "cpu"]["allreduce_bytes"]


def allreduce_figure(per_rank, how):
    """The figure from every rank's ``allreduce_in_rank`` facts (None: that rank has none):
    the slowest rank's time, as a collective ends when its last rank does."""
    if not per_rank or any(not r for r in per_rank):
        return skipped("GB/s", "not every rank timed its all-reduce")
    errors = [r["error"] for r in per_rank if r.get("error")]
    if errors:
        return figure(None, "GB/s", error=errors[0])
    slowest = max(r["seconds"] for r in per_rank)
    return busbw_figure(per_rank[0]["bytes"], slowest, len(per_rank), per_rank[0]["reps"],
                        how, seconds_per_rank=[r["seconds"] for r in per_rank])


def nvml_memory(index):
    """(free, total) bytes of the framework's GPU ``index`` read through NVML (ctypes), for a
    framework that reports no free memory: CUDA_VISIBLE_DEVICES (indices, in the PCI bus
    order envcheck sets, or UUIDs) maps it to NVML's GPU."""
    nvml = ctypes.CDLL("libnvidia-ml.so.1")
    visible = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
    handle = ctypes.c_void_p()
    if nvml.nvmlInit_v2() != 0:
        raise RuntimeError("nvmlInit failed")
    try:
        chosen = visible[index] if visible else str(index)
        if chosen.isdigit():
            code = nvml.nvmlDeviceGetHandleByIndex_v2(int(chosen), ctypes.byref(handle))
        else:
            code = nvml.nvmlDeviceGetHandleByUUID(chosen.encode(), ctypes.byref(handle))
        memory = (ctypes.c_ulonglong * 3)()  # nvmlMemory_t: total, free, used
        if code != 0 or nvml.nvmlDeviceGetMemoryInfo(handle, ctypes.byref(memory)) != 0:
            raise RuntimeError("NVML could not read GPU %s's memory (error %d)" % (chosen, code))
        return int(memory[1]), int(memory[0])
    finally:
        nvml.nvmlShutdown()
