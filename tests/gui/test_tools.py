"""What only an interactive Blender shows: screenshots, jumps, renders, undo and deferred results."""

from __future__ import annotations

import base64
import json
import socket
import subprocess
import threading
import time
from pathlib import Path

from hermes_blender.client import modern_request
from hermes_blender.contract.liveness import read_live_endpoint
from hermes_blender.lab import lab_execute
from tests.gui.harness import ARTIFACTS, GuiBlender

PNG = b"\x89PNG\r\n\x1a\n"
WINDOW = "window = bpy.context.window_manager.windows[0]\n"


def _image(result: dict, name: str) -> bytes:
    assert not result.get("isError"), result
    image = next(block for block in result["content"] if block["type"] == "image")
    data = base64.b64decode(image["data"])
    assert data.startswith(PNG)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / f"{name}.png").write_bytes(data)
    return data


AREA = WINDOW + (
    "area = next(a for a in window.screen.areas if a.type == 'VIEW_3D')\n"
    "result = {'left': area.x, 'top': window.height - area.y - area.height, 'width': area.width, "
    "'height': area.height, 'window': [window.width, window.height]}\n"
)


def _difference(picture: Path, grab: Path) -> float:
    """ImageMagick's normalised root-mean-square difference of two pictures of one size (0: the same)."""
    run = subprocess.run(
        ["compare", "-metric", "RMSE", str(picture), str(grab), "null:"], capture_output=True, text=True
    )
    return float(run.stderr.split("(")[1].split(")")[0])


def _spread(picture: Path) -> float:
    """The standard deviation of its pixels (0: one colour)."""
    return float(subprocess.check_output(["convert", str(picture), "-format", "%[fx:standard_deviation]", "info:"]))


def test_screenshots_of_the_window_and_of_an_area_show_what_the_screen_shows(gui: GuiBlender) -> None:
    """Checked against a screen grab of the same moment: the same size, not one colour, and close to it (the
    scene, the panels); a black picture differs from the grab about four times as much as the threshold."""
    geometry = gui.probe(AREA)
    window = ARTIFACTS / "tool-screenshot-window.png"
    window.write_bytes(_image(gui.rpc("get_screenshot_of_window_as_image"), "tool-screenshot-window"))
    grab = gui.screenshot("grab-for-window")
    area = ARTIFACTS / "tool-screenshot-area.png"
    area.write_bytes(
        _image(gui.rpc("get_screenshot_of_area_as_image", {"area_ui_type": "VIEW_3D"}), "tool-screenshot-area")
    )
    area_grab = ARTIFACTS / "grab-for-area.png"
    crop = f"{geometry['width']}x{geometry['height']}+{geometry['left']}+{geometry['top']}"
    subprocess.run(
        ["convert", str(gui.screenshot("grab-for-area-full")), "-crop", crop, "+repage", str(area_grab)], check=True
    )
    for picture, reference in ((window, grab), (area, area_grab)):
        assert _size(picture) == _size(reference)
        assert _spread(picture) > 0.02, f"{picture.name} is one colour"
        assert _difference(picture, reference) < 0.15, f"{picture.name} does not show what the screen shows"
    layout = json.loads(gui.rpc("get_screenshot_of_window_as_json")["content"][0]["text"])
    assert "VIEW_3D" in json.dumps(layout)


def _size(picture: Path) -> tuple[int, int]:
    width, height = subprocess.check_output(["identify", "-format", "%w %h", str(picture)], text=True).split()
    return int(width), int(height)


def test_jumps_change_the_workspace_and_the_active_object_in_the_window(gui: GuiBlender) -> None:
    assert not gui.rpc("jump_to_tab_by_name", {"name": "Shading"})["isError"]
    assert gui.probe(WINDOW + "result = window.workspace.name") == "Shading"
    assert not gui.rpc("jump_to_tab_by_name", {"name": "Layout"})["isError"]
    assert gui.probe(WINDOW + "result = window.workspace.name") == "Layout"
    jumped = gui.rpc("jump_to_view3d_object_by_name", {"name": "Camera", "allow_edits": True})
    assert not jumped["isError"], jumped
    assert gui.probe("result = bpy.context.view_layer.objects.active.name") == "Camera"
    by_space = gui.rpc("jump_to_tab_by_space_type", {"space_type": "IMAGE_EDITOR"})
    assert not by_space["isError"] and by_space["structuredContent"]["created"] is False, by_space
    assert gui.probe(WINDOW + "result = [a.type for a in window.screen.areas]").count("IMAGE_EDITOR") >= 1
    gui.rpc("jump_to_tab_by_name", {"name": "Layout"})
    data = gui.rpc("jump_to_view3d_object_data_by_name", {"name": "Cube", "allow_edits": True})
    assert not data["isError"] and data["structuredContent"]["data_name"] == "Cube", data
    assert gui.probe("result = bpy.context.view_layer.objects.active.mode") == "EDIT"
    _image(gui.rpc("get_screenshot_of_window_as_image"), "tool-jump-to-mesh-data-edit-mode")
    back = gui.rpc("jump_to_view3d_object_by_name", {"name": "Cube", "allow_edits": True})
    assert not back["isError"], back
    assert gui.probe("result = bpy.context.view_layer.objects.active.mode") == "OBJECT"


