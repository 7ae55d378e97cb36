"""`envcheck provision`: the installer hook. Make the asked-for envs, idempotently, and prove them.

The flow is three small steps:

1. ``plan``: resolve every preset (an unknown or malformed one is a UsageError before anything
   is made); with ``auto``, the built-in preset names (a user preset of the same name overrides
   one) of every framework, or of ``framework`` alone: its CPU preset, and the first of its
   GPU presets (the registry's order of preference) this host can run: a usable GPU, a compat
   verdict that trains on it, a Python that fits and the system libraries the preset needs
   (probed once the env exists when its CUDA comes from wheels). One GPU env per framework:
   the others are skipped, saying which one covers it. `env create` refuses a GPU preset by
   the same judgement (``gpu_misfit``) unless it is asked to build for another host.
2. ``ensure``: per env (named after its preset): absent or left incomplete -> created; ready
   with the same preset content hash -> unchanged, nothing reinstalled; ready with another
   hash (or from another preset) -> ``stale``, left as it is: the store can't swap a rebuilt
   env in atomically, and removing a working env that a rebuild then fails to replace is worse
   than saying so. Stale counts as not done (exit 1) and carries the command that rebuilds it.
   Another process building the same env: wait for its lock to be free (up to ``wait``
   seconds), then look again, so two concurrent provisions both end with one ready env.
3. ``check``: each env that exists is validated (the smoke fit unless ``smoke`` is False) and
   its report stored for the pre-training gate.

``ProvisionResult.ok``: every requested env was created or unchanged and validates ready or
degraded; presets ``auto`` skipped were not requested, so they don't count.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Callable, ClassVar

from .. import frameworks
from ..errors import BusyError, EnvcheckError, UsageError
from ..progress import SILENT, Progress
from ..results import OK_VERDICTS, Result, envelope, node
from ..validation.health import node_health
from .validate_envs import report_problem
from .variants import refuse_misfit

if TYPE_CHECKING:
    from ..envs.env_info import EnvInfo
    from ..envs.indexes import IndexSettings
    from ..envs.locks import Lock
    from ..envs.presets import Preset
    from ..envs.store import EnvStore
    from ..host.probe import HostState
    from ..paths import Home
    from .session import Session

ACTIONS = ("created", "unchanged", "stale", "skipped", "failed")
DEFAULT_WAIT = 3600.0  # installing a GPU framework can take many minutes on a slow mirror


@dataclass
class Outcome:
    name: str
    preset: str
    action: str  # one of ACTIONS
    reason: str
    verdict: str | None = None  # of the validation: ready | degraded | not-ready
    fix: str | None = None
    log: str | None = None  # full installer output of a failed create
    problem: str | None = None  # its validation's first failure, else first warning ("env N: check: ...")
    warnings: list[str] = field(default_factory=list)  # what its create warned of (a preset's index unreachable)

    @property
    def ok(self) -> bool:
        if self.action == "skipped":
            return True
        return self.action in ("created", "unchanged") and self.verdict in OK_VERDICTS


@dataclass
class ProvisionResult(Result):
    schema: ClassVar[str] = "envcheck.provision/1"
    envs: list[Outcome] = field(default_factory=list)
    health: dict | None = None  # the last validation's level-1 health section (validation.health)

    @property
    def ok(self) -> bool:
        return all(o.ok for o in self.envs)

    @property
    def exit_code(self) -> int:
        return 0 if self.ok else 1

    def envelope(self) -> dict:
        """Not-ready with the first requested env that isn't done (its action, reason and fix);
        else degraded when one validated degraded, else ready. The envs made or kept that
        validated ready or degraded are ready; a skipped preset is neither. The node: no host
        facts (none kept), the level-1 health of the last validation."""
        done = [o.name for o in self.envs if o.ok and o.action != "skipped"]
        bad = next((o for o in self.envs if not o.ok), None)
        facts = node(health=node_health([self.health]))
        if bad is not None:
            return envelope("not-ready", f"env {bad.name}: {bad.action}: {bad.reason}", bad.fix, done, facts)
        warned = next((o for o in self.envs if o.verdict == "degraded" and o.action != "skipped"), None)
        if warned is not None:
            return envelope("degraded", warned.problem, warned.fix, done, facts)
        return envelope("ready", ready_envs=done, node_facts=facts)

    def body(self) -> dict[str, Any]:
        return {"envs": [asdict(o) for o in self.envs], "ok": self.ok, "health": self.health}


@dataclass
class Planned:
    preset: Preset
    skip: str | None = None  # why --auto leaves it out
    fix: str | None = None


# -- 1. plan ----------------------------------------------------------------------------------

def plan(home: Home, names: tuple[str, ...] = (), files: tuple[str, ...] = (), auto: bool = False,
         host: HostState | None = None, framework: str | None = None) -> list[Planned]:
    """The presets to provision, each possibly skipped with a reason; raises UsageError on bad input."""
    from ..envs.presets import builtin_dir, resolve_preset
    from ..envs.env_info import check_name

    if not (names or files or auto):
        raise UsageError("nothing to provision", "pass --preset NAME, --preset-file F or --auto")
    if framework is not None:
        if not auto:
            raise UsageError("--framework chooses among the presets of --auto",
                             f"pass --auto --framework {framework}, or name presets with --preset")
        frameworks.get(framework)  # an unknown name is bad input
    asked = [resolve_preset(home, name=n) for n in names] + [resolve_preset(home, file=f) for f in files]
    automatic = [resolve_preset(home, name=p.stem) for p in sorted(builtin_dir().glob("*.toml"))] if auto else []
    if framework is not None:
        automatic = [p for p in automatic if p.framework == framework]
    automatic.sort(key=_preference)
    covered: dict[str, str] = {}  # framework -> the GPU preset --auto makes for it
    chosen: dict[str, Planned] = {}
    for explicit, preset in [(True, p) for p in asked] + [(False, p) for p in automatic]:
        check_name(preset.name)
        known = chosen.get(preset.name)
        if known is not None:
            if known.preset.content_hash != preset.content_hash:
                raise UsageError(f"two different presets are named {preset.name} "
                                 f"({known.preset.source} and {preset.source})",
                                 "rename one of the files: an env is named after its preset")
            continue
        if explicit or preset.kind == "cpu":
            chosen[preset.name] = Planned(preset)
            if explicit and preset.kind == "gpu":  # asked for by name: it covers its framework
                covered.setdefault(preset.framework, preset.name)
        elif preset.framework in covered:
            chosen[preset.name] = Planned(preset, f"{covered[preset.framework]} already gives {preset.framework} "
                                                  "this host's GPUs (--auto makes one GPU env per framework)",
                                          f"provision it by name if you want it too: envcheck provision --preset {preset.name}")
        else:
            chosen[preset.name] = item = _judge_gpu(preset, host)
            if item.skip is None:
                covered[preset.framework] = preset.name
    return list(chosen.values())


def _preference(preset: Preset) -> tuple:
    """--auto's order: by framework (the registry's), CPU first, then the framework's GPU
    presets in its order of preference, then any other (by name)."""
    names = frameworks.names()
    known = preset.framework in names
    fw = frameworks.get(preset.framework) if known else None
    order = fw.gpu_presets if fw else ()
    return (names.index(preset.framework) if known else len(names), preset.kind != "cpu",
            order.index(preset.name) if preset.name in order else len(order), preset.name)


def _judge_gpu(preset: Preset, host: HostState) -> Planned:
    """Keep a GPU preset for --auto only if this host can train with it (with the first of
    its variants that can)."""
    from .variants import for_this_host

    if not host.no_gpu_reason() and all(frameworks.build_for_requirements(v.requirements) is None
                                        for v in preset.variants or (preset,)):
        return Planned(preset, f"can't tell which {preset.framework} build preset {preset.name} installs",
                       f"provision it by name if you want it: envcheck provision --preset {preset.name}")
    chosen, misfit = for_this_host(host, preset)
    return Planned(chosen, *misfit) if misfit else Planned(chosen)


# -- 2. ensure --------------------------------------------------------------------------------

def ensure(store: EnvStore, preset: Preset, *, installer: str | None = None,
           index: IndexSettings | None = None,
           wait: float = DEFAULT_WAIT, progress: Progress = SILENT) -> Outcome:
    """Make env ``preset.name`` from ``preset`` unless it already is; never raises EnvcheckError.

    ``index``: the command line's ``IndexSettings`` (None: the pip configuration alone)."""
    return _ensure(store, preset.name, preset.name, f"created from preset {preset.name}",
                   lambda: store.create(preset.name, preset, installer=installer, index=index, keep_log=True,
                                        progress=progress),
                   lambda info: _compare(info, preset), wait, progress)


