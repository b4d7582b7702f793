"""Long work in a real Blender, through the official client: progress while it runs, and a cancel that stops it."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from hermes_blender.client import modern_request
from hermes_blender.contract.liveness import RuntimeFileSpec
from hermes_blender.headless import HeadlessBlender
from tests.event_streams import close_mid_range
from tests.sdk_client import SdkClient

pytestmark = pytest.mark.timeout(240)
MODES = ["legacy", "2026-07-28"]
SMALL = (
    "import bpy\nscene = bpy.context.scene\nscene.render.resolution_x, scene.render.resolution_y = 64, 48\n"
    "scene.render.engine, scene.cycles.device, scene.cycles.samples = 'CYCLES', 'CPU', 1\n"
)
"""A frame in a fraction of a second, on the CPU (the frames are what is tested, not the picture)."""


def _client(blender: HeadlessBlender, mode: str) -> SdkClient:
    return SdkClient(RuntimeFileSpec(path=str(blender.runtime_file)), mode=mode)  # type: ignore[arg-type]


async def _call_hearing(
    blender: HeadlessBlender, mode: str, name: str, arguments: dict[str, Any]
) -> tuple[Any, list[tuple[float, float | None, str | None]]]:
    heard: list[tuple[float, float | None, str | None]] = []

    async def note(progress: float, total: float | None, message: str | None) -> None:
        heard.append((progress, total, message))

    async with _client(blender, mode).session() as client:
        result = await client.call_tool(name, arguments, progress_callback=note)
    return result, heard


@pytest.mark.parametrize("mode", MODES)
def test_the_official_client_hears_a_scripts_progress_before_its_result(blender: HeadlessBlender, mode: str) -> None:
    code = (
        "import time\nfor part in range(1, 4):\n    time.sleep(0.4)\n    progress(part / 3, f'part {part}')\n"
        "result = {'parts': 3}"
    )
    result, heard = asyncio.run(_call_hearing(blender, mode, "execute_blender_code", {"code": code}))
    assert not result.is_error and result.structured_content["result"] == {"parts": 3}
    assert heard, "no progress was heard while the script ran"
    progress = [p for p, _, _ in heard]
    assert progress == sorted(set(progress))
    words = [(p, total, message) for p, total, message in heard if not (message or "").startswith("running for")]
    assert words and {message for _, _, message in words} <= {"part 1", "part 2", "part 3"}
    assert all(total is not None and total >= p for p, total, _ in words)  # a script that says how far it is


def test_a_progress_beyond_one_is_a_clear_error_in_the_scripts_answer_and_the_bridge_serves_on(
    blender: HeadlessBlender,
) -> None:
    result, _ = asyncio.run(_call_hearing(blender, "2026-07-28", "execute_blender_code", {"code": "progress(2)"}))
    assert "progress takes a fraction from 0 to 1, not 2" in json.loads(result.content[0].text)["error"]
    result, _ = asyncio.run(_call_hearing(blender, "2026-07-28", "get_objects_summary", {}))
    assert not result.is_error


@pytest.mark.parametrize("mode", MODES)
def test_a_frame_range_renders_to_its_folder_with_progress_after_each_frame(
    blender: HeadlessBlender, mode: str, tmp_path: Path
) -> None:
    asyncio.run(_client(blender, mode).call_tool("execute_blender_code", {"code": SMALL}))
    arguments = {"output_folder": str(tmp_path), "frame_start": 3, "frame_end": 7, "frame_step": 2}
    result, heard = asyncio.run(_call_hearing(blender, mode, "render_frames_to_folder", arguments))
    assert not result.is_error, result.content
    assert result.structured_content["count"] == 3
    assert sorted(path.name for path in tmp_path.iterdir()) == ["frame_0003.png", "frame_0005.png", "frame_0007.png"]
    assert all(path.read_bytes().startswith(b"\x89PNG") for path in tmp_path.iterdir())
    frames = [message for _, _, message in heard if message and message.startswith("frame ")]
    assert frames and {m.split(": ")[0] for m in frames} <= {"frame 3 (1 of 3)", "frame 5 (2 of 3)", "frame 7 (3 of 3)"}
    again = asyncio.run(_client(blender, mode).call_tool("render_frames_to_folder", arguments))
    assert again.is_error and again.data()["state"] == "file_exists"  # checked before any frame: nothing replaced


def _frames_script(folder: Path, frames: int) -> str:
    return SMALL + f"scene.frame_start, scene.frame_end = 1, {frames}\nresult = {{'folder': {str(folder)!r}}}"


def test_a_cancel_from_the_official_client_stops_a_frame_range_between_frames(
    own_blender: HeadlessBlender, tmp_path: Path
) -> None:
    """2026-07-28: the SDK cancels by closing the request's stream; the range stops after the frame it is on."""
    folder = tmp_path / "frames"
    folder.mkdir()

    async def body() -> Any:
        async with _client(own_blender, "2026-07-28").session() as client:
            await client.call_tool("execute_blender_code", {"code": _frames_script(folder, 400)})
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(client.call_tool, "render_frames_to_folder", {"output_folder": str(folder)})
                while len(list(folder.iterdir())) < 2:
                    await anyio.sleep(0.01)
                tasks.cancel_scope.cancel()
            return await client.call_tool(
                "execute_blender_code", {"code": "import bpy\nresult = {'frame': bpy.context.scene.frame_current}"}
            )

    after = asyncio.run(body())
    written = len(list(folder.iterdir()))
    assert after.structured_content["result"] == {"frame": 1}  # the scene's frame is put back
    assert 2 <= written < 400
    time.sleep(1.0)
    assert len(list(folder.iterdir())) == written  # nothing renders on after the cancel


