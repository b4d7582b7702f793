"""The Hermes plugin's `blender` server: the relay, launched by Hermes's own uv, answering Blender's absence so
that Hermes's circuit breaker does not count it; every other client keeps `isError`. `status` names the launcher."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError

from hermes_blender.checks import status_report
from hermes_blender.contract.host import HostFacts
from hermes_blender.contract.launcher import check_launcher, managed_uv, runs_the_relay
from hermes_blender.contract.package import load_plugin
from hermes_blender.stdio_calls import unavailable
from hermes_blender.stdio_server import CLIENT_ENV, states_as_results
from tests.conftest import PLUGIN_ROOT

MCP = json.loads((PLUGIN_ROOT / "mcp.json").read_text())["mcpServers"]


def _host(tmp_path: Path, path: str = "") -> HostFacts:
    return HostFacts(os="linux", env={"HOME": str(tmp_path), "HERMES_HOME": str(tmp_path / "hermes"), "PATH": path})


def _provision_uv(tmp_path: Path) -> Path:
    """Hermes's package manager's record of its uv, in the shape scripts/harness/managed_uv.py writes with PM's code."""
    store = tmp_path / "hermes" / "tools"
    (store / "uv-0.12.3-linux-x64").mkdir(parents=True)
    uv = store / "uv-0.12.3-linux-x64" / "uv"
    uv.write_text("#!/bin/sh\n")
    uv.chmod(0o755)
    facts = {"schema": 1, "packages": {"uv": {"entry": "uv-0.12.3-linux-x64", "version": "0.12.3"}}}
    (store / "facts.json").write_text(json.dumps(facts))
    return uv


def test_only_the_launch_line_that_names_hermes_makes_states_results() -> None:
    assert MCP["blender"]["env"] == {CLIENT_ENV: "hermes"} and states_as_results(MCP["blender"]["env"])
    assert not states_as_results({}) and not states_as_results({CLIENT_ENV: "claude-code"})
    for_hermes, for_others = unavailable("app_not_running", "x", as_result=True), unavailable("app_not_running", "x")
    assert for_hermes.is_error is False and for_others.is_error is True
    assert json.loads(for_hermes.content[0].text) == json.loads(for_others.content[0].text)


def _session(runtime_file: Path, env: dict[str, str]) -> tuple[Any, Any]:
    command = [sys.executable, "-m", "hermes_blender.cli", "mcp", "--runtime-file", str(runtime_file)]
    server = StdioServerParameters(command=command[0], args=command[1:], env={**os.environ, **env})

    async def main() -> tuple[Any, Any]:
        async with Client(stdio_client(server), read_timeout_seconds=60) as client:  # type: ignore[arg-type]
            tools = await client.list_tools()
            summary = next(tool for tool in tools.tools if tool.name == "get_objects_summary")
            return summary, await client.call_tool("get_objects_summary", {})

    return asyncio.run(main())


@pytest.mark.timeout(120)
def test_through_a_real_stdio_session_hermes_gets_a_result_and_other_clients_an_error(tmp_path: Path) -> None:
    """The official SDK client validates a result against the tool's output schema: Hermes's list has none."""
    runtime_file = tmp_path / "Blender" / "server.json"  # nothing has published here
    tool, result = _session(runtime_file, {CLIENT_ENV: "hermes"})
    assert result.is_error is False and tool.output_schema is None
    assert json.loads(result.content[0].text)["state"] == "app_not_running"
    tool, result = _session(runtime_file, {CLIENT_ENV: ""})
    assert result.is_error is True and tool.output_schema is not None
    assert json.loads(result.content[0].text)["state"] == "app_not_running"


def test_the_shipped_blender_server_runs_the_relay_and_blender_lab_the_lab_relay() -> None:
    """`blender_lab` runs the toolkit too, as `hermes-blender lab` (the official server behind its gate): that is
    not the `mcp` relay, whose round trip `status` makes over the runtime file."""
    assert runs_the_relay(MCP["blender"]) and not runs_the_relay(MCP["blender_lab"])
    assert runs_the_relay({"type": "stdio", "command": "hermes-blender", "args": ["mcp"]})
    args = MCP["blender_lab"]["args"]
    assert args[args.index("hermes-blender") :][:3] == ["hermes-blender", "lab", "--"]
    assert not runs_the_relay({"type": "stdio", "command": "hermes-blender", "args": ["lab", "--", "mcp"]})


