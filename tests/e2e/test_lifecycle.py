"""Start, stop, kill: the runtime file tells the truth and nothing falls back to a static URL."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from hermes_blender.blender_host import ADDON_MODULE
from hermes_blender.client import BridgeClient, modern_request
from hermes_blender.contract.liveness import RuntimeFileSpec
from hermes_blender.errors import HeadlessStartError, LiveEndpointUnavailable, ToolCallFailed
from hermes_blender.headless import HeadlessBlender
from tests.conftest import PLUGIN_ROOT


class Decoy:
    """A listener on a URL a careless client might still dial; it records any connection."""

    def __init__(self, port: int = 0) -> None:
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", port))
        self.sock.listen()
        self.sock.setblocking(False)
        self.port = self.sock.getsockname()[1]

    def was_dialed(self) -> bool:
        try:
            self.sock.accept()[0].close()
        except BlockingIOError:
            return False
        return True

    def close(self) -> None:
        self.sock.close()


def _assert_unavailable_without_dialing(runtime_file: Path, decoy: Decoy, state: str) -> None:
    try:
        client = BridgeClient(RuntimeFileSpec(path=str(runtime_file)))
        with pytest.raises(LiveEndpointUnavailable) as caught:
            asyncio.run(client.call_tool("get_objects_summary"))
        assert caught.value.state == state
        assert not decoy.was_dialed()
    finally:
        decoy.close()


def test_clean_stop_removes_the_runtime_file(own_blender: HeadlessBlender) -> None:
    assert own_blender.runtime_file.exists()
    assert own_blender.stop() == 0
    assert not own_blender.runtime_file.exists()


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL")
def test_killed_blender_leaves_a_stale_file_that_reads_as_app_not_running(own_blender: HeadlessBlender) -> None:
    assert own_blender.endpoint is not None
    old_port = int(own_blender.endpoint.url.rsplit(":", 1)[1].split("/")[0])
    os.kill(own_blender.pid, signal.SIGKILL)
    own_blender.stop()
    assert own_blender.runtime_file.exists()  # nobody could clean up
    decoy = Decoy(old_port)  # something else now answers on the stale address
    _assert_unavailable_without_dialing(own_blender.runtime_file, decoy, "app_not_running")


def test_missing_runtime_file_never_falls_back(tmp_path: Path) -> None:
    """`status` reads mcp.json: a `blender` entry that is the HTTP endpoint itself (the shape before the plugin ran
    the relay, and what a user may still write) has a URL, and that URL is never dialled: here it is the decoy."""
    decoy = Decoy()
    plugin = tmp_path / "plugin"
    plugin.mkdir()
    shutil.copy(PLUGIN_ROOT / "plugin.json", plugin)
    mcp = json.loads((PLUGIN_ROOT / "mcp.json").read_text())
    mcp["mcpServers"]["blender"] = {"type": "streamable-http", "url": f"http://127.0.0.1:{decoy.port}/mcp"}
    (plugin / "mcp.json").write_text(json.dumps(mcp))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "blender").write_text("#!/bin/sh\necho 'Blender 5.1.2'\n")
    (bin_dir / "blender").chmod(0o755)
    env = {**os.environ, "HOME": str(tmp_path), "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    try:
        run = subprocess.run(
            [
                sys.executable,
                "-m",
                "hermes_blender.cli",
                "status",
                "--plugin-dir",
                str(plugin),
                "--server",
                "blender",
                "--json",
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert run.returncode == 3 and json.loads(run.stdout)["servers"][0]["state"] == "app_not_running"
        assert not decoy.was_dialed()
    finally:
        decoy.close()


def test_a_stale_token_is_a_clear_401_message_without_the_token(own_blender: HeadlessBlender) -> None:
    record = json.loads(own_blender.runtime_file.read_text())
    record["token"] = "stale-token-value-123"
    own_blender.runtime_file.write_text(json.dumps(record))
    client = BridgeClient(RuntimeFileSpec(path=str(own_blender.runtime_file)))
    with pytest.raises(ToolCallFailed, match="401") as caught:
        asyncio.run(client.call_tool("get_objects_summary"))
    assert "stale-token-value-123" not in str(caught.value)


def test_a_busy_port_is_a_clear_start_error(tmp_path: Path) -> None:
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    port = holder.getsockname()[1]
    try:
        with pytest.raises(HeadlessStartError, match=f"port {port} .*already in use"):
            with HeadlessBlender(tmp_path / "server.json", port=port):
                pass
    finally:
        holder.close()
    assert not (tmp_path / "server.json").exists()


@pytest.mark.timeout(120)
def test_a_start_is_noticed_when_blender_says_it_started_not_at_the_next_look(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The runtime file is looked at again at each line Blender prints (its "started" line follows the
    publication): with looks an hour apart, the start is still noticed at once (broken: the test's timeout)."""
    monkeypatch.setattr("hermes_blender.headless.POLL_INTERVAL", 3600.0)
    with HeadlessBlender(tmp_path / "server.json") as blender:
        assert blender.endpoint.pid == blender.pid


