"""`hermes-blender mcp`, driven by the official Python SDK's stdio client as any MCP client would drive it."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from hermes_blender.blender_host import ADDON_MODULE
from hermes_blender.client import BridgeClient
from hermes_blender.contract.liveness import RuntimeFileSpec
from hermes_blender.headless import HeadlessBlender
from hermes_blender.stdio_server import LIST_BLENDERS, OWN_TOOLS, shipped_catalogue


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
    assert names == [tool["name"] for tool in shipped_catalogue()] + OWN_TOOLS
    payload = json.loads(result.content[0].text)
    assert result.is_error and payload["state"] == "app_not_running"
    assert payload["user_action"] == "Start Blender, then try again." and payload["retry"] == "after_user_action"


def test_pid_pins_the_session_to_that_blender_though_the_runtime_file_names_another(tmp_path: Path) -> None:
    """`mcp --pid` talks to that Blender only: here it has closed (its pid is a process that ended) while the runtime
    file names a live process; the call says the pinned one is not serving, and `list_blenders` names it."""
    runtime_file = tmp_path / "Blender" / "server.json"
    runtime_file.parent.mkdir(parents=True)
    record = {"http": "http://127.0.0.1:9/mcp", "token": "pin-test-token-0123456789", "pid": os.getpid()}
    runtime_file.write_text(json.dumps(record))
    runtime_file.chmod(0o600)
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()

    async def main() -> tuple[Any, Any]:
        server = _server(runtime_file)
        server.args.extend(["--pid", str(ended.pid)])
        async with Client(stdio_client(server), read_timeout_seconds=60) as client:  # type: ignore[arg-type]
            return await client.call_tool("get_objects_summary", {}), await client.call_tool(LIST_BLENDERS, {})

    called, listed = asyncio.run(main())
    assert called.is_error and f"{ended.pid}.json" in json.loads(called.content[0].text)["detail"], called
    assert listed.structured_content["this_session_pid"] == ended.pid


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


PID_CODE = {"code": "import os\nresult = {'pid': os.getpid()}"}


async def _answering_pid(client: Client) -> tuple[int, list[str]]:
    """Which Blender answered a call, and the texts that came with its answer."""
    result = await client.call_tool("execute_blender_code", PID_CODE)
    assert not result.is_error, result
    return result.structured_content["result"]["pid"], [block.text for block in result.content[1:]]


def test_a_session_stays_with_its_blender_when_another_starts_and_says_so_when_it_must_switch(tmp_path: Path) -> None:
    runtime_file = tmp_path / "Blender" / "server.json"

    async def body(client: Client) -> dict[str, Any]:
        seen: dict[str, Any] = {}
        first = HeadlessBlender(runtime_file)
        with first:
            seen["before"] = await _answering_pid(client)
            with HeadlessBlender(runtime_file) as second:  # the newer one now owns server.json
                assert json.loads(runtime_file.read_text())["pid"] == second.pid
                seen["pids"] = (first.pid, second.pid)
                seen["while_both"] = await _answering_pid(client)
                seen["listed"] = (await client.call_tool(LIST_BLENDERS, {})).structured_content
                first.stop()
                seen["after_first_quit"] = await _answering_pid(client)
                seen["then"] = await _answering_pid(client)
        return seen

    seen, _ = _session(runtime_file, body)
    first_pid, second_pid = seen["pids"]
    assert seen["before"] == (first_pid, []) and seen["while_both"] == (first_pid, [])
    listed = seen["listed"]
    assert listed["this_session_pid"] == first_pid
    assert {entry["pid"]: entry["this_session"] for entry in listed["serving"]} == {first_pid: True, second_pid: False}
    pid, notes = seen["after_first_quit"]
    assert pid == second_pid and len(notes) == 1 and f"(pid {first_pid}) is no longer serving" in notes[0]
    assert seen["then"] == (second_pid, [])  # said once, at the switch


def test_file_pins_the_blender_that_has_that_file_open(tmp_path: Path) -> None:
    runtime_file = tmp_path / "Blender" / "server.json"
    blend = tmp_path / "shot_010.blend"
    with HeadlessBlender(runtime_file) as first:
        save = {"code": f"import bpy\nbpy.ops.wm.save_as_mainfile(filepath={str(blend)!r})\nresult = {{}}"}
        saved = asyncio.run(
            BridgeClient(RuntimeFileSpec(path=str(runtime_file))).call_tool("execute_blender_code", save)
        )
        assert not saved.is_error and blend.exists(), saved
        with HeadlessBlender(runtime_file):  # newer: server.json names this one
            for wanted in (blend.name, str(blend)):
                server = _server(runtime_file)
                server.args.extend(["--file", wanted])

                async def main(server: StdioServerParameters = server) -> tuple[int, list[str]]:
                    async with Client(stdio_client(server), read_timeout_seconds=60) as client:  # type: ignore[arg-type]
                        return await _answering_pid(client)

                assert asyncio.run(main()) == (first.pid, [])


def test_a_cancelled_call_stops_the_script_in_blender_and_the_session_goes_on(tmp_path: Path) -> None:
    runtime_file = tmp_path / "Blender" / "server.json"
    started, finished = tmp_path / "started", tmp_path / "finished"
    slow = (
        f"import pathlib, time\npathlib.Path({str(started)!r}).touch()\n"
        f"for _ in range(600):\n    time.sleep(0.05)\npathlib.Path({str(finished)!r}).touch()\nresult = {{}}"
    )

    async def body(client: Client) -> Any:
        assert not (await client.call_tool("get_objects_summary", {})).is_error  # the relay's link is open
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(client.call_tool, "execute_blender_code", {"code": slow})
            while not started.exists():
                await anyio.sleep(0.01)
            tasks.cancel_scope.cancel()  # the SDK sends notifications/cancelled; the relay hangs up its request
        return await client.call_tool("get_objects_summary", {})

    with HeadlessBlender(runtime_file):
        after, stderr = _session(runtime_file, body)
        assert not after.is_error and after.structured_content["scene_name"] == "Scene"
        assert not finished.exists()  # stopped where it waited: the next call did not wait for it to end
    assert "Traceback" not in stderr


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
def test_progress_from_blender_reaches_the_client_through_the_relay(tmp_path: Path, mode: str) -> None:
    runtime_file = tmp_path / "Blender" / "server.json"
    code = "import time\nfor part in range(1, 4):\n    time.sleep(0.4)\n    progress(part / 3, f'part {part}')\nresult = {}"
    heard: list[tuple[float, float | None, str | None]] = []

    async def note(progress: float, total: float | None, message: str | None) -> None:
        heard.append((progress, total, message))

    async def body(client: Client) -> Any:
        return await client.call_tool("execute_blender_code", {"code": code}, progress_callback=note)

    with HeadlessBlender(runtime_file):
        result, _ = _session(runtime_file, body, mode)
    assert not result.is_error and result.structured_content["result"] == {}
    words = {message for _, _, message in heard if not (message or "").startswith("running for")}
    assert words and words <= {"part 1", "part 2", "part 3"}
    progress = [p for p, _, _ in heard]
    assert progress == sorted(set(progress))


def test_a_first_call_that_restarts_the_bridge_answers_with_what_it_did(tmp_path: Path) -> None:
    """The relay asks a Blender for its tools after its first answer; that request once met the restart the call
    asked for, and its failure replaced the call's own answer with `endpoint_unavailable` (a retry ran it twice)."""
    runtime_file = tmp_path / "Blender" / "server.json"
    code = (
        f"import bpy\nfrom {ADDON_MODULE}.runtime import RUNTIME\n"
        "scene = bpy.context.scene\nscene['ran'] = scene.get('ran', 0) + 1\n"
        "RUNTIME.start(RUNTIME.bridge.config)\nresult = {'ran': scene['ran']}"
    )

    async def body(client: Client) -> tuple[Any, Any]:
        first = await client.call_tool("execute_blender_code", {"code": code})
        again = await client.call_tool("execute_blender_code", {"code": "result = {'ran': bpy.context.scene['ran']}"})
        return first, again

    with HeadlessBlender(runtime_file):
        (first, again), _ = _session(runtime_file, body)
    assert not first.is_error, first.content
    assert json.loads(first.content[0].text)["result"] == {"ran": 1}
    assert not again.is_error and json.loads(again.content[0].text)["result"] == {"ran": 1}


