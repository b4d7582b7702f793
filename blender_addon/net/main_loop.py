"""Every connection served from one thread, the caller's: background Blender's way.

In background mode and Blender-as-a-module nothing else needs Blender's main thread, so that
thread can accept, read, run the tool and answer by itself: no thread per connection and no
hand-off between threads (docs/performance.md). The conversations decide; this loop only does
non-blocking I/O, by turns, and each turn is fair:

- every socket that is ready is read before any deadline acts, and deadlines act on the time the
  turn began: a request that arrived while another client's job ran is read, never dropped;
- a connection gets at most one request run per turn (the next one of a pipeline waits for the
  next turn), and nothing more is read or run for it while its answer waits for it to read
  (its output is capped at one answer; at SEND_TIMEOUT it is dropped);
- a turn accepts what the backlog holds, after the connections already in;
- a client that authenticated goes first: before each piece of work for a stranger (an accept, a read
  of a connection that proved nothing) the loop serves whichever known client is ready, so a flood of
  strangers costs a known client at most one such piece, never a whole turn of them.

While a request runs, the others wait in the kernel's buffers; the dispatcher's watchdog stops
a script that runs past its deadline, so no request can hold the loop for longer than that.
Admission, eviction, accept backoff, the error and the stop policy are the threaded driver's
(`admission.py`, `threaded.py`).
"""

from __future__ import annotations

import math
import queue
import selectors
import socket
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from .admission import STOP_TIMEOUT, AcceptBackoff, Admission, Full, conversation_failed
from .conversation import RECV_BYTES, SEND_TIMEOUT, Conversation, ConversationFactory, Output
from .loopback import bind_loopback
from .sockets import has_unread, peer_of

LONGEST_WAIT = 0.5 if sys.platform == "win32" else math.inf
ACCEPTS_PER_TURN = 64
"""Connections taken from the listen queue per turn: the queue (BACKLOG) holds a burst, and a turn that took
thousands under a connect flood kept a new honest connection's request unread behind them."""
"""Windows does not interrupt `select` for Ctrl+C, so the signal handler (which wakes the loop) only runs
once the wait ends: there the loop never waits longer than this."""


class _Listening:
    __slots__ = ("sock", "conversation", "backoff", "paused_until")

    def __init__(self, sock: socket.socket, conversation: ConversationFactory, name: str) -> None:
        self.sock = sock
        self.conversation = conversation
        self.backoff = AcceptBackoff(name)
        self.paused_until: float | None = None
        """After an accept failure (e.g. out of descriptors): retrying at once would spin the loop."""


class _Connection:
    __slots__ = (
        "sock",
        "conversation",
        "out",
        "sent",
        "closing",
        "writing_until",
        "next_run",
        "events",
        "known",
        "detached",
    )

    def __init__(self, sock: socket.socket, conversation: Conversation) -> None:
        self.sock = sock
        self.conversation = conversation
        self.out = b""
        self.sent = 0
        self.closing = False
        self.writing_until: float | None = None
        """While an answer waits for the client to read it: when the client has had long enough."""
        self.next_run: Callable[[], Any] | None = None
        """A pipelined request already parsed, run on a later turn."""
        self.events = 0
        """What the selector watches it for (0: nothing, while its next request waits its turn)."""
        self.known = False
        """Whether the known clients' selector watches it (asking the selector costs a KeyError's message)."""
        self.detached = False
        """Its lasting request runs on a thread of its own (`Output.lasting`): nothing is read, sent or timed for it
        here until that ends."""


