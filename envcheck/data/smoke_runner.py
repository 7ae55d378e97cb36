"""envcheck smoke runner: a tiny fit per device, run by the target env's own python.

Standalone on purpose: it runs inside the env under test (Python >= 3.7), so it uses only
the standard library and the framework being tested, and never imports envcheck. It knows
no framework: each framework's backend is ``envcheck/frameworks/<name>/smoke.py``, which
this file loads by path (the backends import this file's helpers as ``envcheck_smoke``).
This file owns the device loop, the timing helpers, the report and the supervisor of a
multi-device check's processes, one per device ("ranks", see ``run_ranks``).

Input: one JSON job, as the first argument or on stdin:

    {"backend": "auto" | a framework's name, "devices": ["cpu:0", "gpu:0"],
     "logical_cpus": 0, "steps": 12, "batch": 32, "seed": 0, "multi_replica": true,
     "replica_devices": null, "per_device": true, "multi_timeout": 120,
     "frameworks": null, "level": 2}

replica_devices names the devices of the multi-replica check (default: all of devices);
per_device false skips the per-device fits (the multi-replica check then times its
one-device baseline itself). multi_timeout (seconds) bounds a multi-device check run as
processes (see below); the runner answers within it. "auto" picks the first framework
installed of ``frameworks`` (envcheck passes its registry's order; default: every backend
found, by name). level 3 adds measured figures (``smoke_figures.py``): per device, after its
fit, host<->device copy bandwidth, matmul throughput and (GPUs) allocating most of the free
memory, as the device result's "figures"; and the all-reduce bus bandwidth as the
multi-replica result's "figures". Level 2 (the default) leaves both keys out.

Output: one JSON document on the real stdout. While working, fd 1 points at stderr, so the
framework's own noise never mixes with the result. Progress lines start with MARK and go
to stderr: "imported" once the framework is set up, then "start DEVICE" and
"result {json}" per device (at level 3 then "figures {json}", once measured), and
"start multi-replica"; envcheck reads them to tell which
device a crash or a hang belongs to. Every error's traceback is written to stderr too, so
the whole story can be matched against envcheck's diagnosis catalogue (a multi-device
check's processes' stderr as well, each line tagged "[rank N]").

Exit codes: 0 every check passed, 1 a device or the multi-replica check failed,
2 the job was malformed, 3 the framework could not be imported or set up. (Run with
``--rank SPEC``, it is one process of a multi-device check: see ``rank_main``.)

Per device, whatever the backend: a small regression model (8 features -> 32 -> 1, Adam
0.01, MSE) is fitted for `steps` steps of `batch` samples of a fixed synthetic problem
(``make_data``); ms_per_step is the median of the steps after the first (which
traces/compiles); loss_first/loss_last are the mean squared error on the first training
batch before and after the fit, and must fall; placed_on is the device the trained weights
and the model's output really live on, and must be the one asked for.

Multi-replica: the same fit over several devices, with the global batch = batch x replicas,
each replica getting exactly batch samples; the loss must fall and the replicas' weights
agree after training (``multi_verdict``). scaling_efficiency is throughput_multi /
(replicas x throughput_single), with throughput in samples per second and
throughput_single measured on one device at the per-replica batch; since the global batch
is replicas x per-replica batch, it equals ms_single / ms_multi. 1.0 is perfect scaling;
CPU devices (logical devices or processes) share the same cores, so there it is far below
1 by design.
"""
import importlib.util
import json
import os
import re
import sys
import traceback
import types

MARK = "envcheck-smoke:"
DEVICE_RE = re.compile(r"^(cpu|gpu):(\d+)$")
FEATURES = 8
DEFAULTS = {"backend": "auto", "devices": ["cpu:0"], "logical_cpus": 0, "steps": 12,
            "batch": 32, "seed": 0, "multi_replica": False, "replica_devices": None,
            "per_device": True, "multi_timeout": 120.0, "frameworks": None, "level": 2}
