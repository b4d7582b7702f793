"""A real interactive Blender under Xvfb, with the extension installed and enabled the way a user does it.

Which Blender: `HERMES_GUI_BLENDER` (any Blender 4.5 or newer, a user's own too), else the launcher
`scripts/gui_root.sh` made for Debian sid's Blender 5.2 LTS in a root folder, else `blender` on PATH.
"""

from __future__ import annotations

import asyncio
import functools
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from hermes_blender.addon_package import build_addon
from hermes_blender.client import BridgeClient, ToolResult, modern_request
from hermes_blender.contract.liveness import LiveEndpoint, RuntimeFileSpec, read_live_endpoint
from hermes_blender.errors import LiveEndpointUnavailable
from scripts.gui_blender import blender_command

INSTALL_HINT = (
    "the GUI tier needs Blender 4.5 or newer (HERMES_GUI_BLENDER, or `sudo scripts/gui_root.sh` for Debian sid's "
    "5.2 LTS in a root folder, which needs zstd), and Xvfb, xdotool and ImageMagick on PATH "
    "(Debian/Ubuntu: `sudo apt-get install xvfb xdotool imagemagick zstd`)"
)
ADDON = "bl_ext.user_default.hermes_bridge"
"""The extension's module once installed into the user repository, as a user installs it."""
FLOOR = (4, 5)
PROBE = Path(__file__).with_name("probe.py")
ARTIFACTS = Path(os.environ.get("HERMES_GUI_ARTIFACTS", Path(__file__).resolve().parents[2] / "build" / "gui"))
"""Screenshots and measured figures the tier leaves for people to look at (CI keeps the folder)."""


@functools.cache
def blender_version(command: str) -> tuple[str, tuple[int, int]]:
    """Its `--version` line ("Blender 5.2.2 LTS") and (major, minor)."""
    line = subprocess.run([command, "--version"], capture_output=True, text=True, timeout=60).stdout.splitlines()[0]
    found = re.match(r"Blender (\d+)\.(\d+)", line)
    return line, (int(found[1]), int(found[2])) if found else (0, 0)


def missing_tools() -> list[str]:
    missing = [name for name in ("Xvfb", "xdotool", "import") if shutil.which(name) is None]
    command = blender_command()
    if command is None:
        return [*missing, "blender"]
    line, version = blender_version(command)
    return missing if version >= FLOOR else [*missing, f"Blender {FLOOR[0]}.{FLOOR[1]}+ ({command} is {line!r})"]


@functools.cache
def extension_zip() -> Path:
    """The extension built once per session with Blender's own builder, as `hermes-blender build-addon` builds it."""
    folder = Path(os.environ.get("TMPDIR", "/tmp")) / f"hermes-gui-package-{os.getpid()}"
    return build_addon(folder)


