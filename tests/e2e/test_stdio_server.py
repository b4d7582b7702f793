"""`hermes-blender mcp`, driven by the official Python SDK's stdio client as any MCP client would drive it."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from hermes_blender.client import BridgeClient
from hermes_blender.contract.liveness import RuntimeFileSpec
from hermes_blender.headless import HeadlessBlender
from hermes_blender.stdio_server import shipped_catalogue


def _server(runtime_file: Path) -> StdioServerParameters:
    command = [sys.executable, "-m", "hermes_blender.cli", "mcp", "--runtime-file", str(runtime_file)]
    return StdioServerParameters(command=command[0], args=command[1:])


def _session(runtime_file: Path, body: Callable[[Client], Awaitable[Any]], mode: str = "legacy") -> tuple[Any, str]:
    """Run `body` in one stdio session; its value and what the server wrote to stderr (kept to look for secrets)."""
    stderr_file = runtime_file.parent.parent / "mcp-stderr.txt"
    stderr_file.parent.mkdir(parents=True, exist_ok=True)

    async def main(errlog: Any) -> Any:
        transport = stdio_client(_server(runtime_file), errlog=errlog)
        async with Client(transport, mode=mode, read_timeout_seconds=60) as client:  # type: ignore[arg-type]
            return await body(client)

    with stderr_file.open("w") as errlog:
        value = asyncio.run(main(errlog))
    return value, stderr_file.read_text()


def _state(result: Any) -> str:
    assert result.is_error, result
    return json.loads(result.content[0].text)["state"]


def test_with_blender_closed_it_lists_the_shipped_tools_and_a_call_names_the_state(tmp_path: Path) -> None:
    runtime_file = tmp_path / "Blender" / "server.json"  # nothing has published here

    async def body(client: Client) -> tuple[list[str], Any]:
        tools = await client.list_tools()
        return [tool.name for tool in tools.tools], await client.call_tool("get_objects_summary", {})

    (names, result), _ = _session(runtime_file, body)
    assert names == [tool["name"] for tool in shipped_catalogue()]
    payload = json.loads(result.content[0].text)
    assert result.is_error and payload["state"] == "app_not_running"
    assert payload["user_action"] == "Start Blender, then try again." and payload["retry"] == "after_user_action"


def test_the_shipped_catalogue_is_what_a_live_blender_lists(blender: HeadlessBlender) -> None:
    live = asyncio.run(BridgeClient(RuntimeFileSpec(path=str(blender.runtime_file))).list_tools())
    assert live == shipped_catalogue(), "regenerate hermes_blender/catalogue.json from a live Blender's tools/list"


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
def test_one_session_follows_blender_across_a_restart_on_a_new_port_and_token(tmp_path: Path, mode: str) -> None:
    runtime_file = tmp_path / "Blender" / "server.json"
    seen: list[str] = []

    async def body(client: Client) -> list[Any]:
        answers = []
        for step in ("first", "closed", "second"):
            if step == "closed":
                answers.append(_state(await client.call_tool("get_objects_summary", {})))
                continue
            with HeadlessBlender(runtime_file) as running:
                record = json.loads(runtime_file.read_text())
                seen.extend([record["http"], record["token"]])
                result = await client.call_tool("get_objects_summary", {})
                assert not result.is_error, result
                answers.append((running.pid, result.structured_content["scene_name"]))
        return answers

    answers, stderr = _session(runtime_file, body, mode)
    (first_pid, first_scene), gap, (second_pid, second_scene) = answers
    assert gap == "app_not_running" and first_scene == second_scene == "Scene" and first_pid != second_pid
    first_url, first_token, second_url, second_token = seen
    assert first_token != second_token
    for token in (first_token, second_token):
        assert token not in stderr  # the token goes from the file to the bridge only
