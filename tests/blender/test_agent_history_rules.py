"""The agent's undo and redo never take back the person's work: a bridge in GUI mode in this Blender (its timer
pump played by the test), the person's edits made on the main thread between the agent's calls, each followed by
the undo step Blender's interface pushes for it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import bpy
import pytest

from hermes_blender.contract.liveness import RuntimeFileSpec
from tests.sdk_client import SdkClient

from .conftest import tick_while

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(autouse=True)
def _pytest_is_this_blender(monkeypatch: pytest.MonkeyPatch) -> None:
    """The bridge runs in this pytest process (bpy), which the client's pid check rightly says is no Blender."""
    monkeypatch.setattr("tests.sdk_client.require_own_blender", lambda endpoint: None)


@pytest.fixture
def bridge(service: ModuleType, factory_scene: None, tmp_path: Path, runtime: Any) -> Iterator[Any]:
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


def _calls(script: Callable[[SdkClient], Any], bridge: Any) -> Any:
    client = SdkClient(RuntimeFileSpec(path=str(bridge.runtime_file)), mode="2026-07-28")  # type: ignore[arg-type]
    return tick_while(lambda: asyncio.run(script(client)))


def _person(bridge: Any, edit: Callable[[], object], step: str | None = "Move") -> Any:
    """An edit by the person at Blender, on the main thread between the agent's calls, with its undo step."""

    def act() -> object:
        done = edit()
        if step is not None:
            bpy.ops.ed.undo_push(message=step)
        return done

    return bridge.dispatcher.call(act, 30.0)


def _code(client: SdkClient, code: str) -> Any:
    return client.call_tool("execute_blender_code", {"code": code})


def _x(bridge: Any) -> dict[str, float]:
    return bridge.dispatcher.call(lambda: {o.name: round(o.location.x, 3) for o in bpy.data.objects}, 30.0)


def _move_camera() -> None:
    bpy.data.objects["Camera"].location.x = 42.0


def test_undoing_two_steps_over_an_edit_between_them_is_refused_and_changes_nothing(bridge: Any) -> None:
    async def script(client: SdkClient) -> tuple[Any, ...]:
        await _code(client, "bpy.data.objects['Cube'].location.x = 3")
        _person(bridge, _move_camera)
        await _code(client, "bpy.data.objects['Light'].location.x = 9")
        both = await client.call_tool("undo_agent_steps", {"steps": 2})
        after_both = _x(bridge)
        last = await client.call_tool("undo_agent_steps", {"steps": 1})
        return both, after_both, last, _x(bridge)

    both, after_both, last, after_last = _calls(script, bridge)
    assert both.is_error and "user_edited_since" in both.text
    assert (after_both["Cube"], after_both["Camera"], after_both["Light"]) == (3.0, 42.0, 9.0)
    assert not last.is_error, last.text  # the step after the person's edit is still the agent's to take back
    assert after_last["Camera"] == 42.0 and after_last["Light"] != 9.0 and after_last["Cube"] == 3.0


def test_an_edit_the_record_no_longer_lists_still_refuses_the_undo(bridge: Any) -> None:
    bridge.execution.changes.journal_size = 3

    async def script(client: SdkClient) -> tuple[Any, ...]:
        await _code(client, "bpy.data.objects['Cube'].location.x = 3")
        _person(bridge, _move_camera)
        for x in (4, 5, 6):
            await _code(client, f"bpy.data.objects['Light'].location.x = {x}")
        return await client.call_tool("undo_agent_steps", {"steps": 4}), _x(bridge)

    undone, after = _calls(script, bridge)
    assert undone.is_error and "user_edited_since" in undone.text and "no longer lists" in undone.text
    assert (after["Camera"], after["Light"]) == (42.0, 6.0)


def test_playing_through_frames_is_one_change_and_keeps_the_persons_edit_in_view(bridge: Any) -> None:
    bridge.execution.changes.journal_size = 8
    changes = bridge.execution.changes

    def play() -> None:
        for frame in range(2, 300):
            bpy.context.scene.frame_set(frame)
            changes.settle()  # what the interface's timer does four times a second while someone listens

    async def script(client: SdkClient) -> tuple[Any, ...]:
        step = await _code(client, "bpy.data.objects['Cube'].location.x = 3")
        _person(bridge, _move_camera)
        kept = bridge.dispatcher.call(lambda: (changes.settle(), len(changes.journal))[1], 30.0)
        _person(bridge, play, step=None)  # changing frames pushes no undo step
        since = await client.call_tool(
            "get_scene_changes", {"since_revision": step.structured["changes"]["revision"]["after"]}
        )
        return kept, len(changes.journal), since, await client.call_tool("undo_agent_steps", {"steps": 1})

    kept, after_playing, since, undone = _calls(script, bridge)
    assert after_playing == kept + 1
    assert not since.is_error, since.text
    assert since.structured["changes"]["frame_changed"]["to"] == 299
    assert since.structured["changes"]["transformed"] == ["Camera"]
    assert undone.is_error and "user_edited_since" in undone.text


