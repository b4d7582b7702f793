"""get_view_montage in a background Blender: the pixels say where things are, and nothing is left behind."""

from __future__ import annotations

import base64
import importlib
import json
import tempfile
from pathlib import Path
from types import ModuleType
from typing import Any

import bpy
import numpy as np
import pytest

from hermes_blender.blender_host import ADDON_MODULE

pytestmark = pytest.mark.timeout(300)
ARTIFACTS = Path(__file__).resolve().parents[2] / "build" / "montage"

RED_LEFT_OF_BLUE = """
import bpy
cube = bpy.data.objects['Cube']
cube.location = (-2.0, 0.0, 0.0)
sphere = bpy.data.objects.new('Sphere', bpy.data.meshes['Cube'].copy())
sphere.location = (2.0, 0.0, 0.0)
bpy.context.scene.collection.objects.link(sphere)
def paint(obj, name, rgba):
    material = bpy.data.materials.new(name)
    material.diffuse_color = rgba
    obj.data.materials.clear()
    obj.data.materials.append(material)
paint(cube, 'Red', (1, 0, 0, 1))
paint(sphere, 'Blue', (0, 0, 1, 1))
"""


def _decode(png: bytes) -> np.ndarray:
    """The PNG's RGBA bytes as Blender reads them, top row first (Blender keeps the bottom row first)."""
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "read.png"
        path.write_bytes(png)
        image = bpy.data.images.load(str(path))
        try:
            width, height = image.size
            pixels = np.empty(width * height * 4, dtype=np.float32)
            image.pixels.foreach_get(pixels)
        finally:
            bpy.data.images.remove(image)
    return (pixels.reshape(height, width, 4)[::-1] * 255 + 0.5).astype(np.uint8)


def _where(tile: np.ndarray, channel: int) -> np.ndarray:
    """Pixels where `channel` (0 red, 2 blue) dominates: (row, column) pairs."""
    others = [c for c in (0, 1, 2) if c != channel]
    strong = tile[..., channel].astype(int)
    return np.argwhere((strong > 90) & (strong > 2 * tile[..., others].astype(int).max(axis=-1)))


def _state() -> dict[str, Any]:
    scene = bpy.context.scene
    render = scene.render
    return {
        "counts": {kind: len(getattr(bpy.data, kind)) for kind in ("objects", "cameras", "images", "materials")},
        "frame": scene.frame_current,
        "selected": sorted(o.name for o in bpy.context.selected_objects),
        "camera": scene.camera.name if scene.camera else None,
        "render": (render.engine, render.resolution_x, render.resolution_y, render.filepath, render.use_stamp),
        "shading": scene.display.shading.color_type,
    }


@pytest.fixture
def bridge(addon: ModuleType, factory_scene: None, tmp_path: Path, runtime: Any) -> Any:
    service = importlib.import_module(f"{ADDON_MODULE}.service")
    bridge = runtime.start(
        service.BridgeConfig(runtime_file=tmp_path / "server.json", lab_port=None, checkpoint_folder=tmp_path / "c")
    )
    return bridge


def _montage(bridge: Any, **arguments: Any) -> tuple[np.ndarray, dict[str, Any]]:
    outcome = bridge.tool_host.run_here("get_view_montage", arguments)
    assert not outcome.is_error, outcome.content
    image, text = outcome.content
    assert image["type"] == "image" and image["mimeType"] == "image/png"
    png = base64.b64decode(image["data"])
    details = json.loads(text["text"])
    assert details["bytes"] == len(png)
    return _decode(png), {**details, "png": png}


