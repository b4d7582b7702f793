"""In the interactive Blender 5.2: the agent's change is told, the user's own edit (real keys, xdotool) makes the
agent's undo refuse and is named by get_scene_changes, and the panel's Undo button (a real click) takes the
agent's step back."""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import time
from pathlib import Path

import pytest

from tests.gui.harness import ARTIFACTS, GuiBlender
from tests.gui.test_lifecycle import _open_hermes_panel
from tests.resource_updates import CUBE, listening
from tests.resource_updates import SCENE as SCENE_URI

pytestmark = pytest.mark.timeout(600)

THREE_CHANGES = """
import bpy
bpy.data.objects.remove(bpy.data.objects["Light"])
bpy.data.objects["Cube"].location = (0.0, 0.0, 0.0)
sphere = bpy.data.objects.new("Sphere", bpy.data.meshes.new("SphereMesh"))
bpy.context.scene.collection.objects.link(sphere)
for obj in bpy.context.view_layer.objects:
    obj.select_set(obj.name == "Cube")
bpy.context.view_layer.objects.active = bpy.data.objects["Cube"]
result = {}
"""
VIEWPORT = """
window = bpy.context.window_manager.windows[0]
area = next(area for area in window.screen.areas if area.type == "VIEW_3D")
region = next(region for region in area.regions if region.type == "WINDOW")
result = {"x": region.x + region.width // 2, "y": window.height - region.y - region.height // 2}
"""


def _keys(blender: GuiBlender, *keys: str) -> None:
    for key in keys:
        subprocess.run(["xdotool", "key", key], env=blender.env, check=True, timeout=30)
        time.sleep(0.3)


def _by_hand(blender: GuiBlender, *keys: str) -> None:
    """The person at Blender: pointer over the viewport, then these keys."""
    viewport = blender.probe(VIEWPORT)
    subprocess.run(["xdotool", "mousemove", str(viewport["x"]), str(viewport["y"])], env=blender.env, check=True)
    time.sleep(0.5)
    _keys(blender, *keys)
    time.sleep(1.0)


def _move_cube_by_hand(blender: GuiBlender) -> None:
    """G X 2 Enter: move the selection (the Cube) 2 along X."""
    _by_hand(blender, "g", "x", "2", "Return")


SCENE = (
    "result = {'objects': {o.name: [round(v, 5) for v in o.matrix_world.col[3]] for o in bpy.data.objects}, "
    "'counts': {k: len(getattr(bpy.data, k)) for k in ('objects', 'meshes', 'lights', 'cameras')}}"
)


def test_a_call_that_adds_moves_and_deletes_is_told_and_undone_exactly_and_redone(own_gui: GuiBlender) -> None:
    before = own_gui.code(SCENE)
    moved = THREE_CHANGES.replace("(0.0, 0.0, 0.0)", "(4.0, 5.0, 6.0)")
    told = own_gui.call("execute_blender_code", {"code": moved}).data()["changes"]
    assert (told["added"], told["removed"], told["transformed"]) == (["Sphere"], ["Light"], ["Cube"])
    after_change = own_gui.code(SCENE)
    undone = own_gui.call("undo_agent_steps", {"steps": 1})
    assert not undone.is_error, undone.data()
    assert own_gui.code(SCENE) == before
    assert not own_gui.call("redo_agent_steps", {"steps": 1}).is_error
    assert own_gui.code(SCENE) == after_change


def test_a_checkpoint_restores_a_scene_whose_objects_were_all_deleted_and_keeps_the_users_file(
    own_gui: GuiBlender, tmp_path: Path
) -> None:
    user_file = tmp_path / "project" / "chair.blend"
    user_file.parent.mkdir()
    own_gui.code(f"bpy.ops.wm.save_as_mainfile(filepath={str(user_file)!r})")
    on_disk = hashlib.sha256(user_file.read_bytes()).hexdigest()
    before = own_gui.code(SCENE)
    assert not own_gui.call("save_checkpoint", {"name": "before cleanup"}).is_error
    own_gui.code("for o in list(bpy.data.objects): bpy.data.objects.remove(o)")
    restored = own_gui.call("restore_checkpoint", {"name": "before cleanup"})
    assert not restored.is_error, restored.data()
    assert own_gui.code(SCENE) == before
    assert own_gui.code("result = {'path': bpy.data.filepath, 'dirty': bpy.data.is_dirty}") == {
        "path": str(user_file),
        "dirty": True,
    }
    assert hashlib.sha256(user_file.read_bytes()).hexdigest() == on_disk
    rescue = restored.data()["rescue"]["name"]
    assert not own_gui.call("restore_checkpoint", {"name": rescue}).is_error
    assert own_gui.code("result = {'n': len(bpy.data.objects)}") == {"n": 0}  # the rescue holds the deleted-all state
    own_gui.screenshot("checkpoint-restored-rescue")


