"""The views: each result class's renderer for each form it has, listed here and nowhere else.

``VIEWS[form]`` maps a result class, named ``"module:Class"``, to its renderer, named
``"view module:function"`` (a module of this package). Both are names, not objects, so that
rendering one result imports its own view module only, and no use case: the gate's answer
renders a ``GateResult`` without loading every command's result types. JSON is no view: a
result's ``to_json`` is its document. A text renderer returns the text for stdout, or
(stdout, stderr) when it has warnings to tell apart; a Markdown one returns the document; an
HTML one the page.
"""
from __future__ import annotations

import importlib

TEXT = {
    "envcheck.host.probe:HostState": "text:host_state",
    "envcheck.host.level1:HealthReport": "health:health_report",
    "envcheck.usecases.compat:CompatResult": "text:compat",
    "envcheck.usecases.selection:Selection": "text:selection",
    "envcheck.usecases.gate:GateResult": "text:gate",
    "envcheck.usecases.validate_envs:ValidationRun": "text:validation",
    "envcheck.usecases.provision:ProvisionResult": "text:provision",
    "envcheck.usecases.doctor:Diagnosis": "text:doctor",
    "envcheck.usecases.catalogue:PresetListing": "text:preset_listing",
    "envcheck.usecases.catalogue:PresetDetail": "text:preset_detail",
    "envcheck.usecases.catalogue:EnvListing": "text:env_listing",
    "envcheck.usecases.catalogue:EnvDetail": "text:env_detail",
    "envcheck.usecases.locking:LockResult": "locks:lock_written",
    "envcheck.usecases.drift:VerifyResult": "locks:verified",
    "envcheck.validation.diagnose:Diagnosis": "text:diagnosis",
    "envcheck.usecases.report:StoredReports": "report:stored_reports",
    "envcheck.usecases.kernels:KernelInstalled": "kernel:kernel_installed",
    "envcheck.usecases.kernels:KernelListing": "kernel:kernel_listing",
    "envcheck.usecases.kernels:KernelsRemoved": "kernel:kernels_removed",
    "envcheck.usecases.cache:CacheInfo": "cache:cache_info",
    "envcheck.usecases.cache:CacheCleaned": "cache:cache_cleaned",
    "envcheck.fleet.aggregate:FleetResult": "fleet:fleet",
    "envcheck.usecases.preflight_node:PreflightFacts": "preflight:node_facts",
    "envcheck.usecases.preflight_node:Measurement": "preflight:measurement",
    "envcheck.usecases.preflight_node:CollectiveMeasurement": "preflight:measurement",
    "envcheck.usecases.preflight_mark:PreflightMark": "preflight:mark",
    "envcheck.preflight.result:PreflightResult": "preflight:fleet_preflight",
    "envcheck.usecases.slurm_health:NodeCheck": "slurm:node_check",
    "envcheck.usecases.slurm_jobs:JobCheck": "slurm:node_check",
    "envcheck.usecases.slurm_jobs:EpilogCheck": "slurm:node_check",
    "envcheck.usecases.slurm_gres:GresResult": "slurm:gres_result",
}
MARKDOWN = {
    "envcheck.usecases.bugreport:BugReport": "markdown:bug_report",
}
HTML = {
    "envcheck.usecases.report:StoredReports": "report:html_page",
}
VIEWS = {"text": TEXT, "markdown": MARKDOWN, "html": HTML}


def renderer(result: object, form: str):
    """The function that renders ``result`` in ``form`` ("text", "markdown", "html")."""
    module, function = VIEWS[form][_name(result)].split(":")
    return getattr(importlib.import_module(f"{__name__}.{module}"), function)


def _name(result: object) -> str:
    cls = type(result)
    return f"{cls.__module__}:{cls.__name__}"
