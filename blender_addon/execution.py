"""What the bridge runs for its clients: the MCP tool host and the Blender Lab executor.

Both validate on the calling thread and run the work through the dispatcher on Blender's main
thread; a deferred result (`check_is_finished`) is polled there once per tick, in the GUI only.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import bpy

from . import dispatch, log, resources, tasks_extension
from .agent_history import MOVES, AgentHistory
from .changes import Scene
from .checkpoints import Checkpoints
from .errors import (
    BridgeStopped,
    DispatchTimeout,
    InvalidArguments,
    RequestCancelled,
    ToolError,
    UnknownResource,
    UnknownTask,
    UnknownTool,
)
from .net.caller import ANYONE, Caller, Progress
from .net.lab_protocol import error_envelope
from .net.mcp import ToolOutcome, dumps
from .net.subscriptions import COALESCE, Updates
from .tools import CATALOGUE, Image, Tool, scene_index
from .tools.base import Pictured
from .tools.context import JobContext
from .tools.frame_tasks import TASK_ID, FrameTasks
from .tools.python_exec import Deferred, Envelope, execute
from .tools.schema import validate

JOB_TIMEOUT = 120.0
LAB_JOB_TIMEOUT = 290.0
"""Just under the official Lab client's 300 s, so it hears our answer rather than its own timeout."""
DEFERRED_POLL = 0.05
DEFERRED_LIMIT = 600.0
"""Seconds a deferred result (`check_is_finished`) may take over MCP; on the Lab wire LAB_JOB_TIMEOUT."""

CODE_DISABLED = (
    "Running Python is switched off in this Blender (Hermes Bridge preferences: 'Allow code execution'); "
    "the read-only tools still work"
)


