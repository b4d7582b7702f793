"""A frame range writes into the folder it opened at the start and no other, whatever another user does to the
folder's path or names meanwhile; a folder others may write to is refused; a bridge runs at most MAX_WORKING tasks.

Tasks are driven a step at a time by a real QueuedDispatcher (the GUI's), so another user acts exactly between
two frames, or inside one (a render_pre handler), as a real OS user (`nobody`, through setpriv).
"""

from __future__ import annotations

import importlib
import os
import re
import shutil
import stat
import struct
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import bpy
import pytest

from hermes_blender.blender_host import ADDON_MODULE
from tests.other_user import AS_NOBODY, needs_another_user

from .conftest import a_job

pytestmark = pytest.mark.timeout(180)
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
NOBODY = 65534


class Tasks:
    """The frame task tools with a real dispatcher whose steps this test runs one at a time."""

    def __init__(self) -> None:
        self.module = importlib.import_module(f"{ADDON_MODULE}.tools.frame_task_tools")
        self.table = importlib.import_module(f"{ADDON_MODULE}.frame_tasks")
        self.dispatcher = importlib.import_module(f"{ADDON_MODULE}.dispatch").QueuedDispatcher()
        self.job = a_job(self.dispatcher)

    def start(self, folder: Path, first: int, last: int, **more: Any) -> str:
        arguments = {"output_folder": str(folder), "frame_start": first, "frame_end": last, **more}
        return self.module.start(arguments, self.job)["task_id"]

    def get(self, task_id: str) -> dict[str, Any]:
        return self.module.get({"task_id": task_id}, self.job)

    def step(self) -> None:
        """One job of the queue: one task's next frame."""
        self.dispatcher.run_pending(0.0)

    def finish(self, task_id: str) -> dict[str, Any]:
        while (snapshot := self.get(task_id))["status"] == "working":
            self.step()
        return snapshot


@pytest.fixture
def small_scene(addon: ModuleType, factory_scene: None) -> None:
    scene = bpy.context.scene
    scene.render.resolution_x, scene.render.resolution_y = 64, 48  # the files are what is tested, not the picture
    scene.render.engine, scene.cycles.device, scene.cycles.samples = "CYCLES", "CPU", 1  # no GPU in this process


@pytest.fixture
def tasks(small_scene: None) -> Iterator[Tasks]:
    driver = Tasks()
    try:
        yield driver
    finally:
        driver.job.tasks.close()  # every task still working ends, and lets its folder go


@pytest.fixture
def base() -> Iterator[Path]:
    """A folder of this (root) user that `nobody` may enter: pytest's own tmp_path is 0700 all the way up."""
    made = Path(tempfile.mkdtemp(prefix="hermes-frames-"))
    made.chmod(0o755)
    try:
        yield made
    finally:
        shutil.rmtree(made)


@pytest.fixture
def rendered() -> Iterator[list[int]]:
    """The frames Blender rendered, in order."""
    frames: list[int] = []

    def count(scene: Any, *_: Any) -> None:
        frames.append(scene.frame_current)

    bpy.app.handlers.render_pre.append(count)
    try:
        yield frames
    finally:
        bpy.app.handlers.render_pre.remove(count)


def as_nobody(script: str) -> None:
    run = subprocess.run([*AS_NOBODY, "/bin/sh", "-ec", script], capture_output=True, text=True, timeout=30)
    assert run.returncode == 0, run.stderr


def folder(path: Path, mode: int) -> Path:
    path.mkdir()
    path.chmod(mode)
    return path


def held_folders() -> set[str]:
    """The directories this process holds open."""
    held = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if os.path.isdir(target):
            held.add(target)
    return held


