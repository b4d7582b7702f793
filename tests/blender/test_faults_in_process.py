"""Faults that need this process's view: a job past its timeout, and leaks across many restarts."""

from __future__ import annotations

import errno
import gc
import importlib
import json
import threading
from pathlib import Path
from types import ModuleType
from typing import Any

import psutil
import pytest

from hermes_blender.blender_host import ADDON_MODULE

from .conftest import serve_while


def test_a_call_running_past_its_timeout_is_reported_and_the_bridge_answers_after_it(
    service: ModuleType, tmp_path: Path, runtime: Any
) -> None:
    """The queued job's side (cancelled at its deadline, never run late) is held in test_dispatch."""
    bridge = runtime.start(service.BridgeConfig(runtime_file=tmp_path / "s.json", lab_port=None, job_timeout=0.3))

    def calls() -> tuple[str, dict]:
        slow = bridge.tool_host.call_tool("execute_blender_code", {"code": "import time\ntime.sleep(30)\nresult = {}"})
        after = bridge.tool_host.call_tool("get_objects_summary", {})
        return slow.content[0]["text"], json.loads(after.content[0]["text"])

    slow, after = serve_while(bridge.dispatcher, calls)
    assert '"state":"interrupted"' in slow and "was stopped" in slow  # the interrupt ended the sleep itself
    assert after["status"] == "ok"


@pytest.mark.parametrize("mode", ["EMBEDDED", "BACKGROUND"], ids=["threads", "main-loop"])
def test_two_hundred_start_stop_cycles_leak_no_threads_sockets_or_files(
    service: ModuleType, tmp_path: Path, mode: str, runtime: Any
) -> None:
    process = psutil.Process()
    runtime_file = tmp_path / "server.json"
    config = service.BridgeConfig(runtime_file=runtime_file, lab_port=0, mode=service.Mode[mode])
    warm = runtime.start(config)
    runtime.stop()
    # Earlier tests' garbage closes descriptors whenever it is collected (an interrupted Cycles render leaves its
    # engine in a reference cycle): collected first, so the count is this test's own.
    gc.collect()
    threads, fds, connections = threading.active_count(), process.num_fds(), len(process.net_connections())
    for _ in range(200):
        bridge = runtime.start(config)
        assert runtime_file.exists() and bridge.lab_address is not None
        runtime.stop()
        assert not runtime_file.exists()
    assert warm is not None
    assert threading.active_count() == threads
    assert process.num_fds() == fds
    assert len(process.net_connections()) == connections


def _listening_ports() -> set[int]:
    return {c.laddr.port for c in psutil.Process().net_connections(kind="tcp") if c.status == psutil.CONN_LISTEN}


def test_a_start_that_fails_after_the_mcp_listener_is_up_leaves_nothing_listening_and_says_why(
    service: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, runtime: Any
) -> None:
    """The Blender Lab listener cannot get its wake-up pair (out of descriptors) once the MCP one already listens."""
    listener = importlib.import_module(f"{ADDON_MODULE}.net.threaded")
    real = listener.socket.socketpair
    calls: list[int] = []

    def second_fails(*args: Any) -> Any:
        calls.append(1)
        if len(calls) == 2:
            raise OSError(errno.EMFILE, "Too many open files")
        return real(*args)

    monkeypatch.setattr(listener.socket, "socketpair", second_fails)
    before = _listening_ports()
    config = service.BridgeConfig(runtime_file=tmp_path / "s.json", lab_port=0)
    with pytest.raises(service.BridgeError, match="Too many open files"):
        runtime.start(config)
    assert _listening_ports() == before and len(calls) == 2
    assert "Too many open files" in runtime.last_error
    assert not (tmp_path / "s.json").exists()
