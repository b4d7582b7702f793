"""`hermes-blender lab`: the official Blender Lab server (a stand-in here: its source is not reachable) is offered,
and reaches the Lab port, only while the user's own Lab listener runs there; and the relay's own life (the official
server ending, the client leaving, what it will not pass on)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import IO, Any

import psutil
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from hermes_blender.headless import HeadlessBlender
from hermes_blender.lab_relay import child_command
from tests.other_user import AS_NOBODY, needs_another_user

pytestmark = pytest.mark.timeout(300)
STAND_IN = Path(__file__).resolve().parents[1] / "lab" / "official_stand_in.py"
RELAY = [sys.executable, "-m", "hermes_blender.cli", "lab"]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _session(
    lab_file: Path,
    port: int,
    body: Callable[[Client], Awaitable[Any]],
    heard: list[str] | None = None,
    host: str = "127.0.0.1",
) -> Any:
    """One SDK client session through the relay in front of the stand-in; `heard`: the notifications' methods."""
    command = [*RELAY, "--runtime-file", str(lab_file), "--", sys.executable, str(STAND_IN)]
    env = {"BLENDER_MCP_HOST": host, "BLENDER_MCP_PORT": str(port)}
    params = StdioServerParameters(command=command[0], args=command[1:], env=env)

    async def note(message: Any) -> None:
        if heard is not None:
            heard.append(getattr(message, "method", repr(message)))

    async def main() -> Any:
        client = Client(stdio_client(params), read_timeout_seconds=60, message_handler=note)  # type: ignore[arg-type]
        async with client:
            return await body(client)

    return asyncio.run(main())


class Listener:
    """A plain listener on `port` that records what reaches it (another user's, when run as one)."""

    def __init__(self, port: int) -> None:
        self.received = bytearray()
        self._sock = socket.create_server(("127.0.0.1", port))
        self._sock.settimeout(0.2)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(1)
                try:
                    self.received += conn.recv(65536)
                    conn.sendall(b'{"status": "ok", "result": {"from": "a stranger"}}\0')
                except OSError:
                    pass

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self._sock.close()


def test_with_the_lab_listener_off_no_tool_is_offered_and_a_call_never_reaches_the_port(tmp_path: Path) -> None:
    port = _free_port()
    stranger = Listener(port)  # holds the port the official server dials, as anyone may while the Lab is off
    try:

        async def body(client: Client) -> tuple[Any, Any]:
            tools = await client.list_tools()
            return tools, await client.call_tool("execute_blender_code", {"code": "result = {'key': 'sk-secret'}"})

        tools, called = _session(tmp_path / "Blender" / "lab" / "server.json", port, body)
    finally:
        stranger.close()
    assert tools.tools == []
    payload = json.loads(called.content[0].text)
    assert (
        called.is_error and payload["state"] == "lab_listener_off" and "Blender Lab listener" in payload["user_action"]
    )
    assert stranger.received == b""


def test_with_the_users_lab_listener_on_its_tools_are_offered_and_reach_blender(tmp_path: Path) -> None:
    runtime_file = tmp_path / "Blender" / "server.json"
    port = _free_port()
    with HeadlessBlender(runtime_file, lab_port=port):

        async def body(client: Client) -> tuple[Any, Any]:
            tools = await client.list_tools()
            code = "import bpy\nresult = {'names': sorted(o.name for o in bpy.data.objects)}"
            return tools, await client.call_tool("execute_blender_code", {"code": code})

        tools, called = _session(runtime_file.parent / "lab" / "server.json", port, body)
    assert [tool.name for tool in tools.tools] == ["execute_blender_code"]
    assert not called.is_error and "Cube" in called.content[0].text


