"""The command line helps a newcomer: `tools` lists what a client gets, a misspelt tool gets the nearest names, a
closed reader (`| head`) ends the call quietly, Ctrl+C says what it cancelled, and `watch` follows a render task."""

from __future__ import annotations

import json
import os
import pty
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hermes_blender.headless import HeadlessBlender
from hermes_blender.stdio_server import shipped_catalogue
from tests.pseudo_terminal import read_all

pytestmark = pytest.mark.timeout(300)

CLI = [sys.executable, "-m", "hermes_blender.cli"]


@pytest.fixture(scope="module")
def serving(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    runtime_file = tmp_path_factory.mktemp("cli") / "server.json"
    with HeadlessBlender(runtime_file):
        yield runtime_file


def _run(*arguments: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *arguments], capture_output=True, text=True, timeout=timeout)


def test_tools_lists_every_tool_the_running_blender_lists_with_a_line_each_and_as_json(serving: Path) -> None:
    shipped = [tool["name"] for tool in shipped_catalogue()]
    listed = _run("tools", "--runtime-file", str(serving))
    assert listed.returncode == 0, listed.stderr
    assert [line.split()[0] for line in listed.stdout.splitlines()] == shipped
    assert all(len(line.split(maxsplit=1)) == 2 for line in listed.stdout.splitlines())  # each with its line
    as_json = _run("tools", "--json", "--runtime-file", str(serving))
    assert [tool["name"] for tool in json.loads(as_json.stdout)] == shipped


def test_tools_with_blender_closed_lists_the_shipped_tools_and_says_so(tmp_path: Path) -> None:
    listed = _run("tools", "--runtime-file", str(tmp_path / "server.json"))
    assert listed.returncode == 0 and len(listed.stdout.splitlines()) == len(shipped_catalogue())
    assert "app_not_running" in listed.stderr and "ships" in listed.stderr


def test_a_misspelt_tool_answers_did_you_mean_with_the_nearest_name(serving: Path) -> None:
    called = _run("call", "get_object_summary", "--runtime-file", str(serving))
    assert called.returncode == 2 and "Traceback" not in called.stderr
    assert "did you mean get_objects_summary" in called.stderr, called.stderr
    listed = _run("call", "list", "--runtime-file", str(serving))
    assert "`hermes-blender tools` lists" in listed.stderr, listed.stderr


def test_a_call_whose_reader_has_gone_ends_quietly_with_the_status_a_shell_expects(serving: Path) -> None:
    command = [*CLI, "call", "get_objects_summary", "--runtime-file", str(serving)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()  # as `| head -0` does: the answer has nowhere to go
    status = process.wait(120)
    error = process.stderr.read().decode()
    assert status == 128 + signal.SIGPIPE and "Traceback" not in error and "BrokenPipe" not in error, error


def test_ctrl_c_on_a_call_says_what_it_cancelled(serving: Path) -> None:
    code = "import time\nfor _ in range(600):\n    time.sleep(0.05)\nresult = 1"
    command = [*CLI, "call", "execute_blender_code", "--arguments", json.dumps({"code": code})]
    process = subprocess.Popen([*command, "--runtime-file", str(serving)], stderr=subprocess.PIPE, text=True)
    time.sleep(3)  # the call is running in Blender
    process.send_signal(signal.SIGINT)
    _, error = process.communicate(timeout=120)
    assert process.returncode == 130
    assert "interrupted: the call of execute_blender_code is cancelled" in error and "Traceback" not in error, error


def test_watch_follows_a_render_task_to_its_end_with_a_bar_on_a_terminal(tmp_path: Path) -> None:
    runtime_file = tmp_path / "server.json"
    small = "r = bpy.context.scene.render\nr.engine = 'BLENDER_WORKBENCH'\nr.resolution_x = r.resolution_y = 128"
    frames = tmp_path / "frames"
    frames.mkdir()
    with HeadlessBlender(runtime_file):
        file = ("--runtime-file", str(runtime_file))
        assert _run("call", "execute_blender_code", "--arguments", json.dumps({"code": small}), *file).returncode == 0
        task = {"output_folder": str(frames), "frame_start": 1, "frame_end": 12}
        started = _run("call", "start_render_frames_task", "--arguments", json.dumps(task), "--json", *file)
        task_id = json.loads(started.stdout)["result"]["task_id"]
        controller, terminal = pty.openpty()
        watched = subprocess.run([*CLI, "watch", task_id, *file], stdout=subprocess.PIPE, stderr=terminal, timeout=240)
        os.close(terminal)
        drawn = read_all(controller)
    assert watched.returncode == 0, drawn
    assert "\r" in drawn and "[#" in drawn and "of 12 frames" in drawn, drawn
    assert '"status": "completed"' in watched.stdout.decode()
    assert len(list(frames.glob("*.png"))) == 12


def test_on_a_terminal_a_call_waiting_behind_another_clients_call_says_that_it_waits(tmp_path: Path) -> None:
    file = ("--runtime-file", str(tmp_path / "server.json"))
    running = tmp_path / "running"
    long = {"code": f"import time\nopen({str(running)!r}, 'w').close()\ntime.sleep(6)\nresult = {{}}"}
    with HeadlessBlender(tmp_path / "server.json"):
        holding = subprocess.Popen(
            [*CLI, "call", "execute_blender_code", "--arguments", json.dumps(long), *file], stdout=subprocess.PIPE
        )
        deadline = time.monotonic() + 60
        while not running.exists():  # that call runs: a Blender without its window runs one call at a time
            assert time.monotonic() < deadline and holding.poll() is None, "the first call never ran"
            time.sleep(0.05)
        controller, terminal = pty.openpty()
        waiting = subprocess.run([*CLI, "call", "get_objects_summary", *file], stdout=subprocess.PIPE, stderr=terminal)
        os.close(terminal)
        said = read_all(controller)
        held, _ = holding.communicate(timeout=60)
    assert holding.returncode == 0, held
    assert waiting.returncode == 0 and b"Scene 'Scene'" in waiting.stdout
    assert "waiting for Blender: no answer for 2 s" in said and "one call at a time" in said, said
