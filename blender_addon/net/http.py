"""Strict, small HTTP/1.1 framing for the MCP endpoint, as a conversation that only parses and decides.

Only what an MCP client needs: Content-Length bodies, keep-alive, and hard limits. Every
request must arrive whole within a deadline, so a slow or stalled client holds one connection
for a bounded time and never blocks anyone else. Each byte is examined a bounded number of
times, so the cost of a request is linear in its size whatever it holds.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from http import HTTPStatus

from .conversation import QUIET, ClientState, OurState, Output, Peer, Watch
from .refusals import refused

log = logging.getLogger("hermes_bridge.net")


@dataclass(frozen=True)
class HttpLimits:
    """What one connection may send and how long it may take: a client that exceeds them is answered and closed."""

    max_header_bytes: int = 16 * 1024
    max_header_lines: int = 100
    """More header fields than any MCP client sends (they send about ten); counted before any is parsed."""
    max_body_bytes: int = 10 * 1024 * 1024
    request_timeout: float = 10.0
    """Seconds from a request's first byte to its last."""
    idle_timeout: float = 120.0
    """Seconds an authenticated keep-alive connection may wait for its next request, from its last answer."""
    first_byte_timeout: float = 5.0
    """Seconds a connection that has not authenticated yet may wait before it sends anything."""
    header_timeout: float = 5.0
    """Seconds from a request's first byte to the end of its header block."""


@dataclass(frozen=True)
class Request:
    """One HTTP request, parsed whole, with ways back to its connection for answers that outlive it."""

    method: str
    target: str
    version: str
    headers: dict[str, str]
    """Header names lower-cased; repeated headers joined with ', '."""
    body: bytes
    connected: Callable[[], bool] = field(default=lambda: True, compare=False, repr=False)
    """Whether the client is still there, for work that outlives the request's arrival (deferred results)."""
    send: Callable[[bytes], int] = field(default=lambda data: len(data), compare=False, repr=False)
    """Sends what the socket takes now, for an answer streamed while the request runs (`event_stream.py`)."""
    ended: Callable[[], bool] = field(default=lambda: False, compare=False, repr=False)
    """The client's sending side has ended (a hang-up, or a half-close): for a stream no reader half-closes."""

    @property
    def path(self) -> str:
        return self.target.split("?", 1)[0]

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())


_NO_BODY = frozenset({204, 304})
"""Statuses whose answers never carry a body (RFC 9110 §6.4.1), nor a Content-Length for 204 (§8.6)."""


@dataclass
class Response:
    """One HTTP answer as the conversation frames it (a whole body, or the rest of an event stream)."""

    status: int
    body: bytes = b""
    headers: list[tuple[str, str]] = field(default_factory=list)
    close: bool = False
    streamed: bool = False
    """`body` is the rest of an event stream, framed already (its head may have gone): sent as it is."""

    @classmethod
    def text(
        cls, status: int, message: str, *, close: bool = False, headers: list[tuple[str, str]] | None = None
    ) -> Response:
        content_type = [("Content-Type", "text/plain; charset=utf-8")]
        return cls(status, message.encode() + b"\n", content_type + (headers or []), close)

    def encode(self, method: str = "POST") -> bytes:
        """The answer on the wire; to HEAD without its body (the length stays: RFC 9110 §9.3.2)."""
        if self.streamed:
            return self.body
        lines = [f"HTTP/1.1 {self.status} {HTTPStatus(self.status).phrase}"]
        if self.status != 204:
            lines.append(f"Content-Length: {0 if self.status in _NO_BODY else len(self.body)}")
        lines += [f"{name}: {value}" for name, value in self.headers]
        if self.close:
            lines.append("Connection: close")
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        return head if method == "HEAD" or self.status in _NO_BODY else head + self.body


