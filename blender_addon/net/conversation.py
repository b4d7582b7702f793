"""One connection's protocol as a state machine that only parses and decides (as h11 does).

A conversation is told what happened (bytes arrived, the client closed its side, the answer to
the request it handed out is ready, its deadline passed) together with the time, and says what
to do: bytes to send, one request's work to run, whether to close. It holds no socket, reads no
clock and calls no app: the driver (`threaded.py`: a thread per connection in the GUI;
`main_loop.py`: one loop on Blender's main thread in background mode) does all of that, so the
same rules hold under both.

Each direction has a state of its own, as in h11: the client's (IDLE before a request's first
byte, SENDING it, DONE once it is whole, CLOSED once its sending side ended and nothing whole is
left) and ours (IDLE, RUNNING the request handed out as `Output.run`, MUST_CLOSE once what is left to
send is the last). A client that shuts its sending
side after a whole request (`shutdown(SHUT_WR)`, `nc -N`) is DONE, not gone: it gets its answer,
then the close.
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Callable
from typing import Any, Protocol

Address = tuple[str, int]

RECV_BYTES = 65536
SEND_TIMEOUT = 30.0
"""Seconds a client may take to read one answer before the connection is dropped."""


class ClientState(enum.Enum):
    IDLE = "idle"
    """Nothing of its next request yet (a new connection, or one whose last request was answered)."""
    SENDING = "sending"
    DONE = "done"
    """Its request is whole and ours to answer."""
    CLOSED = "closed"
    """Its sending side ended with no request left to answer: nothing more will come."""


class OurState(enum.Enum):
    IDLE = "idle"
    """Nothing to answer. A kept connection's answered cycle starts the next at once (h11's DONE, then
    start_next_cycle, in one step)."""
    RUNNING = "running"
    """A whole request was handed out; it is in flight until its answer is given back. An answer may begin
    meanwhile (an event stream's head and progress, through `Watch.send`)."""
    MUST_CLOSE = "must close"
    """What is left to send is the last: the connection closes after it."""


class Peer:
    """The client: its addresses, and what a running request's watcher may ask of its connection."""

    __slots__ = ("local", "remote", "ended", "connected", "send")

    def __init__(
        self,
        local: Address,
        remote: Address,
        ended: Callable[[], bool] = lambda: False,
        connected: Callable[[], bool] = lambda: True,
        send: Callable[[bytes], int] = len,
    ) -> None:
        self.local = local
        self.remote = remote
        self.ended = ended
        """Its sending side ended: its close (or a reset) waits unread. A read cannot tell a client that shut its
        sending side (it still wants the answer) from one that closed."""
        self.connected = connected
        """No write to it failed: False once a reset came back (a client that closed, met by a write)."""
        self.send = send
        """Sends what the socket takes now, never waiting (an answer streamed while its request runs)."""

    @property
    def port(self) -> int:
        return self.remote[1]


class Watch:
    """Whether the client of one running request still wants its answer, asked by the job's watcher (and
    before the job starts) off the connection's own thread; and the way the answer goes out meanwhile.

    "The client left" is a failed write, never a read's end: the end of its sending side is also what a
    client that only shut that side shows. So when the end is seen and nothing of the answer has gone
    yet, `probe` (bytes the protocol allows before an answer, e.g. HTTP/1.1's `100 Continue`) is written
    once, and a client that closed answers it with a reset. Where the protocol's framing makes the end a
    hang-up (`end_is_hang_up`: the Blender Lab wire after its NUL), it is one.
    """

    def __init__(self, peer: Peer, *, probe: bytes = b"", end_is_hang_up: bool = False) -> None:
        self._peer = peer
        self._probe = probe
        """What of the probe is still to be written once the end is seen (all of it, or the rest the socket left)."""
        self._end_is_hang_up = end_is_hang_up
        self._lock = threading.Lock()
        self._ended = False
        self._began = False
        """Part of the answer went out (through `send`): from then on its own writes are the probe."""

    @property
    def ended(self) -> bool:
        """The client's sending side was seen to end while its request ran: nothing more will come from it."""
        return self._ended

    def wanted(self) -> bool:
        with self._lock:
            if not self._ended:
                if not self._peer.ended():
                    return True
                self._ended = True
            if self._end_is_hang_up:
                return False
            try:
                self._write_probe()
            except OSError:
                return False
            return self._peer.connected()

    def send(self, data: bytes) -> int:
        """Part of the answer, sent as far as the socket takes it now, after the probe if one is being written."""
        with self._lock:
            self._write_probe()
            if self._due():
                return 0
            self._began = True
            return self._peer.send(data)

    def owed(self) -> bytes:
        """What of the probe the socket has not taken yet: it goes out before the answer."""
        with self._lock:
            owed = self._probe if self._due() else b""
            self._probe = b""
            return owed

    def _due(self) -> bool:
        return bool(self._probe) and self._ended and not self._began

    def _write_probe(self) -> None:
        if self._due():
            self._probe = self._probe[self._peer.send(self._probe) :]


class Output:
    """What the driver does next: send `data`, then run `run` (and give its result to `answered`), or close."""

    __slots__ = ("data", "run", "close", "lasting")

    def __init__(
        self, data: bytes = b"", run: Callable[[], Any] | None = None, close: bool = False, lasting: bool = False
    ) -> None:
        self.data = data
        self.run = run
        """One request's work; never set together with `close` (the answer decides that)."""
        self.close = close
        self.lasting = lasting
        """`run` lasts as long as its client listens (an event stream of updates): a driver that runs requests in
        place runs this one on a thread of its own."""


QUIET = Output()


class Conversation(Protocol):
    client_state: ClientState
    our_state: OurState
    trusted: bool
    """A request on it passed authentication (MCP) or admission (Blender Lab): eviction spares it while busy."""

    def opened(self, now: float) -> Output:
        """Once, when the connection is accepted (e.g. to refuse a peer at once)."""
        ...

    def received(self, data: bytes, now: float) -> Output:
        """New bytes from the client; b"" when it ended its sending side. Never called while a request runs."""
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
