"""execute_blender_code: the Lab execution contract, with honest errors and one undo step."""

from __future__ import annotations

import json
from typing import Any

from mathutils import Vector

from ..errors import ToolError
from .base import MUTATING, Image, Pictured, Tool, arguments
from .context import JobContext
from .montage import montage
from .python_exec import Deferred, Envelope, execute

CODE_SCHEMA = arguments(
    code={
        "type": "string",
        "minLength": 1,
        "maxLength": 1_000_000,
        "description": "Python to run in Blender; assign a dict to `result` to return data.",
    },
    inspect={
        "type": "boolean",
        "default": False,
        "description": "Also answer two pictures of the scene's visible geometry (front, top), before and after "
        "the code ran (the after one framed to hold the before one's bounds too): look at what the call did.",
    },
)


def run_code(arguments: dict[str, Any], job: JobContext) -> dict[str, Any] | Deferred:
    before = _look(job) if arguments.get("inspect") else None
    outcome = execute(arguments["code"], job, strict_json=False, preload_bpy=True)
    if isinstance(outcome, Deferred):
        inner = outcome
        return Deferred(lambda: _answer(answer) if (answer := inner.poll()) is not None else None)
    answer = _answer(outcome)
    if before is None:
        return answer
    after = _look(job, also=before) if isinstance(before, Image) else _look(job)
    return Pictured(answer, [picture for picture in (before, after) if isinstance(picture, Image)], before, after)


INSPECTED = {"views": ["front", "top"], "tile_size": 192}
"""The pictures `inspect` answers: two views, small, so a pair costs a model little."""


def _look(job: JobContext, also: Image | None = None) -> Image | str:
    """A montage for `inspect`; the after picture's frame also holds what the before picture framed, so what moved
    shows where it went. A sentence when there is no picture (nothing visible)."""
    bounds = None
    if also is not None:
        box = also.details["bounds"]
        bounds = (Vector(box["min"]), Vector(box["max"]))
    try:
        return montage(INSPECTED, job, also=bounds)
    except Exception as exc:  # the code ran: a picture that cannot be made never costs its answer
        return f"no picture: {exc}"


OUTPUT_BUDGET = 10_000
"""Characters of printed output kept per stream: the end of it, where the last lines and tracebacks are. Code that
prints every object of a big scene would otherwise send a model more than it can read (the Lab wire, whose
clients are programs, keeps everything)."""


def _answer(envelope: Envelope) -> dict[str, Any]:
    """An ok envelope becomes data; an error becomes a tool error carrying the output so far."""
    output: dict[str, Any] = {}
    for key in ("stdout", "stderr"):
        if key in envelope:
            text = envelope[key]
            if len(text) > OUTPUT_BUDGET:
                text = f"[... {len(text) - OUTPUT_BUDGET} earlier characters cut ...]\n" + text[-OUTPUT_BUDGET:]
                output["output_cut"] = True
            output[key] = text
    if envelope["status"] != "ok":
        hint = {"hint": envelope["hint"]} if "hint" in envelope else {}
        raise ToolError(envelope["message"], state="execution_error", **hint, **output)
    return {"result": json.loads(envelope["result"]), **output}


EXECUTE_RESULT = {
    "type": "object",
    "properties": {
        "result": {"type": "object"},
        "stdout": {"type": "string"},
        "stderr": {"type": "string"},
        "output_cut": {"type": "boolean"},
        "inspect": {"type": "object", "description": "What the before and after pictures are (with `inspect`)."},
    },
    "required": ["result"],
}

EXECUTE_BLENDER_CODE = Tool(
    name="execute_blender_code",
    title="Run Python in Blender",
    description=(
        "Run Python inside Blender (bpy is imported) and return the dict assigned to `result`, plus printed output "
        f"(the last {OUTPUT_BUDGET} characters of each stream; output_cut says when more was printed). "
        "Errors come back as tool errors with the traceback. In the interactive Blender each call is one undo step. "
        "Long work may call progress(fraction, message), e.g. progress(0.4, 'baking'): a client that asked for "
        "progress hears it. "
        "This is not a sandbox: the code can do anything the user can. Read the scene first; change little at a time."
    ),
    run=run_code,
    input_schema=CODE_SCHEMA,
    output_schema=EXECUTE_RESULT,
    annotations=dict(MUTATING),
    runs_code=True,
)
