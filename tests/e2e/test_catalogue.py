"""Every catalogue tool through the official `mcp` client, checked field by field."""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import jsonschema
import pytest

from hermes_blender.client import modern_request
from hermes_blender.headless import HeadlessBlender
from tests.tool_session import Session

OUR_OWN = {
    "render_frames_to_folder",
    "start_render_frames_task",
    "get_render_frames_task",
    "cancel_render_frames_task",
    "export_render_job",
    "undo_agent_steps",
    "redo_agent_steps",
    "get_agent_history",
    "get_scene_changes",
    "save_checkpoint",
    "list_checkpoints",
    "restore_checkpoint",
    "get_view_montage",
    "lookup_blender_api",
    "describe_node_type",
    "get_node_tree",
}
"""Beyond the official Blender Lab catalogue (README › Tools)."""
OFFICIAL_NAMES = {
    "get_objects_summary",
    "get_object_detail_summary",
    "get_blendfile_summary_datablocks",
    "get_blendfile_summary_missing_files",
    "get_blendfile_summary_of_linked_libraries",
    "get_blendfile_summary_path_info",
    "get_blendfile_summary_usage_guess",
    "execute_blender_code",
    "get_screenshot_of_window_as_image",
    "get_screenshot_of_area_as_image",
    "get_screenshot_of_window_as_json",
    "jump_to_tab_by_name",
    "jump_to_tab_by_space_type",
    "jump_to_view3d_object_by_name",
    "jump_to_view3d_object_data_by_name",
    "render_viewport_to_path",
    "render_thumbnail_to_path",
}
GUI_ONLY = {
    "get_screenshot_of_window_as_image": {},
    "get_screenshot_of_area_as_image": {"area_ui_type": "VIEW_3D"},
    "get_screenshot_of_window_as_json": {},
    "jump_to_tab_by_name": {"name": "Layout"},
    "jump_to_tab_by_space_type": {"space_type": "VIEW_3D"},
    "jump_to_view3d_object_by_name": {"name": "Cube"},
    "jump_to_view3d_object_data_by_name": {"name": "Cube"},
}


