"""The agent's mode in a Blender with nobody at its window (the bridge in this bpy): read-only refuses every tool
that changes something and answers every read; ask refuses at once with confirmation_unavailable; full is today's
behaviour; the model is told the mode before it tries (instructions, get_agent_history); the Lab's code obeys it."""

from __future__ import annotations

import asyncio
import http.client
import importlib
import json
import time
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


EXTENSION = "io.modelcontextprotocol/tasks"
CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
CONVERSATION = "io.github.hermes-blender/conversation"


class Raw:
    """A hostile 2026-07-28 client with the token: it writes its own `_meta`, requestState and inputResponses."""

    def __init__(self, bridge: Any) -> None:
        self._endpoint = read_live_endpoint(RuntimeFileSpec(path=str(bridge.runtime_file)))

    def post(
        self,
        method: str,
        params: dict[str, Any],
        *,
        asks: bool = True,
        tasks: bool = False,
        conversation: str | None = None,
    ) -> tuple[int, dict[str, Any]]:
        body, headers = modern_request(method, params)
        message = json.loads(body)
        meta = message["params"]["_meta"]
        meta[CAPABILITIES] = {
            **({"elicitation": {"form": {}}} if asks else {}),
            **({"extensions": {EXTENSION: {}}} if tasks else {}),
        }
        meta.pop(CONVERSATION)
        if conversation is not None:
            meta[CONVERSATION] = conversation
        connection = http.client.HTTPConnection("127.0.0.1", self._endpoint.port, timeout=60)
        try:
            connection.request("POST", "/mcp", json.dumps(message).encode(), {**headers, **self._endpoint.headers()})
            answer = connection.getresponse()
            return answer.status, json.loads(answer.read())
        finally:
            connection.close()

    def call(self, name: str, arguments: dict[str, Any], **extra: Any) -> dict[str, Any]:
        """A tools/call's result (HTTP 200 and a JSON-RPC result, never a crash); `extra`: its params and envelope."""
        options = {key: extra.pop(key) for key in ("asks", "tasks", "conversation") if key in extra}
        status, answer = self.post("tools/call", {"name": name, "arguments": arguments, **extra}, **options)
        assert status == 200 and "result" in answer, answer
        return answer["result"]


def _said(result: dict[str, Any]) -> str | None:
    """The named state of a tool's error result, None for any other result."""
    if not result.get("isError"):
        return None
    return json.loads(result["content"][0]["text"]).get("state")


def _accept(state: Any, **content: Any) -> dict[str, Any]:
    return {"inputResponses": {"confirm": {"action": "accept", "content": content}}, "requestState": state}


def test_a_hostile_client_that_forges_replays_or_moves_an_answer_runs_nothing_and_hears_a_clear_state(
    service: ModuleType, factory_scene: None, tmp_path: Path, runtime: Any, monkeypatch: Any
) -> None:
    bridge = _bridge(service, runtime, tmp_path, monkeypatch, "ask")
    raw = Raw(bridge)
    delete, other = {"code": DELETE_CUBE}, {"code": DELETE_CUBE.replace("Cube", "Light")}

    def script() -> dict[str, Any]:
        seen: dict[str, Any] = {}
        asked = raw.call("execute_blender_code", delete, conversation="mine")
        assert asked["resultType"] == "input_required", asked
        state = asked["requestState"]
        assert "bpy.data.objects.remove" in asked["inputRequests"]["confirm"]["params"]["message"]
        seen["no state"] = raw.call("execute_blender_code", delete, conversation="mine", **_accept(None))
        seen["state not text"] = raw.call("execute_blender_code", delete, conversation="mine", **_accept(12))
        issued, _, mac = state.rpartition(".")
        forged = {
            "forged": f"{issued}.{'0' * 64}",
            "not ascii": f"{issued}.{mac[:-1]}é",
            "surrogate": "\ud800",
            "huge": "9" * 100_000,
            "later deadline": f"{int(issued.split('.')[0]) + 1}.{issued.split('.')[1]}.{mac}",
        }
        for why, bad in forged.items():
            seen[why] = raw.call("execute_blender_code", delete, conversation="mine", **_accept(bad))
        seen["other code"] = raw.call("execute_blender_code", other, conversation="mine", **_accept(state))
        seen["other conversation"] = raw.call("execute_blender_code", delete, conversation="theirs", **_accept(state))
        seen["no conversation"] = raw.call("execute_blender_code", delete, **_accept(state))
        seen["responses not an object"] = raw.call(
            "execute_blender_code", delete, conversation="mine", inputResponses=["accept"], requestState=state
        )
        seen["objects before"] = _objects()
        asked = raw.call("execute_blender_code", delete, conversation="mine")
        state = asked["requestState"]
        seen["accepted"] = raw.call("execute_blender_code", delete, conversation="mine", **_accept(state))
        seen["replayed"] = raw.call("execute_blender_code", delete, conversation="mine", **_accept(state))
        return seen

    seen = serve_while(bridge.dispatcher, script)
    assert seen["no state"]["resultType"] == "input_required"  # asked again: an accept without a state is no answer
    assert seen["state not text"]["resultType"] == "input_required"
    for why in ("forged", "not ascii", "surrogate", "huge", "later deadline", "other code", "other conversation"):
        assert _said(seen[why]) == "invalid_confirmation", (why, seen[why])
    assert _said(seen["no conversation"]) == "invalid_confirmation"
    assert _said(seen["responses not an object"]) == "denied_by_user"  # that answer is spent: no yes in it
    assert "Cube" in seen["objects before"] and "Light" in _objects()
    assert not seen["accepted"].get("isError"), seen["accepted"]
    assert _said(seen["replayed"]) == "invalid_confirmation"
    assert "Cube" not in _objects()
    assert len(bridge.execution.history.done) == 1  # one allowed call, one agent step