def test_a_save_by_the_person_does_not_stand_in_the_way_of_the_undo(bridge: Any, tmp_path: Path) -> None:
    path = str(tmp_path / "theirs.blend")

    async def script(client: SdkClient) -> tuple[Any, ...]:
        await _code(client, "bpy.data.objects['Cube'].location.x = 3")
        _person(bridge, lambda: bpy.ops.wm.save_mainfile(filepath=path), step=None)  # a save pushes no step
        return await client.call_tool("undo_agent_steps", {"steps": 1}), _x(bridge)

    undone, after = _calls(script, bridge)
    assert not undone.is_error, undone.text
    assert after["Cube"] != 3.0


def test_after_blenders_history_ran_out_a_redo_is_not_refused_for_an_older_edit(bridge: Any) -> None:
    preferences = bpy.context.preferences.edit
    kept_steps = preferences.undo_steps
    preferences.undo_steps = 4
    try:

        async def script(client: SdkClient) -> tuple[Any, ...]:
            _person(bridge, _move_camera)
            for x in range(1, 7):
                await _code(client, f"bpy.data.objects['Cube'].location.x = {x}")
            undone = await client.call_tool("undo_agent_steps", {"steps": 6})
            return undone, await client.call_tool("redo_agent_steps", {"steps": 1}), _x(bridge)

        undone, redone, after = _calls(script, bridge)
    finally:
        preferences.undo_steps = kept_steps
    assert undone.is_error and "history_exhausted" in undone.text
    assert not redone.is_error, redone.text
    assert after["Camera"] == 42.0


def _light_moved_while_the_person_is_in(bridge: Any, mode: str) -> tuple[Any, dict[str, float]]:
    """The person puts the Cube in `mode`, the agent moves the Light, then undoes that: the answer and the scene."""

    def enter() -> None:
        bpy.context.view_layer.objects.active = bpy.data.objects["Cube"]
        bpy.ops.object.mode_set(mode=mode)

    async def script(client: SdkClient) -> tuple[Any, ...]:
        _person(bridge, enter, step=f"{mode.title()} Mode")
        await client.call_tool("get_agent_history", {})  # the person's mode change is closed into the record
        await _code(client, "bpy.data.objects['Light'].location.x = 9")
        return await client.call_tool("undo_agent_steps", {"steps": 1}), _x(bridge)

    return _calls(script, bridge)


def test_a_step_made_in_edit_mode_is_refused_with_why_and_nothing_moves(bridge: Any) -> None:
    undone, after = _light_moved_while_the_person_is_in(bridge, "EDIT")
    assert undone.is_error and "step_not_undoable" in undone.text and "Edit Mesh mode" in undone.text
    assert after["Light"] == 9.0


def test_a_step_made_in_sculpt_mode_is_taken_back_as_any_other(bridge: Any) -> None:
    undone, after = _light_moved_while_the_person_is_in(bridge, "SCULPT")
    assert not undone.is_error, undone.text
    assert after["Light"] != 9.0


@pytest.mark.parametrize("mode", ["EDIT", "PARTICLE_EDIT"])
def test_a_step_whose_code_enters_an_edit_mode_is_refused_and_nothing_moves(bridge: Any, mode: str) -> None:
    async def script(client: SdkClient) -> tuple[Any, ...]:
        if mode == "PARTICLE_EDIT":
            await _code(client, "bpy.data.objects['Cube'].modifiers.new('hair', 'PARTICLE_SYSTEM')")
        await _code(
            client,
            "bpy.data.objects['Light'].location.x = 9\n"
            "bpy.context.view_layer.objects.active = bpy.data.objects['Cube']\n"
            f"bpy.ops.object.mode_set(mode={mode!r})",
        )
        return await client.call_tool("undo_agent_steps", {"steps": 1}), _x(bridge)

    undone, after = _calls(script, bridge)
    assert undone.is_error and "step_not_undoable" in undone.text
    assert after["Light"] == 9.0


def test_a_frame_the_person_moved_to_refuses_the_undo(bridge: Any) -> None:
    """Scrubbing, the arrow keys and jumping to a key push a "Frame Change" step: Blender would undo it first."""

    async def script(client: SdkClient) -> tuple[Any, ...]:
        await _code(client, "bpy.data.objects['Cube'].location.x = 3")
        _person(bridge, lambda: bpy.context.scene.frame_set(40), step="Frame Change")
        undone = await client.call_tool("undo_agent_steps", {"steps": 1})
        return undone, _x(bridge), bridge.dispatcher.call(lambda: bpy.context.scene.frame_current, 30.0)

    undone, after, frame = _calls(script, bridge)
    assert undone.is_error and "user_edited_since" in undone.text and "frame 1 -> 40" in undone.text
    assert (after["Cube"], frame) == (3.0, 40)


