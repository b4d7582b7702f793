"""Every change an agent makes is told and can be taken back: change summaries, the agent's undo and redo,
checkpoints and what changed since a revision, through a real bridge in this (background) Blender, both protocol
eras, with the official SDK's client."""

from __future__ import annotations

import asyncio
import hashlib
import importlib
import json
import logging
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import bpy
import pytest

from hermes_blender.blender_host import ADDON_MODULE
from hermes_blender.contract.liveness import RuntimeFileSpec
from tests.sdk_client import SdkClient

from .conftest import serve_while

pytestmark = pytest.mark.timeout(300)

BOOKKEEPING = ("revision", "changed", "said")

ERAS = ("legacy", "2026-07-28")
THREE_CHANGES = """
import bpy
bpy.data.objects.remove(bpy.data.objects["Light"])
bpy.data.objects["Cube"].location = (4.0, 5.0, 6.0)
sphere = bpy.data.objects.new("Sphere", bpy.data.meshes.new("SphereMesh"))
bpy.context.scene.collection.objects.link(sphere)
result = {"done": True}
"""


def _scene() -> dict[str, Any]:
    """What "back exactly" compares: names, transforms, datablock counts."""
    return {
        "objects": {obj.name: tuple(round(v, 5) for v in obj.matrix_world.col[3]) for obj in bpy.data.objects},
        "counts": {kind: len(getattr(bpy.data, kind)) for kind in ("objects", "meshes", "lights", "cameras")},
    }


def _calls(bridge: Any, mode: str, script: Callable[[SdkClient], Any]) -> Any:
    """Run the client `script` on a thread while this thread serves the bridge (once per test: serving ends with it)."""
    client = SdkClient(RuntimeFileSpec(path=str(bridge.runtime_file)), mode=mode)  # type: ignore[arg-type]
    return serve_while(bridge.dispatcher, lambda: asyncio.run(script(client)))


def _on_main(bridge: Any, fn: Callable[[], Any]) -> Any:
    """`fn` on Blender's main thread between the agent's calls, as the person at Blender acts (not an agent job)."""
    return bridge.dispatcher.call(fn, 30.0)


@pytest.fixture(autouse=True)
def _pytest_is_this_blender(monkeypatch: pytest.MonkeyPatch) -> None:
    """The bridge runs in this pytest process (bpy), which the client's pid check rightly says is no Blender."""
    monkeypatch.setattr("tests.sdk_client.require_own_blender", lambda endpoint: None)


@pytest.fixture
def bridge(service: ModuleType, factory_scene: None, tmp_path: Path, runtime: Any) -> Any:
    return runtime.start(
        service.BridgeConfig(
            runtime_file=tmp_path / "server.json", lab_port=None, checkpoint_folder=tmp_path / "checkpoints"
        )
    )


@pytest.mark.parametrize("mode", ERAS)
def test_a_call_that_adds_moves_and_deletes_is_told_and_undone_exactly_and_redone(bridge: Any, mode: str) -> None:
    before = _scene()

    async def script(client: SdkClient) -> tuple[Any, ...]:
        changed = await client.call_tool("execute_blender_code", {"code": THREE_CHANGES})
        after_change = _on_main(bridge, _scene)
        undone = await client.call_tool("undo_agent_steps", {"steps": 1})
        after_undo = _on_main(bridge, _scene)
        redone = await client.call_tool("redo_agent_steps", {"steps": 1})
        return changed, after_change, undone, after_undo, redone, _on_main(bridge, _scene)

    changed, after_change, undone, after_undo, redone, after_redo = _calls(bridge, mode, script)
    assert not changed.is_error, changed.text
    told = changed.structured["changes"]
    assert told["added"] == ["Sphere"]
    assert told["removed"] == ["Light"]
    assert told["transformed"] == ["Cube"]
    assert told["datablocks"] == {"meshes": 1}  # the Light's data stays (an orphan), as Blender keeps it
    assert "shading_changed" not in told  # Blender re-shades every object when one leaves: not the agent's doing
    assert "selection" not in told
    assert told["revision"]["after"] > told["revision"]["before"]
    assert "added Sphere" in told["said"] and "removed Light" in told["said"] and "moved Cube" in told["said"]

    assert not undone.is_error, undone.text
    assert after_undo == before
    assert undone.structured["changes"]["removed"] == ["Sphere"]
    assert undone.structured["changes"]["added"] == ["Light"]
    assert not redone.is_error, redone.text
    assert after_redo == after_change
    assert redone.structured["changes"]["added"] == ["Sphere"]


def test_a_call_that_changes_nothing_tells_nothing_and_takes_no_step(bridge: Any) -> None:
    async def script(client: SdkClient) -> tuple[Any, Any]:
        read = await client.call_tool("execute_blender_code", {"code": "result = {'n': len(bpy.data.objects)}"})
        history = await client.call_tool("get_agent_history", {})
        return read, history

    read, history = _calls(bridge, "2026-07-28", script)
    assert "changes" not in read.structured
    assert history.structured["steps"] == []


def test_undo_takes_back_only_the_agents_own_steps_and_refuses_more_than_it_has(bridge: Any) -> None:
    async def script(client: SdkClient) -> tuple[Any, ...]:
        await client.call_tool("execute_blender_code", {"code": "bpy.data.objects['Cube'].location.x = 9"})
        await client.call_tool("execute_blender_code", {"code": "bpy.data.objects['Cube'].name = 'Box'"})
        too_many = await client.call_tool("undo_agent_steps", {"steps": 3})
        zero = await client.call_tool("undo_agent_steps", {"steps": 0})
        two = await client.call_tool("undo_agent_steps", {"steps": 2})
        none_left = await client.call_tool("undo_agent_steps", {"steps": 1})
        return too_many, zero, two, none_left

    too_many, zero, two, none_left = _calls(bridge, "2026-07-28", script)
    assert too_many.is_error and "nothing_to_undo" in too_many.text and "has 2 steps" in too_many.text
    assert zero.is_error and "invalid_arguments" in zero.text
    assert not two.is_error, two.text
    assert two.structured["changes"]["renamed"] == [{"from": "Box", "to": "Cube"}]
    assert "Cube" in bpy.data.objects and bpy.data.objects["Cube"].location.x == 0.0
    assert none_left.is_error and "nothing_to_undo" in none_left.text


def test_a_file_opened_since_ends_the_history_and_the_answer_says_so(bridge: Any, tmp_path: Path) -> None:
    user_file = tmp_path / "user.blend"

    async def script(client: SdkClient) -> tuple[Any, Any]:
        await client.call_tool("execute_blender_code", {"code": "bpy.data.objects['Cube'].location.x = 3"})
        opened = await client.call_tool(
            "execute_blender_code",
            {
                "code": f"bpy.ops.wm.save_as_mainfile(filepath={str(user_file)!r})\n"
                f"bpy.ops.wm.open_mainfile(filepath={str(user_file)!r})"
            },
        )
        undo = await client.call_tool("undo_agent_steps", {"steps": 1})
        return opened, undo

    opened, undo = _calls(bridge, "2026-07-28", script)
    events = [event["event"] for event in opened.structured["changes"]["file"]]
    assert events == ["saved", "reverted"]
    assert undo.is_error and "history ended" in undo.text


def test_a_checkpoint_restores_a_scene_whose_objects_were_all_deleted_and_keeps_the_users_file(
    bridge: Any, tmp_path: Path
) -> None:
    user_file = tmp_path / "project" / "chair.blend"
    user_file.parent.mkdir()
    bpy.ops.wm.save_as_mainfile(filepath=str(user_file))
    on_disk = hashlib.sha256(user_file.read_bytes()).hexdigest()
    before = _scene()

    async def script(client: SdkClient) -> tuple[Any, ...]:
        saved = await client.call_tool("save_checkpoint", {"name": "before cleanup"})
        deleted = await client.call_tool(
            "execute_blender_code", {"code": "for o in list(bpy.data.objects): bpy.data.objects.remove(o)"}
        )
        restored = await client.call_tool("restore_checkpoint", {"name": "before cleanup"})
        after_restore = _on_main(bridge, lambda: (_scene(), bpy.data.filepath, bpy.data.is_dirty))
        listed = await client.call_tool("list_checkpoints", {})
        rescue = restored.structured["rescue"]["name"]
        again = await client.call_tool("restore_checkpoint", {"name": rescue})
        after_rescue = _on_main(bridge, lambda: (len(bpy.data.objects), bpy.data.filepath))
        return saved, deleted, restored, after_restore, listed, again, after_rescue

    saved, deleted, restored, after_restore, listed, again, after_rescue = _calls(bridge, "legacy", script)
    assert not saved.is_error, saved.text
    assert sorted(deleted.structured["changes"]["removed"]) == ["Camera", "Cube", "Light"]
    assert not restored.is_error, restored.text
    scene, path, dirty = after_restore
    assert scene == before
    assert path == str(user_file)
    assert restored.structured["file_unchanged"] is True
    assert dirty  # what is open is no longer what the file on disk holds
    assert hashlib.sha256(user_file.read_bytes()).hexdigest() == on_disk
    assert sorted(restored.structured["changes"]["added"]) == ["Camera", "Cube", "Light"]
    rescue = restored.structured["rescue"]["name"]
    assert rescue.startswith("rescue-")
    names = [entry["name"] for entry in listed.structured["checkpoints"]]
    assert set(names) == {"before cleanup", rescue}
    folder = tmp_path / "checkpoints"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert all(stat.S_IMODE(path.stat().st_mode) == 0o600 for path in folder.iterdir() if path.is_file())
    assert not again.is_error, again.text
    assert after_rescue == (0, str(user_file))  # the rescue checkpoint holds the deleted-all state
    assert hashlib.sha256(user_file.read_bytes()).hexdigest() == on_disk


@pytest.mark.skipif(sys.platform != "linux", reason="a file name that is not UTF-8: Linux file systems keep its bytes")
def test_a_file_whose_name_is_not_utf8_is_checkpointed_and_restored_as_the_users_file(
    bridge: Any, tmp_path: Path
) -> None:
    user_file = os.fsdecode(os.fsencode(tmp_path) + b"/caf\xe9 chair.blend")
    bpy.ops.wm.save_as_mainfile(filepath=user_file)
    assert bpy.data.filepath == user_file

    async def script(client: SdkClient) -> tuple[Any, ...]:
        saved = await client.call_tool("save_checkpoint", {"name": "latin-1 name"})
        await client.call_tool("execute_blender_code", {"code": "bpy.data.objects.remove(bpy.data.objects['Cube'])"})
        restored = await client.call_tool("restore_checkpoint", {"name": "latin-1 name"})
        return saved, restored, _on_main(bridge, lambda: (sorted(o.name for o in bpy.data.objects), bpy.data.filepath))

    saved, restored, (names, path) = _calls(bridge, "2026-07-28", script)
    assert not saved.is_error, saved.text
    assert not restored.is_error, restored.text
    assert restored.structured["file_unchanged"] is True
    assert (names, path) == (["Camera", "Cube", "Light"], user_file)


