"""One connection's protocol as a state machine that only parses and decides (as h11 does).

A conversation is told what happened (bytes arrived, the client closed, the answer to the
request it handed out is ready, its deadline passed) together with the time, and says what to
do: bytes to send, one request's work to run, whether to close. It holds no socket, reads no
clock and calls no app: the driver (`threaded.py`: a thread per connection in the GUI;
`main_loop.py`: one loop on Blender's main thread in background mode) does all of that, so the
same rules hold under both.

A cycle is one request: WAITING for its first byte, RECEIVING it, RUNNING (handed out as
`Output.run`, in flight until `answered`), then WAITING again, or CLOSED.
"""

from __future__ import annotations

import enum
import select
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Protocol

Address = tuple[str, int]

RECV_BYTES = 65536
SEND_TIMEOUT = 30.0
"""Seconds a client may take to read one answer before the connection is dropped."""


class Phase(enum.Enum):
    WAITING = "waiting"
    """For the first byte of the next request (a new connection, or one that was answered)."""
    RECEIVING = "receiving"
    RUNNING = "running"
    """A whole request was handed out; it is in flight until its answer is given back."""
    CLOSED = "closed"


@dataclass(frozen=True)
class Peer:
    """The client, as a value: its addresses, and a way to ask whether it is still there."""

    local: Address
    remote: Address
    connected: Callable[[], bool] = field(default=lambda: True, compare=False, repr=False)
    send: Callable[[bytes], int] = field(default=lambda data: len(data), compare=False, repr=False)
    """Sends what the socket takes now, never waiting (an answer streamed while its request runs)."""

    @property
    def port(self) -> int:
        return self.remote[1]

    @classmethod
    def of(cls, sock: socket.socket) -> Peer:
        """The peer of an accepted socket; OSError when it has already left."""
        return cls(
            sock.getsockname()[:2], sock.getpeername()[:2], partial(peer_connected, sock), partial(send_now, sock)
        )


def peer_connected(sock: socket.socket) -> bool:
    """Whether the client is still there (it sends nothing while it waits, so EOF means it left)."""
    if not has_unread(sock):
        return True
    try:
        return sock.recv(1, socket.MSG_PEEK) != b""  # readable: data or EOF is there, so this never waits
    except BlockingIOError:
        return True
    except OSError:
        return False


def send_now(sock: socket.socket, data: bytes) -> int:
    """Send what the socket takes without waiting; how many bytes that was. OSError when the client is gone.

    Called off the connection's own thread while its request runs (nothing else writes then), on a
    blocking socket (threaded driver) or a non-blocking one (main loop).
    """
    if not data:
        return 0
    try:
        # Asked first: Python waits for a socket with a timeout to be writable before it even tries.
        if not _ready(sock, writing=True):
            return 0
        return sock.send(data, _DONTWAIT)  # Windows has no MSG_DONTWAIT: writable there means it takes some
    except (BlockingIOError, InterruptedError):
        return 0
    except ValueError:  # closed under us
        raise OSError("the connection is closed") from None


_DONTWAIT = getattr(socket, "MSG_DONTWAIT", 0)


def has_unread(sock: socket.socket) -> bool:
    """Whether bytes (or a close) from the client wait unread in the kernel: such a client is not idle.

    Asked of the socket's readiness, never of `recv`: on a socket with a timeout (the threaded driver's,
    read by another thread) Python's `recv` waits up to that timeout even with MSG_DONTWAIT.
    """
    try:
        return _ready(sock, writing=False)
    except (OSError, ValueError):  # closed under us
        return True


def _ready(sock: socket.socket, *, writing: bool) -> bool:
    """Whether `sock` is writable (or readable) now, asked of poll: select() cannot take descriptors past 1023."""
    if _poll is None:  # Windows: select() takes sockets of any number there
        readable, writable, _ = select.select([] if writing else [sock], [sock] if writing else [], [], 0)
        return bool(writable or readable)
    poller = _poll()
    poller.register(sock, select.POLLOUT if writing else select.POLLIN)
    return bool(poller.poll(0))


_poll = getattr(select, "poll", None)


@dataclass(frozen=True)
class Output:
    """What the driver does next: send `data`, then run `run` (and give its result to `answered`), or close."""

    data: bytes = b""
    run: Callable[[], Any] | None = None
    """One request's work; never set together with `close` (the answer decides that)."""
    close: bool = False


QUIET = Output()


class Conversation(Protocol):
    phase: Phase
    trusted: bool
    """A request on it passed authentication (MCP) or admission (Blender Lab): eviction spares it while busy."""

    def opened(self, now: float) -> Output:
        """Once, when the connection is accepted (e.g. to refuse a peer at once)."""
        ...

    def received(self, data: bytes, now: float) -> Output:
        """New bytes from the client; b"" when it closed its side. Never called while a request runs."""
        ...

    def answered(self, result: Any, now: float) -> Output:
        """The handed-out request's result: its answer, and the next request if one is already here."""
        ...

    def deadline(self) -> float:
        """The time (as given in `now`) at which waiting for the client ends; math.inf: no limit."""
        ...

    def expired(self, now: float) -> Output:
        """The deadline passed with nothing received: the answer to a silent client."""
        ...


ConversationFactory = Callable[[Peer], Conversation]