@contextmanager
def xvfb(size: str = "1024x720x24") -> Iterator[str]:
    """A private X display; yields its name (":N")."""
    read, write = os.pipe()
    server = subprocess.Popen(
        ["Xvfb", "-displayfd", str(write), "-screen", "0", size, "-nolisten", "tcp"],
        pass_fds=(write,),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    os.close(write)
    try:
        with os.fdopen(read) as pipe:
            number = pipe.readline().strip()
        if not number:
            raise RuntimeError("Xvfb did not start")
        yield f":{number}"
    finally:
        server.terminate()
        server.wait(10)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class McpLink:
    """One keep-alive HTTP connection to a bridge, posting raw 2026-07-28 `tools/call` requests."""

    def __init__(self, endpoint: LiveEndpoint, timeout: float = 300.0) -> None:
        parts = urlsplit(endpoint.url)
        assert parts.hostname is not None
        self._path = parts.path
        self._auth = endpoint.headers()
        self._connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)

    def call(self, tool: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        """The JSON-RPC `result` (raises OSError, HTTPException or ValueError when the bridge is gone)."""
        body, headers = modern_request("tools/call", {"name": tool, "arguments": arguments or {}})
        self._connection.request("POST", self._path, body, {**headers, **self._auth})
        return json.loads(self._connection.getresponse().read())["result"]

    def __enter__(self) -> McpLink:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._connection.close()


class GuiBlender:
    """One interactive Blender with a private HOME and user folders, driven from outside."""

    def __init__(self, root: Path, display: str, *, lab_port: int | None = None, name: str = "blender") -> None:
        """`name` tells apart several Blenders of one user (one root: one HOME and one set of preferences)."""
        self.root = root
        self.display = display
        self.lab_port = lab_port
        self.home = root / "home"
        self.probe_dir = root / f"probe-{name}"
        self.log = root / f"{name}.log"
        self.process: subprocess.Popen[bytes] | None = None
        self.env = {
            **os.environ,
            "HOME": str(self.home),
            "DISPLAY": display,
            "BLENDER_USER_CONFIG": str(root / "config"),
            "BLENDER_USER_SCRIPTS": str(root / "scripts"),
            "HERMES_GUI_PROBE": str(self.probe_dir),
        }
        self.env.pop("BLENDER_USER_RESOURCES", None)  # the suite's bpy setting would hide these folders
        command = blender_command()
        assert command is not None, INSTALL_HINT
        self.blender = command

    @property
    def runtime_file(self) -> Path:
        return self.home / "AppData" / "Local" / "Blender" / "server.json"

    @property
    def spec(self) -> RuntimeFileSpec:
        return RuntimeFileSpec(path=str(self.runtime_file))

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def install_addon(self) -> None:
        """Install the extension zip and enable it (Blender's own `extension install-file --enable`), then turn on
        "Start with Blender" and save the preferences, as a user does once."""
        blender = self.blender
        install = [blender, "--command", "extension", "install-file", "--repo", "user_default", "--enable"]
        subprocess.run([*install, str(extension_zip())], env=self.env, check=True, capture_output=True, timeout=300)
        lab = (
            f"prefs.lab_enabled = True\nprefs.lab_port = {self.lab_port}\n"
            if self.lab_port
            else "prefs.lab_enabled = False\n"
        )
        setup = (
            "import bpy\n"
            f"prefs = bpy.context.preferences.addons[{ADDON!r}].preferences\n"
            "prefs.auto_start = True\n"
            f"{lab}"
            "bpy.context.preferences.view.show_splash = False\n"
            "bpy.ops.wm.save_userpref()\n"
        )
        subprocess.run(
            [blender, "-b", "--python-exit-code", "1", "--python-expr", setup],
            env=self.env,
            check=True,
            capture_output=True,
            timeout=300,
        )

    def launch(self, blend: Path | None = None) -> LiveEndpoint:
        """Start Blender as a user does (no factory settings: the saved preferences apply) and wait for its bridge."""
        command = [self.blender, *([str(blend)] if blend else []), "--python", str(PROBE)]
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(command, env=self.env, stdout=log, stderr=subprocess.STDOUT)
        return self.wait_for_bridge()

    def wait_for_bridge(self, timeout: float = 90.0) -> LiveEndpoint:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(f"Blender exited with {self.process.returncode}:\n{self.log_tail()}")
            try:
                endpoint = read_live_endpoint(self.spec)
            except LiveEndpointUnavailable:
                endpoint = None
            if endpoint is not None and endpoint.pid == self.pid:
                return endpoint
            time.sleep(0.05)
        raise TimeoutError(f"the bridge did not publish within {timeout:g} s:\n{self.log_tail()}")

    def call(self, tool: str, arguments: dict[str, Any] | None = None) -> ToolResult:
        return asyncio.run(BridgeClient(self.spec, timeout=120.0).call_tool(tool, arguments or {}))

    def rpc(self, tool: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        """One raw `tools/call` over a fresh connection: the whole MCP result, image content included."""
        with McpLink(read_live_endpoint(self.spec)) as link:
            return link.call(tool, arguments)

    def code(self, code: str) -> Any:
        result = self.call("execute_blender_code", {"code": code})
        assert not result.is_error, result.data()
        return result.data()["result"]

    def post(self, code: str) -> Path:
        """Hand `code` to the probe without waiting; returns where its answer will appear."""
        name = uuid.uuid4().hex
        inbox = self.probe_dir / "in"
        temp = inbox / f"{name}.tmp"
        temp.write_text(code)
        temp.replace(inbox / f"{name}.py")
        return inbox / f"{name}.json"

    def probe(self, code: str, timeout: float = 60.0) -> Any:
        """Run `code` on Blender's main thread from the probe's timer; returns its `result`."""
        answer = self.post(code)
        deadline = time.monotonic() + timeout
        while not answer.exists():
            if time.monotonic() > deadline:
                raise TimeoutError(f"the probe did not answer within {timeout:g} s:\n{self.log_tail()}")
            time.sleep(0.01)
        reply = json.loads(answer.read_text())
        answer.unlink()
        if "error" in reply:
            raise AssertionError(f"probe code failed:\n{reply['error']}")
        return reply["result"]

    def make_blend(self, path: Path, object_name: str) -> Path:
        """A .blend saved by this Blender: the factory scene plus one empty named `object_name`."""
        code = (
            "import bpy\n"
            f"bpy.context.scene.collection.objects.link(bpy.data.objects.new({object_name!r}, None))\n"
            f"bpy.ops.wm.save_as_mainfile(filepath={str(path)!r})\n"
        )
        command = [self.blender, "-b", "--factory-startup", "--python-exit-code", "1", "--python-expr", code]
        subprocess.run(command, env=self.env, check=True, capture_output=True, timeout=120)
        return path

    def click(self, x: int, y: int) -> None:
        """A real mouse click at screen coordinates (xdotool), as the user makes it: Blender 5.2 ignores a press on
        a button the pointer has only just jumped onto, so the pointer comes from nearby and rests first."""
        for command in (["mousemove", str(x - 8), str(y)], ["mousemove", str(x), str(y)], ["click", "1"]):
            subprocess.run(["xdotool", *command], env=self.env, check=True, timeout=30)
            time.sleep(0.4)

    def screenshot(self, name: str) -> Path:
        """The whole X screen as the user would see it (ImageMagick's `import`), kept as an artifact."""
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        path = ARTIFACTS / f"{name}.png"
        subprocess.run(["import", "-window", "root", str(path)], env=self.env, check=True, timeout=60)
        return path

    def wait_exit(self, timeout: float) -> int:
        assert self.process is not None
        return self.process.wait(timeout)

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"
