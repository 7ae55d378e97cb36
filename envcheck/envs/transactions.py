"""The store's two transactions, step by step: ``create_env`` (an env that ends ``ready`` or
not at all) and ``add_packages`` (more packages, or the env exactly as it was).

``EnvStore.create`` and ``EnvStore.add`` hand over here once called; each step runs inside
the store's frame of a change (``EnvStore._changing``: the env's lock, what an interrupted
command left recovered first, bad input leaving nothing behind), and ``scratch`` keeps what
a step needs to be undone or finished (the staging folder, the backup, the intent).
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import manifest as mf
from ..errors import UsageError
from .env_info import EnvInfo, check_name, env_python
from . import pip_shim
from .gate_link import link_env
from .metadata import installed_packages
from .scratch import discard, is_stub, signals_held
from ..paths import MANIFEST_NAME
from ..progress import SILENT, Progress

if TYPE_CHECKING:
    from .indexes import IndexSettings
    from .presets import Preset
    from .store import EnvStore


def create_env(store: EnvStore, name: str, preset: Preset, *, python: str | None = None,
               add: tuple[str, ...] = (), installer: str | None = None, index: IndexSettings | None = None,
               keep_log: bool = False, progress: Progress = SILENT, link: bool = True) -> EnvInfo:
    """Create env NAME from a preset, as a transaction: it ends ``ready`` or not at all.

    ``index``: the command line's ``IndexSettings``, laid over the pip configuration.
    ``keep_log``: keep the installer's log of a failure on bad input too (for a caller that
    reports it as a failure, exit 1, rather than as bad input, exit 2, that changed nothing).
    ``progress`` hears the task begin once the inputs are valid, then its phases.
    ``link``: where an intact env of the same preset content, requirements and interpreter
    exists, link its files (``linking``) instead of installing.
    """
    from .indexes import configured
    from .installers import choose_backend
    from .presets import parse_requirement
    from .pythons import find_python

    check_name(name)
    store._settle(name)
    requirements = [str(r) for r in (*preset.requirements, *map(parse_requirement, add))]
    interpreter = find_python(preset.requires_python, python, needed_by=f"preset {preset.name}")
    backend = choose_backend(installer)
    backend.cache_dir = store.home.uv_cache
    settings = configured(index)
    target = store.home.env_dir(name)
    _refuse_foreign(store, name, target)
    settings = settings.with_preset_indexes(preset.indexes)  # after the cheap checks: it may wait
    record = _record(name, {**preset.to_json(), "hash": preset.content_hash}, requirements, interpreter,
                     backend, settings)

    def same(m: dict) -> bool:
        return m.get("lock") is None and (m.get("preset") or {}).get("hash") == preset.content_hash \
            and m.get("requested") == requirements and m.get("python") == record["python"] \
            and m.get("index") == record["index"]  # where the user said packages come from

    def install(log: Path) -> None:
        backend.create_venv(str(interpreter.path), target, log)
        backend.install(env_python(target), requirements, settings, log, progress)

    return _make(store, name, target, record, install, _twin(store, name, same) if link else None,
                 f"creating env {name} from preset {preset.name} with {backend.name}, python {interpreter.version}",
                 keep_log, progress)


def create_from_lock(store: EnvStore, name: str, lock, selected, interpreter, preset: dict[str, Any], *,
                     installer: str | None = None, index=None, offline: bool = False, keep_log: bool = False,
                     progress: Progress = SILENT, link: bool = True) -> EnvInfo:
    """Create env NAME with exactly the files ``selected`` of ``lock`` (``locks.Lock.select``
    for ``interpreter``), hashes checked, nothing resolved; a transaction as ``create_env``.
    Each file is found and checked by ``wheelhouse`` before the installer sees it: the lock's
    paths and URLs, the find-links folders, else an index by name with the hash.
    ``offline``: no index and no network, the files only from the lock's paths and ``file:``
    URLs and ``index``'s find-links folders (the lock's own folder, a wheelhouse, when none is
    given), each checked present before anything changes. ``preset``: what the manifest
    records as the env's preset."""
    from .indexes import IndexSettings, configured
    from .installers import choose_backend
    from .wheelhouse import plan, stage

    check_name(name)
    store._settle(name)
    backend = choose_backend(installer)
    backend.cache_dir = store.home.uv_cache
    given = tuple(index.find_links) if index is not None and index.find_links else ()
    folders = given or ((str(lock.source.parent),) if offline and lock.source else ())
    settings = IndexSettings(no_index=True, find_links=folders) if offline else configured(index)
    target = store.home.env_dir(name)
    _refuse_foreign(store, name, target)
    staged = plan(lock, selected, [Path(f) for f in folders], offline, target / STAGE)
    record = _record(name, preset, [s.pin for s in selected], interpreter, backend, settings)
    record["lock"] = {**lock.summary(selected), "source": str(lock.source) if lock.source else None}
    wanted = {s.package.name: s.package.version for s in selected}

    def same(m: dict) -> bool:
        return (m.get("lock") or {}).get("digest") == lock.digest and m.get("python") == record["python"]

    def install(log: Path) -> None:
        backend.create_venv(str(interpreter.path), target, log)
        hashed = target / ".envcheck-lock-requirements.txt"
        try:
            stage(staged, selected, settings, progress, store.notice)
            hashed.write_text(staged.requirements(selected), encoding="utf-8")
            backend.install_locked(env_python(target), hashed, _sources(staged, selected, settings, offline), log,
                                   progress, offline, binary_only=all(s.file.kind == "wheel" for s in selected))
        finally:
            hashed.unlink(missing_ok=True)
            shutil.rmtree(staged.folder, ignore_errors=True)
        _check_pins(target, wanted, log)

    return _make(store, name, target, record, install, _twin(store, name, same) if link else None,
                 f"creating env {name} from {lock.where} ({len(selected)} packages) with {backend.name}, "
                 f"python {interpreter.version}", keep_log, progress)


