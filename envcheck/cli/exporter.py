"""The HTTP side of `envcheck serve`: ``/metrics`` and ``/healthz`` on the standard library's
threading HTTP server, and the loop that revalidates between scrapes.

A scrape reads the stored reports and the host's level-1 facts now (``usecases.readiness``,
one NVML session) and renders them (``views.metrics``); it never validates. Scrapes and the
loop's reads take one lock, so NVML is never initialised by two threads at once. The main
thread runs the loop: every ``TICK_S`` it asks ``usecases.revalidation`` for an env that is
due and runs ``envcheck validate`` for it as its child, one at a time. SIGTERM (or SIGHUP)
reaches the main thread as ``Interrupted``: the child's group is stopped (``processes.run``),
the server closed, and the command ends with 0; Ctrl-C the same, with 130.

HTTP (RFC 9110): ``GET`` and ``HEAD`` (the same status and headers, no body) on both paths. A
request's body (these paths take none) is read and dropped when its ``Content-Length`` is at
most ``MAX_BODY``; any other body (chunked, longer, a length that isn't one) ends the connection
after the answer: its bytes are never read as a next request. Every interface only when said:
``--bind 0.0.0.0`` or ``::``; an empty address, or another spelling of every interface, is
refused (exit 2).
"""
from __future__ import annotations

import errno
import queue
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import TYPE_CHECKING

from ..errors import UsageError
from .views.metrics import CONTENT_TYPE, exposition, families

if TYPE_CHECKING:
    from ..usecases.revalidation import Revalidation

TICK_S = 5.0
IDLE_S = 30.0
MAX_BODY = 65536  # bytes of a request body read (and dropped) to keep its connection
EVERY_INTERFACE = ("0.0.0.0", "::")


class Exporter:
    """What a scrape answers, for the env home at ``root``."""

    def __init__(self, root: str):
        self.root = root
        self.lock = threading.Lock()
        self.last = None  # the last answer, held until the next (see ``Readiness.infos``)

    def read(self):
        """(Readiness, HealthReport) of now (``usecases.readiness.read_now``), under the lock."""
        from ..paths import Home
        from ..usecases.readiness import read_now

        with self.lock:
            self.last = read_now(Home(self.root))
            return self.last

    def metrics(self) -> bytes:
        return exposition(families(self.read()[0])).encode("utf-8")


