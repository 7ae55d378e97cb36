"""One small interface, two backends (uv, pip), the same index settings for both.

The backend is chosen by ``choose_backend`` with a written precedence: the ``--installer``
flag, else the one recorded in the env, else ``$ENVCHECK_INSTALLER``, else uv when it is
available, else pip. Both backends get the index settings of the user's pip configuration
(``pip config list`` and ``PIP_*`` variables) with the command line's options on top, so a
site mirror applies to uv too (uv does not read pip's configuration itself).
"""
from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..errors import OperationError, UsageError

BACKENDS = ("uv", "pip")


@dataclass(frozen=True)
class IndexSettings:
    index_url: str | None = None
    extra_index_urls: tuple[str, ...] = ()
    find_links: tuple[str, ...] = ()
    no_index: bool = False

    def merged(self, *, index_url=None, extra_index_urls=(), find_links=(), no_index=False) -> "IndexSettings":
        """Command-line options over configuration: a given option replaces the configured one."""
        out = self
        if index_url:
            out = replace(out, index_url=index_url)
        if extra_index_urls:
            out = replace(out, extra_index_urls=tuple(extra_index_urls))
        if find_links:
            out = replace(out, find_links=tuple(find_links))
        if no_index:
            out = replace(out, no_index=True)
        return out

    def args(self) -> list[str]:
        """The options, spelt the same for ``pip install`` and ``uv pip install``."""
        out: list[str] = []
        if self.no_index:
            out.append("--no-index")
        else:
            if self.index_url:
                out += ["--index-url", self.index_url]
            for url in self.extra_index_urls:
                out += ["--extra-index-url", url]
        for link in self.find_links:
            out += ["--find-links", link]
        return out

    def to_json(self) -> dict:
        """For the manifest: URLs with any credentials removed."""
        return {
            "index_url": _redact(self.index_url),
            "extra_index_urls": [_redact(u) for u in self.extra_index_urls],
            "find_links": [_redact(u) for u in self.find_links],
            "no_index": self.no_index,
        }


def _redact(url: str | None) -> str | None:
    return re.sub(r"//[^/@]+@", "//***@", url) if url else url


_CONFIG_LINE = re.compile(r"^(?P<scope>[^.]*)\.(?P<key>[\w-]+)=(?P<value>.*)$")


def _pip_config_lines() -> list[str]:
    """``pip config list`` of the pip that installs here (envcheck's own, else PATH's)."""
    for cmd in ([sys.executable, "-m", "pip"], ["pip3"], ["pip"]):
        try:
            proc = subprocess.run([*cmd, "config", "list"], capture_output=True, text=True,
                                  timeout=30, env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
        except (OSError, subprocess.TimeoutExpired):
            continue
        if proc.returncode == 0:
            return proc.stdout.splitlines()
    return []


def _values(raw: str) -> list[str]:
    value = raw.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        value = value[1:-1]
    return [v for v in re.split(r"\s+", value) if v]


def settings_from_pip_config(lines: list[str] | None = None) -> IndexSettings:
    """Index settings as pip would use them: ``[global]`` < ``[install]`` < ``PIP_*`` variables."""
    lines = _pip_config_lines() if lines is None else lines
    ranked: dict[str, tuple[int, list[str]]] = {}
    rank = {"global": 1, "install": 2, ":env:": 3}
    for line in lines:
        match = _CONFIG_LINE.match(line.strip())
        if not match or match["scope"] not in rank:
            continue
        key, level = match["key"], rank[match["scope"]]
        if key in ranked and ranked[key][0] > level:
            continue
        ranked[key] = (level, _values(match["value"]))
    for key in ("index-url", "extra-index-url", "find-links", "no-index"):
        env_value = os.environ.get("PIP_" + key.upper().replace("-", "_"))
        if env_value is not None:
            ranked[key] = (3, _values(env_value))

    def get(key: str) -> list[str]:
        return ranked.get(key, (0, []))[1]

    no_index = any(v.lower() in ("1", "true", "yes", "on") for v in get("no-index"))
    index = get("index-url")
    return IndexSettings(index_url=index[0] if index else None,
                         extra_index_urls=tuple(get("extra-index-url")),
                         find_links=tuple(get("find-links")), no_index=no_index)


def clean_environ(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment installers run in: no leaked interpreter or virtualenv settings."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PIP_REQUIRE_VIRTUALENV",
                        "PYTHONDONTWRITEBYTECODE")}
    if extra:
        env.update(extra)
    return env


