"""Faults that need this process's view: a job past its timeout, and leaks across many restarts."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from types import ModuleType

import psutil
import pytest

from .conftest import serve_while


def test_a_call_running_past_its_timeout_is_reported_and_the_bridge_answers_after_it(
    service: ModuleType, tmp_path: Path
) -> None:
    """The queued job's side (cancelled at its deadline, never run late) is held in test_dispatch."""
    bridge = service.start(service.BridgeConfig(runtime_file=tmp_path / "s.json", lab_port=None, job_timeout=0.3))

    def calls() -> tuple[str, dict]:
        slow = bridge.call_tool("execute_blender_code", {"code": "import time\ntime.sleep(30)\nresult = {}"})
        after = bridge.call_tool("get_objects_summary", {})
        return slow.content[0]["text"], json.loads(after.content[0]["text"])

    slow, after = serve_while(bridge.dispatcher, calls)
    assert '"state":"interrupted"' in slow and "was stopped" in slow  # the interrupt ended the sleep itself
    assert after["status"] == "ok"


@pytest.mark.parametrize("main_thread", [False, True], ids=["threads", "main-loop"])
def test_two_hundred_start_stop_cycles_leak_no_threads_sockets_or_files(
    service: ModuleType, tmp_path: Path, main_thread: bool
) -> None:
    process = psutil.Process()
    runtime_file = tmp_path / "server.json"
    config = service.BridgeConfig(runtime_file=runtime_file, lab_port=0, main_thread=main_thread)
    warm = service.start(config)
    service.stop()
    threads, fds, connections = threading.active_count(), process.num_fds(), len(process.net_connections())
    for _ in range(200):
        bridge = service.start(config)
        assert runtime_file.exists() and bridge.lab_address is not None
        service.stop()
        assert not runtime_file.exists()
    assert warm is not None
    assert threading.active_count() == threads
    assert process.num_fds() == fds
    assert len(process.net_connections()) == connections
