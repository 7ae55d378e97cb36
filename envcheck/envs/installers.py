"""One small interface, two backends (uv, pip), the same index settings for both
(``indexes.IndexSettings``, which also keeps credentials off their command lines).

The backend is chosen by ``choose_backend`` with a written precedence: the ``--installer``
flag, else the one recorded in the env, else ``$ENVCHECK_INSTALLER``, else uv when it is
available, else pip. Each runs logged (``run_logged``: its output to the env's log as it
comes, and to progress), and a failed install is read from its output's tail as bad input or
a failure (``install_failure``).
"""
from __future__ import annotations

import os
import re
import shlex
import sys
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from .. import processes
from ..child_env import clean_environ  # the installers' environment: the clean one
from ..errors import OperationError, UsageError
from ..progress import SILENT, Progress
from .indexes import IndexSettings, redact

BACKENDS = ("uv", "pip")


def run_logged(cmd: list[str], log: Path, env: dict[str, str],
               on_line: Callable[[str], None] | None = None) -> tuple[int, str]:
    """Run a command with its output appended to ``log`` as it comes (unbuffered, so
    ``tail -f`` follows it), each line also given to ``on_line`` (decoded, the last of its
    carriage-return segments); on an interrupt (Ctrl-C, SIGTERM, SIGHUP) stop it and all it
    started, then re-raise. It dies with envcheck, even killed with SIGKILL, so no installer
    goes on writing into an abandoned env (see processes).

    Returns (exit code, the tail of its output).
    """
    with open(log, "ab", buffering=0) as fh:
        fh.write(f"$ {shlex.join(cmd)}\n".encode())
        with processes.started(cmd, env=env, stdout=processes.PIPE, stderr=processes.STDOUT,
                               grace=5.0) as child:
            for raw in child.popen.stdout:
                fh.write(raw)
                if on_line is not None:
                    on_line(raw.decode("utf-8", "replace").rstrip("\r\n").rpartition("\r")[2])
            code = child.wait()
    tail = log.read_text(encoding="utf-8", errors="replace").splitlines()[-40:]
    return code, "\n".join(tail)


@dataclass
class Installer(ABC):
    """Base interface: create a venv for an interpreter, install requirements into it. A
    backend must define ``create_venv`` and ``install_command``: one that lacks either can't
    be constructed (``TypeError``), rather than failing halfway through an install."""

    name: str = field(init=False, default="")
    cache_dir: Path | None = None

    @abstractmethod
    def create_venv(self, python: str, target: Path, log: Path) -> None:
        """Make a virtualenv at ``target`` for the interpreter ``python``, logging to ``log``."""

    def install(self, env_python: Path, requirements: list[str], index: IndexSettings, log: Path,
                progress: Progress = SILENT) -> None:
        """Install ``requirements``; ``progress`` hears the phases read from the output."""
        from .install_output import reader

        code, tail = run_logged(self.install_command(env_python, requirements, index), log,
                                self.environ(index), reader(self.name, progress))
        if code != 0:
            raise install_failure(self.name, requirements, index, tail, log)

    @abstractmethod
    def install_command(self, env_python: Path, requirements: list[str], index: IndexSettings) -> list[str]:
        """The command line that installs ``requirements`` into the env of ``env_python``."""

    def install_locked(self, env_python: Path, hashed: Path, index: IndexSettings, log: Path,
                       progress: Progress = SILENT, offline: bool = False, binary_only: bool = True) -> None:
        """Install exactly the files of a lock: ``hashed`` is its requirements file
        (``wheelhouse.Staged.requirements``: one pin and the chosen file's hashes per package),
        installed with ``--require-hashes --no-deps`` (and ``--only-binary :all:`` when
        ``binary_only``: every file a wheel), so nothing is resolved, nothing else pulled in,
        and a file whose hash differs is refused. ``offline``: no index and no network at all,
        only ``index``'s find-links folders."""
        from .install_output import reader

        cmd = self.locked_command(env_python, hashed, index, offline)
        if not binary_only:
            at = cmd.index("--only-binary")
            del cmd[at:at + 2]
        code, tail = run_logged(cmd, log, self.environ(index, offline), reader(self.name, progress))
        if code != 0:
            raise install_failure(self.name, [f"the lock's packages ({hashed.name})"], index, tail, log)

    @abstractmethod
    def locked_command(self, env_python: Path, hashed: Path, index: IndexSettings, offline: bool) -> list[str]:
        """The command line that installs the hashed requirements file ``hashed``, as ``install_locked`` says."""

    def environ(self, index: IndexSettings | None = None, offline: bool = False) -> dict[str, str]:
        return clean_environ()


