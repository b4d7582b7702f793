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
from tests.other_user import needs_another_user

from .conftest import a_job

pytestmark = pytest.mark.timeout(300)
NOBODY = 65534


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
        if arguments["bundle_folder"] is None:  # the bridge's own jobs folder
            del arguments["bundle_folder"]
        return tool.export_render_job(arguments, job)

    return run


@pytest.fixture
def jobs(addon: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The bridge's jobs folder, in this test's folder (by default it is in Blender's user configuration)."""
    folder = tmp_path / "config" / "hermes_bridge" / "jobs"
    tool = importlib.import_module(f"{ADDON_MODULE}.tools.job_bundles")
    monkeypatch.setattr(tool, "default_jobs_folder", lambda: folder)
    return folder


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


def test_a_relative_bundle_folder_is_invalid_path_and_nothing_is_written(
    export: Callable[..., dict[str, Any]], errors: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Relative to what? Blender's working folder is nothing the agent sees: refused, even where it would resolve."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(errors.ToolError) as refused:
        export(bundle_folder="bundle")
    assert refused.value.state == "invalid_path" and "Nothing was written" in str(refused.value), refused.value
    assert not (tmp_path / "bundle").exists()


def test_with_no_bundle_folder_named_each_bundle_goes_to_a_new_owner_only_folder_of_the_bridges(
    export: Callable[..., dict[str, Any]], jobs: Path
) -> None:
    first, second = export(bundle_folder=None), export(bundle_folder=None)
    folders = [Path(first["bundle_folder"]), Path(second["bundle_folder"])]
    assert folders[0] != folders[1] and all(folder.parent == jobs for folder in folders), folders
    for folder in (jobs.parent, jobs, *folders):
        found = folder.stat()
        assert (stat.S_IMODE(found.st_mode), found.st_uid) == (0o700, os.geteuid()), folder
    assert Path(first["blend_copy"]).is_file() and first["run_here"] == f"hermes-blender farm run {folders[0]}"


def _another_users_folder(jobs: Path, elsewhere: Path) -> None:
    jobs.mkdir(mode=0o700)
    os.chown(jobs, NOBODY, NOBODY)


def _another_users_link(jobs: Path, elsewhere: Path) -> None:
    jobs.symlink_to(elsewhere)
    os.lchown(jobs, NOBODY, NOBODY)


@needs_another_user
@pytest.mark.parametrize("plant", [_another_users_folder, _another_users_link], ids=["folder", "link"])
def test_a_jobs_folder_another_user_planted_is_unsafe_folder_and_nothing_is_written(
    export: Callable[..., dict[str, Any]], errors: ModuleType, jobs: Path, tmp_path: Path, plant: Callable[..., None]
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    jobs.parent.mkdir(parents=True, mode=0o700)
    plant(jobs, elsewhere)
    with pytest.raises(errors.ToolError) as refused:
        export(bundle_folder=None)
    assert refused.value.state == "unsafe_folder" and "Nothing was written" in str(refused.value), refused.value
    assert os.listdir(elsewhere) == [] and os.listdir(jobs.parent) == ["jobs"]
    assert not os.listdir(tmp_path / "frames")
    if jobs.is_dir() and not jobs.is_symlink():
        assert os.listdir(jobs) == []


def test_paths_relative_to_the_working_folder_are_unmappable_paths_and_nothing_is_written(
    export: Callable[..., dict[str, Any]], errors: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`textures/wood.png` (no leading //) is found here only because Blender was started in the project: a farm's
    Blender is started elsewhere."""
    (tmp_path / "project" / "textures").mkdir()
    (tmp_path / "project" / "textures" / "wood.png").write_bytes(b"not read")
    monkeypatch.chdir(tmp_path / "project")
    image = bpy.data.images.new("Wood", 4, 4)
    image.source, image.filepath = "FILE", "textures/wood.png"
    image.use_fake_user = True
    bpy.ops.wm.save_mainfile()
    with pytest.raises(errors.ToolError) as refused:
        export()
    assert refused.value.state == "unmappable_paths" and "Nothing was written" in str(refused.value)
    assert refused.value.details["unmappable"] == ["textures/wood.png"]
    assert not (tmp_path / "bundle").exists() and not os.listdir(tmp_path / "frames")


def test_files_a_farm_that_moves_files_may_not_find_are_listed_with_why(
    export: Callable[..., dict[str, Any]], tmp_path: Path
) -> None:
    """An absolute path, and a path relative to a linked library's folder (which the copy does not rebase), are
    path_warnings; a path relative to the .blend travels with the bundle's files and is not."""
    files = {name: tmp_path / "assets" / f"{name}.png" for name in ("near", "absolute", "stone")}
    files["stone"] = tmp_path / "library" / "tex" / "stone.png"
    for path in files.values():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"not read")
    for name, written in (("Near", "//../assets/near.png"), ("Absolute", str(files["absolute"]))):
        image = bpy.data.images.new(name, 4, 4)
        image.source, image.filepath = "FILE", written
        image.use_fake_user = True
    stone = bpy.data.images.new("Stone", 4, 4)
    stone.source, stone.filepath = "FILE", str(files["stone"])
    bpy.data.libraries.write(str(tmp_path / "library" / "lib.blend"), {stone}, path_remap="RELATIVE_ALL")
    bpy.data.images.remove(stone)
    with bpy.data.libraries.load(str(tmp_path / "library" / "lib.blend"), link=True, relative=True) as (_, linked):
        linked.images = ["Stone"]
    assert linked.images[0].library is not None and linked.images[0].filepath == "//tex/stone.png"
    bpy.ops.wm.save_mainfile()
    answer = export()
    assert sorted(answer["external_files"]) == sorted(
        [str(files["near"]), str(files["absolute"]), str(files["stone"]), str(tmp_path / "library" / "lib.blend")]
    )
    warned = {entry["file"]: entry for entry in answer["path_warnings"]}
    assert sorted(warned) == sorted([str(files["absolute"]), str(files["stone"])]), warned
    assert answer["path_warning_count"] == 2 and "2 of them by a path a farm" in answer["summary"]
    assert warned[str(files["absolute"])]["why"].startswith("an absolute path")
    assert warned[str(files["stone"])]["path"] == "//tex/stone.png"
    assert "relative to the folder of the library" in warned[str(files["stone"])]["why"]


def _named_folder_of_another_user(shared: Path, elsewhere: Path) -> Path:
    (shared / "bundle").mkdir(mode=0o777)
    os.chown(shared / "bundle", NOBODY, NOBODY)
    return shared / "bundle"


def _named_link_another_user_planted(shared: Path, elsewhere: Path) -> Path:
    (shared / "bundle").symlink_to(elsewhere)
    os.lchown(shared / "bundle", NOBODY, NOBODY)
    return shared / "bundle"


def _named_folder_inside_another_users(shared: Path, elsewhere: Path) -> Path:
    (shared / "theirs").mkdir(mode=0o755)
    os.chown(shared / "theirs", NOBODY, NOBODY)
    return shared / "theirs" / "bundle"


@needs_another_user
@pytest.mark.parametrize(
    "plant",
    [_named_folder_of_another_user, _named_link_another_user_planted, _named_folder_inside_another_users],
    ids=["their empty folder", "their link", "in their folder"],
)
def test_a_bundle_folder_the_agent_names_that_another_user_may_change_is_unsafe_folder_and_nothing_is_written(
    export: Callable[..., dict[str, Any]], errors: ModuleType, tmp_path: Path, plant: Callable[..., Path]
) -> None:
    """In a folder every user may add to (sticky, as /tmp): their folder, their link to a folder of ours, or a new
    folder in a folder of theirs would let them edit the template `farm run` runs, or swap the folder meanwhile."""
    shared, elsewhere = tmp_path / "shared", tmp_path / "elsewhere"
    shared.mkdir()
    shared.chmod(0o1777)
    elsewhere.mkdir(mode=0o700)
    named = plant(shared, elsewhere)
    with pytest.raises(errors.ToolError) as refused:
        export(bundle_folder=str(named))
    assert refused.value.state == "unsafe_folder" and "Nothing was written" in str(refused.value), refused.value
    assert os.listdir(elsewhere) == [] and not os.listdir(tmp_path / "frames")
    if named.is_dir():
        assert os.listdir(named) == []


def test_a_new_bundle_folder_in_a_shared_sticky_folder_is_written_owner_only(
    export: Callable[..., dict[str, Any]], tmp_path: Path
) -> None:
    """Nobody else may rename or change a folder of ours in /tmp: it is a bundle folder like any other."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    done = export(bundle_folder=str(shared / "bundle"))
    assert done["bundle_folder"] == str(shared / "bundle") and (shared / "bundle" / "template.yaml").is_file()
    assert stat.S_IMODE((shared / "bundle").stat().st_mode) == 0o700


def test_a_folder_named_that_is_not_empty_keeps_its_mode(
    export: Callable[..., dict[str, Any]], errors: ModuleType, tmp_path: Path
) -> None:
    (tmp_path / "project").chmod(0o755)
    with pytest.raises(errors.ToolError) as refused:
        export(bundle_folder=str(tmp_path / "project"))
    assert refused.value.state == "bundle_folder_not_empty"
    assert stat.S_IMODE((tmp_path / "project").stat().st_mode) == 0o755
