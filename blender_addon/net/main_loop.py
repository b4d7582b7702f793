"""Every connection served from one thread, the caller's: background Blender's way.

In background mode and Blender-as-a-module nothing else needs Blender's main thread, so that
thread can accept, read, run the tool and answer by itself: no thread per connection and no
hand-off between threads, which were about two thirds of a Blender Lab request's time on the
bridge's side (docs/performance.md).
The conversations keep every rule of the threaded path (limits, deadlines, refusals); this loop
adds only non-blocking I/O: a client slow to read a large answer waits in a buffer, never in a
send, and every deadline is a timeout of the one `select`.

While a request runs, the others wait in the kernel's buffers; the dispatcher's watchdog stops
a script that runs past its deadline, so no request can hold the loop for longer than that.
"""

from __future__ import annotations

import logging
import math
import selectors
import socket
import sys
import time
from collections.abc import Callable

from .conversation import RECV_BYTES, SEND_TIMEOUT, Conversation, Reply
from .listener import ConnectionState, ConversationFactory, backoff, default_max_connections, room_for_one
from .loopback import bind_loopback

log = logging.getLogger("hermes_bridge.net")

ACCEPT_BATCH = 16
"""Connections taken from one listener per turn, so a flood of them never starves those already in."""
LONGEST_WAIT = 0.5 if sys.platform == "win32" else math.inf
"""Windows does not interrupt `select` for Ctrl+C, so the signal handler (which wakes the loop) only runs
once the wait ends: there the loop never waits longer than this."""


class _Listening:
    __slots__ = ("sock", "conversation", "name", "failures", "paused_until")

    def __init__(self, sock: socket.socket, conversation: ConversationFactory, name: str) -> None:
        self.sock = sock
        self.conversation = conversation
        self.name = name
        self.failures = 0
        self.paused_until: float | None = None
        """After an accept failure (e.g. out of descriptors): retrying at once would spin the loop."""


class _Connection:
    __slots__ = ("sock", "conversation", "state", "out", "sent", "closing", "writing_until")

    def __init__(self, sock: socket.socket, conversation: Conversation, state: ConnectionState) -> None:
        self.sock = sock
        self.conversation = conversation
        self.state = state
        self.out = b""
        self.sent = 0
        self.closing = False
        self.writing_until: float | None = None
        """While an answer waits for the client to read it: when the client has had long enough."""