LOCKED = ["--require-hashes", "--no-deps", "--only-binary", ":all:"]


@dataclass
class UvInstaller(Installer):
    name: str = field(init=False, default="uv")

    @staticmethod
    def binary() -> str | None:
        try:
            from uv import find_uv_bin

            return find_uv_bin()
        except (ImportError, FileNotFoundError):
            import shutil

            return shutil.which("uv")

    def environ(self, index: IndexSettings | None = None, offline: bool = False) -> dict[str, str]:
        extra = {"UV_PYTHON_DOWNLOADS": "never", "UV_NO_CONFIG": "1", **({"UV_OFFLINE": "1"} if offline else {})}
        if self.cache_dir and "UV_CACHE_DIR" not in os.environ:
            extra["UV_CACHE_DIR"] = str(self.cache_dir)
        env = clean_environ({**extra, **(index.variables("UV") if index else {})})
        if offline:  # the user's own uv variables can't bring an index back
            for key in ("UV_INDEX_URL", "UV_EXTRA_INDEX_URL", "UV_INDEX", "UV_DEFAULT_INDEX"):
                env.pop(key, None)
        return env

    def create_venv(self, python: str, target: Path, log: Path) -> None:
        cmd = [self.binary() or "uv", "venv", "--quiet", "--allow-existing", "--no-project",
               "--python", python, str(target)]
        code, tail = run_logged(cmd, log, self.environ())
        if code != 0:
            raise OperationError(f"uv could not create a virtualenv with {python}: {_last_error(tail)}",
                                 "check the interpreter, or try --installer pip", log=str(log))

    def install_command(self, env_python, requirements, index):
        cmd = [self.binary() or "uv", "pip", "install", "--python", str(env_python), "--compile-bytecode"]
        return cmd + uv_index_strategy(index) + index.args() + list(requirements)

    def locked_command(self, env_python, hashed, index, offline):
        cmd = [self.binary() or "uv", "pip", "install", "--python", str(env_python), "--compile-bytecode", *LOCKED]
        return cmd + (["--offline"] if offline else []) + uv_index_strategy(index) + index.args() + ["-r", str(hashed)]


def uv_index_strategy(index: IndexSettings) -> list[str]:
    """pip considers every index for every package; uv by default stops at the first index
    that has the name (a lock's pin found only on a later index is then "no version"). Keep
    pip's meaning for the user's pip configuration wherever there is more than one index."""
    return ["--index-strategy", "unsafe-best-match"] if index.extra_index_urls and not index.no_index else []


@dataclass
class PipInstaller(Installer):
    name: str = field(init=False, default="pip")

    def create_venv(self, python: str, target: Path, log: Path) -> None:
        cmd = [sys.executable, "-m", "virtualenv", "--quiet", "--python", python,
               "--no-setuptools", "--no-wheel", "--no-periodic-update", str(target)]
        code, tail = run_logged(cmd, log, clean_environ())
        if code != 0:
            raise OperationError(f"virtualenv could not create an env with {python}: {_last_error(tail)}",
                                 "check the interpreter", log=str(log))

    def install_command(self, env_python, requirements, index):
        # pip compiles bytecode by default; say it anyway, the benchmark compares like with like.
        return [*self._pip(env_python), "install", "--compile", "--disable-pip-version-check", *index.args(),
                *requirements]

    def locked_command(self, env_python, hashed, index, offline):
        # Offline, ``index`` is --no-index with the find-links folders alone (pip has no other switch).
        return [*self._pip(env_python), "install", "--compile", "--disable-pip-version-check", *LOCKED,
                *index.args(), "-r", str(hashed)]

    @staticmethod
    def _pip(env_python) -> list[str]:
        """The env's own pip; an env made by uv has none: then envcheck's pip installs into it."""
        from .metadata import installed_packages

        env_dir = Path(env_python).parent.parent
        return [str(env_python), "-m", "pip"] if "pip" in installed_packages(env_dir) \
            else [sys.executable, "-m", "pip", "--python", str(env_python)]

    def environ(self, index: IndexSettings | None = None, offline: bool = False) -> dict[str, str]:
        # The index settings arrive whole (the user's pip configuration merged in already), so
        # pip must not read its configuration a second time with its own precedence: no config
        # file, and only the index variables set here.
        index_vars = ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS", "PIP_NO_INDEX")
        env = {k: v for k, v in clean_environ().items() if k not in index_vars}
        env.update({"PIP_CONFIG_FILE": os.devnull, "PIP_NO_INPUT": "1", **(index.variables("PIP") if index else {})})
        return env