def ensure_lock(session: Session, lock: Lock, name: str, *, installer: str | None = None,
                index: IndexSettings | None = None, offline: bool = False, wait: float = DEFAULT_WAIT,
                progress: Progress = SILENT, for_another_host: bool = False) -> Callable[[], Outcome]:
    """The step that makes env ``name`` from ``lock`` unless it already is (from the same lock:
    unchanged; from anything else: stale, left as it is). What it installs is chosen as `env
    create --lock` chooses (``locking.prepare``), here and now when the env is to be made, so
    a lock this host can't take is bad input before anything is made."""
    from .locking import prepare

    store = session.store
    label = f"lock {lock.source}"
    existing = _existing(store, name)
    prepared = prepare(session, lock, for_another_host=for_another_host) \
        if existing is None or existing.state == "incomplete" else None

    def make() -> EnvInfo:
        interpreter, selected, preset = prepared or prepare(session, lock, for_another_host=for_another_host)
        return store.create_from_lock(name, lock, selected, interpreter, preset, installer=installer, index=index,
                               offline=offline, keep_log=True, progress=progress)

    def compare(info: EnvInfo) -> Outcome:
        rebuild = f"envcheck env remove {name} --yes && envcheck provision --lock {lock.source} --name {name}"
        if info.state == "broken":
            return Outcome(name, label, "failed", f"env {name} is broken: {info.problem}", fix=rebuild)
        if (info.manifest.get("lock") or {}).get("digest") != lock.digest:
            return Outcome(name, label, "stale", f"env {name} exists but was not made from this lock "
                           f"({lock.digest[:19]}...); left as it is", fix=rebuild)
        return Outcome(name, label, "unchanged", f"already made from this lock on {info.manifest.get('created')}")

    return lambda: _ensure(store, name, label, f"created from {label}", make, compare, wait, progress)