def test_red_left_of_blue_in_front_and_apart_in_the_top_view_and_every_tile_differs(bridge: Any) -> None:
    exec(RED_LEFT_OF_BLUE, {})
    bridge.execution.changes.settle()  # the setup is a change of its own, before the montage
    before = _state()
    history = bridge.tool_host.run_here("get_agent_history", {}).content[0]["text"]
    sheet, details = _montage(bridge, objects=["Cube", "Sphere"], tile_size=128)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / "montage-red-left-of-blue.png").write_bytes(details.pop("png"))
    assert details["views"] == ["front", "right", "top", "three-quarter"] and (details["columns"], details["rows"]) == (
        2,
        2,
    )
    tiles = [sheet[r * 128 : (r + 1) * 128, c * 128 : (c + 1) * 128, :3] for r in (0, 1) for c in (0, 1)]
    front, right, top, _ = tiles
    red, blue = _where(front, 0), _where(front, 2)
    assert len(red) and len(blue)
    assert red[:, 1].mean() < blue[:, 1].mean()  # front: red left of blue
    red_top, blue_top = _where(top, 0), _where(top, 2)
    assert red_top[:, 1].mean() < blue_top[:, 1].mean()  # top: +X to the right too
    assert len(_where(right, 2)) and abs(_where(right, 2)[:, 1].mean() - 64) < 20  # right: one behind the other
    for index, tile in enumerate(tiles):
        assert len(_where(tile, 0)) + len(_where(tile, 2)) > 100, f"tile {index} shows neither object"
        for other in tiles[index + 1 :]:
            assert (np.abs(tile.astype(int) - other.astype(int)).max(axis=-1) > 40).sum() > 100
    assert _state() == before
    assert bridge.tool_host.run_here("get_agent_history", {}).content[0]["text"] == history
    assert details["left_no_trace"] is True


