"""One small interface, two backends (uv, pip), the same index settings for both.

The backend is chosen by ``choose_backend`` with a written precedence: the ``--installer``
flag, else the one recorded in the env, else ``$ENVCHECK_INSTALLER``, else uv when it is
available, else pip. Both backends get the index settings of the user's pip configuration
(``pip config list`` and ``PIP_*`` variables) with the command line's options on top, so a
site mirror applies to uv too (uv does not read pip's configuration itself).

Index locations may carry credentials (``https://user:token@host/simple``), so they never
travel on the installer's command line, where ``ps`` and the log's ``$ cmd`` line would show
them: they go in the variables each installer reads (``UV_INDEX_URL``..., ``PIP_INDEX_URL``...),
and every text envcheck writes or prints about them passes through ``redact``.
"""
from __future__ import annotations

import os
import re
import shlex
import sys
from abc import ABC, abstractmethod
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

from .. import processes
from ..errors import OperationError, UsageError
from ..progress import SILENT, Progress
from ..processes import clean_environ  # the installers' environment: processes' clean one

BACKENDS = ("uv", "pip")
PROBE_TIMEOUT = 3.0  # seconds an index has to answer before an install uses it
TLS_ANSWER = 0  # probe's status for an index whose TLS handshake failed here


@dataclass(frozen=True)
class IndexSettings:
    """Where packages come from. The command line's options are one (``from_options``), the
    user's pip configuration another (``settings_from_pip_config``); ``merged`` lays the first
    over the second."""

    index_url: str | None = None
    extra_index_urls: tuple[str, ...] = ()
    find_links: tuple[str, ...] = ()
    no_index: bool = False
    unreachable: tuple[str, ...] = ()  # a preset's indexes left out: they could not be reached

    @classmethod
    def from_options(cls, index_url: str | None = None, extra_index_urls=(), find_links=(),
                     no_index: bool = False) -> "IndexSettings":
        """The command line's index options, checked: bad input is a UsageError before any file
        is written (a value like ``--no-deps`` would otherwise reach the installer as an option)."""
        for option, values in (("--index-url", [index_url] if index_url else []),
                               ("--extra-index-url", extra_index_urls), ("--find-links", find_links)):
            for value in values:
                _check_location(option, value, url=option != "--find-links")
        return cls(index_url or None, tuple(extra_index_urls), tuple(find_links), bool(no_index))

    def merged(self, overrides: "IndexSettings | None") -> "IndexSettings":
        """``overrides`` (the command line) over these settings: a given option replaces the configured one."""
        out = self
        if overrides is None:
            return out
        if overrides.index_url:
            out = replace(out, index_url=overrides.index_url)
        if overrides.extra_index_urls:
            out = replace(out, extra_index_urls=overrides.extra_index_urls)
        if overrides.find_links:
            out = replace(out, find_links=overrides.find_links)
        if overrides.no_index:
            out = replace(out, no_index=True)
        return out

    def args(self) -> list[str]:
        """The options that go on the command line, spelt the same for ``pip install`` and
        ``uv pip install``: ``--no-index``, and find-links when none carries credentials (a
        folder's path may hold the spaces and commas the variables use as separators)."""
        out = ["--no-index"] if self.no_index else []
        if not self._secret_links():
            for link in self.find_links:
                out += ["--find-links", link]
        return out

    def variables(self, prefix: str) -> dict[str, str]:
        """The index URLs (and find-links with credentials) as installer variables: ``prefix``
        is ``UV`` or ``PIP``. uv splits find-links on commas, pip on white space."""
        out: dict[str, str] = {}
        if not self.no_index:
            if self.index_url:
                out[f"{prefix}_INDEX_URL"] = self.index_url
            if self.extra_index_urls:
                out[f"{prefix}_EXTRA_INDEX_URL"] = " ".join(self.extra_index_urls)
        if self._secret_links():
            out[f"{prefix}_FIND_LINKS"] = ("," if prefix == "UV" else " ").join(self.find_links)
        return out

    def _secret_links(self) -> bool:
        return any(_CREDENTIALS.search(link) for link in self.find_links)

    def with_preset_indexes(self, urls: tuple[str, ...], timeout: float = PROBE_TIMEOUT) -> "IndexSettings":
        """These settings checked, with a preset's extra indexes ``urls`` added where they
        answer. The indexes are asked together, each within ``timeout``, so an index that
        never answers costs seconds, not the installer's minutes of retries:

        - the indexes given (the command line's, else pip's configuration; http and https):
          one that gives no HTTP answer at all is a UsageError naming it;
        - the preset's: one that gives no answer below 500 is left out and named in
          ``unreachable`` (a warning: the configured indexes and find-links may well hold the
          same wheels, as a mirror does).

        With ``--no-index`` no index is used, and none is asked."""
        if self.no_index:
            return self
        given = tuple(u for u in dict.fromkeys((self.index_url or "", *self.extra_index_urls))
                      if u.lower().startswith(("http://", "https://")))
        new = tuple(u for u in dict.fromkeys(urls) if u not in self.extra_index_urls and u != self.index_url)
        answers = probe((*given, *new), timeout)
        for url in given:
            if isinstance(answers[url], str):
                raise UsageError(f"the index {redact(url)} could not be reached: {answers[url]}",
                                 "check its URL and the network (a proxy: https_proxy), or leave it out "
                                 "(--index-url, --extra-index-url; `pip config list` shows the configured ones)")
        up = tuple(u for u in new if isinstance(answers[u], int) and answers[u] < 500)
        return replace(self, extra_index_urls=self.extra_index_urls + up,
                       unreachable=tuple(u for u in new if u not in up))

    def warnings(self) -> list[str]:
        return [f"the preset's index {redact(u)} could not be reached; installing from the configured "
                "indexes and find-links only" for u in self.unreachable]

    def describe(self) -> str:
        """Where packages come from, credentials removed: for messages."""
        if self.no_index:
            return "--no-index" + "".join(f" --find-links {redact(f)}" for f in self.find_links)
        shown = redact(self.index_url) or "the default index"
        shown += "".join(f" and {redact(u)}" for u in self.extra_index_urls)
        return shown + "".join(f" (not {redact(u)}: unreachable)" for u in self.unreachable)

    def to_json(self) -> dict:
        """For the manifest: URLs with any credentials removed."""
        return {
            "index_url": redact(self.index_url),
            "extra_index_urls": [redact(u) for u in self.extra_index_urls],
            "find_links": [redact(u) for u in self.find_links],
            "no_index": self.no_index,
            **({"unreachable": [redact(u) for u in self.unreachable]} if self.unreachable else {}),
        }