WORKBENCH = "bpy.context.scene.render.engine = 'BLENDER_WORKBENCH'"


def test_viewport_and_thumbnail_renders_write_exactly_the_asked_file(gui: GuiBlender, tmp_path: Path) -> None:
    """Workbench for the thumbnail: EEVEE adds nothing to what is checked here (its own case is below)."""
    engine = gui.probe("result = bpy.context.scene.render.engine")
    gui.probe(WORKBENCH)
    try:
        for tool in ("render_viewport_to_path", "render_thumbnail_to_path"):
            target = tmp_path / f"{tool}.png"
            result = gui.rpc(tool, {"output_path": str(target)})
            assert not result["isError"], result
            assert result["structuredContent"]["filepath"] == str(target)
            assert result["structuredContent"]["interface_responsive"] is False  # Workbench holds the interface
            assert target.read_bytes().startswith(PNG)
            (ARTIFACTS / f"tool-{tool}.png").write_bytes(target.read_bytes())
        assert gui.probe(WINDOWS) == 1
    finally:
        gui.probe(f"bpy.context.scene.render.engine = {engine!r}")


def test_an_eevee_thumbnail_says_the_interface_was_held_and_the_bridge_answers_after_it(
    gui: GuiBlender, tmp_path: Path
) -> None:
    """The factory scene's own engine, with one sample (37-181 s with the default samples on llvmpipe here)."""
    samples = gui.probe("result = bpy.context.scene.eevee.taa_render_samples")
    gui.probe("bpy.context.scene.eevee.taa_render_samples = 1")
    try:
        target = tmp_path / "eevee.png"
        result = gui.rpc("render_thumbnail_to_path", {"output_path": str(target)})
        assert not result["isError"], result
        assert result["structuredContent"]["engine"].startswith("BLENDER_EEVEE")
        assert result["structuredContent"]["interface_responsive"] is False
        assert target.read_bytes().startswith(PNG)
        assert not gui.rpc("get_objects_summary")["isError"]
    finally:
        gui.probe(f"bpy.context.scene.eevee.taa_render_samples = {samples}")


WINDOWS = "result = len(bpy.context.window_manager.windows)"
CYCLES = "scene = bpy.context.scene\nscene.render.engine = 'CYCLES'\nscene.cycles.use_denoising = True\n"


def test_a_cycles_thumbnail_renders_without_freezing_the_interface_or_leaving_a_window(
    gui: GuiBlender, tmp_path: Path
) -> None:
    engine = gui.probe("result = bpy.context.scene.render.engine")
    gui.probe(CYCLES)
    try:
        target = tmp_path / "cycles.png"
        done: dict = {}
        render = threading.Thread(
            target=lambda: done.update(gui.rpc("render_thumbnail_to_path", {"output_path": str(target)}))
        )
        render.start()
        while render.is_alive() and not gui.probe("result = bpy.app.is_job_running('RENDER')"):
            time.sleep(0.01)
        served = gui.rpc("get_objects_summary")  # while Cycles renders, other calls are answered
        render.join(120)
        assert not served["isError"]
        assert not done["isError"], done  # even where this build has no denoiser: it is skipped, not fatal
        assert done["structuredContent"]["interface_responsive"] is True
        assert target.read_bytes().startswith(PNG)
        assert gui.probe(WINDOWS) == 1  # Blender's render window never opened
        assert gui.probe("result = bpy.context.preferences.view.render_display_type") != "NONE"  # restored
        assert gui.probe("result = bpy.context.scene.cycles.use_denoising") is True
    finally:
        gui.probe(f"bpy.context.scene.render.engine = {engine!r}")


def test_a_render_blender_refuses_says_blenders_reason(gui: GuiBlender, tmp_path: Path) -> None:
    gui.probe("bpy.context.scene['saved_camera'] = bpy.context.scene.camera\nbpy.context.scene.camera = None")
    try:
        result = gui.rpc("render_thumbnail_to_path", {"output_path": str(tmp_path / "none.png")})
        assert result["isError"], result
        message = json.loads(result["content"][0]["text"])["error"]
        assert message.startswith("Blender could not render: ") and "camera" in message.lower()  # Blender's words
    finally:
        gui.probe("scene = bpy.context.scene\nscene.camera = scene['saved_camera']")