# envcheck/frameworks/, beside this file's data/ folder: one folder per framework.
FRAMEWORKS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                          "frameworks")
KIT = "envcheck_smoke"  # the name the backends import this file by


def log(text):
    sys.stderr.write(MARK + " " + text + "\n")
    sys.stderr.flush()


def error_text(exc, lines=8):
    """Type, message and the last lines of the traceback: enough to match a diagnosis.
    The whole traceback goes to stderr."""
    full = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    sys.stderr.write(full)
    sys.stderr.flush()
    tail = full.rstrip().splitlines()[-lines:]
    return "%s: %s\n%s" % (type(exc).__name__, exc, "\n".join(tail))


def read_job(argv):
    raw = argv[1] if len(argv) > 1 else sys.stdin.read()
    job = dict(DEFAULTS)
    given = json.loads(raw)
    if not isinstance(given, dict):
        raise ValueError("the job must be a JSON object")
    unknown = sorted(set(given) - set(DEFAULTS))
    if unknown:
        raise ValueError("unknown job keys: " + ", ".join(unknown))
    job.update(given)
    known = backends()
    if job["backend"] != "auto" and job["backend"] not in known:
        raise ValueError("backend must be auto or one of " + ", ".join(known))
    order = job["frameworks"]
    if order is not None and (not isinstance(order, list) or not set(order) <= set(known)):
        raise ValueError("frameworks must be a list of some of " + ", ".join(known))
    devices = job["devices"]
    if not devices or not all(isinstance(d, str) and DEVICE_RE.match(d.lower()) for d in devices):
        raise ValueError("devices must be a non-empty list like ['cpu:0', 'gpu:1']")
    job["devices"] = [d.lower() for d in devices]
    replicas = job["replica_devices"]
    if replicas is not None:
        if not isinstance(replicas, list) or not all(
                isinstance(d, str) and d.lower() in job["devices"] for d in replicas):
            raise ValueError("replica_devices must be a list of some of devices")
        job["replica_devices"] = [d.lower() for d in replicas]
    for key in ("logical_cpus", "steps", "batch", "seed"):
        if not isinstance(job[key], int) or job[key] < 0:
            raise ValueError(key + " must be a non-negative integer")
    if job["steps"] < 3 or job["batch"] < 1:
        raise ValueError("steps must be >= 3 and batch >= 1")
    if job["level"] not in (2, 3) or isinstance(job["level"], bool):
        raise ValueError("level must be 2 or 3")
    limit = job["multi_timeout"]
    if isinstance(limit, bool) or not isinstance(limit, (int, float)) or not 0 < limit < 1e6:
        raise ValueError("multi_timeout must be a number of seconds > 0")
    return job


# --- backends, loaded by path ------------------------------------------------------------

def backends():
    """The frameworks with a smoke backend, by name."""
    return sorted(name for name in os.listdir(FRAMEWORKS)
                  if os.path.isfile(os.path.join(FRAMEWORKS, name, "smoke.py")))


def load_file(path, name):
    """The module in the file ``path``, loaded once as ``name``."""
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[name]
            raise
    return sys.modules[name]


def load_backend(name):
    """The module ``frameworks/<name>/smoke.py``. It declares NEEDS (the import names that
    must be installed for "auto" to choose it) and ``start(job)``, which imports and sets up
    the framework and returns an object with build(), gpus_seen, run_device(device) and
    multi_replica(devices, baseline_ms); a backend whose multi-device check runs as ranks
    also has ``rank_fit(spec, say)`` (see ``rank_main``). The backends find this file's
    helpers as ``envcheck_smoke``, whatever name this file runs under."""
    return load_part(name, "smoke")


def load_part(name, part):
    """The module ``frameworks/<name>/<part>.py`` (``smoke``, ``preflight``), which finds this
    file's helpers as ``envcheck_smoke``."""
    if KIT not in sys.modules:
        kit = types.ModuleType(KIT)
        kit.__dict__.update((k, v) for k, v in globals().items() if not k.startswith("__"))
        sys.modules[KIT] = kit
    return load_file(os.path.join(FRAMEWORKS, name, part + ".py"),
                     "envcheck_smoke_" + name if part == "smoke" else "envcheck_%s_%s" % (part, name))


