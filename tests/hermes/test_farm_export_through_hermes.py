"""Through the real Hermes (its MCP client and the plugin's `blender` server, `hermes-blender mcp`), the agent exports
a render as a job bundle: the answer reaches Hermes whole, the bundle passes the real `openjd check`, and `farm run`
renders it off Blender. The same agent starts the run with the server's own `start_farm_run_task`, polls it and
cancels it, and no process of the run is left (e2e/test_farm_runs.py drives the same tools with the official SDK's
client).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from hermes_blender.farm import openjd_command
from hermes_blender.headless import HeadlessBlender
from scripts.harness import blender_launcher
from scripts.harness.hermes import HermesHost
from tests.moving_cube import moving_cube

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX host layout and signals")


def test_through_real_hermes_the_agent_exports_a_bundle_that_openjd_checks_and_farm_run_renders(
    hermes: HermesHost, tmp_path: Path
) -> None:
    hermes.install_blender()
    session = hermes.start()
    session.ask("discover")
    for folder in ("project", "frames"):
        (tmp_path / folder).mkdir()
    export = {
        "bundle_folder": str(tmp_path / "bundle"),
        "output_folder": str(tmp_path / "frames"),
        "frames": "1-2",
        "use_unsaved_changes": True,  # the call that saved is an undo step, which Blender counts as a change
    }
    with HeadlessBlender(hermes.runtime_file):
        session.ask(
            "call execute_blender_code " + json.dumps({"code": moving_cube(str(tmp_path / "project" / "x.blend"))})
        )
        answer = session.ask("call export_render_job " + json.dumps(export))
    exported = json.loads(json.loads(answer["received"])["result"])
    assert exported["status"] == "ok" and exported["frame_count"] == 2 and exported["run_here"].endswith("bundle")
    checked = subprocess.run(
        [*openjd_command(), "check", str(tmp_path / "bundle" / "template.yaml")],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    blender = blender_launcher.install(tmp_path)
    ran = subprocess.run(
        [
            str(Path(sys.executable).parent / "hermes-blender"),
            "farm",
            "run",
            str(tmp_path / "bundle"),
            "--blender",
            str(blender),
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    outcome = json.loads(ran.stdout.splitlines()[-1])
    assert outcome["status"] == "completed" and len(outcome["frames_written"]) == 2, ran.stderr


def _result(answer: dict[str, Any]) -> dict[str, Any]:
    """What the model received: a tool's JSON, or the error Hermes reports (with the server's state in it)."""
    received = json.loads(answer["received"])
    return json.loads(received["result"]) if "result" in received else received


def _run_of(bundle: Path) -> list[psutil.Process]:
    """The processes whose command line names the bundle (openjd run of its template, the job's Blender)."""
    found = []
    for process in psutil.process_iter(["cmdline"]):
        if any(str(bundle) in part for part in process.info["cmdline"] or ()):
            found.append(process)
    return found


def test_through_real_hermes_the_agent_starts_polls_and_cancels_a_farm_run(hermes: HermesHost, tmp_path: Path) -> None:
    hermes.install_blender()  # the `blender` on the server's PATH, which the run renders with
    session = hermes.start()
    tools = session.ask("discover")["tools"]
    assert {f"mcp__blender__{verb}_farm_run_task" for verb in ("start", "get", "cancel")} <= set(tools), tools
    for folder in ("project", "frames"):
        (tmp_path / folder).mkdir()
    bundle = tmp_path / "bundle"
    export = {"bundle_folder": str(bundle), "output_folder": str(tmp_path / "frames"), "chunk_size": 1}
    with HeadlessBlender(hermes.runtime_file):
        session.ask(
            "call execute_blender_code " + json.dumps({"code": moving_cube(str(tmp_path / "project" / "x.blend"))})
        )
        exported = _result(session.ask("call export_render_job " + json.dumps(export | {"use_unsaved_changes": True})))
        assert exported["status"] == "ok" and exported["tasks"] == 6, exported
        started = _result(session.ask("call start_farm_run_task " + json.dumps({"bundle_folder": str(bundle)})))
        assert started["status"] == "working", started
        task = json.dumps({"task_id": started["task_id"]})
        deadline = time.monotonic() + 300  # a bound on the wait for the first frame, not a measure
        while (polled := _result(session.ask(f"call get_farm_run_task {task}")))["frames_written_count"] == 0:
            assert polled["status"] == "working" and time.monotonic() < deadline, polled
            time.sleep(0.2)
        running = _run_of(bundle)
        assert running, "the run's processes name the bundle"
        cancelled = _result(session.ask(f"call cancel_farm_run_task {task}"))
    assert cancelled["status"] == "cancelled" and 1 <= cancelled["frames_written_count"] < 6, cancelled
    assert all(Path(frame).is_file() for frame in cancelled["frames_written"])
    assert sorted(os.listdir(tmp_path / "frames")) == sorted(Path(f).name for f in cancelled["frames_written"])
    left = [process for process in running if process.is_running() and process.status() != psutil.STATUS_ZOMBIE]
    assert left == [], [process.info["cmdline"] for process in left]
