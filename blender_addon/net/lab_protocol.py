"""The Blender Lab bridge wire, byte-compatible with the official add-on.

One request per connection: a UTF-8 JSON object and a NUL byte in, one JSON reply and a NUL
byte out, then close. It carries no credentials, so it is unauthenticated unless the user
turns on "require token". Clients speaking something else (HTTP, or bare JSON without the
NUL) get a fast, explanatory error instead of a silent wait.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import re
from collections.abc import Callable
from functools import partial
from typing import Any, Protocol

from ..jsontext import RawJson, dumps
from ..jsontext import encode as encode_json
from .auth import Token
from .conversation import QUIET, ClientState, OurState, Output, Peer, Watch
from .peer import peer_refusal
from .refusals import refused

log = logging.getLogger("hermes_bridge.net")

_HTTP_METHODS = (
    b"GET ",
    b"POST ",
    b"PUT ",
    b"HEAD ",
    b"DELETE ",
    b"OPTIONS ",
    b"PATCH ",
    b"PRI * ",
    b"CONNECT ",
    b"TRACE ",
)
_LONGEST_METHOD = max(len(method) for method in _HTTP_METHODS)
_FOREIGN_JSON_GRACE = 0.5
"""Seconds a complete JSON object may wait for its NUL before we call it another protocol."""


class LabExecutor(Protocol):
    def run_lab_code(self, code: str, strict_json: bool, connected: Callable[[], bool]) -> dict[str, Any] | None:
        """The reply envelope, or None when the client left while a deferred result was pending."""
        ...


class LabSettings:
    """How the Blender Lab listener admits and bounds a request: its wire carries no credentials of its own."""

    __slots__ = ("max_request_bytes", "request_timeout", "token", "identify", "mcp_endpoint")

    def __init__(
        self,
        max_request_bytes: int = 10 * 1024 * 1024,
        request_timeout: float = 10.0,
        token: Token | None = None,
        identify: Callable[[Peer], bool | None] | None = None,
        mcp_endpoint: str = "",
    ) -> None:
        self.max_request_bytes = max_request_bytes
        self.request_timeout = request_timeout
        self.token = token
        """When set ("require token"), requests must open with a matching `token` field."""
        self.identify = identify
        """Whether the peer runs as this OS user (None: cannot be told); None admits everyone (tests)."""
        self.mcp_endpoint = mcp_endpoint
        """Named in the answer to HTTP clients that knocked on the wrong port."""


class _Answer(Exception):
    """The answer is decided by the framing alone (a refusal, a foreign protocol): send it and close."""

    def __init__(self, payload: bytes) -> None:
        self.payload = payload


def error_envelope(message: str) -> dict[str, Any]:
    return {"status": "error", "message": message}


def encode(envelope: dict[str, Any]) -> bytes:
    result = envelope.get("result")
    if type(result) is RawJson and all(type(value) is str for key, value in envelope.items() if key != "result"):
        # The usual answer: one result encoded once, among plain strings (a string's quotes are escaped, so the
        # only `"result":null` in the text is the field itself). Same bytes as the general splice, without its
        # random marker and second walk.
        text = dumps({**envelope, "result": None}).replace('"result":null', f'"result":{result}', 1)
        with contextlib.suppress(UnicodeEncodeError):  # a lone surrogate: the general path replaces it
            return text.encode("utf-8") + b"\0"
    return encode_json(envelope) + b"\0"


class LabConversation:
    """Admission at once, then one request read to its NUL (or its framing refused), handed out, answered, closed."""

    def __init__(self, peer: Peer, *, executor: LabExecutor, settings: LabSettings) -> None:
        self._peer = peer
        self._executor = executor
        self._settings = settings
        self._incoming = _Incoming()
        self.client_state = ClientState.IDLE
        self.our_state = OurState.IDLE
        self.trusted = False
        self._deadline = math.inf
        self._grace_ends = math.inf
        """When a silence after the last bytes makes a whole bare JSON object another protocol's request."""

    def opened(self, now: float) -> Output:
        """The peer check, before any byte is read: another user is refused even with "require token" on; an
        unknown user only gets as far as a token."""
        settings = self._settings
        self._deadline = now + settings.request_timeout
        same_user = True if settings.identify is None else settings.identify(self._peer)
        if (refusal := peer_refusal(same_user, token_required=settings.token is not None)) is not None:
            refused(log, "a Blender Lab connection", refusal, self._peer.port)
            return self._close(encode(error_envelope(f"Refused: {refusal}")))
        self.trusted = settings.token is None  # admitted by user; with a token, trust comes with the request
        return QUIET

    def received(self, data: bytes, now: float) -> Output:
        assert self.our_state is not OurState.RUNNING, "the driver reads nothing while a request runs"
        try:
            raw = self._request(data, now)
        except _Answer as answer:
            return self._close(answer.payload)
        if raw is None:
            return QUIET
        self.our_state = OurState.RUNNING
        # A request ended by its NUL is whole: a client that then closes its side has left (the wire allows no
        # byte before the answer to tell a half-close from a close, and its clients never half-close), and when
        # its turn comes the request is dropped, never run. A request ended by the client's end is answered
        # unless a write fails.
        self.client_state = ClientState.DONE if data else ClientState.CLOSED
        watch = Watch(self._peer, end_is_hang_up=bool(data))
        return Output(run=partial(_handle, raw, self._executor, watch.wanted))

    def answered(self, result: bytes, now: float) -> Output:
        return self._close(result)

    def deadline(self) -> float:
        return math.inf if self.our_state is OurState.RUNNING else min(self._deadline, self._grace_ends)

    def expired(self, now: float) -> Output:
        if now >= self._deadline:
            return self._close(encode(error_envelope("Client timed out")))
        if now >= self._grace_ends:
            self._grace_ends = math.inf  # until more bytes come
            if self._incoming.bare_json_waiting():
                return self._close(encode(error_envelope(_BARE_JSON)))
        return QUIET

    def _close(self, payload: bytes) -> Output:
        self.our_state = OurState.MUST_CLOSE
        return Output(payload, close=True)

    def _check_token(self, complete: bool) -> None:
        """With "require token": the token is the request's first field, checked within its first bytes, so a
        peer without it never gets a large request buffered or parsed."""
        buffer, token = self._incoming.buffer, self._settings.token
        assert token is not None
        found = _TOKEN_FIRST.match(buffer, 0, TOKEN_FRAME_BYTES)
        if found is None and not complete and len(buffer) < TOKEN_FRAME_BYTES:
            return  # the token may still be arriving
        if found is None or not token.matches(found.group(1).decode("ascii")):
            refused(log, "a Blender Lab request", "without the required token", self._peer.port)
            raise _Answer(encode(error_envelope(_TOKEN_REQUIRED)))
        self.trusted = True

    def _request(self, data: bytes, now: float) -> bytes | None:
        """The request once its NUL (or the client's close) ends it; None while it may still grow."""
        incoming, settings = self._incoming, self._settings
        if data:
            incoming.buffer += data
            self.client_state = ClientState.SENDING
            self._grace_ends = now + _FOREIGN_JSON_GRACE
        end = incoming.nul()
        if (end if end >= 0 else len(incoming.buffer)) > settings.max_request_bytes:
            raise _Answer(encode(error_envelope(f"Request too large: the limit is {settings.max_request_bytes} bytes")))
        if not self.trusted:
            self._check_token(complete=end >= 0 or not data)
        if end >= 0:
            return bytes(incoming.buffer[:end])
        if not data:
            if incoming.first() is not None:
                return bytes(incoming.buffer)  # the client closed its side: take what it sent as the request
            raise _Answer(b"")
        if not incoming.json_framed:
            incoming.json_framed = _framing_is_json(incoming, settings)
        return None


