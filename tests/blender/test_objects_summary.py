"""get_objects_summary on real scenes, in Blender's own process."""

from __future__ import annotations

import importlib
import json
from collections import Counter
from pathlib import Path
from types import ModuleType

import bpy
import pytest

from hermes_blender.blender_host import ADDON_MODULE


def _summary() -> dict:
    scene = importlib.import_module(f"{ADDON_MODULE}.tools.scene")
    return scene.objects_summary({}, None)


def test_factory_scene_summary_has_the_official_shape(factory_scene: None) -> None:
    data = _summary()
    assert data["status"] == "ok" and data["scene_name"] == "Scene"
    assert data["active_object"] == "Cube" and data["camera_object"] == "Camera" and data["object_mode"] == "OBJECT"
    [root] = data["collections"]
    assert root["name"] == "Scene Collection" and root["objects"] == []
    [collection] = root["children"]
    assert collection["name"] == "Collection" and collection["exclude"] is False
    objects = {obj["name"]: obj for obj in collection["objects"]}
    assert [obj["name"] for obj in collection["objects"]] == [
        "Cube",
        "Light",
        "Camera",
    ]  # Blender's own order: as linked
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
    assert json.loads(json.dumps(_summary())) == _summary()


def _tools() -> ModuleType:
    return importlib.import_module(f"{ADDON_MODULE}.tools.scene")


def _index() -> ModuleType:
    return importlib.import_module(f"{ADDON_MODULE}.tools.scene_index")


def _big_scene(per_collection: dict[str, int], name_length: int = 8) -> list[str]:
    """Collections under the scene, each with its objects (meshes and empties alternating); names in link order."""
    scene = bpy.context.scene
    mesh = bpy.data.meshes.new("shared")
    names = []
    for collection_name, count in per_collection.items():
        collection = bpy.data.collections.new(collection_name)
        scene.collection.children.link(collection)
        for i in range(count):
            obj = bpy.data.objects.new(f"{collection_name}_{i:06d}".ljust(name_length, "x"), mesh if i % 2 else None)
            collection.objects.link(obj)
            names.append(obj.name)
    importlib.import_module(f"{ADDON_MODULE}.scene_revision").changed()  # what the bridge does after agent code ran
    return names


def _objects(node: dict) -> list[dict]:
    return node["objects"] + [obj for child in node["children"] for obj in _objects(child)]


def _read_all(arguments: dict) -> list[dict]:
    seen, offset, revision = [], 0, 0
    while offset is not None:
        page = _tools().objects_summary({**arguments, "offset": offset, "revision": revision}, None)
        revision = page["revision"]
        seen += [obj for root in page["collections"] for obj in _objects(root)]
        offset = page["next_offset"]
    return seen


