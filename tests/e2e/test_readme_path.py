"""The README's user path on this machine (a headless Blender stands in for the GUI).

The toolkit commands are taken from the README's own lines and run through `python -m
hermes_blender.cli` (what `uv run hermes-blender` starts); steps that need Hermes, git or a GUI
are only checked to be written down.
"""

from __future__ import annotations

import json
import os
import shlex
import stat
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import REPO_ROOT, VERSION

README = (REPO_ROOT / "README.md").read_text()
INSTALL = (REPO_ROOT / "docs" / "install.md").read_text()
"""The whole install, moved out of the README (issue 58): catalog entries, the Lab listener, upgrades."""
CLI = [sys.executable, "-m", "hermes_blender.cli"]


def _readme_args(subcommand: str) -> list[str]:
    """The arguments of the first `hermes-blender <subcommand>` line in a README code block, comment dropped."""
    in_code = False
    for line in README.splitlines():
        if line.startswith("```"):
            in_code = not in_code
            continue
        _, found, rest = line.partition(f"hermes-blender {subcommand}")
        if in_code and found:
            return [subcommand, *shlex.split(rest.split("#", 1)[0])]
    raise AssertionError(f"the README has no 'hermes-blender {subcommand}' line")


def test_the_readme_writes_down_every_step_of_the_user_path() -> None:
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
    for step in (
        "uv run hermes-blender build-addon --output dist",
        "hermes plugins install blender-bridge/blender-bridge/hermes_plugin",
        "subdir: hermes_plugin",
        "sha: 0123456789abcdef0123456789abcdef01234567",
        "hermes-blender serve --lab-port 9876",
        "hermes plugins update blender-bridge",
        "extension remove hermes_bridge",
        "uv tool uninstall hermes-blender",
    ):
        assert step in INSTALL, step


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

    built = run(*_readme_args("build-addon"))  # 1
    assert built.returncode == 0 and built.stdout.strip().endswith(f"hermes_bridge-{VERSION}.zip"), built.stderr
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
        status = run(*_readme_args("status"), "--server", "blender")  # 6 (the Lab listener is off here)
        assert status.returncode == 0 and status.stdout.rstrip().endswith("ready"), status.stdout + status.stderr
        answer = run(*_readme_args("call"))
        assert answer.returncode == 0 and "Cube (MESH) [active, selected]" in answer.stdout
        assert json.loads(runtime_file.read_text())["token"] not in status.stdout + answer.stdout + answer.stderr
    finally:
        blender.send_signal(2)
        blender.wait(60)
    assert not runtime_file.exists()