def test_an_allowance_for_one_conversation_is_not_another_conversations(
    service: ModuleType, factory_scene: None, tmp_path: Path, runtime: Any, monkeypatch: Any
) -> None:
    bridge = _bridge(service, runtime, tmp_path, monkeypatch, "ask")
    raw = Raw(bridge)
    code = {"code": "result = {}"}

    def script() -> dict[str, Any]:
        state = raw.call("execute_blender_code", code, conversation="mine")["requestState"]
        allowed = raw.call("execute_blender_code", code, conversation="mine", **_accept(state, conversation=True))
        assert not allowed.get("isError"), allowed
        return {
            "mine again": raw.call("execute_blender_code", code, conversation="mine"),
            "theirs": raw.call("execute_blender_code", code, conversation="theirs"),
            "named like a session": raw.call("execute_blender_code", code, conversation="session:mine"),
            "none": raw.call("execute_blender_code", code),
            "theirs, unable to ask": raw.call("execute_blender_code", code, conversation="theirs", asks=False),
        }

    seen = serve_while(bridge.dispatcher, script)
    assert not seen["mine again"].get("isError") and seen["mine again"].get("resultType") == "complete"
    for other in ("theirs", "named like a session", "none"):
        assert seen[other]["resultType"] == "input_required", (other, seen[other])
    assert _said(seen["theirs, unable to ask"]) == "confirmation_unavailable"


def test_a_task_augmented_call_obeys_the_mode_read_only_ask_and_the_clients_answer(
    service: ModuleType, factory_scene: None, tmp_path: Path, runtime: Any, monkeypatch: Any
) -> None:
    bridge = _bridge(service, runtime, tmp_path, monkeypatch, "read-only")
    agent_mode = importlib.import_module(f"{ADDON_MODULE}.agent_mode").AgentMode
    raw = Raw(bridge)
    (tmp_path / "frames").mkdir()
    frames = {"output_folder": str(tmp_path / "frames"), "frame_start": 1, "frame_end": 1}

    def script() -> dict[str, Any]:
        seen = {"read-only": raw.call("render_frames_to_folder", frames, tasks=True)}
        bridge.execution.consent.switch(agent_mode.ASK)
        seen["ask, unable to ask"] = raw.call("render_frames_to_folder", frames, tasks=True, asks=False)
        seen["ask"] = raw.call("render_frames_to_folder", frames, tasks=True, conversation="mine")
        seen["declined"] = raw.call(
            "render_frames_to_folder",
            frames,
            tasks=True,
            conversation="mine",
            inputResponses={"confirm": {"action": "decline"}},
            requestState=seen["ask"]["requestState"],
        )
        seen["tasks"] = bridge.execution.tasks.ids()
        return seen

    seen = serve_while(bridge.dispatcher, script)
    assert _said(seen["read-only"]) == "read_only", seen["read-only"]
    assert _said(seen["ask, unable to ask"]) == "confirmation_unavailable"
    assert seen["ask"]["resultType"] == "input_required"
    assert _said(seen["declined"]) == "denied_by_user"
    assert seen["tasks"] == [] and not any((tmp_path / "frames").iterdir())


