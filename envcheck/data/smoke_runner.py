"""envcheck smoke runner: a tiny Keras fit per device, run by the target env's own python.

Standalone on purpose: it runs inside the env under test (Python >= 3.7), so it uses only
the standard library and the framework being tested, and never imports envcheck.

Input: one JSON job, as the first argument or on stdin:

    {"backend": "tensorflow" | "jax" | "torch" | "auto", "devices": ["cpu:0", "gpu:0"],
     "logical_cpus": 0, "steps": 12, "batch": 32, "seed": 0, "multi_replica": true,
     "replica_devices": null, "per_device": true}

replica_devices names the devices of the multi-replica check (default: all of devices);
per_device false skips the per-device fits (the multi-replica check then times its
one-device baseline itself).

Output: one JSON document on the real stdout. While working, fd 1 points at stderr, so the
framework's own noise never mixes with the result. Progress lines start with MARK and go
to stderr: "imported" once the framework is set up, then "start DEVICE" and
"result {json}" per device, and "start multi-replica"; envcheck reads them to tell which
device a crash or a hang belongs to. Every error's traceback is written to stderr too, so
the whole story can be matched against envcheck's diagnosis catalogue.

Exit codes: 0 every check passed, 1 a device or the multi-replica check failed,
2 the job was malformed, 3 the framework could not be imported or set up.

Per device: memory growth is turned on before anything initialises, a Dense(32, relu) ->
Dense(1) model is fitted for `steps` steps of `batch` samples of a fixed synthetic
regression problem inside the device's scope; ms_per_step is the median of the steps after
the first (which traces/compiles); loss_first/loss_last are the mean squared error on the
first training batch before and after the fit, and must fall; placed_on is the device the
trained weights and the model's output really live on, and must be the one asked for.

Multi-replica (TensorFlow: MirroredStrategy; JAX: keras.distribution.DataParallel): the
same fit with the global batch = batch x replicas split across the devices
(drop_remainder), checking that every replica got exactly batch samples, that the loss
fell and that the replicas' weights agree after training. scaling_efficiency is
throughput_multi / (replicas x throughput_single), with throughput in samples per second
and throughput_single measured on one device at the per-replica batch; since the global
batch is replicas x per-replica batch, it equals ms_single / ms_multi. 1.0 is perfect
scaling; logical CPU devices share the same cores, so there it is far below 1 by design.
"""
import importlib.util
import json
import os
import re
import sys
import time
import traceback

MARK = "envcheck-smoke:"
DEVICE_RE = re.compile(r"^(cpu|gpu):(\d+)$")
FEATURES = 8
DEFAULTS = {"backend": "auto", "devices": ["cpu:0"], "logical_cpus": 0, "steps": 12,
            "batch": 32, "seed": 0, "multi_replica": False, "replica_devices": None,
            "per_device": True}


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
    return job


def choose_backend(asked):
    if asked != "auto":
        return asked
    if importlib.util.find_spec("tensorflow") is not None:
        return "tensorflow"
    if importlib.util.find_spec("keras") is not None:
        for name in ("jax", "torch"):
            if importlib.util.find_spec(name) is not None:
                return name
    raise ImportError("no framework found: neither tensorflow, nor keras with jax or torch, "
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
    """The fit shared by all frameworks. Subclasses provide the framework's parts: build(),
    gpus_seen, check_visible(), scope(), numpy(), device_of(), multi_replica()."""

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

    def multi_replica(self, devices, baseline_ms):
        return {"status": "skip", "replicas": None, "per_replica_batch": None,
                "global_batch": None, "scaling_efficiency": None,
                "detail": "multi-replica smoke is not available for the %s backend" % self.name}


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
                      disagree, ms, baseline_ms):
        problems = []
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
        detail = ("replica batches %s; loss %.4g -> %.4g; ms/step %s (one device: %s)"
                  % (sizes, loss_first, loss_last,
                     "%.2f" % ms if ms else "n/a", "%.2f" % baseline_ms if baseline_ms else "n/a"))
        if problems:
            detail = "; ".join(problems) + "; " + detail
        return {"status": "fail" if problems else "pass", "replicas": replicas,
                "per_replica_batch": per_replica, "global_batch": per_replica * replicas,
                "scaling_efficiency": efficiency, "ms_per_step": round(ms, 3) if ms else None,
                "detail": detail}


class Keras3(Backend):
    """Keras 3 on the JAX or PyTorch backend."""

    def __init__(self, job, name):
        Backend.__init__(self, job)
        self.name = name
        os.environ["KERAS_BACKEND"] = name
        if name == "jax":
            os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # memory growth
            logical = cpu_count_asked(job)
            if logical > 1:
                flags = os.environ.get("XLA_FLAGS", "")
                os.environ["XLA_FLAGS"] = (
                    flags + " --xla_force_host_platform_device_count=%d" % logical).strip()
            import jax

            self.fw = jax
        else:
            import torch

            self.fw = torch
        import keras

        self.keras = keras
        if keras.backend.backend() != name:
            raise ImportError("keras runs on %s, not %s" % (keras.backend.backend(), name))

    @property
    def gpus_seen(self):
        if self.name == "torch":
            return self.fw.cuda.device_count()
        try:
            return len(self.fw.devices("gpu"))
        except RuntimeError:
            return 0

    def build(self):
        facts = {"framework": self.name, "version": self.fw.__version__,
                 "keras_version": self.keras.__version__,
                 "keras_backend": self.keras.backend.backend()}
        if self.name == "torch":
            torch = self.fw
            facts.update(cuda_version=torch.version.cuda,
                         cuda_available=torch.cuda.is_available(),
                         arch_list=torch.cuda.get_arch_list(),
                         cudnn_version=torch.backends.cudnn.version()
                         if torch.backends.cudnn.is_available() else None)
        else:
            import jaxlib

            facts.update(jaxlib_version=getattr(jaxlib, "__version__", None),
                         default_backend=self.fw.default_backend())
        return facts

    def check_visible(self, device):
        kind, index = device.split(":")
        if self.name == "torch":
            seen = self.fw.cuda.device_count() if kind == "gpu" else 1
        else:
            try:
                seen = len(self.fw.devices(kind))
            except RuntimeError:
                seen = 0
        if int(index) >= seen:
            raise RuntimeError("%s is not visible to %s (it sees %d %s device(s))"
                               % (device, self.name, seen, kind))

    def scope(self, device):
        if self.name == "torch":
            # torch names: "cpu" (a variable moved to "cpu:0" is no longer a leaf tensor,
            # so keras finds no gradients for it) and "cuda:N".
            kind, index = device.split(":")
            device = "cpu" if kind == "cpu" else "cuda:" + index
        return self.keras.device(device)

    def numpy(self, tensor):
        return self.keras.ops.convert_to_numpy(tensor)

    def device_of(self, thing):
        value = getattr(thing, "value", thing)
        if self.name == "torch":
            return normalise(value.device.type, value.device.index)
        found = sorted("%s:%d" % (d.platform, d.id) for d in value.devices())
        return ",".join(normalise(*f.split(":")) for f in found)

    def multi_replica(self, devices, baseline_ms):
        if self.name != "jax":
            return Backend.multi_replica(self, devices, baseline_ms)
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


def start(job):
    name = choose_backend(job["backend"])
    return TensorFlow(job) if name == "tensorflow" else Keras3(job, name)


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