@pytest.fixture(scope="module")
def blender(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    runtime_file = tmp_path_factory.mktemp("catalogue") / "server.json"
    with HeadlessBlender(runtime_file):
        yield Session(runtime_file)


@pytest.fixture
def factory(blender: Session) -> Session:
    blender.run("import bpy\nbpy.ops.wm.read_homefile(use_factory_startup=True)\nresult = {}")
    return blender


def test_the_catalogue_offers_the_official_names_with_schemas_and_hints(blender: Session) -> None:
    tools = {tool["name"]: tool for tool in asyncio.run(blender.client.list_tools())}
    assert set(tools) == OFFICIAL_NAMES | OUR_OWN
    for name, tool in tools.items():
        assert tool["inputSchema"]["type"] == "object" and tool["description"], name
        hints = tool["annotations"]
        if name.startswith(("get_", "list_", "lookup_", "describe_")):
            assert hints["readOnlyHint"] is True, name
        elif name in ("save_checkpoint", "export_render_job"):  # write files of their own, change nothing
            assert hints["readOnlyHint"] is False and hints["destructiveHint"] is False, name
        else:
            assert hints["destructiveHint"] is True and hints["readOnlyHint"] is False, name


def test_objects_summary_pages_keep_the_official_shape_on_ordinary_scenes(factory: Session) -> None:
    data = factory.ok("get_objects_summary")
    assert (data["total_objects"], data["offset"], data["next_offset"]) == (3, 0, None)
    page = factory.ok("get_objects_summary", {"offset": 1, "limit": 1})
    assert [o["name"] for o in page["collections"][0]["children"][0]["objects"]] == ["Light"]  # Blender's order
    assert page["next_offset"] == 2


def test_object_detail_reports_transform_modifiers_materials_and_visibility(factory: Session) -> None:
    factory.run(
        "import bpy\ncube = bpy.data.objects['Cube']\ncube.location = (1, 2, 3)\ncube.scale = (2, 2, 2)\n"
        "cube.modifiers.new('Bevel', 'BEVEL')\ncube.constraints.new('COPY_LOCATION')\n"
        "child = bpy.data.objects.new('Child', None)\nchild.parent = cube\nbpy.context.scene.collection.objects.link(child)\n"
        "cube.hide_render = True\nresult = {}"
    )
    detail = factory.ok("get_object_detail_summary", {"name": "Cube"})
    assert detail["name"] == "Cube" and detail["type"] == "MESH" and detail["data_name"] == "Cube"
    assert detail["location"] == [1.0, 2.0, 3.0] and detail["scale"] == [2.0, 2.0, 2.0]
    assert detail["dimensions"] == [4.0, 4.0, 4.0] and detail["rotation"]["mode"] == "XYZ"
    assert detail["modifiers"] == [{"name": "Bevel", "type": "BEVEL", "show_viewport": True, "show_render": True}]
    assert detail["constraints"][0]["type"] == "COPY_LOCATION"
    assert detail["materials"] == ["Material"] and detail["children"] == ["Child"] and detail["children_total"] == 1
    assert detail["visibility"]["hide_render"] is True and detail["visibility"]["visible"] is True
    assert detail["collections"] == ["Collection"] and detail["parent"] is None


def test_unknown_object_is_an_error_with_similar_names(factory: Session) -> None:
    result = factory.call("get_object_detail_summary", {"name": "cub"})
    assert result.is_error
    error = json.loads(result.text)
    assert error["state"] == "not_found" and error["similar_names"] == ["Cube"]


def test_blendfile_summaries_on_a_saved_file_with_a_missing_image(factory: Session, tmp_path: Path) -> None:
    blend = tmp_path / "scene.blend"
    factory.run(
        "import bpy\nimg = bpy.data.images.new('Gone', 4, 4)\nimg.source = 'FILE'\n"
        f"img.filepath = {str(tmp_path / 'gone.png')!r}\nimg.use_fake_user = True\n"
        f"bpy.ops.wm.save_as_mainfile(filepath={str(blend)!r})\n"
        f"bpy.ops.wm.save_as_mainfile(filepath={str(blend)!r})\nresult = {{}}"
    )
    counts = factory.ok("get_blendfile_summary_datablocks")
    assert counts["datablock_counts"]["objects"] == 3 and counts["scene_name"] == "Scene"
    assert counts["render_engine"] and "Layout" in counts["workspaces"] and counts["workspace_count"] >= 1
    missing = factory.ok("get_blendfile_summary_missing_files")
    assert (
        missing["missing_files"][0]["name"] == "Gone"
        and missing["missing_count"] == 1
        and missing["total_checked"] >= 1
    )
    path = factory.ok("get_blendfile_summary_path_info")
    # Blender's own flag: clean after a save on 5.x; 4.5's background build keeps it set (README › Blender versions).
    dirty = factory.run("import bpy\nresult = {'dirty': bpy.data.is_dirty}")["dirty"]
    assert path["filepath"] == str(blend) and path["is_saved"] is True and path["is_dirty"] is dirty
    assert path["file_size_bytes"] == blend.stat().st_size and path["backups"] == [f"{blend}1"]
    libraries = factory.ok("get_blendfile_summary_of_linked_libraries")
    assert libraries == {"status": "ok", "direct_libraries": [], "indirect_libraries": [], "total_library_count": 0}
    guesses = factory.ok("get_blendfile_summary_usage_guess")["usage_guesses"]
    assert guesses["modeling"]["evidence"] == 1 and guesses["animation"]["score"] == 0.0
    assert set(guesses["rendering"]) == {"score", "certainty", "evidence"}


def test_linked_libraries_are_listed(factory: Session, tmp_path: Path) -> None:
    library = tmp_path / "lib.blend"
    factory.run(
        f"import bpy\nbpy.ops.wm.save_as_mainfile(filepath={str(library)!r}, copy=True)\n"
        f"with bpy.data.libraries.load({str(library)!r}, link=True) as (src, dst):\n    dst.objects = ['Cube']\n"
        "result = {}"
    )
    libraries = factory.ok("get_blendfile_summary_of_linked_libraries")
    assert libraries["total_library_count"] == 1
    assert libraries["direct_libraries"][0]["exists"] is True and libraries["direct_libraries"][0]["filepath"].endswith(
        "lib.blend"
    )


def test_printed_output_past_the_budget_keeps_its_end_and_says_it_was_cut(factory: Session) -> None:
    answer = factory.ok("execute_blender_code", {"code": "for i in range(100000):\n    print(f'line {i}')"})
    assert answer["output_cut"] is True and len(answer["stdout"]) < 10_100
    assert answer["stdout"].startswith("[... ") and answer["stdout"].endswith("line 99999\n")
    small = factory.ok("execute_blender_code", {"code": "print('short')"})
    assert small == {"result": {}, "stdout": "short\n"}


def test_execute_blender_code_returns_result_and_output_and_reports_errors_as_errors(factory: Session) -> None:
    answer = factory.ok("execute_blender_code", {"code": "print('hi')\nresult = {'n': len(bpy.data.objects)}"})
    assert answer == {"result": {"n": 3}, "stdout": "hi\n"}
    failed = factory.call("execute_blender_code", {"code": "print('partial')\n1/0"})
    assert failed.is_error
    error = json.loads(failed.text)
    assert (
        error["state"] == "execution_error" and "ZeroDivisionError" in error["error"] and error["stdout"] == "partial\n"
    )
    assert (
        factory.call("execute_blender_code", {"code": "result = {'obj': bpy.data.objects[0]}"})
        .structured["result"]["obj"]
        .startswith("bpy.data.objects")
    )


def test_gui_only_tools_answer_no_interactive_session_in_background(blender: Session) -> None:
    for name, arguments in GUI_ONLY.items():
        result = blender.call(name, arguments)
        assert result.is_error, name
        assert json.loads(result.text)["state"] == "no_interactive_session", name


def test_renders_write_exactly_where_asked_and_restore_settings(factory: Session, tmp_path: Path) -> None:
    factory.run(
        "import bpy\nscene = bpy.context.scene\nscene.render.engine = 'CYCLES'\nscene.cycles.samples = 64\n"
        "scene.cycles.device = 'CPU'\nresult = {}"
    )
    viewport = factory.ok("render_viewport_to_path", {"output_path": str(tmp_path / "viewport.png")})
    assert viewport["filepath"] == str(tmp_path / "viewport.png") and (tmp_path / "viewport.png").stat().st_size > 0
    assert viewport["engine"] == "BLENDER_WORKBENCH"
    thumbnail = factory.ok("render_thumbnail_to_path", {"output_path": str(tmp_path / "thumb")})
    assert thumbnail["filepath"] == str(tmp_path / "thumb.png") and (thumbnail["width"], thumbnail["height"]) == (
        256,
        144,
    )
    after = factory.run(
        "import bpy\nr = bpy.context.scene.render\n"
        "result = {'engine': r.engine, 'x': r.resolution_x, 'samples': bpy.context.scene.cycles.samples}"
    )
    assert after == {"engine": "CYCLES", "x": 1920, "samples": 64}
    bad = factory.call("render_viewport_to_path", {"output_path": str(tmp_path / "no" / "such" / "dir.png")})
    assert bad.is_error and json.loads(bad.text)["state"] == "invalid_path"


def test_a_render_blender_refuses_says_blenders_reason_and_restores_settings(factory: Session, tmp_path: Path) -> None:
    factory.run("import bpy\nbpy.context.scene.camera = None\nresult = {}")
    refused = factory.call("render_thumbnail_to_path", {"output_path": str(tmp_path / "none.png")})
    assert refused.is_error
    message = json.loads(refused.text)["error"]
    assert message.startswith("Blender could not render: ") and "camera" in message.lower()  # Blender's own words
    assert factory.run("import bpy\nresult = {'x': bpy.context.scene.render.resolution_x}") == {"x": 1920}


def test_a_100k_object_scene_answers_in_bounded_stable_pages(blender: Session) -> None:
    blender.run(
        "import bpy\nbpy.ops.wm.read_homefile(use_empty=True)\nbig = bpy.data.collections.new('Big')\n"
        "bpy.context.scene.collection.children.link(big)\nlink = big.objects.link\nnew = bpy.data.objects.new\n"
        "for i in range(100000):\n    link(new(f'obj_{i:06d}', None))\nresult = {}"
    )
    started = time.monotonic()
    first = blender.call("get_objects_summary")
    elapsed = time.monotonic() - started
    assert not first.is_error and len(first.text) < 25_000  # sized for a model by default
    data = first.structured
    assert data["total_objects"] == 100_000 and data["next_offset"] == 100
    assert data["counts"]["by_type"] == {"EMPTY": 100_000}
    names = [o["name"] for o in data["collections"][0]["children"][0]["objects"]]
    assert names == [f"obj_{i:06d}" for i in range(100)]
    last = blender.ok("get_objects_summary", {"offset": 99_500, "limit": 5000})
    tail = [o["name"] for o in last["collections"][0]["children"][0]["objects"]]
    assert tail == [f"obj_{i:06d}" for i in range(99_500, 100_000)] and last["next_offset"] is None
    again = blender.ok("get_objects_summary")
    assert again == data  # stable across calls
    print(f"first page of 100k objects: {elapsed * 1000:.0f} ms, {len(first.text.encode())} bytes")


def test_a_name_that_is_not_utf8_in_the_blend_is_replaced_not_fatal(factory: Session, tmp_path: Path) -> None:
    saved, patched = tmp_path / "plain.blend", tmp_path / "bad-name.blend"
    factory.run(
        "import bpy\nbpy.data.objects['Cube'].name = 'Qqqqzz'\n"
        f"bpy.ops.wm.save_as_mainfile(filepath={str(saved)!r}, compress=False, copy=True)\n"
        "bpy.data.objects['Qqqqzz'].name = 'Cube'\nresult = {}"
    )
    data = saved.read_bytes()
    assert data.count(b"OBQqqqzz") == 1
    patched.write_bytes(data.replace(b"OBQqqqzz", b"OBQqq\xe9zz"))  # one byte that is not UTF-8
    with HeadlessBlender(tmp_path / "server.json", blend=patched):
        summary = Session(tmp_path / "server.json").ok("get_objects_summary")
    names = [o["name"] for o in summary["collections"][0]["children"][0]["objects"]]
    assert sorted(names) == ["Camera", "Light", "Qqq\ufffdzz"] and summary["status"] == "ok"


def _raw_render_state(factory: Session, arguments_json: str) -> str:
    """A call the SDK cannot send (a lone surrogate escape), posted as raw JSON-RPC."""
    endpoint = factory.client.endpoint()
    meta = '{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}'
    body = (
        '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"render_viewport_to_path",'
        f'"arguments":{arguments_json},"_meta":{meta}}}}}'
    )
    _, envelope_headers = modern_request("tools/call", {"name": "render_viewport_to_path"})
    headers = {**endpoint.headers(), **envelope_headers}
    reply = httpx2.post(endpoint.url, content=body.encode(), headers=headers, timeout=60).json()
    assert reply["result"]["isError"] is True
    return json.loads(reply["result"]["content"][0]["text"])["state"]


def _refused(factory: Session, output_path: str, state: str = "invalid_path", **extra: Any) -> str:
    result = factory.call("render_viewport_to_path", {"output_path": output_path, **extra})
    assert result.is_error, output_path
    error = json.loads(result.text)
    assert error["state"] == state, error
    return error["error"]


def test_render_paths_mean_exactly_what_they_say(factory: Session, tmp_path: Path) -> None:
    """Even with code execution off these tools write files: nothing may land anywhere but the path given."""
    victim = tmp_path / "x.txt"
    victim.write_text("keep me")
    _refused(factory, str(tmp_path / "x.txt\x00.png"))  # would overwrite x.txt with File Extensions off
    assert _raw_render_state(factory, f'{{"output_path": "{tmp_path}/bad\\ud800.png"}}') == "invalid_path"
    _refused(factory, str(tmp_path / ("d" * 1100)) + ".png", state="invalid_arguments")  # Blender would cut it short
    _refused(factory, str(tmp_path / ("é" * 520)) + ".png")  # under 1024 characters, over Blender's 1024 bytes
    (tmp_path / "link.png").symlink_to(victim)
    _refused(factory, str(tmp_path / "link.png"))
    os.mkfifo(tmp_path / "fifo.png")  # writing into it would freeze Blender's main thread
    _refused(factory, str(tmp_path / "fifo.png"))
    assert victim.read_text() == "keep me" and sorted(p.name for p in tmp_path.iterdir()) == [
        "fifo.png",
        "link.png",
        "x.txt",
    ]


def test_an_existing_render_is_replaced_only_when_asked_and_an_old_file_is_never_success(
    factory: Session, tmp_path: Path
) -> None:
    target = tmp_path / "shot.png"
    target.write_bytes(b"old")
    assert "overwrite: true" in _refused(factory, str(target), state="file_exists")
    assert target.read_bytes() == b"old"
    written = factory.ok("render_viewport_to_path", {"output_path": str(target), "overwrite": True})
    assert written["filepath"] == str(target) and target.read_bytes()[:4] == b"\x89PNG"


def test_the_summary_reports_the_same_facts_as_the_official_tool(factory: Session) -> None:
    """The eye icon (hide_get), the collection's own hide_viewport, no mode without an active object,
    and instance_collection named for empties only: the official server's semantics for the same names."""
    factory.run(
        "import bpy\ncube = bpy.data.objects['Cube']\ncube.hide_set(True)\n"
        "bpy.data.collections['Collection'].hide_viewport = True\n"
        "group = bpy.data.collections.new('Group')\nmesh = bpy.data.objects['Light']\n"
        "mesh.instance_collection = group\n"
        "empty = bpy.data.objects.new('Holder', None)\nempty.instance_type = 'COLLECTION'\n"
        "empty.instance_collection = group\nbpy.context.scene.collection.objects.link(empty)\n"
        "bpy.context.view_layer.objects.active = None\nresult = {}"
    )
    summary = factory.ok("get_objects_summary")
    root = summary["collections"][0]
    collection = root["children"][0]
    objects = {o["name"]: o for o in root["objects"] + collection["objects"]}
    assert summary["object_mode"] is None and summary["active_object"] is None
    assert collection["hide_viewport"] is True and objects["Cube"]["hide_viewport"] is True
    assert objects["Holder"]["instance_collection"] == "Group" and "instance_collection" not in objects["Light"]


IMAGE_TOOLS = {"get_screenshot_of_window_as_image", "get_screenshot_of_area_as_image", "get_view_montage"}


def _type_arrays(schema: Any, where: str = "") -> list[str]:
    if isinstance(schema, dict):
        found = [where] if isinstance(schema.get("type"), list) else []
        return found + [hit for key, value in schema.items() for hit in _type_arrays(value, f"{where}/{key}")]
    if isinstance(schema, list):
        return [hit for index, value in enumerate(schema) for hit in _type_arrays(value, f"{where}/{index}")]
    return []


def test_every_json_tool_declares_a_shallow_output_schema_that_admits_its_errors(blender: Session) -> None:
    tools = {tool["name"]: tool for tool in asyncio.run(blender.client.list_tools())}
    for name, tool in tools.items():
        if name in IMAGE_TOOLS:
            assert "outputSchema" not in tool, name  # as the official server: images are content, not JSON
            continue
        schema = tool["outputSchema"]
        jsonschema.Draft202012Validator.check_schema(schema)
        answer, error = schema["anyOf"]
        assert schema["type"] == "object" and answer["type"] == "object" and answer["required"], name
        assert error["required"] == ["state", "error"], name
        assert _type_arrays(tool) == [], name  # a one-type dialect (Gemini's) mishandles ["string", "null"]


@pytest.mark.parametrize("scene", ["factory", "57 objects"])
def test_every_result_validates_against_its_schema(factory: Session, tmp_path: Path, scene: str) -> None:
    factory.run("import bpy\nbpy.context.scene.render.engine = 'BLENDER_WORKBENCH'\nresult = {}")  # a fast thumbnail
    if scene != "factory":
        factory.run(
            "import bpy\nfor i in range(54):\n    o = bpy.data.objects.new(f'E{i:02d}', None)\n"
            "    bpy.context.scene.collection.objects.link(o)\nresult = {}"
        )
    schemas = {tool["name"]: tool.get("outputSchema") for tool in asyncio.run(factory.client.list_tools())}
    calls = [
        ("get_objects_summary", {}),
        ("get_object_detail_summary", {"name": "Cube"}),
        ("get_object_detail_summary", {"name": "Cube", "fields": ["location"]}),
        ("get_blendfile_summary_datablocks", {}),
        ("get_blendfile_summary_missing_files", {}),
        ("get_blendfile_summary_of_linked_libraries", {}),
        ("get_blendfile_summary_path_info", {}),
        ("get_blendfile_summary_usage_guess", {}),
        ("execute_blender_code", {"code": "print('hi')\nresult = {'n': len(bpy.data.objects)}"}),
        ("lookup_blender_api", {"query": "scene.render.engine"}),
        ("lookup_blender_api", {"query": "Objct.locaton"}),
        ("describe_node_type", {"node_type": "Principled BSDF"}),
        ("get_node_tree", {"owner": "material:Material"}),
        ("render_viewport_to_path", {"output_path": str(tmp_path / "v.png")}),
        ("render_thumbnail_to_path", {"output_path": str(tmp_path / "t.png")}),
    ]
    for name, arguments in calls:
        jsonschema.validate(factory.ok(name, arguments), schemas[name]["anyOf"][0])  # the answer's own shape


def test_every_tool_error_validates_against_the_tools_output_schema(blender: Session) -> None:
    """Gemini CLI parses an error's JSON text into structured content and checks it against the schema."""
    schemas = {tool["name"]: tool.get("outputSchema") for tool in asyncio.run(blender.client.list_tools())}
    calls = [
        ("get_object_detail_summary", {"name": "No such object"}),
        ("execute_blender_code", {"code": "raise ValueError('on purpose')"}),
        ("restore_checkpoint", {"name": "never saved"}),
        ("get_render_frames_task", {"task_id": "no-such-task"}),
    ]
    for name, arguments in calls:
        result = blender.call(name, arguments)
        assert result.is_error, (name, result.text)
        error = json.loads(result.text)
        assert error["state"] and error["error"], error
        jsonschema.validate(error, schemas[name])
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(error, schemas[name]["anyOf"][0])  # it is the error branch that admits it


def test_agent_code_moves_the_revision_on_and_an_old_revision_asks_to_start_again(factory: Session) -> None:
    first = factory.ok("get_objects_summary", {"limit": 1})
    factory.run(
        "import bpy\nbpy.context.scene.collection.objects.link(bpy.data.objects.new('Added', None))\nresult = {}"
    )
    refused = factory.call("get_objects_summary", {"offset": 1, "limit": 1, "revision": first["revision"]})
    assert refused.is_error and refused.data()["state"] == "scene_changed"
    now = factory.ok("get_objects_summary", {})
    assert now["counts"]["total"] == first["counts"]["total"] + 1 and now["revision"] != first["revision"]


def test_object_detail_evaluates_only_its_object_and_leaves_the_file_unchanged(factory: Session) -> None:
    factory.run(
        "import bpy\ncube = bpy.data.objects['Cube']\ncube.scale = (2, 2, 2)\n"
        "solid = cube.modifiers.new('Solid', 'SOLIDIFY')\nsolid.thickness = 1.0\nsolid.offset = 1.0\nresult = {}"
    )
    detail = factory.ok("get_object_detail_summary", {"name": "Cube"})
    truth = factory.run(
        "import bpy\nbpy.context.view_layer.update()\n"  # the whole scene evaluated, to compare with
        "result = {'d': list(bpy.data.objects['Cube'].dimensions), 'scenes': len(bpy.data.scenes)}"
    )
    assert detail["dimensions"] == truth["d"] and truth["d"][0] > 4.0  # the modifier grew it
    assert truth["scenes"] == 1  # the scene it was measured in is gone
