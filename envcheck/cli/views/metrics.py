"""A ``Readiness`` (``usecases.readiness``) as Prometheus metrics, and the text exposition format;
node labels (``usecases.node_labels``) as a node-feature-discovery features file.

``families(readiness)`` names every metric once (docs/prometheus.md lists them);
``exposition(families)`` writes the text format (0.0.4) byte for byte as
``prometheus_client.generate_latest`` writes the same gauge families (a test holds the two
equal), without importing it: a scrape and the one-shot `envcheck metrics` pay for neither its
import nor its registry.

Values: ready, stale and the ``_info`` gauges are 1 or 0; ``envcheck_gpu_health`` is 1 for a
check that passed (or found only information), 0.5 for degraded, 0 for not-ready and NaN for a
check this GPU can't answer (n/a: its own answer, never a pass).
"""
from __future__ import annotations

import math
from typing import Any, NamedTuple

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
CHECK_VALUES = {"pass": 1.0, "info": 1.0, "degraded": 0.5, "not-ready": 0.0, "n/a": math.nan}


class Family(NamedTuple):
    name: str
    help: str
    samples: list[tuple[dict[str, str], float]]


def families(readiness: Any) -> list[Family]:
    envs, gpus = readiness.envs, readiness.gpus
    return [
        Family("envcheck_env_ready", "1 when the env's stored validation is current and ready or degraded; "
               "verdict says which, or why not (never-validated, unreadable, stale, not-ready, incomplete, broken)",
               [({"env": e.name, "framework": e.framework, "variant": e.variant, "verdict": e.verdict},
                 1.0 if e.ready else 0.0) for e in envs]),
        Family("envcheck_env_validated_timestamp_seconds", "When the env's stored validation was made "
               "(Unix time)", [({"env": e.name}, e.validated) for e in envs if e.validated is not None]),
        Family("envcheck_env_report_stale", "1 when the env or host changed since its stored validation "
               "(its fingerprint differs)", [({"env": e.name}, 1.0 if e.stale else 0.0)
                                             for e in envs if e.stale is not None]),
        Family("envcheck_smoke_seconds_per_step", "Seconds per step of the env's smoke fit on each device, "
               "as its stored validation measured", [({"env": e.name, "device": device}, seconds)
                                                      for e in envs for device, seconds in e.seconds_per_step.items()]),
        Family("envcheck_multi_device_efficiency", "Scaling efficiency of the env's multi-device smoke fit "
               "(1 = linear)", [({"env": e.name}, e.efficiency) for e in envs if e.efficiency is not None]),
        Family("envcheck_gpu_health", "Level-1 health check of each GPU, read now: 1 pass, 0.5 degraded, "
               "0 not-ready, NaN not answerable on this GPU",
               [({"gpu": str(g.index), "uuid": g.uuid, "check": check}, CHECK_VALUES.get(state, math.nan))
                for g in gpus for check, state in g.checks.items()]),
        *_preflight(readiness.preflight),
        Family("envcheck_driver_info", "The NVIDIA driver and the newest CUDA it runs",
               [({"driver": readiness.driver, "cuda": readiness.cuda or ""}, 1.0)] if readiness.driver else []),
        Family("envcheck_build_info", "The envcheck that exports these metrics", [({"version": readiness.version}, 1.0)]),
    ]


def _preflight(mark: Any) -> list[Family]:
    """The node's verdict in the last fleet preflight; no samples when none was kept."""
    from ...usecases.preflight_mark import OK

    return [
        Family("envcheck_preflight_ok", "1 when the last fleet preflight found this node healthy (or had "
               "nothing to judge it against), else 0; verdict says which",
               [({"verdict": mark.verdict}, 1.0 if mark.verdict in OK else 0.0)] if mark else []),
        Family("envcheck_preflight_timestamp_seconds", "When the last fleet preflight judged this node (Unix time)",
               [({}, mark.at)] if mark else []),
        Family("envcheck_preflight_ratio", "This node's figure over its model's median across the fleet, in the "
               "last fleet preflight (1 = the median)",
               [({"figure": name}, ratio) for name, ratio in mark.ratios.items()] if mark else []),
    ]


def exposition(found: list[Family]) -> str:
    """The text format, as ``prometheus_client.generate_latest`` writes gauge families."""
    out = []
    for family in found:
        text = family.help.replace("\\", r"\\").replace("\n", r"\n")
        out.append(f"# HELP {family.name} {text}\n# TYPE {family.name} gauge\n")
        for labels, value in family.samples:
            pairs = ",".join(f'{k}="{_escaped(v)}"' for k, v in sorted(labels.items()))
            out.append(f"{family.name}{{{pairs}}} {_number(value)}\n" if pairs else f"{family.name} {_number(value)}\n")
    return "".join(out)


def features_file(labels: Any) -> str:
    """A ``NodeLabels`` as node-feature-discovery's ``features.d`` file: ``KEY=VALUE`` lines."""
    return "".join(f"{key}={value}\n" for key, value in labels.labels.items())


def _escaped(value: str) -> str:
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


def _number(value: float) -> str:
    """Go's float formatting, as prometheus_client's ``floatToGoString``."""
    d = float(value)
    if d == math.inf:
        return "+Inf"
    if d == -math.inf:
        return "-Inf"
    if math.isnan(d):
        return "NaN"
    s = repr(d)
    dot = s.find(".")
    if d > 0 and dot > 6:
        mantissa = f"{s[0]}.{s[1:dot]}{s[dot + 1:]}".rstrip("0.")
        return f"{mantissa}e+{dot - 1:02d}"
    return s
