"""The MCP endpoint's HTTP face: guards first, then one JSON-RPC message per POST.

Order matters: the DNS-rebinding guard (Host, Origin) and the bearer check run before the
body is even parsed, so nothing unauthenticated reaches the protocol or Blender.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from ..errors import RpcError
from ..jsontext import encode
from . import versions
from .auth import Token, bearer_matches
from .caller import Caller, ClientInput
from .eras import SESSION_HEADER, Era, Handshake, Refused, Stateless
from .event_stream import EventStream
from .http import HttpError, Request, Response
from .mcp import INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST, PARSE_ERROR, McpProtocol
from .rebinding import host_allowed, origin_allowed
from .sessions import SessionStore
from .subscriptions import Updates, resource_filter
from .versions import ENDPOINT_PATH, METHOD_HEADER

LISTEN = "subscriptions/listen"


# Every other path, OAuth discovery and registration included. An MCP client whose OAuth support
# reacts to our 401 ends its discovery here, so this text is what its user reads.
NOT_FOUND = (
    f"not found: this is the blender-bridge MCP endpoint at {ENDPOINT_PATH}. It has no OAuth: it takes the "
    "bearer token from Blender's runtime file. After a 401 that token is stale or wrong: restart the bridge "
    "in Blender, then try again."
)


class McpHttpApp:
    """Callable HTTP app for `POST /mcp`; thread-safe, one instance per listener."""

    def __init__(
        self,
        protocol: McpProtocol,
        token: Token,
        port: Callable[[], int],
        sessions: SessionStore,
        updates: Updates,
        *,
        on_internal_error: Callable[[BaseException], None] = lambda exc: None,
    ) -> None:
        self._protocol = protocol
        self._updates = updates
        self._token = token
        self._port = port
        self._stateless = Stateless()
        self._handshake = Handshake(sessions)
        self._on_internal_error = on_internal_error

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

    @staticmethod
    def lasting(request: Request) -> bool:
        """A `subscriptions/listen`, by the header 2026-07-28 requires to mirror the method (one that does not is
        refused before it is served, so a lie only costs its own thread a refusal)."""
        return request.header(METHOD_HEADER) == LISTEN

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
        if not self._handshake.sessions.end(session_id):
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
                self._handshake.cancel(request, message.get("params"))
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
        if Stateless.claims(request, method, params):
            return self._answer(self._stateless, request, request_id, method, params)
        if method == "initialize":
            result, session = self._handshake.open(self._protocol, params)
            return _rpc_result(request_id, result, [(SESSION_HEADER, session)])
        return self._answer(self._handshake, request, request_id, method, params)

    def _answer(
        self, era: Era, request: Request, request_id: str | int, method: str, params: dict[str, Any]
    ) -> Response:
        """Run the method in its era for a client still there (and not cancelled), as one JSON body, or as an event
        stream that carries its progress first."""
        try:
            session = era.admit(request, method, params)
        except Refused as refused:
            return _rpc_error(request_id, refused.error, refused.status)
        if method == LISTEN and isinstance(era, Stateless):
            return self._listen(request, request_id, params)
        try:
            stream = _stream_for(request, method, params)
            with era.running(session, request_id) as cancelled:

                def wanted() -> bool:
                    return not cancelled.is_set() and request.connected()

                conversation = f"session:{session}" if session else _conversation_named(params)
                asks = _client_input(era, method, params)
                caller = (
                    Caller(wanted, stream.tend, stream.progress, conversation, asks)
                    if stream
                    else Caller(wanted, conversation=conversation, client_input=asks)
                )
                result = era.dispatch(self._protocol, method, params, caller)
        except RpcError as error:
            return _rpc_error(request_id, error, era.http_status(error))
        if stream is None:
            return _rpc_result(request_id, result)
        return Response(200, stream.finish({"jsonrpc": "2.0", "id": request_id, "result": result}), streamed=True)

    def _listen(self, request: Request, request_id: str | int, params: dict[str, Any]) -> Response:
        """An event stream of the named resources' updates, for as long as its client listens."""
        if "text/event-stream" not in (request.header("accept") or "").lower() or request.version != "HTTP/1.1":
            error = RpcError(INVALID_REQUEST, f"{LISTEN} answers as an event stream: send Accept: text/event-stream")
            return _rpc_error(request_id, error, 406)
        try:
            uris = resource_filter(params)
            self._updates.listen(request_id, uris, request.send, lambda: request.connected() and not request.ended())
        except RpcError as error:
            return _rpc_error(request_id, error, self._stateless.http_status(error))
        return Response(200, b"", streamed=True, close=True)


def _conversation_named(params: dict[str, Any]) -> str | None:
    """The conversation a stateless request names (`versions.META_CONVERSATION`): short text, or none."""
    meta = params.get("_meta")
    named = meta.get(versions.META_CONVERSATION) if isinstance(meta, dict) else None
    return f"named:{named}" if isinstance(named, str) and 0 < len(named) <= 64 else None


def _client_input(era: Era, method: str, params: dict[str, Any]) -> ClientInput | None:
    """A 2026-07-28 tool call's client that declares elicitation: it can ask its user and call again."""
    if not isinstance(era, Stateless) or method != "tools/call":
        return None
    meta = params.get("_meta")
    declared = meta.get(versions.META_CLIENT_CAPABILITIES) if isinstance(meta, dict) else None
    if not isinstance(declared, dict) or not isinstance(declared.get("elicitation"), dict):
        return None
    return ClientInput(params.get("inputResponses"), params.get("requestState"))


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


def _rpc_result(
    request_id: str | int, result: dict[str, Any], headers: list[tuple[str, str]] | None = None
) -> Response:
    return _json(200, {"jsonrpc": "2.0", "id": request_id, "result": result}, headers)


def _rpc_error(request_id: str | int | None, error: RpcError, status: int) -> Response:
    return _json(status, {"jsonrpc": "2.0", "id": request_id, "error": error.as_error()})


def _json(status: int, payload: dict[str, Any], headers: list[tuple[str, str]] | None = None) -> Response:
    body = encode(payload)
    return Response(status, body, [("Content-Type", "application/json"), *(headers or [])])