def probe(urls: tuple[str, ...], timeout: float = PROBE_TIMEOUT) -> dict[str, int | str]:
    """Each URL's HTTP status, or why it gave none (a str), asked all at once within
    ``timeout`` in all; ``TLS_ANSWER`` where the TLS handshake failed here (the server did
    answer: the installer, with the CA certificates it is given, decides). Proxies as the
    installers use them (``https_proxy``...); credentials are left out of the request (an
    answer that asks for them is an answer). The name lookup counts too: a resolver that
    hangs is not waited for (each probe runs in a daemon thread)."""
    import ssl
    import threading
    import time
    import urllib.error
    import urllib.parse
    import urllib.request

    answers: dict[str, int | str] = {}

    def ask(url: str) -> None:
        parts = urllib.parse.urlsplit(url)
        bare = parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl()
        try:
            with urllib.request.urlopen(urllib.request.Request(bare, method="HEAD"), timeout=timeout) as reply:
                answers[url] = reply.status
        except urllib.error.HTTPError as exc:
            answers[url] = exc.code
        except urllib.error.URLError as exc:
            if not isinstance(exc.reason, TimeoutError):  # timed out: no answer, said below
                tls = isinstance(exc.reason, ssl.SSLError)
                answers[url] = TLS_ANSWER if tls else redact(str(exc.reason)) or "no answer"
        except TimeoutError:
            pass
        except (OSError, ValueError) as exc:
            answers[url] = redact(str(exc)) or type(exc).__name__

    threads = [threading.Thread(target=ask, args=(url,), name="envcheck-index-probe", daemon=True)
               for url in dict.fromkeys(urls)]
    deadline = time.monotonic() + timeout
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(max(deadline - time.monotonic(), 0))
    return {url: answers.get(url, f"no answer within {timeout:g} s") for url in urls}


_CREDENTIALS = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^\s/@]+@")


def redact(text: str | None) -> str | None:
    """``text`` with the credentials of every URL in it replaced by ``***``."""
    return _CREDENTIALS.sub(r"\1***@", text) if text else text


def _check_location(option: str, value: str, url: bool) -> None:
    shown = redact(value)
    fix = f"pass the index's URL, e.g. {option} https://pypi.org/simple" if url else \
        f"pass a folder of wheels or a URL, e.g. {option} ./wheels"
    if not value or value.startswith("-"):
        raise UsageError(f"{option} {shown!r} is not a URL or folder (it starts with '-' or is empty)", fix)
    if not value.isprintable() or (url and any(c.isspace() for c in value)):
        raise UsageError(f"{option} {shown!r} holds white space or a control character", fix)


_CONFIG_LINE = re.compile(r"^(?P<scope>[^.]*)\.(?P<key>[\w-]+)=(?P<value>.*)$")


def _pip_config_lines() -> list[str]:
    """``pip config list`` of the pip that installs here (envcheck's own, else PATH's)."""
    env = clean_environ({"PIP_DISABLE_PIP_VERSION_CHECK": "1"})
    for cmd in ([sys.executable, "-m", "pip"], ["pip3"], ["pip"]):
        try:
            done = processes.run([*cmd, "config", "list"], timeout=30, env=env)
        except OSError:
            continue
        if done.returncode == 0:
            return done.stdout.splitlines()
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

    def environ(self, index: IndexSettings | None = None) -> dict[str, str]:
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

    def environ(self, index: IndexSettings | None = None) -> dict[str, str]:
        extra = {"UV_PYTHON_DOWNLOADS": "never", "UV_NO_CONFIG": "1"}
        if self.cache_dir and "UV_CACHE_DIR" not in os.environ:
            extra["UV_CACHE_DIR"] = str(self.cache_dir)
        return clean_environ({**extra, **(index.variables("UV") if index else {})})

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

    def environ(self, index: IndexSettings | None = None) -> dict[str, str]:
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
    lines = [ln.strip() for ln in tail.splitlines() if ln.strip() and not ln.startswith("$ ")]
    for line in reversed(lines):
        if re.search(r"error|because|not found|no solution|could not", line, re.IGNORECASE):
            return line.removeprefix("ERROR: ").removeprefix("error: ")
    return lines[-1] if lines else "no output"


_DISK = re.compile(r"(No space left on device|os error 28)|(Disk quota exceeded|os error 122)|"
                   r"(Read-only file system|os error 30)", re.IGNORECASE)


def install_failure(backend: str, requirements: list[str], index: IndexSettings, tail: str, log: Path):
    """A resolution or index failure is bad input (exit 2); a full or read-only disk, or anything
    else, failed (exit 1). Credentials in the installer's output are redacted."""
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
