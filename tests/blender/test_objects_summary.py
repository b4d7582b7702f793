"""get_objects_summary on real scenes, in Blender's own process."""

from __future__ import annotations

import importlib
from types import ModuleType

import bpy

from hermes_blender.blender_host import ADDON_MODULE


def _summary() -> dict:
    scene = importlib.import_module(f"{ADDON_MODULE}.tools.scene")
    return scene.objects_summary({})


def test_factory_scene_summary_has_the_official_shape(factory_scene: None) -> None:
    data = _summary()
    assert data["status"] == "ok" and data["scene_name"] == "Scene"
    assert data["active_object"] == "Cube" and data["camera_object"] == "Camera" and data["object_mode"] == "OBJECT"
    [root] = data["collections"]
    assert root["name"] == "Scene Collection" and root["objects"] == []
    [collection] = root["children"]
    assert collection["name"] == "Collection" and collection["exclude"] is False
    objects = {obj["name"]: obj for obj in collection["objects"]}
    assert [obj["name"] for obj in collection["objects"]] == ["Camera", "Cube", "Light"]
    assert objects["Cube"] == {
        "name": "Cube",
        "type": "MESH",
        "parent": None,
        "data_name": "Cube",
        "selected": True,
        "visible": True,
        "hide_viewport": False,
    }
    assert objects["Camera"]["type"] == "CAMERA" and objects["Light"]["type"] == "LIGHT"
    assert not objects["Camera"]["selected"]


def test_nested_collections_parents_and_instances_are_reported(factory_scene: None) -> None:
    scene = bpy.context.scene
    props = bpy.data.collections.new("Props")
    scene.collection.children.link(props)
    inner = bpy.data.collections.new("Inner")
    props.children.link(inner)
    child = bpy.data.objects.new("Child", None)
    child.parent = bpy.data.objects["Cube"]
    inner.objects.link(child)
    instancer = bpy.data.objects.new("Instancer", None)
    instancer.instance_type = "COLLECTION"
    instancer.instance_collection = inner
    scene.collection.objects.link(instancer)
    bpy.context.view_layer.layer_collection.children["Props"].exclude = True

    data = _summary()
    [root] = data["collections"]
    assert [obj["name"] for obj in root["objects"]] == ["Instancer"]
    assert root["objects"][0]["instance_collection"] == "Inner" and root["objects"][0]["data_name"] is None
    assert [c["name"] for c in root["children"]] == ["Collection", "Props"]
    props_entry = root["children"][1]
    assert props_entry["exclude"] is True
    [inner_entry] = props_entry["children"]
    assert inner_entry["objects"][0]["parent"] == "Cube"


def test_summary_is_plain_json(factory_scene: ModuleType) -> None:
    import json

    assert json.loads(json.dumps(_summary())) == _summary()
