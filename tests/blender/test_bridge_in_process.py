"""The bridge inside this Blender: requests on threads, tools on the main thread."""

from __future__ import annotations

import importlib
import json
import signal
import socket
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import bpy
import psutil
import pytest

from hermes_blender.blender_host import ADDON_MODULE
from hermes_blender.client import modern_request

from .conftest import serve_while


def _call(bridge: Any, name: str, arguments: dict | None = None) -> dict:
    token = json.loads(bridge.runtime_file.read_text())["token"]
    body, headers = modern_request("tools/call", {"name": name, "arguments": arguments or {}})
    request = urllib.request.Request(
        bridge.endpoint, data=body, headers={**headers, "Authorization": f"Bearer {token}"}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())["result"]


def test_tool_call_runs_on_blenders_main_thread_and_answers(
    service: ModuleType, factory_scene: None, tmp_path: Path, runtime: Any
) -> None:
    bridge = runtime.start(service.BridgeConfig(runtime_file=tmp_path / "server.json", lab_port=None))
    result = serve_while(bridge.dispatcher, lambda: _call(bridge, "get_objects_summary"))
    assert result["isError"] is False
    assert result["structuredContent"]["active_object"] == "Cube"


def test_invalid_arguments_are_an_is_error_result(service: ModuleType, tmp_path: Path, runtime: Any) -> None:
    bridge = runtime.start(service.BridgeConfig(runtime_file=tmp_path / "server.json", lab_port=None))
    result = serve_while(bridge.dispatcher, lambda: _call(bridge, "get_objects_summary", {"bogus": 1}))
    assert result["isError"] is True
    assert "unknown argument 'bogus'" in result["content"][0]["text"]


def test_a_tool_that_raises_or_returns_non_json_is_reported_and_the_bridge_keeps_serving(
    service: ModuleType, factory_scene: None, tmp_path: Path, monkeypatch, runtime: Any
) -> None:
    catalogue = importlib.import_module(service.__name__.rsplit(".", 1)[0] + ".tools.catalogue").CATALOGUE
    tool = catalogue["get_objects_summary"]
    run = tool.run
    bridge = runtime.start(service.BridgeConfig(runtime_file=tmp_path / "server.json", lab_port=None))

    def calls() -> list[dict]:
        results = []
        monkeypatch.setattr(tool, "run", lambda a, job: 1 / 0)
        results.append(_call(bridge, "get_objects_summary"))
        monkeypatch.setattr(tool, "run", lambda a, job: {"obj": bpy.data})
        results.append(_call(bridge, "get_objects_summary"))
        monkeypatch.setattr(tool, "run", run)
        results.append(_call(bridge, "get_objects_summary"))
        return results

    raised, non_json, fine = serve_while(bridge.dispatcher, calls)
    assert raised["isError"] and "ZeroDivisionError" in raised["content"][0]["text"]
    assert non_json["isError"] and "not JSON" in non_json["content"][0]["text"]
    assert fine["isError"] is False


def test_loading_another_file_between_requests_is_seen_by_the_next_request(
    service: ModuleType, factory_scene: None, tmp_path: Path, runtime: Any
) -> None:
    other = tmp_path / "other.blend"
    bpy.data.objects["Cube"].name = "Renamed"
    bpy.ops.wm.save_as_mainfile(filepath=str(other), copy=True)
    bpy.ops.wm.read_homefile(use_factory_startup=True)
    bridge = runtime.start(service.BridgeConfig(runtime_file=tmp_path / "server.json", lab_port=None))

    def client() -> tuple[dict, dict]:
        before = _call(bridge, "get_objects_summary")
        bridge.dispatcher.submit(lambda: bpy.ops.wm.open_mainfile(filepath=str(other))).wait(30)
        return before, _call(bridge, "get_objects_summary")

    before, after = serve_while(bridge.dispatcher, client)
    assert before["structuredContent"]["active_object"] == "Cube"
    assert after["structuredContent"]["active_object"] == "Renamed"
    assert runtime.bridge is bridge  # the bridge survived the file load


def test_starting_again_replaces_the_running_bridge_and_its_file(
    service: ModuleType, tmp_path: Path, runtime: Any
) -> None:
    path = tmp_path / "server.json"
    first = runtime.start(service.BridgeConfig(runtime_file=path, lab_port=None))
    second = runtime.start(service.BridgeConfig(runtime_file=path, lab_port=None))
    assert runtime.bridge is second
    with pytest.raises(
        importlib.import_module(f"{ADDON_MODULE}.errors").BridgeStopped
    ):  # the replaced bridge really stopped: it takes no more work
        first.dispatcher.submit(lambda: None)
    assert json.loads(path.read_text())["http"] == second.url
    runtime.stop()
    assert not path.exists()


