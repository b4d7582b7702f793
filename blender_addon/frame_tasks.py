"""Frame ranges as tasks: one call starts it, Blender renders a frame at a time between other requests, and
other calls ask after it or cancel it, so a render may outlast any client's timeout (README › Decisions).

The states and fields are the MCP tasks extension's (`working`, `completed`, `failed`, `cancelled`; a status
message; creation and last-update times; a time to live; a poll interval), as tools any client can call.
Everything here runs on Blender's main thread (a tool, or a step the dispatcher runs between jobs), so a
task never changes under a reader. Task ids are random: knowing one is the only way to ask after a task,
besides holding the bridge's token, which every call needs anyway.

A record of the domain, beside the change record and the agent's history: it imports no tool. What it renders and
the job it runs as are ports below (`Frames`, `Job`); tools/frames.py's `FrameRange` and tools/context.py's
`JobContext` are what the bridge hands it.
"""

from __future__ import annotations

import base64
import os
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import bpy

from .errors import JobInterrupted, ToolError

WORKING, COMPLETED, FAILED, CANCELLED = "working", "completed", "failed", "cancelled"
KEPT = 16
"""Finished tasks kept for asking after; beyond that the oldest finished one is forgotten."""
TTL = 3600.0
"""Seconds a finished task is kept."""
POLL_INTERVAL_MS = 2000
MAX_WORKING = 8
"""Tasks working at once per bridge. Blender renders one frame at a time, so more tasks only take turns (each
finishes later); each holds its folder open and its range in memory, and a start checks up to 10,000 names
(100 working tasks of 10,000 frames cost 664 MiB, each start 0.5 s of the loop). Eight covers an agent
rendering a few cameras or shots side by side."""


class Job(Protocol):
    """What the table uses of the job that starts a task (tools/context.py's `JobContext`)."""

    start_background: Callable[[Callable[[], bool]], None]

    def reporting_to(self, report: Callable[[float | None, str | None], None]) -> Job: ...


class Frames(Protocol):
    """What a task renders, a frame per step (tools/frames.py's `FrameRange`)."""

    folder: Path
    last_written: Path | None
    skipped: list[dict[str, Any]]
    skipped_count: int

    def __len__(self) -> int: ...

    def render(self, index: int, scene: Any, job: Job) -> str | None:
        """Frame `index` into the folder: None once written, else why it was skipped."""
        ...

    def summary(self, scene: Any) -> dict[str, Any]: ...

    def word(self, index: int) -> str: ...

    def close(self) -> None: ...


class FrameTasks:
    """One bridge's tasks, by id (its `Execution` holds them; a tool reaches them through its job)."""

    def __init__(self) -> None:
        self._tasks: dict[str, FramesTask] = {}
        self._open = True

    def close(self) -> None:
        """The bridge stopped: no new task starts and every working one has run its last step; each says so (a
        task is asked after by id, maybe later)."""
        self._open = False
        for task in self._tasks.values():
            if task.status == WORKING:
                task.abandon()

    def start(self, frames: Callable[[Any], Frames], job: Job) -> dict[str, Any]:
        """A new task rendering `frames` of the current scene (made only once the task may start)."""
        if not self._open:
            raise ToolError("no bridge is serving, so no task can run", state="stopped")
        working = self.working()
        if working >= MAX_WORKING:
            raise ToolError(
                f"{working} tasks are working, the most one bridge runs at once ({MAX_WORKING}); wait for one to "
                "finish or cancel one (cancel_render_frames_task), then start this one",
                state="too_many_tasks",
            )
        scene = bpy.context.scene
        task = FramesTask(frames(scene), scene, job.reporting_to(_unheard))
        self.forget_old()
        try:
            job.start_background(task.step)
        except BaseException:
            task.frames.close()
            raise
        self._tasks[task.task_id] = task
        return task.snapshot()

    def working(self) -> int:
        """Tasks rendering now."""
        return len(self.working_tasks())

    def working_tasks(self) -> list[FramesTask]:
        return [task for task in self._tasks.values() if task.status == WORKING]

    def task(self, task_id: str) -> FramesTask:
        task = self._tasks.get(task_id)
        if task is None:
            raise ToolError(
                f"no task {task_id!r}: it never existed, or it finished more than {TTL / 60:.0f} minutes ago, or "
                "Blender restarted",
                state="not_found",
            )
        return task

    def forget_old(self, now: float | None = None) -> None:
        """Finished tasks past their time to live, and beyond the KEPT newest finished ones."""
        now = time.time() if now is None else now
        finished = sorted((t for t in self._tasks.values() if t.finished_at() is not None), key=lambda t: t.updated)
        for position, task in enumerate(finished):
            if _expired(task, now) or position < len(finished) - KEPT:
                del self._tasks[task.task_id]

    def __len__(self) -> int:
        return len(self._tasks)

    def ids(self) -> list[str]:
        """The tasks kept, working or finished, but those past their time to live (which a read would no longer
        find); safe off the main thread (the dict is copied in one C call, and nothing is dropped here)."""
        now = time.time()
        return [task_id for task_id, task in self._tasks.copy().items() if not _expired(task, now)]


