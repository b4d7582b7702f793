"""What a tool's run gets besides its arguments: the job it runs as, from the bridge that runs it.

Tools never import the dispatcher, the interrupter or any bridge state: a job brings its progress
record, the way to hold a stop while Blender's own code renders (`shielded`, `held`) and to take it
after (`checkpoint`), the way to run steps between later jobs, and the bridge's frame tasks.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ..agent_history import AgentHistory
    from ..changes import Scene
    from ..checkpoints import Checkpoints
    from .frame_tasks import FrameTasks


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


Report = Callable[[float | None, str | None], None]
"""Record how far the job is (a fraction from 0 to 1, a message); checked even when nobody listens."""


class JobContext:
    """What a tool may use while it runs: the job's reporting and interrupts, and the bridge's scene records. Tools
    get everything here, never from the network side."""

    __slots__ = ("report", "interrupts", "start_background", "tasks", "changes", "history", "checkpoints")

    def __init__(
        self,
        *,
        report: Report,
        interrupts: Interrupts,
        start_background: Callable[[Callable[[], bool]], None],
        tasks: FrameTasks,
        changes: Scene,
        history: AgentHistory,
        checkpoints: Checkpoints,
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

    def reporting_to(self, report: Report) -> JobContext:
        """The same job, its reports going to `report`."""
        job = copy.copy(self)
        job.report = report
        return job
