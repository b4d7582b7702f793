"""MCP methods over JSON-RPC, independent of the transport.

Two eras share one endpoint: the 2026-07-28 stateless protocol (every request carries its
version and client capabilities in `_meta`; `server/discover`) and the 2025 handshake
(`initialize`, then a session). The era only changes the envelope, not the tools.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from ..errors import RpcError, UnknownTool
from ..jsontext import RawJson, dumps
from .caller import ANYONE, Caller

MODERN_VERSION = "2026-07-28"
HANDSHAKE_VERSIONS = ("2025-03-26", "2025-06-18", "2025-11-25")
SUPPORTED_VERSIONS = (MODERN_VERSION, *reversed(HANDSHAKE_VERSIONS))
META_PROTOCOL_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CLIENT_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
HEADER_MISMATCH = -32020
UNSUPPORTED_PROTOCOL_VERSION = -32022


@dataclass(frozen=True)
class ToolOutcome:
    """What one tool call produced, already in MCP terms."""

    content: list[dict[str, Any]]
    structured: RawJson | None = None
    """The data as JSON text, sent as structuredContent without a second encoding."""
    is_error: bool = False

    @classmethod
    def json(cls, data: dict[str, Any]) -> ToolOutcome:
        text = dumps(data)
        return cls([{"type": "text", "text": text}], structured=RawJson(text))

    @classmethod
    def error(cls, message: str, **details: Any) -> ToolOutcome:
        payload = {"error": message, **{k: v for k, v in details.items() if v is not None}}
        return cls([{"type": "text", "text": dumps(payload)}], is_error=True)

    def as_result(self) -> dict[str, Any]:
        result: dict[str, Any] = {"content": self.content, "isError": self.is_error}
        if self.structured is not None:
            result["structuredContent"] = self.structured
        return result


class ToolHost(Protocol):
    """What the protocol needs from the Blender side; implemented above this layer."""

    def list_tools(self) -> list[dict[str, Any]]: ...

    def call_tool(self, name: str, arguments: dict[str, Any], caller: Caller) -> ToolOutcome:
        """Run a tool for `caller` and report its outcome; raises UnknownTool for a name not offered."""
        ...


@dataclass(frozen=True)
class ServerInfo:
    name: str
    version: str
    instructions: str


class McpProtocol:
    """Routes one JSON-RPC request to its method and shapes the result for the era."""

    def __init__(self, tools: ToolHost, info: ServerInfo) -> None:
        self._tools = tools
        self._info = info

    def initialize(self, params: dict[str, Any]) -> tuple[dict[str, Any], str]:
        """The handshake answer and the negotiated version (ours if we do not speak theirs)."""
        requested = params.get("protocolVersion")
        version = requested if requested in HANDSHAKE_VERSIONS else HANDSHAKE_VERSIONS[-1]
        result = {
            "protocolVersion": version,
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": {"name": self._info.name, "version": self._info.version},
            "instructions": self._info.instructions,
        }
        return result, version

    def dispatch(self, method: str, params: dict[str, Any], *, modern: bool, caller: Caller = ANYONE) -> dict[str, Any]:
        if method == "ping":
            return self._finish({}, modern, cached=False)
        if method == "server/discover":
            return self._finish(self._discover(), True, cached=True)
        if method == "tools/list":
            return self._finish({"tools": self._tools.list_tools()}, modern, cached=True)
        if method == "tools/call":
            return self._finish(self._call(params, caller), modern, cached=False)
        if method == "initialize":
            raise RpcError(INVALID_REQUEST, "initialize belongs to the 2025 handshake; do not mix it with _meta")
        raise RpcError(METHOD_NOT_FOUND, f"Method not found: {method}")

    def _discover(self) -> dict[str, Any]:
        return {
            "supportedVersions": list(SUPPORTED_VERSIONS),
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": {"name": self._info.name, "version": self._info.version},
            "instructions": self._info.instructions,
        }

    def _call(self, params: dict[str, Any], caller: Caller) -> dict[str, Any]:
        name = params.get("name")
        arguments = params.get("arguments", {})
        if not isinstance(name, str) or not name:
            raise RpcError(INVALID_PARAMS, "tools/call needs a string 'name'")
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise RpcError(INVALID_PARAMS, "tools/call 'arguments' must be an object")
        try:
            outcome = self._tools.call_tool(name, arguments, caller)
        except UnknownTool as exc:
            raise RpcError(INVALID_PARAMS, str(exc)) from None
        return outcome.as_result()

    @staticmethod
    def _finish(result: dict[str, Any], modern: bool, *, cached: bool) -> dict[str, Any]:
        if modern:
            result["resultType"] = "complete"
            if cached:
                # Results depend on the bearer token's Blender, so no shared caches.
                result["cacheScope"] = "private"
                result["ttlMs"] = 0
        return result
