"""What a tool is: a function of Blender state returning JSON-able data, with its contract."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

NO_ARGUMENTS: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": False}
READ_ONLY = {"readOnlyHint": True, "destructiveHint": False, "idempotentHint": True, "openWorldHint": False}


@dataclass(frozen=True)
class Tool:
    name: str
    title: str
    description: str
    run: Callable[[dict[str, Any]], dict[str, Any]]
    """Runs on Blender's main thread with validated arguments."""
    input_schema: dict[str, Any] = field(default_factory=lambda: dict(NO_ARGUMENTS))
    output_schema: dict[str, Any] | None = None
    annotations: dict[str, Any] = field(default_factory=lambda: dict(READ_ONLY))

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
            entry["outputSchema"] = self.output_schema
        return entry
