"""`hermes-blender status` against real bridges, with a stated PATH, HOME and Hermes home."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from hermes_blender.headless import HeadlessBlender
from tests.conftest import PLUGIN_ROOT
from tests.other_user import Impostor, OtherUser, needs_a_made_user


@dataclass
class Machine:
    home: Path
    plugin: Path
    env: dict[str, str]

    @property
    def runtime_file(self) -> Path:
        return self.home / "AppData" / "Local" / "Blender" / "server.json"

    def status(self, *extra: str) -> tuple[int, Any, str]:
        run = subprocess.run(
            [sys.executable, "-m", "hermes_blender.cli", "status", "--plugin-dir", str(self.plugin), *extra],
            capture_output=True,
            text=True,
            env=self.env,
            timeout=120,
        )
        payload = json.loads(run.stdout) if "--json" in extra else run.stdout
        return run.returncode, payload, run.stderr

    def point_blender_lab_at(self, port: int) -> None:
        mcp = json.loads((self.plugin / "mcp.json").read_text())
        mcp["mcpServers"]["blender_lab"]["env"]["BLENDER_MCP_PORT"] = str(port)
        (self.plugin / "mcp.json").write_text(json.dumps(mcp))


@pytest.fixture
def machine(tmp_path: Path) -> Machine:
    home = tmp_path / "home"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(parents=True)
    fake = bin_dir / "blender"
    fake.write_text("#!/bin/sh\necho 'Blender 5.1.2'\necho 'build date: 2026-01-01'\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    plugin = tmp_path / "plugin"
    plugin.mkdir()
    for name in ("plugin.json", "mcp.json"):
        (plugin / name).write_text((PLUGIN_ROOT / name).read_text())
    env = {
        **os.environ,
        "HOME": str(home),
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "HERMES_HOME": str(home / ".hermes"),
    }
    return Machine(home, plugin, env)


@pytest.fixture
def running(machine: Machine) -> Iterator[HeadlessBlender]:
    with HeadlessBlender(machine.runtime_file, lab_port=0) as blender:
        machine.point_blender_lab_at(int(json.loads(machine.runtime_file.read_text())["lab"].rsplit(":", 1)[1]))
        yield blender


def _states(payload: dict[str, Any]) -> dict[str, str]:
    return {server["server"]: server["state"] for server in payload["servers"]}


def test_status_reports_ready_against_a_live_bridge(machine: Machine, running: HeadlessBlender) -> None:
    code, payload, _ = machine.status("--json")
    assert code == 0 and payload["ready"] is True
    assert _states(payload) == {"blender": "ready", "blender_lab": "ready"}
    checks = {c["name"]: c for c in payload["servers"][0]["checks"]}
    assert checks["version"]["ok"] is True and checks["version"]["detail"].startswith(
        "5.1.2; needs 4.5 or newer (from --version"
    )
    assert checks["MCP round trip"]["ok"] is True and checks["runtime file"]["ok"] is True
    assert checks["agent mode"]["detail"].startswith("full: every tool works")  # what the person lets agents do
    token = json.loads(machine.runtime_file.read_text())["token"]
    code, text, _ = machine.status()
    assert code == 0 and text.rstrip().endswith("ready") and token not in text and token not in json.dumps(payload)


def test_status_tells_the_agent_mode_the_person_chose(machine: Machine) -> None:
    with HeadlessBlender(machine.runtime_file, mode="read-only"):
        code, payload, _ = machine.status("--json")
        _, text, _ = machine.status()
    checks = {c["name"]: c for c in payload["servers"][0]["checks"]}
    assert code == 0 and checks["agent mode"]["detail"].startswith("read-only: the person at Blender lets you look")
    assert "read-only: the person at Blender" in text


def test_killed_bridge_is_app_not_running_with_its_action(machine: Machine, running: HeadlessBlender) -> None:
    os.kill(running.pid, signal.SIGKILL)
    running.stop()
    code, payload, _ = machine.status("--json")
    assert code == 3 and _states(payload) == {"blender": "app_not_running", "blender_lab": "app_not_running"}
    assert payload["servers"][0]["user_action"] == "Start Blender, then try again."
    assert payload["servers"][0]["retry"] == "after_user_action"


def test_corrupt_runtime_file_is_endpoint_unavailable(machine: Machine, running: HeadlessBlender) -> None:
    record = json.loads(machine.runtime_file.read_text())
    machine.runtime_file.write_text(json.dumps({**record, "http": "https://example.com:443"}))
    code, payload, _ = machine.status("--json", "--server", "blender")
    assert code == 3 and _states(payload) == {"blender": "endpoint_unavailable"}
    assert payload["servers"][0]["user_action"] == "Open Blender and enable its local connection, then try again."


def test_no_blender_on_path_is_missing_app(machine: Machine) -> None:
    empty = machine.home / "empty-bin"
    empty.mkdir(parents=True)
    machine.env["PATH"] = str(empty)
    code, payload, _ = machine.status("--json")
    assert code == 3 and set(_states(payload).values()) == {"missing_app"}
    assert payload["servers"][0]["error"] == "Blender is not installed. Install Blender, then try again."


def test_no_connect_stops_at_local_checks_like_hermes(machine: Machine, running: HeadlessBlender) -> None:
    code, payload, _ = machine.status("--json", "--no-connect")
    assert code == 3 and _states(payload) == {"blender": "hermes_not_connected", "blender_lab": "hermes_not_connected"}


def test_a_too_old_blender_on_linux_fails_the_version_row_and_asks_for_an_update(machine: Machine) -> None:
    (Path(machine.env["PATH"].split(os.pathsep)[0]) / "blender").write_text("#!/bin/sh\necho 'Blender 3.4.1'\n")
    code, payload, _ = machine.status("--json", "--server", "blender", "--no-connect")
    [server] = payload["servers"]
    checks = {c["name"]: c for c in server["checks"]}
    assert code == 3 and server["state"] == "version_too_old" and checks["version"]["ok"] is False
    assert server["user_action"].startswith("Update Blender")
    assert (
        server["error"]
        == "Blender version 3.4.1 is too old; version 4.5 or newer is required. Update Blender, then try again."
    )
    assert any("will report 'app_not_running'" in warning for warning in server["warnings"])


def test_our_own_installed_copy_is_not_a_duplicate(machine: Machine) -> None:
    installed = machine.home / ".hermes" / "plugins" / "blender-bridge"
    installed.mkdir(parents=True)
    for name in ("plugin.json", "mcp.json"):
        (installed / name).write_text((PLUGIN_ROOT / name).read_text())
    _, payload, _ = machine.status("--json", "--no-connect")
    assert payload["warnings"] == []


def test_another_plugin_with_a_blender_server_is_a_warning(machine: Machine) -> None:
    official = machine.home / ".hermes" / "plugins" / "blender"
    official.mkdir(parents=True)
    (official / "mcp.json").write_text(json.dumps({"mcpServers": {"blender": {"type": "stdio", "command": "uv"}}}))
    _, payload, _ = machine.status("--json")
    assert any("also defines server 'blender'" in warning for warning in payload["warnings"])


def test_lab_listener_on_another_port_than_mcp_json_names_is_explained(
    machine: Machine, running: HeadlessBlender
) -> None:
    machine.point_blender_lab_at(1)
    code, payload, _ = machine.status("--json", "--server", "blender_lab")
    assert code == 3 and _states(payload) == {"blender_lab": "endpoint_unavailable"}
    checks = {c["name"]: c for c in payload["servers"][0]["checks"]}
    assert "connects to port 1" in checks["MCP round trip"]["detail"]


def test_a_blender_older_than_5_1_serves_blender_but_not_blender_lab(machine: Machine) -> None:
    (Path(machine.env["PATH"].split(os.pathsep)[0]) / "blender").write_text("#!/bin/sh\necho 'Blender 4.5.15 LTS'\n")
    code, payload, _ = machine.status("--json", "--no-connect")
    states = _states(payload)
    assert code == 3 and states == {"blender": "app_not_running", "blender_lab": "version_too_old"}
    assert payload["warnings"] == [
        "Blender 4.5.15 serves 'blender', but is too old for 'blender_lab' (needs 5.1 or newer)"
    ]


def test_blender_lab_with_the_listener_off_says_how_to_turn_it_on(machine: Machine) -> None:
    with HeadlessBlender(machine.runtime_file):  # the default: no Blender Lab listener
        code, payload, _ = machine.status("--json", "--server", "blender_lab")
    checks = {c["name"]: c for c in payload["servers"][0]["checks"]}
    assert code == 3 and _states(payload) == {"blender_lab": "endpoint_unavailable"}
    assert "Blender Lab listener is off" in checks["MCP round trip"]["detail"]
    assert "Hermes Bridge > Blender Lab listener" in checks["MCP round trip"]["detail"]


def test_status_with_the_opt_in_lab_listener_off_is_ready_and_says_how_to_turn_it_on(machine: Machine) -> None:
    """The default preferences: `blender` serves, the Blender Lab listener is off. Off is not a failure."""
    with HeadlessBlender(machine.runtime_file):
        code, payload, _ = machine.status("--json")
        text_code, text, _ = machine.status()
    assert code == text_code == 0 and payload["ready"] is True
    blender, lab = payload["servers"]
    assert (blender["state"], blender["off"], lab["off"]) == ("ready", False, True)
    checks = {c["name"]: c for c in lab["checks"]}
    assert (
        checks["MCP round trip"]["ok"] is None and "Blender Lab listener is off" in checks["MCP round trip"]["detail"]
    )
    assert "blender_lab: off (opt-in: not a failure)" in text.splitlines()
    assert "Hermes Bridge > Blender Lab listener" in text and "hermes-blender serve --lab-port 9876" in text
    assert text.rstrip().endswith("\nready")


def test_status_without_a_blender_app_names_the_blender_that_serves_and_why_hermes_will_refuse_it(
    machine: Machine,
) -> None:
    """`hermes-blender serve` runs (bpy), and no `blender` executable is anywhere Hermes looks."""
    empty = machine.home / "empty-bin"
    empty.mkdir(parents=True)
    machine.env["PATH"] = str(empty)
    with HeadlessBlender(machine.runtime_file) as serving:
        code, text, _ = machine.status("--server", "blender")
        _, payload, _ = machine.status("--json", "--server", "blender")
        assert serving.endpoint is not None and f"pid {serving.pid} at {serving.endpoint.url}" in text
        url, pid, token = serving.endpoint.url, serving.pid, serving.endpoint.token.reveal()
    assert code == 3 and _states(payload) == {"blender": "missing_app"}  # what Hermes will say, as before
    lines = text.splitlines()
    assert lines[0] == f"the bridge at {url} serves (Blender pid {pid}): `call` and `mcp` work"
    assert lines[1].startswith("for Hermes") and lines[-1] == "not ready for Hermes"  # what works first, then why not
    assert payload["serving"] == [{"pid": pid, "url": url, "works": True, "problem": None}]
    assert "Hermes first looks for the Blender app" in text and "a `blender` executable on PATH" in text
    assert "serving" in {c["name"] for c in payload["servers"][0]["checks"]}
    assert token not in text


def test_a_hostile_field_in_the_runtime_file_cannot_forge_status_lines(
    machine: Machine, running: HeadlessBlender
) -> None:
    record = json.loads(machine.runtime_file.read_text())
    record.pop("lab", None)
    record["lab_error"] = "\x1b]0;owned\x07\x1b[2J\nready\u202eydaer"
    machine.runtime_file.write_text(json.dumps(record))
    code, text, _ = machine.status("--server", "blender_lab")
    assert code == 3 and "\x1b" not in text and "\x07" not in text
    assert text.splitlines().count("ready") == 0 and text.rstrip().endswith("not ready for Hermes")
    assert "\\x1b]0;owned\\x07\\x1b[2J\\x0aready\\u202eydaer" in text and "\u202e" not in text


@pytest.mark.parametrize("impostor", ["a live process that is not Blender", "pid 1"])
def test_status_never_calls_a_file_naming_the_wrong_process_ready(
    machine: Machine, running: HeadlessBlender, impostor: str
) -> None:
    """The endpoint and token still answer; the file names a process that does not own them (stale or forged)."""
    stranger = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        record = json.loads(machine.runtime_file.read_text())
        record["pid"] = stranger.pid if impostor.startswith("a live") else 1
        machine.runtime_file.write_text(json.dumps(record))
        code, payload, _ = machine.status("--json", "--server", "blender")
    finally:
        stranger.kill()
        stranger.wait()
    checks = {c["name"]: c for c in payload["servers"][0]["checks"]}
    assert code == 3 and _states(payload) == {"blender": "endpoint_unavailable"}
    detail = checks["MCP round trip"]["detail"]
    assert checks["MCP round trip"]["ok"] is False and ("stale or forged" in detail or "another user" in detail)


@needs_a_made_user
def test_status_never_calls_another_users_process_named_blender_on_the_port_ready(
    machine: Machine, other_user: OtherUser, tmp_path: Path
) -> None:
    """A root bridge's stale file, and another user's `blender` script now holding its pid's place and its port."""
    impostor = Impostor(other_user)
    try:
        machine.runtime_file.parent.mkdir(parents=True, exist_ok=True)
        record = {"http": f"http://127.0.0.1:{impostor.port}", "token": "k" * 43, "pid": impostor.pid}
        machine.runtime_file.write_text(json.dumps(record))
        code, payload, _ = machine.status("--json", "--server", "blender")
    finally:
        received = impostor.received()
    checks = {c["name"]: c for c in payload["servers"][0]["checks"]}
    assert not received
    assert code == 3 and _states(payload) == {"blender": "endpoint_unavailable"}
    assert f"runs as uid {other_user.uid}" in checks["MCP round trip"]["detail"]


