"""Where packages come from: the index settings both installers get, read from the user's pip
configuration (``pip config list`` and ``PIP_*`` variables) with the command line's options
on top, so a site mirror applies to uv too (uv does not read pip's configuration itself); a
preset's own indexes probed before an install uses them.

Index locations may carry credentials (``https://user:token@host/simple``), so they never
travel on the installer's command line, where ``ps`` and the log's ``$ cmd`` line would show
them: they go in the variables each installer reads (``UV_INDEX_URL``..., ``PIP_INDEX_URL``...),
and every text envcheck writes or prints about them passes through ``redact``.
"""
from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass, replace

from .. import processes
from ..child_env import clean_environ  # what pip config list runs with: the clean environment
from ..durations import seconds
from ..errors import UsageError

PROBE_TIMEOUT = 3.0  # seconds an index has to answer before an install uses it, unless set:
PROBE_TIMEOUT_VAR = "ENVCHECK_INDEX_TIMEOUT"  # (seconds) for a slow proxy or a far mirror
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

    def with_preset_indexes(self, urls: tuple[str, ...], timeout: float | None = None) -> "IndexSettings":
        """These settings checked, with a preset's extra indexes ``urls`` added where they
        answer. The indexes are asked together, each within ``timeout`` (default
        ``probe_timeout()``), so an index that never answers costs seconds, not the
        installer's minutes of retries:

        - the indexes given (the command line's, else pip's configuration; http and https):
          one that gives no HTTP answer at all is a UsageError naming it;
        - the preset's: one that gives no answer below 500 is left out and named in
          ``unreachable`` (a warning: the configured indexes and find-links may well hold the
          same wheels, as a mirror does).

        With ``--no-index`` no index is used, and none is asked."""
        if self.no_index:
            return self
        timeout = probe_timeout() if timeout is None else timeout
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


def probe_timeout() -> float:
    """Seconds an index has to answer: ``$ENVCHECK_INDEX_TIMEOUT``, else ``PROBE_TIMEOUT``. A
    value ``durations.seconds`` refuses (not above 0, past its maximum) is a UsageError naming
    the variable."""
    text = os.environ.get(PROBE_TIMEOUT_VAR, "").strip()
    if not text:
        return PROBE_TIMEOUT
    try:
        return seconds(text)
    except UsageError as exc:
        raise UsageError(f"{PROBE_TIMEOUT_VAR}={exc.message}",
                         f"set it to the seconds an index may take to answer (default "
                         f"{PROBE_TIMEOUT:g}), e.g. {PROBE_TIMEOUT_VAR}=10, or unset it") from None


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


def configured(overrides: IndexSettings | None) -> IndexSettings:
    """The command line's settings ``overrides`` laid over the pip configuration. With
    ``--no-index`` and only local ``--find-links`` folders given, the configuration can't change
    where packages come from (nor how a server is reached: no trusted host, proxy or
    certificate applies), and its files aren't read (``pip config list`` starts pip: a second,
    on every install); its ``PIP_*`` variables still are (they cost nothing, and the fleet
    carries an index URL with credentials to a node in ``PIP_INDEX_URL``)."""
    local = overrides is not None and overrides.find_links and all(
        "://" not in link or link.startswith("file:") for link in overrides.find_links)
    if local and overrides.no_index:
        return settings_from_pip_config([]).merged(overrides)
    return settings_from_pip_config().merged(overrides)


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