def test_frames_played_after_a_step_are_told_since_its_revision(bridge: Any) -> None:
    changes = bridge.execution.changes

    def play() -> None:
        for frame in range(2, 21):
            bpy.context.scene.frame_set(frame)
            changes.settle()

    async def script(client: SdkClient) -> Any:
        step = await _code(client, "bpy.data.objects['Cube'].location.x = 3")
        _person(bridge, play, step=None)
        return await client.call_tool(
            "get_scene_changes", {"since_revision": step.structured["changes"]["revision"]["after"]}
        )

    since = _calls(script, bridge)
    assert not since.is_error, since.text
    assert since.structured["changes"]["frame_changed"] == {"from": 1, "to": 20}


@pytest.mark.parametrize(
    "edit",
    [
        lambda: bpy.context.scene.timeline_markers.new("theirs", frame=10),
        lambda: setattr(bpy.context.scene, "frame_end", 77),
    ],
    ids=["a-timeline-marker", "the-frame-range"],
)
def test_an_edit_no_handler_reports_still_refuses_the_undo_and_both_stay(
    bridge: Any, edit: Callable[[], object]
) -> None:
    """Blender keeps a step of these edits but tells no handler: its undo shows, by the scene's mark, that it took
    back something other than the agent's step, which is then put back."""

    def theirs() -> tuple[int, int]:
        return len(bpy.context.scene.timeline_markers), bpy.context.scene.frame_end

    async def script(client: SdkClient) -> tuple[Any, ...]:
        await _code(client, "bpy.data.objects['Cube'].location.x = 3")
        before = bridge.dispatcher.call(theirs, 30.0)
        _person(bridge, edit, step="Their Edit")
        after_edit = bridge.dispatcher.call(theirs, 30.0)
        undone = await client.call_tool("undo_agent_steps", {"steps": 1})
        return before, after_edit, undone, _x(bridge), bridge.dispatcher.call(theirs, 30.0)

    before, after_edit, undone, after, kept = _calls(script, bridge)
    assert after_edit != before
    assert undone.is_error and "user_edited_since" in undone.text
    assert after["Cube"] == 3.0 and kept == after_edit


def test_undoing_over_an_unreported_edit_between_two_steps_puts_back_all_it_moved(bridge: Any) -> None:
    async def script(client: SdkClient) -> tuple[Any, ...]:
        await _code(client, "bpy.data.objects['Cube'].location.x = 3")
        _person(bridge, lambda: bpy.context.scene.timeline_markers.new("theirs", frame=10), step="Add Marker")
        await _code(client, "bpy.data.objects['Light'].location.x = 9")
        undone = await client.call_tool("undo_agent_steps", {"steps": 2})
        markers = bridge.dispatcher.call(lambda: len(bpy.context.scene.timeline_markers), 30.0)
        return undone, _x(bridge), markers, await client.call_tool("undo_agent_steps", {"steps": 1})

    undone, after, markers, last = _calls(script, bridge)
    assert undone.is_error and "user_edited_since" in undone.text and "Nothing was undone" in undone.text
    assert (after["Cube"], after["Light"], markers) == (3.0, 9.0, 1)
    assert not last.is_error, last.text  # the newest step is still the agent's to take back


def test_the_undo_mark_is_a_registered_hidden_scene_property(bridge: Any) -> None:
    """Blender's Custom Properties panel lists a registered property only with Developer Extras on."""
    prop = bpy.types.Scene.bl_rna.properties["hermes_bridge_step"]
    assert prop.is_runtime and prop.is_hidden


def test_a_scene_setting_the_person_changed_is_named_in_the_refusal_and_in_what_changed_since(bridge: Any) -> None:
    async def script(client: SdkClient) -> tuple[Any, ...]:
        moved = await _code(client, "bpy.data.objects['Cube'].location.x = 3")
        _person(bridge, lambda: setattr(bpy.context.scene.render, "engine", "CYCLES"), step="Render Engine")
        since = await client.call_tool(
            "get_scene_changes", {"since_revision": moved.structured["changes"]["revision"]["after"]}
        )
        return since, await client.call_tool("undo_agent_steps", {"steps": 1}), _x(bridge)

    since, undone, after = _calls(script, bridge)
    engine = since.structured["changes"]["scene_changed"]["render.engine"]
    assert engine["to"] == "CYCLES" and "scene render.engine " in since.structured["changes"]["said"]
    assert undone.is_error and "user_edited_since" in undone.text and "-> CYCLES" in undone.text
    assert after["Cube"] == 3.0


def test_a_collection_the_person_hid_refuses_the_undo_by_name(bridge: Any) -> None:
    async def script(client: SdkClient) -> tuple[Any, ...]:
        await _code(client, "bpy.data.objects['Cube'].location.x = 3")
        _person(bridge, lambda: setattr(bpy.data.collections["Collection"], "hide_render", True), step="Hide")
        return await client.call_tool("undo_agent_steps", {"steps": 1}), _x(bridge)

    undone, after = _calls(script, bridge)
    assert (
        undone.is_error and "user_edited_since" in undone.text and "changed the collections Collection" in undone.text
    )
    assert after["Cube"] == 3.0