def test_a_newer_blender_takes_over_the_runtime_file_and_the_older_keeps_its_hands_off(tmp_path: Path) -> None:
    path = tmp_path / "server.json"
    with HeadlessBlender(path) as older:
        with HeadlessBlender(path) as newer:
            assert json.loads(path.read_text())["pid"] == newer.pid
            older.stop()
            assert json.loads(path.read_text())["pid"] == newer.pid  # the older one did not remove it
            newer.stop()  # its log is complete once it has stopped
            assert "Took over the runtime file" in newer.log_tail()
        assert not path.exists()


_BUSY = {
    "loop": "while True:\n    pass",
    "swallowing": "import time\nwhile True:\n    try:\n        time.sleep(5)\n    except BaseException:\n        pass",
    "ignoring SIGTERM": (
        "import _signal, signal, time\n_signal.signal(int(signal.SIGTERM), _signal.SIG_IGN)\nwhile True:\n"
        "    try:\n        time.sleep(5)\n    except BaseException:\n        pass"
    ),
}


@pytest.mark.skipif(sys.platform == "win32", reason="SIGTERM")
@pytest.mark.parametrize("busy", list(_BUSY))
@pytest.mark.parametrize("how", ["SIGTERM", "stdin closed"])
def test_a_bridge_busy_with_a_runaway_script_still_stops_cleanly(
    own_blender: HeadlessBlender, how: str, busy: str, tmp_path: Path
) -> None:
    """Each of these once took 20-110 s or never stopped; stop() kills after 3 s, so exit 0 means it stopped itself."""
    client = BridgeClient(RuntimeFileSpec(path=str(own_blender.runtime_file)))
    started = tmp_path / "looping"
    code = f"open({str(started)!r}, 'w').close()\n" + _BUSY[busy]
    answers: list[object] = []

    def runaway() -> None:
        try:
            answers.append(asyncio.run(client.call_tool("execute_blender_code", {"code": code})))
        except ToolCallFailed as exc:  # the bridge went away while answering: also an answer
            answers.append(exc)

    caller = threading.Thread(target=runaway)
    caller.start()
    deadline = time.monotonic() + 30
    while not started.exists():  # the loop now holds Blender's main thread
        assert time.monotonic() < deadline, "the script never started"
        time.sleep(0.01)
    if how == "SIGTERM":
        os.kill(own_blender.pid, signal.SIGTERM)
    exit_code = own_blender.stop()  # closes stdin too; kills only if neither stops it
    caller.join(60)
    assert exit_code == 0, own_blender.log_tail()
    assert not own_blender.runtime_file.exists() and answers


_MEDDLING = {
    "ignored in Python's table": "import _signal, signal\n_signal.signal(int(signal.SIGTERM), _signal.SIG_IGN)",
    "ignored below Python": (
        "import ctypes, signal\nlibc = ctypes.CDLL(None)\nlibc.signal.argtypes = [ctypes.c_int, ctypes.c_void_p]\n"
        "libc.signal(int(signal.SIGTERM), 1)"  # SIG_IGN, unseen by Python's own table
    ),
    "the wake-up descriptor off": "import signal\nsignal.set_wakeup_fd(-1)",
}


