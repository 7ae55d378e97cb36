"""TensorFlow's smoke backend (tf.keras), loaded by path by envcheck's smoke runner inside the
env's interpreter: standard library and TensorFlow only, Python 3.7.

Per device: the Keras fit of ``keras_fit.py`` under ``tf.device``, with memory growth on for
every GPU; placed_on is read from the output's and the weights' device strings. Multi-replica:
MirroredStrategy over the devices (logical CPU devices split from the CPU, or GPUs; NCCL
all-reduce only on GPUs), the global batch = batch x replicas split across them
(drop_remainder).
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
