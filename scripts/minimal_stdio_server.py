"""The floor for `hermes-blender mcp`'s cold start: the smallest stdio server the official SDK makes (one tool),
answering `initialize` (scripts/bench.py --cold-start-only). Started as `python <file>`, as ours is started
through its console script (a Python file run by the same interpreter); it pauses no collector (ours does:
hermes_blender/collector.py, docs/performance.md says what each part is worth)."""

from __future__ import annotations

from typing import Any

import anyio
from mcp import types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server


async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
    return types.ListToolsResult(tools=[types.Tool(name="echo", input_schema={"type": "object"})])


async def main() -> None:
    app = Server("minimal", on_list_tools=list_tools)
    async with stdio_server() as (read, write):
        await app.run(read, write, app.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
