"""The MCP tasks extension (`io.modelcontextprotocol/tasks`): a frame range answers a task handle to a client that
declares the extension, and the same call stays synchronous for one that does not."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx2
import pytest

from hermes_blender.client import modern_request
from hermes_blender.contract.liveness import RuntimeFileSpec, read_live_endpoint
from hermes_blender.headless import HeadlessBlender

EXTENSION = "io.modelcontextprotocol/tasks"
WORKBENCH = "import bpy\nbpy.context.scene.render.engine = 'BLENDER_WORKBENCH'\nresult = {}"
LONG_RANGE = 250
"""Frames of the factory scene (full HD) that take minutes: a request sent just after the task starts comes while
it works, during its first frames (a frame at four times the size, as before, cost each test 30 s of waiting)."""


def _post(
    blender: HeadlessBlender, method: str, params: dict[str, Any], *, tasks: bool = True, name: str | None = None
) -> tuple[int, dict[str, Any]]:
    """One 2026-07-28 request; with `tasks`, its client declares the extension in its capabilities."""
    endpoint = read_live_endpoint(RuntimeFileSpec(path=str(blender.runtime_file)))
    body, headers = modern_request(method, params, 1)
    if tasks:
        message = json.loads(body)
        message["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"] = {"extensions": {EXTENSION: {}}}
        body = json.dumps(message).encode()
    if name is not None:
        headers["Mcp-Name"] = name
    answer = httpx2.post(endpoint.url, content=body, headers={**headers, **endpoint.headers()}, timeout=60)
    return answer.status_code, answer.json()


def _task(blender: HeadlessBlender, method: str, task_id: str, **extra: Any) -> tuple[int, dict[str, Any]]:
    return _post(blender, method, {"taskId": task_id}, name=extra.get("name", task_id))


def _frames(folder: Path, end: int) -> dict[str, Any]:
    return {"name": "render_frames_to_folder", "arguments": {"output_folder": str(folder), "frame_end": end}}


def test_discovery_declares_the_tasks_extension(blender: HeadlessBlender) -> None:
    _, answer = _post(blender, "server/discover", {})
    assert answer["result"]["capabilities"]["extensions"] == {EXTENSION: {}}


def test_a_frame_range_is_a_task_for_a_client_that_takes_tasks_and_completes_with_the_calls_own_result(
    blender: HeadlessBlender, tmp_path: Path
) -> None:
    _post(blender, "tools/call", {"name": "execute_blender_code", "arguments": {"code": WORKBENCH}})
    status, created = _post(blender, "tools/call", _frames(tmp_path, 3), name="render_frames_to_folder")
    task = created["result"]
    assert status == 200 and task["resultType"] == "task" and task["status"] == "working", task
    assert {"taskId", "createdAt", "lastUpdatedAt", "ttlMs", "pollIntervalMs"} <= task.keys() and "task" not in task
    deadline = time.monotonic() + 120
    while (got := _task(blender, "tasks/get", task["taskId"])[1]["result"])["status"] == "working":
        assert time.monotonic() < deadline, got
        time.sleep(0.2)
    assert got["status"] == "completed" and got["resultType"] == "complete", got
    result = got["result"]
    assert result["structuredContent"]["count"] == 3 and result["structuredContent"]["status"] == "ok", result
    assert json.loads(result["content"][0]["text"]) == result["structuredContent"]
    assert len(list(tmp_path.glob("frame_*.png"))) == 3
    _, legacy = _post(
        blender, "tools/call", {"name": "get_render_frames_task", "arguments": {"task_id": task["taskId"]}}
    )
    assert legacy["result"]["structuredContent"]["status"] == "completed"  # one task, two ways to read it
    assert _task(blender, "tasks/cancel", task["taskId"])[1]["result"] == {"resultType": "complete"}  # idempotent


def test_without_the_extension_the_same_call_answers_its_result(blender: HeadlessBlender, tmp_path: Path) -> None:
    _post(blender, "tools/call", {"name": "execute_blender_code", "arguments": {"code": WORKBENCH}})
    _, answer = _post(blender, "tools/call", _frames(tmp_path, 1), tasks=False, name="render_frames_to_folder")
    assert answer["result"]["resultType"] == "complete" and answer["result"]["structuredContent"]["count"] == 1


def test_a_working_task_is_cancelled_before_its_next_frame(blender: HeadlessBlender, tmp_path: Path) -> None:
    _post(blender, "tools/call", {"name": "execute_blender_code", "arguments": {"code": WORKBENCH}})
    _, created = _post(blender, "tools/call", _frames(tmp_path, LONG_RANGE), name="render_frames_to_folder")
    task_id = created["result"]["taskId"]
    assert _task(blender, "tasks/cancel", task_id)[1]["result"] == {"resultType": "complete"}
    got = _task(blender, "tasks/get", task_id)[1]["result"]
    assert got["status"] == "cancelled" and "result" not in got, got
    assert len(list(tmp_path.glob("frame_*.png"))) < LONG_RANGE
    _post(blender, "tools/call", {"name": "execute_blender_code", "arguments": {"code": WORKBENCH}})


@pytest.mark.parametrize("method", ["tasks/get", "tasks/cancel", "tasks/update"])
def test_an_unknown_task_is_32602_with_its_id(blender: HeadlessBlender, method: str) -> None:
    status, answer = _task(blender, method, "no-such-task")
    assert status == 400 and answer["error"]["code"] == -32602 and answer["error"]["data"] == {"taskId": "no-such-task"}


def test_a_tasks_request_must_name_its_task_in_the_mcp_name_header(blender: HeadlessBlender) -> None:
    status, answer = _task(blender, "tasks/get", "some-task", name="another-task")
    assert status == 400 and answer["error"]["code"] == -32020


def test_a_render_that_fails_is_a_completed_task_whose_result_is_the_tool_error(
    blender: HeadlessBlender, tmp_path: Path
) -> None:
    """The extension keeps `failed` for JSON-RPC errors: a render that failed is the tool's error, as a call's."""
    _post(blender, "tools/call", {"name": "execute_blender_code", "arguments": {"code": WORKBENCH}})
    _, created = _post(blender, "tools/call", _frames(tmp_path, LONG_RANGE), name="render_frames_to_folder")
    task_id = created["result"]["taskId"]
    factory = "import bpy\nbpy.ops.wm.read_homefile(use_factory_startup=True)\nresult = {}"
    _post(blender, "tools/call", {"name": "execute_blender_code", "arguments": {"code": factory}})  # its scene goes
    deadline = time.monotonic() + 60
    while (got := _task(blender, "tasks/get", task_id)[1]["result"])["status"] == "working":
        assert time.monotonic() < deadline, got
        time.sleep(0.2)
    assert got["status"] == "completed" and got["result"]["isError"] is True, got
    error = json.loads(got["result"]["content"][0]["text"])
    assert error["state"] == "render_failed" and "is gone" in error["error"] and "error" not in got


@pytest.mark.parametrize("method", ["tasks/get", "tasks/cancel", "tasks/update"])
def test_a_client_that_does_not_declare_the_extension_is_told_it_must(blender: HeadlessBlender, method: str) -> None:
    endpoint = read_live_endpoint(RuntimeFileSpec(path=str(blender.runtime_file)))
    body, headers = modern_request(method, {"taskId": "t"}, 1)
    answer = httpx2.post(endpoint.url, content=body, headers={**headers, "Mcp-Name": "t", **endpoint.headers()})
    error = answer.json()["error"]
    assert answer.status_code == 400 and error["code"] == -32021
    assert error["data"] == {"requiredCapabilities": {"extensions": {EXTENSION: {}}}}


def test_an_id_longer_than_any_task_id_is_refused_without_being_echoed(blender: HeadlessBlender) -> None:
    long_id = "x" * 5000
    status, answer = _task(blender, "tasks/get", long_id)
    assert status == 400 and answer["error"]["code"] == -32602 and "64" in answer["error"]["message"]
    assert long_id not in json.dumps(answer)
