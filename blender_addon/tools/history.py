"""The agent's history and checkpoints as tools: take steps back or bring them back, read what changed since a
revision, save and restore copies of the whole file. The rules live in `agent_history` and `checkpoints`; the
panel's buttons call the same functions."""

from __future__ import annotations

from typing import Any

import bpy

from ..budget import budgeted
from ..errors import ToolError
from .base import ADDITIVE, READ_ONLY, Tool, arguments, shallow
from .context import JobContext

DESTRUCTIVE = {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": False, "openWorldHint": False}
STEPS = arguments(
    steps={
        "type": "integer",
        "minimum": 1,
        "maximum": 64,
        "default": 1,
        "description": "How many of the agent's own most recent steps.",
    }
)
NAME = {
    "type": "string",
    "minLength": 1,
    "maxLength": 64,
    "description": "1 to 64 letters, digits, spaces, '_', '.' or '-', starting with a letter or digit.",
}


def undo(arguments: dict[str, Any], job: JobContext) -> dict[str, Any]:
    return _told(job.history.undo(arguments.get("steps", 1)), job)


def redo(arguments: dict[str, Any], job: JobContext) -> dict[str, Any]:
    return _told(job.history.redo(arguments.get("steps", 1)), job)


def _told(summary: dict[str, Any], job: JobContext) -> dict[str, Any]:
    return {
        "status": "ok",
        "changes": summary,
        "steps_left": len(job.history.done),
        "steps_to_redo": len(job.history.undone),
    }


def history(arguments: dict[str, Any], job: JobContext) -> dict[str, Any]:
    job.history.follow_loads()
    steps = [step.brief() for step in reversed(job.history.done)]
    undone = [step.brief() for step in reversed(job.history.undone)]
    lists, cut = budgeted({"steps": steps, "undone": undone}, sized=False)
    mode = {"mode": job.agent_mode.value, "meaning": job.agent_mode.meaning}
    return {
        "status": "ok",
        "revision": job.changes.revision,
        **lists,
        "ended": job.history.ended,
        "agent_mode": mode,
        **cut,
    }


def scene_changes(arguments: dict[str, Any], job: JobContext) -> dict[str, Any]:
    since = arguments["since_revision"]
    job.changes.settle()
    if since > job.changes.revision:
        raise ToolError(
            f"revision {since} is not one this bridge gave: the scene is at revision {job.changes.revision} (a "
            "revision from before Blender or the bridge restarted means nothing now). Read the scene again",
            state="revision_unknown",
            revision=job.changes.revision,
        )
    summary = job.changes.since(since)
    if summary is None:
        raise ToolError(
            f"the bridge no longer knows what changed since revision {since}: it keeps the last "
            f"{job.changes.journal_size} changes, from revision {job.changes.known_from}. Read the scene again "
            "(get_objects_summary) and ask from the revision this answer gives",
            state="revision_too_old",
            revision=job.changes.revision,
            known_from=job.changes.known_from,
        )
    return {"status": "ok", "changes": summary, "revision": job.changes.revision}


def save_checkpoint(arguments: dict[str, Any], job: JobContext) -> dict[str, Any]:
    record = job.checkpoints.save(arguments["name"], job.changes.revision)
    return {"status": "ok", "checkpoint": record.listed(), "folder": str(job.checkpoints.folder)}


def list_checkpoints(arguments: dict[str, Any], job: JobContext) -> dict[str, Any]:
    listed = [record.listed() for record in job.checkpoints.list()]
    lists, cut = budgeted({"checkpoints": listed}, sized=False)
    return {"status": "ok", **lists, "count": len(listed), "folder": str(job.checkpoints.folder), **cut}


def restore_checkpoint(arguments: dict[str, Any], job: JobContext) -> dict[str, Any]:
    """Save the state it replaces as a rescue checkpoint, then load the checkpoint as the user's file."""
    record = job.checkpoints.find(arguments["name"])
    if job.tasks.working():
        raise ToolError(
            "a render task is working on this scene; restoring now would pull the scene from under it. Wait for "
            "it or cancel it (cancel_render_frames_task), then restore. Nothing was changed",
            state="render_task_running",
        )
    rescue = job.checkpoints.save_rescue(job.changes.revision, keep=record.name)
    user_file = bpy.data.filepath
    job.changes.expect_load(f"restored checkpoint {record.name}")
    try:
        loaded = job.checkpoints.load(record)
    except ToolError:
        job.checkpoints.drop(rescue.name)  # nothing was replaced: a retry must not push real checkpoints out
        raise
    job.history.restored(f"restored checkpoint {record.name}")
    answer = {
        "status": "ok",
        "restored": record.listed(),
        "rescue": rescue.listed(),
        "file": bpy.data.filepath,
        "file_unchanged": bpy.data.filepath == user_file,
    }
    if not loaded:
        answer["note"] = (
            "this session was never saved, so the restored scene is a copy in the bridge's folder: use File > "
            "Save As to keep it where you want"
        )
    return answer


UNDO_TOOLS = (
    Tool(
        name="undo_agent_steps",
        title="Undo the agent's steps",
        description=(
            "Take back the agent's own last steps (each call that changed the scene is one step) and answer what "
            "that changed. Refused with user_edited_since when the person at Blender edited the scene after the "
            "agent's step (undoing would undo their work first): offer a checkpoint instead. A file opened or "
            "restored ends the history."
        ),
        run=undo,
        input_schema=STEPS,
        output_schema=shallow(status="string", changes="object", steps_left="integer", steps_to_redo="integer"),
        annotations=dict(DESTRUCTIVE),
        records_step=False,
    ),
    Tool(
        name="redo_agent_steps",
        title="Redo the agent's steps",
        description="Bring back the agent's steps that undo_agent_steps took back, and answer what that changed.",
        run=redo,
        input_schema=STEPS,
        output_schema=shallow(status="string", changes="object", steps_left="integer", steps_to_redo="integer"),
        annotations=dict(DESTRUCTIVE),
        records_step=False,
    ),
    Tool(
        name="get_agent_history",
        title="The agent's steps",
        description="The agent's own steps newest first (tool, time, what it changed in one line), those taken "
        "back (redo brings them back), the scene's revision, and the agent's mode the person at Blender chose "
        "(read-only, ask or full) with what it lets you do.",
        run=history,
        output_schema=shallow(
            status="string",
            revision="integer",
            steps="array",
            undone="array",
            agent_mode="object",
            required=("status", "revision", "steps", "undone", "agent_mode"),
        ),
    ),
    Tool(
        name="get_scene_changes",
        title="What changed since",
        description=(
            "Everything that changed in the scene since a revision (every change summary and answer gives one), "
            "the user's own edits in Blender included, in the shape of the change summaries; revision_too_old "
            "when the bridge no longer knows."
        ),
        run=scene_changes,
        input_schema=arguments(
            since_revision={"type": "integer", "minimum": 0, "description": "A revision an earlier answer gave."}
        ),
        output_schema=shallow(status="string", changes="object", revision="integer"),
        annotations=dict(READ_ONLY),
    ),
)

CHECKPOINT_TOOLS = (
    Tool(
        name="save_checkpoint",
        title="Save a checkpoint",
        description=(
            "Save a copy of the whole open file as a named checkpoint in the bridge's own folder (never beside or "
            "over the user's .blend). Do it before risky code or a long series of edits. The oldest are dropped "
            "beyond 20 checkpoints or 4 GiB; the same name replaces the older one."
        ),
        run=save_checkpoint,
        input_schema=arguments(name=NAME),
        output_schema=shallow(status="string", checkpoint="object", folder="string"),
        annotations=dict(ADDITIVE),
    ),
    Tool(
        name="list_checkpoints",
        title="The checkpoints",
        description="Checkpoints newest first: name, time, size in bytes, the revision it holds, the user's file "
        "it was saved from, and whether it is a rescue checkpoint (saved by a restore, of the state it replaced).",
        run=list_checkpoints,
        output_schema=shallow(
            status="string",
            checkpoints="array",
            count="integer",
            folder="string",
            required=("status", "checkpoints", "count", "folder"),
        ),
    ),
    Tool(
        name="restore_checkpoint",
        title="Restore a checkpoint",
        description=(
            "Replace the scene with a checkpoint. First saves the current state as a rescue checkpoint (named in "
            "the answer); the open file stays the user's (a save goes where theirs went; their file on disk is "
            "not touched) and the agent's undo history ends. Refused while a render task works."
        ),
        run=restore_checkpoint,
        input_schema=arguments(name=NAME),
        output_schema=shallow(
            status="string",
            restored="object",
            rescue="object",
            file="string",
            file_unchanged="boolean",
            required=("status", "restored", "rescue", "file"),
        ),
        annotations=dict(DESTRUCTIVE),
        records_step=False,
    ),
)
