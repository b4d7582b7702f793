"""Calls the bridge with the official `mcp` client, finding it ONLY through the runtime file.

Every connection re-reads the file (the port and token may have changed since the last one);
a missing file, a malformed endpoint or a dead pid raises LiveEndpointUnavailable and no
configured URL is ever tried instead.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Literal

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from .contract.host import HostFacts
from .contract.liveness import LiveEndpoint, RuntimeFileSpec, read_live_endpoint, require_own_blender
from .contract.redact import REDACTOR
from .errors import ToolCallFailed

Mode = Literal["auto", "legacy", "2026-07-28"]


@dataclass(frozen=True)
class ToolResult:
    is_error: bool
    structured: dict[str, Any] | None
    text: str
    """The text content joined; for JSON tools, the same data as `structured`."""

    def data(self) -> Any:
        """The structured result, else the text parsed as JSON, else the text."""
        if self.structured is not None:
            return self.structured
        try:
            return json.loads(self.text)
        except ValueError:
            return self.text


class BridgeClient:
    def __init__(
        self,
        spec: RuntimeFileSpec = RuntimeFileSpec(),
        host: HostFacts | None = None,
        *,
        mode: Mode = "auto",
        timeout: float = 150.0,
    ) -> None:
        self._spec = spec
        self._host = host
        self._mode = mode
        self._timeout = timeout

    def endpoint(self) -> LiveEndpoint:
        return read_live_endpoint(self._spec, self._host)

    @asynccontextmanager
    async def session(self) -> AsyncIterator[Client]:
        """One MCP connection to the endpoint the runtime file names right now, and only if the process it names is
        this user's Blender owning that port: a stale file's port may belong to anyone now, who must never get the
        token nor have its answers passed on."""
        endpoint = self.endpoint()
        require_own_blender(endpoint)
        statuses: list[int] = []

        async def record(response: httpx2.Response) -> None:
            statuses.append(response.status_code)

        hooks = {"response": [record]}
        async with httpx2.AsyncClient(headers=endpoint.headers(), timeout=self._timeout, event_hooks=hooks) as http:
            transport = streamable_http_client(endpoint.url, http_client=http)
            try:
                async with Client(transport, mode=self._mode, read_timeout_seconds=self._timeout) as client:
                    yield client
            except Exception as exc:
                failure = _explain(exc, statuses, endpoint)
                if failure is None:
                    raise
                raise failure from None

    async def list_tools(self) -> list[dict[str, Any]]:
        async with self.session() as client:
            result = await client.list_tools()
        return [tool.model_dump(by_alias=True, exclude_none=True, mode="json") for tool in result.tools]

    async def call_tool(self, name: str, arguments: dict[str, Any] | None = None) -> ToolResult:
        async with self.session() as client:
            result = await client.call_tool(name, arguments or {})
        text = "\n".join(getattr(block, "text", "") for block in result.content if getattr(block, "type", "") == "text")
        return ToolResult(bool(result.is_error), result.structured_content, text)


def _explain(exc: BaseException, statuses: list[int], endpoint: LiveEndpoint) -> ToolCallFailed | None:
    """One readable failure for the SDK's nested errors, or None when the error is not the connection's."""
    leaves = _leaves(exc)
    if not all(isinstance(leaf, (MCPError, httpx2.HTTPError, OSError)) for leaf in leaves):
        return None
    refused = [status for status in statuses if status in (401, 403)]
    if refused and refused[-1] == 401:
        return token_refused(endpoint)
    if refused:
        return ToolCallFailed(f"Blender at {endpoint.url} refused this client's Host or Origin (HTTP 403)")
    detail = "; ".join(f"{type(leaf).__name__}: {leaf}" for leaf in leaves)
    return ToolCallFailed(REDACTOR.redact(f"the MCP exchange with Blender at {endpoint.url} failed: {detail}"))


def token_refused(endpoint: LiveEndpoint) -> ToolCallFailed:
    """A 401 from the endpoint the runtime file names: that file's token is not the bridge's."""
    return ToolCallFailed(
        f"Blender at {endpoint.url} refused the token from {endpoint.runtime_file} (HTTP 401): the file is "
        "stale or was written by another program; restart the bridge in Blender, then try again"
    )


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


MODERN_VERSION = "2026-07-28"


def modern_request(method: str, params: dict[str, Any], request_id: int = 1) -> tuple[bytes, dict[str, str]]:
    """One 2026-07-28 JSON-RPC request without the SDK: the body with its `_meta` envelope, and the headers
    that mirror it (the bridge rejects a request whose headers and body disagree). For raw callers: scripts,
    benchmarks, clients in other languages reading this as an example."""
    meta = {"io.modelcontextprotocol/protocolVersion": MODERN_VERSION, "io.modelcontextprotocol/clientCapabilities": {}}
    body = {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": method,
        "params": {**params, "_meta": {**params.get("_meta", {}), **meta}},
    }
    headers = {"Content-Type": "application/json", "MCP-Protocol-Version": MODERN_VERSION, "Mcp-Method": method}
    if method == "tools/call" and isinstance(params.get("name"), str):
        headers["Mcp-Name"] = params["name"]  # an ASCII tool name; others travel as =?base64?…?=
    return json.dumps(body).encode(), headers
