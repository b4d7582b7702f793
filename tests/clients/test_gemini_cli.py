"""Gemini CLI's own `mcp list`, configured by `hermes-blender connect gemini --write`."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

from tests.clients.conftest import UserHome


def test_gemini_cli_lists_the_written_entry_as_connected(
    npm_install: Callable[[str], Path], user_home: UserHome
) -> None:
    gemini = npm_install("gemini") / "node_modules" / ".bin" / "gemini"
    user_home.connect("gemini")
    with user_home.blender():
        done = subprocess.run(
            [str(gemini), "mcp", "list"],
            cwd=user_home.project,
            env=user_home.env(GEMINI_CLI_TRUST_WORKSPACE="true"),  # an untrusted folder shows servers "Disabled"
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 0, done.stderr
    shown = done.stdout + done.stderr  # the list goes to stderr in this version
    line = next((line for line in shown.splitlines() if "blender:" in line), "")
    assert "Connected" in line and "Disconnected" not in line and "(stdio)" in line, shown
