"""A frame-range render as a task of the MCP tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663).

A client that declares the extension in a 2026-07-28 request's capabilities and calls `render_frames_to_folder`
gets a task handle at once (`resultType: "task"`) instead of waiting up to an hour; the task is the same
frame-range task `start_render_frames_task` starts (one id, one record: `get_render_frames_task` reads it too).
`tasks/get` answers its state; once done, `result` is exactly what `render_frames_to_folder` would have answered:
its JSON, or its tool error (a render that failed is a tool error, so the task is `completed` with `isError`:
the extension keeps `failed` for JSON-RPC errors). `tasks/cancel` stops it before its next frame.
"""

from __future__ import annotations

from typing import Any

from .frame_tasks import CANCELLED, COMPLETED, FAILED, WORKING, FramesTask
from .jsontext import dumps
from .net.mcp import ToolOutcome
from .net.versions import TASKS_EXTENSION

__all__ = ["EXTENSION", "TASKED", "WORKING", "detailed", "task_fields"]

EXTENSION = TASKS_EXTENSION
TASKED = {"render_frames_to_folder": "start_render_frames_task"}
"""The tools a client that takes tasks gets as a task, and the tool that starts one with the same arguments."""


def task_fields(snapshot: dict[str, Any]) -> dict[str, Any]:
    """The extension's `Task` from a frame-range task's snapshot (as `get_render_frames_task` answers it)."""
    status = snapshot["status"]
    return {
        "taskId": snapshot["task_id"],
        "status": COMPLETED if status == FAILED else status,
        "statusMessage": snapshot["status_message"],
        "createdAt": snapshot["created_at"],
        "lastUpdatedAt": snapshot["last_updated_at"],
        "ttlMs": snapshot["ttl_ms"],
        "pollIntervalMs": snapshot["poll_interval_ms"],
    }


def detailed(task: FramesTask) -> dict[str, Any]:
    """`tasks/get`'s answer: the task, and once completed the call's own result."""
    fields = task_fields(task.snapshot())
    if task.status == COMPLETED and task.answer is not None:
        answer = task.answer  # plain data here: a task's result sits deeper than a reply's spliced JSON
        fields["result"] = {"content": [{"type": "text", "text": dumps(answer)}], "structuredContent": answer}
    elif task.status == FAILED:
        fields["result"] = ToolOutcome.error(task.message, state="render_failed", task_id=task.task_id).as_result()
    elif task.status == CANCELLED:
        fields["statusMessage"] = task.message
    return fields
