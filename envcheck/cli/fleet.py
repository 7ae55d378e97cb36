"""`envcheck fleet doctor|gpu|labels|validate|check|provision`: the same command on every node of a
Ray cluster (or of Slurm, `--engine slurm`), one aggregated answer; `envcheck fleet preflight`:
the nodes compared with each other (``envcheck.preflight``).

Each subcommand takes the fleet's options, then the options of the single-host command of
its name, which are checked here (a bad one is exit 2 before the cluster is asked) and passed
to every node. Two are the fleet's own: ``--json`` (the fleet's document; every node is asked
for JSON anyway) and ``--timeout`` (how long the fleet waits for each node's answer); the
node command's ``--timeout`` (seconds per device) is given as ``--device-timeout``.

An index option whose URLs carry credentials (``provision --index-url https://user:token@...``)
is not passed on the nodes' command line, where ``ps`` shows it, nor kept in the fleet's
document: all the values of that option reach each node's envcheck in the ``PIP_*`` variable
it reads as pip configuration, the same setting as the option (pip splits them on spaces).
"""
from __future__ import annotations

import click

from ..durations import seconds
from ..fleet.survey import BUSY_AFTER, COMMANDS, survey
from ._common import declare, index_settings, pass_ctx
from .options import ENV, GPU_LEVEL, JSON, LEVEL, Option, count

SUMMARIES = {
    "gpu": "The driver, its CUDA version and the GPUs of every node.",
    "labels": "Every node's labels (envcheck labels): its envs' verdicts, ready envs and GPU health.",
    "check": "The pre-training gate on every node (answers from each node's stored validation).",
    "doctor": "Each node's GPU state, envs and selected env validated, next steps.",
    "validate": "Validate envs on every node, each holding its node's GPUs through Ray.",
    "provision": "The installer hook on every node (idempotent), each holding its node's GPUs.",
}
DEVICE_TIMEOUT = ("doctor", "validate", "provision")  # node commands with --timeout per device
LEVELLED = ("doctor", "validate", "check", "provision")  # node commands with --level
# the nodes' --level, passed on only when given (a node's default is 2, an older envcheck's too)
FLEET_LEVEL = Option(LEVEL.flag, LEVEL.dest, LEVEL.help + "; passed to every node", None, LEVEL.parse,
                     LEVEL.metavar)
FLEET_GPU_LEVEL = Option(GPU_LEVEL.flag, GPU_LEVEL.dest, GPU_LEVEL.help + "; passed to every node", None,
                         GPU_LEVEL.parse, GPU_LEVEL.metavar)
REFUSED = {"--markdown": "the fleet asks each node for JSON; its text is a table of the nodes",
           "--format": "the fleet asks each node for JSON; its own --json gives the fleet's document"}
SECRET_CARRIERS = {"--index-url": "PIP_INDEX_URL", "--extra-index-url": "PIP_EXTRA_INDEX_URL",
                   "--find-links": "PIP_FIND_LINKS"}

ADDRESS = Option("--address", "address", "the cluster (default: $RAY_ADDRESS, else the one started "
                 "on this machine)", None, str, "HOST:PORT")
NODES = Option("--nodes", "nodes", "only these nodes: labels KEY=VALUE or node ids (or prefixes), "
               "comma-separated", None, str, "SELECTOR")
INCLUDE_HEAD = Option("--include-head", "include_head", "ask the head node even if it has no GPUs",
                      False, is_flag=True)
MIN_READY = Option("--min-ready", "min_ready", "exit 0 when at least N nodes are ready (default: "
                   "every node asked)", None, count, "N")
DEVICE_TIMEOUT_OPTION = Option("--device-timeout", "device_timeout", "the nodes' own --timeout "
                               "(seconds per device)", None, seconds, "SECONDS")
BUSY_AFTER_OPTION = Option("--busy-after", "busy_after", "a node whose GPUs other Ray work holds "
                           "this long is `busy`", BUSY_AFTER, seconds, "SECONDS", show_default=True)


ENGINE = Option("--engine", "engine", "ray: a Ray cluster's nodes; slurm: Slurm's, through srun (inside an "
                "allocation its nodes, else --partition/--nodelist)", "ray", lambda text: _choice(text, ENGINES, "engine"),
                "ray|slurm", show_default=True)
PARTITION = Option("--partition", "partition", "with --engine slurm: the nodes of this partition", None, str,
                   "PARTITION")
NODELIST = Option("--nodelist", "nodelist", "with --engine slurm: these nodes (a Slurm host list, n[1-4])", None,
                  str, "NODES")
ENGINES = ("ray", "slurm")
RAY_ONLY = {"address": "--address", "nodes": "--nodes", "include_head": "--include-head"}
SLURM_ONLY = {"partition": "--partition", "nodelist": "--nodelist"}


