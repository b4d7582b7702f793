"""Farm runs as tasks the agent starts, asks after and cancels, offered by `hermes-blender mcp` beside Blender's
own tools: a bundle `export_render_job` wrote renders here as `hermes-blender farm run` renders it (farm.py), in
processes of the relay's, never in the user's Blender, so Blender answers every other call meanwhile.

The fields are the frame tasks' (`working`, `completed`, `failed`, `cancelled`; a status message; creation and
last-update times; a poll interval), so an agent that knows one knows the other. One run works at a time (it uses
the whole machine); the relay's end cancels it, so no run outlives the session that started it. A run renders to
files, so it starts only where the person at Blender lets the agent change things without asking (`full`).
"""

from __future__ import annotations

import secrets
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from mcp import types

from .errors import FarmRunError
from .farm import CANCEL_GRACE, FarmRun

WORKING = "working"
POLL_INTERVAL_MS = 2000
SHOWN = 50
"""Frames named in an answer (the latest ones); `frames_written_count` counts them all."""
START_RUN, GET_RUN, CANCEL_RUN = "start_farm_run_task", "get_farm_run_task", "cancel_farm_run_task"
_TASK_ID = {
    "type": "object",
    "properties": {"task_id": {"type": "string", "minLength": 1, "maxLength": 64, "description": "From the start."}},
    "required": ["task_id"],
    "additionalProperties": False,
}
FARM_TASK_TOOLS = [
    types.Tool(
        name=START_RUN,
        title="Render a job bundle here, off Blender",
        description=(
            "Render the job bundle export_render_job wrote, on this computer, in processes of its own (`openjd run` "
            "and the `blender` on this server's PATH; the user's Blender stays free), and answer at once with a "
            f"task_id. Ask {GET_RUN} every poll_interval_ms; {CANCEL_RUN} stops it (the frames written stay). "
            "Only where the person at Blender lets the agent change things without asking (full; else read_only or "
            "confirmation_unavailable). Checked first, each a named state: openjd_missing, blender_missing, "
            "adaptor_missing, not_a_bundle, unsafe_folder (a folder another user may change), invalid_template. One run "
            "works at a time."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "bundle_folder": {"type": "string", "minLength": 1, "description": "The bundle's folder."},
            },
            "required": ["bundle_folder"],
            "additionalProperties": False,
        },
        annotations=types.ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False),
    ),
    types.Tool(
        name=GET_RUN,
        title="Ask after a farm run",
        description=(
            "The run's status (working, completed, failed or cancelled), its latest word (the task started, a frame "
            "written), the frames written so far and its log. A failed run keeps the frames written before it."
        ),
        input_schema=_TASK_ID,
        annotations=types.ToolAnnotations(read_only_hint=True, open_world_hint=False),
    ),
    types.Tool(
        name=CANCEL_RUN,
        title="Cancel a farm run",
        description=(
            "Stop a working run as OpenJD cancels (its Blender ended), and every process it started; answers once "
            "they are gone. The frames written stay. A finished run is an error naming its status."
        ),
        input_schema=_TASK_ID,
        annotations=types.ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False),
    ),
]
FARM_TASK_NAMES = frozenset(tool.name for tool in FARM_TASK_TOOLS)


def mode_refusal(history: dict[str, Any]) -> dict[str, Any] | None:
    """Why a run may not start, from the agent's history the Blender answered (its `agent_mode`), or None: `full`,
    or an add-on from before the modes (which lets everything). `ask` is refused too: the relay has no way to put
    the question to the person at Blender."""
    from .protocol import agent_mode

    told = history.get("agent_mode")
    mode = told.get("mode") if isinstance(told, dict) else "full"
    if mode == "full":
        return None
    state = "read_only" if mode == "read-only" else "confirmation_unavailable"
    return {
        "state": state,
        "error": f"the person at Blender lets the agent {mode!r}, and a farm run writes frames to disk without "
        "asking, so nothing was started",
        "user_action": agent_mode.ACTIONS[state],
    }


