"""The agent's mode in a Blender with nobody at its window (the bridge in this bpy): read-only refuses every tool
that changes something and answers every read; ask refuses at once with confirmation_unavailable; full is today's
behaviour; the model is told the mode before it tries (instructions, get_agent_history); the Lab's code obeys it."""

from __future__ import annotations

import asyncio
import http.client
import importlib
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from hermes_blender.client import modern_request
from hermes_blender.contract.liveness import RuntimeFileSpec, read_live_endpoint
from tests.sdk_client import SdkClient

from .conftest import ADDON_MODULE, serve_while, tool_calls

pytestmark = pytest.mark.timeout(300)

DELETE_CUBE = "bpy.data.objects.remove(bpy.data.objects['Cube'])\nresult = {}"


def _bridge(service: ModuleType, runtime: Any, tmp_path: Path, monkeypatch: Any, mode: str, **config: Any) -> Any:
    monkeypatch.setattr("tests.sdk_client.require_own_blender", lambda endpoint: None)
    agent_mode = importlib.import_module(f"{ADDON_MODULE}.agent_mode").AgentMode.parse(mode)
    return runtime.start(
        service.BridgeConfig(runtime_file=tmp_path / "server.json", lab_port=None, agent_mode=agent_mode, **config)
    )


def _state(answer: Any) -> str | None:
    return json.loads(answer.text).get("state") if answer.is_error else None


def _objects() -> set[str]:
    import bpy

    return {obj.name for obj in bpy.data.objects}


def test_read_only_refuses_every_tool_whose_annotations_say_it_changes_something_and_answers_every_read(
    service: ModuleType, factory_scene: None, tmp_path: Path, runtime: Any, monkeypatch: Any
) -> None:
    bridge = _bridge(service, runtime, tmp_path, monkeypatch, "read-only")
    tools = bridge.tool_host.list_tools()  # the live catalogue: a new tool is in it, and so in this test
    changing = [tool["name"] for tool in tools if not tool["annotations"]["readOnlyHint"]]
    reading = [tool["name"] for tool in tools if tool["annotations"]["readOnlyHint"]]
    assert {"execute_blender_code", "undo_agent_steps", "restore_checkpoint", "render_frames_to_folder"} <= set(
        changing
    )
    before = _objects()
    calls = [(name, {"code": DELETE_CUBE} if "code" in name else {}) for name in changing]
    answers = tool_calls(bridge, [*calls, *((name, {}) for name in reading)])  # one client: one pump
    refused, read = answers[: len(changing)], answers[len(changing) :]
    for name, answer in zip(changing, refused, strict=True):
        assert _state(answer) == "read_only", (name, answer.text)
        assert "Agent may" in json.loads(answer.text)["error"], answer.text  # the user action comes with it
    for name, answer in zip(reading, read, strict=True):
        assert _state(answer) not in ("read_only", "busy"), (name, answer.text)  # answered, or its arguments missing
    assert not read[reading.index("get_objects_summary")].is_error
    assert _objects() == before
    history = read[reading.index("get_agent_history")].data()
    assert history["steps"] == [] and history["agent_mode"]["mode"] == "read-only"


def test_ask_with_nobody_at_the_window_answers_confirmation_unavailable_at_once_and_changes_nothing(
    service: ModuleType, factory_scene: None, tmp_path: Path, runtime: Any, monkeypatch: Any
) -> None:
    bridge = _bridge(service, runtime, tmp_path, monkeypatch, "ask")
    deleted, summary, history = tool_calls(
        bridge,
        [("execute_blender_code", {"code": DELETE_CUBE}), ("get_objects_summary", {}), ("get_agent_history", {})],
    )
    assert _state(deleted) == "confirmation_unavailable", deleted.text
    assert "--mode full" in json.loads(deleted.text)["error"]
    assert not summary.is_error and "Cube" in _objects()
    assert history.data()["steps"] == [] and history.data()["agent_mode"]["mode"] == "ask"