THREE_CHANGES = (
    "bpy.data.objects.remove(bpy.data.objects['Light'])\n"
    "bpy.data.objects['Cube'].location = (4.0, 5.0, 6.0)\n"
    "bpy.context.scene.collection.objects.link(bpy.data.objects.new('Sphere', bpy.data.meshes.new('SphereMesh')))\n"
)
NAMES = "result = {'names': sorted(o.name for o in bpy.data.objects), 'x': bpy.data.objects['Cube'].location.x}"


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
def test_a_change_is_told_and_undone_through_the_relay(tmp_path: Path, mode: str) -> None:
    runtime_file = tmp_path / "Blender" / "server.json"

    async def body(client: Client) -> tuple[Any, Any, Any, Any]:
        changed = await client.call_tool("execute_blender_code", {"code": THREE_CHANGES})
        undone = await client.call_tool("undo_agent_steps", {"steps": 1})
        after = await client.call_tool("execute_blender_code", {"code": NAMES})
        checkpoint = await client.call_tool("save_checkpoint", {"name": "relayed"})
        return changed, undone, after, checkpoint

    with HeadlessBlender(runtime_file):
        (changed, undone, after, checkpoint), _ = _session(runtime_file, body, mode)
    told = changed.structured_content["changes"]
    assert (told["added"], told["removed"], told["transformed"]) == (["Sphere"], ["Light"], ["Cube"])
    assert not undone.is_error and undone.structured_content["changes"]["added"] == ["Light"]
    assert after.structured_content["result"] == {"names": ["Camera", "Cube", "Light"], "x": 0.0}
    assert not checkpoint.is_error and checkpoint.structured_content["checkpoint"]["name"] == "relayed"


def test_the_montage_reaches_the_client_as_image_content_through_the_relay(tmp_path: Path) -> None:
    runtime_file = tmp_path / "Blender" / "server.json"

    async def body(client: Client) -> Any:
        return await client.call_tool("get_view_montage", {"tile_size": 64, "views": ["front", "top"]})

    with HeadlessBlender(runtime_file):
        result, _ = _session(runtime_file, body, "2026-07-28")
    assert not result.is_error
    image = result.content[0]
    assert image.type == "image" and image.mime_type == "image/png"
    assert base64.b64decode(image.data).startswith(b"\x89PNG")


def test_a_failed_calls_hint_reaches_the_client_through_the_relay(tmp_path: Path) -> None:
    """The hint that names what this Blender has (tools/hints.py) arrives in the tool error the relay hands on."""
    runtime_file = tmp_path / "Blender" / "server.json"

    async def body(client: Client) -> Any:
        return await client.call_tool("execute_blender_code", {"code": "bpy.data.objects['Cube'].locaton = (1, 2, 3)"})

    with HeadlessBlender(runtime_file):
        result, _ = _session(runtime_file, body)
    payload = json.loads(result.content[0].text)
    assert result.is_error and payload["state"] == "execution_error"
    assert "'location'" in payload["hint"], payload