class TaskError(Exception):
    def __init__(self, message: str, state: str) -> None:
        super().__init__(message)
        self.state = state


class FarmTask:
    """One farm run, in a thread of the relay's."""

    def __init__(self, run: FarmRun) -> None:
        self.task_id = secrets.token_urlsafe(12)
        self._run = run
        self.status = WORKING
        self.message = "starting `openjd run`"
        self.created = self.updated = time.time()
        self.outcome: dict[str, Any] | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._work, name=f"farm run {self.task_id}", daemon=True)
        self._thread.start()

    def _work(self) -> None:
        try:
            outcome = self._run.run(self._stop, self._heard)
        except Exception as exc:  # the run's own failures are its outcome; this is anything else
            self.status, self.message = "failed", f"{type(exc).__name__}: {exc}"
        else:
            self.outcome, self.status, self.message = outcome, outcome["status"], outcome["message"]
        self.updated = time.time()

    def _heard(self, line: str) -> None:
        self.message, self.updated = line, time.time()

    def cancel(self) -> None:
        if self.status != WORKING:
            raise TaskError(
                f"task {self.task_id} is already {self.status}; only a working run can be cancelled", "task_finished"
            )
        self._stop.set()
        self._thread.join(CANCEL_GRACE + 30)

    def snapshot(self) -> dict[str, Any]:
        progress = self._run.progress
        written = list(progress.written) if progress is not None else []
        return {
            "task_id": self.task_id,
            "status": self.status,
            "status_message": self.message,
            "bundle_folder": str(self._run.bundle.folder),
            "frames_written": written[-SHOWN:],
            "frames_written_count": len(written),
            "log": str(progress.log_path) if progress is not None else None,
            "created_at": _iso(self.created),
            "last_updated_at": _iso(self.updated),
            "seconds": round((self.updated if self.status != WORKING else time.time()) - self.created, 3),
            "poll_interval_ms": POLL_INTERVAL_MS,
        }


class FarmTasks:
    """The relay's farm runs, by id (kept for the session)."""

    def __init__(self) -> None:
        self._tasks: dict[str, FarmTask] = {}

    def call(self, name: str, arguments: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        """A tool call (blocking: run it off the event loop): its JSON, and whether it is an error."""
        try:
            if name == START_RUN:
                return self._start(arguments).snapshot(), False
            task = self._find(str(arguments.get("task_id", "")))
            if name == CANCEL_RUN:
                task.cancel()
            return task.snapshot(), False
        except (FarmRunError, TaskError) as exc:
            return {"state": exc.state, "error": str(exc)}, True

    def _start(self, arguments: dict[str, Any]) -> FarmTask:
        working = [task for task in self._tasks.values() if task.status == WORKING]
        if working:
            raise TaskError(
                f"farm run {working[0].task_id} is working, and one run uses this whole computer; wait for it or "
                f"cancel it ({CANCEL_RUN})",
                "too_many_tasks",
            )
        folder = Path(str(arguments.get("bundle_folder", "")))
        if not folder.is_absolute():
            raise TaskError(f"bundle_folder must be an absolute path: {str(folder)[:200]!r}", "invalid_path")
        task = FarmTask(FarmRun(folder))  # the `blender` on this server's PATH: which program runs is the user's to say
        self._tasks[task.task_id] = task
        return task

    def _find(self, task_id: str) -> FarmTask:
        task = self._tasks.get(task_id)
        if task is None:
            raise TaskError(f"no farm run {task_id[:64]!r} in this session", "not_found")
        return task

    def close(self) -> None:
        """The session ends: a working run is cancelled, its processes ended."""
        for task in self._tasks.values():
            if task.status == WORKING:
                task.cancel()


def _iso(stamp: float) -> str:
    return datetime.fromtimestamp(stamp, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
