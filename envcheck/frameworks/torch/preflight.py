"""PyTorch's preflight probes (``envcheck fleet preflight``), loaded by path by envcheck's
preflight runner inside the env's interpreter: standard library and torch only, Python 3.7.

``rank_probe(spec, say)``: one rank of a node's probes. The runner starts one rank per GPU, or
two on the CPU (the smoke runner's rank supervisor, ``run_ranks``); each joins the node's
process group (nccl on GPUs, gloo on the CPU), measures its device with level 3's operations
(``smoke.TorchFigures``: torch.mm with TF32 off, copies from and to pinned host memory; on
the CPU only rank 0 does, on one thread, one copy direction), then every rank all-reduces
across the node. Every figure is the median of several samples of at least ``min_seconds``
(``smoke_figures.median_of``), the same sizes on every node.

``rank_collective(spec, say)``: this node's rank of the fleet's collective: it joins the
process group its environment names (``env://``: RANK, WORLD_SIZE, MASTER_ADDR,
MASTER_PORT), one rank per node on its first GPU (nccl) or its CPU (gloo, one thread), and
times the same all-reduce; ``busbw`` counts the nodes.
"""
import datetime
import os

import envcheck_smoke as kit

NAME = os.path.basename(os.path.dirname(os.path.abspath(__file__)))
NEEDS = ("torch",)


def build(torch):
    """The framework facts a fleet compares: versions, and NCCL's where CUDA is."""
    nccl = None
    if torch.cuda.is_available():
        try:
            found = torch.cuda.nccl.version()
            nccl = ".".join(str(part) for part in found) if isinstance(found, tuple) else str(found)
        except Exception:  # noqa: BLE001 - a build without NCCL: none to compare
            nccl = None
    return {"framework": NAME, "version": torch.__version__, "cuda_version": torch.version.cuda,
            "nccl_version": nccl, "gpus_seen": torch.cuda.device_count()}


def _join(torch, spec, rank, world):
    dist = torch.distributed
    dist.init_process_group(spec["backend"], init_method="env://", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=spec["timeout"]))
    return dist


def _setup(torch, spec):
    smoke = kit.load_backend(NAME)
    target = smoke.torch_device(torch, spec["device"])
    if spec.get("threads"):
        torch.set_num_threads(spec["threads"])
    if target.type == "cuda":
        torch.cuda.set_device(target)
    return smoke, target


def allreduce(torch, dist, target, spec, world, how):
    """The all-reduce (sum) of the figure's bytes across the group, timed in every rank: each
    sample counts its slowest rank, so all ranks agree on the figure."""
    figures = kit.load_figures()
    gpu = target.type == "cuda"
    nbytes = figures.allreduce_bytes(gpu)
    buffer = torch.zeros(nbytes // 4, dtype=torch.float32, device=target)

    def sync():
        if gpu:
            torch.cuda.synchronize(target)

    def agree(seconds):
        found = torch.tensor([seconds], dtype=torch.float64, device=target)
        dist.all_reduce(found, op=dist.ReduceOp.MAX)
        return float(found.item())

    def fn(reps):
        for _ in range(reps):
            dist.all_reduce(buffer)
        sync()

    seconds, facts = figures.median_of(spec["min_seconds"], spec["samples"], agree)(fn)
    reps = facts.pop("reps")
    return figures.busbw_figure(nbytes, seconds, world, reps, how, **facts)


def rank_probe(spec, say):
    """One rank of a node's probes (see the module docstring)."""
    say("phase importing torch")
    import torch

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    smoke, target = _setup(torch, spec)
    gpu = target.type == "cuda"
    say("phase joining the node's process group")
    dist = _join(torch, spec, rank, world)
    result = {"device": spec["device"], "figures": None, "allreduce": None, "build": None}
    if gpu or rank == 0:
        say("phase measuring " + spec["device"])
        figures = kit.load_figures()
        size = figures.SIZES["gpu" if gpu else "cpu"]
        clock = figures.median_of(spec["min_seconds"], spec["samples"])
        ops = smoke.TorchFigures(torch, target)
        found = figures.copy_figures(ops, size, clock, ("copy_h2d", "copy_d2h") if gpu else ("copy_h2d",))
        found.update(figures.matmul_figures(ops, size, clock))
        result["figures"] = found
    say("phase all-reduce inside the node")
    dist.barrier()
    how = "torch.distributed.all_reduce over %s, %d processes on this node" % (spec["backend"], world)
    if world > 1:
        result["allreduce"] = allreduce(torch, dist, target, spec, world, how)
    else:
        result["allreduce"] = kit.load_figures().skipped("GB/s", "one device: nothing to all-reduce inside the node")
    if rank == 0:
        result["build"] = build(torch)
    dist.barrier()
    dist.destroy_process_group()
    return result


def rank_collective(spec, say):
    """This node's rank of the fleet's collective (see the module docstring)."""
    say("phase importing torch")
    import torch

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    master = os.environ.get("MASTER_ADDR", "")
    if (master.startswith("127.") or master == "localhost") and spec["backend"] == "gloo":
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")  # every rank is on this host
    _, target = _setup(torch, spec)
    say("phase joining the fleet's process group (rank %d of %d)" % (rank, world))
    dist = _join(torch, spec, rank, world)
    say("phase all-reduce across the nodes")
    how = "torch.distributed.all_reduce over %s, %d nodes" % (spec["backend"], world)
    figure = allreduce(torch, dist, target, spec, world, how)
    dist.barrier()
    dist.destroy_process_group()
    return {"rank": rank, "world": world, "device": spec["device"], "allreduce": figure,
            "build": build(torch)}
