"""The GUI's driver: a thread per connection, where Blender's main thread belongs to the interface.

Each listener accepts on a thread of its own and serves every connection on another, running
the conversation's work on that thread (jobs reach Blender's main thread through the
dispatcher's timer pump). Admission, eviction, accept backoff and the error policy are the
ones the main loop uses (`admission.py`). A stopped listener leaves nothing behind: every
socket closed, every thread joined within one deadline.

Stop policy (both drivers, `admission.STOP_TIMEOUT`): an answer being written goes out whole within
the stop's deadline; a request that was not yet whole is closed without one (the client did nothing
wrong; the bridge stopped).
"""

from __future__ import annotations

import math
import selectors
import socket
import threading
import time
import weakref
from collections.abc import Callable
from functools import partial

from .admission import STOP_TIMEOUT, AcceptBackoff, Admission, Full, conversation_failed
from .conversation import QUIET, RECV_BYTES, SEND_TIMEOUT, Conversation, ConversationFactory
from .loopback import bind_loopback
from .sockets import has_unread, peer_of


def converse(
    sock: socket.socket,
    conversation: Conversation,
    stopping: threading.Event,
    admitted: Callable[[], bool] = lambda: True,
) -> None:
    """Drive one conversation on a blocking socket until it closes; OSError means the client went away.

    A request is run only while the connection is still `admitted`: one chosen to make room at the cap is being
    closed, and a request that reached it in the meantime (read from what the kernel still held) is never run, so
    a client may send it again on a new connection (README › Decisions)."""
    output = conversation.opened(time.monotonic())
    while True:
        if output.data:
            sock.settimeout(SEND_TIMEOUT)
            sock.sendall(output.data)
        if output.run is not None:
            if not admitted():
                return
            output = conversation.answered(output.run(), time.monotonic())
            continue
        if output.close:
            return
        now = time.monotonic()
        remaining = conversation.deadline() - now
        if remaining <= 0:
            output = conversation.expired(now)
            continue
        sock.settimeout(None if remaining == math.inf else remaining)
        try:
            data = sock.recv(RECV_BYTES)
        except TimeoutError:
            output = QUIET
            continue
        except OSError:  # reset: the same as a close to the conversation
            data = b""
        if not data and stopping.is_set():
            return  # the bridge is stopping: a request not yet whole gets no answer that blames its client
        output = conversation.received(data, time.monotonic())