class Execution:
    """The tool host (MCP) and the Lab executor of one bridge."""

    def __init__(
        self,
        dispatcher: dispatch.Dispatcher,
        *,
        gui: bool,
        allow_code: bool,
        job_timeout: float,
        checkpoint_folder: Path,
        updates: Updates | None = None,
    ) -> None:
        self._dispatcher = dispatcher
        self._updates = updates or Updates()
        """Resource subscriptions: told which resources each recorded change touched."""
        self._gui = gui
        """Interactive: deferred results are polled between ticks, and the user edits between jobs."""
        self._allow_code = allow_code
        self._job_timeout = job_timeout
        self.tasks = FrameTasks()
        """This bridge's frame-range tasks: their steps run between its jobs."""
        self.changes = Scene(between="user" if gui else "between jobs")
        """What changed, job by job: Blender's handlers feed it while this bridge runs (main thread: install)."""
        self.changes.install()
        self.changes.on_record = self._announce
        self._edits_timer = self._look_for_user_edits
        """The one bound method registered: Blender's timers know a function by identity, not by equality."""
        if gui:
            bpy.app.timers.register(self._edits_timer, first_interval=COALESCE, persistent=True)
        self.history = AgentHistory(self.changes, gui=gui)
        self.checkpoints = Checkpoints(checkpoint_folder, self.changes.copying)
        self.changes.on_saved = self.checkpoints.saved

    def close(self) -> None:
        """The bridge stops: its tasks' next steps will never run, so each working task ends as failed; Blender's
        handlers stop feeding its change record."""
        self.tasks.close()
        self.changes.uninstall()
        if bpy.app.timers.is_registered(self._edits_timer):
            bpy.app.timers.unregister(self._edits_timer)

    def _announce(self, author: str, summary: dict[str, Any]) -> None:
        """A change was recorded: the resources it touched are updated for whoever listens."""
        if self._updates.listening():
            self._updates.publish(resources.touched(summary, self._updates.wanted(), history_moved=author in MOVES))

    def _look_for_user_edits(self) -> float:
        """GUI timer: while someone listens, the user's edits so far are closed into the record (and so announced)
        between jobs, as often as a stream may speak."""
        if self._updates.listening():  # inside a job (agent code's own timer loop) settle waits for its end
            self.changes.settle()
        return COALESCE

    def _step_announcing(self, step: Callable[[], bool]) -> Callable[[], bool]:
        """A render task's step, after which its status resource is updated for whoever listens."""

        def announcing() -> bool:
            more = step()
            if self._updates.listening():
                self._updates.publish(resources.task_uris(self.tasks.ids()))
            return more

        return announcing

    def _job(self, progress: Progress | None) -> JobContext:
        """What a tool or the Lab's code runs as: reports go to `progress`, or are checked and dropped."""
        return JobContext(
            report=(progress or Progress()).report,
            interrupts=self._dispatcher.interrupter,
            start_background=lambda step: self._dispatcher.start_background(self._step_announcing(step)),
            tasks=self.tasks,
            changes=self.changes,
            history=self.history,
            checkpoints=self.checkpoints,
        )

    # ToolHost (MCP) ---------------------------------------------------------------------------

    def list_tools(self) -> list[dict[str, Any]]:
        return [tool.descriptor() for tool in CATALOGUE.values()]

    def call_tool(self, name: str, arguments: dict[str, Any], caller: Caller = ANYONE) -> ToolOutcome:
        tool = CATALOGUE.get(name)
        if tool is None:
            raise UnknownTool(f"Unknown tool: {name!r}")
        if tool.runs_code and not self._allow_code:
            return ToolOutcome.error(CODE_DISABLED, state="code_execution_disabled")
        try:
            validate(tool.input_schema, arguments)
            outcome = self._dispatcher.call(
                partial(_run_tool, tool, arguments, self._job(caller.progress)),
                tool.time_limit or self._job_timeout,
                caller,
            )
            if isinstance(outcome, Deferred):
                answer = self._poll_deferred(outcome, caller, DEFERRED_LIMIT)
                if answer is None:  # the client hung up: drop the job, as on the Lab wire
                    return ToolOutcome.error("the client left before the deferred result was ready", state="stopped")
                outcome = _present(tool, answer)
        except ToolError as exc:
            log.logger.info("tool %s failed [%s]: %s", log.one_line(name), exc.state, log.one_line(exc))
            return ToolOutcome.error(str(exc), state=exc.state, **exc.details)
        except DispatchTimeout as exc:
            return ToolOutcome.error(str(exc), state=exc.state)
        except RequestCancelled as exc:
            log.logger.info("tool %s cancelled: its client left while it ran", log.one_line(name))
            return ToolOutcome.error(str(exc), state="cancelled")
        except BridgeStopped as exc:
            return ToolOutcome.error(str(exc), state="stopped")
        return outcome

    def tasked(self, name: str) -> bool:
        return name in tasks_extension.TASKED

    def start_task(self, name: str, arguments: dict[str, Any], caller: Caller = ANYONE) -> ToolOutcome | dict[str, Any]:
        """A tasked tool's call as a task (its `Task`), or the call's refusal as the tool would have answered it."""
        outcome = self.call_tool(tasks_extension.TASKED[name], arguments, caller)
        if outcome.failure is not None or outcome.structured is None:
            return outcome
        return tasks_extension.task_fields(json.loads(outcome.structured))

    def get_task(self, task_id: str, caller: Caller = ANYONE) -> dict[str, Any]:
        """`tasks/get`, read on the main thread; UnknownTask for an id never given or long forgotten."""
        return self._on_task(task_id, caller, lambda task: tasks_extension.detailed(task))

    def cancel_task(self, task_id: str, caller: Caller = ANYONE) -> None:
        """`tasks/cancel`: a working task stops before its next frame; a finished one stays as it ended (the
        extension's cancel is a wish, acknowledged either way)."""

        def cancel(task: Any) -> None:
            if task.status == tasks_extension.WORKING:
                task.cancel()

        self._on_task(task_id, caller, cancel)

    def _on_task(self, task_id: str, caller: Caller, act: Callable[[Any], Any]) -> Any:
        validate(TASK_ID, {"task_id": task_id})  # as the task tools take it: an id over 64 characters is never one

        def job() -> Any:
            self.tasks.forget_old()
            try:
                task = self.tasks.task(task_id)
            except ToolError as exc:
                raise UnknownTask(str(exc)) from None
            return act(task)

        return self._dispatcher.call(job, self._job_timeout, caller)

    def list_resources(self) -> list[dict[str, Any]]:
        return resources.listed(self.tasks.ids())

    def resource_templates(self) -> list[dict[str, Any]]:
        return [view.descriptor() for view in resources.TEMPLATES]

    def read_resource(self, uri: str, caller: Caller = ANYONE) -> ToolOutcome:
        """The resource's tool run for `caller`, with the tool's rules: a resource reads what its tool answers."""
        try:
            found = resources.resolve(uri)
        except UnicodeDecodeError:
            found = None
        if found is None:
            raise UnknownResource(f"Resource not found: {uri}")
        view, arguments = found
        return self.call_tool(view.tool, arguments, caller)

    def list_prompts(self) -> list[dict[str, Any]]:
        return [prompt.descriptor() for prompt in resources.PROMPTS.values()]

    def get_prompt(self, name: str, arguments: dict[str, str]) -> dict[str, Any]:
        prompt = resources.PROMPTS.get(name)
        if prompt is None:
            raise InvalidArguments(f"no prompt named {name!r} (prompts/list names them)")
        missing = [argument for argument, _ in prompt.arguments if not isinstance(arguments.get(argument), str)]
        if missing:
            raise InvalidArguments(f"prompt {name!r} needs the argument {missing[0]!r} (text)")
        return {"description": prompt.description, "messages": prompt.messages(arguments)}

    def run_here(self, name: str, arguments: dict[str, Any]) -> ToolOutcome:
        """A tool run on this (main) thread, now: the panel's buttons do what the tools do, with the same rules
        and refusals, and the same change record."""
        tool = CATALOGUE[name]
        try:
            validate(tool.input_schema, arguments)
            outcome = _run_tool(tool, arguments, self._job(None))
        except ToolError as exc:
            return ToolOutcome.error(str(exc), state=exc.state, **exc.details)
        assert not isinstance(outcome, Deferred), "the panel's tools answer at once"
        return outcome

    # LabExecutor ------------------------------------------------------------------------------

    def run_lab_code(self, code: str, strict_json: bool, connected: Callable[[], bool]) -> Envelope | None:
        if not self._allow_code:
            return error_envelope(CODE_DISABLED)
        caller = Caller(connected)
        try:
            outcome = self._dispatcher.call(
                partial(_lab_code, code, strict_json, self._job(None)), LAB_JOB_TIMEOUT, caller
            )
            if isinstance(outcome, Deferred):
                return self._poll_deferred(outcome, caller, LAB_JOB_TIMEOUT)
        except (ToolError, DispatchTimeout, BridgeStopped) as exc:
            return error_envelope(str(exc))
        return outcome

    def _poll_deferred(self, deferred: Deferred, caller: Caller, limit: float) -> Any:
        """Poll a deferred result once per tick (GUI only) for at most `limit` seconds; None when the client left."""
        if not self._gui:  # nothing else polls between jobs: in place, the poll would hold every other client
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
                answer = self._dispatcher.call(deferred.poll, LAB_JOB_TIMEOUT)
            except BridgeStopped:  # the code ran, and maybe polls of it: never "not run", which invites a replay
                raise BridgeStopped(
                    "the bridge stopped while the code's deferred result was pending; the code ran, and what it "
                    "changed stays: check the scene before running it again"
                ) from None
            if answer is not None:
                return answer
        raise DispatchTimeout(f"the deferred result did not finish within {limit:g} s", state="interrupted")


