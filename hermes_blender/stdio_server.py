"""`hermes-blender mcp`: the bridge for any MCP client that starts a command, found the way Hermes finds it.

A client that takes a stdio command (Claude Code and Desktop, Cursor, VS Code, Codex, Gemini CLI, ...)
starts this once and keeps it. It answers the handshake and lists the tools even while Blender is
closed (the catalogue shipped in `catalogue.json`, held equal to a live Blender's by a test), and
reads the runtime file for every call, so a Blender that restarts on a new port and token is followed
with no change to the client's config. The token goes from the 0600 runtime file to the bridge and
nowhere else: not argv, not the environment, not stdout (the protocol) or the log (stderr). When
Blender cannot be reached, the call answers at once as a tool error whose JSON carries the named
state, the one user action and the retry policy, the same sentences as `status`.
"""

from __future__ import annotations

import json
import logging
from importlib import resources
from typing import Any

import anyio
from mcp import types
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.stdio import stdio_server

from . import __version__
from .client import BridgeClient
from .contract.liveness import RuntimeFileSpec
from .contract.status import describe
from .errors import LiveEndpointUnavailable, ToolCallFailed

log = logging.getLogger("hermes_blender.mcp")

NAME = "blender"
APP = "Blender"


def shipped_catalogue() -> list[dict[str, Any]]:
    """The tools a live bridge lists, as shipped with this toolkit (`tools/list` without Blender)."""
    return json.loads(resources.files(__package__).joinpath("catalogue.json").read_text(encoding="utf-8"))


def unavailable(state: str, detail: str) -> types.CallToolResult:
    """A call Blender could not take: the named state, its one action and retry policy, as `status` says them."""
    reason, action, retry = describe(state, APP)  # type: ignore[arg-type]
    payload = {"state": state, "error": f"{reason} {action}".strip(), "user_action": action, "retry": retry}
    payload["detail"] = detail
    text = json.dumps(payload, ensure_ascii=False)
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


class StdioBridge:
    """The handlers: the shipped catalogue, and each call forwarded to the Blender the runtime file names now."""

    def __init__(self, spec: RuntimeFileSpec, *, timeout: float = 150.0) -> None:
        self._client = BridgeClient(spec, timeout=timeout)
        self._tools = [types.Tool.model_validate(tool) for tool in shipped_catalogue()]
        self._checked_pids: set[int] = set()
        """Blenders whose own catalogue was compared with the one served (once each)."""

    async def list_tools(self, ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=self._tools)

    async def call_tool(self, ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        try:
            pid = self._client.endpoint().pid
            async with self._client.session() as client:
                result = await client.call_tool(params.name, params.arguments or {})
                if pid not in self._checked_pids:
                    self._checked_pids.add(pid)
                    if await self._catalogue_changed(client):
                        await ctx.session.send_tool_list_changed()
        except LiveEndpointUnavailable as exc:
            return unavailable(exc.state, str(exc))
        except ToolCallFailed as exc:
            return unavailable("endpoint_unavailable", str(exc))
        return result

    async def _catalogue_changed(self, client: Any) -> bool:
        """Whether this Blender lists other tools than those served; if so they are served from now on."""
        live = (await client.list_tools()).tools
        if [tool.model_dump(mode="json") for tool in live] == [tool.model_dump(mode="json") for tool in self._tools]:
            return False
        log.warning("this Blender's tools differ from the catalogue shipped with the toolkit; serving its own")
        self._tools = list(live)
        return True


def server(spec: RuntimeFileSpec, *, timeout: float = 150.0) -> Server[Any]:
    bridge = StdioBridge(spec, timeout=timeout)
    return Server(
        NAME,
        version=__version__,
        instructions=(
            "Tools for the Blender that is open on this computer, found through the runtime file it publishes. "
            "Read get_objects_summary before changing anything. Code execution in Blender is not a sandbox."
        ),
        on_list_tools=bridge.list_tools,
        on_call_tool=bridge.call_tool,
    )


def run(spec: RuntimeFileSpec, *, timeout: float = 150.0) -> None:
    """Serve MCP on stdin/stdout until the client closes stdin."""
    app = server(spec, timeout=timeout)
    options = app.create_initialization_options(notification_options=NotificationOptions(tools_changed=True))

    async def main() -> None:
        async with stdio_server() as (read, write):
            await app.run(read, write, options)

    anyio.run(main)