def _object_names(gui: GuiBlender) -> set[str]:
    return set(gui.probe("result = [o.name for o in bpy.data.objects]"))


UNDO = WINDOW + "with bpy.context.temp_override(window=window, area=window.screen.areas[0]):\n    bpy.ops.ed.undo()\n"


def test_each_change_is_one_undo_step_and_a_read_adds_none(gui: GuiBlender) -> None:
    add = "import bpy\nbpy.context.scene.collection.objects.link(bpy.data.objects.new({!r}, None))"
    gui.code(add.format("UndoFirst"))
    gui.code(add.format("UndoSecond"))
    assert not gui.call("get_objects_summary").is_error
    detail = gui.call("get_object_detail_summary", {"name": "Cube"})  # the tool's own argument
    assert not detail.is_error and detail.data()["name"] == "Cube", detail.data()
    picked = gui.call("get_object_detail_summary", {"name": "Cube", "fields": ["dimensions", "collections"]}).data()
    assert picked == {
        "status": "ok",
        "name": "Cube",
        "type": "MESH",
        "dimensions": [2.0, 2.0, 2.0],
        "collections": ["Collection"],
    }  # the interactive Blender's own evaluated size
    assert {"UndoFirst", "UndoSecond"} <= _object_names(gui)
    gui.probe(UNDO)  # the reads left no step: one undo takes back the second change, and only it
    names = _object_names(gui)
    assert "UndoFirst" in names and "UndoSecond" not in names
    counts = gui.call("get_objects_summary").data()["counts"]  # kept counts follow the undo
    assert counts["total"] == gui.probe("result = len(bpy.context.scene.objects)")
    gui.probe(UNDO)
    assert "UndoFirst" not in _object_names(gui)


def _deferred(key: str, seconds: float) -> str:
    return (
        "import bpy, time\n"
        f"bpy.app.driver_namespace[{key!r}] = 0\n"
        "started = time.monotonic()\n"
        "print('deferred work started')\n"
        "def check_is_finished():\n"
        f"    bpy.app.driver_namespace[{key!r}] += 1\n"
        f"    return None if time.monotonic() - started < {seconds} else {{'done': True}}\n"
    )


def _polls(gui: GuiBlender, key: str) -> int:
    return gui.probe(f"result = bpy.app.driver_namespace.get({key!r}, -1)")


def test_deferred_results_arrive_on_both_listeners_with_their_output(gui: GuiBlender) -> None:
    result = gui.rpc("execute_blender_code", {"code": _deferred("mcp", 0.3)})
    assert not result["isError"], result
    assert result["structuredContent"]["result"] == {"done": True}
    assert "deferred work started" in result["structuredContent"]["stdout"]
    assert gui.lab_port is not None
    envelope = lab_execute(gui.lab_port, _deferred("lab", 0.3), timeout=30)
    assert envelope["status"] == "ok" and envelope["result"] == {"done": True}, envelope
    assert "deferred work started" in envelope["stdout"]


def _leave_during(gui: GuiBlender, send: bytes, port: int, key: str) -> None:
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(send)
        deadline = time.monotonic() + 30
        while _polls(gui, key) < 2:  # the deferred job is being polled: now the client walks away
            assert time.monotonic() < deadline
            time.sleep(0.05)
    time.sleep(1.0)
    before = _polls(gui, key)
    time.sleep(1.0)
    assert _polls(gui, key) == before, "the bridge kept polling a job whose client had left"


def test_a_deferred_job_is_dropped_when_its_client_leaves_on_either_listener(gui: GuiBlender) -> None:
    endpoint = read_live_endpoint(gui.spec)
    body, headers = modern_request(
        "tools/call", {"name": "execute_blender_code", "arguments": {"code": _deferred("mcp-left", 60)}}
    )
    head = "".join(f"{name}: {value}\r\n" for name, value in {**headers, **endpoint.headers()}.items())
    port = int(endpoint.url.rsplit(":", 1)[1].split("/")[0])
    request = f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{head}Content-Length: {len(body)}\r\n\r\n".encode()
    _leave_during(gui, request + body, port, "mcp-left")
    assert gui.lab_port is not None
    lab = json.dumps({"type": "execute", "code": _deferred("lab-left", 60), "strict_json": True}).encode() + b"\0"
    _leave_during(gui, lab, gui.lab_port, "lab-left")
    assert not gui.rpc("get_objects_summary")["isError"]  # and the bridge goes on serving