def _choice(text: str, choices: tuple[str, ...], what: str) -> str:
    if text not in choices:
        from ..errors import UsageError

        raise UsageError(f"unknown {what} {text!r}", f"use one of: {', '.join(choices)}")
    return text


def _engine_options(engine: str, given: dict) -> None:
    """An option of the other engine is a usage error, said before anything is asked."""
    other = SLURM_ONLY if engine == "ray" else RAY_ONLY
    for dest, flag in other.items():
        if given.get(dest):
            raise click.UsageError(f"{flag} is for --engine {'slurm' if engine == 'ray' else 'ray'}, not {engine}")


def timeout_option(default: float) -> Option:
    return Option("--timeout", "timeout", "how long to wait for each node's answer; a node that "
                  "gave none by then is `lost`", default, seconds, "SECONDS", show_default=True)


@click.group()
def fleet() -> None:
    """Run an envcheck command on every node of a Ray cluster or of Slurm; one aggregated answer.

    Ray (the default): needs Ray on every node, in the Python that runs envcheck: pip install
    'envcheck[fleet]'. Run it on a node of the cluster (a Ray driver attaches to its local
    raylet). Each node runs its own envcheck (the `envcheck` on its PATH, else `python -m
    envcheck` of the Python Ray runs there) with its own env home and GPUs.

    --engine slurm: one srun step, a task per node, inside an allocation (salloc, sbatch) on
    its nodes, else on those of --partition/--nodelist (drained and down nodes are left out,
    with their reasons); each node runs the `envcheck` on the PATH srun gives its tasks.

    Exit 0 when every node asked is ready (or at least --min-ready of them), 1 otherwise, 2 on
    bad usage, no cluster to connect to, or no Slurm allocation or nodes to run on.
    """


def _forwarded(name: str, args: tuple[str, ...], device_timeout: float | None,
               level: int | None = None) -> tuple[list[str], dict[str, str]]:
    """The single-host command's options, checked by that command's own parser, and the
    variables that carry its index URLs with credentials (see the module docstring)."""
    from .main import main

    for arg in args:
        flag = arg.split("=", 1)[0]
        if flag in REFUSED:
            raise click.UsageError(f"{flag} can't be used with envcheck fleet: {REFUSED[flag]}")
    forwarded = [*args, *(["--timeout", f"{device_timeout:g}"] if device_timeout is not None else []),
                 *(["--level", str(level)] if level is not None else [])]
    single = main.get_command(click.get_current_context(), name)
    parsed = single.make_context(f"envcheck {name}", list(forwarded))
    if "index_url" in parsed.params:
        index_settings(parsed.params["index_url"], parsed.params["extra_index_url"],
                       parsed.params["find_links"], parsed.params["no_index"])
    return _credentials_to_environment(forwarded)


def _credentials_to_environment(args: list[str]) -> tuple[list[str], dict[str, str]]:
    from ..envs.indexes import redact

    values: dict[str, list[str]] = {flag: [] for flag in SECRET_CARRIERS}
    rest: list[str] = []
    tokens = iter(args)
    for arg in tokens:
        flag, eq, value = arg.partition("=")
        if flag in SECRET_CARRIERS:
            values[flag].append(value if eq else next(tokens, ""))
        else:
            rest.append(arg)
    environment = {}
    for flag, found in values.items():
        if any(redact(v) != v for v in found):
            environment[SECRET_CARRIERS[flag]] = " ".join(found)
        else:
            rest += [token for v in found for token in (flag, v)]
    return rest, environment


def _subcommand(name: str) -> click.Command:
    spec = COMMANDS[name]

    @pass_ctx
    def run(ctx, engine, address, nodes, include_head, partition, nodelist, timeout, min_ready, as_json, args,
            device_timeout=None, busy_after=BUSY_AFTER, level=None):
        _engine_options(engine, {"address": address, "nodes": nodes, "include_head": include_head,
                                 "partition": partition, "nodelist": nodelist})
        forwarded, environment = _forwarded(name, args, device_timeout, level)
        ctx.finish(survey(name, forwarded, environment, address=address, nodes=nodes,
                          include_head=include_head, timeout=timeout, min_ready=min_ready,
                          busy_after=busy_after, engine=engine, partition=partition, nodelist=nodelist), as_json)

    run.__doc__ = (f"{SUMMARIES[name]}\n\nOptions after the fleet's own are those of `envcheck {name}` "
                   f"(see `envcheck {name} --help`), passed to every node.")
    options = [ENGINE, ADDRESS, NODES, INCLUDE_HEAD, PARTITION, NODELIST, timeout_option(spec.timeout), MIN_READY]
    options += [DEVICE_TIMEOUT_OPTION] if name in DEVICE_TIMEOUT else []
    options += [BUSY_AFTER_OPTION] if spec.holds_gpus else []
    options += [FLEET_LEVEL] if name in LEVELLED else [FLEET_GPU_LEVEL] if name == "gpu" else []
    command = declare(*options, JSON)(click.argument("args", nargs=-1, type=click.UNPROCESSED,
                                                   metavar=f"[{name.upper()} OPTIONS]...")(run))
    return click.command(name, context_settings={"ignore_unknown_options": True})(command)


