"""Promises of the agent's change history that a mutation review found no test holding, each held here: a redo is
refused after the person's edit, the scene's mark is checked before an undo, the kept steps are bounded, a new step
clears the redo list, handlers removed between calls are put back as a call begins, a checkpoint's files are never
made through a link or over a file, a path that would fill the .blend's path field is refused, and a montage leaves
no camera behind even when it fails midway. Each test was seen to fail with the production line that keeps its
promise broken by hand."""

from __future__ import annotations

import asyncio
import hashlib
import importlib
import json
import os
import time
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import bpy
import pytest

from hermes_blender.blender_host import ADDON_MODULE
from hermes_blender.contract.liveness import RuntimeFileSpec
from tests.sdk_client import SdkClient

from .conftest import serve_while, tick_while

pytestmark = pytest.mark.timeout(300)

MARK = "hermes_bridge_step"
"""The scene property the agent's history writes before each step it pushes (agent_history.MARK)."""


def _module(name: str) -> types.ModuleType:
    return importlib.import_module(f"{ADDON_MODULE}.{name}")


@pytest.fixture(autouse=True)
def _pytest_is_this_blender(monkeypatch: pytest.MonkeyPatch) -> None:
    """The bridge runs in this pytest process (bpy), which the client's pid check rightly says is no Blender."""
    monkeypatch.setattr("tests.sdk_client.require_own_blender", lambda endpoint: None)


@pytest.fixture
def bridge(service: types.ModuleType, factory_scene: None, tmp_path: Path, runtime: Any) -> Any:
    """A background bridge: what happens between its calls is no person's ("between jobs")."""
    return runtime.start(
        service.BridgeConfig(
            runtime_file=tmp_path / "server.json", lab_port=None, checkpoint_folder=tmp_path / "checkpoints"
        )
    )


@pytest.fixture
def gui_bridge(service: types.ModuleType, factory_scene: None, tmp_path: Path, runtime: Any) -> Iterator[Any]:
    """A bridge in GUI mode (its timer pump played by the test): what happens between its calls is the person's."""
    started = runtime.start(
        service.BridgeConfig(
            runtime_file=tmp_path / "server.json",
            lab_port=None,
            checkpoint_folder=tmp_path / "checkpoints",
            mode=service.Mode.GUI,
        )
    )
    bpy.ops.ed.undo_push(message="Original")  # what the interface's history starts with
    yield started


def _background_calls(bridge: Any, script: Callable[[SdkClient], Any]) -> Any:
    client = SdkClient(RuntimeFileSpec(path=str(bridge.runtime_file)), mode="2026-07-28")  # type: ignore[arg-type]
    return serve_while(bridge.dispatcher, lambda: asyncio.run(script(client)))


def _gui_calls(script: Callable[[SdkClient], Any], bridge: Any) -> Any:
    client = SdkClient(RuntimeFileSpec(path=str(bridge.runtime_file)), mode="2026-07-28")  # type: ignore[arg-type]
    return tick_while(lambda: asyncio.run(script(client)))


def _on_main(bridge: Any, fn: Callable[[], Any]) -> Any:
    """`fn` on Blender's main thread between the agent's calls, as the person at Blender acts (not an agent job)."""
    return bridge.dispatcher.call(fn, 30.0)


def _person(bridge: Any, edit: Callable[[], object], step: str | None) -> None:
    """An edit by the person at Blender between the agent's calls, with the undo step the interface pushes for it
    (`step`), or none (playback, a script's edit)."""

    def act() -> None:
        edit()
        if step is not None:
            bpy.ops.ed.undo_push(message=step)

    _on_main(bridge, act)


def _code(client: SdkClient, code: str) -> Any:
    return client.call_tool("execute_blender_code", {"code": code})


def _x(bridge: Any) -> dict[str, float]:
    return _on_main(bridge, lambda: {o.name: round(o.location.x, 3) for o in bpy.data.objects})


def _move_camera() -> None:
    bpy.data.objects["Camera"].location.x = 42.0


def _answer(outcome: Any) -> dict[str, Any]:
    """A `run_here` outcome's JSON text."""
    return json.loads(outcome.content[-1]["text"])


# 1. A redo is refused after the person edited the scene -------------------------------------------------------------


