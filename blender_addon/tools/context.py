"""What a tool's run gets besides its arguments: the job it runs as, from the bridge that runs it.

Tools never import the dispatcher, the interrupter or any bridge state: a job brings its progress
record, the way to hold a stop while Blender's own code renders (`shielded`, `held`) and to take it
after (`checkpoint`), the way to run steps between later jobs, and the bridge's frame tasks.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
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


@dataclass(frozen=True)
class JobContext:
    """What a tool may use while it runs: the job's reporting and interrupts, and the bridge's scene records. Tools
    get everything here, never from the network side."""

    report: Report
    interrupts: Interrupts
    start_background: Callable[[Callable[[], bool]], None]
    """Runs a step on Blender's main thread between later jobs, again while it returns True."""
    tasks: FrameTasks
    changes: Scene
    """What changed in the scene, job by job, the user's edits between them included."""
    history: AgentHistory
    """The agent's own steps in Blender's undo history."""
    checkpoints: Checkpoints