def test_status_names_hermess_missing_uv_and_finds_it_where_hermes_keeps_it(tmp_path: Path) -> None:
    host = _host(tmp_path)
    missing = check_launcher(MCP["blender"], host)
    assert missing is not None and not missing.ok and missing.problem and "hermes pm install uv" in missing.problem
    report = status_report(load_plugin(PLUGIN_ROOT), host, connect=False, only="blender")
    [server] = report["servers"]
    assert server["checks"][0]["name"] == "launcher" and server["checks"][0]["ok"] is None
    assert any("hermes pm install uv" in warning for warning in server["warnings"])

    uv = _provision_uv(tmp_path)
    assert managed_uv(host) == uv
    git = tmp_path / "bin" / "git"
    git.parent.mkdir()
    git.write_text("#!/bin/sh\n")
    git.chmod(0o755)
    found = check_launcher(MCP["blender"], _host(tmp_path, str(git.parent)))
    assert found is not None and found.ok and str(uv) in found.detail and found.problem is None
    no_git = check_launcher(MCP["blender"], host)
    assert no_git is not None and not no_git.ok and no_git.problem and "install Git" in no_git.problem


def test_status_names_a_missing_toolkit_where_the_command_is_the_toolkit(tmp_path: Path) -> None:
    server = {"type": "stdio", "command": "hermes-blender", "args": ["mcp"]}
    missing = check_launcher(server, _host(tmp_path))
    assert missing is not None and not missing.ok and missing.problem and "toolkit" in missing.problem
    exe = tmp_path / "bin" / "hermes-blender"
    exe.parent.mkdir()
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    found = check_launcher(server, _host(tmp_path, str(exe.parent)))
    assert found is not None and found.ok


@pytest.mark.timeout(120)
@pytest.mark.skipif(
    sys.platform != "linux", reason="a folder name that is not UTF-8: Linux file systems keep its bytes"
)
@pytest.mark.parametrize("client", ["hermes", ""], ids=["hermes", "any-other-client"])
def test_a_runtime_file_under_a_folder_not_named_in_utf8_still_gets_the_state_through_a_real_stdio_session(
    tmp_path: Path, client: str
) -> None:
    """A Latin-1 home, Blender closed: the state's detail names the path, which the SDK's writer cannot serialise
    with a lone surrogate in it; the relay ended and the client heard only "Connection closed"."""
    runtime_file = Path(os.fsdecode(os.fsencode(tmp_path) + b"/h\xe9/Blender/server.json"))
    command = [sys.executable, "-m", "hermes_blender.cli", "mcp", "--runtime-file", str(runtime_file)]
    server = StdioServerParameters(command=command[0], args=command[1:], env={**os.environ, CLIENT_ENV: client})

    async def main() -> tuple[Any, Any]:
        async with Client(stdio_client(server), read_timeout_seconds=60) as session:  # type: ignore[arg-type]
            result = await session.call_tool("get_objects_summary", {})
            try:
                await session.read_resource("blender://scene")
            except MCPError as exc:  # a read Blender could not answer: a JSON-RPC error carrying the state
                return result, exc.error.data
            raise AssertionError("a read with Blender closed answered")

    result, read_refused = asyncio.run(main())
    answer = json.loads(result.content[0].text)
    assert result.is_error is (client != "hermes")
    for said in (answer, read_refused):
        assert said["state"] == "app_not_running" and "h\ufffd" in said["detail"]


