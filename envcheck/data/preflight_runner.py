"""envcheck preflight runner: a node's probes, or its rank of the fleet's collective, run by
the env's own python (``envcheck preflight probe|collective``, which ``envcheck fleet
preflight`` runs on every node). Standard library only, Python >= 3.7, like
``smoke_runner.py``, whose helpers it loads by path: the framework's folder
(``frameworks/<name>/preflight.py``), the rank supervisor and level 3's figures.

Input: one JSON job, the first argument:

    {"mode": "probe", "framework": "torch", "devices": ["gpu:0", "gpu:1"] or ["cpu:0"],
     "samples": 5, "min_seconds": 0.2, "timeout": 60}
    {"mode": "collective", "framework": "torch", "device": "gpu:0" or "cpu:0",
     "samples": 5, "min_seconds": 0.2, "timeout": 30}

``probe``: one rank per GPU (nccl), or two ranks on the CPU (gloo, one thread each: the CPU
counterpart of an all-reduce inside the node), each running the framework's ``rank_probe``;
``timeout`` bounds the whole. ``collective``: this process is the node's rank of the fleet's
process group (RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT in the environment), running
``rank_collective``; ``timeout`` is the process group's.

Output: one JSON document on the real stdout (fd 1 points at stderr meanwhile, as in the
smoke runner): ``{"error", "build", "devices": {device: {figure: ...}}, "allreduce"}``
(probe) or ``{"error", "build", "allreduce", "rank", "world"}`` (collective). Exit codes:
0 measured, 1 a measurement failed (``error`` says which rank and why), 2 a malformed job,
3 the framework's preflight part could not be loaded.
"""
import importlib.util
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
MODES = ("probe", "collective")


def load_smoke_runner():
    """``smoke_runner.py`` as a module: ``load_part``, ``run_ranks``, ``error_text``."""
    name = "envcheck_smoke_runner"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, os.path.join(HERE, "smoke_runner.py"))
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def read_job(argv):
    job = json.loads(argv[1])
    if not isinstance(job, dict) or job.get("mode") not in MODES:
        raise ValueError("the job must be a JSON object with mode probe or collective")
    for key in ("framework", "samples", "min_seconds", "timeout"):
        if key not in job:
            raise ValueError("the job has no " + key)
    if job["mode"] == "probe" and not job.get("devices"):
        raise ValueError("a probe job names its devices")
    return job


def say(text):
    sys.stderr.write("envcheck-preflight: " + text + "\n")
    sys.stderr.flush()


def probe(runner, job):
    """The node's probes: one rank per GPU, or two on the CPU (see the module docstring)."""
    devices = job["devices"]
    gpu = any(d.startswith("gpu:") for d in devices)
    ranks_on = devices if gpu else [devices[0], devices[0]]
    extra = {"samples": job["samples"], "min_seconds": job["min_seconds"]}
    ranks, waited = runner.run_ranks(ranks_on, "nccl" if gpu else "gloo",
                                     {"multi_timeout": job["timeout"]}, 0 if gpu else 1,
                                     job["framework"], "preflight:rank_probe", extra)
    document = {"error": None, "build": None, "devices": {}, "allreduce": None,
                "ranks": len(ranks), "seconds": round(waited, 3)}
    if not all(rank.answered for rank in ranks):
        stories = sorted(rank.story(waited) for rank in ranks if not rank.answered)
        document["error"] = "; ".join(words for _, words in stories)
        return document, 1
    for rank in ranks:
        if rank.result.get("figures") is not None:
            document["devices"][rank.device] = rank.result["figures"]
        document["build"] = document["build"] or rank.result.get("build")
    document["allreduce"] = ranks[0].result.get("allreduce")
    return document, 0


def collective(runner, job):
    """This node's rank of the fleet's collective, in this process."""
    module = runner.load_part(job["framework"], "preflight")
    spec = dict(job, backend="nccl" if job["device"].startswith("gpu:") else "gloo",
                threads=0 if job["device"].startswith("gpu:") else 1)
    try:
        result = module.rank_collective(spec, say)
    except Exception as exc:
        return {"error": runner.error_text(exc), "build": None, "allreduce": None}, 1
    return dict(result, error=None), 0


def main(argv):
    real_stdout = os.dup(1)
    os.dup2(2, 1)  # everything the framework prints goes to stderr
    try:
        job = read_job(argv)
    except (ValueError, IndexError) as exc:
        document, code = {"error": "bad job: %s" % exc}, 2
    else:
        try:
            runner = load_smoke_runner()
            runner.load_part(job["framework"], "preflight")
        except Exception as exc:  # noqa: BLE001 - a framework without probes is an answer
            document, code = {"error": "can't load %s's preflight probes: %s" % (job["framework"], exc)}, 3
        else:
            document, code = (probe if job["mode"] == "probe" else collective)(runner, job)
    sys.stdout.flush()
    sys.stderr.flush()
    os.write(real_stdout, (json.dumps(document) + "\n").encode("utf-8"))
    os.close(real_stdout)
    os._exit(code)  # skip interpreter teardown: a process group may hang at exit after an error


if __name__ == "__main__":
    main(sys.argv)
