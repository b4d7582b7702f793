"""`call` and `status`'s way to the bridge, finding it ONLY through the runtime file.

Every call re-reads the file (the port and token may have changed since the last one); a missing file, a malformed
endpoint or a dead pid raises LiveEndpointUnavailable and no configured URL is ever tried instead. The request goes
through the toolkit's one transport (`transport.py`) in the stateless 2026-07-28 form. `modern_request` is here too
for raw callers (scripts, tests) who build requests themselves.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any

from mcp.shared.exceptions import MCPError

from .contract.host import HostFacts
from .contract.liveness import LiveEndpoint, RuntimeFileSpec, read_live_endpoint
from .errors import ToolCallFailed
from .transport import OnProgress, modern_request, request_once

__all__ = ["BridgeClient", "ToolResult", "modern_request"]


@dataclass(frozen=True)
class ToolResult:
    is_error: bool
    structured: dict[str, Any] | None
    text: str
    """The text content joined; for JSON tools, the same data as `structured`."""
    images: tuple[bytes, ...] = ()
    """Image content, decoded (PNG bytes), in answer order."""

    def data(self) -> Any:
        """The structured result, else the text parsed as JSON, else the text."""
        if self.structured is not None:
            return self.structured
        try:
            return json.loads(self.text)
        except ValueError:
            return self.text


class BridgeClient:
    """One request per call, each on a connection of its own, to the Blender the runtime file names now."""

    def __init__(
        self, spec: RuntimeFileSpec = RuntimeFileSpec(), host: HostFacts | None = None, *, timeout: float | None = None
    ) -> None:
        self._spec = spec
        self._host = host
        self._timeout = timeout
        """Seconds a call may take at most; None: its tool's own limit (time_limits.py)."""

    def endpoint(self) -> LiveEndpoint:
        return read_live_endpoint(self._spec, self._host)

    async def list_tools(self) -> list[dict[str, Any]]:
        result = await self._request("tools/list", {})
        tools = result.get("tools")
        if not isinstance(tools, list):
            raise ToolCallFailed("Blender's tools/list answer holds no list of tools")
        return tools

    async def call_tool(
        self, name: str, arguments: dict[str, Any] | None = None, on_progress: OnProgress | None = None
    ) -> ToolResult:
        """One tool call; with `on_progress`, each progress notification the bridge sends while it runs."""
        result = await self._request("tools/call", {"name": name, "arguments": arguments or {}}, on_progress)
        content = result.get("content", [])
        texts = [block.get("text", "") for block in content if block.get("type") == "text"]
        images = tuple(
            base64.b64decode(block["data"])
            for block in content
            if block.get("type") == "image" and isinstance(block.get("data"), str)
        )
        structured = result.get("structuredContent")
        return ToolResult(
            bool(result.get("isError")),
            structured if isinstance(structured, dict) else None,
            "\n".join(texts),
            images,
        )

    async def _request(
        self, method: str, params: dict[str, Any], on_progress: OnProgress | None = None
    ) -> dict[str, Any]:
        endpoint = self.endpoint()
        try:
            return await request_once(endpoint, method, params, limit=self._timeout, on_progress=on_progress)
        except MCPError as exc:
            raise ToolCallFailed(f"Blender at {endpoint.url} refused {method}: {exc}") from None
