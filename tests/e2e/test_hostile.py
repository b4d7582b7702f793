"""Load, faults and hostile clients against real headless bridges: nothing lost, nothing stops."""

from __future__ import annotations

import asyncio
import http.client
import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hermes_blender.client import BridgeClient, modern_request
from hermes_blender.contract.liveness import RuntimeFileSpec
from hermes_blender.errors import LiveEndpointUnavailable
from hermes_blender.headless import HeadlessBlender
from hermes_blender.lab import lab_execute


class Link:
    """A keep-alive MCP connection speaking raw JSON-RPC."""

    def __init__(self, blender: HeadlessBlender, token: str | None = None) -> None:
        record = json.loads(blender.runtime_file.read_text())
        self.port = int(record["http"].rsplit(":", 1)[1])
        self.token = token if token is not None else record["token"]
        self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)

    def send(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        modern: bool = True,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, dict[str, str], Any]:
        if modern:
            body, base = modern_request(method, params or {})
        else:
            body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params or {}}).encode()
            base = {"Content-Type": "application/json"}
        base["Authorization"] = f"Bearer {self.token}"
        self.conn.request("POST", "/mcp", body=body, headers={**base, **(headers or {})})
        response = self.conn.getresponse()
        raw = response.read()
        data = json.loads(raw) if response.getheader("Content-Type", "").startswith("application/json") else raw
        return response.status, {k.lower(): v for k, v in response.getheaders()}, data

    def call(self, name: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        status, _, body = self.send("tools/call", {"name": name, "arguments": arguments or {}})
        assert status == 200, body
        return body["result"]


@pytest.fixture(scope="module")
def blender(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HeadlessBlender]:
    with HeadlessBlender(tmp_path_factory.mktemp("hostile") / "server.json", lab_port=0) as running:
        yield running


def _lab_port(blender: HeadlessBlender) -> int:
    return int(json.loads(blender.runtime_file.read_text())["lab"].rsplit(":", 1)[1])


def _active(result: dict[str, Any]) -> str:
    return json.loads(result["content"][0]["text"])["active_object"]


def test_eight_clients_times_500_calls_have_no_errors_and_match_the_scene(blender: HeadlessBlender) -> None:
    failures: list[str] = []

    def client() -> None:
        link = Link(blender)
        for _ in range(500):
            result = link.call("get_objects_summary")
            if result["isError"] or _active(result) != "Cube":
                failures.append(result["content"][0]["text"][:200])

    threads = [threading.Thread(target=client) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []


def test_a_hundred_idle_and_slow_connections_do_not_block_anyone(blender: HeadlessBlender) -> None:
    port, lab = Link(blender).port, _lab_port(blender)
    held = [socket.create_connection(("127.0.0.1", port)) for _ in range(50)]
    held += [socket.create_connection(("127.0.0.1", lab)) for _ in range(50)]
    for index, sock in enumerate(held):
        if index % 2:
            sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n" if index < 50 else b'{"type": "exec')
    try:
        assert not Link(blender).call("get_objects_summary")["isError"]
        assert lab_execute(lab, "result = {'fine': True}") == {"status": "ok", "result": {"fine": True}}
    finally:
        for sock in held:
            sock.close()


def test_missing_wrong_and_old_tokens_are_refused(blender: HeadlessBlender, tmp_path: Path) -> None:
    with HeadlessBlender(tmp_path / "server.json") as earlier:
        old_token = json.loads(earlier.runtime_file.read_text())["token"]
    for token in ("", "wrong", old_token):
        status, headers, _ = Link(blender, token=token).send("tools/list")
        assert status == 401 and headers["www-authenticate"].startswith("Bearer")


def test_a_client_that_disconnects_mid_execution_has_it_stopped_never_replayed_and_the_next_is_answered(
    blender: HeadlessBlender, tmp_path: Path
) -> None:
    link = Link(blender)
    reset = "bpy.app.driver_namespace['starts'] = 0\nbpy.app.driver_namespace['runs'] = 0\nresult = {}"
    link.call("execute_blender_code", {"code": reset})
    started = tmp_path / "started"
    code = (
        f"import pathlib, time\nbpy.app.driver_namespace['starts'] += 1\npathlib.Path({str(started)!r}).touch()\n"
        "time.sleep(5)\nbpy.app.driver_namespace['runs'] += 1\nresult = {}"
    )
    body, headers = modern_request("tools/call", {"name": "execute_blender_code", "arguments": {"code": code}}, 9)
    head = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
    with socket.create_connection(("127.0.0.1", link.port)) as sock:
        sock.sendall(
            (
                f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{link.port}\r\nAuthorization: Bearer {link.token}\r\n"
                f"{head}Content-Length: {len(body)}\r\n\r\n"
            ).encode()
            + body
        )
        while not started.exists():  # hang up once it runs
            time.sleep(0.01)
    counted = "result = {k: bpy.app.driver_namespace[k] for k in ('starts', 'runs')}"
    runs = link.call("execute_blender_code", {"code": counted})
    # Started once, stopped where it slept when its client hung up (the cancel signal), never run again.
    assert runs["structuredContent"]["result"] == {"starts": 1, "runs": 0}


def test_loading_blend_files_while_requests_flow_loses_nothing(blender: HeadlessBlender, tmp_path: Path) -> None:
    other = tmp_path / "other.blend"
    Link(blender).call(
        "execute_blender_code",
        {
            "code": (
                "bpy.ops.wm.read_homefile(use_factory_startup=True)\nbpy.data.objects['Cube'].name = 'Renamed'\n"
                f"bpy.ops.wm.save_as_mainfile(filepath={str(other)!r}, copy=True)\n"
                "bpy.ops.wm.read_homefile(use_factory_startup=True)\nresult = {}"
            )
        },
    )
    stop = threading.Event()
    seen: list[str] = []
    failures: list[str] = []

    def reader() -> None:
        link = Link(blender)
        while not stop.is_set():
            result = link.call("get_objects_summary")
            (failures if result["isError"] else seen).append(
                result["content"][0]["text"][:100] if result["isError"] else _active(result)
            )

    readers = [threading.Thread(target=reader) for _ in range(4)]
    for thread in readers:
        thread.start()
    loader = Link(blender)
    for index in range(10):
        code = (
            f"bpy.ops.wm.open_mainfile(filepath={str(other)!r})"
            if index % 2 == 0
            else "bpy.ops.wm.read_homefile(use_factory_startup=True)"
        )
        assert not loader.call("execute_blender_code", {"code": code + "\nresult = {}"})["isError"]
    stop.set()
    for thread in readers:
        thread.join()
    assert failures == [] and set(seen) == {"Cube", "Renamed"}


def test_hundreds_of_abandoned_sessions_are_bounded_and_a_live_session_keeps_working(blender: HeadlessBlender) -> None:
    link = Link(blender)
    handshake = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    first = link.send("initialize", handshake, modern=False)[1]["mcp-session-id"]
    live = link.send("initialize", handshake, modern=False)[1]["mcp-session-id"]
    for index in range(600):
        link.send("initialize", handshake, modern=False)
        if index % 50 == 0:
            assert link.send("tools/list", modern=False, headers={"Mcp-Session-Id": live})[0] == 200
    assert link.send("tools/list", modern=False, headers={"Mcp-Session-Id": live})[0] == 200
    assert link.send("tools/list", modern=False, headers={"Mcp-Session-Id": first})[0] == 404  # evicted


def test_a_stale_runtime_file_whose_pid_belongs_to_another_process_fails_fast_and_clearly(tmp_path: Path) -> None:
    stranger = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        closed = socket.socket()
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
        closed.close()
        runtime_file = tmp_path / "server.json"
        runtime_file.write_text(
            json.dumps({"http": f"http://127.0.0.1:{port}", "token": "stale-token-0123456789", "pid": stranger.pid})
        )
        client = BridgeClient(RuntimeFileSpec(path=str(runtime_file)), timeout=10)
        with pytest.raises(LiveEndpointUnavailable, match=f"pid {stranger.pid} .* is not a Blender process") as caught:
            asyncio.run(client.call_tool("get_objects_summary"))  # refused before any byte is sent
        assert caught.value.state == "endpoint_unavailable"
    finally:
        stranger.kill()
        stranger.wait()
