"""How long the toolkit waits for the bridge: a tool's own limit inside Blender, and how long it may stay silent.

The catalogue a bridge lists (tools/list, `catalogue.json`) carries no time limit: MCP has no field for one. So
the limits the add-on enforces are mirrored here, each held equal to the add-on's by a test
(tests/agent/test_transport.py): a tool call's answer comes within its job's deadline (which counts from the
moment Blender queued it), and Blender's main thread may need that long again for another client's job first.
"""

from __future__ import annotations

from typing import Any

JOB_LIMIT = 120.0
"""Seconds the bridge lets one request's job take, queue included (the add-on's JOB_TIMEOUT)."""
DEFERRED_LIMIT = 600.0
"""Seconds more a script's deferred result (`check_is_finished`) may take (the add-on's DEFERRED_LIMIT)."""
LONG_WORK = {
    "render_frames_to_folder": 3600.0,  # the add-on's FRAMES_TIME_LIMIT: a frame range, up to an hour
    "execute_blender_code": JOB_LIMIT + DEFERRED_LIMIT,
}
"""Tools whose work may run longer than JOB_LIMIT, and how long (the add-on's `time_limit`, or a deferred result)."""
MARGIN = 30.0
"""For the bridge's own answer at a deadline (an interrupt's grace, `still_running` a second later) to arrive."""
SILENCE = JOB_LIMIT + MARGIN
"""Seconds an answer may stay silent between two bytes. While a job runs, a streamed answer hears a heartbeat every
second; but a background Blender serves one job at a time, so a request behind another client's job hears nothing
until that job ends (up to JOB_LIMIT)."""


def limit_of(method: str, params: dict[str, Any]) -> float:
    """Seconds a whole request may take: its tool's own limit (JOB_LIMIT for anything else), plus MARGIN."""
    tool = params.get("name") if method == "tools/call" else None
    return LONG_WORK.get(tool if isinstance(tool, str) else "", JOB_LIMIT) + MARGIN
