"""JAX's smoke backend (pure JAX: no Keras, no Flax, no Optax), loaded by path by envcheck's
smoke runner inside the env's interpreter: standard library, numpy and JAX only (an env of
just jax + jaxlib), Python 3.7 syntax.

Per device: the runner's model (8 features -> 32 -> 1, ReLU), MSE, a hand-written Adam
(lr 0.01, the usual betas and epsilon) as one ``jax.jit`` train step. The step is compiled
ahead of time (``lower().compile()``, untimed) for the device's committed arrays, then run
for ``steps`` batches, each timed until its results are ready (``block_until_ready``);
ms_per_step is the median of the steps after the first. placed_on is read from the output's
and the weights' ``Array.devices()``. JAX's GPU preallocation is off (memory growth); CPUs
are split into logical devices by ``XLA_FLAGS=--xla_force_host_platform_device_count``.

Multi-replica: data parallel in one process, the modern JAX way: ``jax.jit`` over a
``Mesh`` of the devices, the batch sharded along it (``NamedSharding(mesh, P("data"))``),
the weights and Adam's state replicated (``P()``); XLA inserts the gradient all-reduce. The
global batch is batch x replicas; after the fit every replica's copy of every weight must
agree (``multi_verdict``).

Level 3 (the runner's ``smoke_figures.py`` times them): ``JaxFigures`` per device, and
``allreduce_fn``: ``jax.lax.psum`` inside ``shard_map`` over a Mesh of the devices.
"""
import importlib.util
import os
import time

import envcheck_smoke as kit

NEEDS = ("jax", "jaxlib")
LEARNING_RATE, BETA1, BETA2, EPSILON = 0.01, 0.9, 0.999, 1e-8
HOW = "jax.jit over a Mesh of %d devices, batch sharded (P('data')), weights replicated"


def start(job):
    return Jax(job)


def init_params(np, seed):
    """PyTorch's Linear initialisation (uniform +-1/sqrt(fan_in)), from the job's seed."""
    rng = np.random.RandomState(seed)

    def uniform(shape, fan_in):
        bound = 1.0 / fan_in ** 0.5
        return rng.uniform(-bound, bound, size=shape).astype("float32")

    return {"w1": uniform((kit.FEATURES, 32), kit.FEATURES), "b1": uniform((32,), kit.FEATURES),
            "w2": uniform((32, 1), 32), "b2": uniform((1,), 32)}


def make_functions(jax):
    """(predict, train_step), jitted; train_step(params, m, v, t, x, y) -> (params, m, v, t,
    loss) is one Adam step on the MSE of the batch."""
    jnp = jax.numpy
    tree_map = jax.tree_util.tree_map

    def predict(params, x):
        hidden = jnp.maximum(jnp.dot(x, params["w1"]) + params["b1"], 0.0)
        return jnp.dot(hidden, params["w2"]) + params["b2"]

    def loss_fn(params, x, y):
        return jnp.mean((predict(params, x) - y) ** 2)

    def train_step(params, m, v, t, x, y):
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        t = t + 1.0
        m = tree_map(lambda m_, g: BETA1 * m_ + (1.0 - BETA1) * g, m, grads)
        v = tree_map(lambda v_, g: BETA2 * v_ + (1.0 - BETA2) * g * g, v, grads)
        m_scale, v_scale = 1.0 / (1.0 - BETA1 ** t), 1.0 / (1.0 - BETA2 ** t)
        params = tree_map(lambda p, m_, v_: p - LEARNING_RATE * (m_ * m_scale)
                          / (jnp.sqrt(v_ * v_scale) + EPSILON), params, m, v)
        return params, m, v, t, loss

    return jax.jit(predict), jax.jit(train_step)


