"""The built wheel, installed in a clean venv far from the checkout, works as a user's copy would.

It carries the plugin files and the add-on source, and `validate`, `status` and `call` never
need bpy (about 1 GB), which is not installed there.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from hermes_blender import __version__
from hermes_blender.headless import HeadlessBlender
from tests.conftest import REPO_ROOT
from tests.stdio_frames import INITIALIZE, INITIALIZED


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The `hermes-blender` command of a fresh venv holding only the wheel and its dependencies."""
    uv = shutil.which("uv")
    assert uv, "uv must be on PATH (the README's set-up puts it there)"
    work = tmp_path_factory.mktemp("wheel")
    for command in (
        [uv, "build", "--wheel", "--python", sys.executable, "--out-dir", str(work / "dist"), str(REPO_ROOT)],
        [uv, "venv", "--quiet", "--python", sys.executable, str(work / "venv")],
    ):
        run = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=work)
        assert run.returncode == 0, run.stderr
    [wheel] = (work / "dist").glob("hermes_blender-*.whl")
    python = work / "venv" / "bin" / "python"
    run = subprocess.run(
        [uv, "pip", "install", "--quiet", "--python", str(python), str(wheel)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=work,
    )
    assert run.returncode == 0, run.stderr
    yield work / "venv" / "bin" / "hermes-blender"


def _run(command: Path, *args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if key not in ("VIRTUAL_ENV", "PYTHONPATH")}
    empty = home / "empty-bin"  # a PATH with no Blender, also on a machine whose /usr/bin has one (the GUI tier's)
    empty.mkdir(exist_ok=True)
    env.update(HOME=str(home), HERMES_HOME=str(home / ".hermes"), PATH=str(empty))
    return subprocess.run([str(command), *args], capture_output=True, text=True, timeout=120, env=env, cwd=home)


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX venv layout")
def test_the_installed_wheel_validates_checks_and_calls_without_bpy(installed: Path, tmp_path: Path) -> None:
    python = installed.parent / "python"
    assert subprocess.run([str(python), "-c", "import bpy"], capture_output=True).returncode != 0
    assert _run(installed, "--version", home=tmp_path).stdout.strip() == f"hermes-blender {__version__}"

    validated = _run(installed, "validate", "--json", home=tmp_path)
    assert validated.returncode == 0 and json.loads(validated.stdout)["servers"] == {
        "blender": "stdio",
        "blender_lab": "stdio",
    }

    status = _run(installed, "status", "--json", "--no-connect", home=tmp_path)
    assert status.returncode == 3
    assert {s["state"] for s in json.loads(status.stdout)["servers"]} == {"missing_app"}  # no blender on PATH

    runtime_file = tmp_path / "AppData" / "Local" / "Blender" / "server.json"
    with HeadlessBlender(runtime_file):
        called = _run(installed, "call", "get_objects_summary", "--json", home=tmp_path)
    assert called.returncode == 0, called.stderr
    assert json.loads(called.stdout)["result"]["total_objects"] == 3


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX venv layout")
def test_build_addon_without_bpy_names_the_extra_to_install(installed: Path, tmp_path: Path) -> None:
    built = _run(installed, "build-addon", "--output", str(tmp_path / "dist"), home=tmp_path)
    assert built.returncode == 2 and "hermes-blender[blender]" in built.stderr


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX venv layout")
def test_the_installed_wheels_stdio_server_lists_the_shipped_tools_without_blender(
    installed: Path, tmp_path: Path
) -> None:
    """What a client sees from `hermes-blender mcp` before Blender ever started: the handshake and the tool list."""
    frames = [
        INITIALIZE,
        INITIALIZED,
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    ]
    env = {key: value for key, value in os.environ.items() if key not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env.update(HOME=str(tmp_path))
    with subprocess.Popen(
        [str(installed), "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, cwd=tmp_path
    ) as server:
        assert server.stdin is not None and server.stdout is not None
        server.stdin.write("".join(json.dumps(frame) + "\n" for frame in frames))
        server.stdin.flush()  # and kept open: a client that closes stdin has ended the session
        answers = {}
        while 2 not in answers:
            answer = json.loads(server.stdout.readline())
            answers[answer.get("id")] = answer
        server.stdin.close()
        assert server.wait(30) == 0
    names = [tool["name"] for tool in answers[2]["result"]["tools"]]
    assert "get_objects_summary" in names and "execute_blender_code" in names
