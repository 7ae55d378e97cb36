"""Text for people, one renderer per result class (JSON comes from the result itself)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..render import colour, table

if TYPE_CHECKING:
    from ...host.probe import HostState
    from ...usecases.selection import Selection
    from ...validation.reports import Report

NA = "N/A"
STATUS_MARK = {"pass": "ok", "warn": "WARN", "fail": "FAIL", "skip": "-"}


# -- host -------------------------------------------------------------------------------------

def host_state(state) -> str:
    """nvidia-smi-like header, one row per GPU, then per-GPU problems and warnings."""
    lines = [_header(state)]
    if state.gpus:
        rows = [("GPU", "Name", "CC", "Memory used / total", "UUID", "Visible")]
        rows += [_gpu_row(g) for g in state.gpus]
        lines += table(rows, last_free=True)
        lines += [f"GPU {g.index}: {g.status}: {g.problem}; fix: {g.fix}"
                  for g in state.gpus if g.status != "ok"]
        lines += [f"GPU {g.index}: {name} N/A ({why})"
                  for g in state.gpus for name, why in g.unavailable.items()
                  if name not in ("mig_mode", "persistence_mode")]
    lines += [f"warning: {w}" for w in state.warnings]
    reason = state.no_gpu_reason()
    err = f"envcheck: no usable GPU: {reason[0]}\nfix: {reason[1]}" if reason else ""
    return "\n".join(lines), err


def _header(state) -> str:
    if not state.ok and state.nvml_status != "no-gpu":
        return f"NVML: {state.nvml_status}"
    return (f"Driver Version: {state.driver_version or NA}   "
            f"CUDA Version: {state.cuda_driver_version or NA}   "
            f"NVML Version: {state.nvml_version or NA}")


def _gpu_row(g) -> tuple[str, ...]:
    memory = NA
    if g.memory_total_mib is not None:
        memory = f"{g.memory_used_mib} / {g.memory_total_mib} MiB"
    uuid = (g.uuid[:12] + "…") if g.uuid and len(g.uuid) > 13 else (g.uuid or NA)
    visible = f"yes (cuda:{g.cuda_index})" if g.visible else "no"
    if g.status != "ok":
        visible += f", {g.status}"
    return (str(g.index), g.name or NA, g.compute_capability or NA, memory, uuid, visible)


def host_line(host: HostState) -> str:
    from ...host.compat import probed_driver

    if host.usable_gpus:
        models: dict[str, list[int]] = {}  # eight GPUs of one model read as one line
        for g in host.usable_gpus:
            models.setdefault(f"{g.name} (cc {g.compute_capability})", []).append(g.index)
        names = ", ".join(f"{len(ix)} × {model}: {device_span([f'GPU:{i}' for i in ix]).replace('GPU:', '')}"
                          if len(ix) > 1 else f"{ix[0]}: {model}" for model, ix in models.items())
        driver, unreadable = probed_driver(host.driver_version)
        driver = driver or f"unknown ({unreadable or 'not reported'})"
        return f"driver {driver}, CUDA {host.cuda_driver_version}; GPUs {names}"
    message, fix = host.no_gpu_reason()
    return f"no usable NVIDIA GPU: {message}\n  fix: {fix}"


# -- compat -----------------------------------------------------------------------------------

def compat(result) -> str:
    build, host, source, verdict = result.build, result.host, result.source, result.verdict
    if build.gpu_capable:
        archs = " ".join(build.archs) if build.archs else "not known"
        what = f"CUDA {build.cuda}, cuDNN {build.cudnn or 'not known'}, architectures {archs}"
        what += f", compute capability {build.min_cc} or newer" if build.min_cc else ""
    else:
        what = "CPU-only"
    driver = host.driver_version or ("unknown" if host.driver_unreadable else "none")
    lines = [
        f"build: {build.label} ({what})",
        *(f"  note: {note}" for note in build.notes if build.gpu_capable),  # a CPU build's: its reason
        f"host:  driver {driver} ({source['driver']}), GPU compute "
        f"capability {', '.join(host.gpu_ccs) or 'none'} ({source['gpus']}), {host.os}, "
        f"Python {host.python or 'not checked'}",
        f"verdict: {colour(verdict.verdict)}",
    ]
    lines += [f"  - {reason}" for reason in verdict.reasons]
    lines += [f"fix: {fix}" for fix in verdict.fixes]
    return "\n".join(lines)


# -- selection, gate --------------------------------------------------------------------------

def ranking_lines(selection: Selection, indent: str = "  ") -> list[str]:
    """The ranking, the selected env marked ``*`` (none is when --require-gpu finds no GPU env)."""
    rows = [("*" if r.name == selection.selected else " ", r.name,
             r.tier + (" (GPU build)" if r.tier == "cpu" and r.build == "gpu" else ""), r.validation, r.reason)
            for r in selection.ranking]
    rows += [(" ", ex["name"], "-", "-", f"not ranked: {ex['reason']}") for ex in selection.excluded]
    return table(rows, indent)


def selection(result) -> str:
    """The ranking on stdout when there is an answer; without one, stdout stays empty (a script
    reading it gets nothing) and the ranking goes to stderr with the warning, as context."""
    lines = ranking_lines(result, "")
    warning = [f"warning: {result.warning}"] if result.warning else []
    if result.selected is None:
        return "", "\n".join(lines + warning)
    return "\n".join(lines), "\n".join(warning)


def gate(result) -> str:
    source = f"stored validation, {result.age_s:.0f} s old" if result.cached else "checked now"
    state = colour("ready" if result.ready else "NOT READY")
    lines = [f"{state}: env {result.env}: {result.reason} ({source})"]
    if result.fix:
        lines.append(f"fix: {result.fix}")
    if getattr(result, "health_problem", None):  # level 1, read now: degraded
        problem, fix = result.health_problem
        lines.append(f"warning: {problem}" + (f"; fix: {fix}" if fix else ""))
    return "\n".join(lines)


# -- validation -------------------------------------------------------------------------------

def _fmt(value, spec: str = ".2f") -> str:
    return "-" if value is None else format(value, spec)


def report_lines(report: Report) -> list[str]:
    build = report.build
    head = f"env {report.env}"
    if build.get("version"):
        head += f": {build.get('framework', '')} {build.get('version')}"
    lines = [head]
    lines += table([(c.id, STATUS_MARK[c.status], c.summary) for c in report.checks], "  ")
    if report.devices:
        rows = [("DEVICE", "STATUS", "MS/STEP", "LOSS first -> last", "NOTE")]
        for devices, d in grouped_devices(report.devices):
            loss = (f"{_fmt(d['loss_first'], '.4f')} -> {_fmt(d['loss_last'], '.4f')}"
                    if d["loss_first"] is not None else "-")
            rows.append((devices, d["status"], _fmt(d["ms_per_step"]), loss, device_note(d)))
        lines += [""] + table(rows, "  ")
    if report.speedup:
        parts = ", ".join(f"{dev} {ratio:.1f}x" for dev, ratio in report.speedup["gpu_over_cpu"].items())
        lines += ["", f"  GPU over CPU speedup: {parts}"]
    if getattr(report, "health", None):
        from .health import text_lines

        lines += ["", *text_lines(report.health)]
    fixes: dict[str, list[str]] = {}  # a fix several checks share is said once, naming them
    for c in report.checks:
        if c.fix and c.status in ("fail", "warn"):
            fixes.setdefault(c.fix, []).append(c.id)
    lines += [f"  fix ({', '.join(ids)}): {fix}" for fix, ids in fixes.items()]
    lines.append(f"verdict: {colour(report.verdict)}")
    return lines


def device_note(d: dict) -> str:
    """A device row's note: the last line of its error, else where it ran."""
    error = [ln for ln in (d.get("error") or "").splitlines() if ln.strip()]
    return error[-1].strip() if error else (f"on {d['placed_on']}" if d.get("placed_on") else "")


