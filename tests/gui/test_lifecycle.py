"""An interactive Blender's bridge: it starts with Blender, stops on demand, and never holds Blender up."""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from hermes_blender.client import BridgeClient
from hermes_blender.contract.liveness import read_live_endpoint
from hermes_blender.errors import LiveEndpointUnavailable
from hermes_blender.instances import instance_spec
from tests.gui.busy import BusyClient
from tests.gui.harness import ARTIFACTS, GuiBlender, free_port

SIDEBAR = """
window = bpy.context.window_manager.windows[0]
area = next(area for area in window.screen.areas if area.type == "VIEW_3D")
area.spaces.active.show_region_ui = True
area.tag_redraw()
region = next(region for region in area.regions if region.type == "UI")
result = {"left": region.x, "width": region.width, "top": window.height - region.y - region.height}
"""
ROW = 26
"""Height of one panel row at the default interface scale."""


def _open_hermes_panel(blender: GuiBlender) -> dict[str, int]:
    """Open the 3D Viewport's sidebar and click its Hermes tab; returns the sidebar's screen geometry."""
    sidebar = blender.probe(SIDEBAR)
    time.sleep(1.0)  # a software-GL redraw
    blender.click(sidebar["left"] + sidebar["width"] - 14, sidebar["top"] + 244)  # the fifth tab (5.2): Hermes
    time.sleep(1.0)
    return sidebar


def _panel_button(sidebar: dict[str, int], row: int) -> tuple[int, int]:
    """Centre of the panel's `row`-th line (0 = the first under its header)."""
    return sidebar["left"] + (sidebar["width"] - 20) // 2, sidebar["top"] + 46 + row * ROW


def _object_names(blender: GuiBlender) -> set[str]:
    summary = blender.call("get_objects_summary").data()

    def walk(collection: dict) -> set[str]:
        names = {entry["name"] for entry in collection["objects"]}
        return names.union(*(walk(child) for child in collection["children"]))

    return set().union(*(walk(collection) for collection in summary["collections"]))


def test_bridge_starts_with_blender_from_the_saved_preferences(gui: GuiBlender) -> None:
    endpoint = read_live_endpoint(gui.spec)
    assert endpoint.pid == gui.pid
    assert {"Cube", "Camera", "Light"} <= _object_names(gui)
    _open_hermes_panel(gui)
    gui.screenshot("bridge-running-panel")


def test_bridge_starts_when_blender_is_launched_with_a_blend_file(tmp_path: Path, display: str) -> None:
    blender = GuiBlender(tmp_path, display)
    blender.install_addon()
    blend = blender.make_blend(tmp_path / "scene.blend", "FromTheFile")
    try:
        blender.launch(blend)  # as a double-click or "Open with" does: the file loads before the event loop runs
        assert "FromTheFile" in _object_names(blender)
    finally:
        blender.kill()


def test_the_panels_stop_and_start_buttons_withdraw_and_republish_the_runtime_file(own_gui: GuiBlender) -> None:
    first = read_live_endpoint(own_gui.spec)
    sidebar = _open_hermes_panel(own_gui)
    own_gui.click(
        *_panel_button(sidebar, 8)
    )  # Running, address, Agent may (2 rows), clients, runtime file, log, Lab, Stop
    _wait_for(lambda: not own_gui.runtime_file.exists(), "the Stop button to withdraw the runtime file")
    time.sleep(1.0)
    own_gui.screenshot("bridge-stopped-panel")
    with pytest.raises(LiveEndpointUnavailable) as caught:
        asyncio.run(BridgeClient(own_gui.spec).call_tool("get_objects_summary"))
    assert caught.value.state == "app_not_running"
    own_gui.click(*_panel_button(sidebar, 1))  # Stopped, then Start
    second = own_gui.wait_for_bridge(30)
    assert second.pid == own_gui.pid and second.token.reveal() != first.token.reveal()
    assert "Cube" in _object_names(own_gui)


