"""The smallest stdio server the official SDK makes, as a floor.

- With no argument, the floor for `hermes-blender mcp`'s cold start: one tool, answering `initialize`
  (scripts/bench.py --cold-start-only). Started as `python <file>`, as ours is started through its console script
  (a Python file run by the same interpreter); it pauses no collector (ours does: hermes_blender/collector.py,
  docs/performance.md says what each part is worth).
- With `--answer FILE`, the floor for a Hermes tool call (scripts/benchmark/hermes.py): one tool, `get_objects_summary`
  listed as the relay lists it to Hermes (no output schema), every call answered with the `CallToolResult` in FILE
  (the bridge's own answer, captured in the same run), so Hermes reads the same bytes as from ours.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import anyio
from mcp import types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

ANSWERED_TOOL = "get_objects_summary"


async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
    return types.ListToolsResult(tools=[types.Tool(name="echo", input_schema={"type": "object"})])


def answering(result: types.CallToolResult) -> Server[Any]:
    async def list_answered(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[types.Tool(name=ANSWERED_TOOL, input_schema={"type": "object"})])

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        return result

    return Server("minimal", on_list_tools=list_answered, on_call_tool=call_tool)


async def main() -> None:
    if sys.argv[1:2] == ["--answer"]:
        with open(sys.argv[2], encoding="utf-8") as file:
            app = answering(types.CallToolResult.model_validate(json.load(file)))
    else:
        app = Server("minimal", on_list_tools=list_tools)
    async with stdio_server() as (read, write):
        await app.run(read, write, app.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