STAGE = ".envcheck-lock-files"  # inside the env while it is made: the lock's files, checked


def _sources(staged, selected, settings, offline: bool):
    """Where the installer looks: the staged files alone when every file is there; else also
    the index of each package left to one (the lock's ``index``: a URL, or a ``file:``
    folder), then the configured indexes."""
    from dataclasses import replace
    from urllib.parse import unquote, urlsplit

    from .indexes import IndexSettings

    if offline or not staged.from_index:
        return IndexSettings(no_index=True, find_links=(str(staged.folder),))
    urls, folders = [], []
    for i in staged.from_index:
        own = selected[i].package.index
        if own and own.startswith("file:"):
            folders.append(unquote(urlsplit(own).path))
        elif own and own not in urls and own != settings.index_url and own not in settings.extra_index_urls:
            urls.append(own)
    return replace(settings, extra_index_urls=(*settings.extra_index_urls, *urls),
                   find_links=(str(staged.folder), *settings.find_links, *dict.fromkeys(folders)))


def _record(name: str, preset: dict[str, Any], requirements: list[str], interpreter, backend, settings) -> dict:
    """A new env's first manifest (``creating``)."""
    return {"schema": mf.SCHEMA, "name": name, "state": mf.CREATING, "preset": preset, "requested": requirements,
            "python": {"version": str(interpreter.version), "base": str(interpreter.path)},
            "installer": backend.name, "index": settings.to_json(), "warnings": settings.warnings(),
            "created": mf.now(), "updated": mf.now(), "packages": {}, "frameworks": [], "lock": None,
            "linked_from": None, "digest": None, "adopted": None}


def _check_pins(target: Path, pins: dict[str, str | None], log: Path) -> None:
    """What was installed is what the lock pins (None: any version, an archive that doesn't
    say; the installer's own pip, seeded by virtualenv, aside)."""
    from ..errors import OperationError

    now = installed_packages(target)
    if "pip" not in pins:
        now.pop("pip", None)
    wrong = sorted(n for n in set(now) | set(pins)
                   if n not in now or n not in pins or pins[n] is not None and now[n] != pins[n])
    if wrong:
        raise OperationError(f"the env does not hold the lock's packages: {', '.join(wrong[:5])}",
                             "see the log", log=str(log))


def _twin(store: EnvStore, name: str, same) -> EnvInfo | None:
    """A ready env whose manifest ``same`` accepts and that has a baseline to verify it by."""
    from .verify import read

    for info in store.list():
        if info.name != name and info.state == "ready" and same(info.manifest) and read(str(info.path)) is not None:
            return info
    return None


