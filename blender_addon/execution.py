"""The jobs a bridge runs for its clients, and the Blender Lab executor.

`Execution` holds what every job shares (the dispatcher, the change record, the agent's history, the
checkpoints, the frame tasks) and runs the Lab's code; the MCP tools run through `tool_host.py`, loaded with
the MCP side at its first use. Work is validated on the calling thread and run through the dispatcher on
Blender's main thread; a deferred result (`check_is_finished`) is polled there once per tick, in the GUI only.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any, Protocol

import bpy

from . import dispatch, scene_revision
from .agent_history import AgentHistory
from .agent_mode import AgentMode
from .changes import Scene
from .checkpoints import Checkpoints
from .consent import Call, Consent
from .errors import BridgeStopped, DispatchTimeout, ToolError
from .frame_tasks import FrameTasks
from .net.caller import Caller, Progress
from .net.lab_protocol import error_envelope
from .tools.context import JobContext
from .tools.python_exec import Deferred, Envelope, execute

JOB_TIMEOUT = 120.0
LAB_JOB_TIMEOUT = 290.0
"""Just under the official Lab client's 300 s, so it hears our answer rather than its own timeout."""
DEFERRED_POLL = 0.05
DEFERRED_LIMIT = 600.0
"""Seconds a deferred result (`check_is_finished`) may take over MCP; on the Lab wire LAB_JOB_TIMEOUT."""
EDITS_LOOK = 0.25
"""Seconds between two looks for the user's edits in the GUI, while someone listens: as often as a stream of
changed resources may speak (`net/subscriptions.py`'s COALESCE, held equal by a test)."""

LAB_CODE = "execute_blender_code"
"""The Lab wire's one call, as the official server names its tool."""

CODE_DISABLED = (
    "Running Python is switched off in this Blender (Hermes Bridge preferences: 'Allow code execution'); "
    "the read-only tools still work"
)


class Watcher(Protocol):
    """Who hears of changes as they happen (the MCP side's resource subscriptions, once it is up)."""

    def listening(self) -> bool:
        """Whether anyone would hear: a change is told only then."""
        ...

    def recorded(self, author: str, summary: dict[str, Any]) -> None:
        """A change was recorded in the scene (`author`: who made it)."""
        ...

    def stepped(self, task_ids: list[str]) -> None:
        """A frame task took a step: the tasks the bridge holds now."""
        ...