class Jax(object):
    """Pure JAX: a jitted fit per device, a jitted data-parallel fit over a device Mesh."""

    name = "jax"

    def __init__(self, job):
        self.job = job
        os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # memory growth
        logical = kit.cpu_count_asked(job)
        if logical > 1:
            flags = os.environ.get("XLA_FLAGS", "")
            os.environ["XLA_FLAGS"] = (
                flags + " --xla_force_host_platform_device_count=%d" % logical).strip()
        import jax
        import numpy

        self.jax, self.np = jax, numpy
        self.predict, self.train_step = make_functions(jax)
        self.gpus_seen = len(self.devices("gpu"))

    def devices(self, kind):
        try:
            return self.jax.devices(kind)
        except RuntimeError:  # no backend of that kind (a CPU-only jaxlib asked for "gpu")
            return []

    def build(self):
        import jaxlib

        jax = self.jax
        facts = {"framework": "jax", "version": jax.__version__,
                 "jaxlib_version": getattr(jaxlib, "__version__", None),
                 "default_backend": jax.default_backend(),
                 "devices": ["%s:%d" % (d.platform, d.id) for d in jax.devices()]}
        found = importlib.util.find_spec("jax_cuda12_plugin") is not None  # its presence is the fact
        facts["cuda_plugin"] = "jax_cuda12_plugin" if found else None
        return facts

    def device(self, name):
        kind, index = name.split(":")
        found = self.devices(kind)
        if int(index) >= len(found):
            raise RuntimeError("%s is not visible to jax (it sees %d %s device(s))"
                               % (name, len(found), kind))
        return found[int(index)]

    def check_visible(self, name):
        self.device(name)

    def where(self, array):
        return ",".join(sorted(kit.normalise(d.platform, d.id) for d in array.devices()))

    def fit(self, params, batches, probe, put, on_step=None):
        """Adam from ``params`` over ``batches`` (arrays already placed); the loss on
        ``probe`` before and after; the trained params, the output on the probe, the ms."""
        np, jax = self.np, self.jax
        m = jax.tree_util.tree_map(lambda p: put(np.zeros(p.shape, "float32")), params)
        v = jax.tree_util.tree_map(lambda p: put(np.zeros(p.shape, "float32")), params)
        t = put(np.zeros((), "float32"))
        loss_first = kit.mse(np.asarray(self.predict(params, probe[0])), probe[1])
        step = self.train_step.lower(params, m, v, t, *batches[0]).compile()
        times = []
        for number, (x, y) in enumerate(batches, 1):
            started = time.perf_counter()
            params, m, v, t, loss = step(params, m, v, t, x, y)
            loss.block_until_ready()
            jax.block_until_ready(params)
            times.append(time.perf_counter() - started)
            if on_step is not None:
                on_step(number)
        out = self.predict(params, probe[0])
        loss_last = kit.mse(np.asarray(out), probe[1])
        return params, out, loss_first, loss_last, kit.median(times[1:]) * 1000.0

    def run_device(self, name):
        jax, job = self.jax, self.job
        target = self.device(name)
        batch = job["batch"]
        x, y = kit.make_data(job["seed"], job["steps"] * batch)

        def put(value):
            return jax.device_put(value, target)

        batches = [(put(x[i * batch:(i + 1) * batch]), put(y[i * batch:(i + 1) * batch]))
                   for i in range(job["steps"])]
        params = jax.tree_util.tree_map(put, init_params(self.np, job["seed"]))
        params, out, loss_first, loss_last, ms = self.fit(params, batches, (batches[0][0], y[:batch]), put)
        placed, weights = self.where(out), self.where(params["w1"])
        result = {"device": name, "status": "pass", "ms_per_step": round(ms, 3),
                  "loss_first": loss_first, "loss_last": loss_last, "placed_on": placed,
                  "error": None}
        problems = []
        if not loss_last < loss_first:
            problems.append("loss did not fall (%.6g -> %.6g)" % (loss_first, loss_last))
        if placed != name or weights != name:
            problems.append("ran on %s (weights on %s), not on %s" % (placed, weights, name))
        if problems:
            result.update(status="fail", error="; ".join(problems))
        return result

    def multi_replica(self, names, baseline_ms):
        jax, np, job = self.jax, self.np, self.job
        from jax.sharding import Mesh, NamedSharding, PartitionSpec

        kinds = sorted(set(n.split(":")[0] for n in names))
        if len(kinds) > 1:
            raise RuntimeError("the multi-device check runs on CPUs or on GPUs, not both: "
                               + ", ".join(names))
        mesh = Mesh(np.array([self.device(n) for n in names]), ("data",))
        split, replicated = NamedSharding(mesh, PartitionSpec("data")), NamedSharding(mesh, PartitionSpec())
        replicas = mesh.devices.size
        per_replica = job["batch"]
        width = per_replica * replicas
        x, y = kit.make_data(job["seed"], job["steps"] * width)
        batches = [(jax.device_put(x[i * width:(i + 1) * width], split),
                    jax.device_put(y[i * width:(i + 1) * width], split))
                   for i in range(job["steps"])]

        def put(value):
            return jax.device_put(value, replicated)

        params = jax.tree_util.tree_map(put, init_params(np, job["seed"]))
        params, out, loss_first, loss_last, ms = self.fit(
            params, batches, (batches[0][0], y[:width]), put)
        sizes = sorted(int(s.data.shape[0]) for s in batches[0][0].addressable_shards)
        problems, disagree = [], []
        on = sorted(set(kit.normalise(d.platform, d.id) for d in batches[0][0].devices()))
        if on != sorted(names):
            problems.append("the batch was placed on %s, not on %s" % (on, sorted(names)))
        for key in sorted(params):
            shards = [np.asarray(s.data) for s in params[key].addressable_shards]
            if len(shards) != replicas or any(not np.allclose(s, shards[0], atol=1e-5) for s in shards):
                disagree.append(key)
        return kit.multi_verdict(names, replicas, per_replica, sizes, loss_first, loss_last,
                                 disagree, ms, baseline_ms, problems, HOW % replicas)

    # --- level 3 (the runner's smoke_figures.py times these) ------------------------------

    def figure_ops(self, name):
        return JaxFigures(self.jax, self.np, self.device(name))

    def allreduce_fn(self, names, nbytes):
        """``reps`` psums over a Mesh of the devices, each holding ``nbytes`` of float32."""
        jax, np = self.jax, self.np
        from jax.sharding import Mesh, NamedSharding, PartitionSpec

        shard_map = getattr(jax, "shard_map", None)
        if shard_map is None:
            from jax.experimental.shard_map import shard_map
        mesh = Mesh(np.array([self.device(n) for n in names]), ("data",))
        spec = PartitionSpec("data")
        x = jax.device_put(np.zeros((len(names), nbytes // 4), "float32"), NamedSharding(mesh, spec))
        psum = jax.jit(shard_map(lambda a: jax.lax.psum(a, "data"), mesh=mesh, in_specs=spec,
                                 out_specs=spec))

        # XLA's CPU devices run collectives on one shared thread pool (as many threads as
        # cores): psums queued ahead can hold every thread at the rendezvous while a device's
        # turn of the first waits for one, and XLA aborts the process after 40 s. On CPU
        # devices each psum is waited for before the next is queued.
        one_at_a_time = all(self.device(n).platform == "cpu" for n in names)

        def fn(reps):
            out = None
            for _ in range(reps):
                out = psum(x)
                if one_at_a_time:
                    out.block_until_ready()
            out.block_until_ready()

        return fn, "jax.lax.psum in shard_map over a Mesh of %d devices" % len(names)


class JaxFigures(object):
    """Level 3 on one JAX device: copies with jax.device_put (from pinned host memory where the
    device has a "pinned_host" memory kind, else from numpy's pageable memory), jnp.dot
    (fp32 at Precision.HIGHEST: no TF32), jnp.zeros chunks within XLA's allocator limit."""

    def __init__(self, jax, np, target):
        self.jax, self.np, self.target = jax, np, target
        self.gpu = target.platform == "gpu" or target.platform == "cuda"
        self.pinned = None
        if self.gpu:
            kinds = [m.kind for m in getattr(target, "addressable_memories", lambda: [])()]
            if "pinned_host" in kinds:
                from jax.sharding import SingleDeviceSharding

                self.pinned = SingleDeviceSharding(target, memory_kind="pinned_host")
        self.host_memory = (
            "pinned (a jax.device_put to memory_kind pinned_host)" if self.pinned is not None else
            "pageable (numpy arrays: this device has no pinned_host memory kind)" if self.gpu else
            "host memory to host memory (a CPU device has no memory of its own)")

    def put(self, value, where):
        try:
            return self.jax.device_put(value, where, may_alias=False)  # a real copy, never an alias
        except TypeError:  # an older jax without may_alias
            return self.jax.device_put(value, where)

    def copy_fns(self, nbytes):
        np = self.np
        host = np.ones(nbytes, "uint8")
        if self.pinned is not None:
            host = self.put(host, self.pinned)
            host.block_until_ready()
        device = self.put(host, self.target)
        device.block_until_ready()

        def h2d(reps):
            for _ in range(reps):
                self.put(host, self.target).block_until_ready()

        def d2h(reps):
            for _ in range(reps):
                if self.pinned is not None:
                    self.put(device, self.pinned).block_until_ready()
                elif self.gpu:
                    np.asarray(device)
                    if hasattr(device, "_npy_value"):
                        device._npy_value = None  # jax keeps the host copy: drop it
                else:
                    np.array(device, copy=True)

        return h2d, d2h

    def matmul_support(self):
        if not self.gpu:
            why = "not measured on a CPU (fp32 only: no expectation there, and slow)"
            return {"fp32": None, "fp16": why, "bf16": why}
        cc = str(getattr(self.target, "compute_capability", "") or "0")
        major = int(cc.split(".")[0]) if cc.split(".")[0].isdigit() else 0
        return {"fp32": None,
                "fp16": None if major >= 7 else "no tensor cores (compute capability %s)" % cc,
                "bf16": None if major >= 8 else "no bf16 tensor cores (compute capability %s)" % cc}

    def matmul_fn(self, n, dtype):
        jax, np = self.jax, self.np
        kind = {"fp32": "float32", "fp16": "float16", "bf16": jax.numpy.bfloat16}[dtype]
        precision = jax.lax.Precision.HIGHEST if dtype == "fp32" else None
        rng = np.random.RandomState(0)
        a = jax.device_put(rng.normal(size=(n, n)).astype("float32"), self.target).astype(kind)
        b = jax.device_put(rng.normal(size=(n, n)).astype("float32"), self.target).astype(kind)
        dot = jax.jit(lambda x, y: jax.numpy.dot(x, y, precision=precision))

        def fn(reps):
            out = None
            for _ in range(reps):
                out = dot(a, b)
            out.block_until_ready()

        return fn

    def memory(self):
        stats = self.target.memory_stats() or {}
        limit = stats.get("bytes_limit")
        if limit is None:
            raise RuntimeError("jax gives no memory_stats() for %s" % self.target)
        used = stats.get("bytes_in_use", 0)
        return {"free_bytes": int(limit - used), "total_bytes": None, "limit_bytes": int(limit),
                "source": "Device.memory_stats(): XLA's allocator limit (bytes_limit, "
                          "XLA_PYTHON_CLIENT_MEM_FRACTION of the GPU, 75% unless set) less "
                          "bytes_in_use"}

    def allocate(self, nbytes):
        with self.jax.default_device(self.target):
            chunk = self.jax.numpy.zeros((nbytes,), "uint8")
        return chunk.block_until_ready()

    def release(self):
        import gc

        gc.collect()