def _make(store: EnvStore, name: str, target: Path, record: dict[str, Any], install, twin: EnvInfo | None,
          what: str, keep_log: bool, progress: Progress) -> EnvInfo:
    """The transaction both creates share: place the env (``creating``), link the twin's files
    or ``install``, then the gate's link, the baseline and, last, ``ready``."""
    from ..processes import signals_interrupt
    from .verify import take, write as write_baseline

    with store._changing(name):
        _clear_incomplete(store, name, target)
        log = store._log(name, "create")
        progress.start(f"env {name}", what, log)
        try:
            with signals_interrupt():  # SIGTERM and SIGHUP take Ctrl-C's clean-up path
                _place(store, name, target, record)
                if twin is None or not _linked(store, twin, target, record, progress):
                    progress.phase("making the venv")
                    install(log)
                link_env(store.home, target)
                packages = installed_packages(target)
                if "pip" not in packages:
                    pip_shim.place(target, record["python"]["version"])
                progress.phase("recording what was installed")
                baseline = take(str(target), (record.get("lock") or {}).get("digest"))
                write_baseline(target, baseline)
                record.update(state=mf.READY, packages=packages, frameworks=store._frameworks(packages),
                              digest=baseline["digest"], updated=mf.now())
                mf.write_atomic(target / MANIFEST_NAME, record)
        except BaseException as exc:
            if not keep_log:
                _forget_log(exc, log)
            if target.exists():  # placed: ours (cleared above, under the lock), even if an
                store.scratch.delete(name, target)  # interrupt landed right after the rename
            raise
    progress.done("created" if not record.get("linked_from") else f"created, linked from env {record['linked_from']}")
    return store.get(name)


def _linked(store: EnvStore, twin: EnvInfo, target: Path, record: dict[str, Any], progress: Progress) -> bool:
    """Fill ``target`` from ``twin``'s files if the twin is intact and can be linked from
    (True), else leave ``target`` as placed and say why (False: the caller installs)."""
    from ..errors import BusyError
    from .linking import LinkUnavailable, clone
    from .verify import read, take, verify, write as write_baseline

    progress.phase(f"linking the files of env {twin.name}")
    try:
        with store.locked(twin.name):
            baseline = read(str(twin.path))
            drift = verify(str(twin.path), baseline) if baseline is not None else None
            if drift is None or not drift.clean:
                store.notice(f"env {twin.name} has the same packages but drifted since it was made "
                                f"({drift.summary() if drift else 'no baseline'}); installing instead")
                return False
            try:
                clone(twin.path, target)
            except LinkUnavailable as exc:
                store.notice(f"can't link the files of env {twin.name}: {exc}; installing instead")
                _empty(target)
                return False
            write_baseline(twin.path, take(str(twin.path), baseline.get("lock")))  # linking moved their change times
    except BusyError:
        store.notice(f"env {twin.name} is being changed; installing instead of linking its files")
        return False
    if installed_packages(target) != twin.packages:
        raise OSError(f"the files linked from env {twin.name} don't hold its packages")
    record["linked_from"] = twin.name  # installer and index stay this env's own: its next add uses them
    return True


def _empty(target: Path) -> None:
    """Everything in ``target`` but its manifest goes (a link that failed half-way)."""
    for entry in os.scandir(target):
        if entry.name != MANIFEST_NAME:
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)


def _place(store: EnvStore, name: str, target: Path, record: dict[str, Any]) -> None:
    """Make ``envs/NAME`` appear holding its first manifest, in one rename."""
    staging = store.scratch.path(name, "create")
    staging.mkdir()
    mf.write_atomic(staging / MANIFEST_NAME, record)
    store.home.envs.mkdir(parents=True, exist_ok=True)
    os.replace(staging, target)


def _refuse_foreign(store: EnvStore, name: str, target: Path) -> None:
    if target.is_symlink() or (target.exists() and not (target / MANIFEST_NAME).is_file()
                               and not is_stub(target)):
        raise UsageError(f"{target} exists and was not created by envcheck",
                         "move it away or choose another env name")
    info = store._info(name)
    if info is not None and info.state == "ready":
        raise UsageError(f"env {name} already exists",
                         f"use `envcheck env add {name} REQ...` to add packages, or remove it first")
    if info is not None and info.state == "broken":
        raise UsageError(f"env {name} exists but is broken: {info.problem}",
                         info.fix or f"envcheck env remove {name} --yes, then create it again")
    if info is not None and info.manifest.get("state") == mf.CHANGING:
        raise UsageError(f"env {name} exists: {info.problem}", info.fix)