@pytest.fixture(params=["sliced", "listed"])
def reading(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Both ways a page reads a collection: Blender's slice, and (for big collections) the list kept per revision."""
    if request.param == "listed":
        monkeypatch.setattr(_index(), "LISTED_FROM", 1)


def test_pages_read_every_object_once_in_order_and_count_first(factory_scene: None, reading: None) -> None:
    names = _big_scene({"A": 250, "B": 3, "C": 0, "D": 180})
    first = _tools().objects_summary({}, None)
    counts = first["counts"]
    assert counts["total"] == first["total_objects"] == 3 + len(names)
    assert counts["by_type"] == dict(Counter(obj.type for obj in bpy.context.scene.objects))
    assert {entry["name"]: entry["objects"] for entry in counts["by_collection"]}["A"] == 250
    seen = [obj["name"] for obj in _read_all({})]
    # Collections depth first, children by name (A, B, C, Collection, D); objects in Blender's order, as linked.
    assert seen == [*names[:253], "Cube", "Light", "Camera", *names[253:]]


def test_the_default_answer_fits_the_budget_even_with_long_names(factory_scene: None) -> None:
    _big_scene({"Long": 400}, name_length=63)
    parent = bpy.data.objects.new("P" * 63, bpy.data.meshes.new("M" * 63))
    for obj in bpy.data.collections["Long"].objects:
        obj.parent = parent
        if obj.data is not None:
            obj.data = parent.data
    tools = _tools()
    page = tools.objects_summary({}, None)
    text = json.dumps(page)
    assert len(text) < 25_000 and page["next_offset"] is not None and page.get("cut_at_budget") is True
    assert [o["name"] for o in _read_all({})][3:] == [o.name for o in bpy.data.collections["Long"].objects]
    asked = tools.objects_summary({"limit": 400}, None)  # a caller who sizes the page gets it whole
    assert len([o for root in asked["collections"] for o in _objects(root)]) == 400


def test_filters_keep_only_what_was_asked(factory_scene: None) -> None:
    _big_scene({"Trees": 20, "Rocks": 10})
    bpy.data.objects["Rocks_000003"].select_set(True)
    bpy.data.objects["Trees_000004"].hide_set(True)
    tools = _tools()
    names = lambda **arguments: sorted(o["name"] for o in _read_all(arguments))  # noqa: E731
    assert names(type=["LIGHT", "CAMERA"]) == ["Camera", "Light"]
    assert names(collection="Rocks", type=["MESH"]) == [f"Rocks_{i:06d}" for i in range(1, 10, 2)]
    assert names(name="trees_00001?") == [f"Trees_{i:06d}" for i in range(10, 20)]
    assert names(selected=True) == ["Cube", "Rocks_000003"]
    assert "Trees_000004" not in names(visible=True) and "Trees_000005" in names(visible=True)
    page = tools.objects_summary({"type": ["LIGHT"], "fields": ["type"]}, None)
    assert page["total_objects"] == 1 and _objects(page["collections"][0]) == [{"name": "Light", "type": "LIGHT"}]
    assert page["counts"]["total"] == 33  # the counts are the scene's, whatever the filter
    unfiltered = tools.objects_summary({"fields": ["parent"], "limit": 2}, None)
    assert _objects(unfiltered["collections"][0]) == [
        {"name": "Cube", "parent": None},
        {"name": "Light", "parent": None},
    ]


def test_a_collection_that_is_not_there_is_named_in_the_error(factory_scene: None) -> None:
    errors = importlib.import_module(f"{ADDON_MODULE}.errors")
    with pytest.raises(errors.ToolError, match="No collection named 'Nope'") as caught:
        _tools().objects_summary({"collection": "Nope"}, None)
    assert caught.value.state == "not_found"


def test_a_revision_from_before_a_change_asks_to_start_again(factory_scene: None) -> None:
    errors = importlib.import_module(f"{ADDON_MODULE}.errors")
    before = _tools().objects_summary({}, None)["revision"]
    _big_scene({"New": 2})
    with pytest.raises(errors.ToolError, match="changed since revision") as caught:
        _tools().objects_summary({"offset": 100, "revision": before}, None)
    assert caught.value.state == "scene_changed"


def test_objects_removed_without_any_signal_never_leave_a_page_wrong(factory_scene: None, reading: None) -> None:
    names = _big_scene({"Gone": 10})
    _tools().objects_summary({}, None)  # the counts are kept now
    for name in names[:6]:
        bpy.data.objects.remove(bpy.data.objects[name])  # no handler runs for this in a background Blender
    page = _tools().objects_summary({}, None)
    assert page["counts"]["total"] == page["total_objects"] == 7
    assert [o["name"] for o in _read_all({})] == ["Cube", "Light", "Camera", *names[6:]]


@pytest.mark.parametrize("spare", [0, -1])
def test_a_page_is_cut_exactly_where_its_entries_pass_the_budget(addon: ModuleType, spare: int) -> None:
    """Each entry counts as its JSON text and one separator; a page one character over is cut, one that fits is not."""
    scene = importlib.import_module(f"{ADDON_MODULE}.tools.scene")
    entries = [{"name": "x" * length} for length in (10, 20, 30)]
    budget = sum(len(json.dumps(entry)) + 1 for entry in entries) + spare
    page = scene._Page(0, 10, budget)
    for entry in entries:
        page.add(entry)
    page.fit()
    assert (page.cut, len(page.entries)) == ((False, 3) if spare == 0 else (True, 2))


def _detail(name: str) -> dict:
    return _tools().object_detail({"name": name}, None)


def _linked(name: str, data: object = None) -> bpy.types.Object:
    obj = bpy.data.objects.new(name, data)
    bpy.context.scene.collection.objects.link(obj)
    return obj


def test_an_object_found_before_is_never_answered_stale_once_renamed_removed_or_replaced(factory_scene: None) -> None:
    errors = importlib.import_module(f"{ADDON_MODULE}.errors")
    names = _big_scene({"Seen": 4})
    _tools().objects_summary({}, None)  # the page shows them: each is found from now on without a walk
    assert _detail(names[0])["name"] == names[0]
    bpy.data.objects[names[0]].name = "Renamed"
    bpy.data.objects.remove(bpy.data.objects[names[1]])
    bpy.data.objects.remove(bpy.data.objects[names[2]])
    _linked(names[2], bpy.data.meshes.new("new"))  # another object under a remembered name
    for gone in names[:2]:
        with pytest.raises(errors.ToolError) as caught:
            _detail(gone)
        assert caught.value.state == "not_found"
    assert _detail("Renamed")["name"] == "Renamed"
    assert _detail(names[2])["type"] == "MESH" and _detail(names[2])["data_name"] == "new"  # it was an empty
    bpy.ops.wm.read_homefile(use_factory_startup=True)  # every object freed and read again
    assert _detail("Cube")["dimensions"] == [2.0, 2.0, 2.0]


def test_an_object_linked_from_a_library_under_a_local_name_never_stands_in_for_the_local_one(
    factory_scene: None, tmp_path: Path
) -> None:
    """Only a local object owns its name; a linked one may share it, so the name memory leaves it to Blender."""
    library = tmp_path / "library.blend"
    local = _linked("Shared", bpy.data.meshes.new("shared mesh"))
    bpy.data.libraries.write(str(library), {local})
    local.location = (1.0, 2.0, 3.0)  # the library's copy stays at the origin
    with bpy.data.libraries.load(str(library), link=True) as (_, into):
        into.objects = ["Shared"]
    [from_library] = into.objects
    bpy.context.scene.collection.objects.link(from_library)
    importlib.import_module(f"{ADDON_MODULE}.scene_revision").changed()
    page = _tools().objects_summary({}, None)  # the linked one comes last, so it is the one last seen under the name
    assert [o["name"] for o in page["collections"][0]["objects"]] == ["Shared", "Shared"]
    assert bpy.data.objects.get("Shared") == local
    assert _detail("Shared")["location"] == [1.0, 2.0, 3.0]


def test_dimensions_read_from_an_objects_own_data_are_blenders_evaluated_ones(factory_scene: None) -> None:
    """Fast (the object's own data) or measured (a scene of its own), each the size Blender's evaluation gives."""
    points = bpy.data.meshes.new("points")
    points.from_pydata([(0, 0, 0), (1, 2, 3), (-0.3, 0.7, 0.1)], [], [])
    turned = _linked("turned", points)
    turned.scale, turned.rotation_euler, turned.delta_scale = (2, -3, 0.5), (0.3, 0.7, 1.1), (1.5, 1, 1)
    _linked("empty").empty_display_size = 3
    instancer = _linked("instancer")
    instancer.instance_type, instancer.instance_collection = "COLLECTION", bpy.data.collections["Collection"]
    _linked("spot", bpy.data.lights.new("spot", "SPOT"))
    _linked("area", bpy.data.lights.new("area", "AREA"))
    _linked("speaker", bpy.data.speakers.new("speaker"))
    _linked("probe", bpy.data.lightprobes.new("probe", "SPHERE"))
    _linked("empty mesh", bpy.data.meshes.new("nothing"))
    keyed = _linked("keyed", bpy.data.meshes.new("keyed"))
    keyed.data.from_pydata([(0, 0, 0), (1, 1, 1)], [], [])
    keyed.shape_key_add(name="Basis")
    keyed.shape_key_add(name="Far").data[1].co = (5, 5, 5)
    keyed.data.shape_keys.key_blocks["Far"].value = 1.0
    child = _linked("child", points)
    child.parent = bpy.data.objects["Cube"]
    bpy.data.objects["Cube"].scale = (2, 1, 1)
    arrayed = _linked("arrayed", points)
    arrayed.modifiers.new("Array", "ARRAY").count = 3
    held = _linked("held", points)
    limit = held.constraints.new("LIMIT_SCALE")
    limit.use_max_x, limit.max_x = True, 0.5
    driven = _linked("driven", points)
    driven.driver_add("scale", 0).driver.expression = "4"
    names = [obj.name for obj in bpy.data.objects]
    told = {name: _detail(name)["dimensions"] for name in names}
    bpy.context.view_layer.update()  # the whole scene evaluated, to compare with
    assert told == {name: list(bpy.data.objects[name].dimensions) for name in names}
    assert told["turned"] == [3.8999998569488525, 6.0, 1.5] and told["keyed"][0] == 5.0  # the shape key moved it
    assert told["held"][0] == 0.6499999761581421 and told["driven"][0] == 5.199999809265137


class _Reads:
    """An object that says which of its attributes were read (the detail's walks are attribute reads)."""

    def __init__(self, obj: bpy.types.Object) -> None:
        self.read: set[str] = set()
        self._obj = obj

    def __getattr__(self, name: str) -> object:
        self.read.add(name)
        return getattr(self._obj, name)


def test_a_detail_reads_only_the_fields_asked_and_never_walks_for_the_others(
    factory_scene: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    scene_index = importlib.import_module(f"{ADDON_MODULE}.tools.scene_index")
    cube = _Reads(bpy.data.objects["Cube"])
    monkeypatch.setattr(scene_index, "object_named", lambda name: cube)
    answer = _tools().object_detail({"name": "Cube", "fields": ["location", "dimensions"]}, None)
    assert answer == {
        "status": "ok",
        "name": "Cube",
        "type": "MESH",
        "location": [0.0, 0.0, 0.0],
        "dimensions": [2.0, 2.0, 2.0],
    }
    assert not cube.read & {"children", "users_collection", "material_slots"}
    whole = _tools().object_detail({"name": "Cube"}, None)
    official = "status name type location rotation scale dimensions parent children modifiers constraints materials"
    assert set(whole) == {*official.split(), "visibility", "data_name", "collections", "children_total"}
    assert whole["collections"] == ["Collection"] and whole["children_total"] == 0
    assert {"children", "users_collection"} <= cube.read
    children = _tools().object_detail({"name": "Cube", "fields": ["children"]}, None)
    assert children == {"status": "ok", "name": "Cube", "type": "MESH", "children": [], "children_total": 0}


def test_naming_the_name_in_fields_is_accepted_as_the_description_says_it_always_comes(factory_scene: None) -> None:
    schema = importlib.import_module(f"{ADDON_MODULE}.tools.schema")
    catalogue = importlib.import_module(f"{ADDON_MODULE}.tools.catalogue").CATALOGUE
    schema.validate(catalogue["get_objects_summary"].input_schema, {"fields": ["name", "type"]})
    schema.validate(catalogue["get_object_detail_summary"].input_schema, {"name": "Cube", "fields": ["name", "type"]})
    answer = _tools().object_detail({"name": "Cube", "fields": ["name", "type"]}, None)
    assert answer == {"status": "ok", "name": "Cube", "type": "MESH"}
    with pytest.raises(Exception, match="fields"):
        schema.validate(catalogue["get_objects_summary"].input_schema, {"fields": ["colour"]})