def test_restores_in_a_never_saved_session_keep_one_copy_and_every_copy_the_user_saved(
    bridge: Any, tmp_path: Path
) -> None:
    unsaved = tmp_path / "checkpoints" / "unsaved"

    def copies() -> list[str]:
        return sorted(path.name for path in unsaved.glob("*.blend"))

    async def script(client: SdkClient) -> tuple[Any, ...]:
        await client.call_tool("save_checkpoint", {"name": "draft"})
        after_each = []
        for _ in range(3):
            restored = await client.call_tool("restore_checkpoint", {"name": "draft"})
            assert not restored.is_error, restored.text
            after_each.append((copies(), _on_main(bridge, lambda: Path(bpy.data.filepath).name)))
        rescues = [
            entry["file"] for entry in (await client.call_tool("list_checkpoints", {})).structured["checkpoints"]
        ]
        saved_by_user = _on_main(bridge, lambda: (bpy.ops.wm.save_mainfile(), Path(bpy.data.filepath).name)[1])
        await client.call_tool("restore_checkpoint", {"name": "draft"})
        return after_each, rescues, saved_by_user, copies(), _on_main(bridge, lambda: Path(bpy.data.filepath).name)

    after_each, rescues, saved_by_user, kept, open_now = _calls(bridge, "2026-07-28", script)
    assert all(names == [open_file] for names, open_file in after_each)  # one copy: the open one
    assert len({open_file for _, open_file in after_each}) == 3
    assert rescues == [""] * len(rescues)  # an untouched copy is no file of the user's: the rescues say unsaved
    # the copy the user saved is their file now: a restore returns to it, where their next save goes
    assert kept == [saved_by_user] and open_now == saved_by_user


def test_a_restore_keeps_another_blenders_copies_and_is_not_failed_by_stray_notes(bridge: Any, tmp_path: Path) -> None:
    checkpoints = importlib_module(bridge, "checkpoints")
    unsaved = tmp_path / "checkpoints" / "unsaved"
    unsaved.mkdir(parents=True, mode=0o700)
    other_blender = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    try:
        for name, pid in (("other", other_blender.pid), ("ended", int(ended.stdout))):
            copy = unsaved / f"{name}.blend"
            copy.write_bytes(b"a copy " + name.encode())
            note = {"pid": pid, "stamp": checkpoints._stamp(copy)}
            (unsaved / f"{name}.blend.untouched.json").write_text(json.dumps(note))
        (unsaved / ".untouched.json").write_text("{}")
        (unsaved / "broken.blend").write_bytes(b"someone's")
        (unsaved / "broken.blend.untouched.json").write_text("{")

        async def script(client: SdkClient) -> Any:
            await client.call_tool("save_checkpoint", {"name": "draft"})
            return await client.call_tool("restore_checkpoint", {"name": "draft"})

        said = logging.Handler()
        warnings: list[logging.LogRecord] = []
        said.emit = warnings.append  # type: ignore[method-assign]
        importlib_module(bridge, "log").logger.addHandler(said)
        try:
            restored = _calls(bridge, "2026-07-28", script)
        finally:
            importlib_module(bridge, "log").logger.removeHandler(said)
    finally:
        other_blender.kill()
        other_blender.wait()
    assert not restored.is_error, restored.text
    assert not [record.getMessage() for record in warnings if "tidied" in record.getMessage()]
    left = sorted(path.name for path in unsaved.glob("*.blend"))
    assert "other.blend" in left  # a running Blender's copy: maybe open there
    assert "ended.blend" not in left  # its Blender has ended and nobody saved to it
    assert "broken.blend" in left  # no note of ours: nothing says it is a duplicate


