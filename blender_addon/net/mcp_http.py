"""The MCP endpoint's HTTP face: guards first, then one JSON-RPC message per POST.

Order matters: the DNS-rebinding guard (Host, Origin) and the bearer check run before the
body is even parsed, so nothing unauthenticated reaches the protocol or Blender.
"""

from __future__ import annotations

import base64
import json
import re
import threading
import time
from collections.abc import Callable
from typing import Any

from ..errors import RpcError
from ..jsontext import encode
from .auth import Token, bearer_matches, host_allowed, origin_allowed
from .caller import Caller
from .event_stream import EventStream
from .http import HttpError, Request, Response
from .mcp import (
    HANDSHAKE_VERSIONS,
    HEADER_MISMATCH,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    META_CLIENT_CAPABILITIES,
    META_PROTOCOL_VERSION,
    METHOD_NOT_FOUND,
    MODERN_VERSION,
    PARSE_ERROR,
    SUPPORTED_VERSIONS,
    UNSUPPORTED_PROTOCOL_VERSION,
    McpProtocol,
)
from .sessions import SessionStore

ENDPOINT_PATH = "/mcp"
SESSION_HEADER = "Mcp-Session-Id"
VERSION_HEADER = "MCP-Protocol-Version"
METHOD_HEADER = "Mcp-Method"
NAME_HEADER = "Mcp-Name"

# Every other path, OAuth discovery and registration included. An MCP client whose OAuth support
# reacts to our 401 ends its discovery here, so this text is what its user reads.
NOT_FOUND = (
    f"not found: this is the blender-bridge MCP endpoint at {ENDPOINT_PATH}. It has no OAuth: it takes the "
    "bearer token from Blender's runtime file. After a 401 that token is stale or wrong: restart the bridge "
    "in Blender, then try again."
)

# JSON-RPC error code -> HTTP status on the stateless era (the SDK's own table).
_MODERN_STATUS = {
    PARSE_ERROR: 400,
    INVALID_REQUEST: 400,
    INVALID_PARAMS: 400,
    HEADER_MISMATCH: 400,
    UNSUPPORTED_PROTOCOL_VERSION: 400,
    METHOD_NOT_FOUND: 404,
}


