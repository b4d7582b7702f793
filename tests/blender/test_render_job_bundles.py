"""`export_render_job` writes a job bundle the real `openjd check` passes, in both flavours, from a copy of the file
made for the job (the user's file and scene untouched); each check a farm would fail late on is a named state that
writes nothing."""

from __future__ import annotations

import importlib
import json
import os
import stat
import subprocess
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import bpy
import pytest

from hermes_blender.blender_host import ADDON_MODULE
from hermes_blender.farm import openjd_command
from tests.moving_cube import moving_cube

from .conftest import a_job

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def export(addon: ModuleType, dispatch: ModuleType, tmp_path: Path) -> Callable[..., dict[str, Any]]:
    """A saved, keyframed Workbench scene (tmp/project/shot.blend), and export_render_job run as a bridge's job."""
    (tmp_path / "project").mkdir()
    (tmp_path / "frames").mkdir()
    exec(moving_cube(str(tmp_path / "project" / "shot.blend")), {})
    tool = importlib.import_module(f"{ADDON_MODULE}.tools.job_bundles")
    job = a_job(dispatch.QueuedDispatcher())
    quirk = bpy.data.is_dirty  # bpy 4.5 as a module calls every file changed, even one just saved or opened

    def run(**arguments: Any) -> dict[str, Any]:
        arguments = {
            "bundle_folder": str(tmp_path / "bundle"),
            "output_folder": str(tmp_path / "frames"),
            **({"use_unsaved_changes": True} if quirk else {}),
        } | arguments
        return tool.export_render_job(arguments, job)

    return run


def openjd_check(bundle: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*openjd_command(), "check", str(bundle / "template.yaml")], capture_output=True, text=True, timeout=240
    )


@pytest.mark.parametrize("flavour", ["plain", "deadline_adaptor"])
def test_both_flavours_pass_openjd_check_from_a_copy_and_leave_the_users_file_alone(
    export: Callable[..., dict[str, Any]], tmp_path: Path, flavour: str
) -> None:
    user_file = tmp_path / "project" / "shot.blend"
    before = user_file.read_bytes()
    scene = bpy.context.scene
    answer = export(frames="1-3,5-6", chunk_size=2, flavour=flavour, engine="CYCLES", resolution_x=32)
    bundle = Path(answer["bundle_folder"])
    checked = openjd_check(bundle)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    saved = "unsaved_changes_included" if bpy.data.is_dirty else "saved"  # bpy 4.5: every file reads as changed
    assert answer["flavour"] == flavour and answer["blend_state"] == saved and answer["frame_count"] == 5
    assert answer["tasks"] == (3 if flavour == "plain" else 5)  # chunks 1-2, 3, 5-6; a task per frame
    assert answer["first_frame_file"] == str(tmp_path / "frames" / "ViewLayer_frame_0001.png")
    values = {
        v["name"]: v["value"] for v in json.loads((bundle / "parameter_values.yaml").read_text())["parameterValues"]
    }
    assert values["Frames"] == "1-3,5-6" and values["BlenderFile"] == answer["blend_copy"]
    assets = json.loads((bundle / "asset_references.yaml").read_text())["assetReferences"]
    assert assets["inputs"]["filenames"] == [answer["blend_copy"]]
    assert assets["outputs"]["directories"] == [str(tmp_path / "frames")]
    # The user's file and open scene as they were; the job's settings are the copy's alone.
    assert user_file.read_bytes() == before and bpy.data.filepath == str(user_file)
    assert (scene.render.engine, scene.render.resolution_x) == ("BLENDER_WORKBENCH", 64)
    copy = Path(answer["blend_copy"])
    assert copy.parent.parent == bundle and copy.name == "shot.blend"
    for written in (copy, bundle / "template.yaml", bundle / "parameter_values.yaml"):
        assert stat.S_IMODE(written.stat().st_mode) == 0o600, written
    assert stat.S_IMODE(bundle.stat().st_mode) == 0o700
    with bpy.data.libraries.load(str(copy)) as (_, appended):
        appended.scenes = ["Scene"]
    job_scene = appended.scenes[0]
    assert (job_scene.render.engine, job_scene.render.resolution_x) == ("CYCLES", 32)
    bpy.data.scenes.remove(job_scene)


def _video(export: Any) -> None:
    settings = bpy.context.scene.render.image_settings
    if hasattr(settings, "media_type"):  # Blender 5: a video is a media type
        settings.media_type = "VIDEO"
    else:
        settings.file_format = "FFMPEG"
    bpy.ops.wm.save_mainfile()


def _bmp(export: Any) -> None:
    settings = bpy.context.scene.render.image_settings
    settings.file_format = "BMP"
    bpy.ops.wm.save_mainfile()


def _never_saved(export: Any) -> None:
    bpy.ops.wm.read_homefile(use_factory_startup=True)


def _unsaved(export: Any) -> None:
    bpy.data.objects["Cube"].location.z = 1.0
    bpy.ops.ed.undo_push(message="the user's edit")  # as the bridge's every change and the interface's are


def _missing_texture(export: Any) -> None:
    image = bpy.data.images.new("Gone", 4, 4)
    image.source, image.filepath = "FILE", "//textures/gone.png"
    image.use_fake_user = True
    bpy.ops.wm.save_mainfile()


BAD = {
    "scene_not_found": ({"scene": "Nope"}, None),
    "view_layer_not_found": ({"view_layers": ["Nope"]}, None),
    "camera_not_found": ({"camera": "Cube"}, None),
    "invalid_frames": ({"frames": "1-x"}, None),
    "empty_frame_range": ({"frames": "6-1"}, None),
    "frames_outside_scene": ({"frames": "1-99"}, None),
    "invalid_engine": ({"engine": "NO_SUCH_ENGINE"}, None),
    "video_output": ({}, _video),
    "unsupported_output_format": ({}, _bmp),
    "file_never_saved": ({}, _never_saved),
    "unsaved_changes": ({"use_unsaved_changes": False}, _unsaved),
    "missing_files": ({}, _missing_texture),
    "output_not_writable": ({"output_folder": "{tmp}/no_such_folder"}, None),
    "output_in_blend_folder": ({"output_folder": "{tmp}/project"}, None),
    "bundle_folder_not_empty": ({"bundle_folder": "{tmp}/project"}, None),
}


@pytest.mark.parametrize("state", BAD)
def test_each_check_a_farm_fails_late_on_is_a_named_state_that_writes_nothing(
    export: Callable[..., dict[str, Any]], errors: ModuleType, tmp_path: Path, state: str
) -> None:
    arguments, prepare = BAD[state]
    if prepare is not None:
        prepare(export)
    arguments = {
        key: value.format(tmp=tmp_path) if isinstance(value, str) else value for key, value in arguments.items()
    }
    project = sorted(os.listdir(tmp_path / "project"))
    with pytest.raises(errors.ToolError) as refused:
        export(**arguments)
    assert refused.value.state == state, str(refused.value)
    assert "Nothing was written" in str(refused.value)
    assert not (tmp_path / "bundle").exists() and sorted(os.listdir(tmp_path / "project")) == project
    assert not os.listdir(tmp_path / "frames")
