"""A find-links server on loopback that answers after a long pause, to catch installs mid-flight."""
from __future__ import annotations

import functools
import http.server
import threading
from pathlib import Path

import pytest


class _Handler(http.server.SimpleHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 (http.server's name)
        self.server.requested.set()
        self.server.release.wait(60)
        super().do_GET()

    def log_message(self, *args):
        pass


@pytest.fixture
def slow_links(wheelhouse: Path):
    """(url, requested, release): the wheelhouse over HTTP; a request marks ``requested`` and
    is answered once ``release`` is set (at the latest when the test ends)."""
    handler = functools.partial(_Handler, directory=str(wheelhouse))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    server.requested = threading.Event()
    server.release = threading.Event()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/", server.requested, server.release
    server.release.set()
    server.shutdown()
