"""The agent's mode through `hermes-blender mcp`, as any MCP client meets it: the relay's client that can ask its
user (the official SDK's, declaring elicitation) is asked, and its accept runs the call while its decline answers
`denied_by_user`; a client that cannot ask hears `confirmation_unavailable` from a Blender without a window; a
read-only Blender answers `read_only`. Each refusal comes with its user action and changes nothing."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.types import ElicitResult

from hermes_blender.headless import HeadlessBlender

pytestmark = pytest.mark.timeout(300)

DELETE = "bpy.data.objects.remove(bpy.data.objects[{name!r}])\nresult = {{}}"
NAMES = "result = sorted(o.name for o in bpy.data.objects)"


def _relay(runtime_file: Path) -> StdioServerParameters:
    command = [sys.executable, "-m", "hermes_blender.cli", "mcp", "--runtime-file", str(runtime_file)]
    return StdioServerParameters(command=command[0], args=command[1:])


def _state(result: Any) -> str | None:
    return json.loads(result.content[0].text).get("state") if result.is_error else None


async def _calls(
    runtime_file: Path, calls: list[tuple[str, dict[str, Any]]], answer: str | None, mode: str = "legacy"
) -> list[Any]:
    asked: list[str] = []

    async def elicitation(context: Any, params: Any) -> ElicitResult:
        asked.append(params.message)
        return ElicitResult(action=answer, content={} if answer == "accept" else None)

    asks = {"elicitation_callback": elicitation} if answer is not None else {}
    transport = stdio_client(_relay(runtime_file))
    async with Client(transport, mode=mode, read_timeout_seconds=120, **asks) as client:  # type: ignore[arg-type]
        results = [await client.call_tool(name, arguments) for name, arguments in calls]
    return [*results, asked]


@pytest.mark.parametrize("era", ["legacy", "2026-07-28"])
def test_in_ask_mode_the_relays_client_asks_its_user_accept_runs_decline_denies_and_no_asker_is_unavailable(
    tmp_path: Path, era: str
) -> None:
    """2025: the relay asks its client (elicitation/create) and calls again; 2026-07-28: it hands its client the
    bridge's `input_required`, and the client calls again with its user's answer."""
    runtime_file = tmp_path / "Blender" / "server.json"
    with HeadlessBlender(runtime_file, mode="ask"):
        code = {"code": DELETE.format(name="Cube")}
        allowed, accepted_question = asyncio.run(_calls(runtime_file, [("execute_blender_code", code)], "accept", era))
        code = {"code": DELETE.format(name="Light")}
        declined, _ = asyncio.run(_calls(runtime_file, [("execute_blender_code", code)], "decline", era))
        unasked, names, _ = asyncio.run(
            _calls(runtime_file, [("execute_blender_code", code), ("get_objects_summary", {})], None, era)
        )
    assert not allowed.is_error, allowed.content
    assert json.loads(allowed.content[0].text)["changes"]["removed"] == ["Cube"]
    assert "bpy.data.objects['Cube']" in accepted_question[0]  # the user read the code itself
    assert _state(declined) == "denied_by_user"
    assert _state(unasked) == "confirmation_unavailable"
    assert "--mode full" in json.loads(unasked.content[0].text)["error"]
    assert "Light" in names.content[0].text and "Cube" not in names.content[0].text


def test_a_read_only_blender_answers_read_only_through_the_relay_and_every_read_works(tmp_path: Path) -> None:
    runtime_file = tmp_path / "Blender" / "server.json"
    with HeadlessBlender(runtime_file, mode="read-only"):
        refused, read, _ = asyncio.run(
            _calls(
                runtime_file,
                [("execute_blender_code", {"code": DELETE.format(name="Cube")}), ("get_objects_summary", {})],
                "accept",  # a client that would say yes is never asked: read-only is the person's answer
            )
        )
    assert _state(refused) == "read_only" and "Agent may" in json.loads(refused.content[0].text)["error"]
    assert not read.is_error and "Cube" in read.content[0].text


def test_a_relay_client_whose_asking_fails_runs_nothing_and_hears_an_error(tmp_path: Path) -> None:
    """The relay's 2025 client declares elicitation, then answers the question with an error (it could not ask)."""
    from mcp.types import ErrorData

    runtime_file = tmp_path / "Blender" / "server.json"

    async def failing(context: Any, params: Any) -> ErrorData:
        return ErrorData(code=-32603, message="this client could not show the question")

    async def calls() -> list[Any]:
        transport = stdio_client(_relay(runtime_file))
        async with Client(transport, mode="legacy", read_timeout_seconds=120, elicitation_callback=failing) as client:
            failed = await client.call_tool("execute_blender_code", {"code": DELETE.format(name="Cube")})
            return [failed, await client.call_tool("get_objects_summary", {})]

    with HeadlessBlender(runtime_file, mode="ask"):
        failed, names = asyncio.run(calls())
    assert _state(failed) == "denied_by_user", failed.content  # as a question dismissed: a state, not a crash
    assert not names.is_error and "Cube" in names.content[0].text


def test_a_relay_client_that_never_answers_holds_its_call_no_longer_than_the_limit(monkeypatch: Any) -> None:
    """The relay's wait for its client's answer is bounded (at an hour, past any question's timeout; here shortened):
    then the question counts as dismissed, and the bridge, whose question has timed out by then, runs nothing."""
    from types import SimpleNamespace

    from hermes_blender import stdio_calls

    async def never(*args: Any, **kwargs: Any) -> Any:
        await asyncio.Event().wait()

    monkeypatch.setattr(stdio_calls, "ASKING_LIMIT", 0.2)
    ctx = SimpleNamespace(session=SimpleNamespace(elicit_form=never), request_id=1)
    asked = {"inputRequests": {"confirm": {"method": "elicitation/create", "params": {"message": "m"}}}}
    assert asyncio.run(stdio_calls._asked(ctx, asked)) == {"confirm": {"action": "cancel"}}


def test_the_lab_listeners_code_in_a_background_blender_obeys_ask_and_another_user_is_never_asked(
    tmp_path: Path,
) -> None:
    """The Lab wire in a Blender without a window, served on its one main loop: ask refuses at once (nothing waits
    there to hold the loop), every later request is served; another OS user's code is refused before any question."""
    from hermes_blender.lab import lab_execute
    from tests.other_user import AS_NOBODY, ask_lab, needs_another_user

    runtime_file = tmp_path / "Blender" / "server.json"
    with HeadlessBlender(runtime_file, mode="ask", lab_port=0):
        lab = int(json.loads(runtime_file.read_text())["lab"].rsplit(":", 1)[1])
        refused = [lab_execute(lab, DELETE.format(name="Cube")) for _ in range(3)]
        names = asyncio.run(_calls(runtime_file, [("get_objects_summary", {})], None))[0]
        other = None if needs_another_user.args[0] else ask_lab(lab, DELETE.format(name="Cube"), as_user=AS_NOBODY)
    for envelope in refused:
        assert envelope["status"] == "error" and envelope["message"].startswith("confirmation_unavailable: ")
    assert not names.is_error and "Cube" in names.content[0].text
    if other is not None:
        assert other["status"] == "error" and "belongs to another OS user" in other["message"]