@pytest.mark.skipif(sys.platform == "win32", reason="SIGTERM")
@pytest.mark.parametrize("meddling", list(_MEDDLING))
def test_sigterm_alone_stops_a_bridge_whose_earlier_job_turned_it_off(
    own_blender: HeadlessBlender, meddling: str
) -> None:
    """Handlers and the wake-up descriptor are the bridge's again after each job, whatever the job did to them,
    so the next SIGTERM stops an idle bridge: stdin stays open, nothing but the signal asks."""
    client = BridgeClient(RuntimeFileSpec(path=str(own_blender.runtime_file)))
    answer = asyncio.run(client.call_tool("execute_blender_code", {"code": _MEDDLING[meddling]}))
    assert not answer.is_error, answer.text
    process = psutil.Process(own_blender.pid)
    os.kill(own_blender.pid, signal.SIGTERM)
    try:
        process.wait(60)
    except psutil.TimeoutExpired:
        pytest.fail(f"SIGTERM did not stop the bridge after a job left it {meddling}:\n{own_blender.log_tail()}")
    assert not own_blender.runtime_file.exists(), own_blender.log_tail()


def test_a_blender_held_in_c_that_must_be_killed_leaves_no_runtime_file(own_blender: HeadlessBlender) -> None:
    """A C loop that never lets go of the GIL: nothing in Blender can act, so the supervisor kills it and
    withdraws the file itself."""
    client = BridgeClient(RuntimeFileSpec(path=str(own_blender.runtime_file)))
    code = "total = sum(range(10**12))"
    caller = threading.Thread(target=lambda: _ignore_failure(client, code), daemon=True)
    caller.start()
    time.sleep(1.0)  # the call has reached Blender's main thread
    pid = own_blender.pid
    exit_code = own_blender.stop()
    assert exit_code == -signal.SIGKILL and not own_blender.runtime_file.exists()
    assert not (own_blender.runtime_file.parent / "servers" / f"{pid}.json").exists()


def _ignore_failure(client: BridgeClient, code: str) -> None:
    _ignore_failure_of(lambda: asyncio.run(client.call_tool("execute_blender_code", {"code": code})))