def test_full_runs_the_call_as_before_and_a_switch_to_read_only_holds_for_the_next_call(
    service: ModuleType, factory_scene: None, tmp_path: Path, runtime: Any, monkeypatch: Any
) -> None:
    bridge = _bridge(service, runtime, tmp_path, monkeypatch, "full")
    agent_mode = importlib.import_module(f"{ADDON_MODULE}.agent_mode").AgentMode
    client = SdkClient(RuntimeFileSpec(path=str(bridge.runtime_file)), mode="2026-07-28")

    async def script() -> tuple[Any, Any]:
        deleted = await client.call_tool("execute_blender_code", {"code": DELETE_CUBE})
        bridge.execution.consent.switch(agent_mode.READ_ONLY)  # the person's click in the panel does this
        return deleted, await client.call_tool("undo_agent_steps", {"steps": 1})

    deleted, undone = serve_while(bridge.dispatcher, lambda: asyncio.run(script()))
    assert not deleted.is_error and "Cube" not in _objects()
    assert _state(undone) == "read_only" and "Cube" not in _objects()


def test_the_model_is_told_the_mode_in_the_instructions_of_either_era(
    service: ModuleType, factory_scene: None, tmp_path: Path, runtime: Any, monkeypatch: Any
) -> None:
    bridge = _bridge(service, runtime, tmp_path, monkeypatch, "ask")
    endpoint = read_live_endpoint(RuntimeFileSpec(path=str(bridge.runtime_file)))
    initialize = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}
    asked = [
        (json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": initialize}).encode(), {}),
        modern_request("server/discover", {}),
    ]

    def instructions() -> list[str]:
        told = []
        for body, headers in asked:
            connection = http.client.HTTPConnection("127.0.0.1", endpoint.port, timeout=60)
            wanted = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
            connection.request("POST", "/mcp", body, {**wanted, **headers, **endpoint.headers()})
            told.append(json.loads(connection.getresponse().read())["result"]["instructions"])
            connection.close()
        return told

    for told in serve_while(bridge.dispatcher, instructions):
        assert "now ask: every call that would change" in told, told


def test_the_lab_listener_obeys_the_mode_in_its_own_error_shape(
    service: ModuleType, factory_scene: None, tmp_path: Path, runtime: Any, monkeypatch: Any
) -> None:
    bridge = _bridge(service, runtime, tmp_path, monkeypatch, "read-only")
    envelope = bridge.execution.run_lab_code(DELETE_CUBE, False, lambda: True)
    assert envelope["status"] == "error" and envelope["message"].startswith("read_only: ")
    bridge.execution.consent.switch(importlib.import_module(f"{ADDON_MODULE}.agent_mode").AgentMode.ASK)
    envelope = bridge.execution.run_lab_code(DELETE_CUBE, False, lambda: True)
    assert envelope["status"] == "error" and envelope["message"].startswith("confirmation_unavailable: ")
    assert "Cube" in _objects()


def test_a_client_that_asks_its_user_runs_the_call_on_accept_and_answers_denied_by_user_on_decline(
    service: ModuleType, factory_scene: None, tmp_path: Path, runtime: Any, monkeypatch: Any
) -> None:
    from mcp.types import ElicitResult

    bridge = _bridge(service, runtime, tmp_path, monkeypatch, "ask")
    spec = RuntimeFileSpec(path=str(bridge.runtime_file))
    asked: list[str] = []

    def answering(action: str) -> Any:
        async def answer(context: Any, params: Any) -> ElicitResult:
            asked.append(params.message)
            return ElicitResult(action=action, content={} if action == "accept" else None)

        return answer

    async def script() -> list[Any]:
        answers = []
        for action, name in (("accept", "Cube"), ("decline", "Light")):
            client = SdkClient(spec, mode="2026-07-28", elicitation=answering(action))
            code = DELETE_CUBE.replace("Cube", name)
            answers.append(await client.call_tool("execute_blender_code", {"code": code}))
        return answers

    allowed, declined = serve_while(bridge.dispatcher, lambda: asyncio.run(script()))
    assert not allowed.is_error, allowed.text
    assert allowed.data()["changes"]["removed"] == ["Cube"]
    assert _state(declined) == "denied_by_user" and "Light" in _objects()
    assert "bpy.data.objects.remove(bpy.data.objects['Cube'])" in asked[0]  # the user reads the code itself
    assert len(asked) == 2
