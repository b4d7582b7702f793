"""One bridge's MCP side: the protocol over its tools, the HTTP app, sessions and resource subscriptions.

Built at the MCP listener's first connection (`service.Bridge`), not at the start: the runtime file and the Lab
listener need none of it, and the start of every Blender that loads the add-on pays nothing for it (about
13 ms of imports, docs/performance.md). Once up, it hears of every change the bridge records (`Watcher`) and
tells the streams that listen.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import resources
from .agent_history import MOVES
from .net.auth import Token
from .net.conversation import Peer
from .net.http import HttpConversation, HttpLimits
from .net.mcp import McpProtocol, ServerInfo
from .net.mcp_http import McpHttpApp
from .net.sessions import SessionStore
from .net.subscriptions import Updates
from .tool_host import ToolHost

INSTRUCTIONS = (
    "Tools for the Blender instance that published this endpoint. Read get_objects_summary before "
    "changing anything. When code fails, read the error's `hint` first: it names what this Blender's API has. "
    "Code execution in Blender is not a sandbox."
)


class McpEndpoint:
    """The MCP side of one bridge; a `Watcher` of its changes (`execution.py`)."""

    def __init__(
        self,
        tools: ToolHost,
        version: str,
        token: Token,
        port: Callable[[], int],
        limits: HttpLimits | None,
        *,
        on_internal_error: Callable[[BaseException], None],
    ) -> None:
        self._updates = Updates()
        self._app = McpHttpApp(
            McpProtocol(tools, ServerInfo("blender-bridge", version, lambda: f"{INSTRUCTIONS} {tools.mode_said()}")),
            token,
            port,
            SessionStore(),
            self._updates,
            on_internal_error=on_internal_error,
        )
        self._limits = limits or HttpLimits()

    def conversation(self, peer: Peer) -> HttpConversation:
        app = self._app
        return HttpConversation(peer, app=app, limits=self._limits, gate=app.gate, lasting=app.lasting)

    def close(self) -> None:
        """Each stream sends its graceful end (its connection is still open)."""
        self._updates.close()

    def listening(self) -> bool:
        return self._updates.listening()

    def recorded(self, author: str, summary: dict[str, Any]) -> None:
        self._updates.publish(resources.touched(summary, self._updates.wanted(), history_moved=author in MOVES))

    def stepped(self, task_ids: list[str]) -> None:
        self._updates.publish(resources.task_uris(task_ids))
