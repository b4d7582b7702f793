"""Strict, small HTTP/1.1 framing for the MCP endpoint.

Only what an MCP client needs: Content-Length bodies, keep-alive, and hard limits. Every
request must arrive whole within a deadline, so a slow or stalled client costs one thread
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

from .listener import ConnectionState
from .loopback import peer_connected, peer_port

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


def serve_http_connection(
    conn: socket.socket, state: ConnectionState, app: App, limits: HttpLimits, gate: Gate | None = None
) -> None:
    """Answer requests on one connection until it closes, errs or asks to close.

    Nothing is buffered for a client that has not authenticated: the gate sees the headers
    before a byte of the body is read, and a refused connection is closed after its answer.
    """
    reader = _Reader(conn)
    while True:
        try:
            request = _read_request(reader, limits, state, gate)
        except _PeerGone:
            return
        except _Reject as rejection:
            _log_refusal(conn, rejection.response)
            _send(conn, rejection.response)
            return
        response = app(request)
        response.close = response.close or _wants_close(request) or response.status in _CLOSE_AFTER
        if response.status in _REFUSALS:
            _log_refusal(conn, response)
        _send(conn, response)
        if response.close:
            return


_REFUSALS = frozenset({400, 401, 403, 404, 405, 408, 411, 413, 415, 431, 505})
_CLOSE_AFTER = frozenset({400, 401, 403, 404})


def _log_refusal(conn: socket.socket, response: Response) -> None:
    """Our own reason text and the peer's port: never a header value, a token or a body."""
    reason = response.body.decode("utf-8", "replace").strip()
    log.warning("refused HTTP %d from peer port %s: %s", response.status, peer_port(conn), reason)


def _send(conn: socket.socket, response: Response) -> None:
    try:
        conn.settimeout(30.0)
        conn.sendall(response.encode())
    except OSError:
        pass


def _wants_close(request: Request) -> bool:
    connection = (request.header("connection") or "").lower()
    if request.version == "HTTP/1.0":
        return "keep-alive" not in connection
    return "close" in connection


class _Reader:
    def __init__(self, conn: socket.socket) -> None:
        self.conn = conn
        self.buffer = bytearray()

    def fill(self, deadline: float) -> None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError
        self.conn.settimeout(remaining)
        chunk = self.conn.recv(65536)
        if not chunk:
            raise ConnectionResetError
        self.buffer += chunk


def _read_request(reader: _Reader, limits: HttpLimits, state: ConnectionState, gate: Gate | None) -> Request:
    if not reader.buffer:  # wait for the first byte of the next request; a stranger gets a few seconds
        state.idle = True
        wait = limits.idle_timeout if state.trusted else limits.first_byte_timeout
        try:
            reader.fill(time.monotonic() + wait)
        except OSError as exc:  # TimeoutError is an OSError
            raise _PeerGone from exc
    state.idle = False
    started = time.monotonic()
    deadline = started + limits.request_timeout
    try:
        while (end := reader.buffer.find(b"\r\n\r\n")) < 0:
            if len(reader.buffer) > limits.max_header_bytes:
                raise _Reject(Response.text(431, "request headers are too large", close=True))
            reader.fill(min(deadline, started + limits.header_timeout))
        if end > limits.max_header_bytes:
            raise _Reject(Response.text(431, "request headers are too large", close=True))
        head = bytes(reader.buffer[:end])
        del reader.buffer[: end + 4]
        method, target, version, headers = _parse_head(head)
        length = _content_length(headers, limits)
        refusal = gate(Request(method, target, version, headers, b"")) if gate is not None else None
        if refusal is not None:
            refusal.close = True
            raise _Reject(refusal)
        state.trusted = True
        while len(reader.buffer) < length:
            reader.fill(deadline)
    except TimeoutError as exc:
        raise _Reject(Response.text(408, "the request was not received in time", close=True)) from exc
    except OSError as exc:  # truncated: a half-closed client can still read why nothing was done
        raise _Reject(
            Response.text(400, "the connection closed before the request was complete; nothing was run", close=True)
        ) from exc
    body = bytes(reader.buffer[:length])
    del reader.buffer[:length]
    return Request(method, target, version, headers, body, partial(peer_connected, reader.conn))


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