def test_tasks_cancel_obeys_the_mode_as_cancel_render_frames_task_does(
    service: ModuleType, factory_scene: None, tmp_path: Path, runtime: Any, monkeypatch: Any
) -> None:
    import bpy

    bpy.context.scene.render.engine = "BLENDER_WORKBENCH"
    bpy.context.scene.render.resolution_percentage = 1
    bridge = _bridge(service, runtime, tmp_path, monkeypatch, "full")
    agent_mode = importlib.import_module(f"{ADDON_MODULE}.agent_mode").AgentMode
    raw = Raw(bridge)
    (tmp_path / "frames").mkdir()
    frames = {"output_folder": str(tmp_path / "frames"), "frame_start": 1, "frame_end": 10_000}

    def status(task_id: str) -> str:
        return raw.call("get_render_frames_task", {"task_id": task_id})["structuredContent"]["status"]

    def script() -> dict[str, Any]:
        task = raw.call("start_render_frames_task", frames)["structuredContent"]["task_id"]
        seen: dict[str, Any] = {"working": status(task)}
        bridge.execution.consent.switch(agent_mode.READ_ONLY)
        seen["cancel tool"] = raw.call("cancel_render_frames_task", {"task_id": task})
        seen["tasks/cancel"] = raw.post("tasks/cancel", {"taskId": task}, tasks=True)
        seen["read-only, after"] = status(task)
        bridge.execution.consent.switch(agent_mode.ASK)
        seen["tasks/cancel, ask"] = raw.post("tasks/cancel", {"taskId": task}, tasks=True)
        seen["ask, after"] = status(task)
        return seen

    seen = serve_while(bridge.dispatcher, script)
    assert seen["working"] == "working"
    assert _said(seen["cancel tool"]) == "read_only"
    _, refused = seen["tasks/cancel"]
    assert refused["error"]["message"].startswith("read_only: "), refused
    assert seen["read-only, after"] == "working"
    _, unasked = seen["tasks/cancel, ask"]
    assert unasked["error"]["message"].startswith("confirmation_unavailable: "), unasked
    assert seen["ask, after"] == "working"


def test_every_resource_reads_a_tool_that_changes_nothing_and_reads_in_read_only(
    service: ModuleType, factory_scene: None, tmp_path: Path, runtime: Any, monkeypatch: Any
) -> None:
    bridge = _bridge(service, runtime, tmp_path, monkeypatch, "read-only")
    resources = importlib.import_module(f"{ADDON_MODULE}.resources")
    catalogue = importlib.import_module(f"{ADDON_MODULE}.tools.catalogue").CATALOGUE
    for view in (*resources.RESOURCES, *resources.TEMPLATES):
        assert not catalogue[view.tool].mutating, view.uri  # a resource is a read: never a door to a change
    raw = Raw(bridge)
    read = serve_while(bridge.dispatcher, lambda: raw.post("resources/read", {"uri": "blender://objects/Cube"})[1])
    assert "Cube" in read["result"]["contents"][0]["text"], read