def _run_tool(tool: Tool, arguments: dict[str, Any], job: JobContext) -> ToolOutcome | Deferred:
    """Main thread: run the tool as `job`; a change is told (`changes`) and is one named step of the agent's
    history; serialise while bpy is safe."""
    if not tool.mutating:
        try:
            data = tool.run(arguments, job)
        except ToolError:
            raise
        except Exception as exc:
            return ToolOutcome.error(f"{tool.name} failed: {type(exc).__name__}: {exc}", state="tool_failed")
        return data if isinstance(data, Deferred) else _present(tool, data)
    told = _Told()
    try:
        with _step(job, tool.name, tool.title, tool.records_step, told):
            data = tool.run(arguments, job)
    except ToolError as exc:
        told.into(exc.details)
        raise
    except Exception as exc:
        details: dict[str, Any] = {}
        told.into(details)
        return ToolOutcome.error(f"{tool.name} failed: {type(exc).__name__}: {exc}", state="tool_failed", **details)
    if isinstance(data, Deferred):
        return data
    if isinstance(data, dict) and "changes" not in data:
        told.into(data)
    return _present(tool, data)


def _lab_code(code: str, strict_json: bool, job: JobContext) -> Envelope:
    """Main thread: the Lab's code, which may change anything: told and one step, as execute_blender_code."""
    told = _Told()
    with _step(job, "lab_execute", "Blender Lab code", True, told):
        envelope = execute(code, job, strict_json=strict_json)
    if isinstance(envelope, dict):
        told.into(envelope)
    return envelope


class _Told:
    """A job's change summary once its span closed: into an answer when something changed."""

    summary: dict[str, Any] | None = None

    def into(self, answer: dict[str, Any]) -> None:
        if self.summary is not None and self.summary["changed"]:
            answer["changes"] = self.summary


@contextlib.contextmanager
def _step(job: JobContext, tool: str, title: str, records: bool, told: _Told) -> Iterator[None]:
    """A job that may change the scene: its span of the change record, closed even when it fails (`told` holds
    the summary then), and one step of the agent's history when it changed something (`records`)."""
    job.changes.begin()
    if records:
        job.history.before_change()
    try:
        yield
    finally:
        with job.interrupts.shielded():  # a stop asked now waits: the span is told and the step kept first
            scene_index.changed()  # kept counts are stale once the scene may have changed (a failure included)
            told.summary = summary = job.changes.end(f"agent:{tool}")
            if records and summary["changed"]:
                job.history.record(tool, title, summary)


def _present(tool: Tool, data: Any) -> ToolOutcome:
    """Tool data in MCP terms: an image as image content, anything else as JSON."""
    if isinstance(data, Image):
        return ToolOutcome(
            [
                {"type": "image", "data": data.base64(), "mimeType": "image/png"},
                {"type": "text", "text": dumps(data.details)},
            ]
        )
    if isinstance(data, Pictured):
        told = ToolOutcome.json(data)
        pictures = [{"type": "image", "data": image.base64(), "mimeType": "image/png"} for image in data.images]
        return ToolOutcome([*pictures, *told.content], structured=told.structured)
    try:
        return ToolOutcome.json(data)
    except (TypeError, ValueError) as exc:
        return ToolOutcome.error(f"{tool.name} produced a result that is not JSON: {exc}", state="tool_failed")