@needs_another_user
def test_a_folder_swapped_for_a_symlink_between_frames_still_gets_every_frame(tasks: Tasks, base: Path) -> None:
    """The red team's finding: its parent open to all, the folder renamed by another user after frame 1 and a
    symlink to a root-only folder put in its place; 39 frames went there. Every frame stays in the folder opened."""
    shared = folder(base / "shared", 0o777)  # no sticky bit: anyone may rename what is in it
    out = folder(shared / "out", 0o755)
    secret = folder(base / "secret", 0o700)
    inode = out.stat().st_ino
    task_id = tasks.start(out, 1, 4)
    tasks.step()
    assert (out / "frame_0001.png").is_file()
    as_nobody(f"mv {shared}/out {shared}/moved && ln -s {secret} {shared}/out")
    done = tasks.finish(task_id)
    assert (done["status"], done["done"], done["skipped_count"]) == ("completed", 4, 0), done
    moved = shared / "moved"
    assert moved.stat().st_ino == inode and not moved.is_symlink()
    assert sorted(p.name for p in moved.iterdir()) == [f"frame_000{n}.png" for n in range(1, 5)]
    assert all(p.read_bytes().startswith(PNG_SIGNATURE) for p in moved.iterdir())
    assert list(secret.iterdir()) == []


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="reads the descriptors held in /proc (Linux)")
def test_a_task_lets_its_folder_go_when_it_completes_is_cancelled_or_abandoned(tasks: Tasks, base: Path) -> None:
    ends = {name: folder(base / name, 0o755) for name in ("completed", "cancelled", "abandoned")}
    started = {name: tasks.start(path, 1, 20 if name == "abandoned" else 2) for name, path in ends.items()}
    assert {str(path) for path in ends.values()} <= held_folders()
    tasks.module.cancel({"task_id": started["cancelled"]}, tasks.job)
    tasks.finish(started["completed"])
    assert tasks.get(started["completed"])["status"] == "completed"
    assert tasks.get(started["abandoned"])["status"] == "working"
    assert held_folders() & {str(path) for path in ends.values()} == {str(ends["abandoned"])}
    tasks.job.tasks.close()  # the bridge stops
    assert tasks.get(started["abandoned"])["status"] == "failed"
    assert not held_folders() & {str(path) for path in ends.values()}


def _acl_letting_nobody_write(path: Path) -> None:
    """A POSIX access ACL (the kernel's xattr form) that gives `nobody` rwx: group bits then show its mask."""
    entries = [(0x01, 7, 0xFFFFFFFF), (0x02, 7, NOBODY), (0x04, 5, 0xFFFFFFFF), (0x10, 7, 0xFFFFFFFF)]
    entries.append((0x20, 5, 0xFFFFFFFF))
    value = struct.pack("<I", 2) + b"".join(
        struct.pack("<HHI", tag, perm, qualifier) for tag, perm, qualifier in entries
    )
    try:
        os.setxattr(path, "system.posix_acl_access", value)
    except OSError as exc:
        pytest.skip(f"this file system keeps no access ACLs: {exc}")


@needs_another_user
@pytest.mark.parametrize("tool", ["start_render_frames_task", "render_frames_to_folder"])
@pytest.mark.parametrize(
    ("how", "why"),
    [
        ("open to all, not sticky", "every user may write to it"),
        ("group of others", f"its group (gid {NOBODY}) may write to it"),
        ("another user's", f"it belongs to another user (uid {NOBODY})"),
        ("access list", "an access control list may let other users write"),
    ],
)
def test_a_folder_others_may_write_to_is_refused_before_anything_renders(
    tasks: Tasks, base: Path, rendered: list[int], tool: str, how: str, why: str
) -> None:
    out = folder(base / "out", 0o755)
    if how == "open to all, not sticky":
        out.chmod(0o777)
    elif how == "group of others":
        os.chown(out, -1, NOBODY)  # nogroup: nobody's own group
        out.chmod(0o775)
    elif how == "another user's":
        os.chown(out, NOBODY, NOBODY)
    else:
        _acl_letting_nobody_write(out)
    errors = importlib.import_module(f"{ADDON_MODULE}.errors")
    catalogue = importlib.import_module(f"{ADDON_MODULE}.tools.catalogue").CATALOGUE
    with pytest.raises(errors.ToolError, match=re.escape(why)) as refused:
        catalogue[tool].run({"output_folder": str(out), "frame_start": 1, "frame_end": 2}, tasks.job)
    assert refused.value.state == "unsafe_folder"
    assert list(out.iterdir()) == [] and rendered == []
    assert str(out) not in held_folders()


