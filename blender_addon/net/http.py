"""Strict, small HTTP/1.1 framing for the MCP endpoint.

Only what an MCP client needs: Content-Length bodies, keep-alive, and hard limits. Every
request must arrive whole within a deadline, so a slow or stalled client holds one connection
for a bounded time and never blocks anyone else.
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from http import HTTPStatus

from .conversation import QUIET, Reply
from .listener import ConnectionState
from .loopback import peer_connected
from .refusals import refused

log = logging.getLogger("hermes_bridge.net")


@dataclass(frozen=True)
class HttpLimits:
    max_header_bytes: int = 16 * 1024
    max_body_bytes: int = 10 * 1024 * 1024
    request_timeout: float = 10.0
    """Seconds from a request's first byte to its last."""
    idle_timeout: float = 120.0
    """Seconds an authenticated keep-alive connection may wait for its next request."""
    first_byte_timeout: float = 5.0
    """Seconds a connection that has not authenticated yet may wait before it sends anything."""
    header_timeout: float = 5.0
    """Seconds from a request's first byte to the end of its header block."""


@dataclass(frozen=True)
class Request:
    method: str
    target: str
    version: str
    headers: dict[str, str]
    """Header names lower-cased; repeated headers joined with ', '."""
    body: bytes
    connected: Callable[[], bool] = field(default=lambda: True, compare=False, repr=False)
    """Whether the client is still there, for work that outlives the request's arrival (deferred results)."""

    @property
    def path(self) -> str:
        return self.target.split("?", 1)[0]

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())


@dataclass
class Response:
    status: int
    body: bytes = b""
    headers: list[tuple[str, str]] = field(default_factory=list)
    close: bool = False

    @classmethod
    def text(
        cls, status: int, message: str, *, close: bool = False, headers: list[tuple[str, str]] | None = None
    ) -> Response:
        content_type = [("Content-Type", "text/plain; charset=utf-8")]
        return cls(status, message.encode() + b"\n", content_type + (headers or []), close)

    def encode(self) -> bytes:
        reason = HTTPStatus(self.status).phrase
        lines = [f"HTTP/1.1 {self.status} {reason}", f"Content-Length: {len(self.body)}"]
        lines += [f"{name}: {value}" for name, value in self.headers]
        if self.close:
            lines.append("Connection: close")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + self.body


class _Reject(Exception):
    """A request that gets an error status, after which the connection is closed."""

    def __init__(self, response: Response) -> None:
        self.response = response


class _PeerGone(Exception):
    """The client closed or went idle; there is nobody to answer."""


App = Callable[[Request], Response]
Gate = Callable[[Request], Response | None]
"""Decides from the request line and headers alone (the body is empty): a refusal, or None to go on."""


