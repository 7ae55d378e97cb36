"""envcheck smoke runner: a tiny fit per device, run by the target env's own python.

Standalone on purpose: it runs inside the env under test (Python >= 3.7), so it uses only
the standard library and the framework being tested, and never imports envcheck.

Input: one JSON job, as the first argument or on stdin:

    {"backend": "tensorflow" | "jax" | "torch" | "auto", "devices": ["cpu:0", "gpu:0"],
     "logical_cpus": 0, "steps": 12, "batch": 32, "seed": 0, "multi_replica": true,
     "replica_devices": null, "per_device": true, "multi_timeout": 120}

replica_devices names the devices of the multi-replica check (default: all of devices);
per_device false skips the per-device fits (the multi-replica check then times its
one-device baseline itself). multi_timeout (seconds) bounds the PyTorch multi-device
check's processes (see below); the runner answers within it.

Backends: "tensorflow" (tf.keras), "torch" (native PyTorch, torch.nn), "jax" (Keras 3 on
JAX); "auto" picks the first installed of tensorflow, torch, keras with jax.

Output: one JSON document on the real stdout. While working, fd 1 points at stderr, so the
framework's own noise never mixes with the result. Progress lines start with MARK and go
to stderr: "imported" once the framework is set up, then "start DEVICE" and
"result {json}" per device, and "start multi-replica"; envcheck reads them to tell which
device a crash or a hang belongs to. Every error's traceback is written to stderr too, so
the whole story can be matched against envcheck's diagnosis catalogue (the PyTorch
multi-device check's processes' stderr as well, each line tagged "[rank N]").

Exit codes: 0 every check passed, 1 a device or the multi-replica check failed,
2 the job was malformed, 3 the framework could not be imported or set up. (Run with
``--rank SPEC``, it is one process of the PyTorch multi-device check: see ``rank_main``.)

Per device: memory growth is turned on before anything initialises, a Dense(32, relu) ->
Dense(1) model is fitted for `steps` steps of `batch` samples of a fixed synthetic
regression problem inside the device's scope; ms_per_step is the median of the steps after
the first (which traces/compiles); loss_first/loss_last are the mean squared error on the
first training batch before and after the fit, and must fall; placed_on is the device the
trained weights and the model's output really live on, and must be the one asked for.

PyTorch per device: Linear(8, 32) -> ReLU -> Linear(32, 1), Adam(0.01), MSE, the same data
and steps, timed per step (after torch.cuda.synchronize on a GPU); placed_on is read from
the output's and the weights' tensor.device (torch has one CPU device: cpu:N is reported
when the tensors are on it). On a GPU, first "cudnn" records torch.backends.cudnn's state
and version around a Conv2d forward and backward. After the fit every reference is dropped
and "memory" says whether the weights were freed; on a GPU also the bytes allocated before
the fit (after a tiny warm-up, so the CUDA libraries' lasting workspaces exist), at its
peak and after it (each after gc, freeing the cuBLAS workspaces and
torch.cuda.empty_cache(), as PyTorch's own leak check reads them): after must be back to
before.

Multi-replica (TensorFlow: MirroredStrategy; JAX: keras.distribution.DataParallel): the
same fit with the global batch = batch x replicas split across the devices
(drop_remainder), checking that every replica got exactly batch samples, that the loss
fell and that the replicas' weights agree after training. PyTorch: DistributedDataParallel
over N processes, one per device (gloo on CPUs, each with a share of the cores; nccl on
GPUs), each training on its own batch of the same size (the global batch is N x batch),
the processes started as this file in rank mode (see ``run_ranks``). scaling_efficiency is
throughput_multi / (replicas x throughput_single), with throughput in samples per second
and throughput_single measured on one device at the per-replica batch; since the global
batch is replicas x per-replica batch, it equals ms_single / ms_multi. 1.0 is perfect
scaling; CPU devices (logical devices or processes) share the same cores, so there it is
far below 1 by design.
"""
import gc
import importlib.util
import json
import os
import re
import selectors
import signal
import socket
import subprocess
import sys
import time
import traceback
import weakref

