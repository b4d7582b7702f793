"""The two protocol eras one endpoint serves, each in one place, chosen once per request.

- `Stateless` (2026-07-28): every request carries its envelope (`_meta`: version, client
  capabilities) mirrored in headers, checked in the spec's order; results say `resultType`, and
  cacheable ones that no shared cache may keep them (they depend on the bearer token's Blender).
- `Handshake` (2025): `initialize` opens a session; every later request names it; a client's
  `notifications/cancelled` stops its own session's running request, and no one else's.

An era says which methods it answers (a table: a new method is one entry, in the era that has it),
admits a request or refuses it with a JSON-RPC error, shapes the result, and maps an error to its
HTTP status. What a method does is `McpProtocol`'s, whatever the era.
"""

from __future__ import annotations

import abc
import base64
import re
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from ..errors import RpcError
from . import versions
from .caller import Caller
from .http import Request
from .mcp import (
    HEADER_MISMATCH,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    MISSING_CLIENT_CAPABILITY,
    PARSE_ERROR,
    TASKS_EXTENSION,
    UNSUPPORTED_PROTOCOL_VERSION,
    McpProtocol,
)
from .sessions import SessionStore

SESSION_HEADER = "Mcp-Session-Id"

Method = Callable[[McpProtocol, dict[str, Any], Caller], dict[str, Any]]
"""One MCP method: its params and caller in, its result out."""

COMMON: Mapping[str, Method] = {
    "tools/list": lambda protocol, params, caller: protocol.list_tools(),
    "tools/call": lambda protocol, params, caller: protocol.call_tool(params, caller),
    "resources/list": lambda protocol, params, caller: protocol.list_resources(),
    "resources/templates/list": lambda protocol, params, caller: protocol.list_resource_templates(),
    "resources/read": lambda protocol, params, caller: protocol.read_resource(params, caller),
    "prompts/list": lambda protocol, params, caller: protocol.list_prompts(),
    "prompts/get": lambda protocol, params, caller: protocol.get_prompt(params),
}
CACHEABLE = frozenset(
    {"server/discover", "tools/list", "resources/list", "resources/templates/list", "resources/read", "prompts/list"}
)


class Era(abc.ABC):
    """One era's rules for a request that passed the transport's guards and parsed as JSON-RPC."""

    methods: Mapping[str, Method]

    def dispatch(self, protocol: McpProtocol, method: str, params: dict[str, Any], caller: Caller) -> dict[str, Any]:
        answer = self.methods.get(method)
        if answer is None:
            raise RpcError(METHOD_NOT_FOUND, f"Method not found: {method}{self._why_not(method)}")
        return self.finish(answer(protocol, params, caller), method)

    def _why_not(self, method: str) -> str:
        return ""

    @abc.abstractmethod
    def admit(self, request: Request, method: str, params: dict[str, Any]) -> str | None:
        """The session the request runs in (None: none); `Refused` when this era will not run it."""

    def finish(self, result: dict[str, Any], method: str) -> dict[str, Any]:
        return result

    def http_status(self, error: RpcError) -> int:
        """The HTTP status of an answer that carries a method's JSON-RPC error."""
        return 200

    @contextmanager
    def running(self, session: str | None, request_id: str | int) -> Iterator[threading.Event]:
        """While a request runs: the event that cancels it (set by its client's cancel, in an era that has one)."""
        yield threading.Event()


class Stateless(Era):
    """2026-07-28: no session, no handshake; the envelope in every request."""

    version = versions.STATELESS
    methods: Mapping[str, Method] = {
        **COMMON,
        "server/discover": lambda protocol, params, caller: protocol.discover(),
        "tools/call": lambda protocol, params, caller: protocol.call_tool(
            params, caller, takes_tasks=_takes_tasks(params)
        ),
        "tasks/get": lambda protocol, params, caller: protocol.get_task(_declaring(params), caller),
        "tasks/update": lambda protocol, params, caller: protocol.update_task(_declaring(params), caller),
        "tasks/cancel": lambda protocol, params, caller: protocol.cancel_task(_declaring(params), caller),
    }
    REMOVED = frozenset({"initialize", "ping"})
    _STATUS = {
        PARSE_ERROR: 400,
        INVALID_REQUEST: 400,
        INVALID_PARAMS: 400,
        HEADER_MISMATCH: 400,
        MISSING_CLIENT_CAPABILITY: 400,
        UNSUPPORTED_PROTOCOL_VERSION: 400,
        METHOD_NOT_FOUND: 404,
    }
    """JSON-RPC error code -> HTTP status (the SDK's own table)."""
    NAME_BEARING = versions.NAME_BEARING

    @staticmethod
    def claims(request: Request, method: str, params: dict[str, Any]) -> bool:
        """A request of this era: its header names a version that is not the handshake's, or it carries the
        per-request envelope, or it is discovery."""
        header = request.header(versions.VERSION_HEADER)
        if header is not None and header not in versions.HANDSHAKE:
            return True
        meta = params.get("_meta")
        return (isinstance(meta, dict) and versions.META_PROTOCOL_VERSION in meta) or method == "server/discover"

    def admit(self, request: Request, method: str, params: dict[str, Any]) -> str | None:
        try:
            self._check_envelope(request, method, params)
            if method in self.REMOVED:
                raise RpcError(METHOD_NOT_FOUND, f"Method not found: {method}{self._why_not(method)}")
        except RpcError as error:
            raise Refused(error, self.http_status(error)) from None
        return None

    def _check_envelope(self, request: Request, method: str, params: dict[str, Any]) -> None:
        """The envelope, then headers against the body, then the version: the first failure is the answer."""
        meta = params.get("_meta")
        wanted = (versions.META_PROTOCOL_VERSION, versions.META_CLIENT_CAPABILITIES)
        if not isinstance(meta, dict):
            raise RpcError(INVALID_PARAMS, f"params._meta must carry {wanted[0]!r} and {wanted[1]!r}")
        missing = [key for key in wanted if key not in meta]
        if missing:
            raise RpcError(INVALID_PARAMS, f"params._meta is missing {', '.join(missing)}")
        version = meta[versions.META_PROTOCOL_VERSION]
        if request.header(versions.VERSION_HEADER) != version:
            raise RpcError(
                HEADER_MISMATCH, f"the {versions.VERSION_HEADER} header must equal params._meta's protocol version"
            )
        if request.header(versions.METHOD_HEADER) != method:
            raise RpcError(HEADER_MISMATCH, f"the {versions.METHOD_HEADER} header must equal the request's method")
        name_key = self.NAME_BEARING.get(method)
        if name_key is not None and params.get(name_key) is not None:
            if _header_value(request.header(versions.NAME_HEADER)) != params[name_key]:
                raise RpcError(HEADER_MISMATCH, f"the {versions.NAME_HEADER} header must equal params.{name_key}")
        if not isinstance(version, str):
            raise RpcError(INVALID_PARAMS, "params._meta's protocol version must be a string")
        if version != self.version:
            raise RpcError(
                UNSUPPORTED_PROTOCOL_VERSION,
                f"unsupported protocol version {version!r}",
                {"supported": list(versions.SUPPORTED), "requested": version},
            )

    def _why_not(self, method: str) -> str:
        return f" (removed in {self.version})" if method in self.REMOVED else ""

    def finish(self, result: dict[str, Any], method: str) -> dict[str, Any]:
        result.setdefault("resultType", "complete")  # a task handle says "task"
        if method in CACHEABLE:  # results depend on the bearer token's Blender, so no shared caches
            result["cacheScope"] = "private"
            result["ttlMs"] = 0
        return result

    def http_status(self, error: RpcError) -> int:
        return self._STATUS.get(error.code, 200)