def test_status_never_calls_a_file_naming_another_blender_that_does_not_own_the_port_ready(
    machine: Machine, running: HeadlessBlender, tmp_path: Path
) -> None:
    """A Blender, but not the one listening there: only the process that owns the socket is the bridge."""
    with HeadlessBlender(tmp_path / "other.json") as other:
        record = json.loads(machine.runtime_file.read_text())
        record["pid"] = other_pid = other.pid
        machine.runtime_file.write_text(json.dumps(record))
        code, payload, _ = machine.status("--json", "--server", "blender")
    checks = {c["name"]: c for c in payload["servers"][0]["checks"]}
    assert code == 3 and _states(payload) == {"blender": "endpoint_unavailable"}
    port = record["http"].rsplit(":", 1)[1]
    assert f"pid {other_pid} does not listen on port {port}" in checks["MCP round trip"]["detail"]


def test_status_lists_every_serving_blender_and_marks_the_one_hermes_uses(machine: Machine) -> None:
    with HeadlessBlender(machine.runtime_file) as older, HeadlessBlender(machine.runtime_file) as newer:
        _, report, _ = machine.status("--json", "--no-connect")
        listed = [(instance["pid"], instance["current"]) for instance in report["instances"]]
        assert listed == [(newer.pid, True), (older.pid, False)]
        assert all("token" not in instance for instance in report["instances"])
        _, text, _ = machine.status("--no-connect")
        assert "2 Blenders are serving (`hermes-blender call --pid N` picks one):" in text
        assert f"pid {newer.pid}: Blender " in text and "<- server.json (Hermes uses this one)" in text