@pytest.mark.timeout(180)
@pytest.mark.parametrize("client", ["hermes", ""], ids=["hermes", "any-other-client"])
def test_a_call_blender_ran_before_it_died_stays_an_error_for_every_client(tmp_path: Path, client: str) -> None:
    """The call went out on a kept connection, Blender ran it and died before answering: the resend then finds
    the pid dead, which once read as "nothing was sent to it", a result for Hermes. It may have run: an error."""
    from hermes_blender.headless import HeadlessBlender

    runtime_file = tmp_path / "Blender" / "server.json"
    ran = tmp_path / "ran"
    code = f"import os, signal\nopen({str(ran)!r}, 'w').close()\nos.kill(os.getpid(), signal.SIGKILL)"
    command = [sys.executable, "-m", "hermes_blender.cli", "mcp", "--runtime-file", str(runtime_file)]
    server = StdioServerParameters(command=command[0], args=command[1:], env={**os.environ, CLIENT_ENV: client})

    async def main() -> Any:
        async with Client(stdio_client(server), read_timeout_seconds=60) as client_session:  # type: ignore[arg-type]
            assert not (await client_session.call_tool("get_objects_summary", {})).is_error  # a connection kept
            return await client_session.call_tool("execute_blender_code", {"code": code})

    with HeadlessBlender(runtime_file):
        result = asyncio.run(main())
    assert ran.exists()  # it ran
    assert result.is_error is True, result.content
    assert "may have run" in result.content[0].text


@pytest.mark.timeout(180)
def test_a_token_the_bridge_refuses_at_its_gate_is_a_state_hermes_does_not_count_as_a_failure(tmp_path: Path) -> None:
    """A stale token is refused before anything runs, as honest a state as a closed Blender: three of them in a row
    once tripped Hermes's breaker, which kept the tools paused after the file was right again."""
    from hermes_blender.headless import HeadlessBlender

    runtime_file = tmp_path / "Blender" / "server.json"
    with HeadlessBlender(runtime_file) as blender:
        for record in (runtime_file, runtime_file.parent / "servers" / f"{blender.pid}.json"):
            record.write_text(record.read_text().replace(json.loads(record.read_text())["token"], "A" * 43))
        _, for_hermes = _session(runtime_file, {CLIENT_ENV: "hermes"})
        _, for_others = _session(runtime_file, {CLIENT_ENV: ""})
    assert for_hermes.is_error is False and for_others.is_error is True
    for result in (for_hermes, for_others):
        assert json.loads(result.content[0].text)["state"] == "endpoint_unavailable" and "401" in result.content[0].text


@pytest.mark.timeout(180)
def test_status_is_not_ready_where_hermes_cannot_start_the_server_though_blender_answers(tmp_path: Path) -> None:
    """Hermes's uv there but no Git: Hermes has no tools, so `status` must not say ready (it once exited 0)."""
    from hermes_blender.headless import HeadlessBlender

    _provision_uv(tmp_path)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "blender").write_text("#!/bin/sh\necho 'Blender 5.1.2'\n")
    (bin_dir / "blender").chmod(0o755)
    host = _host(tmp_path, str(bin_dir))
    with HeadlessBlender(tmp_path / "AppData" / "Local" / "Blender" / "server.json"):
        report = status_report(load_plugin(PLUGIN_ROOT), host, connect=True, only="blender")
    [server] = report["servers"]
    assert server["state"] == "ready"  # Blender's side is fine, as Hermes's own verdict would say
    assert server["checks"][0] == {**server["checks"][0], "name": "launcher", "ok": False}
    assert report["ready"] is False


@pytest.mark.timeout(60)
@pytest.mark.parametrize("state, counts", [("busy", False), ("execution_error", True), ("interrupted", True)])
def test_for_hermes_only_an_answer_blender_never_began_is_a_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, state: str, counts: bool
) -> None:
    """`busy`: Blender's main thread never took the call (not run), so Hermes's breaker must not count it; a script's
    error or a call stopped at its deadline ran, and stays an error for Hermes too."""
    import socket

    from hermes_blender import transport
    from tests.scripted_bridge import Request, ScriptedBridge, json_answer

    from .test_relay import _published, relayed_call

    monkeypatch.setattr(transport, "require_own_blender", lambda endpoint: None)  # the bridge is this test process
    refused = {"content": [{"type": "text", "text": json.dumps({"state": state, "error": "x"})}], "isError": True}

    def answer(conn: socket.socket, request: Request) -> bool:
        listing = request.body["method"] == "tools/list"
        conn.sendall(json_answer(request, {"tools": []} if listing else refused))
        return True

    bridge = ScriptedBridge(answer)

    try:
        spec = _published(tmp_path, bridge.port)
        for_hermes = relayed_call(spec, "execute_blender_code", states_as_results=True)
        for_others = relayed_call(spec, "execute_blender_code")
    finally:
        bridge.close()
    assert for_hermes.is_error is counts and for_others.is_error is True