def choose_backend(flag: str | None, recorded: str | None = None) -> Installer:
    """flag > recorded in the env > $ENVCHECK_INSTALLER > uv if available > pip."""
    choice = flag or recorded or os.environ.get("ENVCHECK_INSTALLER") or None
    if choice is None:
        choice = "uv" if UvInstaller.binary() else "pip"
    if choice not in BACKENDS:
        raise UsageError(f"unknown installer {choice!r}", "use --installer uv or --installer pip")
    if choice == "uv" and not UvInstaller.binary():
        raise UsageError("installer uv is not available", "pip install uv, or pass --installer pip")
    return UvInstaller() if choice == "uv" else PipInstaller()


_RESOLUTION = re.compile(
    r"No solution found|Could not find a version|No matching distribution|not found in the package "
    r"registry|Because .* was not found|Failed to fetch|Could not fetch URL|Failed to download|"
    r"Connection refused|Name or service not known|failed to resolve|is not a valid|"
    r"Invalid requirement|No such file or directory.*find-links|Distribution not found",
    re.IGNORECASE,
)


def _last_error(tail: str) -> str:
    """The installer's last error, with the lines that continue it (uv's "Because only the
    following versions of X are available:" and the versions it lists, up to the conclusion)."""
    raw = [ln.rstrip() for ln in tail.splitlines() if ln.strip() and not ln.startswith("$ ")]
    for at in range(len(raw) - 1, -1, -1):
        if re.search(r"error|because|not found|no solution|could not", raw[at], re.IGNORECASE):
            said = [raw[at].strip()]
            depth = len(raw[at]) - len(raw[at].lstrip())
            for line in raw[at + 1:]:  # more indented than the line it continues
                if len(line) - len(line.lstrip()) <= depth or len(said) >= 12:
                    break
                said.append(line.strip())
            if at and "(from versions:" in raw[at - 1]:  # pip says which versions there are the line before
                said.insert(0, raw[at - 1].strip() + ";")
            text = " ".join(s.removeprefix("ERROR: ").removeprefix("error: ") for s in said)
            return text if len(text) <= 600 else text[:597] + "..."
    return raw[-1].strip() if raw else "no output"


_DISK = re.compile(r"(No space left on device|os error 28)|(Disk quota exceeded|os error 122)|"
                   r"(Read-only file system|os error 30)", re.IGNORECASE)


_PIP_HASH = re.compile(r"^\s*(?P<what>\S+) from (?P<where>\S+?)(?: \(from .*\))?:\s*\n\s*Expected (?P<alg>sha\d+) "
                       r"(?P<expected>[0-9a-f]+)\s*\n\s*Got\s+(?P<found>[0-9a-f]+)", re.MULTILINE)
_UV_HASH = re.compile(r"Hash mismatch for `(?P<what>[^`]+)`\s*Expected:\s*(?P<alg>sha\d+):(?P<expected>[0-9a-f]+)"
                      r"\s*Computed:\s*sha\d+:(?P<found>[0-9a-f]+)")


def hash_mismatch(tail: str) -> OperationError | None:
    """A file the installer fetched whose bytes are not the locked ones, said in one form
    whichever installer found it (``wheelhouse`` says it so for the files envcheck fetches)."""
    match = _PIP_HASH.search(tail) or _UV_HASH.search(tail)
    if match is None:
        return None
    where = redact(match.groupdict().get("where")) or "the index"
    return OperationError(f"hash mismatch: {match['what']} from {where}: the lock expects {match['alg']} "
                          f"{match['expected']}, the file has {match['found']}",
                          "this is not the file that was locked: check the index, or lock again")


def install_failure(backend: str, requirements: list[str], index: IndexSettings, tail: str, log: Path):
    """A resolution or index failure is bad input (exit 2); a full or read-only disk, a file
    whose hash is not the locked one, or anything else, failed (exit 1). Credentials in the
    installer's output are redacted."""
    mismatch = hash_mismatch(tail)
    if mismatch is not None:
        mismatch.log = str(log)
        return mismatch
    reason = redact(_last_error(tail))
    disk = _DISK.search(tail)
    if disk:
        what = ("no space left on the device", "disk quota exceeded", "read-only file system")[disk.lastindex - 1]
        return OperationError(f"{backend} install failed: {what} ({reason})",
                              "free space (or make the env home writable) and run it again", log=str(log))
    if _RESOLUTION.search(tail):
        return UsageError(
            f"{backend} could not resolve {' '.join(requirements)} from {index.describe()}: {reason}",
            "check the requirement names and versions, and --index-url/--find-links"
            + "".join(f"; the preset's index {redact(u)} was unreachable: connect to it, or put its "
                      "wheels in a --find-links folder" for u in index.unreachable),
            log=str(log))
    return OperationError(f"{backend} install failed: {reason}", "see the log", log=str(log))