class HttpConversation:
    """Requests read as they arrive, answered by `app` in order, under the limits and deadlines.

    Nothing is buffered for a client that has not authenticated: the gate sees the headers
    before a byte of the body is taken, and a refused connection is closed after its answer.
    """

    def __init__(self, conn: socket.socket, state: ConnectionState, app: App, limits: HttpLimits, gate: Gate) -> None:
        self._conn = conn
        self._state = state
        self._app = app
        self._limits = limits
        self._gate = gate
        self._buffer = bytearray()
        self._closed = False
        self._waiting_since = time.monotonic()
        self._started: float | None = None
        """When the current request's first byte came; None while waiting for it."""
        self._head: tuple[str, str, str, dict[str, str]] | None = None
        self._length = 0
        self._scanned = 0  # header bytes already searched for the blank line

    def opened(self) -> Reply:
        return QUIET

    def received(self, data: bytes) -> Reply:
        if data:
            self._buffer += data
        else:
            self._closed = True
        out = bytearray()
        while True:
            try:
                request = self._next_request()
            except _PeerGone:
                return Reply(bytes(out), close=True)
            except _Reject as rejection:
                _log_refusal(self._conn, rejection.response)
                return Reply(bytes(out + rejection.response.encode()), close=True)
            if request is None:
                return Reply(bytes(out))
            response = self._app(request)
            response.close = response.close or _wants_close(request) or response.status in _CLOSE_AFTER
            if response.status in _REFUSALS:
                _log_refusal(self._conn, response)
            out += response.encode()
            if response.close:
                return Reply(bytes(out), close=True)

    def deadline(self) -> float:
        limits = self._limits
        if self._started is None:  # a stranger gets a few seconds to say anything, a known client longer
            return self._waiting_since + (limits.idle_timeout if self._state.trusted else limits.first_byte_timeout)
        if self._head is None:
            return self._started + min(limits.header_timeout, limits.request_timeout)
        return self._started + limits.request_timeout

    def expired(self) -> Reply:
        if self._started is None:
            return Reply(close=True)  # silent since its last answer: nobody to answer
        refusal = Response.text(408, "the request was not received in time", close=True)
        _log_refusal(self._conn, refusal)
        return Reply(refusal.encode(), close=True)

    def _next_request(self) -> Request | None:
        """The next whole request, or None until more bytes come; raises what ends the connection."""
        buffer, limits = self._buffer, self._limits
        if self._started is None:
            if not buffer:
                self._state.idle = True
                if self._closed:
                    raise _PeerGone
                return None
            self._started = time.monotonic()
            self._state.idle = False
        if self._head is None:
            end = buffer.find(b"\r\n\r\n", self._scanned)
            if end < 0:
                if len(buffer) > limits.max_header_bytes:
                    raise _Reject(Response.text(431, "request headers are too large", close=True))
                self._scanned = max(0, len(buffer) - 3)
                return self._truncated() if self._closed else None
            if end > limits.max_header_bytes:
                raise _Reject(Response.text(431, "request headers are too large", close=True))
            head = bytes(buffer[:end])
            del buffer[: end + 4]
            self._scanned = 0
            method, target, version, headers = _parse_head(head)
            length = _content_length(headers, limits)
            refusal = self._gate(Request(method, target, version, headers, b""))
            if refusal is not None:
                refusal.close = True
                raise _Reject(refusal)
            self._state.trusted = True
            self._head, self._length = (method, target, version, headers), length
        if len(buffer) < self._length:
            return self._truncated() if self._closed else None
        method, target, version, headers = self._head
        body = bytes(buffer[: self._length])
        del buffer[: self._length]
        self._head, self._started, self._waiting_since = None, None, time.monotonic()
        return Request(method, target, version, headers, body, partial(peer_connected, self._conn))

    @staticmethod
    def _truncated() -> None:
        """A half-closed client can still read why nothing was done."""
        raise _Reject(
            Response.text(400, "the connection closed before the request was complete; nothing was run", close=True)
        )


_REFUSALS = frozenset({400, 401, 403, 404, 405, 408, 411, 413, 415, 431, 505})
_CLOSE_AFTER = frozenset({400, 401, 403, 404})


def _log_refusal(conn: socket.socket, response: Response) -> None:
    """Our own reason text and the peer's port: never a header value, a token or a body."""
    refused(log, f"HTTP {response.status}", response.body.decode("utf-8", "replace").strip(), conn)


def _wants_close(request: Request) -> bool:
    connection = (request.header("connection") or "").lower()
    if request.version == "HTTP/1.0":
        return "keep-alive" not in connection
    return "close" in connection


def _parse_head(head: bytes) -> tuple[str, str, str, dict[str, str]]:
    try:
        request_line, *header_lines = head.decode("latin-1").split("\r\n")
        method, target, version = request_line.split(" ")
    except ValueError:
        raise _Reject(Response.text(400, "malformed request line", close=True)) from None
    if version not in ("HTTP/1.1", "HTTP/1.0") or not method.isalpha() or not target.startswith("/"):
        raise _Reject(Response.text(400, "malformed request line", close=True))
    headers: dict[str, str] = {}
    for line in header_lines:
        name, sep, value = line.partition(":")
        if not sep or not name or name != name.strip() or " " in name:
            raise _Reject(Response.text(400, "malformed header line", close=True))
        key, value = name.lower(), value.strip()
        headers[key] = f"{headers[key]}, {value}" if key in headers else value
    return method, target, version, headers


def _content_length(headers: dict[str, str], limits: HttpLimits) -> int:
    if "transfer-encoding" in headers:
        raise _Reject(Response.text(501, "chunked request bodies are not supported; send Content-Length", close=True))
    raw = headers.get("content-length", "0")
    if not (raw.isascii() and raw.isdigit()):  # '²'.isdigit() is True, and int('²') raises
        raise _Reject(Response.text(400, "invalid Content-Length", close=True))
    length = int(raw)
    if length > limits.max_body_bytes:
        raise _Reject(
            Response.text(413, f"request body exceeds the limit of {limits.max_body_bytes} bytes", close=True)
        )
    return length
