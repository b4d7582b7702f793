"""What a tool's run gets besides its arguments: the job it runs as, from the bridge that runs it.

Tools never import the dispatcher, the interrupter or any bridge state: a job brings its progress
record, the way to hold a stop while Blender's own code renders (`shielded`, `held`) and to take it
after (`checkpoint`), the way to run steps between later jobs, and the bridge's records. Each record is a port
here (a small protocol of what tools use of it), never its class: the domain's records are wired in where the
execution is built (execution.py), and a tool can be run against fakes.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

Summary = dict[str, Any]
"""A change summary (summaries.py): JSON, the words of `changes` in answers."""


class Interrupts(Protocol):
    """How a job meets a stop asked while it runs (the dispatcher's interrupter)."""

    def shielded(self) -> AbstractContextManager[None]:
        """While inside (Blender's render), a stop raises nowhere; it is raised after."""
        ...

    def held(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """`fn(...)` shielded, then the stop asked meanwhile raised."""
        ...

    def stopping(self) -> bool:
        """Whether this job is being stopped."""
        ...

    def checkpoint(self) -> None:
        """Raise the stop asked meanwhile, if any."""
        ...


class ChangeRecord(Protocol):
    """What tools use of the scene's change record (changes.Scene): its revision, what changed since one, and the
    spans a job's own reading or restoring must not be told as a change."""

    known_from: int
    journal_size: int

    @property
    def revision(self) -> int: ...

    def settle(self) -> None: ...

    def since(self, revision: int) -> Summary | None: ...

    def unrecorded(self) -> AbstractContextManager[None]: ...

    def expect_load(self, word: str) -> None: ...

    def copying(self, saving: bool) -> None:
        """Said around a copy of the file a tool saves (a job bundle's): not the user's save."""
        ...


class Step(Protocol):
    def brief(self) -> dict[str, Any]: ...


class History(Protocol):
    """What tools use of the agent's history (agent_history.AgentHistory): its steps, and moving along them."""

    done: Sequence[Step]
    undone: Sequence[Step]
    ended: str | None

    def undo(self, steps: int) -> Summary: ...

    def redo(self, steps: int) -> Summary: ...

    def follow_loads(self) -> None: ...

    def restored(self, what: str) -> None: ...


class Checkpoint(Protocol):
    name: str
    file: str

    def listed(self) -> dict[str, Any]: ...


class Checkpoints(Protocol):
    """What tools use of the checkpoint folder (checkpoints.Checkpoints)."""

    folder: Any

    def save(self, name: str, revision: int) -> Checkpoint: ...

    def save_rescue(self, revision: int, *, keep: str) -> Checkpoint: ...

    def list(self) -> list[Any]: ...

    def find(self, name: str) -> Checkpoint: ...

    def load(self, record: Any) -> bool: ...

    def drop(self, name: str) -> None: ...


class Tasks(Protocol):
    """What tools use of the frame tasks' table (frame_tasks.FrameTasks)."""

    def start(self, frames: Callable[[Any], Any], job: JobContext) -> dict[str, Any]: ...

    def task(self, task_id: str) -> Any: ...

    def working(self) -> int: ...

    def forget_old(self, now: float | None = None) -> None: ...


class AgentMode(Protocol):
    """What tools use of the agent's mode (agent_mode.AgentMode): its name and what it lets the agent do."""

    @property
    def value(self) -> str: ...

    @property
    def meaning(self) -> str: ...


Report = Callable[[float | None, str | None], None]
"""Record how far the job is (a fraction from 0 to 1, a message); checked even when nobody listens."""


class JobContext:
    """What a tool may use while it runs: the job's reporting and interrupts, and the bridge's scene records. Tools
    get everything here, never from the network side."""

    __slots__ = (
        "report",
        "interrupts",
        "start_background",
        "tasks",
        "changes",
        "history",
        "checkpoints",
        "agent_mode",
    )

    def __init__(
        self,
        *,
        report: Report,
        interrupts: Interrupts,
        start_background: Callable[[Callable[[], bool]], None],
        tasks: Tasks,
        changes: ChangeRecord,
        history: History,
        checkpoints: Checkpoints,
        agent_mode: AgentMode,
    ) -> None:
        self.report = report
        self.interrupts = interrupts
        self.start_background = start_background
        """Runs a step on Blender's main thread between later jobs, again while it returns True."""
        self.tasks = tasks
        self.changes = changes
        """What changed in the scene, job by job, the user's edits between them included."""
        self.history = history
        """The agent's own steps in Blender's undo history."""
        self.checkpoints = checkpoints
        self.agent_mode = agent_mode
        """What the person at Blender lets the agent do, when the job began."""

    def reporting_to(self, report: Report) -> JobContext:
        """The same job, its reports going to `report`."""
        job = copy.copy(self)
        job.report = report
        return job
