"""`subscriptions/listen` (2026-07-28): a client hears which resources another client's change touched."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import httpx2
import pytest

from hermes_blender.client import BridgeClient, modern_request
from hermes_blender.contract.liveness import RuntimeFileSpec, read_live_endpoint
from hermes_blender.headless import HeadlessBlender
from tests.resource_updates import CUBE, SCENE, listening

LIGHT = "blender://objects/Light"


def _run(runtime_file: Path, code: str) -> dict[str, Any]:
    client = BridgeClient(RuntimeFileSpec(path=str(runtime_file)))
    result = asyncio.run(client.call_tool("execute_blender_code", {"code": code}))
    assert not result.is_error, result.text
    return result.structured or {}


def test_a_listener_hears_within_a_second_that_another_clients_change_touched_the_scene_and_the_cube(
    blender: HeadlessBlender,
) -> None:
    with listening(blender.runtime_file, [SCENE, CUBE, LIGHT]) as listener:
        ack = listener.messages[0]
        assert ack["params"]["notifications"] == {"resourceSubscriptions": [SCENE, CUBE, LIGHT]}
        assert ack["params"]["_meta"] == {"io.modelcontextprotocol/subscriptionId": 7}
        _run(blender.runtime_file, "import bpy\nbpy.data.objects['Cube'].location.x += 1\nresult = {}")
        assert listener.wait_for(CUBE, 1.0) and listener.wait_for(SCENE, 1.0), listener.messages
        assert LIGHT not in listener.updated()  # the light did not change
        assert all(m["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == 7 for m in listener.messages)


def test_a_read_touches_nothing(blender: HeadlessBlender) -> None:
    with listening(blender.runtime_file, [SCENE]) as listener:
        client = BridgeClient(RuntimeFileSpec(path=str(blender.runtime_file)))
        for tool in ("get_objects_summary", "get_object_detail_summary", "get_agent_history"):
            arguments = {"name": "Cube"} if tool == "get_object_detail_summary" else {}
            assert not asyncio.run(client.call_tool(tool, arguments)).is_error
        _run(blender.runtime_file, "result = {'n': 1}")  # code that changes nothing
        assert not listener.wait_for(SCENE, 1.5), listener.messages


def test_a_burst_of_changes_is_coalesced(blender: HeadlessBlender) -> None:
    with listening(blender.runtime_file, [CUBE]) as listener:
        for _ in range(20):
            _run(blender.runtime_file, "import bpy\nbpy.data.objects['Cube'].location.z += 0.1\nresult = {}")
        assert listener.wait_for(CUBE, 1.0)
        time.sleep(0.6)
        heard = listener.updated()
    assert 1 <= len(heard) < 20, heard  # twenty changes, told as a few updates


def test_a_bridge_that_stops_ends_its_streams_gracefully(tmp_path: Path) -> None:
    with HeadlessBlender(tmp_path / "server.json") as blender, listening(blender.runtime_file, [SCENE]) as listener:
        pass
    assert listener.ended.wait(10) and listener.cut is None
    [end] = [m for m in listener.messages if "result" in m]
    assert end["id"] == 7 and end["result"]["resultType"] == "complete"


@pytest.mark.parametrize(
    ("params", "word"),
    [
        ({"notifications": {"resourceSubscriptions": "blender://scene"}}, "list of URIs"),
        ({"notifications": []}, "must be an object"),
    ],
)
def test_a_malformed_filter_is_refused_by_name(blender: HeadlessBlender, params: dict, word: str) -> None:
    endpoint = read_live_endpoint(RuntimeFileSpec(path=str(blender.runtime_file)))
    body, headers = modern_request("subscriptions/listen", params, 1)
    headers.update(endpoint.headers())
    headers["Accept"] = "application/json, text/event-stream"
    answer = httpx2.post(endpoint.url, content=body, headers=headers, timeout=10)
    assert answer.status_code == 400 and word in answer.json()["error"]["message"]


def test_a_name_is_heard_however_its_uri_was_percent_encoded(blender: HeadlessBlender) -> None:
    """`Cube%20(1)` (JavaScript's encodeURIComponent) and `Cube%20%281%29` (Python's quote) name one object."""
    copy = "import bpy\no = bpy.data.objects['Cube'].copy()\no.name = 'Cube (1)'\nbpy.context.scene.collection.objects.link(o)"
    _run(blender.runtime_file, copy + "\nresult = {}")
    spellings = ["blender://objects/Cube%20(1)", "blender://objects/Cube%20%281%29"]
    with listening(blender.runtime_file, spellings) as listener:
        _run(blender.runtime_file, "import bpy\nbpy.data.objects['Cube (1)'].location.y += 1\nresult = {}")
        assert all(listener.wait_for(uri, 1.0) for uri in spellings), listener.messages


@pytest.mark.parametrize(
    "code",
    [
        "c = bpy.data.collections.new('Moved')\nbpy.context.scene.collection.children.link(c)\n"
        "o = bpy.data.objects['Light']\nc.objects.link(o)\nbpy.data.collections['Collection'].objects.unlink(o)",
        "bpy.data.objects['Light'].location.x += 1\nbpy.ops.ed.undo()",
        "bpy.ops.wm.revert_mainfile()",
    ],
    ids=["collection-move", "code-runs-undo", "revert"],
)
def test_an_objects_listener_hears_a_change_that_names_no_object(
    blender: HeadlessBlender, tmp_path: Path, code: str
) -> None:
    """A collection move names collections, an undo or a file load names nothing by object: each may change how
    every object reads (its collections, its place), so each watched object is told."""
    saved = tmp_path / "here.blend"
    _run(blender.runtime_file, f"import bpy\nbpy.ops.wm.save_as_mainfile(filepath={str(saved)!r})\nresult = {{}}")
    _run(blender.runtime_file, "import bpy\nbpy.data.objects['Light'].location.x += 2\nresult = {}")
    with listening(blender.runtime_file, [LIGHT]) as listener:
        _run(blender.runtime_file, f"import bpy\n{code}\nresult = {{}}")
        assert listener.wait_for(LIGHT, 1.5), listener.messages


def test_a_selection_listener_hears_the_agents_undo_of_a_selection(blender: HeadlessBlender) -> None:
    selection = "blender://selection"
    _run(
        blender.runtime_file,
        "import bpy\nfor o in bpy.data.objects: o.select_set(o.name == 'Light')\nresult = {}",
    )
    with listening(blender.runtime_file, [selection]) as listener:
        client = BridgeClient(RuntimeFileSpec(path=str(blender.runtime_file)))
        undone = asyncio.run(client.call_tool("undo_agent_steps", {"steps": 1}))
        assert not undone.is_error, undone.text
        assert listener.wait_for(selection, 1.5), listener.messages


def test_an_objects_listener_hears_a_change_whose_names_were_cut_at_the_answer_budget(
    blender: HeadlessBlender,
) -> None:
    """A call that moves more objects than its answer can name names the first ones (`cut_at_budget`): a watched
    object past the cut is told all the same."""
    last = "blender://objects/Empty_3999"
    _run(
        blender.runtime_file,
        "import bpy\nfor i in range(4000):\n"
        "    bpy.context.scene.collection.objects.link(bpy.data.objects.new(f'Empty_{i}', None))\nresult = {}",
    )
    with listening(blender.runtime_file, [last]) as listener:
        told = _run(blender.runtime_file, "import bpy\nfor o in bpy.data.objects:\n    o.location.x += 1\nresult = {}")
        assert told["changes"]["cut_at_budget"] and "Empty_3999" not in told["changes"]["transformed"]
        assert listener.wait_for(last, 1.5), listener.messages