MARK = "envcheck-smoke:"
DEVICE_RE = re.compile(r"^(cpu|gpu):(\d+)$")
FEATURES = 8
DEFAULTS = {"backend": "auto", "devices": ["cpu:0"], "logical_cpus": 0, "steps": 12,
            "batch": 32, "seed": 0, "multi_replica": False, "replica_devices": None,
            "per_device": True, "multi_timeout": 120.0}


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
    if job["backend"] not in ("auto", "tensorflow", "jax", "torch"):
        raise ValueError("backend must be auto, tensorflow, jax or torch")
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
    limit = job["multi_timeout"]
    if isinstance(limit, bool) or not isinstance(limit, (int, float)) or not 0 < limit < 1e6:
        raise ValueError("multi_timeout must be a number of seconds > 0")
    return job


def choose_backend(asked):
    if asked != "auto":
        return asked
    for name in ("tensorflow", "torch"):
        if importlib.util.find_spec(name) is not None:
            return name
    if all(importlib.util.find_spec(name) is not None for name in ("keras", "jax")):
        return "jax"
    raise ImportError("no framework found: neither tensorflow, nor torch, nor keras with jax, "
                      "is installed in " + sys.prefix)


def cpu_count_asked(job):
    """Logical CPU devices to create: as asked, and at least enough for the CPUs named."""
    named = [int(d.split(":")[1]) for d in job["devices"] if d.startswith("cpu:")]
    return max(job["logical_cpus"], max(named) + 1 if named else 0)


def make_data(seed, samples):
    import numpy as np

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


