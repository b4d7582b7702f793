"""The Blender Lab wire against a real headless bridge: every documented answer, and it keeps serving."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hermes_blender.client import BridgeClient
from hermes_blender.contract.liveness import RuntimeFileSpec
from hermes_blender.headless import HeadlessBlender
from hermes_blender.lab import lab_exchange, lab_execute
from tests.other_user import AS_NOBODY, ask_lab, needs_another_user

SUMMARY_CODE = """
import bpy
def main():
    return {"names": sorted(o.name for o in bpy.context.scene.objects)}
result = main()
"""


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    runtime_file = tmp_path_factory.mktemp("lab") / "server.json"
    with HeadlessBlender(runtime_file, lab_port=0):
        yield int(json.loads(runtime_file.read_text())["lab"].rsplit(":", 1)[1])


def _still_serving(port: int) -> None:
    assert lab_execute(port, SUMMARY_CODE) == {"status": "ok", "result": {"names": ["Camera", "Cube", "Light"]}}


def test_tool_style_code_gets_an_ok_envelope(lab: int) -> None:
    _still_serving(lab)


def test_result_must_be_a_dict(lab: int) -> None:
    envelope = lab_execute(lab, "result = [1, 2]")
    assert envelope == {
        "status": "error",
        "message": 'The `result` variable must be a dict, not list. Wrap your return value: `result = {"key": value}`',
    }
    _still_serving(lab)


def test_unserialisable_result_fails_in_strict_mode_and_falls_back_to_repr_otherwise(lab: int) -> None:
    code = "import bpy\nresult = {'scene': bpy.context.scene}"
    strict = lab_execute(lab, code, strict_json=True)
    assert strict["status"] == "error" and strict["message"].startswith("The `result` value is not JSON-serializable")
    lenient = lab_execute(lab, code, strict_json=False)
    assert lenient["status"] == "ok" and "Scene" in lenient["result"]["scene"]


def test_printed_output_is_captured_into_the_reply(lab: int) -> None:
    envelope = lab_execute(lab, "import sys\nprint('hello')\nprint('careful', file=sys.stderr)\nresult = {}")
    assert envelope == {"status": "ok", "result": {}, "stdout": "hello\n", "stderr": "careful\n"}
    quiet = lab_execute(lab, "result = {}")
    assert "stdout" not in quiet and "stderr" not in quiet


def test_a_raising_snippet_returns_its_traceback_and_output_so_far(lab: int) -> None:
    envelope = lab_execute(lab, "print('before')\nx = 1\nraise ValueError('broken on purpose')")
    assert envelope["status"] == "error"
    assert "ValueError: broken on purpose" in envelope["message"] and "line 3" in envelope["message"]
    assert "python_exec" not in envelope["message"]  # only the agent's frames
    assert envelope["stdout"] == "before\n"
    _still_serving(lab)


@pytest.mark.parametrize(
    "call",
    [
        "bpy.ops.wm.quit_blender()",
        "bpy.ops.wm.read_factory_settings()",
        "bpy.ops.wm.read_userpref()",
        "bpy.ops.wm.read_factory_userpref()",
    ],
)
def test_quitting_or_resetting_blender_is_blocked(lab: int, call: str) -> None:
    envelope = lab_execute(lab, f"import bpy\n{call}\nresult = {{}}")
    assert envelope["status"] == "error" and "is not allowed in LLM-generated code" in envelope["message"]
    _still_serving(lab)


def test_sys_exit_is_blocked(lab: int) -> None:
    envelope = lab_execute(lab, "import sys\nsys.exit(0)")
    assert envelope == {"status": "error", "message": "sys.exit() is not allowed in LLM-generated code"}
    _still_serving(lab)


def test_unknown_type_and_bad_strict_json_are_refused_before_running(lab: int) -> None:
    def ask(request: dict) -> dict:
        return json.loads(lab_exchange(lab, json.dumps(request).encode() + b"\0"))

    assert ask({"type": "get_scene_info", "params": {}}) == {
        "status": "error",
        "message": "Unknown request type: 'get_scene_info'",
    }
    missing = ask({"type": "execute", "code": "result = {'ran': True}"})
    assert missing["status"] == "error" and "strict_json" in missing["message"]
    assert ask({"type": "execute", "code": "result = {}", "strict_json": True, "extra": 1})["status"] == "ok"


def test_an_oversize_request_is_refused(lab: int) -> None:
    payload = (
        json.dumps({"type": "execute", "code": "#" * (10 * 1024 * 1024 + 10), "strict_json": True}).encode() + b"\0"
    )
    reply = json.loads(lab_exchange(lab, payload))
    assert reply["status"] == "error" and reply["message"].startswith("Request too large")
    _still_serving(lab)


def test_a_request_that_never_finishes_times_out_and_others_are_served_meanwhile(lab: int) -> None:
    with socket.create_connection(("127.0.0.1", lab), timeout=30) as stalled:
        stalled.sendall(b'{"type": "execute", "code": "result = {}"')  # no end, no NUL
        _still_serving(lab)
        reply = stalled.recv(4096)
    assert json.loads(reply.rstrip(b"\0")) == {"status": "error", "message": "Client timed out"}


def test_http_on_the_lab_port_gets_a_fast_http_answer(lab: int) -> None:
    started = time.monotonic()
    reply = lab_exchange(lab, b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2\r\n\r\n{}")
    assert reply.startswith(b"HTTP/1.1 400 Bad Request") and b"Blender Lab bridge protocol" in reply
    assert b"/mcp" in reply  # names the MCP endpoint to use instead
    assert time.monotonic() - started < 5
    _still_serving(lab)


def test_bare_json_without_the_nul_gets_a_fast_explanation(lab: int) -> None:
    with socket.create_connection(("127.0.0.1", lab), timeout=10) as sock:
        sock.sendall(b'{"type": "get_scene_info", "params": {}}')
        started = time.monotonic()
        reply = sock.recv(4096)
    assert time.monotonic() - started < 5
    assert b"end each JSON request with a NUL byte" in reply
    _still_serving(lab)


def test_binary_garbage_gets_an_error_and_nothing_runs(lab: int) -> None:
    reply = json.loads(lab_exchange(lab, b"\x00\xff\xfe\x00"))
    assert reply["status"] == "error"
    reply = json.loads(lab_exchange(lab, b"\x89PNG\r\n\x1a\n"))
    assert reply == {"status": "error", "message": "Expected one JSON object followed by a NUL byte"}
    _still_serving(lab)


def test_deferred_results_are_refused_in_background_mode(lab: int) -> None:
    envelope = lab_execute(lab, "def check_is_finished():\n    return {'done': True}\nresult = {}")
    assert envelope["status"] == "error" and "only supported by the interactive (GUI) bridge" in envelope["message"]


def test_a_busy_lab_port_is_reported_and_the_mcp_endpoint_still_starts(lab: int, tmp_path: Path) -> None:
    runtime_file = tmp_path / "server.json"
    with HeadlessBlender(runtime_file, lab_port=lab) as second:
        record = json.loads(runtime_file.read_text())
        assert "lab" not in record and f"port {lab}" in record["lab_error"] and "already in use" in record["lab_error"]
        assert second.endpoint is not None and record["http"].startswith("http://127.0.0.1:")
        second.stop()  # its log is complete once it has stopped
        assert "Blender Lab listener not started" in second.log_tail()
    _still_serving(lab)


@needs_another_user
def test_another_os_user_cannot_run_code_in_this_users_blender(lab: int) -> None:
    """The attack: a process of another user (nobody) on the same machine sends code to the Lab port."""
    marker = "import pathlib; pathlib.Path('/tmp/hermes-lab-owned').write_text('x'); result = {}"
    answer = ask_lab(lab, marker, as_user=AS_NOBODY)
    assert answer["status"] == "error" and "belongs to another OS user" in answer["message"]
    assert not Path("/tmp/hermes-lab-owned").exists()
    assert ask_lab(lab, "result = {'mine': True}") == {"status": "ok", "result": {"mine": True}}
    _still_serving(lab)


def test_the_lab_listener_is_off_unless_asked_for(tmp_path: Path) -> None:
    with HeadlessBlender(tmp_path / "server.json"):
        record = json.loads((tmp_path / "server.json").read_text())
    assert "lab" not in record and "lab_error" not in record


@pytest.mark.parametrize("raised", ["KeyboardInterrupt", "GeneratorExit", "BaseException('x')"])
def test_agent_code_raising_any_base_exception_is_an_error_reply_and_blender_survives(lab: int, raised: str) -> None:
    reply = lab_execute(lab, f"raise {raised}")
    assert reply["status"] == "error" and raised.split("(")[0] in reply["message"]
    _still_serving(lab)


def test_a_syntax_error_shows_the_agents_code_not_the_bridges_frames(lab: int) -> None:
    reply = lab_execute(lab, "result = {\n  'a': 1,,\n}")
    assert reply["status"] == "error" and "SyntaxError" in reply["message"]
    assert "python_exec" not in reply["message"] and "Traceback" not in reply["message"]


MCP_SIDE = ("catalogue", "mcp_endpoint", "mcp_http", "tool_host")
LOADED = (
    "import sys\nprefix = 'bl_ext.user_default.hermes_bridge.'\n"
    f"result = {{'loaded': sorted(n.rsplit('.', 1)[-1] for n in sys.modules if n.startswith(prefix)"
    f" and n.rsplit('.', 1)[-1] in {MCP_SIDE!r})}}"
)


def test_the_mcp_side_loads_with_its_first_client_and_never_for_the_lab_alone(tmp_path: Path) -> None:
    """Blender's start (every start that loads the add-on) pays nothing for the MCP tools, protocol and HTTP: a
    bridge that only answers the Lab's code never loads them, and the MCP listener's first client is served
    as ever, loading them then (docs/performance.md)."""
    runtime_file = tmp_path / "server.json"
    with HeadlessBlender(runtime_file, lab_port=0):
        port = int(json.loads(runtime_file.read_text())["lab"].rsplit(":", 1)[1])
        assert lab_execute(port, LOADED) == {"status": "ok", "result": {"loaded": []}}
        summary = asyncio.run(BridgeClient(RuntimeFileSpec(path=str(runtime_file))).call_tool("get_objects_summary"))
        assert not summary.is_error and summary.structured is not None and summary.structured["total_objects"] == 3
        assert lab_execute(port, LOADED) == {"status": "ok", "result": {"loaded": sorted(MCP_SIDE)}}


def test_the_lab_listener_publishes_its_own_runtime_file_while_it_runs_and_withdraws_it(tmp_path: Path) -> None:
    runtime_file = tmp_path / "Blender" / "server.json"
    lab_file = tmp_path / "Blender" / "lab" / "server.json"
    with HeadlessBlender(runtime_file, lab_port=0) as blender:
        record = json.loads(lab_file.read_text())
        port = int(json.loads(runtime_file.read_text())["lab"].rsplit(":", 1)[1])
        assert record["pid"] == blender.pid and record["http"] == f"http://127.0.0.1:{port}"
        assert record["protocol"] == "blender-lab" and record["token"] == ""
        assert lab_file.stat().st_mode & 0o077 == 0
    assert not lab_file.exists() and not runtime_file.exists()
    with HeadlessBlender(runtime_file):  # the Lab off: nothing says a Lab listener runs
        assert not lab_file.exists()