def installed(names):
    return all(importlib.util.find_spec(name) is not None for name in names)


def choose_backend(job):
    """The backend's module: the one asked for, or the first installed of ``frameworks``."""
    if job["backend"] != "auto":
        return load_backend(job["backend"])
    modules = [load_backend(name) for name in job["frameworks"] or backends()]
    for module in modules:
        if installed(module.NEEDS):
            return module
    raise ImportError("no framework found: none of %s is installed in %s"
                      % (", ".join(" with ".join(m.NEEDS) for m in modules), sys.prefix))


# --- helpers the backends share ----------------------------------------------------------

def load_ranks():
    """``smoke_ranks.py``, beside this file: the rank supervisor and the multi-replica verdict."""
    return load_file(os.path.join(os.path.dirname(os.path.abspath(__file__)), "smoke_ranks.py"),
                     "envcheck_smoke_ranks")


def load_figures():
    """``smoke_figures.py``, beside this file: level 3's measured figures."""
    return load_file(os.path.join(os.path.dirname(os.path.abspath(__file__)), "smoke_figures.py"),
                     "envcheck_smoke_figures")


def cpu_count_asked(job):
    """Logical CPU devices to create: as asked, and at least enough for the CPUs named."""
    named = [int(d.split(":")[1]) for d in job["devices"] if d.startswith("cpu:")]
    return max(job["logical_cpus"], max(named) + 1 if named else 0)


def make_data(seed, samples):
    """The seeded regression data every backend fits: numpy arrays, or, in an env without
    numpy (PyTorch doesn't need it), lists of rows from the standard library's generator."""
    try:
        import numpy as np
    except ImportError:
        import random

        rng = random.Random(seed)
        x = [[rng.gauss(0.0, 1.0) for _ in range(FEATURES)] for _ in range(samples)]
        w = [rng.gauss(0.0, 1.0) for _ in range(FEATURES)]
        y = [[sum(a * b for a, b in zip(row, w)) + 0.1 * rng.gauss(0.0, 1.0)] for row in x]
        return x, y
    rng = np.random.RandomState(seed)
    x = rng.normal(size=(samples, FEATURES)).astype("float32")
    w = rng.normal(size=(FEATURES, 1)).astype("float32")
    y = (x.dot(w) + 0.1 * rng.normal(size=(samples, 1))).astype("float32")
    return x, y


def median(values):
    values = sorted(values)
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2.0


def mse(predicted, y):
    return float(((predicted - y) ** 2).mean())


def normalise(kind, index):
    kind = kind.lower()
    return "%s:%d" % ("gpu" if kind in ("gpu", "cuda") else kind, int(index or 0))


def cpu_share():
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def rank_main(spec, out):
    """One process of ``run_ranks``: progress lines ("phase ...", "step N") and then
    "result {json}" on the file descriptor ``out``; 0 if it worked, 1 if not. The work is
    the spec's ``entry``, "PART:FUNCTION" of the framework's folder (default the backend's
    ``rank_fit(spec, say)``: it joins the process group, RANK, WORLD_SIZE and the rest in
    the environment, trains this rank's share and returns its facts)."""
    def say(text):
        os.write(out, (text + "\n").encode("utf-8"))

    die_with_parent(spec["parent"])
    rank = int(os.environ["RANK"])
    result = {"rank": rank, "device": spec["device"], "error": None}
    part, _, function = (spec.get("entry") or "smoke:rank_fit").partition(":")
    try:
        if spec.get("framework"):
            module = load_part(spec["framework"], part)
        else:
            module = next(m for m in map(load_backend, backends())
                          if hasattr(m, "rank_fit") and installed(m.NEEDS))
        result.update(getattr(module, function)(spec, say))
    except Exception as exc:
        result["error"] = error_text(exc)
    say("result " + json.dumps(result))
    return 1 if result["error"] else 0


