"""What the MCP methods do, whatever the era and the transport: the JSON-RPC codes, a tool's outcome,
and `McpProtocol`, whose methods the eras (`eras.py`) route requests to. The era only changes the
envelope, not the tools.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from ..errors import BridgeError, InvalidArguments, RpcError, UnknownResource, UnknownTask, UnknownTool
from ..jsontext import RawJson, dumps
from .caller import Caller
from .versions import SUPPORTED, TASKS_EXTENSION

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
HEADER_MISMATCH = -32020
MISSING_CLIENT_CAPABILITY = -32021
UNSUPPORTED_PROTOCOL_VERSION = -32022


@dataclass(frozen=True)
class ToolOutcome:
    """What one tool call produced, already in MCP terms."""

    content: list[dict[str, Any]]
    structured: RawJson | None = None
    """The data as JSON text, sent as structuredContent without a second encoding."""
    is_error: bool = False
    failure: dict[str, Any] | None = None
    """An error's payload (`state`, `error`, details), for a method that answers it as a JSON-RPC error."""
    input_required: dict[str, Any] | None = None
    """2026-07-28: what the client must ask its user before it calls again (`inputRequests`, `requestState`)."""

    @classmethod
    def json(cls, data: dict[str, Any]) -> ToolOutcome:
        text = dumps(data)
        return cls([{"type": "text", "text": text}], structured=RawJson(text))

    @classmethod
    def error(cls, message: str, **details: Any) -> ToolOutcome:
        payload = {"error": message, **{k: v for k, v in details.items() if v is not None}}
        return cls([{"type": "text", "text": dumps(payload)}], is_error=True, failure=payload)

    @classmethod
    def asking(cls, requests: dict[str, Any], state: str) -> ToolOutcome:
        """The call answered with questions for the client's user: it calls again with their answers."""
        return cls([], input_required={"inputRequests": requests, "requestState": state})

    def as_result(self) -> dict[str, Any]:
        if self.input_required is not None:
            return {"resultType": "input_required", **self.input_required}
        result: dict[str, Any] = {"content": self.content, "isError": self.is_error}
        if self.structured is not None:
            result["structuredContent"] = self.structured
        return result


CAPABILITIES: dict[str, Any] = {
    "tools": {"listChanged": False},
    "resources": {"subscribe": False, "listChanged": False},
    "prompts": {"listChanged": False},
}
"""The 2025 handshake's: resources are read, not subscribed to (that era's updates need its GET stream)."""
STATELESS_CAPABILITIES: dict[str, Any] = {
    **CAPABILITIES,
    "resources": {"subscribe": True, "listChanged": False},
    "extensions": {TASKS_EXTENSION: {}},
}
"""The stateless era's: `subscriptions/listen` delivers resource updates; the tasks extension (SEP-2663)."""


class ToolHost(Protocol):
    """What the protocol needs from the Blender side; implemented above this layer."""

    def list_tools(self) -> list[dict[str, Any]]: ...

    def call_tool(self, name: str, arguments: dict[str, Any], caller: Caller) -> ToolOutcome:
        """Run a tool for `caller` and report its outcome; raises UnknownTool for a name not offered."""
        ...

    def list_resources(self) -> list[dict[str, Any]]: ...

    def resource_templates(self) -> list[dict[str, Any]]: ...

    def read_resource(self, uri: str, caller: Caller) -> ToolOutcome:
        """Read a resource for `caller` (its tool's outcome); raises UnknownResource for a URI not served."""
        ...

    def list_prompts(self) -> list[dict[str, Any]]: ...

    def tasked(self, name: str) -> bool:
        """Whether a call of this tool becomes a task for a client that takes tasks."""
        ...

    def start_task(self, name: str, arguments: dict[str, Any], caller: Caller) -> ToolOutcome | dict[str, Any]:
        """The call as a task (the extension's `Task`), or the tool's own refusal."""
        ...

    def get_task(self, task_id: str, caller: Caller) -> dict[str, Any]:
        """The task's detailed state; raises UnknownTask."""
        ...

    def cancel_task(self, task_id: str, caller: Caller) -> None:
        """Stop a working task; raises UnknownTask."""
        ...

    def get_prompt(self, name: str, arguments: dict[str, str]) -> dict[str, Any]:
        """A prompt's messages; raises InvalidArguments for an unknown name or a missing argument."""
        ...


@dataclass(frozen=True)
class ServerInfo:
    """The server's name, version and instructions, as the handshake and discovery give them (the instructions as
    they are at that moment: they tell what the person at Blender lets the agent do now)."""

    name: str
    version: str
    instructions: Callable[[], str]