def grouped_devices(devices: list[dict]) -> list[tuple[str, dict]]:
    """The device rows, those that failed alike (the same status and error) as one row naming
    them all ("gpu:0-7"); a row that passed is its own (its figures are its own)."""
    groups: dict[tuple, list[dict]] = {}
    for d in devices:
        key = (d["status"], device_note(d)) if d["status"] != "pass" and d.get("error") else (id(d),)
        groups.setdefault(key, []).append(d)
    return [(device_span([d["device"] for d in members]), members[0]) for members in groups.values()]


def device_span(names: list[str]) -> str:
    """["gpu:0", "gpu:1", "gpu:2", "gpu:5"] -> "gpu:0-2, gpu:5": runs of one kind's indexes."""
    out: list[str] = []
    for name in names:
        kind, _, index = name.partition(":")
        last = out[-1].rpartition(":") if out else ("", "", "")
        if index.isdigit() and last[0] == kind and last[2].split("-")[-1].isdigit() \
                and int(last[2].split("-")[-1]) + 1 == int(index):
            out[-1] = f"{kind}:{last[2].split('-')[0]}-{index}"
        else:
            out.append(name)
    return ", ".join(out)


def validation(run) -> str | tuple[str, str]:
    if not run.reports and run.health is not None:  # level 1 with no env: the node's GPUs alone
        from .health import health_report

        return health_report(run.health)
    return "\n\n".join("\n".join(report_lines(r)) for r in run.reports)