def test_a_users_edit_after_the_agents_step_makes_undo_refuse_and_is_named_since(own_gui: GuiBlender) -> None:
    changed = own_gui.call("execute_blender_code", {"code": THREE_CHANGES}).data()["changes"]
    assert changed["added"] == ["Sphere"] and changed["removed"] == ["Light"]
    _move_cube_by_hand(own_gui)
    assert own_gui.probe("result = bpy.data.objects['Cube'].location.x") == pytest.approx(2.0)

    refused = own_gui.call("undo_agent_steps", {"steps": 1})
    assert refused.is_error and refused.data()["state"] == "user_edited_since"
    assert "moved Cube" in " ".join(refused.data()["user_edits"])
    state = own_gui.probe(
        "result = {'x': bpy.data.objects['Cube'].location.x, 'names': sorted(o.name for o in bpy.data.objects)}"
    )
    assert state == {"x": pytest.approx(2.0), "names": ["Camera", "Cube", "Sphere"]}  # both works stay

    since = own_gui.call("get_scene_changes", {"since_revision": changed["revision"]["after"]}).data()
    assert since["changes"]["transformed"] == ["Cube"]


def test_a_user_hiding_an_object_with_h_after_the_agents_step_makes_undo_refuse_and_is_told(
    own_gui: GuiBlender,
) -> None:
    """H hides the selection in the view layer, a flag Blender answers by updating the scene alone: the person's
    hide is their edit, named, and the agent's undo would take it back, so it refuses."""
    changed = own_gui.call("execute_blender_code", {"code": THREE_CHANGES}).data()["changes"]
    _by_hand(own_gui, "h")
    assert own_gui.probe("result = bpy.data.objects['Cube'].hide_get()") is True
    own_gui.screenshot("cube-hidden-by-hand")

    refused = own_gui.call("undo_agent_steps", {"steps": 1})
    assert refused.is_error and refused.data()["state"] == "user_edited_since"
    assert "changed the visibility of Cube" in " ".join(refused.data()["user_edits"]), refused.data()
    since = own_gui.call("get_scene_changes", {"since_revision": changed["revision"]["after"]}).data()
    assert since["changes"]["visibility_changed"] == ["Cube"], since


def test_the_panel_shows_the_agents_step_and_its_undo_button_takes_it_back(own_gui: GuiBlender) -> None:
    own_gui.call("execute_blender_code", {"code": "bpy.data.objects.remove(bpy.data.objects['Light'])"})
    sidebar = _open_hermes_panel(own_gui)
    shot = own_gui.screenshot("agent-step-panel")
    assert shot.stat().st_size > 0
    own_gui.click(*_undo_button(sidebar))
    deadline = time.monotonic() + 30
    while "Light" not in own_gui.probe("result = [o.name for o in bpy.data.objects]"):
        assert time.monotonic() < deadline, "the panel's Undo did not bring the Light back"
        time.sleep(0.2)
    time.sleep(1.0)
    own_gui.screenshot("agent-step-undone-panel")
    assert own_gui.call("get_agent_history").data()["steps"] == []


UNDO_BELOW_TOP = 317
"""Pixels from the sidebar's top to the middle of the Undo button at the default interface scale (measured on the
screenshot agent-step-panel.png): the bridge panel's header and nine rows (state, address, "Agent may:" and its three
buttons, clients, runtime file, log, Lab, Stop), then the "Agent's changes" header, then the button."""


def _undo_button(sidebar: dict[str, int]) -> tuple[int, int]:
    return sidebar["left"] + (sidebar["width"] - 20) // 2, sidebar["top"] + UNDO_BELOW_TOP


def test_the_montage_in_the_interactive_blender_shows_the_views_and_leaves_no_trace(own_gui: GuiBlender) -> None:
    state = (
        "result = {'objects': len(bpy.data.objects), 'cameras': len(bpy.data.cameras), "
        "'camera': bpy.context.scene.camera.name, 'engine': bpy.context.scene.render.engine}"
    )
    before = own_gui.code(state)
    answer = own_gui.rpc("get_view_montage", {"tile_size": 256})
    assert answer["isError"] is False, answer
    image, details = answer["content"]
    assert image["type"] == "image" and image["mimeType"] == "image/png"
    path = ARTIFACTS / "montage-gui.png"
    path.write_bytes(base64.b64decode(image["data"]))
    assert json.loads(details["text"])["views"] == ["front", "right", "top", "three-quarter"]
    assert own_gui.code(state) == before


def test_a_listener_hears_the_users_own_edit_with_real_keys_within_a_second(own_gui: GuiBlender) -> None:
    """The person at Blender moves the cube (G X 2 Enter): a client listening to the cube hears it, as it happens."""
    with listening(own_gui.runtime_file, [SCENE_URI, CUBE]) as listener:
        viewport = own_gui.probe(VIEWPORT)
        subprocess.run(["xdotool", "mousemove", str(viewport["x"]), str(viewport["y"])], env=own_gui.env, check=True)
        time.sleep(0.5)
        pressed = time.monotonic()
        _keys(own_gui, "g", "x", "2", "Return")
        assert listener.wait_for(CUBE, 5.0), listener.messages
        heard = listener.first_arrival(CUBE)
    assert heard is not None and heard - pressed <= 1.0, heard - pressed
