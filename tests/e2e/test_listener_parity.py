"""The same scene through both listeners: the native `get_objects_summary` states the facts that the
official tool of that name reads (its semantics: the eye icon, the collection's own flag, no mode
without an active object, instance collections of empties), here read by a snippet over the Lab wire."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hermes_blender.client import BridgeClient
from hermes_blender.contract.liveness import RuntimeFileSpec
from hermes_blender.headless import HeadlessBlender
from hermes_blender.lab import lab_execute

OFFICIAL_READING = """
import bpy
view_layer = bpy.context.view_layer
scene = bpy.context.scene

def entry(obj):
    facts = {
        "name": obj.name, "type": obj.type, "parent": obj.parent.name if obj.parent else None,
        "data_name": obj.data.name if obj.data else None, "selected": obj.select_get(),
        "visible": obj.visible_get(), "hide_viewport": obj.hide_get(),
    }
    if obj.type == "EMPTY" and obj.instance_collection:
        facts["instance_collection"] = obj.instance_collection.name
    return facts

def tree(layer):
    return {
        "name": layer.collection.name, "exclude": layer.exclude, "hide_viewport": layer.collection.hide_viewport,
        "objects": [entry(obj) for obj in layer.collection.objects],
        "children": [tree(child) for child in layer.children],
    }

active = view_layer.objects.active
result = {
    "scene_name": scene.name,
    "active_object": active.name if active else None,
    "object_mode": bpy.context.mode if active else None,
    "camera_object": scene.camera.name if scene.camera else None,
    "collections": [tree(view_layer.layer_collection)],
}
"""

BUSY_SCENE = """
import bpy
scene = bpy.context.scene
rig = bpy.data.collections.new("Rig")
props = bpy.data.collections.new("Props")
hidden = bpy.data.collections.new("Hidden")
excluded = bpy.data.collections.new("Excluded")
scene.collection.children.link(rig)
scene.collection.children.link(props)
props.children.link(hidden)
scene.collection.children.link(excluded)
hidden.hide_viewport = True
bpy.context.view_layer.layer_collection.children["Excluded"].exclude = True
mesh = bpy.data.meshes.new("SharedMesh")
for i in range(48):
    obj = bpy.data.objects.new(f"Part.{i:03d}", mesh if i % 3 else None)
    (rig, props, hidden, excluded)[i % 4].objects.link(obj)
    if i % 5 == 0 and i:
        obj.parent = bpy.data.objects[f"Part.{i - 5:03d}"]
for i, obj in enumerate(rig.objects):
    obj.select_set(i % 2 == 0)
    if i % 3 == 0:
        obj.hide_set(True)
holder = bpy.data.objects.new("Holder", None)
holder.instance_type = "COLLECTION"
holder.instance_collection = props
scene.collection.objects.link(holder)
bpy.data.objects["Light"].instance_collection = rig
bpy.context.view_layer.objects.active = None
result = {"objects": len(scene.objects)}
"""


@pytest.fixture
def bridge(tmp_path: Path) -> Iterator[tuple[Path, int]]:
    runtime_file = tmp_path / "server.json"
    with HeadlessBlender(runtime_file, lab_port=0):
        yield runtime_file, int(json.loads(runtime_file.read_text())["lab"].rsplit(":", 1)[1])


def _by_name(node: Any) -> Any:
    """Order is presentation (the native tool sorts by name); the facts must be equal."""
    if isinstance(node, list):
        return sorted((_by_name(item) for item in node), key=lambda item: json.dumps(item, sort_keys=True))
    if isinstance(node, dict):
        return {key: _by_name(value) for key, value in node.items()}
    return node


def _both(runtime_file: Path, lab_port: int) -> tuple[dict[str, Any], dict[str, Any]]:
    summary = asyncio.run(BridgeClient(RuntimeFileSpec(path=str(runtime_file))).call_tool("get_objects_summary"))
    native = summary.data()
    assert native["next_offset"] is None  # one page holds the scene: the whole tree is compared
    facts = {key: native[key] for key in ("scene_name", "active_object", "object_mode", "camera_object", "collections")}
    envelope = lab_execute(lab_port, OFFICIAL_READING)
    assert envelope["status"] == "ok", envelope
    return _by_name(facts), _by_name(envelope["result"])


@pytest.mark.parametrize("scene", ["factory", "busy"])
def test_the_native_summary_states_the_facts_the_lab_wire_reads_in_the_official_way(
    bridge: tuple[Path, int], scene: str
) -> None:
    runtime_file, lab_port = bridge
    if scene == "busy":
        made = lab_execute(lab_port, BUSY_SCENE)
        assert made["status"] == "ok" and made["result"]["objects"] == 52, made
    native, official = _both(runtime_file, lab_port)
    assert native == official
