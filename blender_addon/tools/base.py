"""What a tool is: a function of Blender state returning JSON-able data, with its contract."""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .context import JobContext

NO_ARGUMENTS: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": False}


def arguments(**properties: dict[str, Any]) -> dict[str, Any]:
    """An input schema: these properties, no others; those without a default are required."""
    required = [name for name, schema in properties.items() if "default" not in schema]
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


CHANGES = {"type": "object", "description": "What the call changed in the scene (README > Change summaries)."}
TOOL_ERROR = {
    "type": "object",
    "title": "Tool error",
    "description": "A call that failed (isError): the named state, its sentence, and what else the state carries.",
    "properties": {"state": {"type": "string"}, "error": {"type": "string"}},
    "required": ["state", "error"],
}
"""Admitted by every output schema beside the answer's own shape, so a client that turns an error's JSON text into
structured content and checks it against the schema (Gemini CLI) hands its model the state, not a schema failure
(README > Decisions > Errors every client passes on)."""
READ_ONLY = {"readOnlyHint": True, "destructiveHint": False, "idempotentHint": True, "openWorldHint": False}
MUTATING = {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": False, "openWorldHint": False}
ADDITIVE = {"readOnlyHint": False, "destructiveHint": False, "idempotentHint": False, "openWorldHint": False}
"""Writes files of its own (a checkpoint, a job bundle) and changes nothing in the scene."""


class Image:
    """A PNG a tool produced (screenshots), with JSON facts about it."""

    __slots__ = ("png", "details")

    def __init__(self, png: bytes, details: dict[str, Any]) -> None:
        self.png = png
        self.details = details

    def base64(self) -> str:
        return base64.b64encode(self.png).decode("ascii")


class Pictured(dict[str, Any]):
    """JSON data with pictures beside it (execute_blender_code's `inspect`): the pictures go first as image
    content, the data as text and structured content, with `inspect` saying what each picture is."""

    def __init__(self, data: dict[str, Any], images: list[Image], before: Image | str, after: Image | str) -> None:
        told = {"before": _told(before), "after": _told(after)}
        super().__init__({**data, "inspect": told})
        self.images = images


def _told(picture: Image | str) -> Any:
    return picture.details if isinstance(picture, Image) else picture


class Tool:
    """One tool of the catalogue: what MCP lists of it, and the function a call runs as a job."""

    __slots__ = (
        "name",
        "title",
        "description",
        "run",
        "input_schema",
        "output_schema",
        "annotations",
        "runs_code",
        "time_limit",
        "records_step",
    )

    def __init__(
        self,
        name: str,
        title: str,
        description: str,
        run: Callable[[dict[str, Any], JobContext], Any],
        input_schema: dict[str, Any] | None = None,
        output_schema: dict[str, Any] | None = None,
        annotations: dict[str, Any] | None = None,
        runs_code: bool = False,
        time_limit: float | None = None,
        records_step: bool = True,
    ) -> None:
        self.name = name
        self.title = title
        self.description = description
        self.run = run
        """Runs on Blender's main thread with validated arguments, as a job: JSON-able data, an Image or a
        Deferred."""
        self.input_schema = input_schema if input_schema is not None else dict(NO_ARGUMENTS)
        self.output_schema = output_schema
        self.annotations = annotations if annotations is not None else dict(READ_ONLY)
        self.runs_code = runs_code
        """Executes agent-written Python: refused while the preference switches code execution off."""
        self.time_limit = time_limit
        """Seconds one call may run, for a tool whose work is longer than the bridge's job timeout (a frame
        range)."""
        self.records_step = records_step
        """A mutating call that changed the scene is one step of the agent's history; not the tools that move the
        history itself (undo, redo, restoring a checkpoint)."""

    @property
    def mutating(self) -> bool:
        """A tool that may change the scene: one named undo step per call in the GUI."""
        return not self.annotations.get("readOnlyHint", False)

    def descriptor(self) -> dict[str, Any]:
        """The tool as `tools/list` presents it."""
        entry: dict[str, Any] = {
            "name": self.name,
            "title": self.title,
            "description": self.description,
            "inputSchema": self.input_schema,
            "annotations": {"title": self.title, **self.annotations},
        }
        if self.output_schema is not None:
            answer = self.output_schema
            if self.mutating and "changes" not in answer["properties"]:
                answer = {**answer, "properties": {**answer["properties"], "changes": CHANGES}}
            entry["outputSchema"] = {"type": "object", "anyOf": [answer, TOOL_ERROR]}
        return entry


def _typed(kind: str | list[str]) -> dict[str, Any]:
    """One JSON type, or a choice of several as `anyOf` (no type arrays: clients with a one-type schema dialect,
    Gemini's among them, mishandle `["string", "null"]`)."""
    return {"type": kind} if isinstance(kind, str) else {"anyOf": [{"type": one} for one in kind]}


def shallow(*, required: tuple[str, ...] | None = None, **fields: str | list[str]) -> dict[str, Any]:
    """An output schema one level deep: each field's JSON type, all of them required unless `required` names some.

    The official MCP client checks every result against the schema on every call; a deep schema
    makes that check cost more than the call (9 ms on a 57-object scene), a shallow one almost nothing.
    """
    return {
        "type": "object",
        "properties": {name: _typed(kind) for name, kind in fields.items()},
        "required": list(fields if required is None else required),
    }