# -- provision, doctor ------------------------------------------------------------------------

def provision(result) -> str:
    rows = [("ENV", "ACTION", "VERDICT", "REASON")]
    rows += [(o.name, o.action, o.verdict or "-", o.reason) for o in result.envs]
    lines = table(rows)
    for o in result.envs:
        lines += [f"warning ({o.name}): {w}" for w in o.warnings]
        if o.fix and not o.ok:
            lines.append(f"fix ({o.name}): {o.fix}")
        if o.log:
            lines.append(f"full installer output ({o.name}): {o.log}")
    bad = [o.name for o in result.envs if not o.ok]
    lines.append("provision: " + (colour("ok") if not bad else f"NOT ok: {', '.join(bad)}"))
    return "\n".join(lines)


def doctor(result: Any) -> str:
    health = getattr(result.report, "health", None) if result.report else None
    if isinstance(health, dict) and health.get("host_verdict") == "no-gpu":
        lines = ["host: no-gpu (no NVIDIA GPU: the env's health below says what to do if one was expected)"]
    else:
        lines = [f"host: {host_line(result.host)}"]
    lines += [f"  warning: {w}" for w in result.host.warnings]
    lines.append("envs:")
    lines += ranking_lines(result.selection)
    if result.report:
        lines += [""] + report_lines(result.report)
    lines += ["", "next steps:"] + [f"  - {step}" for step in result.next_steps]
    return "\n".join(lines)


# -- presets, envs ----------------------------------------------------------------------------

def preset_listing(result) -> str:
    from ...envs.presets import specifier_text

    rows = [("NAME", "KIND", "FRAMEWORK", "PYTHON", "TITLE")]
    rows += [(p.name + ("*" if p.origin == "user" else ""), p.kind, p.framework,
              specifier_text(p.requires_python) or "any", p.title) for p in result.presets]
    lines = table(rows)
    if any(p.origin == "user" for p in result.presets):
        lines.append(f"\n* from {result.user_dir}")
    return "\n".join(lines)


def preset_detail(result) -> str:
    from ...envs.presets import specifier_text

    preset = result.preset
    fields = [("name", preset.name), ("title", preset.title), ("kind", preset.kind),
              ("framework", preset.framework),
              ("requires-python", specifier_text(preset.requires_python) or "any"),
              ("packages", ", ".join(preset.packages))]
    if preset.kind == "gpu":
        fields += [("cuda", preset.cuda or "-"), ("cudnn", preset.cudnn or "-"),
                   ("libraries", ", ".join(preset.libraries) or "none (from pip wheels or bundled)")]
    fields += [("source", f"{preset.source} ({preset.origin})"), ("content hash", preset.content_hash[:16])]
    if preset.description:
        fields.append(("description", preset.description))
    return "\n".join(f"{label + ':':<17}{value}" for label, value in fields)


# -- diagnosis --------------------------------------------------------------------------------