class Backend(object):
    """The Keras fit shared by TensorFlow and Keras 3. Subclasses provide the framework's
    parts: build(), gpus_seen, check_visible(), scope(), numpy(), device_of(),
    multi_replica(). What run() needs of any backend (PyTorch's is not a Keras one): build(),
    gpus_seen, run_device(device) and multi_replica(devices, baseline_ms)."""

    name = ""

    def __init__(self, job):
        self.job = job
        self.keras = None

    def make_model(self):
        keras = self.keras
        if hasattr(keras.utils, "set_random_seed"):
            keras.utils.set_random_seed(self.job["seed"])
        model = keras.Sequential([
            keras.Input(shape=(FEATURES,)),
            keras.layers.Dense(32, activation="relu"),
            keras.layers.Dense(1),
        ])
        model.compile(optimizer=keras.optimizers.Adam(learning_rate=0.01), loss="mse")
        return model

    def timer(self):
        times = []
        keras = self.keras

        class StepTimer(keras.callbacks.Callback):
            def on_train_batch_begin(self, batch, logs=None):
                self.start = time.perf_counter()

            def on_train_batch_end(self, batch, logs=None):
                float((logs or {}).get("loss", 0.0))  # reading the loss waits for the step
                times.append(time.perf_counter() - self.start)

        return StepTimer(), times

    def fit(self, model, x, y, batch):
        callback, times = self.timer()
        model.fit(x, y, batch_size=batch, epochs=1, shuffle=False, verbose=0,
                  callbacks=[callback])
        if len(times) < 2:
            raise RuntimeError("the fit ran %d steps, expected %d" % (len(times), len(x) // batch))
        return median(times[1:]) * 1000.0

    def run_device(self, device):
        job = self.job
        x, y = make_data(job["seed"], job["steps"] * job["batch"])
        probe_x, probe_y = x[:job["batch"]], y[:job["batch"]]
        self.check_visible(device)
        with self.scope(device):
            model = self.make_model()
            loss_first = mse(self.numpy(model(probe_x)), probe_y)
            ms = self.fit(model, x, y, job["batch"])
            out = model(probe_x)
            loss_last = mse(self.numpy(out), probe_y)
        placed = self.device_of(out)
        weights = self.device_of(model.weights[0])
        result = {"device": device, "status": "pass", "ms_per_step": round(ms, 3),
                  "loss_first": loss_first, "loss_last": loss_last, "placed_on": placed,
                  "error": None}
        problems = []
        if not loss_last < loss_first:
            problems.append("loss did not fall (%.6g -> %.6g)" % (loss_first, loss_last))
        if placed != device or weights != device:
            problems.append("ran on %s (weights on %s), not on %s" % (placed, weights, device))
        if problems:
            result.update(status="fail", error="; ".join(problems))
        return result


def normalise(kind, index):
    kind = kind.lower()
    return "%s:%d" % ("gpu" if kind in ("gpu", "cuda") else kind, int(index or 0))


class TensorFlow(Backend):
    name = "tensorflow"

    def __init__(self, job):
        Backend.__init__(self, job)
        os.environ.setdefault("TF_FORCE_GPU_ALLOW_GROWTH", "true")
        os.environ["KERAS_BACKEND"] = "tensorflow"
        import tensorflow as tf

        self.tf = tf
        self.notes = []
        gpus = tf.config.list_physical_devices("GPU")
        for gpu in gpus:
            try:
                tf.config.experimental.set_memory_growth(gpu, True)
            except (RuntimeError, ValueError) as exc:
                self.notes.append("memory growth not set on %s: %s" % (gpu.name, exc))
        self.gpus_seen = len(gpus)
        logical = cpu_count_asked(job)
        if logical > 1:
            cpus = tf.config.list_physical_devices("CPU")
            tf.config.set_logical_device_configuration(
                cpus[0], [tf.config.LogicalDeviceConfiguration() for _ in range(logical)])
        self.keras = tf.keras

    def build(self):
        tf = self.tf
        info = dict(tf.sysconfig.get_build_info())
        keras = self.keras
        facts = {"framework": "tensorflow", "version": tf.__version__,
                 "is_cuda_build": bool(info.get("is_cuda_build", False)),
                 "cuda_version": info.get("cuda_version"),
                 "cudnn_version": info.get("cudnn_version"),
                 "cuda_compute_capabilities": info.get("cuda_compute_capabilities"),
                 "keras_version": getattr(keras, "__version__", None),
                 "keras_backend": keras.backend.backend()}
        if self.notes:
            facts["notes"] = self.notes
        return facts

    def check_visible(self, device):
        kind, index = device.split(":")
        seen = self.tf.config.list_logical_devices(kind.upper())
        if int(index) >= len(seen):
            raise RuntimeError("%s is not visible to tensorflow (it sees %d %s device(s))"
                               % (device, len(seen), kind.upper()))

    def scope(self, device):
        return self.tf.device("/" + device.upper())

    def numpy(self, tensor):
        return tensor.numpy()

    def device_of(self, thing):
        name = getattr(thing, "device", None)
        if not name and hasattr(thing, "value"):
            name = thing.value.device
        found = re.search(r"device:([A-Za-z]+):(\d+)", name or "")
        return normalise(found.group(1), found.group(2)) if found else (name or "unknown")

    def multi_replica(self, devices, baseline_ms):
        tf = self.tf
        job = self.job
        for device in devices:
            self.check_visible(device)
        names = ["/" + d.upper() for d in devices]
        cross = None
        if any(d.startswith("cpu:") for d in devices):
            cross = tf.distribute.ReductionToOneDevice()  # NCCL all-reduce needs GPUs
        strategy = tf.distribute.MirroredStrategy(devices=names, cross_device_ops=cross)
        replicas = strategy.num_replicas_in_sync
        per_replica = job["batch"]
        global_batch = per_replica * replicas
        x, y = make_data(job["seed"], job["steps"] * global_batch)
        data = tf.data.Dataset.from_tensor_slices((x, y)).batch(global_batch, drop_remainder=True)
        first = next(iter(strategy.experimental_distribute_dataset(data)))
        sizes = strategy.experimental_local_results(
            strategy.run(lambda a, b: tf.shape(a)[0], args=first))
        sizes = [int(s) for s in sizes]
        probe_x, probe_y = x[:global_batch], y[:global_batch]
        with strategy.scope():
            model = self.make_model()
            loss_first = mse(model.predict(probe_x, verbose=0), probe_y)
        callback, times = self.timer()
        model.fit(data, epochs=1, shuffle=False, verbose=0, callbacks=[callback])
        loss_last = mse(model.predict(probe_x, verbose=0), probe_y)
        disagree = []
        for weight in model.weights:
            variable = getattr(weight, "value", weight)
            copies = [c.numpy() for c in strategy.experimental_local_results(variable)]
            if len(copies) != replicas or any(abs(c - copies[0]).max() > 1e-5 for c in copies):
                disagree.append(weight.name)
        ms = median(times[1:]) * 1000.0 if len(times) > 1 else None
        return self.multi_verdict(devices, replicas, per_replica, sizes, loss_first, loss_last,
                                  disagree, ms, baseline_ms)

    @staticmethod
    def multi_verdict(devices, replicas, per_replica, sizes, loss_first, loss_last,
                      disagree, ms, baseline_ms, problems=(), how=""):
        """The check's result; ``problems`` found by the caller are kept, ``how`` (the
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


class KerasJax(Backend):
    """Keras 3 on JAX."""

    name = "jax"

    def __init__(self, job):
        Backend.__init__(self, job)
        os.environ["KERAS_BACKEND"] = "jax"
        os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # memory growth
        logical = cpu_count_asked(job)
        if logical > 1:
            flags = os.environ.get("XLA_FLAGS", "")
            os.environ["XLA_FLAGS"] = (
                flags + " --xla_force_host_platform_device_count=%d" % logical).strip()
        import jax
        import keras

        self.jax = jax
        self.keras = keras
        if keras.backend.backend() != "jax":
            raise ImportError("keras runs on %s, not jax" % keras.backend.backend())

    @property
    def gpus_seen(self):
        try:
            return len(self.jax.devices("gpu"))
        except RuntimeError:
            return 0

    def build(self):
        import jaxlib

        return {"framework": "jax", "version": self.jax.__version__,
                "keras_version": self.keras.__version__,
                "keras_backend": self.keras.backend.backend(),
                "jaxlib_version": getattr(jaxlib, "__version__", None),
                "default_backend": self.jax.default_backend()}

    def check_visible(self, device):
        kind, index = device.split(":")
        try:
            seen = len(self.jax.devices(kind))
        except RuntimeError:
            seen = 0
        if int(index) >= seen:
            raise RuntimeError("%s is not visible to jax (it sees %d %s device(s))"
                               % (device, seen, kind))

    def scope(self, device):
        return self.keras.device(device)

    def numpy(self, tensor):
        return self.keras.ops.convert_to_numpy(tensor)

    def device_of(self, thing):
        value = getattr(thing, "value", thing)
        found = sorted("%s:%d" % (d.platform, d.id) for d in value.devices())
        return ",".join(normalise(*f.split(":")) for f in found)

    def multi_replica(self, devices, baseline_ms):
        keras = self.keras
        job = self.job
        for device in devices:
            self.check_visible(device)
        distribution = keras.distribution.DataParallel(devices=devices)
        replicas = len(distribution.device_mesh.devices.flatten())
        per_replica = job["batch"]
        global_batch = per_replica * replicas
        x, y = make_data(job["seed"], job["steps"] * global_batch)
        probe_x, probe_y = x[:global_batch], y[:global_batch]
        keras.distribution.set_distribution(distribution)
        try:
            model = self.make_model()
            loss_first = mse(model.predict(probe_x, verbose=0), probe_y)
            callback, times = self.timer()
            model.fit(x, y, batch_size=global_batch, epochs=1, shuffle=False, verbose=0,
                      callbacks=[callback])
            loss_last = mse(model.predict(probe_x, verbose=0), probe_y)
            batch = keras.distribution.distribute_tensor(
                probe_x, distribution.get_data_layout(probe_x.shape))
            sizes = sorted(int(s.data.shape[0]) for s in batch.addressable_shards)
            disagree = []
            for weight in model.weights:
                shards = [self.numpy(s.data) for s in weight.value.addressable_shards]
                if len(shards) != replicas or any(abs(s - shards[0]).max() > 1e-5 for s in shards):
                    disagree.append(weight.name)
        finally:
            keras.distribution.set_distribution(None)
        ms = median(times[1:]) * 1000.0 if len(times) > 1 else None
        return TensorFlow.multi_verdict(devices, replicas, per_replica, sizes, loss_first,
                                        loss_last, disagree, ms, baseline_ms)


# --- PyTorch, native --------------------------------------------------------------------

class Torch(object):
    """Native PyTorch (torch.nn): the fit per device; the multi-replica check is
    DistributedDataParallel over one process per device (``run_ranks``)."""

    name = "torch"

    def __init__(self, job):
        import torch

        self.job = job
        self.torch = torch
        self.gpus_seen = torch.cuda.device_count()

    def build(self):
        torch = self.torch
        dist = torch.distributed
        cudnn = torch.backends.cudnn
        distributed = bool(dist.is_available())
        return {"framework": "torch", "version": torch.__version__,
                "cuda_version": torch.version.cuda,
                "cuda_available": torch.cuda.is_available(),
                "arch_list": torch.cuda.get_arch_list(),
                "cudnn_version": cudnn.version() if cudnn.is_available() else None,
                "distributed_available": distributed,
                "gloo_available": distributed and bool(dist.is_gloo_available()),
                "nccl_available": distributed and bool(dist.is_nccl_available())}

    def check_visible(self, device):
        kind, index = device.split(":")
        if kind == "gpu" and int(index) >= self.gpus_seen:
            raise RuntimeError("%s is not visible to torch (it sees %d CUDA device(s))"
                               % (device, self.gpus_seen))

    def run_device(self, device):
        torch = self.torch
        self.check_visible(device)
        target = torch_device(torch, device)
        gpu = target.type == "cuda"
        problems = []
        if gpu:
            torch.cuda.set_device(target)
            cudnn = exercise_cudnn(torch, target)
            if not cudnn["is_acceptable"]:
                problems.append("cuDNN is not used for convolutions (enabled %s, available %s)"
                                % (cudnn["enabled"], cudnn["available"]))
            warm_up(torch, target)
            baseline = settled_memory(torch, target)
            torch.cuda.reset_peak_memory_stats(target)
        result, weights = self.fit(device, target)
        if gpu:
            result["cudnn"] = cudnn
        gc.collect()
        memory = {"weights_freed": weights() is None}
        if gpu:
            after = settled_memory(torch, target)
            memory.update(baseline_bytes=baseline, after_bytes=after, returned=after <= baseline,
                          peak_bytes=torch.cuda.max_memory_allocated(target))
            if after > baseline:
                problems.append("%d bytes still allocated on %s after the fit (%d before)"
                                % (after, device, baseline))
        result["memory"] = memory
        if not memory["weights_freed"]:
            problems.append("the model's weights were not freed after the fit")
        if not result["loss_last"] < result["loss_first"]:
            problems.append("loss did not fall (%.6g -> %.6g)"
                            % (result["loss_first"], result["loss_last"]))
        weights_on = result.pop("weights_on")
        if result["placed_on"] != device or weights_on != device:
            problems.append("ran on %s (weights on %s), not on %s"
                            % (result["placed_on"], weights_on, device))
        if problems:
            result.update(status="fail", error="; ".join(problems))
        return result

    def fit(self, device, target):
        """The fit on ``target``, and a weak reference to its weights: once this returns
        nothing holds them, so they must be freed."""
        torch, job = self.torch, self.job
        batch = job["batch"]
        x, y = make_data(job["seed"], job["steps"] * batch)
        xs, ys = torch.from_numpy(x).to(target), torch.from_numpy(y).to(target)
        batches = [(xs[i * batch:(i + 1) * batch], ys[i * batch:(i + 1) * batch])
                   for i in range(job["steps"])]
        net = torch_model(torch, job["seed"]).to(target)
        fitted = torch_fit(torch, net, net, target, batches, batches[0])
        weight = next(net.parameters())
        result = {"device": device, "status": "pass", "ms_per_step": round(fitted["ms"], 3),
                  "loss_first": fitted["loss_first"], "loss_last": fitted["loss_last"],
                  "placed_on": torch_name(fitted["output_device"], device),
                  "weights_on": torch_name(weight.device, device), "error": None,
                  "memory": None, "cudnn": None}
        return result, weakref.ref(weight)

    def multi_replica(self, devices, baseline_ms):
        torch = self.torch
        for device in devices:
            self.check_visible(device)
        kinds = sorted(set(d.split(":")[0] for d in devices))
        if len(kinds) > 1:
            raise RuntimeError("the multi-device check runs on CPUs or on GPUs, not both: "
                               + ", ".join(devices))
        backend = "nccl" if kinds == ["gpu"] else "gloo"
        dist = torch.distributed
        if not (dist.is_available() and getattr(dist, "is_%s_available" % backend)()):
            raise RuntimeError("torch %s has no %s backend in torch.distributed"
                               % (torch.__version__, backend))
        threads = max(1, cpu_share() // len(devices)) if backend == "gloo" else 0
        how = "DistributedDataParallel over %s, %d processes" % (backend, len(devices))
        if threads:
            how += ", %d thread(s) each" % threads
        ranks, waited = run_ranks(devices, backend, self.job, threads)
        return ddp_verdict(devices, ranks, waited, baseline_ms, self.job, how)


def torch_device(torch, device):
    kind, index = device.split(":")
    return torch.device("cpu") if kind == "cpu" else torch.device("cuda", int(index))


def torch_name(where, asked):
    """envcheck's name of a torch.device; torch has one CPU device, named as asked."""
    if where.type == "cpu":
        return asked if asked.startswith("cpu:") else "cpu:0"
    return normalise(where.type, where.index)


def torch_model(torch, seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(FEATURES, 32), torch.nn.ReLU(),
                               torch.nn.Linear(32, 1))


def torch_fit(torch, trained, net, target, batches, probe, on_step=None):
    """Train ``trained`` (``net``, or DistributedDataParallel around it) one step per batch
    with Adam(0.01) on MSE; the loss on ``probe`` before and after is computed by ``net``.
    ms is the median step after the first."""
    loss_fn = torch.nn.MSELoss()
    optimizer = torch.optim.Adam(trained.parameters(), lr=0.01)
    with torch.no_grad():
        loss_first = float(loss_fn(net(probe[0]), probe[1]))
    times = []
    for step, (x, y) in enumerate(batches, 1):
        started = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(trained(x), y)
        loss.backward()
        optimizer.step()
        if target.type == "cuda":
            torch.cuda.synchronize(target)
        times.append(time.perf_counter() - started)
        if on_step is not None:
            on_step(step)
    with torch.no_grad():
        out = net(probe[0])
        loss_last = float(loss_fn(out, probe[1]))
    return {"ms": median(times[1:]) * 1000.0, "loss_first": loss_first,
            "loss_last": loss_last, "output_device": out.device}


def warm_up(torch, target):
    """A tiny Linear forward and backward, so that what the CUDA libraries keep for the
    process's life (cuBLAS/cuBLASLt handles and workspaces) exists before the baseline."""
    layer = torch.nn.Linear(2, 2).to(target)
    layer(torch.ones(2, 2, device=target)).sum().backward()
    torch.cuda.synchronize(target)


def settled_memory(torch, target):
    """Bytes allocated for tensors on ``target`` once garbage is collected, the cuBLAS
    workspaces freed and the cache emptied (what PyTorch's own CUDA leak check reads)."""
    gc.collect()
    torch.cuda.synchronize(target)
    clear = getattr(torch._C, "_cuda_clearCublasWorkspaces", None)
    if clear is not None:
        clear()
    torch.cuda.empty_cache()
    return torch.cuda.memory_allocated(target)


def exercise_cudnn(torch, target):
    """A Conv2d forward and backward on the GPU, with cuDNN's state as torch reports it."""
    cudnn = torch.backends.cudnn
    available = bool(cudnn.is_available())
    facts = {"enabled": bool(cudnn.enabled), "available": available,
             "version": cudnn.version() if available else None}
    conv = torch.nn.Conv2d(3, 8, kernel_size=3, padding=1).to(target)
    x = torch.randn(4, 3, 16, 16, device=target, requires_grad=True)
    facts["is_acceptable"] = bool(cudnn.is_acceptable(x))
    conv(x).sum().backward()
    torch.cuda.synchronize(target)
    facts["conv2d"] = "forward and backward ran"
    return facts


def cpu_share():
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


# --- PyTorch DistributedDataParallel: one process per device ------------------------------

LOOPBACK = "127.0.0.1"
# Errors a rank raises because another rank is gone or stuck: effects, listed after causes.
PEER_ERRORS = re.compile(r"timed out|timeout|connection (closed|reset|refused)|closed by peer|"
                         r"broken pipe|DistStoreError|DistNetworkError", re.IGNORECASE)


class Rank(object):
    """One DDP process: how far it got (its progress lines), its result, how it ended."""

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


def run_ranks(devices, backend, job, threads):
    """Start one process per device (this file with ``--rank``), the way torchrun does
    (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR=127.0.0.1, MASTER_PORT a free port), and
    read their progress until all answered, one failed, or job["multi_timeout"] s passed;
    then stop any still running. Their process group times out at 3/4 of that, so a rank
    waiting on a lost peer fails with its own error first. Returns the ranks and the seconds
    waited."""
    limit = float(job["multi_timeout"])
    spec = {"backend": backend, "steps": job["steps"], "batch": job["batch"],
            "seed": job["seed"], "threads": threads, "timeout": max(1.0, 0.75 * limit),
            "parent": os.getpid()}
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
                [sys.executable, os.path.abspath(__file__), "--rank",
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
    return TensorFlow.multi_verdict(devices, len(ranks), job["batch"], sizes,
                                    results[0]["loss_first"], results[0]["loss_last"], disagree,
                                    ms, baseline_ms, problems, how)


def rank_main(spec, out):
    """One DDP process of ``run_ranks``: progress lines ("phase ...", "step N") and then
    "result {json}" on the file descriptor ``out``; 0 if it trained, 1 if not."""
    def say(text):
        os.write(out, (text + "\n").encode("utf-8"))

    die_with_parent(spec["parent"])
    rank, world, device = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), spec["device"]
    result = {"rank": rank, "device": device, "error": None}
    try:
        say("phase importing torch")
        import datetime

        import torch
        from torch.nn.parallel import DistributedDataParallel

        dist = torch.distributed
        target = torch_device(torch, device)
        if spec["threads"]:
            torch.set_num_threads(spec["threads"])
        if target.type == "cuda":
            torch.cuda.set_device(target)
        say("phase joining the process group")
        dist.init_process_group(spec["backend"], init_method="env://", rank=rank,
                                world_size=world,
                                timeout=datetime.timedelta(seconds=spec["timeout"]))
        say("phase training")
        result.update(ddp_fit(torch, DistributedDataParallel, target, spec, rank, world,
                              lambda step: say("step %d" % step)))
        say("phase waiting for the other ranks to finish")
        dist.barrier()
    except Exception as exc:
        result["error"] = error_text(exc)
    say("result " + json.dumps(result))
    return 1 if result["error"] else 0


def ddp_fit(torch, ddp, target, spec, rank, world, on_step):
    """This rank's share: batch rows of each global batch of world x batch rows."""
    batch, device = spec["batch"], spec["device"]
    width = batch * world
    x, y = make_data(spec["seed"], spec["steps"] * width)
    xs, ys = torch.from_numpy(x).to(target), torch.from_numpy(y).to(target)
    lows = [step * width + rank * batch for step in range(spec["steps"])]
    batches = [(xs[low:low + batch], ys[low:low + batch]) for low in lows]
    net = torch_model(torch, spec["seed"]).to(target)
    model = ddp(net, device_ids=[target.index] if target.type == "cuda" else None)
    fitted = torch_fit(torch, model, net, target, batches, (xs[:width], ys[:width]), on_step)
    return {"ms_per_step": fitted["ms"], "loss_first": fitted["loss_first"],
            "loss_last": fitted["loss_last"],
            "placed_on": torch_name(fitted["output_device"], device),
            "weights_on": torch_name(next(net.parameters()).device, device),
            "sizes": [len(b[0]) for b in batches],
            "weights": {name: p.detach().cpu().reshape(-1).tolist()
                        for name, p in net.named_parameters()}}


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


def start(job):
    name = choose_backend(job["backend"])
    return {"tensorflow": TensorFlow, "torch": Torch, "jax": KerasJax}[name](job)


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
            results.append(result)
    multi = None
    replicas = job["replica_devices"] or job["devices"]
    if job["multi_replica"] and len(replicas) > 1:
        log("start multi-replica")
        multi = multi_replica(backend, replicas, job, results)
    failed = any(r["status"] != "pass" for r in results) or (multi or {}).get("status") == "fail"
    return {"error": None, "build": build, "gpus_seen": gpus_seen, "devices": results,
            "multi_replica": multi}, 1 if failed else 0


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
    if argv[1:2] == ["--rank"]:  # one process of the PyTorch multi-device check
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


if __name__ == "__main__":
    main(sys.argv)
