"""The frame tasks as tools any client can call: start one, ask after it, cancel it (the domain's frame_tasks.py
holds them)."""

from __future__ import annotations

from functools import partial
from typing import Any

from ..frame_tasks import MAX_WORKING
from .base import MUTATING, READ_ONLY, Tool, arguments, shallow
from .context import JobContext
from .frames import FRAMES_SCHEMA, SKIPS_SHOWN, FrameRange


def start(arguments: dict[str, Any], job: JobContext) -> dict[str, Any]:
    return job.tasks.start(partial(FrameRange, arguments), job)


def get(arguments: dict[str, Any], job: JobContext) -> dict[str, Any]:
    job.tasks.forget_old()
    return job.tasks.task(arguments["task_id"]).snapshot()


def cancel(arguments: dict[str, Any], job: JobContext) -> dict[str, Any]:
    job.tasks.forget_old()
    task = job.tasks.task(arguments["task_id"])
    task.cancel()
    return task.snapshot()


TASK_ID = arguments(task_id={"type": "string", "minLength": 1, "maxLength": 64, "description": "From the start."})
TASK_RESULT = shallow(
    task_id="string",
    status="string",
    status_message="string",
    done="integer",
    count="integer",
    folder="string",
    last_written=["string", "null"],
    skipped="array",
    skipped_count="integer",
    created_at="string",
    last_updated_at="string",
    seconds="number",
    ttl_ms="integer",
    poll_interval_ms="integer",
)

FRAME_TASK_TOOLS = (
    Tool(
        "start_render_frames_task",
        "Start rendering a frame range",
        "Start rendering frames frame_start..frame_end (as render_frames_to_folder) and answer at once with a "
        "task_id. Blender renders one frame at a time between other requests, so nothing waits on the call: ask "
        "get_render_frames_task every poll_interval_ms, and cancel_render_frames_task to stop it. Every name is "
        "checked before the task starts, so a refusal writes nothing; a folder other users may write to (unless "
        f"it is sticky, like /tmp) is refused, and so is a start while {MAX_WORKING} tasks are working.",
        start,
        input_schema=FRAMES_SCHEMA,
        output_schema=TASK_RESULT,
        annotations=dict(MUTATING),
    ),
    Tool(
        "get_render_frames_task",
        "Ask after a frame-range task",
        "The task's status (working, completed, failed or cancelled), its message, how many frames are done "
        "and the last one written. A frame whose name someone else took in the folder is skipped, never written "
        f"through or replaced: `skipped` names them (the first {SKIPS_SHOWN}) and why. Finished tasks are kept for "
        "ttl_ms.",
        get,
        input_schema=TASK_ID,
        output_schema=TASK_RESULT,
        annotations=dict(READ_ONLY),
    ),
    Tool(
        "cancel_render_frames_task",
        "Cancel a frame-range task",
        "Stop a working task before its next frame (the frames written stay). A task already finished is an "
        "error naming its status.",
        cancel,
        input_schema=TASK_ID,
        output_schema=TASK_RESULT,
        annotations=dict(MUTATING),
    ),
)
