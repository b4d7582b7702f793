"""Gemini CLI's own `mcp list`, configured by `hermes-blender connect gemini --write`."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

from tests.clients.conftest import UserHome

SLOW_START = "import time\ntime.sleep(8)\n"
"""A sitecustomize that holds every Python it starts for 8 s: the stdio server as a loaded machine starts it."""


def _gemini_mcp_list(gemini: Path, home: UserHome, **extra: str) -> str:
    done = subprocess.run(
        [str(gemini), "mcp", "list"],
        cwd=home.project,
        env=home.env(GEMINI_CLI_TRUST_WORKSPACE="true", **extra),  # an untrusted folder shows servers "Disabled"
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    shown = done.stdout + done.stderr  # the list goes to stderr in this version
    return next((line for line in shown.splitlines() if "blender:" in line), shown)


def test_gemini_cli_lists_the_written_entry_as_connected(
    npm_install: Callable[[str], Path], user_home: UserHome
) -> None:
    gemini = npm_install("gemini") / "node_modules" / ".bin" / "gemini"
    user_home.connect("gemini")
    with user_home.blender():
        line = _gemini_mcp_list(gemini, user_home)
    assert "Connected" in line and "Disconnected" not in line and "(stdio)" in line, line


def test_gemini_waits_for_a_stdio_server_that_starts_8_s_late(
    npm_install: Callable[[str], Path], user_home: UserHome, tmp_path: Path
) -> None:
    """Gemini waits 5 s for the handshake unless the entry says otherwise; a loaded machine took 4.6 s."""
    gemini = npm_install("gemini") / "node_modules" / ".bin" / "gemini"
    user_home.connect("gemini")
    slow = tmp_path / "slow_start"
    slow.mkdir()
    (slow / "sitecustomize.py").write_text(SLOW_START)
    line = _gemini_mcp_list(gemini, user_home, PYTHONPATH=str(slow))
    assert "Connected" in line and "Disconnected" not in line, line