def _clear_incomplete(store: EnvStore, name: str, target: Path) -> None:
    """Recover an env left ``incomplete`` by a killed create (checked again under the lock)."""
    _refuse_foreign(store, name, target)
    if target.exists():
        store.scratch.delete(name, target)


def add_packages(store: EnvStore, name: str, requirements: tuple[str, ...], *, installer: str | None = None,
                 index=None, progress: Progress = SILENT) -> EnvInfo:
    """Install more packages; on any failure or interruption the env is left exactly as it
    was (a SIGKILL: as it was once ``Scratch.recover`` has run, and visibly incomplete until then).
    ``progress`` hears the task and its phases."""
    from .indexes import configured
    from .installers import choose_backend
    from .presets import parse_requirement

    check_name(name)
    if not requirements:
        raise UsageError("no requirements given", f"envcheck env add {name} 'package>=1.0'")
    reqs = [str(parse_requirement(r)) for r in requirements]
    current = store._require_ready(name)
    if current.adopted:
        from .adopted import install_command

        raise UsageError(f"env {name} is adopted ({current.adopted['kind']} {current.path}): envcheck never changes it",
                         f"add it with the env's own installer: "
                         f"{install_command(current.adopted, current.packages, ' '.join(reqs))}")
    choose_backend(installer, current.manifest.get("installer"))  # bad input: before any write
    # the preset's own indexes too (a package added to an env of a preset with its own index comes from there)
    preset_indexes = tuple(current.manifest.get("preset", {}).get("indexes") or ())
    settings = configured(index).with_preset_indexes(preset_indexes)
    with store._changing(name):
        info = store._require_ready(name, store._current(name))  # as it is now, under the lock
        backend = choose_backend(installer, info.manifest.get("installer"))
        backend.cache_dir = store.home.uv_cache
        log = store._log(name, "add")
        progress.start(f"env {name}", f"adding {' '.join(reqs)} to env {name} with {backend.name}", log)
        _install_more(store, info, reqs, backend, settings, log, progress)
    progress.done("packages added")
    return store.get(name)


def _install_more(store: EnvStore, info: EnvInfo, reqs: list[str], backend, settings, log: Path,
                  progress: Progress) -> None:
    """Backup, intent, ``changing``, install, commit (``ready``); rolled back on any failure."""
    from ..processes import signals_interrupt
    from .verify import take, write as write_baseline

    name, manifest = info.name, info.path / MANIFEST_NAME
    backup = store.scratch.path(name, "backup")
    intent = store.scratch.path(name, "add", ".json")
    try:
        with signals_interrupt():  # SIGTERM and SIGHUP take Ctrl-C's clean-up path
            # Hard links: installers replace files (unlink + write), never edit them in place,
            # so the backup keeps the old contents at the cost of directory entries only.
            progress.phase("backing up the env")
            shutil.copytree(info.path, backup, symlinks=True, copy_function=os.link)
            mf.write_atomic(intent, {"env": name, "pid": os.getpid(), "backup": backup.name,
                                     "requested": reqs, "started": mf.now()})
            mf.write_atomic(manifest, {**info.manifest, "state": mf.CHANGING, "updated": mf.now()})
            backend.install(info.python, reqs, settings, log, progress)
            packages = installed_packages(info.path)
            baseline = take(str(info.path), None)  # an added package ends the lock's promise
            write_baseline(info.path, baseline)
            mf.write_atomic(manifest, {**info.manifest, "schema": mf.SCHEMA, "state": mf.READY, "lock": None,
                                       "digest": baseline["digest"],
                                       "requested": [*info.manifest.get("requested", []), *reqs],
                                       "packages": packages, "frameworks": store._frameworks(packages),
                                       "updated": mf.now(), "installer": backend.name})
    except BaseException as exc:
        aside = None
        with signals_held():
            if intent.exists():
                aside = store.scratch.restore(name, info.path, backup)
                intent.unlink()
        _forget_log(exc, log)
        for path in (aside, backup):  # interruptible: a leftover goes at the next recover
            if path is not None:
                discard(path)
        raise
    intent.unlink()
    discard(backup)


def _forget_log(exc: BaseException, log: Path) -> None:
    """Bad input changes nothing: its log goes too (its reason is in the error line)."""
    if isinstance(exc, UsageError):
        log.unlink(missing_ok=True)
        exc.log = None