def test_a_question_waiting_for_the_person_ends_unrun_on_a_switch_and_when_the_bridge_stops(
    service: ModuleType, factory_scene: None, tmp_path: Path, runtime: Any, monkeypatch: Any
) -> None:
    """A person at the window (as in the interactive Blender) who has not answered yet."""
    import threading

    bridge = _bridge(service, runtime, tmp_path, monkeypatch, "ask")
    agent_mode = importlib.import_module(f"{ADDON_MODULE}.agent_mode").AgentMode
    consent = bridge.execution.consent
    consent.person = True
    raw = Raw(bridge)
    answers: list[dict[str, Any]] = []

    def waiting(count: int) -> None:
        deadline = time.monotonic() + 60
        while len(consent.waiting()) < count:
            assert time.monotonic() < deadline, "the question never came"
            time.sleep(0.02)

    def asking() -> threading.Thread:
        thread = threading.Thread(
            target=lambda: answers.append(raw.call("execute_blender_code", {"code": DELETE_CUBE}, asks=False))
        )
        thread.start()
        return thread

    def script() -> list[threading.Thread]:
        first = asking()
        waiting(1)
        consent.switch(agent_mode.READ_ONLY)  # the person's click while the question waits
        first.join(30)
        consent.switch(agent_mode.ASK)
        second = asking()
        waiting(1)
        third = asking()
        waiting(2)
        numbers = [question.number for question in consent.waiting()]
        assert numbers == sorted(numbers)  # in the order they came
        return [second, third]

    calls = serve_while(bridge.dispatcher, script)
    runtime.stop()  # Blender closes, or the person presses Stop, while two questions wait
    for call in calls:
        call.join(30)
        assert not call.is_alive(), "a waiting call outlived its bridge"
    assert [_said(answer) for answer in answers] == ["denied_by_user", "stopped", "stopped"], answers
    assert "Cube" in _objects() and consent.waiting() == []
    assert not [thread for thread in threading.enumerate() if thread.name.startswith("hermes-mcp")]


def test_the_lab_listeners_code_waits_for_the_person_and_a_denial_runs_nothing(
    service: ModuleType, factory_scene: None, tmp_path: Path, runtime: Any, monkeypatch: Any
) -> None:
    import threading

    bridge = _bridge(service, runtime, tmp_path, monkeypatch, "ask")
    consent_module = importlib.import_module(f"{ADDON_MODULE}.consent")
    consent = bridge.execution.consent
    consent.person = True
    code = DELETE_CUBE + "\n# ☃ \u202e" + "x" * 10_000
    envelopes: list[Any] = []
    thread = threading.Thread(target=lambda: envelopes.append(bridge.execution.run_lab_code(code, False, lambda: True)))
    thread.start()
    deadline = time.monotonic() + 30
    while not consent.waiting():
        assert time.monotonic() < deadline, "the Lab's code was never asked about"
        time.sleep(0.02)
    question = consent.next_to_show()
    assert question.call.code == code and "☃" in question.call.said()
    assert consent.answer(question.number, consent_module.Answer.DENY, "not now")
    thread.join(30)
    assert envelopes[0]["status"] == "error" and envelopes[0]["message"].startswith("denied_by_user: ")
    assert "Cube" in _objects() and bridge.execution.history.done == []


def test_the_2025_era_meets_the_same_mode_as_the_stateless_one(
    service: ModuleType, factory_scene: None, tmp_path: Path, runtime: Any, monkeypatch: Any
) -> None:
    bridge = _bridge(service, runtime, tmp_path, monkeypatch, "read-only")
    agent_mode = importlib.import_module(f"{ADDON_MODULE}.agent_mode").AgentMode
    client = SdkClient(RuntimeFileSpec(path=str(bridge.runtime_file)), mode="legacy")

    async def script() -> list[Any]:
        refused = await client.call_tool("execute_blender_code", {"code": DELETE_CUBE})
        bridge.execution.consent.switch(agent_mode.ASK)
        return [refused, await client.call_tool("execute_blender_code", {"code": DELETE_CUBE})]

    refused, unasked = serve_while(bridge.dispatcher, lambda: asyncio.run(script()))
    assert _state(refused) == "read_only" and _state(unasked) == "confirmation_unavailable"
    assert "Cube" in _objects()


def test_the_dialog_never_drops_the_end_of_a_long_line_unsaid(addon: ModuleType) -> None:
    """Code hidden past the dialog's edge, behind a harmless start and a run of spaces, is counted on its row."""
    asking = importlib.import_module(f"{ADDON_MODULE}.asking")
    hidden = "result = {}" + " " * 200 + "; bpy.ops.wm.read_factory_settings()"
    row = asking._cut(f"  1  {hidden}")
    assert len(row) <= asking.WIDTH and row.endswith(f"(+{len(hidden) + 5 - row.index('…')} characters not shown)")
    assert asking._cut("  1  result = {}") == "  1  result = {}"
