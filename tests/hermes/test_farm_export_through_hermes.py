"""Through the real Hermes (its MCP client, the plugin's direct `blender` server), the agent exports a render as a job
bundle: the answer reaches Hermes whole, the bundle passes the real `openjd check`, and `farm run` renders it off
Blender. The run's start, poll and cancel are `hermes-blender mcp`'s tools, which Hermes's direct server does not
list (e2e/test_farm_runs.py drives them with the official SDK's client)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from hermes_blender.farm import openjd_command
from hermes_blender.headless import HeadlessBlender
from tests import blender_launcher
from tests.hermes.conftest import HermesHost
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