def _ensure(store: EnvStore, name: str, label: str, created: str, make: Callable[[], object],
            compare: Callable[[EnvInfo], Outcome], wait: float, progress: Progress) -> Outcome:
    """``make`` env ``name`` unless it exists (then ``compare`` says what it is); another
    process making it is waited for (``wait`` seconds), then looked at again."""
    deadline = time.monotonic() + wait
    while True:
        info = _existing(store, name)
        if info is not None and info.state != "incomplete":
            return compare(info)
        try:
            made = make()
            warned = list((getattr(made, "manifest", None) or {}).get("warnings") or [])
            return Outcome(name, label, "created", created, warnings=warned)
        except BusyError:
            progress.start(f"env {name}", f"env {name} is being changed by another envcheck process; "
                           f"waiting for it (up to {max(deadline - time.monotonic(), 0):.0f} s)")
            if not _wait_unlocked(store, name, deadline):
                return Outcome(name, label, "failed", f"another envcheck process kept env {name} "
                               f"locked for more than {wait:.0f} s", fix="wait for it to finish, then run again")
        except EnvcheckError as exc:
            info = _existing(store, name)
            if isinstance(exc, UsageError) and info is not None and info.state != "incomplete":
                continue  # "already exists": another process finished it between our look and our lock
            return Outcome(name, label, "failed", exc.message, fix=exc.fix, log=exc.log)


def _existing(store: EnvStore, name: str) -> EnvInfo | None:
    """The env as the store sees it (ready, incomplete or broken), or None when there is none."""
    try:
        return store.get(name)
    except UsageError:
        return None


def _compare(info: EnvInfo, preset: Preset) -> Outcome:
    name = info.name
    rebuild = f"envcheck env remove {name} --yes && envcheck provision --preset {preset.name}"
    if info.state == "broken":
        return Outcome(name, preset.name, "failed", f"env {name} is broken: {info.problem}", fix=rebuild)
    recorded = info.preset
    if recorded.get("name") != preset.name:
        return Outcome(name, preset.name, "stale", f"env {name} exists but was made from preset "
                       f"{recorded.get('name')!r}, not {preset.name!r}", fix=rebuild)
    if recorded.get("hash") != preset.content_hash:
        return Outcome(name, preset.name, "stale", f"env {name} was made from another version of preset "
                       f"{preset.name} (its packages, Python or CUDA changed since); left as it is", fix=rebuild)
    return Outcome(name, preset.name, "unchanged", f"already made from this preset on {info.manifest.get('created')}")