def _wait_for(condition: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


STOPS = {
    "stop": "bpy.ops.hermes_bridge.stop()",
    "disable": "import addon_utils\naddon_utils.disable('bl_ext.user_default.hermes_bridge', default_set=True)",
}


def _busy(blender: GuiBlender) -> list[BusyClient]:
    clients = [BusyClient(read_live_endpoint(blender.spec)) for _ in range(4)]
    for client in clients:
        client.start()
    for client in clients:
        assert client.started_work.wait(30), "a client never got going"
    return clients


def _record(name: str, seconds: float, clients: list[BusyClient]) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    figures = {"seconds": round(seconds, 4), "clients": [(c.calls, c.ended) for c in clients]}
    (ARTIFACTS / f"{name}-with-4-busy-clients.json").write_text(json.dumps(figures))


@pytest.mark.parametrize("how", sorted(STOPS))
def test_stop_and_disable_with_four_busy_clients_take_under_a_second(own_gui: GuiBlender, how: str) -> None:
    clients = _busy(own_gui)
    seconds = own_gui.probe(
        f"import time\nstarted = time.perf_counter()\n{STOPS[how]}\nresult = time.perf_counter() - started"
    )
    for client in clients:
        client.join(10)
    _record(how, seconds, clients)
    assert seconds < 1.0, f"{how} held Blender for {seconds:.2f} s"
    assert all(client.ended in ("stopped", "closed") for client in clients)
    assert not own_gui.runtime_file.exists()
    assert own_gui.probe("result = 1") == 1  # Blender itself goes on


def test_quit_with_four_busy_clients_takes_under_a_second(own_gui: GuiBlender) -> None:
    clients = _busy(own_gui)
    started = time.monotonic()
    own_gui.post("bpy.ops.wm.quit_blender()")
    code = own_gui.wait_exit(30)
    seconds = time.monotonic() - started
    for client in clients:
        client.join(10)
    _record("quit", seconds, clients)
    assert code == 0
    assert seconds < 1.0, f"quitting took {seconds:.2f} s"
    assert all(client.ended in ("stopped", "closed") for client in clients)
    assert not own_gui.runtime_file.exists()


def test_a_crashed_blender_leaves_a_stale_file_that_reads_as_not_running_and_the_next_start_replaces(
    own_gui: GuiBlender,
) -> None:
    crashed = own_gui.pid
    own_gui.kill()
    assert json.loads(own_gui.runtime_file.read_text())["pid"] == crashed  # nobody could withdraw it
    with pytest.raises(LiveEndpointUnavailable) as caught:
        read_live_endpoint(own_gui.spec)
    assert caught.value.state == "app_not_running" and "not running" in str(caught.value)
    own_gui.lab_port = free_port()
    own_gui.launch()
    assert read_live_endpoint(own_gui.spec).pid == own_gui.pid != crashed
    said = f"Replaced a stale runtime file left by a process that has exited (pid {crashed})"
    deadline = time.monotonic() + 30  # logged once the start returns, just after the file appears
    while said not in own_gui.log.read_text() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert said in own_gui.log.read_text()


NOTE = (
    "import sys\nbridge = sys.modules['bl_ext.user_default.hermes_bridge.runtime'].RUNTIME.bridge\n"
    "result = sys.modules['bl_ext.user_default.hermes_bridge.notes'].reachability(bridge.runtime_file, bridge.pid)"
)


def test_a_second_blender_takes_the_runtime_file_and_hands_it_back_when_it_quits(
    own_gui: GuiBlender, display: str
) -> None:
    assert own_gui.probe(NOTE) is None
    second = GuiBlender(own_gui.root, display, name="second")  # the same user opens Blender again
    try:
        second.launch()
        assert read_live_endpoint(own_gui.spec).pid == second.pid
        note = own_gui.probe(NOTE)  # what the first one's panel says now
        assert f"Blender started last (pid {second.pid})" in note and f"call --pid {own_gui.pid}" in note
        own_record = instance_spec(own_gui.spec, own_gui.pid)
        answer = asyncio.run(BridgeClient(own_record).call_tool("get_objects_summary"))
        assert not answer.is_error  # still serving, reached through its own record
        second.post("bpy.ops.wm.quit_blender()")
        assert second.wait_exit(30) == 0
    finally:
        second.kill()
    assert read_live_endpoint(own_gui.spec).pid == own_gui.pid  # handed back: Hermes reaches the first again
    assert own_gui.probe(NOTE) is None


SHORT_DEADLINE = (
    "import dataclasses, sys\n"
    "runtime, prefs = sys.modules['bl_ext.user_default.hermes_bridge.runtime'].RUNTIME, sys.modules['bl_ext.user_default.hermes_bridge.prefs']\n"
    "runtime.start(dataclasses.replace(prefs.config(), job_timeout=2.0))\n"
    "result = runtime.bridge.mode.value == 'gui'"
)
GUI_HOLDS = {
    "subprocess": "import subprocess\nsubprocess.run(['sleep', '600'])",
    "sleep": "import time\ntime.sleep(600)",
    "swallowing": "import time\nwhile True:\n    try:\n        time.sleep(5)\n    except BaseException:\n        pass",
}


def test_in_the_gui_a_job_that_waits_or_swallows_the_interrupt_ends_at_its_deadline(own_gui: GuiBlender) -> None:
    """The timer pump's path: the job runs on the interface's main thread, its caller waits on a connection thread."""
    assert own_gui.probe(SHORT_DEADLINE) is True  # the same GUI bridge, with a deadline a test can wait for
    own_gui.wait_for_bridge()
    monitoring = own_gui.probe("import sys\nresult = hasattr(sys, 'monitoring')")
    holds = GUI_HOLDS if monitoring else {k: v for k, v in GUI_HOLDS.items() if k != "swallowing"}  # README > Security
    for name, code in holds.items():
        result = own_gui.call("execute_blender_code", {"code": code + "\nresult = {'finished': True}"})
        assert result.is_error and result.data()["state"] == "interrupted", (name, result.data())
    assert own_gui.code("result = {'next': True}") == {"next": True}
    assert own_gui.probe("result = 1") == 1  # the interface's loop goes on


RESTART = (
    "from bl_ext.user_default.hermes_bridge.runtime import RUNTIME\nRUNTIME.start(RUNTIME.bridge.config)\nresult = {}"
)


def test_agent_code_that_restarts_the_bridge_gets_its_answer_and_leaves_one_new_bridge(own_gui: GuiBlender) -> None:
    """Once the old listener kept running (its callers waited 120 s for `busy`) and the stop deferred by a timer
    then stopped the new bridge: the restart is now carried out by the timer pump after the job."""
    old = read_live_endpoint(own_gui.spec)
    assert own_gui.code(RESTART) == {}
    new = own_gui.wait_for_bridge()  # the old bridge withdraws its file first, then the new one publishes
    deadline = time.monotonic() + 30
    while new.url == old.url and time.monotonic() < deadline:
        time.sleep(0.05)
        new = own_gui.wait_for_bridge()
    assert new.pid == own_gui.pid and new.url != old.url
    assert own_gui.code("result = {'new': True}") == {"new": True}
    time.sleep(1.0)  # long enough for any stop left over to have stopped the new bridge, as it once did
    assert read_live_endpoint(own_gui.spec).url == new.url and own_gui.code("result = {}") == {}
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", urlsplit(old.url).port or 0)) != 0  # the old listener is closed


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_the_readmes_headless_command_in_a_blender_binary_stops_cleanly_on_a_signal(
    tmp_path: Path, display: str, signum: int
) -> None:
    """`blender -b --command hermes_bridge` in Debian's Blender 5.2 once exited 1 on Ctrl+C or SIGTERM: its SIGINT
    handler reads as None there, which `signal.signal` refused to put back, and "stopped" was never printed."""
    blender = GuiBlender(tmp_path, display)
    blender.install_addon()
    runtime_file = tmp_path / "headless" / "server.json"
    command = [blender.blender, "-b", "--command", "hermes_bridge", "--port", "0", "--runtime-file", str(runtime_file)]
    process = subprocess.Popen(command, env=blender.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 120
        while not runtime_file.exists() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert runtime_file.exists(), process.stdout.read() if process.poll() is not None else "not published"
        process.send_signal(signum)
        output, _ = process.communicate(timeout=60)
    finally:
        process.kill()
    assert process.returncode == 0, output
    assert "hermes_bridge: stopped" in output and "TypeError" not in output
    assert not runtime_file.exists()