class MainLoop:
    """Listeners and their connections on one selector, served by whichever thread calls `serve`."""

    def __init__(self, max_connections: int | None = None) -> None:
        self._max_connections = max_connections or default_max_connections()
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        for end in (self._wake_r, self._wake_w):
            end.setblocking(False)
        self._selector.register(self._wake_r, selectors.EVENT_READ, None)
        self._listening: list[_Listening] = []
        self._connections: dict[socket.socket, _Connection] = {}
        self._closed = False

    def listen(self, host: str, port: int, conversation: ConversationFactory, *, name: str) -> tuple[str, int]:
        sock = bind_loopback(host, port)
        sock.setblocking(False)
        listening = _Listening(sock, conversation, name)
        self._listening.append(listening)
        self._selector.register(sock, selectors.EVENT_READ, listening)
        host, port = sock.getsockname()[:2]
        return host, port

    @property
    def connection_count(self) -> int:
        return len(self._connections)

    def wake(self) -> None:
        """Make `serve` look at its stop condition now; safe from signal handlers and other threads."""
        try:
            self._wake_w.send(b"x")
        except OSError:  # already woken (buffer full) or closed
            pass

    def serve(self, stop_requested: Callable[[], bool]) -> None:
        """Serve until `stop_requested()` is true; call `wake` after making it true."""
        while not stop_requested():
            wait = min(self._expire() - time.monotonic(), LONGEST_WAIT)
            timeout = None if wait == math.inf else max(0.0, wait)
            for key, events in self._selector.select(timeout):
                target = key.data
                if target is None:
                    self._drain_wake()
                elif isinstance(target, _Listening):
                    self._accept(target)
                elif target.sock in self._connections:  # not closed by an earlier event of this turn
                    self._step(target, self._flush if events & selectors.EVENT_WRITE else self._read)

    def close(self) -> None:
        """Close every socket. Idempotent; an answer still in a buffer gets one last chance to go."""
        if self._closed:
            return
        self._closed = True
        for connection in list(self._connections.values()):
            self._send_some(connection)
            self._drop(connection)
        for listening in self._listening:
            listening.sock.close()
        self._selector.close()
        self._wake_r.close()
        self._wake_w.close()

    def _drain_wake(self) -> None:
        try:
            while self._wake_r.recv(4096):
                pass
        except BlockingIOError:
            pass

    def _accept(self, listening: _Listening) -> None:
        for _ in range(ACCEPT_BATCH):
            try:
                conn, _ = listening.sock.accept()
            except BlockingIOError:
                return
            except OSError as exc:
                listening.failures += 1
                pause = backoff(listening.failures)
                log.warning("accept failed on %s (%s); retrying in %.2f s", listening.name, exc, pause)
                self._selector.unregister(listening.sock)
                listening.paused_until = time.monotonic() + pause
                return
            listening.failures = 0
            self._admit(conn, listening)

    def _admit(self, conn: socket.socket, listening: _Listening) -> None:
        try:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn.setblocking(False)
        except OSError:  # the client already left
            conn.close()
            return
        if len(self._connections) >= self._max_connections:
            states = {sock: connection.state for sock, connection in self._connections.items()}
            victim = room_for_one(states, self._max_connections)
            if victim is None:
                conn.close()
                return
            self._drop(self._connections[victim])
        state = ConnectionState()
        connection = _Connection(conn, listening.conversation(conn, state), state)
        self._connections[conn] = connection
        self._selector.register(conn, selectors.EVENT_READ, connection)
        self._step(connection, self._open)

    def _step(self, connection: _Connection, step: Callable[[_Connection], None]) -> None:
        try:
            step(connection)
        except Exception:  # a bug in one conversation must not end the service for everyone
            log.exception("a connection failed unexpectedly; it was closed and the bridge goes on serving")
            self._drop(connection)

    def _open(self, connection: _Connection) -> None:
        self._deliver(connection, connection.conversation.opened())
        if connection.sock in self._connections and connection.writing_until is None:
            self._read(connection)  # a client usually sends as soon as it connects: spare it a turn of the loop

    def _at_deadline(self, connection: _Connection) -> None:
        if connection.writing_until is not None:
            self._drop(connection)  # it would not read its answer
        else:
            self._deliver(connection, connection.conversation.expired())

    def _read(self, connection: _Connection) -> None:
        try:
            data = connection.sock.recv(RECV_BYTES)
        except BlockingIOError:
            return
        except OSError:  # reset: the same as a close to the conversation
            data = b""
        reply = connection.conversation.received(data)
        self._deliver(connection, reply if data else Reply(reply.data, close=True))

    def _deliver(self, connection: _Connection, reply: Reply) -> None:
        if reply.data:
            pending = connection.out[connection.sent :]
            connection.out, connection.sent = (pending + reply.data if pending else reply.data), 0
        connection.closing = connection.closing or reply.close
        self._flush(connection)

    def _flush(self, connection: _Connection) -> None:
        if not self._send_some(connection):
            self._drop(connection)
        elif connection.sent < len(connection.out):
            if connection.writing_until is None:  # stop reading until the client has taken this answer
                connection.writing_until = time.monotonic() + SEND_TIMEOUT
                self._selector.modify(connection.sock, selectors.EVENT_WRITE, connection)
        elif connection.closing:
            self._drop(connection)
        elif connection.writing_until is not None:
            connection.writing_until = None
            self._selector.modify(connection.sock, selectors.EVENT_READ, connection)

    @staticmethod
    def _send_some(connection: _Connection) -> bool:
        """Send what the socket takes now; False when the client has gone."""
        view = memoryview(connection.out)
        try:
            while connection.sent < len(view):
                connection.sent += connection.sock.send(view[connection.sent :])
        except BlockingIOError:
            pass
        except OSError:
            return False
        return True

    def _drop(self, connection: _Connection) -> None:
        sock = connection.sock
        if self._connections.pop(sock, None) is None:
            return
        try:
            self._selector.unregister(sock)
        except (KeyError, ValueError):
            pass
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        sock.close()

    def _expire(self) -> float:
        """Act on every deadline that has passed; return the nearest one still ahead."""
        now = time.monotonic()
        nearest = math.inf
        for listening in self._listening:
            if listening.paused_until is not None:
                if now >= listening.paused_until:
                    listening.paused_until = None
                    self._selector.register(listening.sock, selectors.EVENT_READ, listening)
                else:
                    nearest = min(nearest, listening.paused_until)
        for connection in list(self._connections.values()):
            due = _due(connection)
            if now >= due:
                self._step(connection, self._at_deadline)
                if connection.sock not in self._connections:
                    continue
                due = _due(connection)
            nearest = min(nearest, due)
        return nearest


def _due(connection: _Connection) -> float:
    """While an answer is pending, the client's time to read it; otherwise the conversation's own deadline."""
    return connection.writing_until if connection.writing_until is not None else connection.conversation.deadline()
