"""A threaded loopback TCP listener that can be stopped cleanly at any moment.

Both protocols (MCP over HTTP and the Blender Lab wire) share it: it owns the accept loop,
the connection cap and the bookkeeping that lets stop() close every socket and join every
thread, so a stopped bridge leaves nothing behind.

At the cap, a new connection is not refused while a connection that proved nothing (no
request past authentication yet) or one that sits idle can make room: the oldest such one is
closed. So idle sockets opened by anyone on the machine cannot lock its own user out.
"""

from __future__ import annotations

import logging
import selectors
import socket
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field

from .conversation import Conversation, converse
from .loopback import bind_loopback

log = logging.getLogger("hermes_bridge.net")

RESERVED_FILES = 128
"""Descriptors left to Blender itself (files, images, libraries) when the cap is derived."""
MAX_BACKOFF = 1.0


@dataclass
class ConnectionState:
    """What the protocol tells the listener about one connection, for eviction at the cap."""

    opened: float = field(default_factory=time.monotonic)
    trusted: bool = False
    """A request on it passed authentication (MCP) or admission (Blender Lab)."""
    idle: bool = True
    """Waiting for the first byte of its next request."""

    @property
    def evictable(self) -> bool:
        return self.idle or not self.trusted


ConnectionHandler = Callable[[socket.socket, ConnectionState], None]
ConversationFactory = Callable[[socket.socket, ConnectionState], Conversation]


def default_max_connections() -> int:
    """Half of what the process's descriptor limit leaves after Blender's own share, within 16..256."""
    try:
        import resource  # POSIX only; Windows has no such per-process descriptor limit for sockets
    except ImportError:
        return 256
    try:
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (OSError, ValueError):
        return 256
    return 256 if soft == resource.RLIM_INFINITY else cap_for(soft)