def run_logged(cmd: list[str], log: Path, env: dict[str, str]) -> tuple[int, str]:
    """Run a command with its output appended to ``log``; on an interrupt, stop it and re-raise.

    Returns (exit code, the tail of its output).
    """
    with open(log, "a", encoding="utf-8") as fh:
        fh.write(f"$ {shlex.join(cmd)}\n")
        fh.flush()
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True, preexec_fn=_die_with_parent)
        try:
            code = proc.wait()
        except BaseException:
            _stop(proc)
            raise
    tail = log.read_text(encoding="utf-8", errors="replace").splitlines()[-40:]
    return code, "\n".join(tail)


def _die_with_parent() -> None:
    """In the child, on Linux: be killed when envcheck is, even by SIGKILL (which envcheck
    can't catch to clean up), so no installer goes on writing into an abandoned env."""
    if sys.platform.startswith("linux"):
        import ctypes

        try:
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass


def _stop(proc: subprocess.Popen) -> None:
    """Terminate, wait briefly, kill: the child and everything it started."""
    for sig, wait in ((signal.SIGTERM, 5), (signal.SIGKILL, 5)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


@dataclass
class Installer:
    """Base interface: create a venv for an interpreter, install requirements into it."""

    name: str = field(init=False, default="")
    cache_dir: Path | None = None

    def create_venv(self, python: str, target: Path, log: Path) -> None:
        raise OperationError(f"installer {self.name} can't create envs")

    def install(self, env_python: Path, requirements: list[str], index: IndexSettings, log: Path) -> None:
        code, tail = run_logged(self.install_command(env_python, requirements, index), log, self.environ())
        if code != 0:
            raise install_failure(self.name, requirements, index, tail, log)

    def install_command(self, env_python: Path, requirements: list[str], index: IndexSettings) -> list[str]:
        raise OperationError(f"installer {self.name} can't install")

    def environ(self) -> dict[str, str]:
        return clean_environ()


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

    def environ(self) -> dict[str, str]:
        extra = {"UV_PYTHON_DOWNLOADS": "never", "UV_NO_CONFIG": "1"}
        if self.cache_dir and "UV_CACHE_DIR" not in os.environ:
            extra["UV_CACHE_DIR"] = str(self.cache_dir)
        return clean_environ(extra)

    def create_venv(self, python: str, target: Path, log: Path) -> None:
        cmd = [self.binary() or "uv", "venv", "--quiet", "--allow-existing", "--no-project",
               "--python", python, str(target)]
        code, tail = run_logged(cmd, log, self.environ())
        if code != 0:
            raise OperationError(f"uv could not create a virtualenv with {python}: {_last_error(tail)}",
                                 "check the interpreter, or try --installer pip", log=str(log))

    def install_command(self, env_python, requirements, index):
        cmd = [self.binary() or "uv", "pip", "install", "--python", str(env_python), "--compile-bytecode"]
        if index.extra_index_urls and not index.no_index:
            # pip considers every index for every package; uv by default stops at the first
            # index that has the name. Keep pip's meaning for the user's pip configuration.
            cmd += ["--index-strategy", "unsafe-best-match"]
        return cmd + index.args() + list(requirements)


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
        # An env made by uv has no pip of its own: then envcheck's pip installs into it.
        from .metadata import installed_packages

        env_dir = Path(env_python).parent.parent
        pip = [str(env_python), "-m", "pip"] if "pip" in installed_packages(env_dir) \
            else [sys.executable, "-m", "pip", "--python", str(env_python)]
        # pip compiles bytecode by default; say it anyway, the benchmark compares like with like.
        return [*pip, "install", "--compile", "--disable-pip-version-check", *index.args(), *requirements]

    def environ(self) -> dict[str, str]:
        # The index settings arrive on the command line (the user's pip configuration merged
        # in already), so pip must not read them a second time with its own precedence.
        index_vars = ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS", "PIP_NO_INDEX")
        env = {k: v for k, v in clean_environ().items() if k not in index_vars}
        env.update({"PIP_CONFIG_FILE": os.devnull, "PIP_NO_INPUT": "1"})
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
    lines = [ln.strip() for ln in tail.splitlines() if ln.strip() and not ln.startswith("$ ")]
    for line in reversed(lines):
        if re.search(r"error|because|not found|no solution|could not", line, re.IGNORECASE):
            return line.removeprefix("ERROR: ").removeprefix("error: ")
    return lines[-1] if lines else "no output"


def install_failure(backend: str, requirements: list[str], index: IndexSettings, tail: str, log: Path):
    """A resolution or index failure is bad input (exit 2); anything else failed (exit 1)."""
    reason = _last_error(tail)
    where = "--no-index" if index.no_index else (index.index_url or "the default index")
    if _RESOLUTION.search(tail):
        return UsageError(
            f"{backend} could not resolve {' '.join(requirements)} from {where}: {reason}",
            "check the requirement names and versions, and --index-url/--find-links",
            log=str(log))
    return OperationError(f"{backend} install failed: {reason}", "see the log", log=str(log))