def test_a_restore_whose_tidying_fails_still_answers_the_restore(bridge: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    checkpoints = importlib_module(bridge, "checkpoints")

    def fails(self: Any) -> None:
        raise RuntimeError("the tidy-up broke")

    monkeypatch.setattr(checkpoints.Checkpoints, "_drop_untouched_copies", fails)

    async def script(client: SdkClient) -> Any:
        await client.call_tool("save_checkpoint", {"name": "draft"})
        await client.call_tool("execute_blender_code", {"code": "bpy.data.objects.remove(bpy.data.objects['Cube'])"})
        return await client.call_tool("restore_checkpoint", {"name": "draft"})

    restored = _calls(bridge, "2026-07-28", script)
    assert not restored.is_error, restored.text
    assert restored.structured["changes"]["added"] == ["Cube"]


def test_a_save_of_the_open_copy_makes_it_the_users_at_once(bridge: Any, tmp_path: Path) -> None:
    """However coarse the disk's clock, the save Blender reports is enough: the copy's note goes then."""

    async def script(client: SdkClient) -> Path:
        await client.call_tool("save_checkpoint", {"name": "draft"})
        await client.call_tool("restore_checkpoint", {"name": "draft"})
        return Path(_on_main(bridge, lambda: bpy.data.filepath))

    copy = _calls(bridge, "2026-07-28", script)
    note = copy.with_name(copy.name + ".untouched.json")
    assert note.is_file()
    bpy.ops.wm.save_mainfile()
    assert not note.exists()


@pytest.mark.parametrize(
    ("name", "state"),
    [
        ("../escape", "invalid_checkpoint_name"),
        ("a/b", "invalid_checkpoint_name"),
        ("bad\x07bell", "invalid_checkpoint_name"),
        ("never saved", "checkpoint_not_found"),
    ],
)
def test_a_bad_checkpoint_name_is_a_named_error_and_the_scene_is_untouched(bridge: Any, name: str, state: str) -> None:
    before = _scene()

    async def script(client: SdkClient) -> Any:
        return await client.call_tool("restore_checkpoint", {"name": name})

    refused = _calls(bridge, "2026-07-28", script)
    assert refused.is_error and state in refused.text
    assert _scene() == before


def test_a_folder_that_cannot_be_written_is_a_named_error_and_nothing_is_lost(
    service: ModuleType, factory_scene: None, tmp_path: Path, runtime: Any
) -> None:
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("a file where the folder should be")
    bridge = runtime.start(
        service.BridgeConfig(runtime_file=tmp_path / "server.json", lab_port=None, checkpoint_folder=blocked)
    )
    before = _scene()

    async def script(client: SdkClient) -> Any:
        return await client.call_tool("save_checkpoint", {"name": "x"})

    refused = _calls(bridge, "2026-07-28", script)
    assert refused.is_error and "checkpoint_not_written" in refused.text
    assert blocked.read_text() == "a file where the folder should be"
    assert _scene() == before


def test_get_scene_changes_names_what_changed_since_a_revision_and_refuses_one_it_no_longer_knows(
    bridge: Any,
) -> None:
    async def script(client: SdkClient) -> tuple[Any, ...]:
        first = await client.call_tool("execute_blender_code", {"code": "bpy.data.objects['Cube'].location.z = 2"})
        start = first.structured["changes"]["revision"]["after"]
        await client.call_tool("execute_blender_code", {"code": "bpy.data.objects.remove(bpy.data.objects['Light'])"})
        since = await client.call_tool("get_scene_changes", {"since_revision": start})
        everything = await client.call_tool("get_scene_changes", {"since_revision": 0})
        return since, everything

    since, everything = _calls(bridge, "2026-07-28", script)
    assert since.structured["changes"]["removed"] == ["Light"]
    assert "transformed" not in since.structured["changes"]
    assert everything.is_error and "revision_too_old" in everything.text


def test_between_job_edits_reach_get_scene_changes(bridge: Any) -> None:
    """What changed outside any call (in the GUI: the user's edits) is in the record too."""

    def move_camera() -> None:
        bpy.data.objects["Camera"].location.x += 1

    async def script(client: SdkClient) -> Any:
        first = await client.call_tool("get_agent_history", {})
        _on_main(bridge, move_camera)  # not inside an agent's call
        return await client.call_tool("get_scene_changes", {"since_revision": first.structured["revision"]})

    since = _calls(bridge, "2026-07-28", script)
    assert since.structured["changes"]["transformed"] == ["Camera"]


def test_checkpoint_folder_is_bounded_oldest_first(bridge: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    checkpoints = importlib_module(bridge, "checkpoints")
    monkeypatch.setattr(checkpoints, "KEPT_COUNT", 2)

    async def script(client: SdkClient) -> Any:
        for name in ("one", "two", "three"):
            await client.call_tool("save_checkpoint", {"name": name})
        return await client.call_tool("list_checkpoints", {})

    listed = _calls(bridge, "2026-07-28", script)
    assert [entry["name"] for entry in listed.structured["checkpoints"]] == ["three", "two"]


def test_a_checkpoint_whose_file_is_gone_or_whose_note_names_another_is_not_found(bridge: Any) -> None:
    """A restore reads the one note it is asked for: a note whose .blend was deleted, or one copied under another name,
    is no checkpoint (nor listed: one checkpoint is listed once), and the scene stays as it was."""
    for name in ("gone", "kept"):
        assert not bridge.tool_host.run_here("save_checkpoint", {"name": name}).is_error
    folder = bridge.execution.checkpoints.folder
    (folder / "gone.blend").unlink()
    shutil.copy(folder / "kept.json", folder / "copied.json")
    bpy.data.objects.remove(bpy.data.objects["Cube"])
    before = _scene()

    async def script(client: SdkClient) -> Any:
        return [await client.call_tool("restore_checkpoint", {"name": name}) for name in ("gone", "copied")]

    for refused in _calls(bridge, "2026-07-28", script):
        assert refused.is_error and "checkpoint_not_found" in refused.text, refused.text
    assert _scene() == before
    listed = bridge.tool_host.run_here("list_checkpoints", {})
    assert [entry["name"] for entry in json.loads(listed.content[0]["text"])["checkpoints"]] == ["kept"]


@pytest.mark.timeout(60)
def test_a_note_that_is_a_fifo_a_device_or_of_other_types_is_no_checkpoint_and_nothing_hangs(bridge: Any) -> None:
    """What stands at a note's place is read as runtime records are: the list and a restore answer, never hang on a
    FIFO nor fill memory from /dev/zero, and a note whose fields are of other types is not listed."""
    execution = bridge.execution
    for name in ("fifo", "zero", "typed", "kept"):
        assert not bridge.tool_host.run_here("save_checkpoint", {"name": name}).is_error
    folder = execution.checkpoints.folder
    (folder / "fifo.json").unlink()
    os.mkfifo(folder / "fifo.json")
    (folder / "zero.json").unlink()
    (folder / "zero.json").symlink_to("/dev/zero")
    typed = json.loads((folder / "typed.json").read_text())
    (folder / "typed.json").write_text(json.dumps({**typed, "saved_at": "yesterday"}))
    listed = bridge.tool_host.run_here("list_checkpoints", {})
    assert [entry["name"] for entry in json.loads(listed.content[0]["text"])["checkpoints"]] == ["kept"]
    for name in ("fifo", "zero", "typed"):
        refused = bridge.tool_host.run_here("restore_checkpoint", {"name": name})
        assert refused.is_error and "checkpoint_not_found" in refused.content[0]["text"], refused.content


def importlib_module(bridge: Any, name: str) -> ModuleType:
    import importlib

    return importlib.import_module(f"{type(bridge).__module__.rsplit('.', 1)[0]}.{name}")


def test_the_change_summary_is_in_the_lab_answer(bridge: Any) -> None:
    execution = bridge.execution
    envelope = serve_while(
        bridge.dispatcher,
        lambda: execution.run_lab_code("import bpy\nbpy.data.objects['Cube'].scale = (2, 2, 2)", False, lambda: True),
    )
    assert envelope["status"] == "ok"
    assert envelope["changes"]["transformed"] == ["Cube"]


def test_checkpoints_are_never_written_beside_the_users_file(bridge: Any, tmp_path: Path) -> None:
    user_file = tmp_path / "work" / "scene.blend"
    user_file.parent.mkdir()
    bpy.ops.wm.save_as_mainfile(filepath=str(user_file))

    async def script(client: SdkClient) -> Any:
        return await client.call_tool("save_checkpoint", {"name": "safe"})

    _calls(bridge, "2026-07-28", script)
    assert os.listdir(user_file.parent) == ["scene.blend"]


def test_a_call_that_adds_many_objects_is_told_within_the_answer_budget_with_whole_counts(bridge: Any) -> None:
    code = (
        "for i in range(20000):\n"
        "    bpy.context.scene.collection.objects.link(bpy.data.objects.new(f'Many_{i:05d}', None))\n"
    )

    async def script(client: SdkClient) -> Any:
        return await client.call_tool("execute_blender_code", {"code": code})

    told = _calls(bridge, "2026-07-28", script)
    assert not told.is_error, told.text
    changes = told.structured["changes"]
    assert changes["cut_at_budget"] is True and changes["counts"]["added"] == 20000
    assert 0 < len(changes["added"]) < 20000
    assert len(told.text) < 40_000
    assert "and 19997 more" in changes["said"]


def test_the_panels_buttons_do_what_the_tools_do_with_the_same_refusals(bridge: Any) -> None:
    """`ToolHost.run_here`, what the panel's Undo, Cancel and Restore buttons call on Blender's main thread."""
    nothing = bridge.tool_host.run_here("undo_agent_steps", {"steps": 1})
    assert nothing.is_error and '"state":"nothing_to_undo"' in nothing.content[0]["text"]

    async def script(client: SdkClient) -> Any:
        return await client.call_tool("execute_blender_code", {"code": "bpy.data.objects['Cube'].name = 'Box'"})

    _calls(bridge, "2026-07-28", script)
    undone = bridge.tool_host.run_here("undo_agent_steps", {"steps": 1})
    assert not undone.is_error and "renamed Box to Cube" in undone.content[0]["text"]
    assert "Cube" in bpy.data.objects
    missing = bridge.tool_host.run_here("restore_checkpoint", {"name": "never saved"})
    assert missing.is_error and "checkpoint_not_found" in missing.content[0]["text"]


def test_a_restored_file_reads_as_changed_even_when_the_user_had_just_saved(bridge: Any, tmp_path: Path) -> None:
    """What is open after a restore is not what the user's file on disk holds: Blender must ask before closing."""
    user_file = tmp_path / "saved.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(user_file))

    def reopen() -> bool:  # Blender in the background keeps a file "changed" across a save; a fresh open is clean
        bpy.ops.wm.open_mainfile(filepath=str(user_file))
        return bpy.data.is_dirty

    async def script(client: SdkClient) -> Any:
        await client.call_tool("save_checkpoint", {"name": "clean"})
        clean = not _on_main(bridge, reopen)  # the user opens their file: nothing unsaved
        await client.call_tool("restore_checkpoint", {"name": "clean"})
        return clean, _on_main(bridge, lambda: (bpy.data.is_dirty, bpy.data.filepath))

    clean, after = _calls(bridge, "2026-07-28", script)
    if not clean:
        pytest.skip("this Blender (4.5 in the background) marks a file it just opened as changed: nothing to show")
    assert after == (True, str(user_file))


def test_restoring_again_and_again_never_drops_the_checkpoint_restored(
    bridge: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each restore saves a rescue checkpoint: the bound drops rescues first, never the one being restored."""
    monkeypatch.setattr(importlib_module(bridge, "checkpoints"), "KEPT_COUNT", 1)

    async def script(client: SdkClient) -> list[Any]:
        await client.call_tool("save_checkpoint", {"name": "keeper"})
        return [await client.call_tool("restore_checkpoint", {"name": "keeper"}) for _ in range(5)]

    restores = _calls(bridge, "2026-07-28", script)
    assert [result.is_error for result in restores] == [False] * 5, restores[-1].text


def test_code_that_runs_undo_itself_ends_the_history_and_says_so(bridge: Any) -> None:
    async def script(client: SdkClient) -> Any:
        await client.call_tool("execute_blender_code", {"code": "bpy.data.objects['Cube'].location.x = 1"})
        await client.call_tool("execute_blender_code", {"code": "bpy.data.objects['Cube'].location.x = 2"})
        await client.call_tool("execute_blender_code", {"code": "bpy.ops.ed.undo()"})
        return await client.call_tool("undo_agent_steps", {"steps": 1})

    refused = _calls(bridge, "2026-07-28", script)
    assert refused.is_error and "nothing_to_undo" in refused.text and "undo history itself" in refused.text


def test_handlers_agent_code_removes_are_put_back_and_changes_are_still_told(bridge: Any) -> None:
    clear = "bpy.app.handlers.depsgraph_update_post.clear()\nbpy.app.handlers.load_post.clear()"

    async def script(client: SdkClient) -> tuple[Any, Any]:
        cleared = await client.call_tool(
            "execute_blender_code", {"code": f"{clear}\nbpy.data.objects['Light'].location.x = 2"}
        )
        return cleared, await client.call_tool(
            "execute_blender_code", {"code": "bpy.data.objects['Cube'].location.x = 3"}
        )

    cleared, moved = _calls(bridge, "2026-07-28", script)
    assert cleared.structured["changes"]["transformed"] == ["Light"]  # put back before the job's own span closed
    assert moved.structured["changes"]["transformed"] == ["Cube"]


@pytest.mark.parametrize("name", ["CON", "nul.txt", "com1", "trailing.", "trailing "])
def test_names_windows_reserves_are_refused(bridge: Any, name: str) -> None:
    async def script(client: SdkClient) -> Any:
        return await client.call_tool("save_checkpoint", {"name": name})

    refused = _calls(bridge, "2026-07-28", script)
    assert refused.is_error and "invalid_checkpoint_name" in refused.text


def test_a_revision_this_bridge_never_gave_is_refused_by_name(bridge: Any) -> None:
    async def script(client: SdkClient) -> Any:
        return await client.call_tool("get_scene_changes", {"since_revision": 10**12})

    refused = _calls(bridge, "2026-07-28", script)
    assert refused.is_error and "revision_unknown" in refused.text


def test_the_agents_undo_is_in_what_changed_since(bridge: Any) -> None:
    async def script(client: SdkClient) -> Any:
        moved = await client.call_tool("execute_blender_code", {"code": "bpy.data.objects['Cube'].location.x = 5"})
        await client.call_tool("undo_agent_steps", {"steps": 1})
        since = moved.structured["changes"]["revision"]["after"]
        return await client.call_tool("get_scene_changes", {"since_revision": since})

    since = _calls(bridge, "2026-07-28", script)
    assert since.structured["changes"]["transformed"] == ["Cube"] and since.structured["changes"]["changed"]


def test_an_object_added_to_no_scene_beside_a_move_is_told_in_its_own_call(bridge: Any) -> None:
    code = "bpy.data.objects['Cube'].location.x = 5\nbpy.data.objects.new('Ghost', None)"

    async def script(client: SdkClient) -> Any:
        return await client.call_tool("execute_blender_code", {"code": code})

    told = _calls(bridge, "2026-07-28", script).structured["changes"]
    assert told["added"] == ["Ghost"] and told["transformed"] == ["Cube"]


def test_a_restore_while_a_render_task_works_is_refused_and_nothing_changes(bridge: Any, tmp_path: Path) -> None:
    frames = tmp_path / "frames"
    frames.mkdir()

    async def script(client: SdkClient) -> tuple[Any, Any, Any]:
        small = "r = bpy.context.scene.render\nr.engine = 'BLENDER_WORKBENCH'\nr.resolution_x = r.resolution_y = 16"
        await client.call_tool("execute_blender_code", {"code": small})
        await client.call_tool("save_checkpoint", {"name": "mid-render"})
        started = await client.call_tool(
            "start_render_frames_task", {"output_folder": str(frames), "frame_start": 1, "frame_end": 20}
        )
        refused = await client.call_tool("restore_checkpoint", {"name": "mid-render"})
        await client.call_tool("cancel_render_frames_task", {"task_id": started.structured["task_id"]})
        listed = await client.call_tool("list_checkpoints", {})
        return started, refused, listed

    started, refused, listed = _calls(bridge, "2026-07-28", script)
    assert not started.is_error, started.text
    assert refused.is_error and "render_task_running" in refused.text
    assert [entry["name"] for entry in listed.structured["checkpoints"]] == ["mid-render"]  # no rescue was written


MEMBERSHIP_NOISE = {
    "a material removed": ("bpy.data.materials.remove(bpy.data.materials['Material'])", "data_changed"),
    "an object hidden": ("bpy.data.objects['Cube'].hide_viewport = True", "visibility_changed"),
    "an orphan mesh made and removed": ("bpy.data.meshes.remove(bpy.data.meshes.new('Orphan'))", None),
    "an object unlinked and linked again": (
        "c = bpy.data.collections['Collection']\no = bpy.data.objects['Cube']\nc.objects.unlink(o)\nc.objects.link(o)",
        None,
    ),
}


@pytest.mark.parametrize(("code", "told_as"), MEMBERSHIP_NOISE.values(), ids=MEMBERSHIP_NOISE.keys())
def test_a_change_that_moves_no_object_between_collections_names_no_collection(
    bridge: Any, code: str, told_as: str | None
) -> None:
    """Blender re-evaluates every collection for these; no collection's members changed, so none is told (and a
    call whose only trace was that re-evaluation changed nothing)."""

    async def script(client: SdkClient) -> Any:
        return await client.call_tool("execute_blender_code", {"code": code})

    told = _calls(bridge, "2026-07-28", script).structured.get("changes", {})
    assert "collections_changed" not in told, told
    if told_as is None:
        assert not told
    else:
        assert told_as in told and "collections" not in told["said"], told


def test_objects_moved_between_collections_name_exactly_the_collections_whose_members_changed(bridge: Any) -> None:
    setup = (
        "for name in ('Props', 'Lights', 'Spare'):\n"
        "    bpy.context.scene.collection.children.link(bpy.data.collections.new(name))\n"
        "bpy.data.collections['Lights'].objects.link(bpy.data.objects['Light'])\n"
        "bpy.data.collections['Spare'].objects.link(bpy.data.objects['Light'])\n"
        "bpy.data.collections.new('Loose')"  # in no scene: Blender evaluates nothing of it
    )
    move = (
        "bpy.data.collections['Props'].objects.link(bpy.data.objects['Cube'])\n"
        "bpy.data.collections['Lights'].objects.unlink(bpy.data.objects['Light'])"
    )
    loose = "bpy.data.collections['Loose'].objects.link(bpy.data.objects['Camera'])"
    nest = "bpy.data.collections['Props'].children.link(bpy.data.collections['Spare'])"

    async def script(client: SdkClient) -> list[Any]:
        return [await client.call_tool("execute_blender_code", {"code": code}) for code in (setup, move, loose, nest)]

    made, moved, linked, nested = (answer.structured["changes"] for answer in _calls(bridge, "2026-07-28", script))
    assert made["collections_changed"] == ["Lights", "Scene Collection", "Spare"]  # Props new and empty: not named
    assert made["said"].startswith("changed the collections Lights, Scene Collection, Spare")
    assert made["datablocks"] == {"collections": 4}
    assert moved["collections_changed"] == ["Lights", "Props"]
    assert linked["collections_changed"] == ["Loose"]
    assert nested["collections_changed"] == ["Props"]


def test_undoing_a_selection_change_tells_the_selection_it_brought_back(bridge: Any) -> None:
    select = "for o in bpy.data.objects:\n    o.select_set(o.name == 'Camera')"

    def selected() -> list[str]:
        return sorted(o.name for o in bpy.context.view_layer.objects.selected)

    async def script(client: SdkClient) -> tuple[Any, Any, Any]:
        before = _on_main(bridge, selected)
        changed = await client.call_tool("execute_blender_code", {"code": select})
        return before, changed, await client.call_tool("undo_agent_steps", {"steps": 1})

    before, changed, undone = _calls(bridge, "2026-07-28", script)
    assert before != ["Camera"] and changed.structured["changes"]["selection"] == ["Camera"]
    assert set(changed.structured["changes"]) == {"revision", "selection", "changed", "said"}
    assert undone.structured["changes"]["selection"] == before
    assert f"selection now {', '.join(before)}" in undone.structured["changes"]["said"]


SHADING = {
    "a parent set": ("bpy.data.objects['Light'].parent = bpy.data.objects['Cube']", []),
    "the scene's camera cleared": ("bpy.context.scene.camera = None", []),
    "a material's colour": ("bpy.data.materials['Material'].diffuse_color = (1, 0, 0, 1)", ["Cube"]),
    "an object's colour": ("bpy.data.objects['Cube'].color = (1, 0, 0, 1)", ["Cube"]),
    "every object's colour and a material": (
        "for o in bpy.data.objects:\n    o.color = (1, 0, 0, 1)\nbpy.data.materials['Material'].roughness = 0.1",
        ["Camera", "Cube", "Light"],
    ),
}


@pytest.mark.parametrize(("code", "shaded"), SHADING.values(), ids=SHADING.keys())
def test_shading_is_told_for_the_objects_whose_look_changed_not_when_blender_reshades_them_all(
    bridge: Any, code: str, shaded: list[str]
) -> None:
    """A parent or the scene's camera makes Blender rebuild its relations and re-shade every object: that is not
    each object's shading changing."""

    async def script(client: SdkClient) -> Any:
        return await client.call_tool("execute_blender_code", {"code": code})

    told = _calls(bridge, "2026-07-28", script).structured.get("changes", {})
    assert sorted(told.get("shading_changed", [])) == shaded, told


SCENE_SETTINGS = {
    "the render engine": ("bpy.context.scene.render.engine = 'CYCLES'", "render.engine", "CYCLES"),
    "the frame range": ("bpy.context.scene.frame_end = 99", "frame_end", 99),
    "the scene's camera": ("bpy.context.scene.camera = None", "camera", None),
}


@pytest.mark.parametrize(("code", "path", "value"), SCENE_SETTINGS.values(), ids=SCENE_SETTINGS.keys())
def test_a_scene_setting_the_agent_changes_is_told_and_taken_back(
    bridge: Any, code: str, path: str, value: Any
) -> None:
    """The depsgraph names none of these: the summary compares them, so the call is a step the agent can undo."""

    async def script(client: SdkClient) -> tuple[Any, Any, Any]:
        changed = await client.call_tool("execute_blender_code", {"code": code})
        undone = await client.call_tool("undo_agent_steps", {"steps": 1})
        return changed, undone, _on_main(bridge, lambda: bpy.context.scene.path_resolve(path))

    changed, undone, after_undo = _calls(bridge, "2026-07-28", script)
    told = changed.structured["changes"]["scene_changed"]
    assert told[path]["to"] == value and told[path]["from"] != value
    revision = changed.structured["changes"]["revision"]
    assert revision["after"] > revision["before"]  # what changed since `before` includes it
    assert f"scene {path} " in changed.structured["changes"]["said"]
    assert not undone.is_error, undone.text
    assert undone.structured["changes"]["scene_changed"][path] == {"from": value, "to": told[path]["from"]}
    assert (after_undo.name if isinstance(after_undo, bpy.types.ID) else after_undo) == told[path]["from"]


COLLECTION_SETTINGS = {
    "hidden from renders": "bpy.data.collections['Collection'].hide_render = True",
    "hidden in the viewport": "bpy.data.collections['Collection'].hide_viewport = True",
    "excluded from the view layer": "bpy.context.view_layer.layer_collection.children['Collection'].exclude = True",
    "hidden in the view layer (its eye)": (
        "bpy.context.view_layer.layer_collection.children['Collection'].hide_viewport = True"
    ),
    "its instance offset": "bpy.data.collections['Collection'].instance_offset = (1, 2, 3)",
}


@pytest.mark.parametrize("code", COLLECTION_SETTINGS.values(), ids=COLLECTION_SETTINGS.keys())
def test_a_collection_hidden_or_excluded_is_told_undoable_and_tells_every_watched_object(
    bridge: Any, code: str
) -> None:
    resources = importlib.import_module(f"{ADDON_MODULE}.resources")

    async def script(client: SdkClient) -> tuple[Any, Any, Any]:
        changed = await client.call_tool("execute_blender_code", {"code": code})
        undone = await client.call_tool("undo_agent_steps", {"steps": 1})
        return changed, undone, _on_main(bridge, lambda: bpy.data.collections["Collection"].hide_render)

    changed, undone, hidden_after_undo = _calls(bridge, "2026-07-28", script)
    told = changed.structured["changes"]
    assert told["collections_changed"] == ["Collection"], told
    assert "blender://objects/Cube" in resources.touched(told, frozenset({"blender://objects/Cube"}))
    assert not undone.is_error and undone.structured["changes"]["collections_changed"] == ["Collection"]
    assert hidden_after_undo is False


def test_collections_are_compared_afresh_after_an_undo_a_restore_and_between_calls(bridge: Any) -> None:
    setup = "bpy.context.scene.collection.children.link(bpy.data.collections.new('Props'))"
    link = "bpy.data.collections['Props'].objects.link(bpy.data.objects['Cube'])"
    unlink = "bpy.data.collections['Props'].objects.unlink(bpy.data.objects['Cube'])"

    async def script(client: SdkClient) -> dict[str, Any]:
        def code(text: str) -> Any:
            return client.call_tool("execute_blender_code", {"code": text})

        answers = {"setup": await code(setup), "link": await code(link)}
        answers["undo"] = await client.call_tool("undo_agent_steps", {"steps": 1})
        answers["link again"] = await code(link)
        await client.call_tool("save_checkpoint", {"name": "linked"})
        answers["unlink"] = await code(unlink)
        await client.call_tool("restore_checkpoint", {"name": "linked"})
        answers["unlink after the restore"] = await code(unlink)
        since = answers["unlink after the restore"].structured["changes"]["revision"]["after"]
        _on_main(bridge, lambda: bpy.data.collections["Props"].objects.link(bpy.data.objects["Light"]))
        answers["the person's link"] = await client.call_tool("get_scene_changes", {"since_revision": since})
        return answers

    answers = _calls(bridge, "2026-07-28", script)
    told = {key: answer.structured["changes"].get("collections_changed") for key, answer in answers.items()}
    assert told == {"setup": ["Scene Collection"]} | {key: ["Props"] for key in told if key != "setup"}, told


def test_another_scenes_top_collection_is_named_with_its_scene(bridge: Any) -> None:
    code = "s = bpy.data.scenes.new('Other')\ns.collection.objects.link(bpy.data.objects['Camera'])"

    async def script(client: SdkClient) -> Any:
        return await client.call_tool("execute_blender_code", {"code": code})

    assert _calls(bridge, "2026-07-28", script).structured["changes"]["collections_changed"] == [
        "Scene Collection (Other)"
    ]


def test_undo_and_redo_tell_the_selection_each_left_and_its_whole_count(bridge: Any) -> None:
    select = "for o in bpy.data.objects:\n    o.select_set(o.name == 'Camera')"
    none = "for o in bpy.data.objects:\n    o.select_set(False)"
    many = (
        "for i in range(4000):\n    o = bpy.data.objects.new(f'E{i}', None)\n"
        "    bpy.context.scene.collection.objects.link(o)\n    o.select_set(True)"
    )
    move = "bpy.data.objects['Cube'].location.x += 1"

    async def script(client: SdkClient) -> list[Any]:
        def code(text: str) -> Any:
            return client.call_tool("execute_blender_code", {"code": text})

        await code(none)
        answers = [await code(select), await code(move)]
        answers += [await client.call_tool("undo_agent_steps", {"steps": 1})]
        answers += [await client.call_tool("undo_agent_steps", {"steps": 1})]
        answers += [await client.call_tool("redo_agent_steps", {"steps": 2})]
        answers += [await code(many), await client.call_tool("undo_agent_steps", {"steps": 1})]
        return answers

    selected, moved, undone_move, undone, redone, made, undone_many = (
        a.structured["changes"] for a in _calls(bridge, "2026-07-28", script)
    )
    assert selected["selection"] == ["Camera"] and "selection" not in moved
    assert "selection" not in undone_move  # its step moved no selection
    assert undone["selection"] == [] and "selection now empty" in undone["said"]
    assert redone["selection"] == ["Camera"]
    assert made["counts"]["selection"] == 4001
    # 4,000 names removed fill the answer's budget: the selection's one name is cut, its count is what it is now
    counts = undone_many["counts"]
    assert undone_many["cut_at_budget"] and (counts["removed"], counts["selection"]) == (4000, 1), undone_many


def test_scene_settings_are_told_by_what_moved_not_by_a_rename_a_driver_or_a_round_trip(
    bridge: Any, tmp_path: Path
) -> None:
    driven = (
        "s = bpy.context.scene\nd = s.driver_add('render.film_transparent').driver\nd.expression = 'frame > 5'\n"
        "s.frame_set(1)"
    )

    async def script(client: SdkClient) -> dict[str, Any]:
        def code(text: str) -> Any:
            return client.call_tool("execute_blender_code", {"code": text})

        answers = {"renamed": await code("bpy.data.objects['Camera'].name = 'Cam'")}
        answers["selected"] = await code("o = bpy.data.objects['Cube']\no.select_set(not o.select_get())")
        await code(driven)
        answers["frame"] = await code("bpy.context.scene.frame_set(10)")
        since = answers["frame"].structured["changes"]["revision"]["after"]
        await code("bpy.context.scene.frame_end = 99")
        await code("bpy.context.scene.frame_end = 250")
        answers["there and back"] = await client.call_tool("get_scene_changes", {"since_revision": since})
        await client.call_tool("save_checkpoint", {"name": "eevee"})
        await code("bpy.context.scene.render.engine = 'CYCLES'")
        answers["restored"] = await client.call_tool("restore_checkpoint", {"name": "eevee"})
        return answers

    told = {key: answer.structured["changes"] for key, answer in _calls(bridge, "2026-07-28", script).items()}
    assert told["renamed"]["renamed"] == [{"from": "Camera", "to": "Cam"}] and "scene_changed" not in told["renamed"]
    assert "scene_changed" not in told["selected"], told["selected"]
    assert told["frame"]["scene_changed"] == {"render.film_transparent": {"from": False, "to": True}}
    assert "scene_changed" not in told["there and back"], told["there and back"]
    engine = told["restored"]["scene_changed"]["render.engine"]
    assert engine["from"] == "CYCLES" and engine["to"].startswith("BLENDER_EEVEE")  # its name moved in Blender 5


def test_every_objects_look_changed_at_once_is_told_and_is_its_own_step(bridge: Any) -> None:
    """Blender re-shades every object for that too: told as shading when nothing else moved, so no later undo takes
    it back unsaid."""

    async def script(client: SdkClient) -> tuple[Any, Any, Any]:
        await client.call_tool("execute_blender_code", {"code": "bpy.data.objects['Cube'].location.x = 2"})
        coloured = await client.call_tool(
            "execute_blender_code", {"code": "for o in bpy.data.objects:\n    o.color = (1, 0, 0, 1)"}
        )
        undone = await client.call_tool("undo_agent_steps", {"steps": 1})
        return (
            coloured,
            undone,
            _on_main(bridge, lambda: (bpy.data.objects["Cube"].location.x, bpy.data.objects["Cube"].color[1])),
        )

    coloured, undone, (x, green) = _calls(bridge, "2026-07-28", script)
    assert sorted(coloured.structured["changes"]["shading_changed"]) == ["Camera", "Cube", "Light"]
    assert "moved" not in undone.structured["changes"]["said"] and (x, green) == (2.0, 1.0)


def test_a_frame_the_agent_moves_to_with_nothing_animated_is_told(bridge: Any) -> None:
    """`frame_set` in a scene with nothing animated updates nothing Blender tells of: the frame itself is the change."""

    async def script(client: SdkClient) -> Any:
        return await client.call_tool("execute_blender_code", {"code": "bpy.context.scene.frame_set(9)"})

    assert _calls(bridge, "2026-07-28", script).structured["changes"]["frame_changed"] == {"from": 1, "to": 9}


FOLLOWED_BY_A_FRAME_CHANGE = {
    "moving the Cube": ("bpy.data.objects['Cube'].location.x = 3", "transformed", ["Cube"]),
    "removing the Light": ("bpy.data.objects.remove(bpy.data.objects['Light'])", "removed", ["Light"]),
    "setting the engine": ("bpy.context.scene.render.engine = 'CYCLES'", "scene_changed", None),
}
"""Edits an agent's code makes and then evaluates through the frame change alone (`frame_set` of the frame it is
on), which clears Blender's tags without its update handler."""


@pytest.mark.parametrize("edit", FOLLOWED_BY_A_FRAME_CHANGE.values(), ids=FOLLOWED_BY_A_FRAME_CHANGE.keys())
def test_code_ending_with_frame_set_is_told_in_its_own_call_and_undone_in_one_step(
    bridge: Any, edit: tuple[str, str, Any]
) -> None:
    code, key, names = edit
    before = _scene()

    async def script(client: SdkClient) -> tuple[Any, ...]:
        edited = await client.call_tool("execute_blender_code", {"code": f"{code}\nbpy.context.scene.frame_set(1)"})
        history = await client.call_tool("get_agent_history", {})
        renamed = await client.call_tool("execute_blender_code", {"code": "bpy.data.objects['Camera'].name = 'Cam'"})
        undone = await client.call_tool("undo_agent_steps", {"steps": 2})
        return edited, history, renamed, undone, _on_main(bridge, _scene)

    edited, history, renamed, undone, after_undo = _calls(bridge, "2026-07-28", script)
    told = edited.structured["changes"]
    assert told[key] == names if names is not None else "render.engine" in told[key], told
    assert len(history.structured["steps"]) == 1, history.structured
    assert set(renamed.structured["changes"]) == {"renamed", *BOOKKEEPING}, renamed.structured["changes"]
    assert not undone.is_error, undone.text
    assert after_undo == before
    assert bpy.context.scene.render.engine != "CYCLES"


LEFT_OUT = {
    "hidden in the viewport": "bpy.data.objects['Cube'].hide_viewport = True",
    "in a hidden collection": COLLECTION_SETTINGS["hidden in the viewport"],
    "in an excluded collection": COLLECTION_SETTINGS["excluded from the view layer"],
    "in no scene": "bpy.data.collections['Collection'].objects.unlink(bpy.data.objects['Cube'])",
}
"""Ways of putting the Cube where the depsgraph does not evaluate it."""


@pytest.mark.parametrize("hide", LEFT_OUT.values(), ids=LEFT_OUT.keys())
def test_an_object_blender_does_not_evaluate_is_told_moved_renamed_and_given_new_data_and_undone(
    bridge: Any, hide: str
) -> None:
    """The depsgraph names no update of an object it leaves out: the summary compares their poses (modifiers and
    constraints included), so moving a hidden object or bevelling it is a step the agent can take back, not
    "nothing changed" (nor another object's shading)."""
    cube = "bpy.data.objects['Cube']"
    nodes = (
        "group = bpy.data.node_groups.new('G', 'GeometryNodeTree')\n"
        "group.interface.new_socket('Size', in_out='INPUT', socket_type='NodeSocketFloat')\n"
        f"{cube}.modifiers.new('Nodes', 'NODES').node_group = group"
    )
    size = (
        f"nodes = {cube}.modifiers['Nodes']\n"
        "socket = nodes.node_group.interface.items_tree['Size'].identifier\n"
        "if hasattr(nodes, 'properties'):  # from Blender 5.2.3, the inputs are settings too\n"
        "    getattr(nodes.properties.inputs, socket).value = 2.5\n"
        "else:\n"
        "    nodes[socket] = 2.5\n"
        f"{cube}.update_tag()  # Blender hears of an ID property (5.2.3: of a setting too) only so, as the viewport"
    )
    changes = [
        (f"{cube}.location.x = 7", "transformed"),
        (f"{cube}.rotation_mode = 'QUATERNION'", "transformed"),
        (f"import mathutils\n{cube}.matrix_parent_inverse = mathutils.Matrix.Translation((0, 0, 5))", "transformed"),
        (f"{cube}.data = bpy.data.meshes.new('Other')", "data_changed"),
        (f"{cube}.modifiers.new('Bevel', 'BEVEL')", "data_changed"),
        (f"{cube}.modifiers['Bevel'].width = 0.3", "data_changed"),
        (f"{cube}.modifiers['Bevel'].show_viewport = False", "data_changed"),
        (nodes, "data_changed"),
        (size, "data_changed"),
        (f"{cube}.constraints.new('LIMIT_LOCATION')", "transformed"),
        (f"{cube}.constraints[0].use_min_x = True", "transformed"),
        (f"{cube}.name = 'Box'", "renamed"),
    ]

    async def script(client: SdkClient) -> tuple[Any, list[Any], Any]:
        await client.call_tool("execute_blender_code", {"code": hide})
        told = [await client.call_tool("execute_blender_code", {"code": code}) for code, _ in changes]
        undone = await client.call_tool("undo_agent_steps", {"steps": len(changes)})
        cube = _on_main(bridge, lambda: bpy.data.objects["Cube"])
        pose = (cube.location.x, cube.rotation_mode, cube.matrix_parent_inverse.translation.z)
        return told, undone, (*pose, len(cube.modifiers), len(cube.constraints))

    told, undone, after_undo = _calls(bridge, "2026-07-28", script)
    summaries = [answer.structured.get("changes", {}) for answer in told]
    for summary, (_, key) in zip(summaries, changes, strict=True):
        assert summary.get(key) == ([{"from": "Cube", "to": "Box"}] if key == "renamed" else ["Cube"]), summaries
        assert "shading_changed" not in summary, summaries  # Blender re-shaded all it evaluates: no look changed
    assert not undone.is_error, undone.text
    assert after_undo == (0.0, "XYZ", 0.0, 0, 0)


def test_objects_hidden_and_shown_in_the_view_layer_are_told_and_undone(bridge: Any) -> None:
    """`hide_set` (H in the viewport) is a flag of the view layer, not of the object: Blender updates only the
    scene for it. One object shown and another hidden in the same call are both told (their count is unchanged)."""

    async def script(client: SdkClient) -> tuple[Any, Any, Any, Any]:
        hidden = await client.call_tool("execute_blender_code", {"code": "bpy.data.objects['Light'].hide_set(True)"})
        swapped = await client.call_tool(
            "execute_blender_code",
            {"code": "bpy.data.objects['Light'].hide_set(False)\nbpy.data.objects['Camera'].hide_set(True)"},
        )
        undone = await client.call_tool("undo_agent_steps", {"steps": 2})
        return hidden, swapped, undone, _on_main(bridge, lambda: [bpy.data.objects[n].hide_get() for n in NAMES])

    hidden, swapped, undone, after_undo = _calls(bridge, "2026-07-28", script)
    assert hidden.structured["changes"]["visibility_changed"] == ["Light"], hidden.structured
    assert swapped.structured["changes"]["visibility_changed"] == ["Camera", "Light"], swapped.structured
    assert not undone.is_error, undone.text
    assert after_undo == [False, False, False]


NAMES = ("Camera", "Cube", "Light")


def test_a_fault_reading_the_edits_made_between_calls_fails_no_call(
    bridge: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The span between the agent's calls (the person's edits) is closed when the next call begins: a fault in
    reading it is recorded as unreadable, and the call runs and is told as any other."""
    changes = importlib.import_module(f"{ADDON_MODULE}.changes")
    summary = changes.Scene._summary
    failed: list[bool] = []

    def failing_once(scene: Any, *args: Any, **kwargs: Any) -> Any:
        if not kwargs.get("unnamed") and not failed:  # the span between calls
            failed.append(True)
            raise RuntimeError("a datablock that cannot be read")
        return summary(scene, *args, **kwargs)

    monkeypatch.setattr(changes.Scene, "_summary", failing_once)

    async def script(client: SdkClient) -> Any:
        _on_main(bridge, lambda: setattr(bpy.data.objects["Camera"].location, "x", 3.0))
        return await client.call_tool("execute_blender_code", {"code": "bpy.data.objects['Light'].location.x = 2"})

    moved = _calls(bridge, "2026-07-28", script)
    assert failed and not moved.is_error, moved.text
    assert moved.structured["changes"]["transformed"] == ["Light"], moved.structured


def test_a_summary_that_cannot_be_read_keeps_the_calls_answer_and_its_undo_step(
    bridge: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fault in reading what changed (this module's, or a datablock Blender will not let it read) never fails a
    call whose code ran: the answer says the change could not be read, the call is a step the agent's undo takes
    back, and the next call is told as before."""
    changes = importlib.import_module(f"{ADDON_MODULE}.changes")
    summary = changes.Scene._summary
    failed: list[bool] = []

    def failing_once(scene: Any, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("unnamed") and not failed:  # the agent's call's own summary, once
            failed.append(True)
            raise RuntimeError("a datablock that cannot be read")
        return summary(scene, *args, **kwargs)

    monkeypatch.setattr(changes.Scene, "_summary", failing_once)

    async def script(client: SdkClient) -> tuple[Any, Any, float, Any]:
        code = (
            "bpy.data.objects['Cube'].location.x = 5\n"
            "bpy.context.view_layer.objects.active = bpy.data.objects['Light']\nresult = {'moved': True}"
        )
        moved = await client.call_tool("execute_blender_code", {"code": code})
        again = await client.call_tool("execute_blender_code", {"code": "bpy.data.objects['Light'].location.x = 2"})
        undone = await client.call_tool("undo_agent_steps", {"steps": 2})
        return moved, again, undone, _on_main(bridge, lambda: bpy.data.objects["Cube"].location.x)

    moved, again, undone, after_undo = _calls(bridge, "2026-07-28", script)
    assert not moved.is_error and moved.structured["result"] == {"moved": True}, moved.text
    told = moved.structured["changes"]
    assert told["changed"] and "a datablock that cannot be read" in told["unreadable"], told
    assert "could not read" in told["said"]
    resources = importlib.import_module(f"{ADDON_MODULE}.resources")
    assert resources.touched(told, frozenset({"blender://objects/Cube"})) == {"blender://objects/Cube"}
    assert again.structured["changes"]["transformed"] == ["Light"], again.structured
    assert "active_object" not in again.structured["changes"], again.structured  # read afresh, not told twice
    assert not undone.is_error and after_undo == 0.0, undone.text


HIDDEN_STACK = (
    "cube = bpy.data.objects['Cube']\ncube.modifiers.new('Cloth', 'CLOTH')\ncube.modifiers.new('Bevel', 'BEVEL')\n"
    "nodes = cube.modifiers.new('Nodes', 'NODES')\n"
    "if not hasattr(nodes, 'properties'):  # up to 5.2, ID properties: a list of groups compares by identity\n"
    "    nodes['groups'] = [{'a': 1}, {'b': 2}]\n"
    "hooked = bpy.data.objects.new('Hooked', bpy.data.meshes.new('Hooked'))\n"
    "bpy.context.scene.collection.objects.link(hooked)\nhooked.hide_viewport = True\n"
    "hooked.modifiers.new('Hook', 'HOOK').subtarget = 'a' * 49 + '\u00e9' * 3 + '\u20ac' * 3  # cut in a character\n"
    "cube.constraints.new('COPY_LOCATION')\ncube.constraints.new('LIMIT_SCALE')\ncube.hide_viewport = True\n"
    "scene = bpy.context.scene\nscene.render.engine = 'BLENDER_WORKBENCH'\n"
    "scene.render.resolution_x = scene.render.resolution_y = 16\n"
    "layer = scene.view_layers.new('Other')\nbpy.data.objects['Light'].hide_set(True, view_layer=layer)\n"
    "layer.layer_collection.children['Collection'].hide_viewport = True"
)
NOT_A_CHANGE = {
    "a constraint made active": "bpy.data.objects['Cube'].constraints[0].active = True",  # the last made was
    "a modifier's panel folded": "bpy.data.objects['Cube'].modifiers['Bevel'].show_expanded = False",
    "a cloth's cache filled by a render": "bpy.context.scene.frame_set(2)\nbpy.ops.render.render()",
    "another view layer shown": "bpy.context.window.view_layer = bpy.context.scene.view_layers['Other']",
    "a setting made NaN, which equals nothing": "bpy.data.objects['Cube'].modifiers['Bevel'].width = float('nan')",
}
"""Beside a hidden object with a stack: what changes no setting of it (or changes one once), and no visibility in
the scene."""


@pytest.mark.parametrize("code", NOT_A_CHANGE.values(), ids=NOT_A_CHANGE.keys())
def test_what_changes_no_setting_of_a_hidden_stack_nor_of_the_scene_is_not_told_later(bridge: Any, code: str) -> None:
    """Compared by their settings, a hidden object's modifiers and constraints say nothing for the UI's state (the
    active item, a folded panel), for a status Blender writes (a cache's frames), nor does the window showing
    another view layer, with its own hidden objects and collection eyes: the selection after it is all that is
    told."""

    async def script(client: SdkClient) -> Any:
        await client.call_tool("execute_blender_code", {"code": HIDDEN_STACK})
        assert not (await client.call_tool("execute_blender_code", {"code": code})).is_error
        return await client.call_tool("execute_blender_code", {"code": "bpy.data.objects['Camera'].select_set(True)"})

    told = _calls(bridge, "2026-07-28", script).structured["changes"]
    assert set(told) - {"revision", "changed", "said"} == {"selection"}, told


def test_a_collections_eye_closed_after_the_view_layer_was_renamed_is_told(bridge: Any) -> None:
    """A renamed view layer is still the one shown: its eyes are compared from the rename on."""
    eye = "bpy.context.view_layer.layer_collection.children['Collection'].hide_viewport = True"

    async def script(client: SdkClient) -> Any:
        await client.call_tool("execute_blender_code", {"code": "bpy.context.view_layer.name = 'Renamed'"})
        return await client.call_tool("execute_blender_code", {"code": eye})

    told = _calls(bridge, "2026-07-28", script).structured["changes"]
    assert told["collections_changed"] == ["Collection"], told


def test_calls_in_the_view_layer_the_window_shows_tell_its_selection_not_the_switch(bridge: Any) -> None:
    """Selection and active object are the view layer's: the call that shows another one (and moves the camera)
    tells the move, and a call after it tells the selection made there against that layer's own."""
    show = "bpy.context.window.view_layer = bpy.context.scene.view_layers['{0}']"
    only_light = "bpy.data.objects['Cube'].select_set(False)\nbpy.data.objects['Light'].select_set(True)"

    async def script(client: SdkClient) -> list[Any]:
        codes = [
            "bpy.context.scene.view_layers.new('Other')",  # the Cube selected there too
            only_light,  # here only
            show.format("Other"),
            only_light,  # there: what is selected here already, a change there
            show.format("ViewLayer") + "\nbpy.data.objects['Camera'].location.x = 1",
        ]
        return [await client.call_tool("execute_blender_code", {"code": code}) for code in codes]

    answers = [answer.structured.get("changes", {}) for answer in _calls(bridge, "2026-07-28", script)]
    shown, selected, back = answers[2:]
    assert shown == {}, shown
    assert selected["selection"] == ["Light"] and "active_object" not in selected, selected
    assert set(back) - {"revision", "changed", "said"} == {"transformed"}, back


@pytest.mark.parametrize("by", ["agent", "person", "person, with a move"])
def test_a_collections_eye_closed_in_the_view_layer_shown_since_is_told(bridge: Any, by: str) -> None:
    """The window shown another view layer (by the agent's call, or by the person between calls) changes nothing
    Blender tells: the eyes are read there from then on, so one closed there next is told."""
    eye = "bpy.context.view_layer.layer_collection.children['Collection'].hide_viewport = True"

    def show_other() -> None:
        bpy.context.window.view_layer = bpy.context.scene.view_layers["Other"]
        if by.endswith("move"):  # the span between calls has a change of its own to tell
            bpy.data.objects["Camera"].location.x = 3

    async def script(client: SdkClient) -> Any:
        await client.call_tool("execute_blender_code", {"code": "bpy.context.scene.view_layers.new('Other')"})
        if by == "agent":
            code = "bpy.context.window.view_layer = bpy.context.scene.view_layers['Other']"
            await client.call_tool("execute_blender_code", {"code": code})
        else:
            _on_main(bridge, show_other)
        return await client.call_tool("execute_blender_code", {"code": eye})

    told = _calls(bridge, "2026-07-28", script).structured["changes"]
    assert told["collections_changed"] == ["Collection"], told


def test_collections_compared_after_another_view_layer_is_shown_differ_only_by_what_changed(bridge: Any) -> None:
    """The collections' eyes are the view layer's: after the window shows another one, a change that makes Blender
    compare the collections again tells the collection that changed, not every one whose eye differs there."""
    props = (
        "props = bpy.data.collections.new('Props')\nbpy.context.scene.collection.children.link(props)\n"
        "props.objects.link(bpy.data.objects.new('Crate', None))"
    )

    async def script(client: SdkClient) -> Any:
        for code in (HIDDEN_STACK, NOT_A_CHANGE["another view layer shown"]):
            await client.call_tool("execute_blender_code", {"code": code})
        return await client.call_tool("execute_blender_code", {"code": props})

    told = _calls(bridge, "2026-07-28", script).structured["changes"]
    assert told["collections_changed"] == ["Props", "Scene Collection"] and told["added"] == ["Crate"], told


def test_a_hidden_objects_node_group_given_inputs_one_by_one_keeps_every_call_answering_and_told(
    bridge: Any,
) -> None:
    """Blender 5.3 builds a geometry-nodes modifier's input settings again each time its group's inputs change, at
    addresses it reuses: what is read of them follows, so no call fails for it and the last input set is told."""
    setup = (
        "group = bpy.data.node_groups.new('G', 'GeometryNodeTree')\n"
        "bpy.data.objects['Cube'].modifiers.new('Nodes', 'NODES').node_group = group\n"
        "bpy.data.objects['Cube'].hide_viewport = True"
    )
    inputs = [
        f"bpy.data.node_groups['G'].interface.new_socket('S{i}', in_out='INPUT', socket_type='NodeSocketFloat')"
        for i in range(6)
    ]
    last = (
        "nodes = bpy.data.objects['Cube'].modifiers['Nodes']\n"
        "socket = nodes.node_group.interface.items_tree['S5'].identifier\n"
        "if hasattr(nodes, 'properties'):\n    getattr(nodes.properties.inputs, socket).value = 2.5\n"
        "else:\n    nodes[socket] = 2.5\nbpy.data.objects['Cube'].update_tag()"
    )

    async def script(client: SdkClient) -> list[Any]:
        codes = [setup, *inputs, last, "bpy.data.objects['Camera'].location.x = 3"]
        return [await client.call_tool("execute_blender_code", {"code": code}) for code in codes]

    answers = _calls(bridge, "2026-07-28", script)
    assert [answer.is_error for answer in answers] == [False] * len(answers), [a.text for a in answers]
    assert answers[-2].structured["changes"]["data_changed"] == ["Cube"], answers[-2].structured
    assert answers[-1].structured["changes"]["transformed"] == ["Camera"], answers[-1].structured


def test_a_node_group_made_changes_no_objects_look(bridge: Any) -> None:
    """Blender rebuilds its relations for a node group made, re-shades every object and tags every shading kind:
    no material, world or light was updated, so the call made a node group and changed no look."""

    async def script(client: SdkClient) -> Any:
        return await client.call_tool(
            "execute_blender_code", {"code": "bpy.data.node_groups.new('G', 'GeometryNodeTree')"}
        )

    if bpy.app.version < (5, 0):
        pytest.skip("Blender 4.5 updates every material for a node group made: a look may have changed")
    told = _calls(bridge, "2026-07-28", script).structured["changes"]
    assert told["datablocks"] == {"node_groups": 1} and "shading_changed" not in told, told


def test_a_hidden_object_blender_evaluates_for_another_does_not_hide_the_others_shading(bridge: Any) -> None:
    """A boolean's hidden cutter is evaluated (the cube needs it): it counts among the objects Blender re-shades,
    so every other object's colour changed is a look that changed, not a rebuild."""
    setup = (
        "cutter = bpy.data.objects.new('Cutter', bpy.data.meshes.new('CutterMesh'))\n"
        "bpy.context.scene.collection.objects.link(cutter)\n"
        "bpy.data.objects['Cube'].modifiers.new('Cut', 'BOOLEAN').object = cutter\n"
        "cutter.hide_viewport = True"
    )
    recolour = (
        "for name in ('Cube', 'Light', 'Camera'):\n    bpy.data.objects[name].color = (1, 0, 0, 1)\n"
        "bpy.data.objects['Cube'].location.x = 2"
    )

    async def script(client: SdkClient) -> Any:
        await client.call_tool("execute_blender_code", {"code": setup})
        return await client.call_tool("execute_blender_code", {"code": recolour})

    told = _calls(bridge, "2026-07-28", script).structured["changes"]
    assert sorted(told["shading_changed"]) == ["Camera", "Cube", "Light"], told


def test_a_collection_renamed_alone_is_told_by_its_new_name_and_undone(bridge: Any) -> None:
    """Another scene renamed renames nothing of its top collection ("Scene Collection (<scene>)"): a later call that
    re-reads the collections does not tell it."""
    other_scene = "bpy.data.scenes.new('Other').collection.objects.link(bpy.data.objects['Camera'])"
    rename_it = "bpy.data.scenes['Other'].name = 'Elsewhere'"

    async def script(client: SdkClient) -> tuple[Any, Any, Any]:
        for code in (other_scene, rename_it):
            await client.call_tool("execute_blender_code", {"code": code})
        changed = await client.call_tool(
            "execute_blender_code", {"code": "bpy.data.collections['Collection'].name = 'Props'"}
        )
        undone = await client.call_tool("undo_agent_steps", {"steps": 1})
        return changed, undone, _on_main(bridge, lambda: sorted(c.name for c in bpy.data.collections))

    changed, undone, names = _calls(bridge, "2026-07-28", script)
    assert changed.structured["changes"]["collections_changed"] == ["Props"], changed.structured
    assert not undone.is_error and "collections_changed" in undone.structured["changes"], undone.text
    assert names == ["Collection"]


HIDDEN_EDITS = {
    "a vertex of its mesh": ("Cube", "bpy.data.objects['Cube'].data.vertices[0].co.x = 9", "meshes"),
    "its material's roughness": ("Cube", "bpy.data.materials['Material'].roughness = 0.25", "shading"),
    "a hidden light's energy": ("Light", "bpy.data.lights['Light'].energy = 5", "shading"),
}


@pytest.mark.parametrize(("hidden", "code", "kind"), HIDDEN_EDITS.values(), ids=HIDDEN_EDITS.keys())
def test_an_edit_inside_a_hidden_object_is_a_step_of_its_own_so_the_next_undo_keeps_it(
    bridge: Any, hidden: str, code: str, kind: str
) -> None:
    """Blender names nothing of a hidden object's data (it does not evaluate it): the kind tagged is told, so the
    edit is a step, and undoing the agent's next call does not take it back unsaid."""
    setup = f"bpy.data.objects['{hidden}'].hide_viewport = True"
    read = "result = {'value': [" + code.split(" = ")[0] + "]}"

    async def script(client: SdkClient) -> tuple[Any, list[Any]]:
        await client.call_tool("execute_blender_code", {"code": setup})
        edited = await client.call_tool("execute_blender_code", {"code": code})
        await client.call_tool("execute_blender_code", {"code": "bpy.data.objects['Camera'].location.x = 4"})
        values = []
        for _ in range(2):
            assert not (await client.call_tool("undo_agent_steps", {"steps": 1})).is_error
            values.append((await client.call_tool("execute_blender_code", {"code": read})).structured["result"])
        return edited, values

    edited, (after_one_undo, after_two) = _calls(bridge, "2026-07-28", script)
    told = edited.structured["changes"]
    assert told["unnamed_changed"] == [kind] and f"changed hidden or unused {kind}" in told["said"], told
    assert after_one_undo != after_two, (after_one_undo, after_two)  # the first undo kept the edit, the second took it


def test_a_visible_material_edited_beside_a_hidden_object_is_named_and_nothing_more(bridge: Any) -> None:
    """Blender tags every shading kind for one material's edit: with the material named, the others' tags are its
    own, not a hidden object's edit."""

    async def script(client: SdkClient) -> Any:
        await client.call_tool("execute_blender_code", {"code": "bpy.data.objects['Light'].hide_viewport = True"})
        return await client.call_tool(
            "execute_blender_code", {"code": "bpy.data.materials['Material'].roughness = 0.25"}
        )

    told = _calls(bridge, "2026-07-28", script).structured["changes"]
    assert "materials/Material" in told["datablocks_changed"] and "unnamed_changed" not in told, told


NOTHING_DONE = {
    "the selected object selected again": "bpy.data.objects['Cube'].select_set(True)",
    "an object unlinked and linked again": (
        "cube = bpy.data.objects['Cube']\nbpy.data.collections['Collection'].objects.unlink(cube)\n"
        "bpy.data.collections['Collection'].objects.link(cube)"
    ),
    "a temporary object made and removed": "bpy.data.objects.remove(bpy.data.objects.new('Temporary', None))",
    "the active object made active again": "bpy.context.view_layer.objects.active = bpy.data.objects['Cube']",
}


@pytest.mark.parametrize("code", NOTHING_DONE.values(), ids=NOTHING_DONE.keys())
def test_a_call_that_changes_nothing_beside_a_hidden_object_tells_nothing_and_takes_no_step(
    bridge: Any, code: str
) -> None:
    """Blender tags objects for these with nothing changed: with a hidden object about, they are still no step (or
    the agent's next undo would take back nothing instead of its move)."""

    async def script(client: SdkClient) -> tuple[Any, Any]:
        await client.call_tool("execute_blender_code", {"code": "bpy.data.objects['Light'].hide_viewport = True"})
        await client.call_tool("execute_blender_code", {"code": "bpy.data.objects['Cube'].location.x = 2"})
        answer = await client.call_tool("execute_blender_code", {"code": code})
        undone = await client.call_tool("undo_agent_steps", {"steps": 1})
        return answer, undone

    answer, undone = _calls(bridge, "2026-07-28", script)
    assert "changes" not in answer.structured, answer.structured
    assert undone.structured["changes"]["transformed"] == ["Cube"], undone.text


def test_a_material_removed_beside_a_hidden_object_is_counted_not_told_as_a_hidden_edit(bridge: Any) -> None:
    async def script(client: SdkClient) -> Any:
        await client.call_tool("execute_blender_code", {"code": "bpy.data.materials.new('Spare')"})
        await client.call_tool("execute_blender_code", {"code": "bpy.data.objects['Cube'].hide_viewport = True"})
        return await client.call_tool(
            "execute_blender_code", {"code": "bpy.data.materials.remove(bpy.data.materials['Spare'])"}
        )

    told = _calls(bridge, "2026-07-28", script).structured["changes"]
    assert told["datablocks"] == {"materials": -1} and "unnamed_changed" not in told, told


@pytest.mark.parametrize(
    "code,ran",
    [
        ("bpy.data.objects['Cube'].location.x = 5\nresult = 'not a dict'", "The code ran"),
        ("bpy.data.objects['Cube'].location.x = 5\nx = 1\nraise ValueError('late')", "ran until line 3"),
    ],
    ids=["a result that is no dict", "an exception after the change"],
)
def test_code_that_changed_the_scene_and_then_failed_says_its_changes_stand(bridge: Any, code: str, ran: str) -> None:
    async def script(client: SdkClient) -> tuple[Any, Any]:
        failed = await client.call_tool("execute_blender_code", {"code": code})
        return failed, await client.call_tool("get_agent_history", {})

    failed, history = _calls(bridge, "2026-07-28", script)
    assert failed.is_error and ran in failed.text, failed.text
    assert "changes stand" in failed.text and "moved Cube" in failed.text and "undo_agent_steps" in failed.text
    assert len(history.structured["steps"]) == 1


def test_code_that_failed_before_changing_anything_says_nothing_of_changes(bridge: Any) -> None:
    async def script(client: SdkClient) -> Any:
        return await client.call_tool("execute_blender_code", {"code": "raise ValueError('early')"})

    failed = _calls(bridge, "2026-07-28", script)
    assert failed.is_error and "early" in failed.text and "changes stand" not in failed.text


def test_scene_changes_since_the_start_end_with_the_active_object_and_selection_blender_has(bridge: Any) -> None:
    legs = (
        "for i in range(4):\n"
        "    bpy.ops.mesh.primitive_cube_add(location=(i, 0, 0))\n"
        "    bpy.context.active_object.name = f'Leg{i + 1}'\n"
    )

    async def script(client: SdkClient) -> tuple[Any, Any, Any]:
        start = (await client.call_tool("get_agent_history", {})).structured["revision"]
        await client.call_tool("execute_blender_code", {"code": legs})
        await client.call_tool("execute_blender_code", {"code": "bpy.data.objects['Leg2'].location.z = 1"})
        await client.call_tool(
            "execute_blender_code", {"code": "bpy.context.view_layer.objects.active = bpy.data.objects['Leg1']"}
        )
        since = await client.call_tool("get_scene_changes", {"since_revision": start})
        now = _on_main(
            bridge, lambda: (bpy.context.view_layer.objects.active.name, [o.name for o in bpy.context.selected_objects])
        )
        return since, now, start

    since, (active, selected), _ = _calls(bridge, "2026-07-28", script)
    told = since.structured["changes"]
    assert told["active_object"]["to"] == active == "Leg1"
    assert told["selection"] == sorted(selected) == ["Leg4"]
    assert sorted(told["added"]) == ["Leg1", "Leg2", "Leg3", "Leg4"] and "removed" not in told


CHAIR = (
    "for i, name in enumerate(['Chair', 'Back', 'Leg1', 'Leg2', 'Leg3', 'Leg4']):\n"
    "    bpy.ops.mesh.primitive_cube_add(location=(3 * i, 0, 0))\n"
    "    bpy.context.active_object.name = name\n"
)
WOOD = (
    "wood = bpy.data.materials.new('Wood')\n"
    "for name in ['Chair', 'Back', 'Leg1', 'Leg2', 'Leg3', 'Leg4']:\n"
    "    bpy.data.objects[name].data.materials.append(wood)\n"
)


def test_a_material_given_to_six_objects_is_told_as_given_to_them_alone_and_undone(bridge: Any) -> None:
    async def script(client: SdkClient) -> tuple[Any, Any, Any]:
        await client.call_tool("execute_blender_code", {"code": CHAIR})
        given = await client.call_tool("execute_blender_code", {"code": WOOD})
        edited = await client.call_tool(
            "execute_blender_code", {"code": "bpy.data.materials['Wood'].diffuse_color = (0.4, 0.2, 0.1, 1)"}
        )
        undone = await client.call_tool("undo_agent_steps", {"steps": 2})
        return given, edited, undone

    given, edited, undone = _calls(bridge, "2026-07-28", script)
    told = given.structured["changes"]
    assert {entry["object"] for entry in told["materials_given"]} == {"Chair", "Back", "Leg1", "Leg2", "Leg3", "Leg4"}
    assert "gave Chair, Back, Leg1 and 3 more material Wood" in told["said"], told["said"]
    assert not {"Light", "Camera", "Cube"} & set(told.get("shading_changed", [])), told
    assert not any(name.startswith("node_groups/") for name in told.get("datablocks_changed", [])), told
    reshaded = edited.structured["changes"]
    assert set(reshaded["shading_changed"]) == {"Chair", "Back", "Leg1", "Leg2", "Leg3", "Leg4"}, reshaded
    assert reshaded["datablocks_changed"] == ["materials/Wood"], reshaded
    assert not undone.is_error and "took material Wood from" in undone.structured["changes"]["said"]
    assert "Wood" not in bpy.data.materials or bpy.data.materials["Wood"].users == 0


def test_a_restore_tells_unused_datablocks_the_file_left_out_as_such_not_as_losses(bridge: Any) -> None:
    async def script(client: SdkClient) -> Any:
        await client.call_tool("execute_blender_code", {"code": CHAIR + WOOD})
        await client.call_tool("save_checkpoint", {"name": "wooden"})
        await client.call_tool(
            "execute_blender_code", {"code": "bpy.data.materials.new('Spare')\nbpy.data.materials.new('Spare2')"}
        )
        unused = _on_main(bridge, lambda: sum(m.users == 0 for m in bpy.data.materials))
        return unused, await client.call_tool("restore_checkpoint", {"name": "wooden"})

    unused, restored = _calls(bridge, "2026-07-28", script)
    told = restored.structured["changes"]
    assert unused >= 2 and told["orphans_dropped"]["materials"] == unused, told  # 4.5 leaves out an image too
    assert "materials" not in told.get("datablocks", {}), told
    assert "left out unused datablocks (" in told["said"] and f"{unused} materials" in told["said"]


def test_a_failed_load_leaves_no_count_of_unused_datablocks_behind_for_the_persons_next_undo(
    bridge: Any, tmp_path: Path
) -> None:
    """A load counts the unused datablocks it will leave out (a .blend keeps none); one that fails loads nothing,
    so the person's undo after it, which takes two new materials away, tells them as removed, not as left out."""
    bad = tmp_path / "not-a-blend.blend"
    bad.write_bytes(b"hello")
    make = "for name in ('Spare', 'Spare2'):\n    bpy.data.materials.new(name)"
    fail = f"try:\n    bpy.ops.wm.open_mainfile(filepath={str(bad)!r})\nexcept RuntimeError:\n    pass\nresult = {{}}"

    async def script(client: SdkClient) -> Any:
        made = await client.call_tool("execute_blender_code", {"code": make})
        failed = await client.call_tool("execute_blender_code", {"code": fail})
        assert not failed.is_error and "changes" not in failed.structured, failed.structured  # it changed nothing
        _on_main(bridge, lambda: bpy.ops.ed.undo())
        since = made.structured["changes"]["revision"]["after"]
        return await client.call_tool("get_scene_changes", {"since_revision": since})

    told = _calls(bridge, "2026-07-28", script).structured["changes"]
    assert "orphans_dropped" not in told and told["datablocks"]["materials"] == -2, told


def test_collections_nested_deeper_than_python_recurses_are_summarised_and_their_changes_told(bridge: Any) -> None:
    nest = (
        "parent = bpy.context.scene.collection\n"
        "for i in range(1200):\n"
        "    child = bpy.data.collections.new(f'Level{i}')\n"
        "    parent.children.link(child)\n"
        "    parent = child\n"
        "parent.objects.link(bpy.data.objects.new('Deepest', None))\n"
    )

    async def script(client: SdkClient) -> tuple[Any, Any, Any]:
        nested = await client.call_tool("execute_blender_code", {"code": nest})
        summary = await client.call_tool("get_objects_summary", {})
        moved = await client.call_tool("execute_blender_code", {"code": "bpy.data.objects['Deepest'].location.x = 2"})
        return nested, summary, moved

    nested, summary, moved = _calls(bridge, "2026-07-28", script)
    assert "unreadable" not in nested.structured["changes"] and nested.structured["changes"]["added"] == ["Deepest"]
    assert not summary.is_error, summary.text[:500]
    assert "Deepest" in summary.text and '"inside":"Level1198"' in summary.text.replace(" ", "")
    assert moved.structured["changes"]["transformed"] == ["Deepest"]


def test_a_restore_of_another_files_checkpoint_leaves_the_users_next_save_where_it_was(
    bridge: Any, tmp_path: Path
) -> None:
    other, mine = tmp_path / "other.blend", tmp_path / "mine.blend"

    async def script(client: SdkClient) -> tuple[Any, Any, str]:
        def code(text: str) -> Any:
            return client.call_tool("execute_blender_code", {"code": text})

        await code(f"bpy.data.objects['Cube'].name = 'OtherCube'\nbpy.ops.wm.save_as_mainfile(filepath={str(other)!r})")
        await client.call_tool("save_checkpoint", {"name": "other-project"})
        other_before = hashlib.sha256(other.read_bytes()).hexdigest()
        await code(
            f"bpy.ops.wm.read_homefile(use_factory_startup=True)\nbpy.ops.wm.save_as_mainfile(filepath={str(mine)!r})"
        )
        restored = await client.call_tool("restore_checkpoint", {"name": "other-project"})
        saved = await code("bpy.ops.wm.save_mainfile()\nresult = {'file': bpy.data.filepath}")
        return restored, saved, other_before

    restored, saved, other_before = _calls(bridge, "2026-07-28", script)
    assert not restored.is_error, restored.text
    assert restored.structured["file"] == str(mine) and restored.structured["file_unchanged"] is True
    assert saved.structured["result"]["file"] == str(mine)
    assert hashlib.sha256(other.read_bytes()).hexdigest() == other_before  # the other project's file untouched
    assert "OtherCube" in bpy.data.objects


def test_a_restore_that_fails_keeps_no_rescue_and_a_save_may_not_take_a_rescues_name(bridge: Any) -> None:
    async def script(client: SdkClient) -> tuple[Any, ...]:
        saved = await client.call_tool("save_checkpoint", {"name": "broken"})
        Path(saved.structured["folder"], "broken.blend").write_bytes(b"BLENDER-v500" + bytes(64))
        failed = [await client.call_tool("restore_checkpoint", {"name": "broken"}) for _ in range(3)]
        listed = await client.call_tool("list_checkpoints", {})
        taken = await client.call_tool("save_checkpoint", {"name": "Rescue-20260101-000000-000"})
        return failed, listed, taken

    failed, listed, taken = _calls(bridge, "2026-07-28", script)
    assert all(answer.is_error and "checkpoint_not_loaded" in answer.text for answer in failed), failed[0].text
    assert [entry["name"] for entry in listed.structured["checkpoints"]] == ["broken"]
    assert taken.is_error and "invalid_checkpoint_name" in taken.text and "rescue" in taken.text


DEEP_CHAIN = """
parent = bpy.context.scene.collection
for i in range(1, 61):
    child = bpy.data.collections.new(f"C{i}")
    parent.children.link(child)
    if i in (38, 42, 45, 50, 60):
        child.objects.link(bpy.data.objects.new(f"O{i}", None))
    parent = child
"""


def _shown(node: dict[str, Any] | None, objects: list[str], insides: dict[str, str]) -> None:
    if node is None:
        return
    objects.extend(entry["name"] for entry in node["objects"])
    if "inside" in node:
        insides[node["name"]] = node["inside"]
    for child in node["children"]:
        _shown(child, objects, insides)


@pytest.mark.parametrize(
    "collection, expected",
    [(None, [38, 42, 45, 50, 60]), ("C30", [38, 42, 45, 50, 60]), ("C41", [42, 45, 50, 60]), ("C45", [45, 50, 60])],
)
def test_a_deep_tree_or_a_deep_collections_subtree_shows_each_object_once_and_each_flat_node_its_parent(
    bridge: Any, collection: str | None, expected: list[int]
) -> None:
    async def script(client: SdkClient) -> Any:
        await client.call_tool("execute_blender_code", {"code": DEEP_CHAIN})
        return await client.call_tool("get_objects_summary", {"collection": collection} if collection else {})

    answer = _calls(bridge, "2026-07-28", script)
    assert not answer.is_error, answer.text[:300]
    objects: list[str] = []
    insides: dict[str, str] = {}
    for tree in answer.structured["collections"]:
        _shown(tree, objects, insides)
    assert sorted(name for name in objects if name[0] == "O") == sorted(f"O{i}" for i in expected)
    assert len(objects) == len(set(objects))
    assert all(inside == f"C{int(name[1:]) - 1}" for name, inside in insides.items()), insides


def test_a_checkpoint_made_before_the_first_save_restores_into_the_file_saved_since(
    bridge: Any, tmp_path: Path
) -> None:
    mine = tmp_path / "mine.blend"

    async def script(client: SdkClient) -> Any:
        await client.call_tool("save_checkpoint", {"name": "unsaved-start"})
        await client.call_tool("execute_blender_code", {"code": f"bpy.ops.wm.save_as_mainfile(filepath={str(mine)!r})"})
        return await client.call_tool("restore_checkpoint", {"name": "unsaved-start"})

    restored = _calls(bridge, "2026-07-28", script)
    assert not restored.is_error, restored.text
    assert restored.structured["file"] == str(mine) and restored.structured["file_unchanged"] is True
    assert "note" not in restored.structured