class MainLoop:
    """Listeners and their connections on one selector, served by whichever thread calls `run`."""

    def __init__(self, max_connections: int | None = None) -> None:
        self._admission: Admission[socket.socket] = Admission(max_connections)
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        for end in (self._wake_r, self._wake_w):
            end.setblocking(False)
        self._selector.register(self._wake_r, selectors.EVENT_READ, None)
        self._listening: list[_Listening] = []
        self._connections: dict[socket.socket, _Connection] = {}
        self._ready: list[_Connection] = []
        """Connections whose next request runs on the next turn."""
        self._known = selectors.DefaultSelector()
        """The trusted connections waiting to read: looked at before each piece of work for a stranger."""
        self._finished: queue.SimpleQueue[tuple[_Connection, Any]] = queue.SimpleQueue()
        """Lasting requests that ended on their threads, with their results, for the loop to answer."""
        self._closed = False
        self._background = False
        """Background work remains: the next turn looks at the sockets without waiting."""

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
        """Make `run` look at its stop condition now; safe from signal handlers and other threads."""
        try:
            self._wake_w.send(b"x")
        except OSError:  # already woken (buffer full) or closed
            pass

    def run(self, stop_requested: Callable[[], bool], background: Callable[[], bool] | None = None) -> None:
        """Serve by turns until `stop_requested()` is true; call `wake` after making it true. After each turn's
        requests, one step of `background` work (a task's frame) runs; it says whether more remains."""
        while not stop_requested():
            events = self._selector.select(self._timeout())
            began = time.monotonic()
            ready, self._ready = self._ready, []  # a request deferred during this turn waits for the next
            accepting = []
            strangers = []
            for key, mask in events:
                target = key.data
                if target is None:
                    self._drain_wake()
                    self._answer_finished()
                elif isinstance(target, _Listening):
                    accepting.append(target)
                elif not target.conversation.trusted and not mask & selectors.EVENT_WRITE:
                    strangers.append(target)
                elif target.sock in self._connections:  # not closed by an earlier event of this turn
                    self._step(target, self._flush if mask & selectors.EVENT_WRITE else self._read)
            for connection in strangers:
                if connection.sock in self._connections:
                    self._known_first()
                    self._step(connection, self._read)
            for connection in ready:
                if connection.sock in self._connections:
                    self._step(connection, self._run_next)
            for listening in accepting:
                self._accept(listening)
            self._expire(began)
            self._background = background() if background is not None else False

    def close(self, timeout: float = STOP_TIMEOUT) -> None:
        """Close every socket. Idempotent. The stop policy (`admission.STOP_TIMEOUT`): an answer being written
        goes out whole within `timeout` (a client that does not read it by then is dropped); a request not yet
        whole, or read and not run, is closed without one."""
        if self._closed:
            return
        self._closed = True
        for listening in self._listening:
            listening.sock.close()
        writing = [c for c in self._connections.values() if c.sent < len(c.out)]
        for connection in list(self._connections.values()):
            if connection.sent >= len(connection.out):
                self._drop(connection)
        self._finish_writing(writing, time.monotonic() + timeout)
        self._selector.close()
        self._known.close()
        self._wake_r.close()
        self._wake_w.close()

    def _finish_writing(self, writing: list[_Connection], deadline: float) -> None:
        """Send what `writing` still holds as its clients take it, until `deadline`; drop each when done."""
        with selectors.DefaultSelector() as selector:
            for connection in writing:
                selector.register(connection.sock, selectors.EVENT_WRITE, connection)
            while selector.get_map() and (left := deadline - time.monotonic()) > 0:
                for key, _ in selector.select(left):
                    connection = key.data
                    if not self._send_some(connection) or connection.sent >= len(connection.out):
                        selector.unregister(connection.sock)
                        self._drop(connection)
        for connection in writing:
            self._drop(connection)  # what its client did not read by the deadline is dropped with it

    def _timeout(self) -> float | None:
        if self._ready or self._background:
            return 0.0
        wait = min(self._nearest() - time.monotonic(), LONGEST_WAIT)
        return None if wait == math.inf else max(0.0, wait)

    def _drain_wake(self) -> None:
        try:
            while self._wake_r.recv(4096):
                pass
        except BlockingIOError:
            pass

    def _known_first(self) -> None:
        """Serve every known client that is ready now (it never waits behind a stranger's work)."""
        for key, _ in self._known.select(0):
            connection = key.data
            if connection.sock in self._connections and connection.events == selectors.EVENT_READ:
                self._step(connection, self._read)

    def _accept(self, listening: _Listening) -> None:
        for _ in range(ACCEPTS_PER_TURN):
            self._known_first()
            try:
                conn, _ = listening.sock.accept()
            except BlockingIOError:
                return
            except OSError as exc:
                pause = listening.backoff.failed(exc)
                self._selector.unregister(listening.sock)
                listening.paused_until = time.monotonic() + pause
                return
            listening.backoff.succeeded()
            self._admit(conn, listening)

    def _admit(self, conn: socket.socket, listening: _Listening) -> None:
        try:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn.setblocking(False)
            conversation = listening.conversation(peer_of(conn))
        except OSError:  # the client already left
            conn.close()
            return
        except Exception as exc:  # the listener's side could not be made (the MCP side's first load): this one only
            conversation_failed(exc)
            conn.close()
            return
        try:
            victim = self._admission.admit(conn, conversation, has_unread)
        except Full:
            conn.close()
            return
        if victim is not None:
            self._drop(self._connections[victim])
        connection = _Connection(conn, conversation)
        self._connections[conn] = connection
        self._step(connection, self._open)

    def _step(self, connection: _Connection, step: Callable[[_Connection], None]) -> None:
        try:
            step(connection)
        except Exception as exc:  # a bug in one conversation must not end the service for everyone
            conversation_failed(exc)
            self._drop(connection)

    def _open(self, connection: _Connection) -> None:
        output = connection.conversation.opened(time.monotonic())
        # A client usually sends as soon as it connects: read at once, sparing it a turn of the loop; a whole Lab
        # request answered now never costs the selectors a registration (two, for a trusted client).
        if not output.data and not output.close and output.run is None and self._read(connection):
            return
        self._deliver(connection, output)

    def _read(self, connection: _Connection) -> bool:
        """Read what the client sent and act on it; False when there was nothing to read (nothing changed)."""
        try:
            data = connection.sock.recv(RECV_BYTES)
        except BlockingIOError:
            return False
        except OSError:  # reset: the same as a close to the conversation
            data = b""
        output = connection.conversation.received(data, time.monotonic())
        if output.run is not None:
            output = self._run(connection, output)
        elif not data and not output.close:
            output = Output(output.data, close=True)
        self._deliver(connection, output)
        return True

    def _run(self, connection: _Connection, output: Output) -> Output:
        """The one request this connection gets this turn, run in place; its answer, and any next one. A lasting
        one runs on a thread of its own (an event stream would hold the loop for as long as its client listens)."""
        assert output.run is not None
        if output.lasting:
            self._detach(connection, output.run)
            return Output(output.data)
        answer = connection.conversation.answered(output.run(), time.monotonic())
        return Output(output.data + answer.data, answer.run, answer.close)

    def _detach(self, connection: _Connection, run: Callable[[], Any]) -> None:
        connection.detached = True

        def lasting() -> None:
            try:
                result = run()
            except BaseException as exc:  # the loop answers nothing for it: the connection is dropped there
                conversation_failed(exc)
                result = exc
            self._finished.put((connection, result))
            self.wake()

        threading.Thread(target=lasting, name="hermes-stream", daemon=True).start()

    def _answer_finished(self) -> None:
        """Lasting requests that ended: answered here, on the loop's thread, as any other."""
        while True:
            try:
                connection, result = self._finished.get_nowait()
            except queue.Empty:
                return
            connection.detached = False
            if connection.sock not in self._connections:
                continue
            if isinstance(result, BaseException):
                self._drop(connection)
                continue
            self._step(
                connection, lambda c, done=result: self._deliver(c, c.conversation.answered(done, time.monotonic()))
            )

    def _run_next(self, connection: _Connection) -> None:
        run, connection.next_run = connection.next_run, None
        self._deliver(connection, self._run(connection, Output(run=run)))

    def _deliver(self, connection: _Connection, output: Output) -> None:
        if output.data:
            pending = connection.out[connection.sent :]
            connection.out, connection.sent = (pending + output.data if pending else output.data), 0
        connection.closing = connection.closing or output.close
        connection.next_run = output.run
        self._flush(connection)

    def _flush(self, connection: _Connection) -> None:
        if not self._send_some(connection):
            self._drop(connection)
        elif connection.sent < len(connection.out):
            if connection.writing_until is None:  # nothing more is read or run until the client takes this
                connection.writing_until = time.monotonic() + SEND_TIMEOUT
            self._watch(connection, selectors.EVENT_WRITE)
        elif connection.closing:
            self._drop(connection)
        elif connection.detached:
            connection.writing_until = None
            self._watch(connection, 0)
        else:
            connection.writing_until = None
            if connection.next_run is not None:
                self._watch(connection, 0)
                self._ready.append(connection)
            else:
                self._watch(connection, selectors.EVENT_READ)

    def _watch(self, connection: _Connection, events: int) -> None:
        known = connection.conversation.trusted and events == selectors.EVENT_READ
        if known != connection.known:
            if known:
                self._known.register(connection.sock, selectors.EVENT_READ, connection)
            else:
                self._known.unregister(connection.sock)
            connection.known = known
        if events == connection.events:
            return
        if not connection.events:
            self._selector.register(connection.sock, events, connection)
        elif not events:
            self._selector.unregister(connection.sock)
        else:
            self._selector.modify(connection.sock, events, connection)
        connection.events = events

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
        self._admission.forget(sock)
        if connection.known:
            self._known.unregister(sock)
            connection.known = False
        if connection.events:
            self._selector.unregister(sock)
            connection.events = 0
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        sock.close()

    def _nearest(self) -> float:
        nearest = math.inf
        for listening in self._listening:
            if listening.paused_until is not None:
                nearest = min(nearest, listening.paused_until)
        for connection in self._connections.values():
            nearest = min(nearest, _due(connection))
        return nearest

    def _expire(self, now: float) -> None:
        """Act on every deadline that had passed when the turn began (the turn has read every ready socket)."""
        for listening in self._listening:
            if listening.paused_until is not None and now >= listening.paused_until:
                listening.paused_until = None
                self._selector.register(listening.sock, selectors.EVENT_READ, listening)
        for connection in list(self._connections.values()):
            if now >= _due(connection):
                self._step(connection, lambda c: self._at_deadline(c, now))

    def _at_deadline(self, connection: _Connection, now: float) -> None:
        if connection.writing_until is not None:
            self._drop(connection)  # it would not read its answer
        else:
            self._deliver(connection, connection.conversation.expired(now))


def _due(connection: _Connection) -> float:
    """While an answer is pending, the client's time to read it; while a request waits its turn, none;
    otherwise the conversation's own deadline."""
    if connection.writing_until is not None:
        return connection.writing_until
    if connection.next_run is not None:
        return math.inf
    return connection.conversation.deadline()
