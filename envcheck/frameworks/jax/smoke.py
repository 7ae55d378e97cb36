"""JAX's smoke backend (Keras 3 on JAX), loaded by path by envcheck's smoke runner inside the
env's interpreter: standard library, Keras and JAX only, Python 3.7.

Per device: the Keras fit of ``keras_fit.py`` under ``keras.device``, with JAX's
preallocation off; CPUs split into logical devices by XLA_FLAGS. Multi-replica:
keras.distribution.DataParallel over the devices, the global batch = batch x replicas.
"""
import os

import envcheck_smoke as kit

keras_fit = kit.load_file(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                        "keras_fit.py"), "envcheck_smoke_keras")

NEEDS = ("keras", "jax")


def start(job):
    return KerasJax(job)


class KerasJax(keras_fit.Backend):
    """Keras 3 on JAX."""

    name = "jax"

    def __init__(self, job):
        keras_fit.Backend.__init__(self, job)
        os.environ["KERAS_BACKEND"] = "jax"
        os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # memory growth
        logical = kit.cpu_count_asked(job)
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
        return ",".join(kit.normalise(*f.split(":")) for f in found)

    def multi_replica(self, devices, baseline_ms):
        keras = self.keras
        job = self.job
        for device in devices:
            self.check_visible(device)
        distribution = keras.distribution.DataParallel(devices=devices)
        replicas = len(distribution.device_mesh.devices.flatten())
        per_replica = job["batch"]
        global_batch = per_replica * replicas
        x, y = kit.make_data(job["seed"], job["steps"] * global_batch)
        probe_x, probe_y = x[:global_batch], y[:global_batch]
        keras.distribution.set_distribution(distribution)
        try:
            model = self.make_model()
            loss_first = kit.mse(model.predict(probe_x, verbose=0), probe_y)
            callback, times = self.timer()
            model.fit(x, y, batch_size=global_batch, epochs=1, shuffle=False, verbose=0,
                      callbacks=[callback])
            loss_last = kit.mse(model.predict(probe_x, verbose=0), probe_y)
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
        ms = kit.median(times[1:]) * 1000.0 if len(times) > 1 else None
        return kit.multi_verdict(devices, replicas, per_replica, sizes, loss_first, loss_last,
                                 disagree, ms, baseline_ms)
