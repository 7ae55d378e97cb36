"""One command's working set: the env home, its store, and the host probed at most once.

Every use case takes a :class:`Session`, so NVML is initialised at most once per envcheck
process whatever the command does (select, then validate, then store), and the two policies
that used to be copied into each command live here once: which env (:meth:`resolve_env`) and
validate-then-store (:meth:`validate_and_store`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Mapping, Sequence

from ..errors import OperationError, UsageError
from ..paths import Home
from ..progress import SILENT, Progress

if TYPE_CHECKING:  # types only: the modules load where they are used
    from ..envs.env_info import EnvInfo
    from ..envs.store import EnvStore
    from ..host.level1 import HealthReport
    from ..host.probe import HostState
    from ..validation.devices import DeviceSpec
    from ..validation.reports import Report
    from .selection import Selection

AUTO = "auto"


def frameworks_of(packages: Mapping[str, str]) -> list[str]:
    """The frameworks a {name: version} map holds, for the store's manifests (``envs`` may not
    import ``frameworks``, so the use cases hand it this). The registry loads on first use."""
    from ..frameworks import detect

    return detect(packages)


def env_store(home: Home, observer: Progress = SILENT) -> EnvStore:
    """The store of ``home``, naming frameworks in its manifests; ``observer`` hears what its
    recoveries did."""
    from ..envs.store import EnvStore

    return EnvStore(home, notice=observer.notice, frameworks_of=frameworks_of)


@dataclass
class Resolved:
    """The env a command works on, and how it was chosen."""

    info: EnvInfo
    selection: Selection | None = None  # when chosen by `auto`
    notes: list[str] = field(default_factory=list)


class Session:
    """``observer`` hears the notices of the whole session (``Progress.notice``: a store's
    recovery, a report that could not be stored), whichever task is running; the CLI's prints
    them on stderr, the default ignores them (envcheck used as a library stays quiet)."""

    def __init__(self, home: Home | None = None, host: HostState | None = None,
                 observer: Progress = SILENT, health: HealthReport | None = None):
        from ..envs.gate_link import repair

        self.home = home if home is not None else Home()
        repair(self.home.root)  # every command keeps the envs' `envcheck.ensure_ready` pointed at this envcheck
        self.observer = observer
        self.store: EnvStore = env_store(self.home, observer)
        self._host = host if health is None else health.host
        self._level1: HealthReport | None = health
        self._want_level1 = False
        self._injected = host is not None and health is None  # a host given alone: no NVML read

    def want_level1(self) -> None:
        """Have the host be read by level-1 health (``host.level1``: the probe and every GPU's
        level-1 reads, one NVML session), so :attr:`health` costs no second initialisation.
        Called before the host is first read."""
        self._want_level1 = True

    @property
    def host(self) -> HostState:
        """This host's NVML facts (``host.probe.HostState``), read on first use only."""
        if self._host is None:
            if self._want_level1:
                return self.health.host
            from ..host.probe import probe

            self._host = probe()
        return self._host

    @property
    def health(self) -> HealthReport:
        """Level-1 health of this host's GPUs (``host.level1.HealthReport``), read once per
        session; its host is the session's host when :meth:`want_level1` came first."""
        if self._level1 is None:
            from ..host.level1 import level1

            self._level1 = level1(watch=True)  # Xids and replays during a validation's run too
            if self._host is None:
                self._host = self._level1.host
        return self._level1

    def select(self, *, framework: str | None = None, requires: Sequence[str] = (),
               require_gpu: bool = False) -> Selection:
        from .selection import select

        return select(self.store.list(), self.host, framework=framework, requires=requires,
                      home=self.home, require_gpu=require_gpu)

    def resolve_env(self, name: str | None, *, framework: str | None = None,
                    require_gpu: bool = False, ready: bool = False) -> Resolved:
        """Env ``name``, or with ``auto``/None the one :meth:`select` ranks first.

        No env to choose is an OperationError carrying the selection's advice; with ``ready``
        an env that is not ready is one too, with its repair.
        """
        active = self.active_env() if name in (None, AUTO) else None
        if active is not None and (framework is None or framework in frameworks_of(active[0].packages)):
            self.observer.notice(active[1])
            return Resolved(active[0], None, [active[1]])
        if name in (None, AUTO):
            selection = self.select(framework=framework, require_gpu=require_gpu)
            if selection.chosen is None:
                raise OperationError(f"no env to use: {selection.warning}")
            info = self.store.get(selection.chosen)
            note = f"env {info.name} selected: {selection.ranking[0].reason}"
            resolved = Resolved(info, selection, [note])
        else:
            resolved = Resolved(self.store.get(name))
            if framework is not None:
                from .. import frameworks

                if framework not in frameworks.detect(resolved.info.packages):
                    raise UsageError(f"env {name} has no {frameworks.get(framework).title}",
                                     f"drop --framework, or --env auto to choose among {framework} envs")
        info = resolved.info
        if ready and info.state != "ready":
            raise OperationError(f"env {info.name} is {info.state}: {info.problem}",
                                 f"envcheck env remove {info.name} --yes, then create it again")
        return resolved

    def active_env(self) -> tuple[EnvInfo, str] | None:
        """The env the user is in (``VIRTUAL_ENV``, else ``CONDA_PREFIX``), as pip and uv act
        on it, when it holds a framework: (it, a note saying so), judged first by a command
        given no env. An env of envcheck's (made or adopted) is that env; any other is judged
        as it is, without being registered (``envs.adopted.judged_once``)."""
        import os
        from pathlib import Path

        from ..errors import EnvcheckError

        for variable in ("VIRTUAL_ENV", "CONDA_PREFIX"):
            value = os.environ.get(variable)
            if not value or not Path(value).is_dir():
                continue
            prefix = Path(value).resolve()
            mine = next((i for i in self.store.list() if i.state == "ready" and i.path.resolve() == prefix), None)
            try:
                info = mine or self.judged_python(str(prefix))
            except EnvcheckError:
                return None
            if frameworks_of(info.packages):
                return info, f"judging the active env {info.name} ({variable}={value})"
        return None

    def judged_python(self, path: str, adopt: str | None = None) -> EnvInfo:
        """The env or interpreter at ``path`` (``--python PATH``): adopted as env ``adopt``, or
        judged once and kept nowhere (``envs.adopted``)."""
        if adopt:
            return self.store.adopt(adopt, path)
        from ..envs.adopted import judged_once

        return judged_once(path, self.home.root, frameworks_of)

    def validate_and_store(self, info: EnvInfo, *, devices: DeviceSpec = "all", smoke: bool = True,
                           timeout: float | None = None, store: bool = True,
                           progress: Progress = SILENT, level: int = 2) -> Report:
        """Validate ``info`` on this host at health ``level`` (level 1 reads only and is never
        stored: it proves nothing of the env's packages); keep the report for the gate when the
        env is one of envcheck's and still there (a broken env's report would describe
        nothing). ``progress`` hears the checks and each device's smoke fit."""
        from ..validation import DEFAULT_TIMEOUT
        from ..validation.reports import store_report
        from ..validation.validate import validate

        if info.state == "missing":  # an adopted env deleted since: nothing to judge
            raise OperationError(f"env {info.name} is missing: {info.problem}", info.fix)
        gone = OperationError(f"env {info.name} was removed while it was being validated",
                              "see `envcheck env list`")
        try:
            store = store and level >= 2 and not (info.adopted and info.records is None)  # judged once: kept nowhere
            report = validate(info, self.host, devices=devices, smoke=smoke,
                              timeout=DEFAULT_TIMEOUT if timeout is None else timeout,
                              log_dir=self.home.logs if store else None,
                              progress=progress, level=level, health=self.health_read())
            if not info.path.exists():
                raise gone
            kept = self._to_store(info, report) if store else None
            if kept is not None:
                try:
                    store_report(self.home, kept)
                except OSError as exc:  # a read-only home or a full disk: the answer stands
                    self.observer.notice(f"the report of env {info.name} was not stored: "
                                         f"{exc.strerror or exc} ({self.home.report(info.name)})")
        except FileNotFoundError:
            if info.path.exists():
                raise
            raise gone from None
        return report

    def health_read(self) -> HealthReport | None:
        """Level-1 health when this session reads it (given, or ``want_level1`` on a host it
        reads itself), else None: a session given only its host (a test, a library caller)
        reads no NVML behind it."""
        if self._level1 is not None:
            return self._level1
        return self.health if self._want_level1 and not self._injected else None

    def _to_store(self, info: EnvInfo, report: Report) -> Report | None:
        """The report to store after validating ``info`` (``StoredReport.to_store``: a
        shallower validation never erases a deeper one's evidence of the same fingerprint), or
        None: nothing is stored for an env that is broken or gone."""
        from ..validation.reports import StoredReport, to_store

        if info.state == "broken" or not self.home.manifest(info.name).is_file():
            return None
        return to_store(StoredReport.load(self.home, info.name), report)


def require_envs(session: Session) -> list[EnvInfo]:
    """Every env, or, like ``resolve_env`` finding none, an OperationError saying what to make."""
    envs = session.store.list()
    if not envs:
        from .hints import create_hint

        raise OperationError("no envs yet", create_hint(session))
    return envs