def test_stopping_with_clients_waiting_answers_each_with_stopped_instead_of_holding_blender(
    service: ModuleType, tmp_path: Path, runtime: Any
) -> None:
    """Nobody pumps here, so four calls wait in the queue when the bridge is stopped."""
    bridge = runtime.start(service.BridgeConfig(runtime_file=tmp_path / "server.json", lab_port=None))
    answers: list[Any] = []

    def client() -> None:
        try:
            answers.append(_call(bridge, "get_objects_summary"))
        except OSError as exc:  # a reset or a cut answer: what the old close order gave
            answers.append(exc)

    clients = [threading.Thread(target=client) for _ in range(4)]
    for thread in clients:
        thread.start()
    deadline = time.monotonic() + 30
    while bridge.dispatcher.queued() < 4:
        assert time.monotonic() < deadline, "the four calls never reached the queue"
        time.sleep(0.01)
    runtime.stop()
    still_serving = [t.name for t in threading.enumerate() if t.name.startswith("hermes-mcp")]
    for thread in clients:
        thread.join(30)
    assert still_serving == []  # stop() returned with every connection answered and ended, none left behind
    assert [answer["isError"] and json.loads(answer["content"][0]["text"])["state"] for answer in answers] == [
        "stopped"
    ] * 4


def test_a_stop_during_a_job_on_the_main_loop_interrupts_it_and_answers_stopped(
    service: ModuleType, tmp_path: Path, runtime: Any
) -> None:
    """What Ctrl+C or SIGTERM does to `blender -b --command hermes_bridge` while a script runs."""
    bridge = runtime.start(
        service.BridgeConfig(runtime_file=tmp_path / "server.json", lab_port=None, mode=service.Mode.BACKGROUND)
    )
    dispatcher = bridge.dispatcher

    def stop_now() -> None:
        dispatcher.request_stop()
        dispatcher.interrupt_running()

    def ask() -> dict:
        threading.Timer(0.5, stop_now).start()
        return _call(bridge, "execute_blender_code", {"code": "import time\nwhile True:\n    time.sleep(0.01)"})

    result = serve_while(dispatcher, ask, bridge.serve)
    error = json.loads(result["content"][0]["text"])
    assert (
        result["isError"] is True and error["state"] == "stopped" and "stopped while the request ran" in error["error"]
    )


def test_on_the_main_loop_a_request_that_comes_during_another_waits_its_turn(
    service: ModuleType, tmp_path: Path, runtime: Any
) -> None:
    bridge = runtime.start(
        service.BridgeConfig(runtime_file=tmp_path / "server.json", lab_port=None, mode=service.Mode.BACKGROUND)
    )
    log = "import bpy\norder = bpy.app.driver_namespace.setdefault('hermes_test_order', [])\n"
    slow = log + "order.clear()\nimport time\ntime.sleep(1.0)\norder.append('slow')"
    second = log + "order.append('second')\nresult = {'order': list(order)}"

    def ask() -> dict:
        first = threading.Thread(target=_call, args=(bridge, "execute_blender_code", {"code": slow}))
        first.start()
        time.sleep(0.3)  # the slow one is running on the main loop now
        answer = _call(bridge, "execute_blender_code", {"code": second})
        first.join()
        return answer

    answer = serve_while(bridge.dispatcher, ask, bridge.serve)
    assert answer["structuredContent"]["result"] == {"order": ["slow", "second"]}


_SWALLOWING_LOOP = (
    "import time\nwhile True:\n    try:\n        time.sleep(0.2)\n    except BaseException:\n        pass"
)
_HOLDS = {
    "busy-loop": "while True:\n    pass",
    "sleep": "import time\ntime.sleep(600)",
    "recv": "import socket\nquiet, _ = socket.socketpair()\nquiet.recv(1)",
    "subprocess": "import subprocess\nsubprocess.run(['sleep', '600'])",
    "nested-bare-except": (
        "import time\n"
        "def inner():\n    while True:\n        try:\n            time.sleep(0.2)\n        except:\n            pass\n"
        "while True:\n    try:\n        inner()\n    except:\n        pass"
    ),
    "swallow-then-answer": "import time\ntry:\n    time.sleep(600)\nexcept BaseException:\n    pass\nresult = {'fine': True}",
    # C's system() waits for its child again after a signal: only ending the child ends the wait.
    "os-system": "import os\nos.system('sleep 600')",
    # A catch-all loop compiled under another file name, or exec'd from a string (a script read from disk).
    "loop-in-another-file": f"exec(compile({_SWALLOWING_LOOP!r}, 'x.py', 'exec'))",
    "loop-in-an-exec-string": f"exec({_SWALLOWING_LOOP!r})",
}


