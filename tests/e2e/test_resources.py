"""The scene as MCP resources and the prompts, read with the official client in both protocol eras."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from mcp.shared.exceptions import MCPError

from hermes_blender.contract.liveness import RuntimeFileSpec
from hermes_blender.headless import HeadlessBlender
from tests.sdk_client import SdkClient

ERAS = ["legacy", "2026-07-28"]


def _client(blender: HeadlessBlender, mode: str) -> SdkClient:
    return SdkClient(RuntimeFileSpec(path=str(blender.runtime_file)), mode=mode)  # type: ignore[arg-type]


async def _read(client: SdkClient, uri: str) -> dict[str, Any]:
    async with client.session() as session:
        result = await session.read_resource(uri)
    return _json(uri, result)


async def _refusal(client: SdkClient, uri: str) -> MCPError:
    """The JSON-RPC error a read answers (caught inside the session, which would wrap it)."""
    async with client.session() as session:
        try:
            await session.read_resource(uri)
        except MCPError as exc:
            return exc
    raise AssertionError(f"{uri} was read")


def _json(uri: str, result: Any) -> dict[str, Any]:
    [content] = result.contents
    assert content.mime_type == "application/json" and str(content.uri) == uri
    return json.loads(content.text)  # type: ignore[union-attr]


@pytest.mark.parametrize("mode", ERAS)
def test_the_scene_selection_file_and_history_are_listed_and_read_as_their_tools_answer(
    blender: HeadlessBlender, mode: str
) -> None:
    client = _client(blender, mode)

    async def main() -> None:
        async with client.session() as session:
            listed = [str(resource.uri) for resource in (await session.list_resources()).resources]
            templates = [t.uri_template for t in (await session.list_resource_templates()).resource_templates]
        assert listed[:4] == ["blender://scene", "blender://selection", "blender://file", "blender://agent-history"]
        assert templates == ["blender://objects/{name}", "blender://render-tasks/{task_id}"]
        scene = await _read(client, "blender://scene")
        assert scene == (await client.call_tool("get_objects_summary")).structured
        selection = await _read(client, "blender://selection")
        assert selection == (await client.call_tool("get_objects_summary", {"selected": True})).structured
        assert (await _read(client, "blender://file"))["status"] == "ok"

    asyncio.run(main())


@pytest.mark.parametrize("mode", ERAS)
def test_an_object_is_read_by_its_percent_encoded_name_and_a_missing_one_is_not_found(
    blender: HeadlessBlender, mode: str
) -> None:
    client = _client(blender, mode)
    code = "import bpy\nbpy.data.objects['Cube'].copy().name = 'Chair / left'\nresult = {}"
    asyncio.run(client.call_tool("execute_blender_code", {"code": code}))

    async def main() -> None:
        detail = await _read(client, "blender://objects/Chair%20%2F%20left")
        assert detail["name"] == "Chair / left"
        missing = (await _refusal(client, "blender://objects/Nothing")).error
        assert missing.code == -32602 and missing.data["state"] == "not_found"
        assert missing.data["uri"] == "blender://objects/Nothing" and "No object named 'Nothing'" in missing.message
        unknown = (await _refusal(client, "blender://elsewhere")).error
        assert unknown.code == -32602 and unknown.data == {"uri": "blender://elsewhere"}

    asyncio.run(main())


def test_a_render_task_is_listed_and_read_as_a_resource(blender: HeadlessBlender, tmp_path: Path) -> None:
    client = _client(blender, "2026-07-28")
    arguments = {"output_folder": str(tmp_path), "frame_start": 1, "frame_end": 1}
    asyncio.run(client.call_tool("execute_blender_code", {"code": _WORKBENCH}))
    started = asyncio.run(client.call_tool("start_render_frames_task", arguments))
    assert not started.is_error, started.text
    started = started.structured
    uri = f"blender://render-tasks/{started['task_id']}"

    async def main() -> None:
        async with client.session() as session:
            listed = [str(resource.uri) for resource in (await session.list_resources()).resources]
        assert uri in listed
        assert (await _read(client, uri))["task_id"] == started["task_id"]

    asyncio.run(main())


_WORKBENCH = "import bpy\nbpy.context.scene.render.engine = 'BLENDER_WORKBENCH'\nresult = {}"


@pytest.mark.parametrize("mode", ERAS)
def test_the_prompts_are_listed_and_fill_in_their_arguments(blender: HeadlessBlender, mode: str) -> None:
    client = _client(blender, mode)

    async def main() -> None:
        async with client.session() as session:
            names = [prompt.name for prompt in (await session.list_prompts()).prompts]
            safe = await session.get_prompt("safe-change", {"change": "make the chair wooden"})
            try:
                await session.get_prompt("safe-change", {})
            except MCPError as exc:
                missing = exc.error
        assert names == ["inspect-scene", "safe-change"]
        text = safe.messages[0].content.text  # type: ignore[union-attr]
        assert "make the chair wooden" in text and "undo_agent_steps" in text
        assert missing.code == -32602 and "'change'" in missing.message

    asyncio.run(main())