def start(job):
    return choose_backend(job).start(job)


def run(job):
    """The result document and the exit code."""
    try:
        backend = start(job)
        build = backend.build()
        gpus_seen = backend.gpus_seen
    except BaseException as exc:  # a broken framework is a result, not a crash
        if isinstance(exc, KeyboardInterrupt):
            raise
        return {"error": error_text(exc), "build": {}, "gpus_seen": None, "devices": [],
                "multi_replica": None}, 3
    log("imported " + json.dumps({"build": build, "gpus_seen": gpus_seen}))
    results = []
    if job["per_device"]:
        for device in job["devices"]:
            log("start " + device)
            try:
                result = backend.run_device(device)
            except Exception as exc:
                result = {"device": device, "status": "fail", "ms_per_step": None,
                          "loss_first": None, "loss_last": None, "placed_on": None,
                          "error": error_text(exc)}
            log("result " + json.dumps(result))
            if job["level"] >= 3:
                result["figures"] = device_figures(backend, device, result)
                log("figures " + json.dumps({"device": device, "figures": result["figures"]}))
            results.append(result)
    multi = None
    replicas = job["replica_devices"] or job["devices"]
    if job["multi_replica"] and len(replicas) > 1:
        log("start multi-replica")
        multi = multi_replica(backend, replicas, job, results)
        if job["level"] >= 3 and "figures" not in multi:
            multi["figures"] = {"allreduce": _figures.allreduce(backend, replicas)
                                if multi["status"] == "pass" else _figures.skipped(
                                    "GB/s", "the multi-device check failed")}
    failed = any(r["status"] != "pass" for r in results) or (multi or {}).get("status") == "fail"
    return {"error": None, "build": build, "gpus_seen": gpus_seen, "devices": results,
            "multi_replica": multi}, 1 if failed else 0


def device_figures(backend, device, result):
    """Level 3: the device's measured figures, after its fit (only if it passed)."""
    if result["status"] != "pass":
        return None
    try:
        return _figures.measure(backend, device)
    except Exception as exc:
        return {"error": error_text(exc)}


def multi_replica(backend, devices, job, results):
    """The multi-replica check, with its one-device baseline from the per-device results."""
    try:
        timed = [r["ms_per_step"] for r in results
                 if r["device"] in devices and r["status"] == "pass"]
        if timed:
            baseline = median(timed)
        else:
            baseline = backend.run_device(devices[0])["ms_per_step"]
        return backend.multi_replica(devices, baseline)
    except Exception as exc:
        return {"status": "fail", "replicas": None, "per_replica_batch": None,
                "global_batch": None, "scaling_efficiency": None, "detail": error_text(exc)}


def main(argv):
    real_stdout = os.dup(1)
    os.dup2(2, 1)  # everything the framework prints goes to stderr
    if argv[1:2] == ["--rank"]:  # one process of a multi-device check
        code = rank_main(json.loads(argv[2]), real_stdout)
        sys.stderr.flush()
        os._exit(code)
    try:
        job = read_job(argv)
    except ValueError as exc:
        document, code = {"error": "bad job: %s" % exc}, 2
    else:
        document, code = run(job)
    sys.stdout.flush()
    sys.stderr.flush()
    os.write(real_stdout, (json.dumps(document) + "\n").encode("utf-8"))
    os.close(real_stdout)
    # Skip interpreter teardown: some frameworks crash or hang at exit after a good run.
    os._exit(code)


_ranks = load_ranks()
multi_verdict, run_ranks, ddp_verdict = _ranks.multi_verdict, _ranks.run_ranks, _ranks.ddp_verdict
die_with_parent = _ranks.die_with_parent
_figures = load_figures()
allreduce_in_rank, allreduce_figure = _figures.allreduce_in_rank, _figures.allreduce_figure
allreduce_bytes, nvml_memory = _figures.allreduce_bytes, _figures.nvml_memory

if __name__ == "__main__":
    main(sys.argv)