TOKEN_FRAME_BYTES = 4096
"""How much of a request from a peer not yet admitted is read before its token must have been seen."""
_TOKEN_FIRST = re.compile(rb'\s*\{\s*"token"\s*:\s*"([A-Za-z0-9_\-]{1,512})"')
_TOKEN_REQUIRED = (
    "This Blender requires a token on the Blender Lab port (preference 'Require token'): open the request with "
    'the `token` from Blender\'s runtime file (`{"token": "…", "type": "execute", …}`), or turn the preference off'
)

_BARE_JSON = (
    "This is the Blender Lab bridge: end each JSON request with a NUL byte. Bare JSON without it "
    "(the blender-mcp community add-on's protocol) is not spoken here; two bridges may share this port"
)


def _handle(raw: bytes, executor: LabExecutor, connected: Callable[[], bool]) -> bytes:
    try:
        request = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        return encode(error_envelope(f"Invalid JSON request: {exc}"))
    except RecursionError:
        return encode(error_envelope("Invalid JSON request: nested too deeply"))
    if not isinstance(request, dict):
        return encode(error_envelope("The request must be a JSON object"))
    kind = request.get("type")
    if kind != "execute":
        return encode(error_envelope(f"Unknown request type: {kind!r}"))
    strict_json = request.get("strict_json")
    if not isinstance(strict_json, bool):
        return encode(
            error_envelope("The `strict_json` field must be a boolean; this is a bug in the tool that sent the request")
        )
    code = request.get("code")
    if not isinstance(code, str):
        return encode(error_envelope("The `code` field must be a string"))
    envelope = executor.run_lab_code(code, strict_json, connected)
    return encode(envelope) if envelope is not None else b""


