"""A threaded loopback TCP listener that can be stopped cleanly at any moment.

Both protocols (MCP over HTTP and the Blender Lab wire) share it: it owns the accept loop,
the connection cap and the bookkeeping that lets stop() close every socket and join every
thread, so a stopped bridge leaves nothing behind.
"""

from __future__ import annotations

import selectors
import socket
import threading
import time
from collections.abc import Callable

from .loopback import bind_loopback

ConnectionHandler = Callable[[socket.socket], None]


class TcpListener:
    """Accepts on a loopback port and runs `handler(conn)` on a thread per connection."""

    def __init__(
        self,
        host: str,
        port: int,
        handler: ConnectionHandler,
        *,
        name: str,
        max_connections: int = 256,
        on_overflow: Callable[[socket.socket], None] | None = None,
    ) -> None:
        self._sock = bind_loopback(host, port)
        self._handler = handler
        self._name = name
        self._max_connections = max_connections
        self._on_overflow = on_overflow
        self._lock = threading.Lock()
        self._connections: dict[socket.socket, threading.Thread] = {}
        self._stopping = threading.Event()
        self._wake_r, self._wake_w = socket.socketpair()
        self._accept_thread = threading.Thread(target=self._accept_loop, name=f"{name}-accept", daemon=True)
        self._accept_thread.start()

    @property
    def address(self) -> tuple[str, int]:
        host, port = self._sock.getsockname()[:2]
        return host, port

    @property
    def connection_count(self) -> int:
        with self._lock:
            return len(self._connections)

    def stop(self, timeout: float = 5.0) -> None:
        """Stop accepting, end every connection and join all threads within one overall deadline. Idempotent.

        Connections are shut for reading only: an idle one ends at once, while one that is
        writing its last answer (e.g. "the bridge is stopping") still delivers it.
        """
        if self._stopping.is_set():
            return
        deadline = time.monotonic() + timeout
        self._stopping.set()
        self._wake_w.send(b"x")
        self._accept_thread.join(timeout)
        with self._lock:
            connections = list(self._connections.items())
        for conn, _ in connections:
            _shutdown(conn, socket.SHUT_RD)
        for _, thread in connections:
            thread.join(max(0.0, deadline - time.monotonic()))
        for sock in (self._sock, self._wake_r, self._wake_w):
            sock.close()

    def _accept_loop(self) -> None:
        with selectors.DefaultSelector() as selector:
            selector.register(self._sock, selectors.EVENT_READ)
            selector.register(self._wake_r, selectors.EVENT_READ)
            while not self._stopping.is_set():
                for key, _ in selector.select():
                    if key.fileobj is self._wake_r or self._stopping.is_set():
                        return
                    try:
                        conn, _ = self._sock.accept()
                    except OSError:
                        continue
                    self._admit(conn)

    def _admit(self, conn: socket.socket) -> None:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self._lock:
            if len(self._connections) >= self._max_connections:
                overflow = True
            else:
                overflow = False
                thread = threading.Thread(target=self._serve, args=(conn,), name=f"{self._name}-conn", daemon=True)
                self._connections[conn] = thread
        if overflow:
            if self._on_overflow is not None:
                try:
                    self._on_overflow(conn)
                except OSError:
                    pass
            conn.close()
            return
        thread.start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            self._handler(conn)
        except OSError:
            pass  # the peer went away; nothing to report to anyone
        finally:
            with self._lock:
                self._connections.pop(conn, None)
            _shutdown(conn)
            conn.close()


def _shutdown(conn: socket.socket, how: int = socket.SHUT_RDWR) -> None:
    try:
        conn.shutdown(how)
    except OSError:
        pass
