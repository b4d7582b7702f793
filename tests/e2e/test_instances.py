"""Several Blenders serving at once: server.json names the newest live one, each keeps its own record."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

from hermes_blender.client import BridgeClient
from hermes_blender.contract.liveness import RuntimeFileSpec
from hermes_blender.headless import HeadlessBlender
from hermes_blender.instances import instance_spec, live_instances


def _named(runtime_file: Path) -> int | None:
    return json.loads(runtime_file.read_text())["pid"] if runtime_file.exists() else None


def _serving(runtime_file: Path) -> list[int]:
    return [instance.endpoint.pid for instance in live_instances(RuntimeFileSpec(path=str(runtime_file)))]


def _answers(spec: RuntimeFileSpec) -> int:
    """The pid of the Blender that answered, asked through the bridge itself."""
    code = "import os\nresult = {'pid': os.getpid()}"
    result = asyncio.run(BridgeClient(spec).call_tool("execute_blender_code", {"code": code}))
    return result.data()["result"]["pid"]


def test_three_bridges_started_and_stopped_in_mixed_orders_always_leave_the_newest_live_one_named(
    tmp_path: Path,
) -> None:
    runtime_file = tmp_path / "Blender" / "server.json"
    first, second, third = (HeadlessBlender(runtime_file) for _ in range(3))
    with first, second:
        with third:
            assert _named(runtime_file) == third.pid
            assert _serving(runtime_file) == [third.pid, second.pid, first.pid]
            for blender in (first, second, third):  # each one reachable on purpose through its own record
                assert _answers(instance_spec(RuntimeFileSpec(path=str(runtime_file)), blender.pid)) == blender.pid
            second.stop()  # not the named one: nothing moves
            assert _named(runtime_file) == third.pid
            assert _serving(runtime_file) == [third.pid, first.pid]
        # The named one stopped: the newest still running is promoted, and Hermes's reader reaches it.
        assert _named(runtime_file) == first.pid
        assert _answers(RuntimeFileSpec(path=str(runtime_file))) == first.pid
    assert not runtime_file.exists()
    assert list((runtime_file.parent / "servers").glob("*.json")) == []


def test_status_lists_every_serving_blender_and_call_pid_picks_one(tmp_path: Path) -> None:
    runtime_file = tmp_path / "Blender" / "server.json"
    with HeadlessBlender(runtime_file) as older, HeadlessBlender(runtime_file) as newer:
        code = "import os\nresult = {'pid': os.getpid()}"
        called = subprocess.run(
            [sys.executable, "-m", "hermes_blender.cli", "call", "execute_blender_code", "--json"]
            + ["--runtime-file", str(runtime_file), "--pid", str(older.pid), "--arguments", json.dumps({"code": code})],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert called.returncode == 0, called.stderr
        assert json.loads(called.stdout)["result"]["result"]["pid"] == older.pid
        missing = subprocess.run(
            [sys.executable, "-m", "hermes_blender.cli", "call", "get_objects_summary"]
            + ["--runtime-file", str(runtime_file), "--pid", "1"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert missing.returncode == 3
        assert f"no Blender with pid 1 is serving (serving: {newer.pid}, {older.pid})" in missing.stderr