_SWALLOWING = ("nested-bare-except", "swallow-then-answer", "loop-in-another-file", "loop-in-an-exec-string")
SWALLOWING_NEEDS = (3, 12)
"""Python 3.11 (Blender 4.5) has no sys.monitoring: there only the repeated signal acts, and a loop that catches
every exception and goes back to its wait can outlast it (README > Security)."""


@pytest.mark.parametrize(
    "hold",
    [
        pytest.param(
            hold,
            marks=pytest.mark.skipif(
                hold in _SWALLOWING and sys.version_info < SWALLOWING_NEEDS,
                reason="needs sys.monitoring (Python 3.12+); a documented limit on Blender 4.5",
            ),
        )
        for hold in _HOLDS
    ],
)
@pytest.mark.parametrize("mode", ["EMBEDDED", "BACKGROUND"], ids=["threads", "main-loop"])
def test_a_job_that_waits_in_c_or_swallows_the_interrupt_still_ends_at_its_deadline(
    service: ModuleType, tmp_path: Path, mode: str, hold: str, runtime: Any
) -> None:
    """Each of these but the busy loop held every client for minutes; now each is stopped and says so (a hang fails
    the timeout). On the main loop nobody waits on another thread: the watchdog interrupts the job in place."""
    config = service.BridgeConfig(
        runtime_file=tmp_path / "server.json", lab_port=None, job_timeout=1, mode=service.Mode[mode]
    )
    bridge = runtime.start(config)
    marker = "\nimport bpy\nbpy.app.driver_namespace['hermes_test_after'] = True"

    def ask() -> tuple[dict, dict]:
        return _call(bridge, "execute_blender_code", {"code": _HOLDS[hold] + marker}), _call(
            bridge, "execute_blender_code", {"code": "result = {'next': True}"}
        )

    bpy.app.driver_namespace.pop("hermes_test_after", None)
    held, after = serve_while(bridge.dispatcher, ask, bridge.serve)
    error = json.loads(held["content"][0]["text"])
    assert held["isError"] is True and error["state"] == "interrupted" and "was stopped" in error["error"], error
    assert "hermes_test_after" not in bpy.app.driver_namespace  # stopped where it waited, not after
    assert after["structuredContent"]["result"] == {"next": True}
    assert not [p.cmdline() for p in psutil.Process().children(recursive=True) if "600" in p.cmdline()]


@pytest.mark.skipif(sys.version_info < SWALLOWING_NEEDS, reason="sys.monitoring needs Python 3.12+")
@pytest.mark.parametrize("attack", ["free", "take"])
def test_agent_code_that_frees_or_takes_the_bridges_monitoring_tool_leaves_deadlines_working(
    service: ModuleType, tmp_path: Path, attack: str, runtime: Any
) -> None:
    """Freeing the tool id once answered HTTP 500 to that call and every later one, and killed the watchdog."""
    config = service.BridgeConfig(
        runtime_file=tmp_path / "server.json", lab_port=None, job_timeout=1, mode=service.Mode.BACKGROUND
    )
    bridge = runtime.start(config)
    freeing = (
        "import sys\nfor n in range(6):\n    if sys.monitoring.get_tool(n) == 'hermes-bridge-interrupt':\n"
        "        sys.monitoring.free_tool_id(n)\nresult = {'freed': True}"
    )
    if attack == "take":  # and hold every id the bridge could move to
        freeing += (
            "\nfor n in (3, 4):\n    if sys.monitoring.get_tool(n) is None:\n        sys.monitoring.use_tool_id(n, 'x')"
        )

    # With the id freed it is claimed again, so even a catch-all loop ends; with every id taken only the signal is
    # left (the log says so), which still ends a plain wait.
    held = _SWALLOWING_LOOP if attack == "free" else _HOLDS["sleep"]

    def ask() -> list[dict]:
        return [
            _call(bridge, "execute_blender_code", {"code": freeing}),
            _call(bridge, "execute_blender_code", {"code": held}),
            _call(bridge, "execute_blender_code", {"code": "result = {'next': True}"}),
        ]

    try:
        freed, looped, after = serve_while(bridge.dispatcher, ask, bridge.serve)
    finally:
        for n in (3, 4):
            if sys.monitoring.get_tool(n) == "x":
                sys.monitoring.free_tool_id(n)
    assert freed["isError"] is False and after["structuredContent"]["result"] == {"next": True}
    assert looped["isError"] is True and json.loads(looped["content"][0]["text"])["state"] == "interrupted"