def cap_for(descriptor_limit: int) -> int:
    """E.g. 64 connections under macOS's usual 256 for GUI apps, 256 under Linux's 1024."""
    return max(16, min(256, (descriptor_limit - RESERVED_FILES) // 2))


class TcpListener:
    """Accepts on a loopback port and runs `handler(conn)` on a thread per connection."""

    def __init__(
        self,
        host: str,
        port: int,
        handler: ConnectionHandler,
        *,
        name: str,
        max_connections: int | None = None,
        on_overflow: Callable[[socket.socket], None] | None = None,
        wait: Callable[[float], object] | None = None,
    ) -> None:
        self._sock = bind_loopback(host, port)
        self._handler = handler
        self._name = name
        self._max_connections = max_connections or default_max_connections()
        self._on_overflow = on_overflow
        self._lock = threading.Lock()
        self._connections: dict[socket.socket, tuple[threading.Thread, ConnectionState]] = {}
        self._threads: weakref.WeakSet[threading.Thread] = weakref.WeakSet()
        """Every connection thread not yet collected: one that has just left `_connections` is still joined."""
        self._stopping = threading.Event()
        self._wait = wait or self._stopping.wait
        # Made here, not in the thread: a failure (out of descriptors, no thread) is the caller's error, not a
        # silent dead loop, and it leaves nothing listening.
        try:
            self._wake_r, self._wake_w = socket.socketpair()
            self._selector = selectors.DefaultSelector()
            self._selector.register(self._sock, selectors.EVENT_READ)
            self._selector.register(self._wake_r, selectors.EVENT_READ)
            self._accept_thread = threading.Thread(target=self._accept_loop, name=f"{name}-accept", daemon=True)
            self._accept_thread.start()
        except BaseException:
            self._sock.close()
            for end in ("_wake_r", "_wake_w"):
                if hasattr(self, end):
                    getattr(self, end).close()
            raise

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
        for thread in list(self._threads):
            if thread.is_alive():  # never started (no thread could be made): nothing to join
                thread.join(max(0.0, deadline - time.monotonic()))
        for sock in (self._sock, self._wake_r, self._wake_w):
            sock.close()

    def _accept_loop(self) -> None:
        failures = 0
        with self._selector as selector:
            while not self._stopping.is_set():
                for key, _ in selector.select():
                    if key.fileobj is self._wake_r or self._stopping.is_set():
                        return
                    try:
                        conn, _ = self._sock.accept()
                    except OSError as exc:  # e.g. out of descriptors: retrying at once would spin a core
                        failures += 1
                        log.warning("accept failed (%s); retrying in %.2f s", exc, backoff(failures))
                        self._wait(backoff(failures))
                        continue
                    failures = 0
                    self._admit(conn)

    def _admit(self, conn: socket.socket) -> None:
        try:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:  # the client already left
            conn.close()
            return
        state = ConnectionState()
        thread = threading.Thread(target=self._serve, args=(conn, state), name=f"{self._name}-conn", daemon=True)
        with self._lock:
            victim = self._make_room()
            admitted = len(self._connections) < self._max_connections
            if admitted:
                self._connections[conn] = (thread, state)
        if victim is not None:
            _shutdown(victim)  # its thread sees the close, ends and deregisters itself
        if not admitted:
            if self._on_overflow is not None:
                try:
                    self._on_overflow(conn)
                except OSError:
                    pass
            conn.close()
            return
        self._threads.add(thread)
        try:
            thread.start()
        except RuntimeError:  # no thread could be started: release the slot instead of leaking it
            with self._lock:
                self._connections.pop(conn, None)
            conn.close()

    def _make_room(self) -> socket.socket | None:
        """At the cap: forget the oldest connection that proved nothing or sits idle (lock held)."""
        victim = room_for_one({conn: state for conn, (_, state) in self._connections.items()}, self._max_connections)
        if victim is not None:
            del self._connections[victim]
        return victim

    def _serve(self, conn: socket.socket, state: ConnectionState) -> None:
        try:
            self._handler(conn, state)
        except OSError:
            pass  # the peer went away; nothing to report to anyone
        finally:
            with self._lock:
                self._connections.pop(conn, None)
            _shutdown(conn)
            conn.close()


def room_for_one(connections: dict[socket.socket, ConnectionState], cap: int) -> socket.socket | None:
    """The connection to close so a new one fits under `cap`: the oldest that proved nothing or sits idle."""
    if len(connections) < cap:
        return None
    candidates = [(state.opened, conn) for conn, state in connections.items() if state.evictable]
    if not candidates:
        return None
    log.warning("connection cap (%d) reached: closed the oldest idle or unauthenticated connection", cap)
    return min(candidates, key=lambda item: item[0])[1]


class ThreadedListeners:
    """Listeners that serve each connection on a thread of its own: the GUI's way, where Blender's main
    thread belongs to the interface and jobs reach it through the dispatcher's timer."""

    def __init__(self, max_connections: int | None = None) -> None:
        self._max_connections = max_connections
        self._listeners: list[TcpListener] = []

    def listen(self, host: str, port: int, conversation: ConversationFactory, *, name: str) -> tuple[str, int]:
        listener = TcpListener(
            host,
            port,
            lambda conn, state: converse(conn, conversation(conn, state)),
            name=name,
            max_connections=self._max_connections,
        )
        self._listeners.append(listener)
        return listener.address

    @property
    def connection_count(self) -> int:
        return sum(listener.connection_count for listener in self._listeners)

    def close(self) -> None:
        for listener in self._listeners:
            listener.stop()


def backoff(failures: int) -> float:
    """Seconds to wait after the n-th accept failure in a row: 10 ms, doubling, at most MAX_BACKOFF."""
    return min(MAX_BACKOFF, 0.01 * 2 ** (failures - 1))


def _shutdown(conn: socket.socket, how: int = socket.SHUT_RDWR) -> None:
    try:
        conn.shutdown(how)
    except OSError:
        pass
