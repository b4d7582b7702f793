"""The agent's mode's cost in `full` mode (docs/modes.md): the consent check beside a bare call, in process, and a
no-op tool call over keep-alive HTTP on a full-mode bridge, so the check's share of a call is read off one run."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from blender_addon.agent_mode import AgentMode
from blender_addon.consent import Call, Consent
from hermes_blender.client import modern_request
from hermes_blender.headless import HeadlessBlender

from .measure import KeepAlive, paired, timed

CHECK_ROW = "consent check in full mode, in process (floor: a bare Python call)"
CALL_ROW = "no-op execute_blender_code, keep-alive HTTP, full mode"


def modes_table(n: int) -> dict[str, Any]:
    """`--modes-only`: the check in process beside a bare call, then the call over HTTP on a full-mode bridge."""
    consent = Consent(AgentMode.FULL, person=False)
    call = Call("execute_blender_code", "Run Python in Blender", {"code": "result = 1"}, "named:bench")

    def nothing() -> None:
        return None

    floor, check = paired(nothing, lambda: consent.check(call, bool), n * 50)
    with tempfile.TemporaryDirectory() as folder, HeadlessBlender(Path(folder) / "server.json") as blender:
        endpoint = blender.endpoint
        assert endpoint is not None
        body, headers = modern_request(
            "tools/call", {"name": "execute_blender_code", "arguments": {"code": "result = 1"}}
        )
        link = KeepAlive(endpoint.port, endpoint.headers())
        path = "/mcp"
        called = timed(lambda: link.post(path, body, headers), n)
    return {CHECK_ROW: {"floor": floor, "path": check}, CALL_ROW: called}


def modes_lines(report: dict[str, Any]) -> list[str]:
    floor, check = report[CHECK_ROW]["floor"], report[CHECK_ROW]["path"]
    called = report[CALL_ROW]
    extra_us = (check["p50"] - floor["p50"]) * 1000
    return [
        f"{CHECK_ROW}: p50 {check['p50'] * 1e6:.0f} ns (floor {floor['p50'] * 1e6:.0f} ns), n={check['n']}",
        f"{CALL_ROW}: p50 {called['p50']:.3f} ms, p95 {called['p95']:.3f} ms, n={called['n']}",
        f"the check's share of that call: {extra_us / (called['p50'] * 1000):.4%} ({extra_us:.3f} us of {called['p50']:.3f} ms)",
    ]
