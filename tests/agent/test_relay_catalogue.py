"""The stdio relay serves the catalogue shipped with the toolkit until it meets a Blender: when that Blender lists
other tools, the client is told (`notifications/tools/list_changed`) and gets them from then on. Driven by the MCP
SDK's client over its in-memory JSON-RPC streams, the relay calling a scripted bridge over a real socket."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from hermes_blender import transport
from hermes_blender.stdio_server import OWN_TOOLS, server, shipped_catalogue
from tests.scripted_bridge import Request, ScriptedBridge, json_answer

from .test_relay import _bridge, _published, relayed_call

pytestmark = pytest.mark.timeout(60)
NEW_TOOL = {"name": "a_tool_this_toolkit_never_shipped", "description": "new", "inputSchema": {"type": "object"}}


def _session(live: list[dict[str, Any]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """One client session: the tools before and after a call reaches a Blender that lists `live`, and the methods
    of the notifications the client heard."""
    monkeypatch.setattr(transport, "require_own_blender", lambda endpoint: None)  # the bridge is this test process

    def answer(conn: socket.socket, request: Request) -> bool:
        listing = request.body["method"] == "tools/list"
        failed = {"content": [{"type": "text", "text": '{"state": "tool_failed"}'}], "isError": True}
        result = {"tools": live} if listing else failed  # a tool error: the SDK checks no output schema on it
        conn.sendall(json_answer(request, result))
        return True

    bridge = ScriptedBridge(answer)
    heard: list[str] = []

    async def note(message: Any) -> None:
        heard.append(getattr(message, "method", repr(message)))

    async def run() -> dict[str, Any]:
        relay = _bridge(_published(tmp_path, bridge.port))
        try:
            async with Client(server(relay), mode="legacy", message_handler=note) as client:
                before = [tool.name for tool in (await client.list_tools()).tools]
                for _ in range(2):  # the second call meets the same Blender: nothing new to say
                    assert (await client.call_tool("get_objects_summary", {})).is_error
                after = [tool.name for tool in (await client.list_tools()).tools]
        finally:
            await relay.close()
        return {"before": before, "after": after, "heard": heard}

    try:
        return anyio.run(run)
    finally:
        bridge.close()


def test_a_blender_listing_other_tools_makes_the_relay_say_the_list_changed_and_serve_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shipped = [tool["name"] for tool in shipped_catalogue()]
    session = _session([*shipped_catalogue(), NEW_TOOL], tmp_path, monkeypatch)
    assert session["before"] == [*shipped, *OWN_TOOLS]
    assert session["heard"] == ["notifications/tools/list_changed"], json.dumps(session["heard"])
    assert session["after"] == [*shipped, NEW_TOOL["name"], *OWN_TOOLS]


def test_a_blender_listing_the_shipped_tools_changes_nothing_and_the_client_hears_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = _session(shipped_catalogue(), tmp_path, monkeypatch)
    assert session["heard"] == [] and session["after"] == session["before"]


def test_a_tool_list_that_does_not_parse_keeps_the_calls_answer_and_the_shipped_tools(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Blender (or an add-on of another version) whose list is not MCP's: its calls still answer, nothing is said."""
    session = _session([{"name": 5}], tmp_path, monkeypatch)  # each call's own answer is asserted in `_session`
    assert session["heard"] == [] and session["after"] == session["before"]


def test_a_call_whose_blender_goes_away_before_its_tools_are_asked_keeps_its_own_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A call that restarts or stops the bridge is answered, then the relay's own `tools/list` meets no bridge: that
    failure once replaced the call's answer with `endpoint_unavailable` (a retry would run the code twice)."""
    monkeypatch.setattr(transport, "require_own_blender", lambda endpoint: None)  # the bridge is this test process
    done = {
        "content": [{"type": "text", "text": '{"result": {"ran": 1}}'}],
        "structuredContent": {"result": {"ran": 1}},
    }
    done["isError"] = False

    def answer(conn: socket.socket, request: Request) -> bool:
        if request.body["method"] == "tools/list":
            return False  # gone before it answers: the connection closes unanswered
        conn.sendall(json_answer(request, done, extra="Connection: close\r\n"))
        return False

    bridge = ScriptedBridge(answer)

    try:
        result = relayed_call(_published(tmp_path, bridge.port), "execute_blender_code")
    finally:
        bridge.close()
    assert not result.is_error and json.loads(result.content[0].text) == {"result": {"ran": 1}}
