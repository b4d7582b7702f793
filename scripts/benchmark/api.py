"""What a look-up of Blender's own API costs (`lookup_blender_api`, issue 57) beside the agent reading the same RNA
in its own code, and what a successful code call costs now that a failure may carry a hint: one headless Blender,
keep-alive HTTP, each row alternating call by call with its floor."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hermes_blender.client import modern_request
from hermes_blender.headless import HeadlessBlender

from .measure import KeepAlive, paired

LOOKUP_ROW = "lookup_blender_api Object.location (floor: the same RNA read by execute_blender_code)"
SUCCESS_ROW = "a successful execute_blender_code (floor: get_agent_history, the smallest read)"
DIRECT = (
    "import bpy\np = bpy.types.Object.bl_rna.properties['location']\n"
    "result = {'name': p.identifier, 'type': p.type, 'description': p.description, 'array': p.array_length}"
)


def api_table(n: int) -> dict[str, Any]:
    """`--api-only`: both rows, each alternated call by call with its floor on one kept connection."""
    with tempfile.TemporaryDirectory() as folder, HeadlessBlender(Path(folder) / "server.json") as blender:
        endpoint = blender.endpoint
        assert endpoint is not None
        link = KeepAlive(endpoint.port, endpoint.headers())

        def calling(name: str, arguments: dict[str, Any]) -> Callable[[], bytes]:
            body, headers = modern_request("tools/call", {"name": name, "arguments": arguments})
            return lambda: link.post("/mcp", body, headers)

        lookup = paired(
            calling("execute_blender_code", {"code": DIRECT}),
            calling("lookup_blender_api", {"query": "bpy.types.Object.location"}),
            n,
        )
        success = paired(calling("get_agent_history", {}), calling("execute_blender_code", {"code": "result = 1"}), n)
    return {LOOKUP_ROW: lookup, SUCCESS_ROW: success}


def api_lines(report: dict[str, Any]) -> list[str]:
    lines = []
    for row, (floor, path) in report.items():
        lines.append(
            f"{row}: p50 {path['p50']:.3f} ms beside {floor['p50']:.3f} ms = {path['p50'] / floor['p50']:.2f}x "
            f"(p95 {path['p95']:.3f} / {floor['p95']:.3f}), n={path['n']}"
        )
    return lines
