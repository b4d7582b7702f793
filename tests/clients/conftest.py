"""Real MCP clients from their registries, installed at test time into a cache outside the checkout.

Each is pinned here, installed once per machine with `npm install --prefix` (nothing is committed), and run
with a private HOME, so the user's own configs are never read or touched. CI must run them all; elsewhere a
machine without Node.js 20+ skips them, saying why.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from hermes_blender.headless import HeadlessBlender
from tests.conftest import USER_CACHE

PINNED = {
    "claude": ("@anthropic-ai/claude-code", "2.1.332"),
    "gemini": ("@google/gemini-cli", "0.61.0"),
    "mcp-inspector": ("@modelcontextprotocol/inspector", "2.12.0"),
    "sdk": ("@modelcontextprotocol/sdk", "1.32.2"),
    "conformance": ("@modelcontextprotocol/conformance", "0.2.0-alpha.12"),
    "node22": (f"node-linux-{'arm64' if platform.machine() in ('aarch64', 'arm64') else 'x64'}", "22.23.5"),
}
"""The command (or, for a library, a key) and the package@version that provides it. The conformance suite needs
Node.js 22 (`fs.globSync`), which the registry carries as a package (`node22`: its `bin/node`)."""

NODE_HINT = "these tests need Node.js 20 or newer with npm (.ci/run installs them)"


def _cache() -> Path:
    return USER_CACHE / "blender-bridge-ci" / "npm"


def _node_major() -> int | None:
    node = shutil.which("node")
    if node is None or shutil.which("npm") is None:
        return None
    version = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30).stdout
    try:
        return int(version.strip().lstrip("v").split(".")[0])
    except ValueError:
        return None


@pytest.fixture(scope="session")
def npm_install() -> object:
    """Returns a function: key → the install prefix of that pinned package (installed on first use)."""
    major = _node_major()
    if major is None or major < 20:
        message = f"{NODE_HINT}; found {'no node/npm' if major is None else f'Node.js {major}'}"
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must run the real clients: {message}")
        pytest.skip(message)

    def install(key: str) -> Path:
        package, version = PINNED[key]
        prefix = _cache() / f"{package.replace('/', '+')}@{version}"
        marker = prefix / "node_modules" / package / "package.json"
        if not marker.exists():
            prefix.mkdir(parents=True, exist_ok=True)
            # package.json first: the Inspector's CLI wants one above the folder it runs in.
            (prefix / "package.json").write_text(json.dumps({"private": True}) + "\n")
            subprocess.run(
                [
                    "npm",
                    "install",
                    "--prefix",
                    str(prefix),
                    "--no-audit",
                    "--no-fund",
                    "--loglevel=error",
                    f"{package}@{version}",
                ],
                check=True,
                timeout=600,
            )
        return prefix

    return install


@dataclass(frozen=True)
class UserHome:
    """A private HOME as a new user has it: the toolkit on PATH, no client configured yet."""

    home: Path
    project: Path
    """A folder to run clients in (Claude Code and Gemini keep per-folder settings)."""

    @property
    def runtime_file(self) -> Path:
        """Where Blender publishes by default for this HOME (the entry passes no --runtime-file)."""
        return self.home / "AppData" / "Local" / "Blender" / "server.json"

    def env(self, **extra: str) -> dict[str, str]:
        path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
        keep = {key: value for key, value in os.environ.items() if key in ("LANG", "LC_ALL", "TERM", "TMPDIR")}
        return {**keep, "HOME": str(self.home), "PATH": path, "NO_COLOR": "1", **extra}

    def connect(self, client: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "hermes_blender.cli", "connect", client, "--write"]
        return subprocess.run(command, env=self.env(), capture_output=True, text=True, timeout=60, check=True)

    def blender(self, mode: str | None = None) -> HeadlessBlender:
        """A headless Blender for this user; `mode`: what its person lets agents do (read-only, ask, full)."""
        return HeadlessBlender(self.runtime_file, mode=mode)


@pytest.fixture
def user_home(tmp_path: Path) -> Iterator[UserHome]:
    home = UserHome(tmp_path / "home", tmp_path / "home" / "project")
    home.project.mkdir(parents=True)
    yield home