class McpProtocol:
    """The methods themselves: the server's description, the tool list, a tool call."""

    def __init__(self, tools: ToolHost, info: ServerInfo) -> None:
        self._tools = tools
        self._info = info

    def initialize(self, version: str) -> dict[str, Any]:
        """The 2025 handshake's answer, for the version the era agreed."""
        return {
            "protocolVersion": version,
            "capabilities": CAPABILITIES,
            "serverInfo": {"name": self._info.name, "version": self._info.version},
            "instructions": self._info.instructions(),
        }

    def discover(self) -> dict[str, Any]:
        return {
            "supportedVersions": list(SUPPORTED),
            "capabilities": STATELESS_CAPABILITIES,
            "serverInfo": {"name": self._info.name, "version": self._info.version},
            "instructions": self._info.instructions(),
        }

    def list_tools(self) -> dict[str, Any]:
        return {"tools": self._tools.list_tools()}

    def call_tool(self, params: dict[str, Any], caller: Caller, *, takes_tasks: bool = False) -> dict[str, Any]:
        """A tool's result; for a client that takes tasks (`takes_tasks`), a tasked tool's task handle instead."""
        name = params.get("name")
        arguments = params.get("arguments", {})
        if not isinstance(name, str) or not name:
            raise RpcError(INVALID_PARAMS, "tools/call needs a string 'name'")
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise RpcError(INVALID_PARAMS, "tools/call 'arguments' must be an object")
        if takes_tasks and self._tools.tasked(name):
            started = self._tools.start_task(name, arguments, caller)
            return {"resultType": "task", **started} if isinstance(started, dict) else started.as_result()
        try:
            outcome = self._tools.call_tool(name, arguments, caller)
        except UnknownTool as exc:
            raise RpcError(INVALID_PARAMS, str(exc)) from None
        return outcome.as_result()

    def get_task(self, params: dict[str, Any], caller: Caller) -> dict[str, Any]:
        return self._on_task(params, lambda task_id: self._tools.get_task(task_id, caller))

    def cancel_task(self, params: dict[str, Any], caller: Caller) -> dict[str, Any]:
        self._on_task(params, lambda task_id: self._tools.cancel_task(task_id, caller))
        return {}

    def update_task(self, params: dict[str, Any], caller: Caller) -> dict[str, Any]:
        """Acknowledged for a task this bridge keeps: its tasks never ask for input, so there is nothing to take."""
        self._on_task(params, lambda task_id: self._tools.get_task(task_id, caller))
        return {}

    @staticmethod
    def _on_task(params: dict[str, Any], act: Any) -> Any:
        task_id = params.get("taskId")
        if not isinstance(task_id, str) or not task_id:
            raise RpcError(INVALID_PARAMS, "tasks methods need a string 'taskId'")
        try:
            return act(task_id)
        except UnknownTask as exc:
            raise RpcError(INVALID_PARAMS, str(exc), {"taskId": task_id}) from None
        except InvalidArguments as exc:  # not an id this bridge could have given: not echoed
            raise RpcError(INVALID_PARAMS, str(exc)) from None
        except BridgeError as exc:  # Blender's main thread did not take it in time, or the bridge is stopping
            raise RpcError(INTERNAL_ERROR, str(exc), {"taskId": task_id}) from None

    def list_resources(self) -> dict[str, Any]:
        return {"resources": self._tools.list_resources()}

    def list_resource_templates(self) -> dict[str, Any]:
        return {"resourceTemplates": self._tools.resource_templates()}

    def read_resource(self, params: dict[str, Any], caller: Caller) -> dict[str, Any]:
        """The resource's JSON; a URI not served is -32602 with the URI in `data` (SEP-2164), and a read that failed
        is a JSON-RPC error carrying the tool's named state."""
        uri = params.get("uri")
        if not isinstance(uri, str) or not uri:
            raise RpcError(INVALID_PARAMS, "resources/read needs a string 'uri'")
        try:
            outcome = self._tools.read_resource(uri, caller)
        except UnknownResource as exc:
            raise RpcError(INVALID_PARAMS, str(exc), {"uri": uri}) from None
        if outcome.failure is not None:
            code = (
                INVALID_PARAMS if outcome.failure.get("state") in ("not_found", "invalid_arguments") else INTERNAL_ERROR
            )
            raise RpcError(code, str(outcome.failure["error"]), {"uri": uri, **outcome.failure})
        return {"contents": [{"uri": uri, "mimeType": "application/json", "text": str(outcome.structured)}]}

    def list_prompts(self) -> dict[str, Any]:
        return {"prompts": self._tools.list_prompts()}

    def get_prompt(self, params: dict[str, Any]) -> dict[str, Any]:
        name, arguments = params.get("name"), params.get("arguments") or {}
        if not isinstance(name, str) or not isinstance(arguments, dict):
            raise RpcError(INVALID_PARAMS, "prompts/get needs a string 'name' and an object 'arguments'")
        try:
            return self._tools.get_prompt(name, arguments)
        except InvalidArguments as exc:
            raise RpcError(INVALID_PARAMS, str(exc)) from None