def _takes_tasks(params: dict[str, Any]) -> bool:
    """Whether this request's client declares the tasks extension (asked per request: never assumed)."""
    capabilities = params.get("_meta", {}).get(versions.META_CLIENT_CAPABILITIES)
    extensions = capabilities.get("extensions") if isinstance(capabilities, dict) else None
    return isinstance(extensions, dict) and isinstance(extensions.get(TASKS_EXTENSION), dict)


def _declaring(params: dict[str, Any]) -> dict[str, Any]:
    """The params of a tasks method, whose client must declare the extension (-32021 otherwise, SEP-2663)."""
    if not _takes_tasks(params):
        required = {"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}}
        raise RpcError(MISSING_CLIENT_CAPABILITY, f"Missing required client capability: {TASKS_EXTENSION}", required)
    return params


class Handshake(Era):
    """2025: `initialize` opens a session; later requests name it; a cancel reaches its own session's request."""

    methods: Mapping[str, Method] = {**COMMON, "ping": lambda protocol, params, caller: {}}

    def __init__(self, sessions: SessionStore) -> None:
        self.sessions = sessions
        self._lock = threading.Lock()
        self._running: dict[tuple[str, str | int], threading.Event] = {}
        """Each session's running requests by id, for `notifications/cancelled`."""

    def admit(self, request: Request, method: str, params: dict[str, Any]) -> str | None:
        session = request.header(SESSION_HEADER)
        if not session:
            missing = f"missing {SESSION_HEADER}: send initialize first, or use _meta ({versions.STATELESS})"
            raise Refused(RpcError(INVALID_REQUEST, missing), 400)
        if self.sessions.touch(session) is None:
            raise Refused(RpcError(INVALID_REQUEST, "session expired or unknown; initialize again"), 404)
        return session

    def open(self, protocol: McpProtocol, params: dict[str, Any]) -> tuple[dict[str, Any], str]:
        """`initialize`: the handshake's answer and the new session's id."""
        requested = params.get("protocolVersion")
        version = requested if requested in versions.HANDSHAKE else versions.HANDSHAKE[-1]
        return protocol.initialize(version), self.sessions.create(version)

    @contextmanager
    def running(self, session: str | None, request_id: str | int) -> Iterator[threading.Event]:
        cancelled = threading.Event()
        if session is None:
            yield cancelled
            return
        key = (session, request_id)
        with self._lock:
            self._running[key] = cancelled
        try:
            yield cancelled
        finally:
            with self._lock:
                if self._running.get(key) is cancelled:
                    del self._running[key]

    def cancel(self, request: Request, params: Any) -> None:
        """A client's `notifications/cancelled`: its running request in its session is stopped, if any."""
        session = request.header(SESSION_HEADER)
        if not isinstance(params, dict) or not session or self.sessions.touch(session) is None:
            return  # nothing it may name: a cancel is never an error (the request may have just ended)
        request_id = params.get("requestId")
        if isinstance(request_id, bool) or not isinstance(request_id, (str, int)):
            return
        with self._lock:
            cancelled = self._running.get((session, request_id))
        if cancelled is not None:
            cancelled.set()


class Refused(Exception):
    """A request its era will not run: the JSON-RPC error and the HTTP status it goes out with."""

    def __init__(self, error: RpcError, status: int) -> None:
        super().__init__(error.message)
        self.error = error
        self.status = status


_ENCODED = re.compile(r"=\?base64\?(?P<payload>.*)\?=")


def _header_value(raw: str | None) -> str | None:
    """A header value as the client meant it: non-ASCII values travel as =?base64?…?=."""
    if raw is None or (found := _ENCODED.fullmatch(raw)) is None:
        return raw
    try:
        return base64.b64decode(found["payload"], validate=True).decode("utf-8")
    except (ValueError, UnicodeDecodeError):
        return None