@needs_another_user
def test_another_users_listener_on_the_port_is_refused_while_the_users_lab_file_is_stale(tmp_path: Path) -> None:
    """The user's Lab file left by a Blender that died names a pid now gone; another OS user listens on the port."""
    port = _free_port()
    lab_file = tmp_path / "Blender" / "lab" / "server.json"
    lab_file.parent.mkdir(parents=True)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    lab_file.write_text(json.dumps({"http": f"http://127.0.0.1:{port}", "token": "", "pid": dead.pid}))
    lab_file.chmod(0o600)
    script = (
        "import socket,sys\ns=socket.create_server(('127.0.0.1',int(sys.argv[1])))\nprint('up',flush=True)\n"
        "c,_=s.accept()\nprint(c.recv(65536),flush=True)\n"
    )
    stranger = subprocess.Popen(
        [*AS_NOBODY, "/usr/bin/python3", "-c", script, str(port)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert stranger.stdout is not None and stranger.stdout.readline().strip() == "up"

        async def body(client: Client) -> Any:
            return await client.call_tool("execute_blender_code", {"code": "result = {}"})

        called = _session(lab_file, port, body)
    finally:
        stranger.kill()
        heard = stranger.communicate(timeout=30)[0]
    assert called.is_error and json.loads(called.content[0].text)["state"] == "lab_listener_off"
    assert heard == "", heard


@needs_another_user
def test_with_localhost_named_another_users_listener_on_ipv6_loopback_shuts_the_gate(tmp_path: Path) -> None:
    """The user's Lab listener holds 127.0.0.1:port, but the official server dials `localhost`, which may reach ::1
    first, where another OS user listens: the gate stays shut."""
    runtime_file = tmp_path / "Blender" / "server.json"
    port = _free_port()
    script = (
        "import socket,sys\ns=socket.create_server(('::1',int(sys.argv[1])),family=socket.AF_INET6)\n"
        "print('up',flush=True)\nc,_=s.accept()\nprint(c.recv(65536),flush=True)\n"
    )
    with HeadlessBlender(runtime_file, lab_port=port):
        stranger = subprocess.Popen(
            [*AS_NOBODY, "/usr/bin/python3", "-c", script, str(port)], stdout=subprocess.PIPE, text=True
        )
        try:
            assert stranger.stdout is not None and stranger.stdout.readline().strip() == "up"

            async def body(client: Client) -> tuple[Any, Any]:
                tools = await client.list_tools()
                return tools, await client.call_tool("execute_blender_code", {"code": "result = {'key': 'sk-1'}"})

            tools, called = _session(runtime_file.parent / "lab" / "server.json", port, body, host="localhost")
        finally:
            stranger.kill()
            heard = stranger.communicate(timeout=30)[0]
    assert heard == "", heard
    assert tools.tools == [] and called.is_error
    assert "also listens on localhost" in json.loads(called.content[0].text)["error"]


def test_the_gate_opening_and_shutting_mid_session_is_told_and_the_list_follows(tmp_path: Path) -> None:
    """One session: no Blender, then the user's Blender with its Lab listener on the port, then none again."""
    runtime_file = tmp_path / "Blender" / "server.json"
    port = _free_port()
    heard: list[str] = []
    blender = HeadlessBlender(runtime_file, lab_port=port)

    async def told(count: int) -> None:
        while heard.count("notifications/tools/list_changed") < count:
            await asyncio.sleep(0.1)

    async def body(client: Client) -> dict[str, Any]:
        seen: dict[str, Any] = {"off": [tool.name for tool in (await client.list_tools()).tools]}
        await asyncio.to_thread(blender.__enter__)
        try:
            await asyncio.wait_for(told(1), 60)
            seen["on"] = [tool.name for tool in (await client.list_tools()).tools]
            seen["call"] = await client.call_tool("execute_blender_code", {"code": "result = {'on': True}"})
        finally:
            await asyncio.to_thread(blender.__exit__, None, None, None)
        await asyncio.wait_for(told(2), 60)
        seen["off again"] = [tool.name for tool in (await client.list_tools()).tools]
        return seen

    seen = _session(runtime_file.parent / "lab" / "server.json", port, body, heard)
    assert seen["off"] == [] and seen["on"] == ["execute_blender_code"] and seen["off again"] == []
    assert not seen["call"].is_error and '"on":true' in seen["call"].content[0].text
    assert heard.count("notifications/tools/list_changed") == 2


class RawRelay:
    """The relay as a process, its stdio driven line by line (what no SDK client sends: batches, broken lines)."""

    def __init__(self, lab_file: Path, port: int, command: list[str], **env: str) -> None:
        self.process = subprocess.Popen(
            [*RELAY, "--runtime-file", str(lab_file), "--", *command],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env={**os.environ, "BLENDER_MCP_PORT": str(port), **env},
        )
        self._in: IO[bytes] = self.process.stdin  # type: ignore[assignment]
        self._out: IO[bytes] = self.process.stdout  # type: ignore[assignment]

    def send(self, line: bytes) -> None:
        self._in.write(line + b"\n")
        self._in.flush()

    def ask(self, message: dict[str, Any]) -> Any:
        self.send(json.dumps(message).encode())
        return self.answer()

    def answer(self) -> Any:
        line = self._out.readline()
        assert line, "the relay ended"
        return json.loads(line)

    def handshake(self) -> dict[str, Any]:
        """The initialize handshake, as a client that speaks it makes it."""
        params = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}
        answer = self.ask({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params})
        self.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
        return answer

    def close(self) -> int:
        self._in.close()
        code = self.process.wait(60)
        self._out.close()
        return code


CALL = {"name": "execute_blender_code", "arguments": {"code": "result = {'key': 'sk-secret'}"}}


def test_nothing_the_client_sends_while_the_lab_is_off_reaches_the_port(tmp_path: Path) -> None:
    """A batch holding a call (the stand-in, on mcp 2, runs it) and two messages on one line parted by a carriage
    return (its reader, as the official server's, takes that for a line end): each is answered here."""
    port = _free_port()
    stranger = Listener(port)
    relay = RawRelay(tmp_path / "lab" / "server.json", port, [sys.executable, str(STAND_IN)])
    try:
        offered = relay.handshake()["result"]["capabilities"]
        batch = relay.ask([{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": CALL}])
        ping = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "ping"}).encode()
        call = json.dumps({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": CALL}).encode()
        parted = (relay.send(ping + b"\r" + call), relay.answer())[1]
        last = relay.ask({"jsonrpc": "2.0", "id": 4, "method": "ping"})  # answered after all the above was judged
        discover = relay.ask({"jsonrpc": "2.0", "id": 5, "method": "server/discover", "params": {}})
    finally:
        code = relay.close()
        stranger.close()
    assert stranger.received == b"" and code == 0
    assert offered["tools"]["listChanged"] is True and not {"resources", "prompts", "completions"} & set(offered)
    assert batch == [{"jsonrpc": "2.0", "id": 1, "error": batch[0]["error"]}] and batch[0]["error"]["code"] == -32600
    assert parted["error"]["code"] == -32700 and parted["id"] is None
    assert last == {"jsonrpc": "2.0", "id": 4, "result": {}} and discover["error"]["code"] == -32601


RECORDER = """
import json, sys
with open(sys.argv[1], "a") as kept:
    for line in sys.stdin:
        kept.write(line)
        kept.flush()
        message = json.loads(line)
        if isinstance(message, dict) and "method" in message and "id" in message:
            print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": {}}), flush=True)
"""


def test_while_the_lab_is_off_the_official_server_receives_nothing_that_could_reach_blender(tmp_path: Path) -> None:
    """What the official server itself is given, whatever its parser: the listings and pings, never a call (also
    one sent as a notification), a resource read or a prompt; what it is given is what the relay judged."""
    kept = tmp_path / "given.jsonl"
    relay = RawRelay(tmp_path / "lab" / "server.json", _free_port(), [sys.executable, "-c", RECORDER, str(kept)])
    try:
        relay.handshake()
        relay.send(json.dumps({"jsonrpc": "2.0", "method": "tools/call", "params": CALL}).encode())
        read = relay.ask({"jsonrpc": "2.0", "id": 1, "method": "resources/read", "params": {"uri": "blender://x"}})
        prompt = relay.ask({"jsonrpc": "2.0", "id": 2, "method": "prompts/get", "params": {"name": "x"}})
        listed = relay.ask({"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {}})
        relay.send(
            b'{"jsonrpc":"2.0","id":4,"method":"ping","method":"tools/call","params":'
            + json.dumps(CALL).encode()
            + b"}"
        )
        twice = relay.answer()
        last = relay.ask({"jsonrpc": "2.0", "id": 5, "method": "ping"})
    finally:
        relay.close()
    given = [json.loads(line) for line in kept.read_text().splitlines()]
    assert [message.get("method") for message in given] == ["initialize", "notifications/initialized", "ping"]
    assert read["error"]["data"]["state"] == prompt["error"]["data"]["state"] == "lab_listener_off"
    assert listed["result"] == {"tools": []} and last["result"] == {}
    assert json.loads(twice["result"]["content"][0]["text"])["state"] == "lab_listener_off"  # the key read last


def test_the_relay_ends_with_the_official_servers_exit_status_while_the_client_stays(tmp_path: Path) -> None:
    """The official server exits on its own (a crash): the relay ends with its status, not at the client's next
    line, so the client hears the end at once."""
    relay = RawRelay(tmp_path / "lab" / "server.json", _free_port(), [sys.executable, "-c", "raise SystemExit(7)"])
    try:
        assert relay.process.wait(60) == 7
    finally:
        relay.close()


def test_the_client_leaving_ends_an_official_server_that_ignores_the_end_of_its_input(tmp_path: Path) -> None:
    script = "import sys, time\nprint('up', file=sys.stderr, flush=True)\ntime.sleep(3600)"
    relay = RawRelay(tmp_path / "lab" / "server.json", _free_port(), [sys.executable, "-c", script])
    assert relay.close() == 128 + signal.SIGTERM  # its input closed, then terminated after the grace


def test_a_stop_signal_ends_the_relay_and_the_official_server_with_it(tmp_path: Path) -> None:
    pid_file = tmp_path / "official.pid"
    script = "import os, sys, time\nopen(sys.argv[1], 'w').write(str(os.getpid()))\ntime.sleep(3600)"
    relay = RawRelay(tmp_path / "lab" / "server.json", _free_port(), [sys.executable, "-c", script, str(pid_file)])
    try:
        while not pid_file.exists() or not pid_file.read_text():
            assert relay.process.poll() is None
            time.sleep(0.05)
        relay.process.send_signal(signal.SIGTERM)
        assert relay.process.wait(60) == 128 + signal.SIGTERM
    finally:
        relay.close()
    assert not psutil.pid_exists(int(pid_file.read_text()))


@pytest.mark.parametrize(
    "env, said",
    [
        ({"BLENDER_MCP_PORT": "98765"}, "BLENDER_MCP_PORT must be a port number (1-65535), not '98765'"),
        ({"BLENDER_MCP_PORT": "9876 "}, "BLENDER_MCP_PORT must be a port number"),
        ({"BLENDER_MCP_HOST": "192.0.2.1"}, "BLENDER_MCP_HOST must be 127.0.0.1, ::1 or localhost"),
    ],
)
def test_an_address_the_relay_cannot_judge_is_a_clear_start_up_error(env: dict[str, str], said: str) -> None:
    run = subprocess.run(
        [*RELAY, "--", sys.executable, "-c", "raise SystemExit('the official server must not start')"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env={**os.environ, "BLENDER_MCP_PORT": "9876", **env},
        timeout=60,
    )
    assert run.returncode == 2 and said in run.stderr and "must not start" not in run.stderr and run.stdout == ""


def test_a_bare_uv_is_the_uv_that_started_the_relay() -> None:
    """uv sets UV to its own path for what it runs (`uv tool run` included); Hermes swaps its managed uv in for the
    outer command only, so the inner `uv` must be that one, not whatever PATH finds."""
    assert child_command(["uv", "tool", "run", "x"], {"UV": "/hermes/tools/uv"}) == [
        "/hermes/tools/uv",
        "tool",
        "run",
        "x",
    ]
    assert child_command(["uv", "tool", "run", "x"], {}) == ["uv", "tool", "run", "x"]
    assert child_command(["uvx", "x"], {"UV": "/hermes/tools/uv"}) == ["uvx", "x"]