def _handler(exporter: Exporter) -> type:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        timeout = IDLE_S  # a kept-alive connection gives its thread back after this long idle

        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            self._skip_body()
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
                try:
                    body = exporter.metrics()
                except Exception as exc:  # a scrape that failed says so; the exporter stays up
                    self._send(500, "text/plain; charset=utf-8",
                               f"envcheck: scrape failed: {type(exc).__name__}: {exc}\n".encode())
                    return
                self._send(200, CONTENT_TYPE, body)
            elif path == "/healthz":
                self._send(200, "text/plain; charset=utf-8", b"ok\n")
            else:
                self._send(404, "text/plain; charset=utf-8", b"not found: /metrics or /healthz\n")

        def do_HEAD(self) -> None:  # noqa: N802: GET's status and headers, without its body
            self.do_GET()

        def _skip_body(self) -> None:
            """The request's body read and dropped, or the connection marked to close (see the
            module docstring)."""
            lengths = self.headers.get_all("Content-Length") or []
            said = lengths[0].strip() if len(set(lengths)) == 1 else ""
            if self.headers.get("Transfer-Encoding") is not None or (lengths and not (
                    said.isascii() and said.isdigit() and int(said) <= MAX_BODY)):
                self.close_connection = True
            elif said:
                self.rfile.read(int(said))

        def _send(self, status: int, kind: str, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            if self.close_connection:
                self.send_header("Connection", "close")
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def log_message(self, format, *args) -> None:  # noqa: A002: no line per scrape
            pass

    return Handler


class PooledHTTPServer(HTTPServer):
    """An HTTP server whose connections are handled by a pool of ``WORKERS`` daemon threads
    while one is free, else by a thread of their own: the same few threads serve the scrapes,
    so the exporter's memory settles after its first ones (a thread each spreads allocations
    over new malloc arenas for hundreds of scrapes), and connections that idle (kept alive,
    or opened and left silent) never hold a scrape up. A connection gives its thread back
    after ``IDLE_S`` without a request. A request that fails (the scraper hung up) is one
    line on stderr, no traceback."""

    WORKERS = 8

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.queue: queue.SimpleQueue = queue.SimpleQueue()
        self.free = self.WORKERS
        self.free_lock = threading.Lock()
        for n in range(self.WORKERS):
            threading.Thread(target=self._work, name=f"envcheck serve {n}", daemon=True).start()

    def process_request(self, request, client_address) -> None:
        with self.free_lock:
            pooled = self.free > 0
            self.free -= pooled
        if pooled:
            self.queue.put((request, client_address))
        else:
            threading.Thread(target=self._handle, args=(request, client_address), daemon=True).start()

    def _work(self) -> None:
        while True:
            self._handle(*self.queue.get())
            with self.free_lock:
                self.free += 1

    def _handle(self, request, client_address) -> None:
        try:
            self.finish_request(request, client_address)
        except Exception:
            self.handle_error(request, client_address)
        finally:
            self.shutdown_request(request)

    def handle_error(self, request, client_address) -> None:
        exc = sys.exc_info()[1]
        _say(f"a request from {client_address[0]} failed: {type(exc).__name__}: {exc}")


def listen(exporter: Exporter, bind: str, port: int) -> HTTPServer:
    """The server bound to ``bind``:``port`` (not yet serving); a bind that fails, or that
    would listen on every interface unless said (``EVERY_INTERFACE``), is a UsageError (exit 2)
    naming the address and the fix."""
    if not bind.strip():
        raise UsageError(f"--bind {bind!r} is no address", _BIND_FIX)

    class Server(PooledHTTPServer):
        address_family = socket.AF_INET6 if ":" in bind else socket.AF_INET

    where = f"[{bind}]:{port}" if ":" in bind else f"{bind}:{port}"
    try:
        server = Server((bind, port), _handler(exporter))
    except socket.gaierror:
        raise UsageError(f"--bind {bind!r} is no address of this host", _BIND_FIX) from None
    except OverflowError:
        raise UsageError(f"--port {port} is not a port", "give a port from 1 to 65535") from None
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise UsageError(f"{where} is in use", "stop what listens there, or give another --port") from None
        if exc.errno == errno.EACCES:
            raise UsageError(f"{where}: permission denied (ports below 1024 need root)",
                             "give a --port from 1024 up, e.g. 9464") from None
        raise UsageError(f"can't listen on {where}: {exc.strerror or exc}",
                         "give an IP address of this host with --bind, e.g. 127.0.0.1") from None
    if server.server_address[0] in EVERY_INTERFACE and bind not in EVERY_INTERFACE:
        server.server_close()
        raise UsageError(f"--bind {bind!r} would listen on every interface", _BIND_FIX)
    return server


_BIND_FIX = ("give an IP address of this host, e.g. 127.0.0.1 (the default); every interface only "
             "when said: 0.0.0.0 or ::")


def serve(root: str, bind: str, port: int, revalidation: Revalidation | None) -> int:
    """Serve until SIGTERM/SIGHUP (0) or Ctrl-C (130); see the module docstring."""
    from ..processes import Interrupted, signals_interrupt

    exporter = Exporter(root)
    server = listen(exporter, bind, port)
    host, bound = server.server_address[:2]
    shown = f"[{host}]" if ":" in host else host
    _say(f"serving http://{shown}:{bound}/metrics and /healthz ({describe(revalidation)})")
    thread = threading.Thread(target=server.serve_forever, name="envcheck serve", daemon=True)
    code = 0
    with signals_interrupt():
        try:
            thread.start()
            while True:  # a revalidation due at start begins at once, then one look a tick
                if revalidation is not None:
                    _revalidate(exporter, revalidation)
                time.sleep(TICK_S)
        except Interrupted:
            code = 0
        except KeyboardInterrupt:
            code = 130
        finally:
            server.shutdown()
            server.server_close()
    _say("stopped")
    return code


def _revalidate(exporter: Exporter, revalidation: Revalidation) -> None:
    """One tick: validate the env that is due, if any. A tick that fails says why on stderr
    and the exporter goes on serving (the next tick tries again)."""
    from ..paths import Home
    from ..usecases.revalidation import validate_child

    try:
        found, health = exporter.read()
        due = revalidation.next(found, health)
    except Exception as exc:
        _say(f"no revalidation this time: {type(exc).__name__}: {exc}")
        return
    if due is None:
        return
    _say(f"validating env {due.env} on {due.devices}: {due.why}")
    try:
        done = validate_child(Home(exporter.root), due)
    except OSError as exc:
        _say(f"could not start the validation of {due.env}: {exc}")
        return
    ended = "timed out" if done.timed_out else f"exit {done.returncode}"
    _say(f"validated env {due.env} ({ended})")


def describe(revalidation: Revalidation | None) -> str:
    if revalidation is None:
        return "no revalidation"
    parts = (["when the host changes"] if revalidation.on_change else []) \
        + ([f"every {revalidation.every:g}s"] if revalidation.every is not None else [])
    return "revalidating " + " and ".join(parts) if parts else "no revalidation"


def _say(line: str) -> None:
    print(f"envcheck serve: {line}", file=sys.stderr, flush=True)