class McpHttpApp:
    """Callable HTTP app for `POST /mcp`; thread-safe, one instance per listener."""

    def __init__(
        self,
        protocol: McpProtocol,
        token: Token,
        port: Callable[[], int],
        sessions: SessionStore,
        *,
        on_internal_error: Callable[[BaseException], None] = lambda exc: None,
    ) -> None:
        self._protocol = protocol
        self._token = token
        self._port = port
        self._sessions = sessions
        self._on_internal_error = on_internal_error
        self._lock = threading.Lock()
        self._in_flight: dict[tuple[str, str | int], threading.Event] = {}
        """Each 2025 session's running requests by id, for `notifications/cancelled`."""

    def gate(self, request: Request) -> HttpError | None:
        """Path, Host, Origin and token, decided from the headers alone (before any body is read)."""
        if request.path != ENDPOINT_PATH:
            return HttpError(404, NOT_FOUND)
        if not host_allowed(request.header("host"), self._port()):
            return HttpError(403, "forbidden: the Host header must name this bridge on loopback")
        if not origin_allowed(request.header("origin")):
            return HttpError(403, "forbidden: requests from a non-loopback Origin are refused")
        if not bearer_matches(request.header("authorization"), self._token):
            # No resource_metadata: this is not an OAuth server, only a wrong or stale token.
            challenge = 'Bearer realm="blender-bridge", error="invalid_token"'
            return HttpError(
                401,
                "unauthorized: send 'Authorization: Bearer <token>' with the token from Blender's runtime file",
                headers=[("WWW-Authenticate", challenge)],
            )
        return None

    def __call__(self, request: Request) -> Response:
        """A request that passed `gate` (the transport calls it before reading the body)."""
        if request.method == "DELETE":
            return self._end_session(request)
        if request.method != "POST":
            return Response.text(405, "method not allowed: POST JSON-RPC messages", headers=[("Allow", "POST, DELETE")])
        content_type = (request.header("content-type") or "").split(";")[0].strip().lower()
        if content_type != "application/json":
            return Response.text(415, "unsupported media type: send Content-Type: application/json")
        try:
            return self._message(request)
        except Exception as exc:
            self._on_internal_error(exc)
            return _rpc_error(None, RpcError(INTERNAL_ERROR, f"internal error: {type(exc).__name__}"), 500)

    def _end_session(self, request: Request) -> Response:
        session_id = request.header(SESSION_HEADER)
        if not session_id:
            return Response.text(400, f"DELETE needs the {SESSION_HEADER} header")
        if not self._sessions.end(session_id):
            return Response.text(404, "no such session")
        return Response(204)

    def _message(self, request: Request) -> Response:
        try:
            message = json.loads(request.body)
        except (UnicodeDecodeError, ValueError) as exc:
            return _rpc_error(None, RpcError(PARSE_ERROR, f"Parse error: {exc}"), 400)
        except RecursionError:
            return _rpc_error(None, RpcError(PARSE_ERROR, "Parse error: JSON nested too deeply"), 400)
        if isinstance(message, list):
            return _rpc_error(None, RpcError(INVALID_REQUEST, "JSON-RPC batches are not supported"), 400)
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            return _rpc_error(None, RpcError(INVALID_REQUEST, "expected one JSON-RPC 2.0 object"), 400)
        if "method" not in message:
            return Response(202)  # a client's response to us; we never ask, so nothing to match
        if "id" not in message:
            if message["method"] == "notifications/cancelled":
                self._cancel(request, message.get("params"))
            return Response(202)  # notifications (e.g. notifications/initialized) need no answer
        request_id = message["id"]
        if isinstance(request_id, bool) or not isinstance(request_id, (str, int)):
            return _rpc_error(None, RpcError(INVALID_REQUEST, "'id' must be a string or an integer"), 400)
        method, params = message["method"], message.get("params", {})
        if not isinstance(method, str):
            return _rpc_error(request_id, RpcError(INVALID_REQUEST, "'method' must be a string"), 400)
        if params is None:
            params = {}
        if not isinstance(params, dict):
            return _rpc_error(request_id, RpcError(INVALID_PARAMS, "'params' must be an object"), 400)
        if _is_modern(request, params, method):
            return self._modern(request, request_id, method, params)
        if method == "initialize":
            return self._initialize(request_id, params)
        return self._legacy(request, request_id, method, params)

    def _initialize(self, request_id: str | int, params: dict[str, Any]) -> Response:
        result, version = self._protocol.initialize(params)
        session_id = self._sessions.create(version)
        return _rpc_result(request_id, result, [(SESSION_HEADER, session_id)])

    def _modern(self, request: Request, request_id: str | int, method: str, params: dict[str, Any]) -> Response:
        """2026-07-28: every request carries its envelope, mirrored in headers, checked in the spec's order."""
        try:
            _check_envelope(request, method, params)
            if method in REMOVED_IN_MODERN:
                raise RpcError(METHOD_NOT_FOUND, f"Method not found: {method} (removed in {MODERN_VERSION})")
        except RpcError as error:
            return _rpc_error(request_id, error, _MODERN_STATUS.get(error.code, 200))
        return self._answer(request, request_id, method, params, None)

    def _legacy(self, request: Request, request_id: str | int, method: str, params: dict[str, Any]) -> Response:
        header_version = request.header(VERSION_HEADER)
        if header_version is not None and header_version not in HANDSHAKE_VERSIONS:
            error = RpcError(INVALID_REQUEST, f"unsupported {VERSION_HEADER} {header_version!r}")
            return _rpc_error(request_id, error, 400)
        session_id = request.header(SESSION_HEADER)
        if not session_id:
            error = RpcError(
                INVALID_REQUEST, f"missing {SESSION_HEADER}: send initialize first, or use _meta (2026-07-28)"
            )
            return _rpc_error(request_id, error, 400)
        if self._sessions.touch(session_id) is None:
            return _rpc_error(
                request_id, RpcError(INVALID_REQUEST, "session expired or unknown; initialize again"), 404
            )
        return self._answer(request, request_id, method, params, session_id)

    def _answer(
        self, request: Request, request_id: str | int, method: str, params: dict[str, Any], session_id: str | None
    ) -> Response:
        """Run the method for a client still there (and, in a 2025 session, not cancelled), as one JSON body,
        or as an event stream that carries its progress first."""
        modern = session_id is None
        cancelled = threading.Event()
        key = (session_id, request_id) if session_id is not None else None
        try:
            stream = _stream_for(request, method, params)

            def wanted() -> bool:
                return not cancelled.is_set() and request.connected()

            caller = Caller(wanted, stream.tend, stream.progress) if stream else Caller(wanted)
            if key is not None:
                with self._lock:
                    self._in_flight[key] = cancelled
            try:
                result = self._protocol.dispatch(method, params, modern=modern, caller=caller)
            finally:
                if key is not None:
                    with self._lock:
                        self._in_flight.pop(key, None)
        except RpcError as error:
            return _rpc_error(request_id, error, _MODERN_STATUS.get(error.code, 200) if modern else 200)
        if stream is None:
            return _rpc_result(request_id, result)
        return Response(200, stream.finish({"jsonrpc": "2.0", "id": request_id, "result": result}), streamed=True)

    def _cancel(self, request: Request, params: Any) -> None:
        """A 2025 client's `notifications/cancelled`: its running request in its session is stopped, if any."""
        session_id = request.header(SESSION_HEADER)
        if not isinstance(params, dict) or not session_id or self._sessions.touch(session_id) is None:
            return  # nothing it may name: a cancel is never an error (the request may have just ended)
        request_id = params.get("requestId")
        if isinstance(request_id, bool) or not isinstance(request_id, (str, int)):
            return
        with self._lock:
            cancelled = self._in_flight.get((session_id, request_id))
        if cancelled is not None:
            cancelled.set()