class Execution:
    """The jobs of one bridge, and its Lab executor."""

    def __init__(
        self,
        dispatcher: dispatch.Dispatcher,
        *,
        gui: bool,
        allow_code: bool,
        job_timeout: float,
        checkpoint_folder: Path,
        agent_mode: AgentMode,
        ask_timeout: float,
    ) -> None:
        self.dispatcher = dispatcher
        self.gui = gui
        """Interactive: deferred results are polled between ticks, and the user edits between jobs."""
        self.allow_code = allow_code
        self.consent = Consent(agent_mode, person=gui, timeout=ask_timeout)
        """What the person lets the agent do; asked before a job is queued (`consent.py`)."""
        self.job_timeout = job_timeout
        self.watcher: Watcher | None = None
        """Told of each change while it listens; set when the MCP side comes up."""
        self.tasks = FrameTasks()
        """This bridge's frame-range tasks: their steps run between its jobs."""
        self.changes = Scene(between="user" if gui else "between jobs")
        """What changed, job by job: Blender's handlers feed it while this bridge runs (main thread: install)."""
        self.changes.install()
        self.changes.on_record = self._announce
        self._edits_timer = self._look_for_user_edits
        """The one bound method registered: Blender's timers know a function by identity, not by equality."""
        if gui:
            bpy.app.timers.register(self._edits_timer, first_interval=EDITS_LOOK, persistent=True)
        self.history = AgentHistory(self.changes, gui=gui)
        self.checkpoints = Checkpoints(checkpoint_folder, self.changes.copying)
        self.changes.on_saved = self.checkpoints.saved

    def close(self) -> None:
        """The bridge stops: its tasks' next steps will never run, so each working task ends as failed; Blender's
        handlers stop feeding its change record; a call waiting for the person's answer ends unrun."""
        self.consent.close()
        self.tasks.close()
        self.changes.uninstall()
        if bpy.app.timers.is_registered(self._edits_timer):
            bpy.app.timers.unregister(self._edits_timer)

    def _listening(self) -> Watcher | None:
        watcher = self.watcher
        return watcher if watcher is not None and watcher.listening() else None

    def _announce(self, author: str, summary: dict[str, Any]) -> None:
        if (watcher := self._listening()) is not None:
            watcher.recorded(author, summary)

    def _look_for_user_edits(self) -> float:
        """GUI timer: while someone listens, the user's edits so far are closed into the record (and so announced)
        between jobs, as often as a stream may speak."""
        if self._listening() is not None:  # inside a job (agent code's own timer loop) settle waits for its end
            self.changes.settle()
        return EDITS_LOOK

    def _step_announcing(self, step: Callable[[], bool]) -> Callable[[], bool]:
        """A render task's step, after which its status is told to whoever listens."""

        def announcing() -> bool:
            more = step()
            if (watcher := self._listening()) is not None:
                watcher.stepped(self.tasks.ids())
            return more

        return announcing

    def job(self, progress: Progress | None) -> JobContext:
        """What a tool or the Lab's code runs as: reports go to `progress`, or are checked and dropped."""
        return JobContext(
            report=(progress or Progress()).report,
            interrupts=self.dispatcher.interrupter,
            start_background=lambda step: self.dispatcher.start_background(self._step_announcing(step)),
            tasks=self.tasks,
            changes=self.changes,
            history=self.history,
            checkpoints=self.checkpoints,
            agent_mode=self.consent.mode,
        )

    def run_lab_code(self, code: str, strict_json: bool, connected: Callable[[], bool]) -> Envelope | None:
        if not self.allow_code:
            return error_envelope(CODE_DISABLED)
        caller = Caller(connected)
        try:
            self.consent.check(Call(LAB_CODE, "Run Python in Blender (Blender Lab)", {"code": code}), connected)
        except ToolError as exc:
            return error_envelope(f"{exc.state}: {exc}")
        try:
            outcome = self.dispatcher.call(
                partial(_lab_code, code, strict_json, self.job(None)), LAB_JOB_TIMEOUT, caller
            )
            if isinstance(outcome, Deferred):
                return self.poll_deferred(outcome, caller, LAB_JOB_TIMEOUT)
        except (ToolError, DispatchTimeout, BridgeStopped) as exc:
            return error_envelope(str(exc))
        return outcome

    def poll_deferred(self, deferred: Deferred, caller: Caller, limit: float) -> Any:
        """Poll a deferred result once per tick (GUI only) for at most `limit` seconds; None when the client left."""
        if not self.gui:  # nothing else polls between jobs: in place, the poll would hold every other client
            raise ToolError(
                "Deferred responses via `check_is_finished` are only supported by the interactive (GUI) bridge; "
                "in background mode compute the result before the code returns",
                state="no_interactive_session",
            )
        deadline = time.monotonic() + limit
        while (now := time.monotonic()) < deadline:
            if not caller.wanted():
                return None  # the client left: drop the job, never replay it
            caller.tend(now)
            time.sleep(DEFERRED_POLL)
            try:
                answer = self.dispatcher.call(deferred.poll, LAB_JOB_TIMEOUT)
            except BridgeStopped:  # the code ran, and maybe polls of it: never "not run", which invites a replay
                raise BridgeStopped(
                    "the bridge stopped while the code's deferred result was pending; the code ran, and what it "
                    "changed stays: check the scene before running it again"
                ) from None
            if answer is not None:
                return answer
        raise DispatchTimeout(f"the deferred result did not finish within {limit:g} s", state="interrupted")


def _lab_code(code: str, strict_json: bool, job: JobContext) -> Envelope:
    """Main thread: the Lab's code, which may change anything: told and one step, as execute_blender_code."""
    told = Told()
    with recorded_step(job, "lab_execute", "Blender Lab code", True, told):
        envelope = execute(code, job, strict_json=strict_json)
    if isinstance(envelope, dict):
        told.into(envelope)
    return envelope


class Told:
    """A job's change summary once its span closed: into an answer when something changed."""

    summary: dict[str, Any] | None = None

    def into(self, answer: dict[str, Any]) -> None:
        if self.summary is not None and self.summary["changed"]:
            answer["changes"] = self.summary


@contextlib.contextmanager
def recorded_step(job: JobContext, tool: str, title: str, records: bool, told: Told) -> Iterator[None]:
    """A job that may change the scene: its span of the change record, closed even when it fails (`told` holds
    the summary then), and one step of the agent's history when it changed something (`records`)."""
    job.changes.begin()
    if records:
        job.history.before_change()
    try:
        yield
    finally:
        with job.interrupts.shielded():  # a stop asked now waits: the span is told and the step kept first
            scene_revision.changed()  # kept counts are stale once the scene may have changed (a failure included)
            told.summary = summary = job.changes.end(f"agent:{tool}")
            if records and summary["changed"]:
                job.history.record(tool, title, summary)
