"""An MCP endpoint on a real loopback socket, with a fake tool host instead of Blender."""

from __future__ import annotations

import http.client
import json
import logging
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any

import pytest

from blender_addon.dispatch import Dispatcher
from blender_addon.errors import RequestCancelled, UnknownTool
from blender_addon.net.auth import Token
from blender_addon.net.caller import ANYONE, Caller, Progress
from blender_addon.net.http import HttpConversation, HttpLimits
from blender_addon.net.mcp import McpProtocol, ServerInfo, ToolOutcome
from blender_addon.net.mcp_http import McpHttpApp
from blender_addon.net.refusals import refusals
from blender_addon.net.sessions import SessionStore
from blender_addon.net.subscriptions import Updates

from .drivers import DRIVERS, Served

MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


class FakeTools:
    """A tool host whose tools run as jobs of the driver's dispatcher, as Blender's do (`dispatcher` is set once
    the endpoint is served)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.dispatcher: Dispatcher | None = None

    def list_tools(self) -> list[dict[str, Any]]:
        return [{"name": "echo", "description": "echo", "inputSchema": {"type": "object"}}]

    def call_tool(self, name: str, arguments: dict[str, Any], caller: Caller = ANYONE) -> ToolOutcome:
        assert self.dispatcher is not None
        try:
            return self.dispatcher.call(lambda: self._run(name, arguments, caller.progress or Progress()), 30.0, caller)
        except RequestCancelled as exc:  # as Blender's host answers it
            return ToolOutcome.error(str(exc), state="cancelled")

    def _run(self, name: str, arguments: dict[str, Any], progress: Progress) -> ToolOutcome:
        self.calls.append((name, arguments))
        if name == "steps":  # a long job that says how far it is, each step after `pause` seconds
            for step in range(1, arguments["steps"] + 1):
                time.sleep(arguments["pause"])
                progress.report(step / arguments["steps"], f"step {step}")
            return ToolOutcome.json({"steps": arguments["steps"]})
        if name == "echo":
            return ToolOutcome.json({"echo": arguments})
        if name == "sleep":  # a long job: on the main loop it holds every other client
            time.sleep(arguments["seconds"])
            return ToolOutcome.json({"slept": arguments["seconds"]})
        if name == "big":  # a small request with a large answer
            return ToolOutcome.json({"pad": "x" * arguments["size"]})
        if name == "fail":
            return ToolOutcome.error("it broke", state="tool_failed")
        if name == "crash":
            raise RuntimeError("host bug")
        raise UnknownTool(f"Unknown tool: {name!r}")


@dataclass
class Endpoint:
    port: int
    token: Token
    tools: FakeTools
    listener: Served
    sessions: SessionStore
    updates: Updates

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    def headers(self, **extra: str) -> dict[str, str]:
        base = {"Host": self.host, "Authorization": f"Bearer {self.token.reveal()}", "Content-Type": "application/json"}
        base.update({k.replace("_", "-"): v for k, v in extra.items()})
        return base

    def post(
        self, payload: Any, headers: dict[str, str] | None = None, body: bytes | None = None
    ) -> tuple[int, dict[str, str], Any]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            data = body if body is not None else json.dumps(payload).encode()
            conn.request("POST", "/mcp", body=data, headers=headers if headers is not None else self.headers())
            response = conn.getresponse()
            raw = response.read()
            content_type = response.getheader("Content-Type", "")
            parsed = json.loads(raw) if raw and content_type.startswith("application/json") else raw.decode()
            return response.status, {k.lower(): v for k, v in response.getheaders()}, parsed
        finally:
            conn.close()

    def rpc(
        self, method: str, params: dict[str, Any] | None = None, *, modern: bool = True, **headers: str
    ) -> tuple[int, dict[str, str], Any]:
        params = dict(params or {})
        if modern:
            params["_meta"] = {**MODERN_META, **params.get("_meta", {})}
            headers = {**modern_headers(method, params), **headers}
        return self.post({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}, self.headers(**headers))

    def raw(self, data: bytes, *, read_timeout: float = 10.0) -> bytes:
        """Send raw bytes; return everything the server sends until it closes."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=read_timeout) as sock:
            sock.sendall(data)
            chunks = []
            while chunk := sock.recv(65536):
                chunks.append(chunk)
        return b"".join(chunks)


def modern_headers(method: str, params: dict[str, Any]) -> dict[str, str]:
    """What a 2026-07-28 client mirrors from the body into headers (keys as `headers(**extra)` takes them)."""
    headers = {"MCP_Protocol_Version": "2026-07-28", "Mcp_Method": method}
    if method == "tools/call" and isinstance(params.get("name"), str):
        headers["Mcp_Name"] = params["name"]
    return headers


def start_endpoint(
    limits: HttpLimits = HttpLimits(),
    sessions: SessionStore | None = None,
    max_connections: int | None = None,
    driver: str = "threads",
) -> Endpoint:
    token = Token.generate()
    tools = FakeTools()
    sessions = sessions or SessionStore()
    holder: dict[str, Served] = {}
    protocol = McpProtocol(tools, ServerInfo("test", "0", lambda: "hi"))
    updates = Updates()
    app = McpHttpApp(protocol, token, lambda: holder["l"].address[1], sessions, updates)
    conversation = partial(HttpConversation, app=app, limits=limits, gate=app.gate, lasting=app.lasting)
    served = Served(driver, conversation, max_connections=max_connections)
    holder["l"] = served
    tools.dispatcher = served.dispatcher
    return Endpoint(served.address[1], token, tools, served, sessions, updates)


@pytest.fixture(autouse=True)
def _whole_log_budget() -> None:
    """Each test's bridge starts with the log budget whole, as a bridge does after the last one stopped: the
    process shares one (net/refusals.py), and the lines other tests' refusals spent are not this test's."""
    refusals.flush(logging.getLogger("hermes_bridge.tests"))


@pytest.fixture(params=DRIVERS)
def driver(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def endpoint(driver: str) -> Iterator[Endpoint]:
    ep = start_endpoint(driver=driver)
    yield ep
    ep.listener.stop()


@pytest.fixture
def strict_endpoint(driver: str) -> Iterator[Endpoint]:
    """Small limits so oversize and slow-client rules are quick to reach."""
    ep = start_endpoint(
        HttpLimits(max_body_bytes=1024, max_header_bytes=2048, request_timeout=0.5, idle_timeout=5), driver=driver
    )
    yield ep
    ep.listener.stop()