REMOVED_IN_MODERN = frozenset({"initialize", "ping"})
NAME_BEARING = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}
"""Methods whose named parameter a client mirrors in the Mcp-Name header."""


def _stream_for(request: Request, method: str, params: dict[str, Any]) -> EventStream | None:
    """The event stream a tool call asked for with `_meta.progressToken`, if its client reads event streams."""
    meta = params.get("_meta")
    token = meta.get("progressToken") if isinstance(meta, dict) else None
    if token is None or method != "tools/call":
        return None
    if isinstance(token, bool) or not isinstance(token, (str, int)):
        raise RpcError(INVALID_PARAMS, "params._meta.progressToken must be a string or an integer")
    if "text/event-stream" not in (request.header("accept") or "").lower() or request.version != "HTTP/1.1":
        return None  # it cannot read one (HTTP/1.0 has no chunks): the answer stays one JSON body, without progress
    return EventStream(token, time.monotonic(), request.send)


def _is_modern(request: Request, params: dict[str, Any], method: str) -> bool:
    """A 2026-07-28 request: its header says so, or it carries the per-request envelope, or it is discovery."""
    header = request.header(VERSION_HEADER)
    if header is not None and header not in HANDSHAKE_VERSIONS:
        return True
    meta = params.get("_meta")
    return (isinstance(meta, dict) and META_PROTOCOL_VERSION in meta) or method == "server/discover"


def _check_envelope(request: Request, method: str, params: dict[str, Any]) -> None:
    """The envelope, then headers against the body, then the version: the first failure is the answer."""
    meta = params.get("_meta")
    if not isinstance(meta, dict):
        raise RpcError(
            INVALID_PARAMS, f"params._meta must carry {META_PROTOCOL_VERSION!r} and {META_CLIENT_CAPABILITIES!r}"
        )
    missing = [key for key in (META_PROTOCOL_VERSION, META_CLIENT_CAPABILITIES) if key not in meta]
    if missing:
        raise RpcError(INVALID_PARAMS, f"params._meta is missing {', '.join(missing)}")
    version = meta[META_PROTOCOL_VERSION]
    if request.header(VERSION_HEADER) != version:
        raise RpcError(HEADER_MISMATCH, f"the {VERSION_HEADER} header must equal params._meta's protocol version")
    if request.header(METHOD_HEADER) != method:
        raise RpcError(HEADER_MISMATCH, f"the {METHOD_HEADER} header must equal the request's method")
    name_key = NAME_BEARING.get(method)
    if name_key is not None and params.get(name_key) is not None:
        if _header_value(request.header(NAME_HEADER)) != params[name_key]:
            raise RpcError(HEADER_MISMATCH, f"the {NAME_HEADER} header must equal params.{name_key}")
    if not isinstance(version, str):
        raise RpcError(INVALID_PARAMS, "params._meta's protocol version must be a string")
    if version != MODERN_VERSION:
        raise RpcError(
            UNSUPPORTED_PROTOCOL_VERSION,
            f"unsupported protocol version {version!r}",
            {"supported": list(SUPPORTED_VERSIONS), "requested": version},
        )


_ENCODED = re.compile(r"=\?base64\?(?P<payload>.*)\?=")


def _header_value(raw: str | None) -> str | None:
    """A header value as the client meant it: non-ASCII values travel as =?base64?…?=."""
    if raw is None or (found := _ENCODED.fullmatch(raw)) is None:
        return raw
    try:
        return base64.b64decode(found["payload"], validate=True).decode("utf-8")
    except (ValueError, UnicodeDecodeError):
        return None


def _rpc_result(
    request_id: str | int, result: dict[str, Any], headers: list[tuple[str, str]] | None = None
) -> Response:
    return _json(200, {"jsonrpc": "2.0", "id": request_id, "result": result}, headers)


def _rpc_error(request_id: str | int | None, error: RpcError, status: int) -> Response:
    return _json(status, {"jsonrpc": "2.0", "id": request_id, "error": error.as_error()})


def _json(status: int, payload: dict[str, Any], headers: list[tuple[str, str]] | None = None) -> Response:
    body = encode(payload)
    return Response(status, body, [("Content-Type", "application/json"), *(headers or [])])