def diagnosis(result) -> str:
    where = "stdin" if result.source == "-" else result.source
    lines = f"{result.lines_read} line{'s' * (result.lines_read != 1)}"
    if not result.findings:
        return f"no known GPU failure found in {where} ({lines})"
    errors = len(result.errors)
    summary = (f"{errors} error{'s' * (errors != 1)} and {len(result.findings) - errors} info "
               f"in {where} ({lines})")
    return "\n\n".join([*(render_finding(f, n) for n, f in enumerate(result.findings, 1)), summary])


def render_finding(finding, n: int) -> str:
    """Finding ``n`` of a log (the catalogue's own numbers are in the JSON, ``number``)."""
    lines = [
        f"{n}. [{finding.severity}] {finding.id}: {finding.title}",
        f"  line {finding.line_number}: {finding.line}",
    ]
    if finding.code:
        lines.append(f"  code: {_code(finding.code)}")
    lines.append(f"  cause: {finding.cause}")
    if finding.ambiguous:  # the line alone cannot tell: the candidates and what decides, no assertion
        lines.append("  could be: " + "; or ".join(finding.possible_causes))
        lines.append(f"  look at: {finding.look_at}")
    lines.append(f"  fix: {finding.fix}")
    lines += [f"  see: {link}" for link in finding.links[:2]]
    return "\n".join(lines)


def _code(code: dict) -> str:
    """``cudaErrorUnknown (999): unknown error``: the code a finding recognised, as its enumeration
    names it."""
    number = f" ({code['number']})" if code.get("number") is not None else ""
    text = code.get("message") or code.get("meaning")
    return f"{code['name']}{number}" + (f": {text}" if text and text != code["name"] else "")


def env_listing(result) -> str:
    if not result.envs:
        return f"no envs yet; {result.hint}"
    rows = [("NAME", "STATE", "PRESET", "PYTHON", "PKGS", "CREATED")]
    rows += [(e.name, e.state, f"adopted {e.adopted['kind']}: {e.path}" if e.adopted else e.preset.get("name") or "-",
              e.manifest.get("python", {}).get("version") or "-", str(len(e.packages)),
              (e.manifest.get("created") or "-")[:19]) for e in result.envs]
    return "\n".join(table(rows, last_free=False))


def env_detail(result) -> str:
    info = result.env
    if result.created and info.adopted:
        return (f"adopted {info.adopted['kind']} {info.path} as env {info.name} ({len(info.packages)} packages, "
                f"python {info.manifest['python']['version']}, {info.python}); envcheck never changes it")
    if result.created:
        created = (f"created env {info.name} ({len(info.packages)} packages, python "
                   f"{info.manifest['python']['version']}, {info.manifest['installer']}) at {info.path}")
        if result.kernel is not None:
            from .kernel import kernel_installed

            created = f"{created}\n{kernel_installed(result.kernel)}"
        return created, "\n".join(f"warning: {w}" for w in result.warnings)
    if result.changed is not None:
        return f"env {info.name}: " + (", ".join(f"{n}=={v}" for n, v in result.changed.items())
                                       or "nothing changed")
    data = info.to_json()
    if info.adopted:
        data["adopted"] = f"{info.adopted['kind']} ({info.python}); envcheck never changes it"
    lines = [f"{key + ':':16}{data[key]}" for key in
             ("name", "state", "adopted", "path", "preset", "kind", "framework", "python_version", "installer",
              "created", "updated", "linked_from", "digest", "problem", "fix") if data.get(key) is not None]
    if data.get("lock"):
        lock = data["lock"]
        lines.append(f"{'lock:':16}{lock.get('digest')} (variant {lock.get('variant')}, {lock.get('source') or '-'})")
    for soname, places in ((info.adopted or {}).get("libraries") or {}).items():  # where the loader finds each
        lines.append(f"{soname + ':':16}" + "; ".join(f"{p['path']} ({p['from']}{', loaded' if i == 0 else ''})"
                                                       for i, p in enumerate(places)))
    lines.append(f"{'packages:':16}{len(info.packages)}")
    lines += [f"  {name}=={version}" for name, version in info.packages.items()]
    return "\n".join(lines)