def test_agent_code_that_disables_the_addon_gets_its_answer_and_blender_stops_cleanly(
    own_blender: HeadlessBlender,
) -> None:
    """One POST: a session-keeping client would then find the bridge gone, which is the point."""
    record = json.loads(own_blender.runtime_file.read_text())
    code = f"import addon_utils\naddon_utils.disable({ADDON_MODULE!r})\nresult = {{'disabled': True}}"
    body, headers = modern_request("tools/call", {"name": "execute_blender_code", "arguments": {"code": code}})
    request = urllib.request.Request(
        record["http"] + "/mcp", data=body, headers={**headers, "Authorization": f"Bearer {record['token']}"}
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        answer = json.loads(response.read())["result"]
    assert answer["isError"] is False and answer["structuredContent"]["result"] == {"disabled": True}
    assert own_blender.stop() == 0, own_blender.log_tail()  # it had stopped serving; stop() only collects it
    assert not own_blender.runtime_file.exists()


RENDER_FOR_HOURS = (
    "import bpy\nscene = bpy.context.scene\nscene.render.engine = 'CYCLES'\nscene.cycles.device = 'CPU'\n"
    "scene.cycles.samples = 1_000_000\nscene.cycles.use_adaptive_sampling = False\nbpy.ops.render.render()"
)


@pytest.mark.skipif(sys.platform == "win32", reason="SIGTERM")
@pytest.mark.parametrize(
    "before",
    ["nothing", "import signal\nsignal.set_wakeup_fd(-1)"],
    ids=["alone", "after a job turned the wake-up descriptor off"],
)
def test_sigterm_during_a_render_ends_blender_without_waiting_for_the_render(
    own_blender: HeadlessBlender, before: str
) -> None:
    """The render holds the main thread in C (Python's handler waits for it), so the stop starts from the thread
    that hears the signal's wake-up byte: the runtime file is withdrawn and Blender exits, the render abandoned. A
    job that turned the wake-up descriptor off does not outlive itself: it is set anew after every job."""
    if before != "nothing":
        client = BridgeClient(RuntimeFileSpec(path=str(own_blender.runtime_file)))
        assert not asyncio.run(client.call_tool("execute_blender_code", {"code": before})).is_error
    record = json.loads(own_blender.runtime_file.read_text())
    body, headers = modern_request(
        "tools/call", {"name": "execute_blender_code", "arguments": {"code": RENDER_FOR_HOURS}}
    )
    request = urllib.request.Request(
        record["http"] + "/mcp", data=body, headers={**headers, "Authorization": f"Bearer {record['token']}"}
    )
    caller = threading.Thread(target=lambda: _ignore_failure_of(lambda: urllib.request.urlopen(request, timeout=120)))
    caller.start()
    process = psutil.Process(own_blender.pid)
    deadline = time.monotonic() + 60
    while process.cpu_percent(0.2) < 50:  # the render is under way
        assert time.monotonic() < deadline, "the render never started"
    os.kill(own_blender.pid, signal.SIGTERM)
    assert process.wait(60) == 0  # a million samples would take hours
    assert not own_blender.runtime_file.exists()
    caller.join(120)


def _ignore_failure_of(call: Callable[[], object]) -> None:
    with contextlib.suppress(OSError, ToolCallFailed):  # the bridge went away while the call waited
        call()


@pytest.mark.skipif(sys.platform == "win32", reason="SIGTERM")
def test_sigterm_while_an_answer_waits_for_a_client_that_never_reads_withdraws_the_file_and_exits_cleanly(
    own_blender: HeadlessBlender,
) -> None:
    """The stop lets an answer being written go out for its deadline; the deadman (for a job held in C) once cut
    that short and ended the process with the runtime file still naming it."""
    record = json.loads(own_blender.runtime_file.read_text())
    code = "result = {'x': 'a' * 60_000_000}"
    body, headers = modern_request("tools/call", {"name": "execute_blender_code", "arguments": {"code": code}})
    head = "".join(f"{key}: {value}\r\n" for key, value in headers.items())
    port = int(record["http"].rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=30) as reader:
        reader.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        reader.sendall(
            (
                f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {record['token']}\r\n{head}"
                f"Content-Length: {len(body)}\r\n\r\n"
            ).encode()
            + body
        )
        assert reader.recv(1)  # the answer has begun, and nobody reads the rest
        pid = own_blender.pid
        os.kill(pid, signal.SIGTERM)
        assert psutil.Process(pid).wait(60) == 0, own_blender.log_tail()
    assert not own_blender.runtime_file.exists()
    assert not (own_blender.runtime_file.parent / "servers" / f"{pid}.json").exists()
    assert "without waiting for a job" not in own_blender.log_tail()


def test_a_restart_asked_by_agent_code_that_cannot_start_ends_the_process_with_its_error(
    own_blender: HeadlessBlender,
) -> None:
    """Nothing serves after it, so the command line says why and exits 2 (it once said "stopped" and exited 0)."""
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        taken = busy.getsockname()[1]
        code = (
            f"import dataclasses\nfrom {ADDON_MODULE}.runtime import RUNTIME\n"
            f"RUNTIME.start(dataclasses.replace(RUNTIME.bridge.config, port={taken}))\nresult = {{}}"
        )
        client = BridgeClient(RuntimeFileSpec(path=str(own_blender.runtime_file)))
        answer = asyncio.run(client.call_tool("execute_blender_code", {"code": code}))
        assert not answer.is_error
        assert psutil.Process(own_blender.pid).wait(60) == 2, own_blender.log_tail()
    assert "error: could not start listening" in own_blender.log_tail() or "in use" in own_blender.log_tail()
    assert not own_blender.runtime_file.exists()


@pytest.mark.timeout(120)
def test_a_headless_blender_collects_garbage_once_it_serves(tmp_path: Path) -> None:
    """The start pauses Python's cycle collector across bpy's and the add-on's imports (a faster start); a Blender
    left without it would grow with every call's cycles for as long as it serves."""
    code = (
        "import gc\n"
        "before = gc.get_stats()[0]['collections']\n"
        "cycles = [[] for _ in range(20000)]\n"
        "for cycle in cycles:\n"
        "    cycle.append(cycle)\n"
        "del cycles, cycle\n"
        "result = {'young_collections': gc.get_stats()[0]['collections'] - before}"
    )
    with HeadlessBlender(tmp_path / "server.json") as blender:
        client = BridgeClient(RuntimeFileSpec(path=str(blender.runtime_file)))
        answer = asyncio.run(client.call_tool("execute_blender_code", {"code": code})).data()["result"]
    assert answer["young_collections"] > 0, answer  # 20,000 new containers: the collector ran by itself
