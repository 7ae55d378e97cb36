"""Loopback servers that take connections and never answer as the client hopes (a stuck index
mirror, a gRPC server that isn't Ray's), shared by the tests that need one."""
from __future__ import annotations

import contextlib
import socket
import threading
from typing import Callable, Iterator


@contextlib.contextmanager
def holding_server(host: str, on_accept: Callable[[socket.socket], None]) -> Iterator[int]:
    """A server on ``host`` (its port yielded) that calls ``on_accept`` with each connection and
    then holds it open, unanswered, until the block ends; everything is closed after."""
    server = socket.socket()
    server.bind((host, 0))
    server.listen(16)
    held: list[socket.socket] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:  # closed: the test is over
                return
            held.append(conn)
            on_accept(conn)

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield server.getsockname()[1]
    finally:
        server.shutdown(socket.SHUT_RDWR)
        server.close()
        for conn in held:
            conn.close()
