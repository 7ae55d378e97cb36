"""PyTorch's smoke backend (native torch.nn), loaded by path by envcheck's smoke runner inside
the env's interpreter: standard library and torch only, Python 3.7.

Per device: Linear(8, 32) -> ReLU -> Linear(32, 1), Adam(0.01), MSE, the runner's data and
steps, timed per step (after torch.cuda.synchronize on a GPU); placed_on is read from the
output's and the weights' tensor.device (torch has one CPU device: cpu:N is reported when
the tensors are on it). On a GPU, first "cudnn" records torch.backends.cudnn's state and
version around a Conv2d forward and backward. After the fit every reference is dropped and
"memory" says whether the weights were freed; on a GPU also the bytes allocated before the
fit (after a tiny warm-up, so the CUDA libraries' lasting workspaces exist), at its peak and
after it (each after gc, freeing the cuBLAS workspaces and torch.cuda.empty_cache(), as
PyTorch's own leak check reads them): after must be back to before.

Multi-replica: DistributedDataParallel over N processes, one per device (gloo on CPUs, each
with a share of the cores; nccl on GPUs), each training on its own batch of the same size
(the global batch is N x batch), started by the runner's rank supervisor (``run_ranks``),
each running ``rank_fit``.

Level 3 (the runner's ``smoke_figures.py`` times them): ``TorchFigures`` per device (copies
from and to pinned host memory, ``Tensor.pin_memory()``, on a GPU; torch.mm with TF32 off for
fp32; torch.empty chunks of the memory ``torch.cuda.mem_get_info`` calls free), and each DDP
rank times ``dist.all_reduce`` after its fit (``rank_allreduce``), the same count in every rank.
"""
import gc
import os
import time
import weakref

import envcheck_smoke as kit

NAME = os.path.basename(os.path.dirname(os.path.abspath(__file__)))
NEEDS = ("torch",)


def start(job):
    return Torch(job)


def _tensor(torch, data):
    """numpy's array, or the rows of an env without numpy, as a float32 tensor."""
    return torch.tensor(data, dtype=torch.float32) if isinstance(data, list) else torch.from_numpy(data)