@pytest.mark.parametrize("step", ["Move", None], ids=["with-its-undo-step", "with-no-undo-step"])
def test_a_redo_after_the_person_edited_since_the_undo_is_refused_by_name_and_nothing_is_redone(
    gui_bridge: Any, step: str | None
) -> None:
    async def script(client: SdkClient) -> tuple[Any, ...]:
        await _code(client, "bpy.data.objects['Cube'].location.x = 3")
        undone = await client.call_tool("undo_agent_steps", {"steps": 1})
        _person(gui_bridge, _move_camera, step)
        redone = await client.call_tool("redo_agent_steps", {"steps": 1})
        return undone, redone, _x(gui_bridge), await client.call_tool("get_agent_history", {})

    undone, redone, after, history = _gui_calls(script, gui_bridge)
    assert not undone.is_error, undone.text
    assert redone.is_error and "user_edited_since" in redone.text and "Nothing was redone" in redone.text, redone.text
    assert "moved Camera" in redone.text  # the person's edit is named
    assert (after["Cube"], after["Camera"]) == (0.0, 42.0)  # the agent's step stays undone, the person's edit stays
    assert history.structured["steps"] == [] and len(history.structured["undone"]) == 1


# 2. The scene's mark is checked before an undo ----------------------------------------------------------------------


def test_an_undo_whose_scene_no_longer_holds_the_agents_mark_is_refused_and_nothing_moves(gui_bridge: Any) -> None:
    """The agent's history knows its last step by the mark it wrote into the scene just before pushing it. When the
    scene holds another mark now (written over between calls: no handler tells of it, Blender keeps no step of it),
    what Blender's undo would take back is not known to be the agent's step: the undo is refused, nothing moves."""

    def overwrite_mark() -> None:
        bpy.context.scene[MARK] = "another-session:1"

    async def script(client: SdkClient) -> tuple[Any, ...]:
        await _code(client, "bpy.data.objects['Cube'].location.x = 3")
        mark = _on_main(gui_bridge, lambda: bpy.context.scene.get(MARK))
        _person(gui_bridge, overwrite_mark, step=None)
        undone = await client.call_tool("undo_agent_steps", {"steps": 1})
        return mark, undone, _x(gui_bridge), await client.call_tool("get_agent_history", {})

    mark, undone, after, history = _gui_calls(script, gui_bridge)
    assert isinstance(mark, str) and mark.endswith(":1")  # the step wrote its mark: the case is the one meant
    assert undone.is_error and "user_edited_since" in undone.text and "Nothing was undone" in undone.text, undone.text
    assert after["Cube"] == 3.0
    assert [step["step"] for step in history.structured["steps"]] == [1]


# 3. The kept steps are bounded --------------------------------------------------------------------------------------


def test_more_calls_than_the_bound_keep_only_the_newest_steps_in_the_agents_history(bridge: Any) -> None:
    kept = _module("agent_history").KEPT_STEPS
    calls = kept + 2
    for x in range(1, calls + 1):
        outcome = bridge.tool_host.run_here(
            "execute_blender_code", {"code": f"bpy.data.objects['Cube'].location.x = {x}"}
        )
        assert not outcome.is_error, outcome.content
    history = _answer(bridge.tool_host.run_here("get_agent_history", {}))
    assert "cut_at_budget" not in history  # the list is whole: what it lacks was not kept
    assert [step["step"] for step in history["steps"]] == list(range(calls, calls - kept, -1))  # newest first
    assert len(bridge.execution.history.done) == kept


# 4. A new step clears the redo list ---------------------------------------------------------------------------------


def test_a_new_step_after_an_undo_leaves_nothing_to_redo(bridge: Any) -> None:
    async def script(client: SdkClient) -> tuple[Any, ...]:
        await _code(client, "bpy.data.objects['Cube'].location.x = 1")
        undone = await client.call_tool("undo_agent_steps", {"steps": 1})
        await _code(client, "bpy.data.objects['Light'].location.x = 2")
        history = await client.call_tool("get_agent_history", {})
        redone = await client.call_tool("redo_agent_steps", {"steps": 1})
        return undone, history, redone, _x(bridge)

    undone, history, redone, after = _background_calls(bridge, script)
    assert not undone.is_error, undone.text
    assert history.structured["undone"] == [] and [s["step"] for s in history.structured["steps"]] == [2]
    assert redone.is_error and "nothing_to_redo" in redone.text and "has 0 steps" in redone.text, redone.text
    assert (after["Cube"], after["Light"]) == (0.0, 2.0)


# 5. Handlers removed between calls are put back as the next call begins ---------------------------------------------