class TcpListener:
    """Accepts on a loopback port and serves each connection's conversation on a thread of its own."""

    def __init__(
        self,
        host: str,
        port: int,
        conversation: ConversationFactory,
        *,
        name: str,
        admission: Admission[socket.socket] | None = None,
        on_overflow: Callable[[socket.socket], None] | None = None,
        wait: Callable[[float], object] | None = None,
    ) -> None:
        self._sock = bind_loopback(host, port)
        self._conversation = conversation
        self._name = name
        self._admission = admission if admission is not None else Admission()
        self._mine: set[socket.socket] = set()
        self._backoff = AcceptBackoff(name)
        self._on_overflow = on_overflow
        self._lock = threading.Lock()
        self._threads: weakref.WeakSet[threading.Thread] = weakref.WeakSet()
        """Every connection thread not yet collected: one that has just ended is still joined."""
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
            return len(self._mine)

    def stop(self, timeout: float = STOP_TIMEOUT) -> None:
        """Stop accepting, end every connection and join all threads within one overall deadline. Idempotent.

        Connections are shut for reading first: an idle one ends at once, while one that is writing
        its last answer (e.g. "the bridge is stopping") still delivers it, whole, until the deadline;
        then what is left is shut for writing too, and its thread ends.
        """
        deadline = time.monotonic() + timeout
        if self.begin_stop():
            self.end_stop(deadline)

    def begin_stop(self) -> bool:
        """Stop accepting and reading; whether this call did (False: the listener was stopped already)."""
        if self._stopping.is_set():
            return False
        self._stopping.set()
        self._wake_w.send(b"x")
        self._accept_thread.join(_UNBLOCKED)
        with self._lock:
            connections = list(self._mine)
        for conn in connections:
            _shutdown(conn, socket.SHUT_RD)
        return True

    def end_stop(self, deadline: float) -> None:
        """Let the answers being written go out until `deadline`, drop what is left, close the listener."""
        self._join(deadline)
        with self._lock:
            unread = list(self._mine)
        for conn in unread:  # its client has not read its answer by the deadline: dropped
            _shutdown(conn)
        self._join(time.monotonic() + _UNBLOCKED)
        for sock in (self._sock, self._wake_r, self._wake_w):
            sock.close()

    def _join(self, deadline: float) -> None:
        for thread in list(self._threads):
            if thread.is_alive():  # never started (no thread could be made): nothing to join
                thread.join(max(0.0, deadline - time.monotonic()))

    def _accept_loop(self) -> None:
        with self._selector as selector:
            while not self._stopping.is_set():
                for key, _ in selector.select():
                    if key.fileobj is self._wake_r or self._stopping.is_set():
                        return
                    try:
                        conn, _ = self._sock.accept()
                    except OSError as exc:  # e.g. out of descriptors: retrying at once would spin a core
                        self._wait(self._backoff.failed(exc))
                        continue
                    self._backoff.succeeded()
                    self._admit(conn)

    def _admit(self, conn: socket.socket) -> None:
        try:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conversation = self._conversation(peer_of(conn))
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
            self._overflow(conn)
            return
        if victim is not None:
            _shutdown(victim)  # its thread sees the close, ends and forgets itself
        thread = threading.Thread(
            target=self._converse, args=(conn, conversation), name=f"{self._name}-conn", daemon=True
        )
        with self._lock:
            self._mine.add(conn)
        self._threads.add(thread)
        try:
            thread.start()
        except RuntimeError:  # no thread could be started: release the slot instead of leaking it
            self._forget(conn)
            conn.close()

    def _overflow(self, conn: socket.socket) -> None:
        if self._on_overflow is not None:
            try:
                self._on_overflow(conn)
            except OSError:
                pass
        conn.close()

    def _converse(self, conn: socket.socket, conversation: Conversation) -> None:
        try:
            converse(conn, conversation, self._stopping, partial(self._admission.holds, conn))
        except OSError:
            pass  # the peer went away; nothing to report to anyone
        except Exception as exc:
            conversation_failed(exc)
        finally:
            self._forget(conn)
            _shutdown(conn)
            conn.close()

    def _forget(self, conn: socket.socket) -> None:
        self._admission.forget(conn)
        with self._lock:
            self._mine.discard(conn)


class ThreadedListeners:
    """Listeners that serve each connection on a thread of its own, under one cap shared by all of them."""

    def __init__(self, max_connections: int | None = None) -> None:
        self._admission: Admission[socket.socket] = Admission(max_connections)
        self._listeners: list[TcpListener] = []

    def listen(self, host: str, port: int, conversation: ConversationFactory, *, name: str) -> tuple[str, int]:
        listener = TcpListener(host, port, conversation, name=name, admission=self._admission)
        self._listeners.append(listener)
        return listener.address

    @property
    def connection_count(self) -> int:
        return len(self._admission)

    def close(self, timeout: float = STOP_TIMEOUT) -> None:
        """Stop every listener within one deadline (the stop policy: `TcpListener.stop`)."""
        deadline = time.monotonic() + timeout
        stopping = [listener for listener in self._listeners if listener.begin_stop()]
        for listener in stopping:
            listener.end_stop(deadline)


_UNBLOCKED = 1.0
"""Seconds a connection's thread gets to end once its socket is shut both ways (a write or read then fails)."""


def _shutdown(conn: socket.socket, how: int = socket.SHUT_RDWR) -> None:
    try:
        conn.shutdown(how)
    except OSError:
        pass