def test_a_stream_closed_mid_range_stops_blenders_render(own_blender: HeadlessBlender, tmp_path: Path) -> None:
    """Raw HTTP: the client reads the event stream's first progress, then closes it."""
    folder = tmp_path / "frames"
    folder.mkdir()
    asyncio.run(
        _client(own_blender, "2026-07-28").call_tool("execute_blender_code", {"code": _frames_script(folder, 400)})
    )
    closed = close_mid_range(own_blender.runtime_file, folder)
    after = asyncio.run(_client(own_blender, "2026-07-28").call_tool("get_objects_summary"))
    assert not after.is_error
    stopped = len(list(folder.iterdir()))
    assert closed <= stopped < 400  # stopped between frames; how soon is measured in scripts/bench.py (p50 128 ms)
    time.sleep(1.0)
    assert len(list(folder.iterdir())) == stopped
    # The stop waited for Blender's render to return: raised inside Cycles' own Python it broke Cycles.
    assert "JobInterrupted" not in own_blender.log_path.read_text(errors="replace")


def _empty(folder: Path) -> Path:
    folder.mkdir()
    return folder


def _ok(blender: HeadlessBlender, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = asyncio.run(_client(blender, "2026-07-28").call_tool(name, arguments))
    assert not result.is_error, result.text
    return result.structured


def _refused(blender: HeadlessBlender, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = asyncio.run(_client(blender, "2026-07-28").call_tool(name, arguments))
    assert result.is_error, result.text
    return json.loads(result.text)


def test_a_frame_task_answers_at_once_and_renders_a_frame_between_requests(
    own_blender: HeadlessBlender, tmp_path: Path
) -> None:
    tmp_path = _empty(tmp_path / "frames")  # the fixture's Blender keeps its runtime folder in tmp_path
    _ok(own_blender, "execute_blender_code", {"code": _frames_script(tmp_path, 6)})
    record = json.loads(own_blender.runtime_file.read_text())
    with httpx2.Client(base_url=record["http"], headers={"Authorization": f"Bearer {record['token']}"}) as http:

        def call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:  # one kept connection, nothing else sent
            body, headers = modern_request("tools/call", {"name": name, "arguments": arguments})
            return http.post("/mcp", content=body, headers=headers).json()["result"]["structuredContent"]

        started = call("start_render_frames_task", {"output_folder": str(tmp_path)})
        first = call("get_render_frames_task", {"task_id": started["task_id"]})
    assert (started["status"], started["done"], started["count"]) == ("working", 0, 6)
    assert first["status"] == "working" and first["done"] <= 1  # one frame per turn of the loop, requests between
    seen = [first]
    while seen[-1]["status"] == "working":
        assert not asyncio.run(_client(own_blender, "2026-07-28").call_tool("get_objects_summary")).is_error
        seen.append(_ok(own_blender, "get_render_frames_task", {"task_id": started["task_id"]}))
    last = seen[-1]
    assert (last["status"], last["done"], last["status_message"]) == ("completed", 6, "all 6 frames written")
    assert last["last_written"] == str(tmp_path / "frame_0006.png")
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"frame_000{n}.png" for n in range(1, 7)]
    assert [s["done"] for s in seen] == sorted(s["done"] for s in seen)
    frame = _ok(
        own_blender, "execute_blender_code", {"code": "import bpy\nresult = {'f': bpy.context.scene.frame_current}"}
    )
    assert frame["result"] == {"f": 1}  # put back after each frame


def test_a_cancelled_frame_task_stops_before_its_next_frame_and_cannot_be_cancelled_twice(
    own_blender: HeadlessBlender, tmp_path: Path
) -> None:
    tmp_path = _empty(tmp_path / "frames")  # the fixture's Blender keeps its runtime folder in tmp_path
    _ok(own_blender, "execute_blender_code", {"code": _frames_script(tmp_path, 400)})
    task_id = _ok(own_blender, "start_render_frames_task", {"output_folder": str(tmp_path)})["task_id"]
    while _ok(own_blender, "get_render_frames_task", {"task_id": task_id})["done"] < 2:
        pass
    cancelled = _ok(own_blender, "cancel_render_frames_task", {"task_id": task_id})
    assert cancelled["status"] == "cancelled" and 2 <= cancelled["done"] < 400
    assert len(list(tmp_path.iterdir())) == cancelled["done"]  # between two frames: none was being rendered
    again = _refused(own_blender, "cancel_render_frames_task", {"task_id": task_id})
    assert again["state"] == "task_finished" and "already cancelled" in again["error"]
    time.sleep(1.0)
    assert _ok(own_blender, "get_render_frames_task", {"task_id": task_id})["done"] == cancelled["done"]
    assert len(list(tmp_path.iterdir())) == cancelled["done"]


@pytest.mark.parametrize(
    ("arguments", "state"),
    [
        ({"frame_start": 5, "frame_end": 4}, "invalid_arguments"),
        ({"frame_start": 1, "frame_end": 20_000}, "invalid_arguments"),
        ({"output_folder": "/nowhere/at/all"}, "invalid_path"),
        ({"output_folder": "relative/folder"}, "invalid_path"),
    ],
)
def test_a_frame_task_that_cannot_run_is_refused_before_it_starts(
    blender: HeadlessBlender, tmp_path: Path, arguments: dict[str, Any], state: str
) -> None:
    refused = _refused(blender, "start_render_frames_task", {"output_folder": str(tmp_path), **arguments})
    assert refused["state"] == state
    assert list(tmp_path.iterdir()) == []
    assert _refused(blender, "get_render_frames_task", {"task_id": "no-such-task"})["state"] == "not_found"


def test_a_frame_task_whose_file_is_replaced_fails_saying_so_and_renders_nothing_more(
    own_blender: HeadlessBlender, tmp_path: Path
) -> None:
    tmp_path = _empty(tmp_path / "frames")
    _ok(own_blender, "execute_blender_code", {"code": _frames_script(tmp_path, 400)})
    task_id = _ok(own_blender, "start_render_frames_task", {"output_folder": str(tmp_path)})["task_id"]
    _ok(
        own_blender,
        "execute_blender_code",
        {"code": "import bpy\nbpy.ops.wm.read_homefile(use_empty=True)\nresult = {}"},
    )
    failed = _ok(own_blender, "get_render_frames_task", {"task_id": task_id})
    assert failed["status"] == "failed" and "is gone (another file was opened)" in failed["status_message"]
    assert len(list(tmp_path.iterdir())) == failed["done"] < 400


def test_blenders_own_render_stats_are_heard_while_a_frame_renders(blender: HeadlessBlender, tmp_path: Path) -> None:
    slow = SMALL + "scene.render.resolution_x, scene.render.resolution_y = 320, 240\nscene.cycles.samples = 256\n"
    asyncio.run(_client(blender, "2026-07-28").call_tool("execute_blender_code", {"code": slow}))
    arguments = {"output_folder": str(tmp_path), "frame_start": 1, "frame_end": 1}
    result, heard = asyncio.run(_call_hearing(blender, "2026-07-28", "render_frames_to_folder", arguments))
    assert not result.is_error, result.content
    during = [(total, message) for _, total, message in heard if (message or "").startswith("frame 1 (1 of 1): ")]
    assert any("Sample" in message for _, message in during), heard  # Cycles counts its samples in its stats
    asyncio.run(_client(blender, "2026-07-28").call_tool("execute_blender_code", {"code": SMALL}))


def test_a_cancelled_script_that_renders_stops_after_the_render_it_is_in(
    own_blender: HeadlessBlender, tmp_path: Path
) -> None:
    """Agent code calling bpy.ops.render.render: the stop waits for that render to return, then ends the script."""
    folder = _empty(tmp_path / "frames")
    code = SMALL + (
        f"for frame in range(1, 401):\n    scene.frame_set(frame)\n"
        f"    scene.render.filepath = {str(folder)!r} + f'/f{{frame:04d}}.png'\n"
        "    bpy.ops.render.render(write_still=True)\nresult = {}"
    )

    async def body() -> Any:
        async with _client(own_blender, "2026-07-28").session() as client:
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(client.call_tool, "execute_blender_code", {"code": code})
                while len(list(folder.iterdir())) < 2:
                    await anyio.sleep(0.01)
                tasks.cancel_scope.cancel()
            return await client.call_tool("get_objects_summary", {})

    assert not asyncio.run(body()).is_error
    written = len(list(folder.iterdir()))
    assert 2 <= written < 400
    time.sleep(1.0)
    assert len(list(folder.iterdir())) == written
    assert "JobInterrupted" not in own_blender.log_path.read_text(errors="replace")