def test_handlers_removed_between_calls_are_put_back_as_the_next_call_begins_so_edits_before_and_in_it_are_told(
    gui_bridge: Any,
) -> None:
    """Something other than a call (a script the person ran, another add-on, a timer agent code left) removes the
    bridge's depsgraph handler between calls, and the person moves the Camera. The next call begins by putting the
    handler back, before it closes what happened since the last call: the Camera's move is told, as the person's,
    and so is what the call's own code changed and had Blender evaluate before the call ended."""
    changes = gui_bridge.execution.changes

    def remove_the_handlers_then_move_the_camera() -> None:
        bpy.app.handlers.depsgraph_update_post.clear()
        _move_camera()

    async def script(client: SdkClient) -> tuple[Any, ...]:
        start = (await client.call_tool("get_agent_history", {})).structured["revision"]
        _person(gui_bridge, remove_the_handlers_then_move_the_camera, step=None)
        call = await _code(client, "bpy.data.objects['Cube'].location.x = 3\nbpy.context.view_layer.update()")
        since = await client.call_tool("get_scene_changes", {"since_revision": start})
        return start, call, since

    start, call, since = _gui_calls(script, gui_bridge)
    assert not call.is_error, call.text
    assert call.structured.get("changes", {}).get("transformed") == ["Cube"], call.text  # evaluated inside it
    assert since.structured["changes"].get("transformed") == ["Camera", "Cube"], since.text
    persons = [
        entry.summary.get("transformed", [])
        for entry in changes.journal
        if entry.author == "user" and entry.summary["revision"]["after"] > start
    ]
    assert persons == [["Camera"]]


# 6. A checkpoint's files are never made through a link or over a file -----------------------------------------------

FIXED_NS = 1_234_567_890_123_456_789
FIXED_STAMP = "20000102-030405"


def _fixed_clock(monkeypatch: pytest.MonkeyPatch, checkpoints: types.ModuleType) -> None:
    """The checkpoints module's clock, fixed for the names it makes from it (its temporaries, its copies), so a test
    knows them before they are made; everything else reads the real clock."""

    def strftime(form: str, *when: Any) -> str:
        return time.strftime(form, *when) if when else FIXED_STAMP

    clock = types.SimpleNamespace(
        **{name: getattr(time, name) for name in dir(time) if not name.startswith("_")},
    )
    clock.time_ns = lambda: FIXED_NS
    clock.strftime = strftime
    monkeypatch.setattr(checkpoints, "time", clock)


def _planted(at: Path, kind: str, victim: Path) -> None:
    if kind == "a link to another file":
        at.symlink_to(victim)
    else:
        at.write_bytes(victim.read_bytes())


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("kind", ["a link to another file", "a file"])
def test_a_checkpoints_note_is_never_written_through_a_link_or_over_a_file_at_its_temporary_name(
    bridge: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, kind: str
) -> None:
    """What stands at the name of a note's temporary is neither followed nor written over: the save is refused by
    name and nothing else changes (O_EXCL with O_CREAT refuses a link too, dangling or not)."""
    checkpoints = _module("checkpoints")
    assert not bridge.tool_host.run_here("save_checkpoint", {"name": "first"}).is_error  # the folder is made
    folder = bridge.execution.checkpoints.folder
    victim = tmp_path / "elsewhere.txt"
    victim.write_text("someone else's file\n")
    _fixed_clock(monkeypatch, checkpoints)
    temporary = folder / f".planted.json.{os.getpid()}.{FIXED_NS}.tmp"
    _planted(temporary, kind, victim)
    before = _digest(victim)

    refused = bridge.tool_host.run_here("save_checkpoint", {"name": "planted"})

    assert refused.is_error and '"state":"checkpoint_not_written"' in refused.content[0]["text"], refused.content
    assert _digest(victim) == before
    assert temporary.is_symlink() if kind == "a link to another file" else _digest(temporary) == before
    listed = _answer(bridge.tool_host.run_here("list_checkpoints", {}))
    assert [entry["name"] for entry in listed["checkpoints"]] == ["first"]


@pytest.mark.parametrize("planted", ["a link", "a file"])
def test_a_restores_copy_of_an_unsaved_sessions_checkpoint_is_never_written_through_a_link_nor_over_a_file(
    bridge: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, planted: str
) -> None:
    checkpoints = _module("checkpoints")
    assert bpy.data.filepath == ""  # a never-saved session: a restore loads a copy made in `unsaved/`
    assert not bridge.tool_host.run_here("save_checkpoint", {"name": "draft"}).is_error
    folder = bridge.execution.checkpoints.folder
    _module("owner_files.folders").own_folder(folder / checkpoints.UNSAVED)
    victim = tmp_path / "elsewhere.blend"
    victim.write_text("someone else's file\n")
    _fixed_clock(monkeypatch, checkpoints)
    copy = folder / checkpoints.UNSAVED / f"draft-{FIXED_STAMP}-{FIXED_NS // 1000 % 10**6:06d}.blend"
    if planted == "a link":
        copy.symlink_to(victim)
    else:
        copy.write_text("a file someone put there\n")
    before = _digest(victim)
    bpy.data.objects.remove(bpy.data.objects["Cube"])
    scene = sorted(bpy.data.objects.keys())

    refused = bridge.tool_host.run_here("restore_checkpoint", {"name": "draft"})

    assert refused.is_error and '"state":"checkpoint_not_loaded"' in refused.content[0]["text"], refused.content
    assert _digest(victim) == before
    assert copy.is_symlink() if planted == "a link" else copy.read_text() == "a file someone put there\n"
    assert sorted(bpy.data.objects.keys()) == scene  # nothing was loaded


