"""`hermes-blender mcp` answers `initialize` having loaded what that answer needs: the SDK and its own front.

A client waits for that answer (Gemini CLI 5 s by default, on a loaded machine the SDK's import alone takes most
of a second); what only a call or another command needs (the way to Blender: the contract's parsers, psutil for the
pid checks, the HTTP transport; the checks' YAML, the headless runner, the CLI's client, the `connect` command's
client table) loads later, never before the handshake (docs/performance.md, cold start).
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys

import pytest

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "test", "version": "0"}},
}
NOT_BEFORE_A_CALL = (
    "hermes_blender.stdio_calls",
    "hermes_blender.contract.liveness",
    "hermes_blender.contract.host",
    "hermes_blender.contract.declaration",
    "hermes_blender.contract.status",
    "hermes_blender.instances",
    "hermes_blender.transport",
    "psutil",
    "yaml",
    "hermes_blender.headless",
    "hermes_blender.checks",
    "hermes_blender.client",
    "hermes_blender.client_configs",
)


@pytest.mark.timeout(60)
def test_answering_initialize_loads_nothing_only_a_call_needs() -> None:
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    run = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "hermes_blender.cli", "mcp"],
        input=json.dumps(INITIALIZE) + "\n",
        capture_output=True,
        text=True,
        env=env,
        timeout=50,
    )
    answer = json.loads(run.stdout.splitlines()[0])
    assert answer["result"]["serverInfo"]["name"] and answer["id"] == 1
    loaded = {line.rsplit("|", 1)[-1].strip() for line in run.stderr.splitlines() if line.startswith("import time:")}
    assert "hermes_blender.stdio_server" in loaded  # the listing is read right
    assert [name for name in NOT_BEFORE_A_CALL if name in loaded] == []


@pytest.mark.timeout(30)
@pytest.mark.parametrize("on_before", [True, False])
def test_the_collector_paused_for_the_sdks_import_is_as_it_was_after_it_even_when_the_import_fails(
    on_before: bool,
) -> None:
    """A relay left without its cycle collector would grow for as long as its client keeps it."""
    from hermes_blender.collector import paused_then_frozen

    (gc.enable if on_before else gc.disable)()
    try:
        with pytest.raises(ImportError), paused_then_frozen():
            assert not gc.isenabled()
            raise ImportError("a broken install")
        assert gc.isenabled() is on_before
    finally:
        gc.unfreeze()
        gc.enable()
