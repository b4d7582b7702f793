"""The MCP side's tools, resources, prompts and tasks, run as the bridge's jobs (`execution.py`).

Loaded with the MCP side at its first use, and for the panel's buttons: a bridge that only answers the Lab's
code never imports the catalogue. Every tool runs on Blender's main thread through the dispatcher, with the
change record and the agent's history its job gives it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from functools import partial
from typing import Any

from . import log, resources, tasks_extension
from .consent import AskTheClient, Call
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
from .execution import CODE_DISABLED, DEFERRED_LIMIT, Execution, Told, recorded_step
from .net.caller import ANYONE, Caller
from .net.mcp import ToolOutcome, dumps
from .tools.base import Image, Pictured, Tool
from .tools.catalogue import CATALOGUE
from .tools.context import JobContext
from .tools.frame_task_tools import TASK_ID
from .tools.python_exec import FILENAME, Deferred
from .tools.schema import validate

CANCEL_TASK = "cancel_render_frames_task"
"""The tool whose change `tasks/cancel` makes."""


class ToolHost:
    """What `McpProtocol` calls (`net/mcp.py`'s ToolHost), over one bridge's `Execution`."""

    def __init__(self, execution: Execution) -> None:
        self._execution = execution

    def mode_said(self) -> str:
        """What the person lets the agent do now, as a model reads it first."""
        return f"The person at Blender chose the agent's mode; now {self._execution.consent.mode.meaning}."

    def list_tools(self) -> list[dict[str, Any]]:
        return [tool.descriptor() for tool in CATALOGUE.values()]

    def call_tool(self, name: str, arguments: dict[str, Any], caller: Caller = ANYONE) -> ToolOutcome:
        tool = CATALOGUE.get(name)
        if tool is None:
            raise UnknownTool(f"Unknown tool: {name!r}")
        if tool.runs_code and not self._execution.allow_code:
            return ToolOutcome.error(CODE_DISABLED, state="code_execution_disabled")
        try:
            consent = self._execution.consent
            if tool.mutating:  # decided before the job is queued: a refusal never reaches the main thread
                consent.refuse_read_only(name)  # whatever the arguments
            validate(tool.input_schema, arguments)
            if tool.mutating:
                call = Call(name, tool.title, arguments, caller.conversation)
                consent.check(call, caller.wanted, caller.client_input)
            outcome = self._execution.dispatcher.call(
                partial(_run_tool, tool, arguments, self._execution.job(caller.progress)),
                tool.time_limit or self._execution.job_timeout,
                caller,
            )
            if isinstance(outcome, Deferred):
                answer = self._execution.poll_deferred(outcome, caller, DEFERRED_LIMIT)
                if answer is None:  # the client hung up: drop the job, as on the Lab wire
                    return ToolOutcome.error("the client left before the deferred result was ready", state="stopped")
                outcome = _present(tool, answer)
        except ToolError as exc:
            log.logger.info("tool %s failed [%s]: %s", log.one_line(name), exc.state, log.one_line(exc))
            return ToolOutcome.error(str(exc), state=exc.state, **exc.details)
        except AskTheClient as asking:  # its client asks its user, then calls again with the answer
            return ToolOutcome.asking(asking.requests, asking.state)
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
        extension's cancel is a wish, acknowledged either way). It is `cancel_render_frames_task`'s change, so the
        person's mode decides it as it decides that tool (asked in Blender: the extension's cancel carries no
        answer); a refusal is a ToolError whose message starts with its state."""
        validate(TASK_ID, {"task_id": task_id})
        tool = CATALOGUE[CANCEL_TASK]
        try:
            self._execution.consent.check(
                Call(tool.name, tool.title, {"task_id": task_id}, caller.conversation), caller.wanted
            )
        except ToolError as exc:
            raise ToolError(f"{exc.state}: {exc}", state=exc.state, **exc.details) from None

        def cancel(task: Any) -> None:
            if task.status == tasks_extension.WORKING:
                task.cancel()

        self._on_task(task_id, caller, cancel)

    def _on_task(self, task_id: str, caller: Caller, act: Callable[[Any], Any]) -> Any:
        validate(TASK_ID, {"task_id": task_id})  # as the task tools take it: an id over 64 characters is never one

        def job() -> Any:
            self._execution.tasks.forget_old()
            try:
                task = self._execution.tasks.task(task_id)
            except ToolError as exc:
                raise UnknownTask(str(exc)) from None
            return act(task)

        return self._execution.dispatcher.call(job, self._execution.job_timeout, caller)

    def list_resources(self) -> list[dict[str, Any]]:
        return resources.listed(self._execution.tasks.ids())

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
            outcome = _run_tool(tool, arguments, self._execution.job(None))
        except ToolError as exc:
            return ToolOutcome.error(str(exc), state=exc.state, **exc.details)
        assert not isinstance(outcome, Deferred), "the panel's tools answer at once"
        return outcome


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
    told = Told()
    try:
        with recorded_step(job, tool.name, tool.title, tool.records_step, told):
            data = tool.run(arguments, job)
    except ToolError as exc:
        told.into(exc.details)
        if "changes" in exc.details and tool.records_step:
            raise ToolError(_changes_stand(exc, exc.details["changes"]), state=exc.state, **exc.details) from exc
        raise
    except Exception as exc:
        details: dict[str, Any] = {}
        told.into(details)
        failed = ToolError(f"{tool.name} failed: {type(exc).__name__}: {exc}", state="tool_failed")
        message = (
            _changes_stand(failed, details["changes"]) if "changes" in details and tool.records_step else str(failed)
        )
        return ToolOutcome.error(message, state="tool_failed", **details)
    if isinstance(data, Deferred):
        return data
    if isinstance(data, dict) and "changes" not in data:
        told.into(data)
    return _present(tool, data)


_CODE_LINE = re.compile(rf'File "{re.escape(FILENAME)}", line (\d+)')


def _changes_stand(failure: ToolError, changes: dict[str, Any]) -> str:
    """A failed call's message when the call changed the scene before it failed: a model that reads only the error
    must not think nothing happened (and try again on top of it)."""
    lines = _CODE_LINE.findall(str(failure))
    ran = (
        f"The code ran until line {lines[-1]}"
        if lines
        else "The code ran"
        if failure.state == "execution_error"
        else "The call ran"
    )
    return (
        f"{failure}\n{ran} and changed the scene before it failed ({changes['said']}); those changes stand and are "
        "one step you can take back with undo_agent_steps."
    )


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