# 7. A path that would fill the .blend's path field with no NUL is refused -------------------------------------------

FILE_MAX = 1024
"""The size of FileGlobal.filename in Blender 5's files (FILE_MAX, its NUL included)."""


def _long_path(length: int) -> str:
    """An absolute path of `length` bytes, in names of at most 200 (a file system's names stop at 255)."""
    names = (length - 2) // 201
    path = "/" + "p" * 200 + ("/" + "p" * 200) * (names - 1) + "/" + "p" * (length - 1 - 201 * names)
    assert len(os.fsencode(path)) == length
    return path


@pytest.mark.parametrize("length", [FILE_MAX, FILE_MAX + 1], ids=["exactly-the-field", "longer"])
def test_a_path_that_fills_the_blends_path_field_is_refused_and_the_file_is_untouched(
    addon: types.ModuleType, factory_scene: None, tmp_path: Path, length: int
) -> None:
    blend_header = _module("blend_header")
    copy = tmp_path / "copy.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(copy), copy=True, compress=False, check_existing=False)
    fits = _long_path(FILE_MAX - 1)
    blend_header.set_original_path(copy, fits)  # the longest that fits: written, NUL-ended
    assert os.fsencode(fits) + b"\0" in copy.read_bytes()
    before = copy.read_bytes()

    with pytest.raises(blend_header.UnknownLayout, match="does not fit"):
        blend_header.set_original_path(copy, _long_path(length))

    assert copy.read_bytes() == before


# 8. A montage leaves no camera behind, also when it fails midway ----------------------------------------------------


def _traces() -> dict[str, Any]:
    return {
        "objects": sorted(bpy.data.objects.keys()),
        "cameras": sorted(bpy.data.cameras.keys()),
        "scene_camera": bpy.context.scene.camera.name if bpy.context.scene.camera else None,
    }


def _montage_failing_at_view(monkeypatch: pytest.MonkeyPatch, failing: int | None) -> None:
    """The montage's render step, failing at view `failing` (counted from 1) after the views before it rendered."""
    montage = _module("tools.montage")
    render_still = montage.render_still
    rendered = []

    def render(*args: Any, **kwargs: Any) -> Any:
        rendered.append(1)
        if len(rendered) == failing:
            raise RuntimeError("the render failed")
        return render_still(*args, **kwargs)

    monkeypatch.setattr(montage, "render_still", render)


@pytest.mark.parametrize("failing", [None, 1, 2], ids=["whole", "failing-at-the-first-view", "failing-midway"])
def test_a_view_montage_leaves_no_camera_behind_whole_or_failing(
    bridge: Any, monkeypatch: pytest.MonkeyPatch, failing: int | None
) -> None:
    """The montage's camera, object and data, is gone after it (Blender removes the object with its data)."""
    before = _traces()
    _montage_failing_at_view(monkeypatch, failing)
    outcome = bridge.tool_host.run_here("get_view_montage", {"views": ["front", "top", "right"], "tile_size": 64})
    assert outcome.is_error == (failing is not None), outcome.content
    if failing is not None:
        assert "the render failed" in outcome.content[0]["text"]
    assert _traces() == before


def test_inspect_whose_montage_fails_midway_leaves_no_camera_and_tells_only_the_codes_change(
    bridge: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = _traces()
    _montage_failing_at_view(monkeypatch, 2)  # the before picture's second view
    outcome = bridge.tool_host.run_here(
        "execute_blender_code", {"code": "bpy.data.objects['Cube'].location.x = 3", "inspect": True}
    )
    assert not outcome.is_error, outcome.content  # the code ran: a picture that failed never costs the answer
    answer = _answer(outcome)
    assert "the render failed" in json.dumps(answer)
    assert answer["changes"]["transformed"] == ["Cube"] and "added" not in answer["changes"]
    assert _traces() == before