def test_at_the_cap_a_start_is_refused_naming_it_until_a_task_ends(tasks: Tasks, base: Path) -> None:
    cap = tasks.table.MAX_WORKING
    out = folder(base / "out", 0o755)
    working = [tasks.start(out, 1, 1) for _ in range(cap)]
    errors = importlib.import_module(f"{ADDON_MODULE}.errors")
    with pytest.raises(errors.ToolError, match=f"the most one bridge runs at once \\({cap}\\)") as refused:
        tasks.start(out, 1, 1)
    assert refused.value.state == "too_many_tasks"
    tasks.module.cancel({"task_id": working[0]}, tasks.job)
    assert tasks.get(tasks.start(out, 1, 1))["status"] == "working"


@needs_another_user
@pytest.mark.parametrize("overwrite", [False, True])
def test_a_name_another_user_takes_between_frames_is_skipped_and_left_alone(
    tasks: Tasks, base: Path, rendered: list[int], overwrite: bool
) -> None:
    out = folder(base / "out", 0o1777)  # sticky, like /tmp: accepted, and anyone may add names to it
    victim = base / "victim"
    victim.write_bytes(b"precious")
    task_id = tasks.start(out, 1, 4, overwrite=overwrite)
    tasks.step()
    tasks.step()
    as_nobody(f"printf planted > {out}/frame_0003.png && ln -s {victim} {out}/frame_0004.png")
    done = tasks.finish(task_id)
    assert (done["status"], done["done"], done["skipped_count"]) == ("completed", 4, 2), done
    assert done["status_message"].startswith("2 of 4 frames written; 2 skipped")
    assert [(s["frame"], s["file"]) for s in done["skipped"]] == [(3, "frame_0003.png"), (4, "frame_0004.png")]
    assert "a file of uid 65534" in done["skipped"][0]["reason"]
    assert "a symlink of uid 65534" in done["skipped"][1]["reason"]
    assert rendered == [1, 2]  # a taken name costs no render
    planted = out / "frame_0003.png"
    assert planted.read_bytes() == b"planted" and planted.stat().st_uid == NOBODY
    assert (out / "frame_0004.png").is_symlink() and victim.read_bytes() == b"precious"
    assert done["last_written"] == str(out / "frame_0002.png")


@pytest.fixture
def plant_during(base: Path) -> Iterator[dict[int, str]]:
    """Frame number -> a shell command `nobody` runs while that frame renders (after its name was looked at)."""
    plans: dict[int, str] = {}

    def plant(scene: Any, *_: Any) -> None:
        if script := plans.get(scene.frame_current):
            as_nobody(script)

    bpy.app.handlers.render_pre.append(plant)
    try:
        yield plans
    finally:
        bpy.app.handlers.render_pre.remove(plant)


@needs_another_user
def test_a_name_another_user_takes_while_its_frame_renders_is_skipped_and_left_alone(
    tasks: Tasks, base: Path, plant_during: dict[int, str]
) -> None:
    out = folder(base / "out", 0o1777)
    victim = base / "victim"
    victim.write_bytes(b"precious")
    plant_during[2] = f"printf planted > {out}/frame_0002.png"
    plant_during[3] = f"ln -s {victim} {out}/frame_0003.png"
    done = tasks.finish(tasks.start(out, 1, 4))
    assert (done["status"], done["done"], done["skipped_count"]) == ("completed", 4, 2), done
    assert [s["frame"] for s in done["skipped"]] == [2, 3]
    assert all("was taken while the frame rendered (File exists)" in s["reason"] for s in done["skipped"])
    assert (out / "frame_0002.png").read_bytes() == b"planted"
    assert (out / "frame_0003.png").is_symlink() and victim.read_bytes() == b"precious"
    assert all((out / f"frame_000{n}.png").read_bytes().startswith(PNG_SIGNATURE) for n in (1, 4))