class HttpError(Exception):
    """A request refused with an error status (by the framing or the gate); the connection then closes."""

    def __init__(self, status: int, message: str, headers: list[tuple[str, str]] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.headers = headers or []

    def response(self) -> Response:
        return Response.text(self.status, str(self), close=True, headers=self.headers)


App = Callable[[Request], Response]
Gate = Callable[[Request], HttpError | None]
"""Decides from the request line and headers alone (the body is empty): a refusal, or None to go on."""
Lasting = Callable[[Request], bool]
"""Whether a request's answer lasts as long as its client listens (`Output.lasting`)."""


def _brief(request: Request) -> bool:
    return False


@dataclass
class _Head:
    """A request's head, kept while its body arrives."""

    method: str
    target: str
    version: str
    headers: dict[str, str]
    length: int


class HttpConversation:
    """Requests parsed as they arrive and handed out one at a time; answers framed and sent in order.

    Nothing is buffered for a client that has not authenticated: the gate sees the headers
    before a byte of the body is taken, and a refused connection is closed after its answer.
    The idle clock of a kept connection starts when its answer is given, not when it was asked.
    A client whose sending side ends is served what it sent whole (its requests in order), then
    the connection closes; one that ends in the middle of a request hears that nothing was run.
    """

    def __init__(self, peer: Peer, *, app: App, limits: HttpLimits, gate: Gate, lasting: Lasting = _brief) -> None:
        self._peer = peer
        self._app = app
        self._lasting = lasting
        self._limits = limits
        self._gate = gate
        self.client_state = ClientState.IDLE
        self.our_state = OurState.IDLE
        self.trusted = False
        self._buffer = bytearray()
        self._ended = False
        """The client's sending side ended: what the buffer holds is all that will come."""
        self._since = 0.0
        """When the current wait began: while the client is IDLE the last answer (or the accept), else the
        request's first byte."""
        self._head: _Head | None = None
        self._scanned = 0  # header bytes already searched for the blank line
        self._method = "POST"  # of the request being answered, for its framing
        self._watch: Watch | None = None

    def opened(self, now: float) -> Output:
        self._since = now
        return QUIET

    def received(self, data: bytes, now: float) -> Output:
        assert self.our_state is not OurState.RUNNING, "the driver reads nothing while a request runs"
        if data:
            self._buffer += data
        else:
            self._ended = True
        return self._next(now)

    def answered(self, result: Response, now: float) -> Output:
        assert self.our_state is OurState.RUNNING and self._watch is not None
        if result.status in _REFUSALS:
            self._log_refusal(result)
        data = self._watch.owed() + result.encode(self._method)
        self._ended = self._ended or self._watch.ended
        self._watch = None
        if result.close:
            self.our_state = OurState.MUST_CLOSE
            return Output(data, close=True)
        self.client_state, self.our_state, self._since = ClientState.IDLE, OurState.IDLE, now
        following = self._next(now)
        return Output(data + following.data, following.run, following.close)

    def deadline(self) -> float:
        limits = self._limits
        if self.our_state is not OurState.IDLE:
            return float("inf")
        if (
            self.client_state is ClientState.IDLE
        ):  # a stranger gets a few seconds to say anything, a known client longer
            return self._since + (limits.idle_timeout if self.trusted else limits.first_byte_timeout)
        if self._head is None:
            return self._since + min(limits.header_timeout, limits.request_timeout)
        return self._since + limits.request_timeout

    def expired(self, now: float) -> Output:
        if self.client_state is ClientState.IDLE:
            self.our_state = OurState.MUST_CLOSE
            return Output(close=True)  # silent since its last answer: nobody to answer
        return self._refuse(HttpError(408, "the request was not received in time"))

    def _next(self, now: float) -> Output:
        """Hand out the next whole request, refuse a bad one, close after a client's end, or wait for more bytes."""
        try:
            request = self._parse(now)
        except HttpError as error:
            return self._refuse(error)
        if request is None:
            if self._ended:  # nothing whole is left, and nothing more will come
                self.client_state, self.our_state = ClientState.CLOSED, OurState.MUST_CLOSE
                return Output(close=True)
            return QUIET
        self.client_state, self.our_state, self._method = ClientState.DONE, OurState.RUNNING, request.method
        return Output(run=lambda: self._respond(request), lasting=self._lasting(request))

    def _respond(self, request: Request) -> Response:
        response = self._app(request)
        response.close = response.close or _wants_close(request) or response.status in _CLOSE_AFTER
        return response

    def _refuse(self, error: HttpError) -> Output:
        response = error.response()
        self._log_refusal(response)
        self.our_state = OurState.MUST_CLOSE
        return Output(response.encode(self._head.method if self._head else "POST"), close=True)

    def _parse(self, now: float) -> Request | None:
        """The next whole request, or None until more bytes come; raises HttpError for what ends the connection."""
        buffer, limits = self._buffer, self._limits
        if self.client_state is ClientState.IDLE:
            if not buffer:
                return None
            self.client_state, self._since = ClientState.SENDING, now
        if self._head is None:
            end = buffer.find(b"\r\n\r\n", self._scanned)
            if end < 0:
                if len(buffer) > limits.max_header_bytes:
                    raise HttpError(431, "request headers are too large")
                self._scanned = max(0, len(buffer) - 3)
                return self._truncated() if self._ended else None
            if end > limits.max_header_bytes:
                raise HttpError(431, "request headers are too large")
            raw_head = bytes(buffer[:end])
            del buffer[: end + 4]
            self._scanned = 0
            if raw_head.count(b"\r\n") > limits.max_header_lines:
                raise HttpError(431, f"more than {limits.max_header_lines} header fields")
            method, target, version, headers = _parse_head(raw_head)
            length = _content_length(headers, limits)
            refusal = self._gate(Request(method, target, version, headers, b""))
            if refusal is not None:
                self._head = _Head(method, target, version, headers, 0)
                raise refusal
            self.trusted = True
            self._head = _Head(method, target, version, headers, length)
        head = self._head
        if len(buffer) < head.length:
            return self._truncated() if self._ended else None
        body = bytes(buffer[: head.length])
        del buffer[: head.length]
        self._head = None
        # HTTP/1.0 has no interim answers: there a client's end is taken as a shut sending side, and a hang-up
        # is seen when the answer is written.
        watch = self._watch = Watch(self._peer, probe=_CONTINUE if head.version == "HTTP/1.1" else b"")
        return Request(
            head.method, head.target, head.version, head.headers, body, watch.wanted, watch.send, self._peer.ended
        )

    @staticmethod
    def _truncated() -> None:
        """The client left before its request was whole; if it only shut its sending side, it can read why."""
        raise HttpError(400, "the connection closed before the request was complete; nothing was run")

    def _log_refusal(self, response: Response) -> None:
        """Our own reason text and the peer's port: never a header value, a token or a body."""
        refused(log, f"HTTP {response.status}", response.body.decode("utf-8", "replace").strip(), self._peer.port)


_CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
"""The one answer HTTP/1.1 allows before the final one (RFC 9110 §15.2: every client parses 1xx): the probe
written when a running request's client ends its sending side, so that a client that closed is told from one
that still reads."""


_REFUSALS = frozenset({400, 401, 403, 404, 405, 408, 411, 413, 415, 431, 501, 505})
_CLOSE_AFTER = frozenset({400, 401, 403, 404})


def _wants_close(request: Request) -> bool:
    connection = (request.header("connection") or "").lower()
    if request.version == "HTTP/1.0":
        return "keep-alive" not in connection
    return "close" in connection


def _parse_head(head: bytes) -> tuple[str, str, str, dict[str, str]]:
    """The request line and headers; repeated headers are collected and joined once (linear in the bytes)."""
    try:
        request_line, *header_lines = head.decode("latin-1").split("\r\n")
        method, target, version = request_line.split(" ")
    except ValueError:
        raise HttpError(400, "malformed request line") from None
    if version not in ("HTTP/1.1", "HTTP/1.0") or not method.isalpha() or not target.startswith("/"):
        raise HttpError(400, "malformed request line")
    values: dict[str, list[str]] = {}
    for line in header_lines:
        name, sep, value = line.partition(":")
        if not sep or not name or name != name.strip() or " " in name:
            raise HttpError(400, "malformed header line")
        values.setdefault(name.lower(), []).append(value.strip())
    return method, target, version, {key: ", ".join(parts) for key, parts in values.items()}


def _content_length(headers: dict[str, str], limits: HttpLimits) -> int:
    if "transfer-encoding" in headers:
        raise HttpError(501, "chunked request bodies are not supported; send Content-Length")
    raw = headers.get("content-length", "0")
    if not (raw.isascii() and raw.isdigit()):  # '²'.isdigit() is True, and int('²') raises
        raise HttpError(400, "invalid Content-Length")
    too_large = HttpError(413, f"request body exceeds the limit of {limits.max_body_bytes} bytes")
    digits = raw.lstrip("0") or "0"  # HTTP allows leading zeros; int() of over 4300 digits raises
    if len(digits) > len(str(limits.max_body_bytes)) or int(digits) > limits.max_body_bytes:
        raise too_large
    return int(digits)