def test_the_montage_fits_its_byte_budget(bridge: Any) -> None:
    _, whole = _montage(bridge, tile_size=256)
    sheet, fitted = _montage(bridge, tile_size=256, size_limit_in_bytes=whole["bytes"] // 2)
    assert fitted["bytes"] <= whole["bytes"] // 2 and sheet.shape[0] < 512


def test_the_revision_does_not_move(bridge: Any) -> None:
    page = json.loads(bridge.tool_host.run_here("get_objects_summary", {}).content[0]["text"])
    _, details = _montage(bridge, views=["top"], tile_size=64)
    assert details["revision"] == page["revision"]
    again = json.loads(
        bridge.tool_host.run_here("get_objects_summary", {"offset": 1, "revision": page["revision"]}).content[0]["text"]
    )
    assert "error" not in again  # a page asked with the revision before the montage is still a page of the same scene


@pytest.mark.parametrize(
    ("arguments", "state"),
    [
        ({"objects": ["Nope"]}, "not_found"),
        ({"collection": "Nope"}, "not_found"),
        ({"views": ["sideways"]}, "invalid_arguments"),
        ({"views": []}, "invalid_arguments"),
        ({"custom_views": [{"azimuth": 10}]}, "invalid_arguments"),
        ({"tile_size": 8}, "invalid_arguments"),
        ({"size_limit_in_bytes": 10}, "too_large"),
    ],
)
def test_bad_targets_and_arguments_are_named(bridge: Any, arguments: dict[str, Any], state: str) -> None:
    before = _state()
    outcome = bridge.tool_host.run_here("get_view_montage", {"tile_size": 64, **arguments})
    assert outcome.is_error and f'"state":"{state}"' in outcome.content[0]["text"]
    assert _state() == before


def test_an_empty_scene_a_far_target_and_an_empty_object_each_get_a_clear_answer(bridge: Any) -> None:
    far = bpy.data.objects.new("Far", None)
    far.location = (1e5, -3e4, 2e3)
    bpy.context.scene.collection.objects.link(far)
    _, details = _montage(bridge, objects=["Far"], views=["front"], tile_size=64)
    assert details["bounds"]["min"] == details["bounds"]["max"] == [100000.0, -30000.0, 2000.0]
    for obj in list(bpy.data.objects):
        bpy.data.objects.remove(obj)
    empty = bridge.tool_host.run_here("get_view_montage", {"tile_size": 64})
    assert empty.is_error and '"state":"empty_target"' in empty.content[0]["text"]


def test_inspect_answers_before_and_after_and_the_cube_moved_between_them(bridge: Any) -> None:
    code = "bpy.data.objects['Cube'].location.x += 3"
    outcome = bridge.tool_host.run_here("execute_blender_code", {"code": code, "inspect": True})
    assert not outcome.is_error, outcome.content
    before_image, after_image, text = outcome.content
    assert before_image["type"] == after_image["type"] == "image"
    data = json.loads(text["text"])
    assert data["changes"]["transformed"] == ["Cube"]  # the pictures' own camera is nobody's change
    framed_before, framed_after = data["inspect"]["before"]["bounds"], data["inspect"]["after"]["bounds"]
    assert framed_after["max"][0] == pytest.approx(framed_before["max"][0] + 3, abs=1e-3)  # holds both places
    before = _decode(base64.b64decode(before_image["data"]))
    after = _decode(base64.b64decode(after_image["data"]))
    tile = data["inspect"]["before"]["tile_size"]

    def cube_column(sheet: np.ndarray) -> float:
        """Where the grey cube is across the front view (below the label), as a fraction of the tile's width."""
        front = sheet[tile // 4 : tile, :tile, :3].astype(int).mean(axis=-1)
        bright = np.argwhere(front > np.median(front) + 25)
        assert len(bright), "the cube is not in the front view"
        return float(bright[:, 1].mean()) / tile

    assert cube_column(before) == pytest.approx(0.5, abs=0.1)  # framed on the cube: in the middle
    assert cube_column(after) > 0.6  # moved along +X: to the right of where the frame's middle is now


def test_a_scene_that_writes_video_gets_its_montage_and_keeps_its_settings(bridge: Any) -> None:
    settings = bpy.context.scene.render.image_settings
    if not hasattr(settings, "media_type"):
        pytest.skip("this Blender has no media types (before 5.0)")
    settings.media_type = "VIDEO"
    before = (_state(), settings.media_type, settings.file_format)
    _, details = _montage(bridge, tile_size=64, views=["front"])
    assert details["views"] == ["front"]
    assert (_state(), settings.media_type, settings.file_format) == before


@pytest.mark.parametrize(
    "setup",
    [
        "bpy.data.objects['Cube'].scale = (float('inf'), 1, 1)",
        "bpy.data.objects.remove(bpy.data.objects['Cube'])",  # lights and cameras only
    ],
)
def test_what_cannot_be_framed_is_named_not_a_blank_picture(bridge: Any, setup: str) -> None:
    exec(setup, {"bpy": bpy})
    bridge.execution.changes.settle()
    outcome = bridge.tool_host.run_here("get_view_montage", {"tile_size": 64})
    assert outcome.is_error and '"state":"empty_target"' in outcome.content[0]["text"]
    assert len(bpy.data.cameras) == 1  # only the scene's own


def test_a_timeline_marker_bound_to_a_camera_neither_takes_over_the_views_nor_is_lost(bridge: Any) -> None:
    plain, _ = _montage(bridge, tile_size=64, views=["top"])
    marker = bpy.context.scene.timeline_markers.new("shot", frame=bpy.context.scene.frame_current)
    marker.camera = bpy.data.objects["Camera"]
    marked, _ = _montage(bridge, tile_size=64, views=["top"])
    assert np.array_equal(plain, marked)
    assert marker.camera == bpy.data.objects["Camera"]


def test_a_scene_that_writes_video_still_gets_a_png_from_the_viewport_render_and_keeps_its_settings(
    bridge: Any, tmp_path: Path
) -> None:
    settings = bpy.context.scene.render.image_settings
    if not hasattr(settings, "media_type"):
        pytest.skip("this Blender has no media types (before 5.0)")
    settings.media_type = "VIDEO"
    before = (settings.media_type, settings.file_format, bpy.context.scene.render.filepath)
    outcome = bridge.tool_host.run_here("render_viewport_to_path", {"output_path": str(tmp_path / "view.png")})
    assert not outcome.is_error, outcome.content
    assert (tmp_path / "view.png").read_bytes().startswith(b"\x89PNG")
    assert (settings.media_type, settings.file_format, bpy.context.scene.render.filepath) == before
