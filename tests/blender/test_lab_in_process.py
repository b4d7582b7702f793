"""Lab listener behaviours that need the GUI pump or a preference, driven in this Blender."""

from __future__ import annotations

import importlib
import json
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import bpy
import pytest

from hermes_blender.blender_host import ADDON_MODULE
from hermes_blender.client import modern_request
from hermes_blender.lab import lab_execute

from .conftest import a_job, serve_while, tick_while

DEFERRED = """
import bpy
import pytest
bpy.app.driver_namespace['polls'] = 0
def check_is_finished():
    bpy.app.driver_namespace['polls'] += 1
    return {'polls': bpy.app.driver_namespace['polls']} if bpy.app.driver_namespace['polls'] >= 3 else None
result = {}
"""
NEVER = """
import bpy
import pytest
bpy.app.driver_namespace['polls'] = 0
def check_is_finished():
    bpy.app.driver_namespace['polls'] += 1
    return None
result = {}
"""


def _lab_port(bridge: Any) -> int:
    return int(bridge.lab_address.rsplit(":", 1)[1])


def _wait_for(condition: Callable[[], bool], failure: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, failure
        time.sleep(0.005)


def test_deferred_results_are_polled_each_tick_in_the_gui(service: ModuleType, tmp_path: Path, runtime: Any) -> None:
    bridge = runtime.start(service.BridgeConfig(runtime_file=tmp_path / "s.json", lab_port=0, mode=service.Mode.GUI))
    envelope = tick_while(lambda: lab_execute(_lab_port(bridge), DEFERRED))
    assert envelope == {"status": "ok", "result": {"polls": 3}}


def test_a_client_that_leaves_during_a_deferred_job_drops_it_and_the_next_request_is_answered(
    service: ModuleType, tmp_path: Path, runtime: Any
) -> None:
    bridge = runtime.start(service.BridgeConfig(runtime_file=tmp_path / "s.json", lab_port=0, mode=service.Mode.GUI))
    port = _lab_port(bridge)
    bpy.app.driver_namespace.pop("polls", None)  # an earlier test's count must not pass for this job's polls

    def leave_then_ask() -> tuple[dict[str, Any], int]:
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.sendall(json.dumps({"type": "execute", "code": NEVER, "strict_json": True}).encode() + b"\0")
            _wait_for(lambda: bpy.app.driver_namespace.get("polls", 0) >= 2, "the deferred job was never polled")
        _wait_for(lambda: bridge.open_connections == 0, "the bridge never noticed the client leave")
        polls_after_leaving = bpy.app.driver_namespace["polls"]  # its handler has returned: no poll can follow
        answer = lab_execute(port, "result = {'next': True}")
        return answer, bpy.app.driver_namespace["polls"] - polls_after_leaving

    answer, polls_since_leaving = tick_while(leave_then_ask)
    assert answer == {"status": "ok", "result": {"next": True}}
    assert polls_since_leaving == 0  # dropped, never replayed


def test_require_token_refuses_requests_without_the_runtime_files_token(
    service: ModuleType, tmp_path: Path, runtime: Any
) -> None:
    runtime_file = tmp_path / "s.json"
    bridge = runtime.start(service.BridgeConfig(runtime_file=runtime_file, lab_port=0, lab_require_token=True))
    token = json.loads(runtime_file.read_text())["token"]
    port = _lab_port(bridge)

    def ask() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        return (
            lab_execute(port, "result = {}"),
            lab_execute(port, "result = {}", token="wrong"),
            lab_execute(port, "result = {'in': True}", token=token),
        )

    without, wrong, right = serve_while(bridge.dispatcher, ask)
    assert without["status"] == wrong["status"] == "error" and "requires a token" in without["message"]
    assert right == {"status": "ok", "result": {"in": True}}


def test_switching_code_execution_off_refuses_code_on_both_listeners(
    service: ModuleType, tmp_path: Path, runtime: Any
) -> None:
    bridge = runtime.start(service.BridgeConfig(runtime_file=tmp_path / "s.json", lab_port=0, allow_code=False))

    def ask() -> tuple[dict[str, Any], Any, Any]:
        return (
            lab_execute(_lab_port(bridge), "result = {}"),
            bridge.tool_host.call_tool("execute_blender_code", {"code": "result = {}"}),
            bridge.tool_host.call_tool("get_objects_summary", {}),
        )

    envelope, outcome, summary = serve_while(bridge.dispatcher, ask)
    assert envelope["status"] == "error" and "switched off" in envelope["message"]
    assert outcome.is_error and "code_execution_disabled" in outcome.content[0]["text"]
    assert not summary.is_error  # read-only tools still work


def test_a_deferred_result_keeps_what_the_code_printed_before_and_while_polling(
    service: ModuleType, tmp_path: Path, runtime: Any
) -> None:
    bridge = runtime.start(service.BridgeConfig(runtime_file=tmp_path / "s.json", lab_port=0, mode=service.Mode.GUI))
    code = DEFERRED.replace("result = {}", "print('started')\nresult = {}").replace(
        "    bpy.app.driver_namespace['polls'] += 1\n",
        "    bpy.app.driver_namespace['polls'] += 1\n    print('poll')\n",
    )
    envelope = tick_while(lambda: lab_execute(_lab_port(bridge), code))
    assert envelope["status"] == "ok" and envelope["result"] == {"polls": 3}
    assert envelope["stdout"] == "started\npoll\npoll\npoll\n"


def test_an_mcp_client_that_leaves_during_a_deferred_job_drops_it_too(
    service: ModuleType, tmp_path: Path, runtime: Any
) -> None:
    bridge = runtime.start(service.BridgeConfig(runtime_file=tmp_path / "s.json", lab_port=None, mode=service.Mode.GUI))
    bpy.app.driver_namespace.pop("polls", None)
    token = json.loads((tmp_path / "s.json").read_text())["token"]
    port = int(bridge.endpoint.rsplit(":", 1)[1].split("/")[0])
    body, headers = modern_request("tools/call", {"name": "execute_blender_code", "arguments": {"code": NEVER}})
    head = "".join(f"{name}: {value}\r\n" for name, value in headers.items())

    def leave_then_count() -> int:
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.sendall(
                f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {token}\r\n{head}"
                f"Content-Length: {len(body)}\r\n\r\n".encode()
                + body
            )
            _wait_for(lambda: bpy.app.driver_namespace.get("polls", 0) >= 2, "the deferred job was never polled")
        _wait_for(lambda: bridge.open_connections == 0, "the bridge never noticed the client leave")
        polls = bpy.app.driver_namespace["polls"]  # its handler has returned: no poll can follow
        _wait_for(lambda: not bridge.dispatcher.pending(), "a poll was still queued")
        return bpy.app.driver_namespace["polls"] - polls

    assert tick_while(leave_then_count) == 0  # dropped: no poll after the handler returned


def test_the_same_code_sent_twice_runs_twice_in_a_fresh_namespace(
    service: ModuleType, tmp_path: Path, runtime: Any
) -> None:
    """The compile cache keeps the code object, never the run: each run starts from `result = {}` alone."""
    bridge = runtime.start(
        service.BridgeConfig(runtime_file=tmp_path / "s.json", lab_port=0, mode=service.Mode.BACKGROUND)
    )
    code = (
        "import bpy\ncount = bpy.app.driver_namespace.get('hermes_test_runs', 0) + 1\n"
        "bpy.app.driver_namespace['hermes_test_runs'] = count\n"
        "result = {'runs': count, 'leftover': 'mine' in globals()}\nmine = True"
    )
    bpy.app.driver_namespace["hermes_test_runs"] = 0

    def twice() -> list[dict[str, Any]]:
        return [lab_execute(_lab_port(bridge), code) for _ in range(2)]

    first, second = serve_while(bridge.dispatcher, twice, bridge.serve)
    assert first["result"] == {"runs": 1, "leftover": False}
    assert second["result"] == {"runs": 2, "leftover": False}


def test_the_compile_cache_keeps_small_sources_only(addon: ModuleType) -> None:
    """40 distinct 10 MB scripts once kept 420 MB alive; now only sources of a few KiB are kept compiled."""
    python_exec = importlib.import_module(f"{ADDON_MODULE}.tools.python_exec")
    job = a_job(importlib.import_module(f"{ADDON_MODULE}.dispatch").QueuedDispatcher())
    cache = python_exec._compiled_small
    cache.cache_clear()
    large = "result = {}\n" + "# padding\n" * (python_exec.CACHEABLE_SOURCE_CHARS // 10 + 1)
    assert python_exec.execute(large, job, strict_json=True)["status"] == "ok"
    assert cache.cache_info().currsize == 0
    assert python_exec.execute("result = {}", job, strict_json=True)["status"] == "ok"
    assert cache.cache_info().currsize == 1


@pytest.mark.parametrize("mode", ["EMBEDDED", "BACKGROUND"], ids=["threads", "main-loop"])
def test_a_lab_request_whose_client_left_before_its_turn_is_dropped_never_run(
    service: ModuleType, tmp_path: Path, mode: str, runtime: Any
) -> None:
    config = service.BridgeConfig(runtime_file=tmp_path / "s.json", lab_port=0, mode=service.Mode[mode])
    bridge = runtime.start(config)
    port = _lab_port(bridge)
    late = "import bpy\nbpy.app.driver_namespace['hermes_test_late_lab'] = True\nresult = {}"

    def ask() -> dict[str, Any]:
        slow = threading.Thread(target=lab_execute, args=(port, "import time\ntime.sleep(1.5)\nresult = {}"))
        slow.start()
        time.sleep(0.3)  # the slow one holds the main thread now
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            time.sleep(0.3)  # admitted by the peer check while still here (threads), or still waiting to be (loop)
            sock.sendall(json.dumps({"type": "execute", "code": late, "strict_json": True}).encode() + b"\0")
        slow.join()
        return lab_execute(port, "result = {'next': True}")

    bpy.app.driver_namespace.pop("hermes_test_late_lab", None)
    after = serve_while(bridge.dispatcher, ask, bridge.serve if mode == "BACKGROUND" else None)
    assert after == {"status": "ok", "result": {"next": True}}
    assert "hermes_test_late_lab" not in bpy.app.driver_namespace


def test_nan_and_infinities_get_the_same_error_on_both_listeners_never_a_success(
    service: ModuleType, tmp_path: Path, runtime: Any
) -> None:
    python_exec = importlib.import_module(f"{ADDON_MODULE}.tools.python_exec")
    bridge = runtime.start(service.BridgeConfig(runtime_file=tmp_path / "s.json", lab_port=0))
    code = "result = {'x': float('nan'), 'y': [float('inf')]}"

    def ask() -> tuple[dict[str, Any], dict[str, Any], Any]:
        lab = lab_execute(_lab_port(bridge), code, strict_json=False)
        strict = lab_execute(_lab_port(bridge), code, strict_json=True)
        return lab, strict, bridge.tool_host.call_tool("execute_blender_code", {"code": code})

    lab, strict, outcome = serve_while(bridge.dispatcher, ask)
    assert lab == strict == {"status": "error", "message": python_exec.NOT_FINITE}
    assert outcome.is_error and python_exec.NOT_FINITE in outcome.content[0]["text"]
    assert "execution_error" in outcome.content[0]["text"]