class _Incoming:
    """One request as it arrives. Each byte is examined once, so a slow client costs linear time."""

    def __init__(self) -> None:
        self.buffer = bytearray()
        self._scanned = 0  # bytes already searched for the NUL
        self._blank = 0  # bytes of leading whitespace already skipped
        self.json_framed = False  # decided once: the first byte that is not whitespace is "{"
        self._parsed_at = -1  # buffer length of the last attempt to read bare JSON

    def nul(self) -> int:
        end = self.buffer.find(b"\0", self._scanned)
        self._scanned = len(self.buffer) if end < 0 else end
        return end

    def first(self) -> int | None:
        """Where the request starts (after leading whitespace), once known."""
        found = _NOT_BLANK.search(self.buffer, self._blank)
        if found is None:
            self._blank = len(self.buffer)
            return None
        self._blank = found.start()
        return found.start()

    def bare_json_waiting(self) -> bool:
        """A whole JSON object and no NUL: the community add-on's framing. Tried once per new data."""
        if self._parsed_at == len(self.buffer):
            return False
        self._parsed_at = len(self.buffer)
        end = len(self.buffer)
        while end and self.buffer[end - 1] in _BLANK:
            end -= 1
        return end > 0 and self.buffer[end - 1] == ord("}") and _complete_json(self.buffer)


_BLANK = b" \t\n\r\x0b\x0c"  # what bytes.strip() strips: a request of only these asks nothing
_NOT_BLANK = re.compile(rb"[^ \t\n\r\x0b\x0c]")


def _framing_is_json(incoming: _Incoming, settings: LabSettings) -> bool:
    """True once the request is known to be JSON; answers HTTP and other foreign framings at once."""
    start = incoming.first()
    if start is None:
        return False
    head = bytes(incoming.buffer[start : start + _LONGEST_METHOD])
    if head[:1] == b"{":
        return True
    if any(head.startswith(method) for method in _HTTP_METHODS):
        hint = f" The MCP endpoint of this Blender is {settings.mcp_endpoint}." if settings.mcp_endpoint else ""
        body = f"This port speaks the Blender Lab bridge protocol (NUL-terminated JSON), not HTTP.{hint}\n".encode()
        head_lines = f"HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        raise _Answer(head_lines.encode() + body)
    if len(head) < _LONGEST_METHOD and any(method.startswith(head) for method in _HTTP_METHODS):
        return False  # could still become an HTTP method: wait for more bytes
    raise _Answer(encode(error_envelope("Expected one JSON object followed by a NUL byte")))


def _complete_json(buffer: bytearray) -> bool:
    try:
        return isinstance(json.loads(bytes(buffer)), dict)
    except (ValueError, RecursionError):
        return False
