"""The MCP conformance suite (0.2.0-alpha.12) against a live bridge, for the 2026-07-28 scenarios this bridge
must pass whole.

The suite takes only a URL, so a loopback forwarder adds the bearer token (`auth_proxy.py`); Host and Origin
reach the bridge as the suite sent them. Scenarios that need the suite's own test tools (`test_simple_text`,
elicitation, ...) are not run: they score the reference server's tools, not a protocol rule.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from hermes_blender.headless import HeadlessBlender
from tests.clients.auth_proxy import auth_proxy
from tests.clients.conftest import PINNED

WHOLE = [
    "caching",
    "tools-list",
    "resources-list",
    "sep-2164-resource-not-found",
    "prompts-list",
    "dns-rebinding-protection",
    "http-header-validation",
    "server-sse-multiple-streams",
]


TASKS = [
    "tasks-lifecycle",
    "tasks-capability-negotiation",
    "tasks-wire-fields",
    "tasks-request-state-removal",
    "tasks-mrtr-input",
    "tasks-request-headers",
    "tasks-dispatch-and-envelope",
    "tasks-status-notifications",
    "tasks-required-task-error",
    "tasks-mrtr-composition",
]
"""The tasks extension's scenarios (SEP-2663). Most checks call the suite's own fixture tools (`greet`,
`slow_compute`, `failing_job`, `confirm_delete`, ...), which a Blender bridge does not ship ("Unknown tool", or a
check that cannot run without the one before it); every other check must pass."""
FIXTURES = ("Unknown tool: '", "Not testable", "fixture", "failing_job")
LINUX_ONLY = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="Node.js 22 comes as the registry's Linux build"
)


def _checks(scenario: str, npm_install: Callable[[str], Path], folder: Path) -> tuple[list[dict], str]:
    """Every check the suite made of one scenario against a live bridge, and its output (for the failure text)."""
    suite = npm_install("conformance") / "node_modules" / ".bin" / "conformance"
    node = npm_install("node22") / "node_modules" / PINNED["node22"][0] / "bin"
    runtime_file = folder / "server.json"
    with HeadlessBlender(runtime_file):
        published = json.loads(runtime_file.read_text())
        port = int(published["http"].rsplit(":", 1)[1])
        with auth_proxy(port, published["token"]) as forwarder:
            url = f"http://127.0.0.1:{forwarder}/mcp"
            done = subprocess.run(
                [str(suite), "server", "--url", url, "--scenario", scenario, "-o", str(folder / "results")],
                env={**os.environ, "PATH": f"{node}{os.pathsep}{os.environ['PATH']}"},
                cwd=folder,
                capture_output=True,
                text=True,
                timeout=300,
            )
    checks = [check for path in (folder / "results").glob("*/checks.json") for check in json.loads(path.read_text())]
    return checks, done.stdout[-3000:]


@LINUX_ONLY
@pytest.mark.parametrize(
    ("scenario", "excused"), [(scenario, ()) for scenario in WHOLE] + [(scenario, FIXTURES) for scenario in TASKS]
)
def test_the_conformance_suite_passes_every_check_the_bridge_can_be_asked(
    scenario: str, excused: tuple[str, ...], npm_install: Callable[[str], Path], tmp_path: Path
) -> None:
    """WHOLE: every check passes. TASKS: every check that does not call the suite's own fixture tools passes."""
    checks, output = _checks(scenario, npm_install, tmp_path)
    failed = [
        check
        for check in checks
        if check["status"] not in ("SUCCESS", "INFO", "SKIPPED")
        and not any(word in (check.get("errorMessage") or "") for word in excused)
    ]
    assert checks and not failed, (failed, output)