def test_agent_code_cannot_take_the_signals_the_bridge_stops_with(
    service: ModuleType, tmp_path: Path, runtime: Any
) -> None:

    bridge = runtime.start(
        service.BridgeConfig(runtime_file=tmp_path / "server.json", lab_port=None, mode=service.Mode.BACKGROUND)
    )
    code = "import signal\nsignal.signal(signal.SIGUSR2, signal.SIG_IGN)"
    bypass = "import _signal, signal\n_signal.signal(int(signal.SIGUSR2), _signal.SIG_IGN)\nresult = {}"

    def ask() -> tuple[dict, dict]:
        return _call(bridge, "execute_blender_code", {"code": code}), _call(
            bridge, "execute_blender_code", {"code": bypass}
        )

    refused, bypassed = serve_while(bridge.dispatcher, ask, bridge.serve)
    assert (
        refused["isError"] is True
        and "used by the Blender bridge" in json.loads(refused["content"][0]["text"])["error"]
    )
    assert bypassed["isError"] is False  # it ran, and the handler was put back after it
    assert signal.getsignal(signal.SIGUSR2) == bridge.dispatcher.interrupter.on_signal


def _send_and_leave(bridge: Any, name: str, arguments: dict, once: Callable[[], bool] = lambda: True) -> None:
    """A whole tools/call request, then the client closes without waiting for the answer (once `once()` holds)."""
    token = json.loads(bridge.runtime_file.read_text())["token"]
    body, headers = modern_request("tools/call", {"name": name, "arguments": arguments})
    head = "".join(f"{key}: {value}\r\n" for key, value in headers.items())
    request = (
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{bridge.port}\r\nAuthorization: Bearer {token}\r\n{head}"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body
    with socket.create_connection(("127.0.0.1", bridge.port), timeout=10) as sock:
        sock.sendall(request)
        while not once():
            time.sleep(0.01)


@pytest.fixture(params=["EMBEDDED", "BACKGROUND"], ids=["threads", "main-loop"])
def either_driver(request: pytest.FixtureRequest, service: ModuleType, tmp_path: Path, runtime: Any) -> Any:
    """A bridge on the threads driver (as in the GUI) or on the main loop (as in a background Blender)."""
    mode = service.Mode[request.param]
    return runtime.start(service.BridgeConfig(runtime_file=tmp_path / "server.json", lab_port=None, mode=mode))


def test_a_request_whose_client_left_before_its_turn_is_dropped_never_run(either_driver: Any) -> None:
    bridge = either_driver
    late = "import bpy\nbpy.app.driver_namespace['hermes_test_late'] = True"

    def ask() -> dict:
        first = threading.Thread(
            target=_call, args=(bridge, "execute_blender_code", {"code": "import time\ntime.sleep(1.5)"})
        )
        first.start()
        time.sleep(0.3)  # the slow one holds the main thread now
        _send_and_leave(bridge, "execute_blender_code", {"code": late})
        first.join()
        return _call(bridge, "execute_blender_code", {"code": "result = {'next': True}"})

    bpy.app.driver_namespace.pop("hermes_test_late", None)
    after = serve_while(bridge.dispatcher, ask, bridge.serve)
    assert after["structuredContent"]["result"] == {"next": True}
    assert "hermes_test_late" not in bpy.app.driver_namespace


def test_a_client_that_hangs_up_while_its_script_runs_has_the_script_stopped(either_driver: Any) -> None:
    """The 2026-07-28 transport's cancel signal is the client closing the stream: the job stops where it waits."""
    bridge = either_driver
    slow = (
        "import bpy, time\nbpy.app.driver_namespace['hermes_test_started'] = True\n"
        "for _ in range(600):\n    time.sleep(0.05)\nbpy.app.driver_namespace['hermes_test_finished'] = True"
    )

    def ask() -> dict:
        started = lambda: "hermes_test_started" in bpy.app.driver_namespace  # noqa: E731
        _send_and_leave(bridge, "execute_blender_code", {"code": slow}, once=started)
        return _call(bridge, "execute_blender_code", {"code": "result = {'next': True}"})

    for key in ("hermes_test_started", "hermes_test_finished"):
        bpy.app.driver_namespace.pop(key, None)
    after = serve_while(bridge.dispatcher, ask, bridge.serve)
    assert after["structuredContent"]["result"] == {"next": True}
    assert bpy.app.driver_namespace.get("hermes_test_started") is True  # it ran, and was stopped mid-way
    assert "hermes_test_finished" not in bpy.app.driver_namespace


def test_a_frame_task_still_working_when_the_bridge_stops_says_so_and_no_new_one_starts(
    either_driver: Any, service: ModuleType, tmp_path: Path, runtime: Any
) -> None:
    bridge = either_driver
    scene = bpy.context.scene
    scene.render.resolution_x, scene.render.resolution_y = 64, 48
    scene.render.engine, scene.cycles.device, scene.cycles.samples = "CYCLES", "CPU", 1  # no GPU in this process
    scene.frame_start, scene.frame_end = 1, 400

    def ask() -> str:
        task_id = _call(bridge, "start_render_frames_task", {"output_folder": str(tmp_path)})["structuredContent"]
        while _call(bridge, "get_render_frames_task", {"task_id": task_id["task_id"]})["structuredContent"]["done"] < 1:
            time.sleep(0.01)
        return task_id["task_id"]

    task_id = serve_while(bridge.dispatcher, ask, bridge.serve)
    runtime.stop()
    ended = bridge.execution.tasks.task(task_id).snapshot()
    assert ended["status"] == "failed" and ended["status_message"].startswith("the bridge stopped after ")
    with pytest.raises(__import__(f"{ADDON_MODULE}.errors", fromlist=["ToolError"]).ToolError, match="no bridge"):
        bridge.execution.tasks.start({"output_folder": str(tmp_path)}, None)  # refused before it needs a job


def test_past_a_deadline_only_code_that_is_not_installed_is_policed(addon: ModuleType) -> None:
    """Raising inside Cycles' engine or another extension breaks Blender; agent code under any name must stop."""
    interrupt = importlib.import_module(f"{ADDON_MODULE}.interrupt")
    extensions = Path(bpy.utils.user_resource("EXTENSIONS"))
    scripts = Path(bpy.utils.system_resource("SCRIPTS"))
    for installed in (
        extensions / "user_default" / "another_extension" / "__init__.py",
        extensions / ".local" / "lib" / "python3.13" / "site-packages" / "a_wheel.py",
        scripts / "addons_core" / "cycles" / "engine.py",
        Path(json.__file__),
        Path(interrupt.__file__),
    ):
        assert interrupt.installed(str(installed)), installed
    for agent in ("<blender-bridge>", "x.py", "<string>", "/tmp/agent-scripts/tool.py"):
        assert not interrupt.installed(agent), agent


def test_the_gui_looks_for_the_users_edits_as_often_as_a_stream_may_tell_them(service: ModuleType) -> None:
    """The edits look lives with the jobs, the streams' pace with the MCP side (loaded later): one figure."""
    package = service.__name__.rsplit(".", 1)[0]
    execution = importlib.import_module(f"{package}.execution")
    assert execution.EDITS_LOOK == importlib.import_module(f"{package}.net.subscriptions").COALESCE


def test_no_mcp_side_is_built_once_the_bridge_began_to_close(service: ModuleType, tmp_path: Path, runtime: Any) -> None:
    """A connection the GUI's accept thread admits while the bridge stops (its first MCP client) is closed as one
    whose client left: nothing is built that `close` would not stop, and no watcher outlives the bridge."""
    package = service.__name__.rsplit(".", 1)[0]
    peer = importlib.import_module(f"{package}.net.conversation").Peer(("127.0.0.1", 1), ("127.0.0.1", 2))
    bridge = runtime.start(service.BridgeConfig(runtime_file=tmp_path / "server.json", lab_port=None))
    runtime.stop()
    with pytest.raises(OSError):
        bridge._mcp_conversation(peer)
    assert bridge._mcp is None and bridge.execution.watcher is None
