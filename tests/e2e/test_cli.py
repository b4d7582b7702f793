"""The README's commands, run as a person runs them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from hermes_blender.headless import HeadlessBlender

CLI = [sys.executable, "-m", "hermes_blender.cli"]


def test_demo_prints_the_factory_scene_and_cleans_up() -> None:
    run = subprocess.run([*CLI, "demo"], capture_output=True, text=True, timeout=180)
    assert run.returncode == 0, run.stderr
    assert "Scene 'Scene': 3 objects" in run.stdout
    for name in ("Camera (CAMERA)", "Cube (MESH) [active, selected]", "Light (LIGHT)"):
        assert name in run.stdout
    assert "runtime file removed" in run.stderr


def test_demo_json_is_machine_readable() -> None:
    run = subprocess.run([*CLI, "demo", "--json"], capture_output=True, text=True, timeout=180)
    assert run.returncode == 0, run.stderr
    payload = json.loads(run.stdout)
    assert payload["is_error"] is False and payload["result"]["active_object"] == "Cube"


def test_call_reads_the_runtime_file_and_never_prints_the_token(tmp_path: Path) -> None:
    path = tmp_path / "server.json"
    with HeadlessBlender(path) as blender:
        token = json.loads(path.read_text())["token"]
        run = subprocess.run(
            [*CLI, "call", "get_objects_summary", "--runtime-file", str(path), "--json"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert blender.pid
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["result"]["scene_name"] == "Scene"
    assert token not in run.stdout + run.stderr


def test_call_without_blender_names_the_state_and_exits_3(tmp_path: Path) -> None:
    run = subprocess.run(
        [*CLI, "call", "get_objects_summary", "--runtime-file", str(tmp_path / "none.json")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 3
    assert "[app_not_running]" in run.stderr and "no runtime file" in run.stderr
