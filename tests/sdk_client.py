"""The official `mcp` SDK's client against the bridge, found through the runtime file: real-client evidence.

The toolkit itself has one transport (hermes_blender/transport.py); the tests that must show what the official
client does with the bridge, in either protocol era, drive it from here instead.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Literal

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from hermes_blender.client import ToolResult
from hermes_blender.contract.liveness import LiveEndpoint, RuntimeFileSpec, read_live_endpoint, require_own_blender
from hermes_blender.contract.redact import REDACTOR
from hermes_blender.errors import ToolCallFailed
from hermes_blender.transport import token_refused

Mode = Literal["auto", "legacy", "2026-07-28"]


class SdkClient:
    def __init__(
        self, spec: RuntimeFileSpec, *, mode: Mode = "auto", timeout: float = 150.0, elicitation: Any = None
    ) -> None:
        """`elicitation`: the SDK's elicitation callback (the client then declares it can ask its user)."""
        self._spec = spec
        self._mode = mode
        self._timeout = timeout
        self._elicitation = elicitation

    def endpoint(self) -> LiveEndpoint:
        return read_live_endpoint(self._spec)

    @asynccontextmanager
    async def session(self) -> AsyncIterator[Client]:
        """One MCP connection to the endpoint the runtime file names right now, only to this user's Blender."""
        endpoint = self.endpoint()
        require_own_blender(endpoint)
        statuses: list[int] = []

        async def record(response: httpx2.Response) -> None:
            statuses.append(response.status_code)

        hooks = {"response": [record]}
        async with httpx2.AsyncClient(headers=endpoint.headers(), timeout=self._timeout, event_hooks=hooks) as http:
            transport = streamable_http_client(endpoint.url, http_client=http)
            try:
                asks = {"elicitation_callback": self._elicitation} if self._elicitation is not None else {}
                async with Client(transport, mode=self._mode, read_timeout_seconds=self._timeout, **asks) as client:
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


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]