def _arch_flags(torch):
    """The architectures the build carries (``sm_80``, ``compute_90``): ``torch._C._cuda_getArchFlags``
    answers without a GPU; None where this build has no such function or no CUDA."""
    flags = getattr(torch._C, "_cuda_getArchFlags", None)
    try:
        text = flags() if flags is not None else ""
    except Exception:  # noqa: BLE001 - a build whose CUDA part can't say: not known
        return None
    return text.split() or None


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
                # what the build was compiled for, read without a GPU (get_arch_list needs one)
                "cuda_arch_flags": _arch_flags(torch),
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
        x, y = kit.make_data(job["seed"], job["steps"] * batch)
        xs, ys = _tensor(torch, x).to(target), _tensor(torch, y).to(target)
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
        threads = max(1, kit.cpu_share() // len(devices)) if backend == "gloo" else 0
        how = "DistributedDataParallel over %s, %d processes" % (backend, len(devices))
        if threads:
            how += ", %d thread(s) each" % threads
        ranks, waited = kit.run_ranks(devices, backend, self.job, threads, NAME)
        verdict = kit.ddp_verdict(devices, ranks, waited, baseline_ms, self.job, how)
        if self.job.get("level", 2) >= 3:
            timed = [(r.result or {}).get("allreduce") for r in ranks]
            verdict["figures"] = {"allreduce": kit.allreduce_figure(
                timed, "torch.distributed.all_reduce over %s, %d processes"
                % (backend, len(devices)))}
        return verdict

    def figure_ops(self, device):
        """Level 3's measurements on ``device`` (``smoke_figures.py``)."""
        self.check_visible(device)
        return TorchFigures(self.torch, torch_device(self.torch, device))


class TorchFigures(object):
    """Level 3 on one device (the runner's ``smoke_figures.py`` times them): copies from and
    to pinned host memory (``Tensor.pin_memory()``) on a GPU, torch.mm, torch.empty chunks."""

    def __init__(self, torch, target):
        self.torch, self.target = torch, target
        self.gpu = target.type == "cuda"
        self.host_memory = ("pinned (Tensor.pin_memory())" if self.gpu else
                            "host memory to host memory (a CPU device has no memory of its own)")

    def sync(self):
        if self.gpu:
            self.torch.cuda.synchronize(self.target)

    def copy_fns(self, nbytes):
        torch = self.torch
        host = torch.ones(nbytes, dtype=torch.uint8)
        back = torch.empty(nbytes, dtype=torch.uint8)
        if self.gpu:
            host, back = host.pin_memory(), back.pin_memory()
        device = torch.empty(nbytes, dtype=torch.uint8, device=self.target)

        def copier(to, source):
            def fn(reps):
                for _ in range(reps):
                    to.copy_(source, non_blocking=True)
                self.sync()
            return fn

        return copier(device, host), copier(back, device)

    def matmul_support(self):
        if not self.gpu:
            why = "not measured on a CPU (fp32 only: no expectation there, and slow)"
            return {"fp32": None, "fp16": why, "bf16": why}
        major, minor = self.torch.cuda.get_device_capability(self.target)
        cc = "%d.%d" % (major, minor)
        return {"fp32": None,
                "fp16": None if major >= 7 else "no tensor cores (compute capability %s)" % cc,
                "bf16": None if major >= 8 else "no bf16 tensor cores (compute capability %s)" % cc}

    def matmul_fn(self, n, dtype):
        torch = self.torch
        kind = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[dtype]
        a = torch.randn(n, n, device=self.target).to(kind)
        b = torch.randn(n, n, device=self.target).to(kind)
        out = torch.empty(n, n, device=self.target, dtype=kind)
        flags = torch.backends.cuda.matmul

        def fn(reps):
            tf32 = flags.allow_tf32
            flags.allow_tf32 = False  # fp32 is measured as FP32, not TF32
            try:
                for _ in range(reps):
                    torch.mm(a, b, out=out)
                self.sync()
            finally:
                flags.allow_tf32 = tf32
        return fn

    def memory(self):
        free, total = self.torch.cuda.mem_get_info(self.target)
        return {"free_bytes": int(free), "total_bytes": int(total), "limit_bytes": None,
                "source": "torch.cuda.mem_get_info (cudaMemGetInfo)"}

    def allocate(self, nbytes):
        return self.torch.empty(nbytes, dtype=self.torch.uint8, device=self.target)

    def release(self):
        gc.collect()
        self.torch.cuda.empty_cache()


def torch_device(torch, device):
    kind, index = device.split(":")
    return torch.device("cpu") if kind == "cpu" else torch.device("cuda", int(index))


def torch_name(where, asked):
    """envcheck's name of a torch.device; torch has one CPU device, named as asked."""
    if where.type == "cpu":
        return asked if asked.startswith("cpu:") else "cpu:0"
    return kit.normalise(where.type, where.index)


def torch_model(torch, seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(kit.FEATURES, 32), torch.nn.ReLU(),
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
    return {"ms": kit.median(times[1:]) * 1000.0, "loss_first": loss_first,
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


def rank_fit(spec, say):
    """One rank of the multi-replica check (the runner's ``rank_main``): join the process
    group, train this rank's share, wait for the others; its facts for ``ddp_verdict``."""
    say("phase importing torch")
    import datetime

    import torch
    from torch.nn.parallel import DistributedDataParallel

    rank, world, device = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), spec["device"]
    dist = torch.distributed
    target = torch_device(torch, device)
    if spec["threads"]:
        torch.set_num_threads(spec["threads"])
    if target.type == "cuda":
        torch.cuda.set_device(target)
    say("phase joining the process group")
    dist.init_process_group(spec["backend"], init_method="env://", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=spec["timeout"]))
    say("phase training")
    result = ddp_fit(torch, DistributedDataParallel, target, spec, rank, world,
                     lambda step: say("step %d" % step))
    if spec.get("level", 2) >= 3:
        say("phase timing all-reduce")
        result["allreduce"] = rank_allreduce(torch, dist, target)
    say("phase waiting for the other ranks to finish")
    dist.barrier()
    return result


def rank_allreduce(torch, dist, target):
    """Level 3: this rank's time per all-reduce (sum) of the figure's bytes of float32."""
    gpu = target.type == "cuda"
    buffer = torch.zeros(kit.allreduce_bytes(gpu) // 4, dtype=torch.float32, device=target)

    def sync():
        if gpu:
            torch.cuda.synchronize(target)

    try:
        return kit.allreduce_in_rank(lambda: dist.all_reduce(buffer), sync, gpu)
    except Exception as exc:
        return {"error": "%s: %s" % (type(exc).__name__, exc)}


def ddp_fit(torch, ddp, target, spec, rank, world, on_step):
    """This rank's share: batch rows of each global batch of world x batch rows."""
    batch, device = spec["batch"], spec["device"]
    width = batch * world
    x, y = kit.make_data(spec["seed"], spec["steps"] * width)
    xs, ys = _tensor(torch, x).to(target), _tensor(torch, y).to(target)
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


