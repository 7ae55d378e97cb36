"""The cluster's address, and what answers there, checked before Ray is given it.

Which address: ``--address``, else ``RAY_ADDRESS``, else ``auto`` (the cluster ``ray start``
left on this machine). Ray rewrites it before connecting: ``auto`` to that cluster's
``host:port``, a loopback host (``localhost``, ``127.0.0.1``, ``::1``) to this machine's own
IP. Messages name the address as it was given, and the one Ray connects to where it differs.

Ray's own connect retries an address that doesn't answer as a cluster for minutes (20 tries
of more than 30 s each, a plain web server or a silent socket included). So, first, the
address Ray will connect to is asked here: a TCP connection (``CONNECT_TIMEOUT``), then the
opening of a gRPC conversation (HTTP/2's client preface and an empty SETTINGS frame: a Ray
cluster's address is its GCS, a gRPC server, which answers with its own SETTINGS frame)
within ``ANSWER_TIMEOUT``. An address where nothing listens, or where something else answers
(a web server such as the dashboard's, a socket that says nothing), is a UsageError naming
what answered. A gRPC server that isn't Ray's GCS (a raylet's port, Ray Client's) passes
this and is left to Ray, whose connect is bounded by ``RAY_CONNECT_BOUNDS``.
"""
from __future__ import annotations

import os
import socket
import sys
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

from ..errors import UsageError

START = ("start one: `ray start --head` on the head node and `ray start --address HEAD:6379` on "
         "each other node, then run envcheck fleet on one of them; or pass --address HOST:PORT "
         "(or set RAY_ADDRESS)")
GCS_PORT = ("give the cluster's address, its GCS port (`ray start --head --port`, 6379 by default; "
            "`ray status` on a node of the cluster shows it)")
CONNECT_TIMEOUT = 5.0  # seconds for the TCP connection
ANSWER_TIMEOUT = 5.0  # seconds for the first bytes back
# Ray's connect settings, read from the environment when Ray is imported: one try of at most
# 10 s (Ray's own defaults: 20 tries of 30 s); a value the user set is kept
RAY_CONNECT_BOUNDS = {"RAY_gcs_server_port_wait_time_s": "1", "RAY_py_gcs_connect_timeout_s": "10"}
# HTTP/2's client preface, then an empty SETTINGS frame (length 0, type 4, no flags, stream 0)
HTTP2_OPENING = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00" + b"\x04" + b"\x00" * 5
SETTINGS = 0x04  # the frame type a gRPC server answers with first


@dataclass(frozen=True)
class Address:
    given: str  # as the user gave it (--address, RAY_ADDRESS), or "auto"
    bootstrap: str  # the host:port Ray connects to

    def __str__(self) -> str:
        if self.given == "auto":
            return f"{self.bootstrap} (the cluster `ray start` left on this machine)"
        if self.given != self.bootstrap:
            return f"{self.given} (which Ray connects to as {self.bootstrap})"
        return self.given


def bound_ray_connect() -> None:
    """Bound Ray's connect (``RAY_CONNECT_BOUNDS``): to be called before Ray is imported."""
    for name, value in RAY_CONNECT_BOUNDS.items():
        os.environ.setdefault(name, value)


def ray_connect_bound() -> str:
    """How long Ray's connect tries, as set (for messages)."""
    tries, each = (os.environ.get(name, "?") for name in RAY_CONNECT_BOUNDS)
    return f"for up to {each} s" if tries == "1" else f"{tries} times, for up to {each} s each"


def resolve(address: str | None) -> Address:
    """The address to connect to, as given and as Ray will connect to it."""
    given = address or os.environ.get("RAY_ADDRESS") or "auto"
    if "://" in given:
        raise UsageError(f"--address {given}: give the cluster's HOST:PORT", "run envcheck fleet on "
                         "a node of the cluster (Ray Client, ray://, is not supported)")
    try:
        from ray._private.services import canonicalize_bootstrap_address
    except ImportError:  # another Ray: its own resolution, without the checks here
        return Address(given, given)
    try:
        resolved = canonicalize_bootstrap_address(given)
    except ConnectionError:
        raise UsageError("no Ray cluster found on this machine", START) from None
    except ValueError:
        raise UsageError(f"--address {given}: not HOST:PORT", "e.g. --address 10.0.0.1:6379") from None
    if not resolved:
        raise UsageError(f"--address {given}: not a Ray cluster address", "e.g. --address 10.0.0.1:6379")
    return Address(given, resolved)


def check(address: Address) -> None:
    """A UsageError unless a gRPC server answers at ``address`` (see the module docstring)."""
    host, _, port = address.bootstrap.rpartition(":")
    try:
        sock = socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT)
    except (OSError, ValueError) as exc:
        raise UsageError(f"no Ray cluster at {address}: {exc}", START) from None
    with sock:
        answer = _first_bytes(sock)
    what = _not_ray(answer)
    if what:
        raise UsageError(f"no Ray cluster at {address}: {what}", GCS_PORT)


def _first_bytes(sock: socket.socket) -> bytes | None:
    """Up to 200 bytes answered to the gRPC opening; ``b""``: closed unanswered; None: silent."""
    answer = b""
    try:
        sock.settimeout(ANSWER_TIMEOUT)
        sock.sendall(HTTP2_OPENING)
        while len(answer) < 9:  # a frame's header
            chunk = sock.recv(200 - len(answer))
            if not chunk:
                break
            answer += chunk
    except socket.timeout:
        return answer or None
    except OSError:  # reset: it closed on what it read
        pass
    return answer


def _not_ray(answer: bytes | None) -> str | None:
    """What answered, when it isn't a gRPC server; None when it is."""
    if answer is None:
        return f"the port takes connections but answered nothing in {ANSWER_TIMEOUT:g} s"
    if not answer:
        return "the port closed the connection without answering"
    if len(answer) >= 9 and answer[3] == SETTINGS:
        return None
    first = answer.split(b"\n", 1)[0].strip().decode("ascii", "replace")
    shown = "".join(c if c.isprintable() else "?" for c in first)[:60]
    if answer.startswith((b"HTTP/", b"<")):
        return f"a web server answered ({shown!r}), not a Ray cluster: the Ray dashboard's port is one"
    return f"something that isn't a Ray cluster answered ({shown!r})"


@contextmanager
def stderr_kept() -> Iterator[None]:
    """What is written on file descriptor 2 meanwhile (Ray's connect logs there from C++,
    a line per failed try) is held back, then written out unless the block raised: a failed
    connect is the caller's one-line error."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as held:
        os.dup2(held.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
        held.seek(0)
        with os.fdopen(os.dup(2), "wb") as stderr:
            stderr.write(held.read())