def _wait_unlocked(store: EnvStore, name: str, deadline: float) -> bool:
    """Block until no process holds env ``name``'s lock, or the deadline passes (False)."""
    from ..envs.envlock import EnvLock, Timeout

    lock = EnvLock(store.home.lock(name))
    try:
        lock.acquire(timeout=max(deadline - time.monotonic(), 0), poll_interval=0.2)
    except Timeout:
        return False
    lock.release()
    return True


# -- 3. check ---------------------------------------------------------------------------------

def check(session: Session, outcome: Outcome, *, smoke: bool, timeout: float | None,
          progress: Progress = SILENT, level: int = 2):
    """Validate an env that exists and store the report; the verdict goes into ``outcome``.
    Returns the report."""
    report = session.validate_and_store(session.store.get(outcome.name), smoke=smoke, timeout=timeout,
                                        progress=progress, level=level)
    outcome.verdict = report.verdict
    outcome.problem, warned_fix = report_problem(report)
    if report.verdict == "degraded":
        outcome.fix = outcome.fix or warned_fix
    if report.verdict == "not-ready" and outcome.action in ("created", "unchanged"):
        failed = next(c for c in report.checks if c.status == "fail")
        outcome.reason += f"; validation failed: {failed.id}: {failed.summary}"
        outcome.fix = outcome.fix or failed.fix
    return report


def provision(session: Session, *, names: tuple[str, ...] = (), files: tuple[str, ...] = (), auto: bool = False,
              smoke: bool = True, installer: str | None = None, index: IndexSettings | None = None,
              wait: float = DEFAULT_WAIT, timeout: float | None = None,
              progress: Progress = SILENT, framework: str | None = None, level: int = 2,
              lock_file: str | None = None, name: str | None = None, offline: bool = False,
              for_another_host: bool = False) -> ProvisionResult:
    """Plan, ensure and check (at health ``level``: 1 reads only): see the module docstring.
    ``lock_file``: the env of that lock (``name``: its name, else the lock's env or preset's).
    A GPU preset named (or a lock) this host can't train with is refused before anything is
    made, by `env create`'s rule (``refuse_misfit``; ``for_another_host``: made anyway)."""
    session.want_level1()
    if lock_file is None and (name or offline):
        raise UsageError(f"{'--name' if name else '--offline'} goes with --lock", "pass --lock FILE too")
    if lock_file is not None:
        from ..envs.env_info import check_name
        from ..envs.locks import read_lock

        if names or files or auto:
            raise UsageError("--lock makes one env from a lock", "leave --preset, --preset-file and --auto out")
        lock = read_lock(lock_file)
        name = name or lock.tool.get("env") or lock.preset.get("name")
        if not name:
            raise UsageError(f"lock {lock.source} names no env", "pass --name NAME")
        check_name(name)
        todo = [(name, ensure_lock(session, lock, name, installer=installer, index=index, offline=offline,
                                   wait=wait, progress=progress, for_another_host=for_another_host))]
    else:
        planned = plan(session.home, names, files, auto, session.host if auto else None, framework)
        for p in planned:  # named GPU presets: the variant this host gets, or refused as env create refuses
            if p.skip is None and p.preset.kind == "gpu":
                p.preset = refuse_misfit(session, p.preset, for_another_host=for_another_host)
        todo = [(p.preset.name, p if p.skip else
                 (lambda p=p: ensure(session.store, p.preset, installer=installer, index=index, wait=wait,
                                     progress=progress))) for p in planned]
    result = ProvisionResult()
    for env_name, step in todo:
        if isinstance(step, Planned):
            result.envs.append(Outcome(env_name, step.preset.name, "skipped", step.skip, fix=step.fix))
            continue
        outcome = step()
        if outcome.action != "failed":
            report = check(session, outcome, smoke=smoke, timeout=timeout, progress=progress, level=level)
            result.health = report.health or result.health
        result.envs.append(outcome)
    return result