@pytest.fixture
def elsewhere() -> Iterator[Path]:
    """A folder on another file system than the scratch renders' (tmpfs /dev/shm): frames are copied in."""
    shm = Path("/dev/shm")
    if not shm.is_dir() or shm.stat().st_dev == Path(tempfile.gettempdir()).stat().st_dev:
        pytest.skip("no second file system to render across")
    made = Path(tempfile.mkdtemp(prefix="hermes-frames-", dir=shm))
    made.chmod(0o1777)  # sticky: accepted, and `nobody` may add names
    try:
        yield made
    finally:
        shutil.rmtree(made)


@needs_another_user
def test_across_file_systems_frames_are_copied_in_and_a_symlink_planted_mid_render_is_left_alone(
    small_scene: None, elsewhere: Path, base: Path, plant_during: dict[int, str]
) -> None:
    catalogue = importlib.import_module(f"{ADDON_MODULE}.tools.catalogue").CATALOGUE
    victim = base / "victim"
    victim.write_bytes(b"precious")
    plant_during[2] = f"ln -s {victim} {elsewhere}/frame_0002.png"
    arguments = {"output_folder": str(elsewhere), "frame_start": 1, "frame_end": 3}
    job = a_job(importlib.import_module(f"{ADDON_MODULE}.dispatch").QueuedDispatcher())
    result = catalogue["render_frames_to_folder"].run(arguments, job)
    assert result["skipped_count"] == 1 and result["skipped"][0]["frame"] == 2, result
    assert victim.read_bytes() == b"precious" and (elsewhere / "frame_0002.png").is_symlink()
    written = [elsewhere / "frame_0001.png", elsewhere / "frame_0003.png"]
    assert all(path.read_bytes().startswith(PNG_SIGNATURE) for path in written)
    assert stat.S_IMODE(written[0].stat().st_mode) == 0o666 & ~_umask()
    (elsewhere / "frame_0002.png").unlink()  # root may, in a sticky folder
    plant_during.clear()
    before = written[0].stat().st_ino
    again = catalogue["render_frames_to_folder"].run({**arguments, "overwrite": True}, job)
    assert again["skipped_count"] == 0 and written[0].stat().st_ino != before  # replaced by a new file
    assert sorted(p.name for p in elsewhere.iterdir()) == [f"frame_000{n}.png" for n in range(1, 4)]  # no spare


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_a_stop_asked_while_a_frame_is_set_begins_no_render(tasks: Tasks, base: Path, rendered: list[int]) -> None:
    """Setting a frame evaluates its animation (seconds in a heavy scene); Blender's render, once begun, holds a stop
    until it ends. A stop asked meanwhile (as SIGTERM asks it: stop serving, interrupt the job) starts none."""
    tasks.dispatcher.interrupter.install()  # as the bridge does on the main thread
    out = folder(base / "out", 0o755)
    task_id = tasks.start(out, 1, 3)
    tasks.step()

    def stop(scene: Any, *_: Any) -> None:
        if scene.frame_current == 2:
            tasks.dispatcher.request_stop()
            tasks.dispatcher.interrupt_running()

    bpy.app.handlers.frame_change_post.append(stop)
    try:
        tasks.step()
    finally:
        bpy.app.handlers.frame_change_post.remove(stop)
    stopped = tasks.get(task_id)
    assert stopped["status"] == "failed" and stopped["status_message"].startswith("the bridge stopped after 1 of 3")
    assert rendered == [1] and [p.name for p in out.iterdir()] == ["frame_0001.png"]
    assert bpy.context.scene.frame_current == 1  # put back