for _name in SUMMARIES:
    fleet.add_command(_subcommand(_name))


def tolerance(text: str) -> float:
    """``15%`` or ``15`` (percent): a fraction above 0 and below 1."""
    from ..errors import UsageError

    spelt = text.strip().rstrip("%").strip()
    try:
        value = float(spelt) / 100
    except ValueError:
        value = -1.0
    if not 0 < value < 1:
        raise UsageError(f"bad tolerance {text!r}", "give a percentage above 0 and below 100, e.g. 15%")
    return value


def busbw(text: str) -> float:
    from ..errors import UsageError

    try:
        value = float(text.strip().lower().removesuffix("gb/s"))
    except ValueError:
        value = -1.0
    if not 0 < value < 1e6:
        raise UsageError(f"bad bus bandwidth {text!r}", "give GB/s above 0, e.g. 40")
    return value


def exclude_form(text: str) -> str:
    from ..preflight.result import EXCLUDES

    return _choice(text, EXCLUDES, "exclude list")


BUDGET = Option("--budget", "budget", "the whole preflight within this (seconds, or 60s, 2m)", "60s", seconds,
                "DURATION", show_default=True)
TOLERANCE = Option("--tolerance", "tolerance", "a figure slower than its model's median by more than this (and "
                   "than the fleet's spread says is noise) is a straggler's", "15%", tolerance, "PERCENT",
                   show_default=True)
MIN_BUSBW = Option("--min-busbw", "min_busbw", "the collective across nodes is slow below this bus bandwidth "
                   "(GB/s), and the halving looks for the fault (default: only a failed or unfinished one)",
                   None, busbw, "GB/S")
EXCLUDE = Option("--exclude", "exclude", "print only the flagged nodes, ready to paste: slurm (a host list for "
                 "srun --exclude), ray (a label selector), hostlist (one host per line)", None, exclude_form,
                 "slurm|ray|hostlist")
PREFLIGHT_ENV = Option(ENV.flag, ENV.dest, "the env on every node (one content digest everywhere); auto: the one "
                       "each node's `envcheck select` picks", "auto", str, "NAME|auto", show_default=True)


@fleet.command("preflight")
@declare(PREFLIGHT_ENV, BUDGET, ENGINE, ADDRESS, NODES, INCLUDE_HEAD, PARTITION, NODELIST, TOLERANCE, MIN_BUSBW,
         EXCLUDE, JSON)
@pass_ctx
def preflight(ctx, env_name, budget, engine, address, nodes, include_head, partition, nodelist, tolerance,
              min_busbw, exclude, as_json):
    """Before a multi-node job: find the slow GPU and the bad link by comparing the fleet with itself.

    On every node the same probes on every device of the env's framework (matmul, host<->device
    copies, an all-reduce inside the node; the CPU's counterparts on a node without GPUs), each
    the median of 5 samples of >= 0.2 s; nodes on one machine (one boot id) in turn. Then one
    collective across the nodes (torch.distributed: nccl on GPUs, gloo on CPUs) with its bus
    bandwidth; when it fails, doesn't finish in its share of --budget or is below --min-busbw,
    halving names the node or pair at fault. Each figure is judged against its model's median
    across the fleet (and level 3's table beside); each node keeps its verdict
    (envcheck.io/preflight in `envcheck labels`).

    Exit 0 when every node is healthy, 1 when a straggler, a bad link or a lost node is named,
    2 when nothing could be measured: bad input (fewer than two nodes, a budget too small for
    one round), or the env missing or different on some nodes (named).
    """
    from ..preflight.run import Options
    from ..preflight.run import preflight as run_preflight

    _engine_options(engine, {"address": address, "nodes": nodes, "include_head": include_head,
                             "partition": partition, "nodelist": nodelist})
    if exclude and as_json:
        raise click.UsageError("--exclude prints the exclude list alone: drop --json (the document has it as \"exclude\")")
    result = run_preflight(Options(env_name, budget, tolerance, engine, address, nodes, include_head, partition,
                                   nodelist, min_busbw))
    if exclude:
        click.echo(result.exclude(exclude))
        if result.exit_code:
            raise click.exceptions.Exit(result.exit_code)
        return
    ctx.finish(result, as_json)