def _expired(task: FramesTask, now: float) -> bool:
    return task.finished_at() is not None and now - task.updated > TTL


def _unheard(fraction: float | None = None, message: str | None = None) -> None:
    """A task's steps have no client listening: its word is its status message."""


class FramesTask:
    """One frame range being rendered a frame per step."""

    def __init__(self, frames: Frames, scene: Any, job: Job) -> None:
        self.task_id = base64.urlsafe_b64encode(os.urandom(12)).decode("ascii")  # 16 characters
        self.frames = frames
        self._job = job
        """What each step runs as: a job of the bridge that started the task."""
        self._scene = scene.name
        self._pointer = scene.as_pointer()
        """The scene of the file open at the start: another file's scene of the same name is not this one."""
        self.status = WORKING
        self.done = 0
        """Frames finished: written, or skipped (`frames.skipped`)."""
        self.message = f"waiting for its first frame (0 of {len(frames)})"
        self.created = self.updated = time.time()
        self.answer: dict[str, Any] | None = None
        """Once completed: what `render_frames_to_folder` answers for the same range (the tasks extension's
        result)."""

    def step(self) -> bool:
        """Render the next frame; whether more remain. Every end of the task is its status, never an exception,
        but an interrupt (the bridge stopping) still ends the job it runs in."""
        if self.status != WORKING:
            return False
        scene = bpy.data.scenes.get(self._scene)
        if scene is None or scene.as_pointer() != self._pointer:
            return self._end(
                FAILED, f"the scene {self._scene!r} is gone (another file was opened) after {self._count()}"
            )
        try:
            skipped = self.frames.render(self.done, scene, self._job)
        except ToolError as exc:
            return self._end(FAILED, f"{exc} (after {self._count()})")
        except JobInterrupted:
            self._end(FAILED, f"the bridge stopped after {self._count()}")
            raise
        except Exception as exc:
            return self._end(FAILED, f"{type(exc).__name__}: {exc} (after {self._count()})")
        self.done += 1
        if self.done == len(self.frames):
            seconds = round(time.time() - self.created, 3)
            self.answer = {"status": "ok", **self.frames.summary(scene), "seconds": seconds}
            if skipped := self.frames.skipped_count:
                return self._end(
                    COMPLETED,
                    f"{self.done - skipped} of {self.done} frames written; {skipped} skipped: their names were "
                    "taken in the folder after the start (`skipped` says which and why)",
                )
            return self._end(COMPLETED, f"all {len(self.frames)} frames written")
        word = f"skipped ({skipped})" if skipped else "written"
        self.message, self.updated = f"{self.frames.word(self.done - 1)}: {word}", time.time()
        return True

    def cancel(self) -> None:
        """Between two steps (everything here runs on the main thread): no frame is being rendered now."""
        if self.status != WORKING:
            raise ToolError(
                f"task {self.task_id} is already {self.status}; only a working task can be cancelled",
                state="task_finished",
            )
        self._end(CANCELLED, f"cancelled after {self._count()}")

    def abandon(self) -> None:
        self._end(FAILED, f"the bridge stopped after {self._count()}; start a new task for the rest")

    def finished_at(self) -> float | None:
        return None if self.status == WORKING else self.updated

    def snapshot(self) -> dict[str, Any]:
        frames = self.frames
        return {
            "task_id": self.task_id,
            "status": self.status,
            "status_message": self.message,
            "done": self.done,
            "count": len(frames),
            "folder": str(frames.folder),
            "last_written": str(frames.last_written) if frames.last_written else None,
            "skipped": list(frames.skipped),
            "skipped_count": frames.skipped_count,
            "created_at": _iso(self.created),
            "last_updated_at": _iso(self.updated),
            "seconds": round((self.updated if self.status != WORKING else time.time()) - self.created, 3),
            "ttl_ms": int(TTL * 1000),
            "poll_interval_ms": POLL_INTERVAL_MS,
        }

    def _end(self, status: str, message: str) -> bool:
        """Every way a task ends comes here: its folder is let go."""
        self.status, self.message, self.updated = status, message, time.time()
        self.frames.close()
        return False

    def _count(self) -> str:
        return f"{self.done} of {len(self.frames)} frames"


def _iso(stamp: float) -> str:
    return datetime.fromtimestamp(stamp, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
