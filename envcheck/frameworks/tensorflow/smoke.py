"""TensorFlow's smoke backend (tf.keras), loaded by path by envcheck's smoke runner inside the
env's interpreter: standard library and TensorFlow only, Python 3.7.

Per device: the Keras fit of ``keras_fit.py`` under ``tf.device``, with memory growth on for
every GPU; placed_on is read from the output's and the weights' device strings. Multi-replica:
MirroredStrategy over the devices (logical CPU devices split from the CPU, or GPUs; NCCL
all-reduce only on GPUs), the global batch = batch x replicas split across them
(drop_remainder).

Level 3 (the runner's ``smoke_figures.py`` times them): ``TfFigures`` per device, and
``allreduce_fn``: a replica context's all_reduce under a MirroredStrategy over the devices.
"""
import os
import re

import envcheck_smoke as kit

keras_fit = kit.load_file(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                        "keras_fit.py"), "envcheck_smoke_keras")

NEEDS = ("tensorflow",)


def start(job):
    return TensorFlow(job)


class TensorFlow(keras_fit.Backend):
    name = "tensorflow"

    def __init__(self, job):
        keras_fit.Backend.__init__(self, job)
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
        logical = kit.cpu_count_asked(job)
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
        return kit.normalise(found.group(1), found.group(2)) if found else (name or "unknown")

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
        x, y = kit.make_data(job["seed"], job["steps"] * global_batch)
        data = tf.data.Dataset.from_tensor_slices((x, y)).batch(global_batch, drop_remainder=True)
        first = next(iter(strategy.experimental_distribute_dataset(data)))
        sizes = strategy.experimental_local_results(
            strategy.run(lambda a, b: tf.shape(a)[0], args=first))
        sizes = [int(s) for s in sizes]
        probe_x, probe_y = x[:global_batch], y[:global_batch]
        with strategy.scope():
            model = self.make_model()
            loss_first = kit.mse(model.predict(probe_x, verbose=0), probe_y)
        callback, times = self.timer()
        model.fit(data, epochs=1, shuffle=False, verbose=0, callbacks=[callback])
        loss_last = kit.mse(model.predict(probe_x, verbose=0), probe_y)
        disagree = []
        for weight in model.weights:
            variable = getattr(weight, "value", weight)
            copies = [c.numpy() for c in strategy.experimental_local_results(variable)]
            if len(copies) != replicas or any(abs(c - copies[0]).max() > 1e-5 for c in copies):
                disagree.append(weight.name)
        ms = kit.median(times[1:]) * 1000.0 if len(times) > 1 else None
        return kit.multi_verdict(devices, replicas, per_replica, sizes, loss_first, loss_last,
                                 disagree, ms, baseline_ms)

    # --- level 3 (the runner's smoke_figures.py times these) ------------------------------

    def figure_ops(self, device):
        self.check_visible(device)
        return TfFigures(self.tf, device)

    def allreduce_fn(self, devices, nbytes):
        """``reps`` all-reduces (sum) in the replica context of a MirroredStrategy over the
        devices, each replica holding ``nbytes`` of float32."""
        tf = self.tf
        cross = tf.distribute.ReductionToOneDevice() if any(
            d.startswith("cpu:") for d in devices) else None
        strategy = tf.distribute.MirroredStrategy(devices=["/" + d.upper() for d in devices],
                                                  cross_device_ops=cross)
        values = strategy.experimental_distribute_values_from_function(
            lambda context: tf.zeros([nbytes // 4], tf.float32))

        @tf.function
        def step(value):
            return strategy.run(lambda v: tf.distribute.get_replica_context().all_reduce(
                tf.distribute.ReduceOp.SUM, v), args=(value,))

        def fn(reps):
            out = None
            for _ in range(reps):
                out = step(values)
            for local in strategy.experimental_local_results(out):
                local[0].numpy()  # waits for the replica's all-reduce

        how = "MirroredStrategy all_reduce over %d devices (%s)" % (
            len(devices), "ReductionToOneDevice" if cross else "its default: NCCL on GPUs")
        return fn, how


class TfFigures(object):
    """Level 3 on one TensorFlow device: copies with tf.identity across device scopes (from
    pageable host memory: TensorFlow has no pinned-memory API for a user's tensors),
    tf.linalg.matmul (fp32 with TF32 execution off), tf.zeros chunks."""

    def __init__(self, tf, device):
        self.tf, self.device = tf, device
        self.name = "/" + device.upper()
        self.gpu = device.startswith("gpu:")
        self.host_memory = ("pageable (TensorFlow has no pinned host memory for user tensors)"
                            if self.gpu else
                            "host memory to host memory (a CPU device has no memory of its own)")

    def copy_fns(self, nbytes):
        tf = self.tf
        with tf.device("/CPU:0"):
            host = tf.ones([nbytes], tf.uint8)
        with tf.device(self.name):
            device = tf.raw_ops.DeepCopy(x=host) if not self.gpu else tf.identity(host)

        def copier(where, source):
            def fn(reps):
                out = None
                with tf.device(where):
                    for _ in range(reps):
                        out = tf.raw_ops.DeepCopy(x=source) if not self.gpu else tf.identity(source)
                out[0].numpy()  # waits for the copies
            return fn

        return copier(self.name, host), copier("/CPU:0", device)

    def matmul_support(self):
        if not self.gpu:
            why = "not measured on a CPU (fp32 only: no expectation there, and slow)"
            return {"fp32": None, "fp16": why, "bf16": why}
        details = self.tf.config.experimental.get_device_details(
            self.tf.config.list_physical_devices("GPU")[int(self.device.split(":")[1])])
        major = (details.get("compute_capability") or (0, 0))[0]
        cc = "%s" % (details.get("compute_capability"),)
        return {"fp32": None,
                "fp16": None if major >= 7 else "no tensor cores (compute capability %s)" % cc,
                "bf16": None if major >= 8 else "no bf16 tensor cores (compute capability %s)" % cc}

    def matmul_fn(self, n, dtype):
        tf = self.tf
        kind = {"fp32": tf.float32, "fp16": tf.float16, "bf16": tf.bfloat16}[dtype]
        with tf.device(self.name):
            a = tf.cast(tf.random.normal([n, n], seed=0), kind)
            b = tf.cast(tf.random.normal([n, n], seed=1), kind)
        config = tf.config.experimental

        def fn(reps):
            tf32 = config.tensor_float_32_execution_enabled()
            config.enable_tensor_float_32_execution(False)  # fp32 measured as FP32, not TF32
            try:
                out = None
                with tf.device(self.name):
                    for _ in range(reps):
                        out = tf.linalg.matmul(a, b)
                out[0, 0].numpy()  # waits for the matmuls
            finally:
                config.enable_tensor_float_32_execution(tf32)

        return fn

    def memory(self):
        free, total = kit.nvml_memory(int(self.device.split(":")[1]))
        return {"free_bytes": free, "total_bytes": total, "limit_bytes": None,
                "source": "NVML (nvmlDeviceGetMemoryInfo), TensorFlow reports no free memory"}

    def allocate(self, nbytes):
        with self.tf.device(self.name):
            chunk = self.tf.zeros([nbytes], self.tf.uint8)
        chunk[0].numpy()
        return chunk

    def release(self):
        import gc

        gc.collect()
