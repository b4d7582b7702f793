"""The stdio relay's own promises, in this process over real sockets: it dials only this user's Blender (the
transport's one check, before every new connection), and `list_blenders` tells the model no port."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import types

from hermes_blender.contract.liveness import RuntimeFileSpec
from hermes_blender.instances import INSTANCES_FOLDER
from hermes_blender.stdio_calls import BlenderCalls, BlenderChoice, is_open_file
from hermes_blender.stdio_server import LIST_BLENDERS, StdioBridge, shipped_catalogue
from hermes_blender.transport import Links
from tests.scripted_bridge import ScriptedBridge, json_answer

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def listener() -> Iterator[ScriptedBridge]:
    """Listening where the runtime file says; this test's process (a Python, not a Blender) owns the port."""
    server = ScriptedBridge(lambda conn, request: conn.sendall(json_answer(request, {"content": []})) or True)
    yield server
    server.close()


def _published(folder: Path, port: int, pid: int | None = None) -> RuntimeFileSpec:
    """server.json and the process's own record naming it (this process by default), as a bridge in it would
    publish them."""
    pid = os.getpid() if pid is None else pid
    record = json.dumps({"http": f"http://127.0.0.1:{port}", "token": "relay-test-token-0123456789", "pid": pid})
    for path in (folder / "server.json", folder / INSTANCES_FOLDER / f"{pid}.json"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(record)
        path.chmod(0o600)
    return RuntimeFileSpec(path=str(folder / "server.json"))


def relayed_call(spec: RuntimeFileSpec, tool: str, *, states_as_results: bool = False) -> types.CallToolResult:
    """One call through the real relay, driven by the SDK's client over its in-memory streams."""
    from mcp import Client

    from hermes_blender.stdio_server import server

    async def run() -> types.CallToolResult:
        bridge = _bridge(spec, states_as_results=states_as_results)
        try:
            async with Client(server(bridge), mode="legacy") as client:
                return await client.call_tool(tool, {"code": "..."} if tool == "execute_blender_code" else {})
        finally:
            await bridge.close()

    return anyio.run(run)


def _bridge(spec: RuntimeFileSpec, *, states_as_results: bool = False) -> StdioBridge:
    """The relay's handlers, reaching Blender through `spec`."""
    return StdioBridge(lambda: BlenderCalls(BlenderChoice(spec), Links()), states_as_results=states_as_results)


def _call(spec: RuntimeFileSpec, name: str) -> types.CallToolResult:
    async def call() -> types.CallToolResult:
        bridge = _bridge(spec)
        try:
            return await bridge.call_tool(None, types.CallToolRequestParams(name=name, arguments={}))
        finally:
            await bridge.close()

    return anyio.run(call)


def test_the_relay_sends_nothing_to_a_process_that_is_not_this_users_blender(
    listener: ScriptedBridge, tmp_path: Path
) -> None:
    """A stale runtime file whose port is now held by another program of this user: no connection, no token. The
    program is a child sharing the listening socket, never this pytest, whose command line the developer picks
    (`pytest tests/blender` names a Blender folder)."""
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], pass_fds=[listener.fileno()])
    try:
        result = _call(_published(tmp_path, listener.port, other.pid), "get_objects_summary")
    finally:
        other.kill()
        other.wait()
    payload = json.loads(result.content[0].text)
    assert result.is_error and payload["state"] == "endpoint_unavailable"
    assert f"pid {other.pid}" in payload["detail"] and "is not a Blender process" in payload["detail"]
    assert "nothing was sent" in payload["detail"] and listener.connections == 0


def test_list_blenders_never_shows_the_model_a_port(listener: ScriptedBridge, tmp_path: Path) -> None:
    result = _call(_published(tmp_path, listener.port), LIST_BLENDERS)
    text = result.content[0].text
    assert not result.is_error and json.loads(text)["serving"][0]["pid"] == os.getpid()
    assert str(listener.port) not in text + json.dumps(result.structured_content)


def test_a_file_name_that_is_not_utf8_never_pins_a_blender_but_a_file_in_such_a_folder_does(tmp_path: Path) -> None:
    """`mcp --file`: the bridge says such a name with U+FFFD (an answer every client parses), which other names
    share (cp1251 `дом` and `кот` alike): matching it could pin another Blender's scene, so it never matches. A
    bare name still finds its file in a folder that is not UTF-8 (a Latin-1 home)."""
    said = f"{tmp_path}/caf\ufffd/chair.blend"
    assert not is_open_file(said, os.fsdecode(os.fsencode(tmp_path) + b"/caf\xe9/chair.blend"))
    assert not is_open_file(f"{tmp_path}/\ufffd.blend", "\ufffd.blend") and not is_open_file(said, said)
    assert not is_open_file(f"{tmp_path}/\ufffd.blend", os.fsdecode(b"\xe9.blend"))
    assert is_open_file(said, "chair.blend") and not is_open_file(said, "table.blend")
    assert is_open_file(f"{tmp_path}/caf\u00e9.blend", f"{tmp_path}/caf\u00e9.blend")


def test_a_lone_surrogate_an_older_bridge_or_a_record_sends_reaches_the_client_as_u_fffd(tmp_path: Path) -> None:
    """Add-ons before this toolkit escaped a path that is not UTF-8 (`\\udce9`), and any process of the user can
    write a record: parsed, the lone surrogate is one the SDK cannot write, and the relay ended."""
    path = os.fsdecode(b"/home/caf\xe9/chair.blend")

    def answer(conn: Any, request: Any) -> bool:
        listing = request.body["method"] == "tools/list"
        tools = {"tools": shipped_catalogue()}
        failed = {"content": [{"type": "text", "text": f"no file {path}"}], "isError": True}
        conn.sendall(json_answer(request, tools if listing else failed))
        return True

    bridge = ScriptedBridge(answer)
    blender = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)", "blender"], pass_fds=[bridge.fileno()]
    )
    try:
        spec = _published(tmp_path, bridge.port, blender.pid)
        record = tmp_path / INSTANCES_FOLDER / f"{blender.pid}.json"
        record.write_text(json.dumps({**json.loads(record.read_text()), "blender_version": os.fsdecode(b"5.1\xe9")}))
        answered, listed = relayed_call(spec, "get_objects_summary"), _call(spec, LIST_BLENDERS)
    finally:
        blender.kill()
        blender.wait()
        bridge.close()
    assert answered.is_error and answered.content[0].text == "no file /home/caf\ufffd/chair.blend"
    assert json.loads(listed.content[0].text)["serving"][0]["blender_version"] == "5.1\ufffd"
    for result in (answered, listed):
        result.model_dump_json()  # what the SDK's writer does for the relay's client
