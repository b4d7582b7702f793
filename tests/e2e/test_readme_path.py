"""The README's user path, command by command, on this machine (a headless Blender stands in for the GUI)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import REPO_ROOT

README = (REPO_ROOT / "README.md").read_text()
CLI = [sys.executable, "-m", "hermes_blender.cli"]


def test_the_readme_lists_the_commands_this_test_runs() -> None:
    for command in (
        "uv run hermes-blender demo",
        "uv run pytest",
        "uv run hermes-blender build-addon --output dist",
        "uv run hermes-blender install-addon --blender /path/to/blender",
        "python scripts/warm_uv.py",
        "hermes-blender status",
        "hermes-blender call get_objects_summary",
        "/reload-mcp",
        "hermes plugins install blender-bridge/blender-bridge/hermes_plugin",
        "subdir: hermes_plugin",
        "hermes plugins install",
        "blender --command extension install-file --repo user_default --enable",
    ):
        assert command in README, command


def test_following_the_readme_reaches_a_scene_answer(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "blender"
    fake.write_text("#!/bin/sh\necho 'Blender 5.1.2'\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    env = {
        **os.environ,
        "HOME": str(home),
        "BLENDER_USER_RESOURCES": str(home / "blender"),
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "HERMES_HOME": str(home / ".hermes"),
    }

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*CLI, *args], capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)

    built = run("build-addon", "--output", "dist")  # 1
    assert built.returncode == 0 and built.stdout.strip().endswith("hermes_bridge-0.1.0.zip"), built.stderr
    assert run("install-addon").returncode == 0  # 2
    blender = subprocess.Popen(
        [*CLI, "serve", "--no-lab"],
        env=env,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )  # "open Blender" (3, 4 need Hermes and git)
    runtime_file = home / "AppData" / "Local" / "Blender" / "server.json"
    try:
        deadline = time.monotonic() + 120
        while not runtime_file.exists() and time.monotonic() < deadline and blender.poll() is None:
            time.sleep(0.05)
        status = run("status", "--server", "blender")  # 5
        assert status.returncode == 0 and status.stdout.rstrip().endswith("ready"), status.stdout + status.stderr
        answer = run("call", "get_objects_summary")
        assert answer.returncode == 0 and "Cube (MESH) [active, selected]" in answer.stdout
        assert json.loads(runtime_file.read_text())["token"] not in status.stdout + answer.stdout + answer.stderr
    finally:
        blender.send_signal(2)
        blender.wait(60)
    assert not runtime_file.exists()
