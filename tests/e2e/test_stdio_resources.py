"""Resources and prompts through `hermes-blender mcp`, with Blender running and closed."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, types
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError

from hermes_blender.contract.liveness import RuntimeFileSpec, read_live_endpoint
from hermes_blender.headless import HeadlessBlender
from hermes_blender.stdio_server import shipped_views
from hermes_blender.transport import request_once
from tests.e2e.test_stdio_server import _server, _session


def test_with_blender_closed_the_shipped_views_are_listed_and_a_read_names_the_state(tmp_path: Path) -> None:
    runtime_file = tmp_path / "Blender" / "server.json"

    async def body(client: Client) -> tuple[Any, ...]:
        listed = await client.list_resources()
        templates = await client.list_resource_templates()
        prompts = await client.list_prompts()
        try:
            await client.read_resource("blender://scene")
        except MCPError as exc:
            return listed, templates, prompts, exc.error
        raise AssertionError("read without Blender")

    (listed, templates, prompts, refused), _ = _session(runtime_file, body)
    assert [str(resource.uri) for resource in listed.resources][0] == "blender://scene"
    assert [template.uri_template for template in templates.resource_templates][0] == "blender://objects/{name}"
    assert [prompt.name for prompt in prompts.prompts] == ["inspect-scene", "safe-change"]
    assert refused.message.startswith("app_not_running: Blender is not running. Start Blender, then try again.")
    assert refused.data["state"] == "app_not_running" and refused.data["retry"] == "after_user_action"


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
def test_with_blender_running_resources_and_prompts_come_from_it(tmp_path: Path, mode: str) -> None:
    runtime_file = tmp_path / "Blender" / "server.json"

    async def body(client: Client) -> tuple[Any, ...]:
        scene = await client.read_resource("blender://scene")
        cube = await client.read_resource("blender://objects/Cube")
        prompt = await client.get_prompt("safe-change", {"change": "make the chair wooden"})
        try:
            await client.read_resource("blender://objects/Chair")
        except MCPError as exc:
            return scene, cube, prompt, exc.error
        raise AssertionError("read a missing object")

    with HeadlessBlender(runtime_file):
        (scene, cube, prompt, missing), _ = _session(runtime_file, body, mode)
    assert json.loads(scene.contents[0].text)["scene_name"] == "Scene"
    assert json.loads(cube.contents[0].text)["name"] == "Cube"
    assert "make the chair wooden" in prompt.messages[0].content.text
    assert missing.code == -32602 and missing.data["state"] == "not_found"


def test_the_shipped_views_are_what_a_live_blender_lists(blender: HeadlessBlender) -> None:
    endpoint = read_live_endpoint(RuntimeFileSpec(path=str(blender.runtime_file)))

    async def live() -> dict[str, Any]:
        resources = await request_once(endpoint, "resources/list", {})
        templates = await request_once(endpoint, "resources/templates/list", {})
        prompts = await request_once(endpoint, "prompts/list", {})
        return {
            "resources": [r for r in resources["resources"] if "render-tasks/" not in r["uri"]],
            "resourceTemplates": templates["resourceTemplates"],
            "prompts": prompts["prompts"],
        }

    assert asyncio.run(live()) == shipped_views(), "regenerate hermes_blender/views.json from a live Blender"


@pytest.mark.filterwarnings("ignore:resources/subscribe is removed")  # the 2025 way, on purpose
def test_a_stdio_client_subscribed_to_the_cube_hears_another_clients_change_and_a_restart(tmp_path: Path) -> None:
    runtime_file = tmp_path / "Blender" / "server.json"
    heard: list[str] = []
    arrived = anyio.Event()

    async def handler(message: Any) -> None:
        notification = getattr(message, "root", message)
        if isinstance(notification, types.ResourceUpdatedNotification):
            heard.append(str(notification.params.uri))
            arrived.set()

    async def wait_for_update() -> None:
        nonlocal arrived
        with anyio.fail_after(10):
            await arrived.wait()
        arrived = anyio.Event()

    async def main() -> None:
        server = _server(runtime_file)
        async with Client(stdio_client(server), message_handler=handler, mode="legacy") as client:  # type: ignore[arg-type]
            with HeadlessBlender(runtime_file):
                await client.subscribe_resource("blender://objects/Cube")
                await anyio.sleep(1.5)  # the relay opens its stream to Blender
                code = "import bpy\nbpy.data.objects['Cube'].location.x += 1\nresult = {}"
                assert not (await client.call_tool("execute_blender_code", {"code": code})).is_error
                await wait_for_update()
            with HeadlessBlender(runtime_file):  # Blender restarted: a new scene
                await wait_for_update()

    asyncio.run(main())
    assert heard == ["blender://objects/Cube", "blender://objects/Cube"], heard


def test_a_2026_stdio_client_listening_to_the_cube_hears_another_clients_change(tmp_path: Path) -> None:
    runtime_file = tmp_path / "Blender" / "server.json"

    async def main() -> list[Any]:
        heard: list[Any] = []
        async with Client(stdio_client(_server(runtime_file)), mode="2026-07-28") as client:  # type: ignore[arg-type]
            with HeadlessBlender(runtime_file):
                async with client.listen(resource_subscriptions=["blender://objects/Cube"]) as stream:
                    await anyio.sleep(1.5)  # the relay opens its stream to Blender
                    code = "import bpy\nbpy.data.objects['Cube'].location.x += 1\nresult = {}"
                    assert not (await client.call_tool("execute_blender_code", {"code": code})).is_error
                    with anyio.fail_after(10):
                        async for event in stream:
                            heard.append(event)
                            break
        return heard

    [event] = asyncio.run(main())
    assert event.uri == "blender://objects/Cube"


@pytest.mark.filterwarnings("ignore:resources/subscribe is removed")
def test_a_subscription_to_a_resource_no_blender_serves_is_refused(tmp_path: Path) -> None:
    """One such URI would make Blender refuse the relay's shared stream, and every other subscription with it."""

    async def body(client: Client) -> Any:
        await client.subscribe_resource("blender://objects/Cube")
        try:
            await client.subscribe_resource("file:///etc/passwd")
        except MCPError as exc:
            return exc.error
        raise AssertionError("subscribed")

    refused, _ = _session(tmp_path / "Blender" / "server.json", body)
    assert refused.code == -32602 and "no resource" in refused.message


def test_a_listen_the_relay_could_not_follow_is_refused_and_the_others_keep_hearing(tmp_path: Path) -> None:
    """A URI no Blender serves, or more than one stream may name, once made Blender refuse the relay's one stream."""
    runtime_file = tmp_path / "Blender" / "server.json"

    async def refused(client: Client, uris: list[str]) -> str:
        try:
            async with client.listen(resource_subscriptions=uris):
                pass
        except MCPError as exc:
            return exc.error.message
        raise AssertionError(f"listened to {len(uris)} URIs")

    async def main() -> tuple[list[str], Any]:
        async with Client(stdio_client(_server(runtime_file)), mode="2026-07-28") as client:  # type: ignore[arg-type]
            with HeadlessBlender(runtime_file):
                async with client.listen(resource_subscriptions=["blender://objects/Cube"]) as stream:
                    words = [
                        await refused(client, ["blender://objects/" + "a" * 2100]),
                        await refused(client, [f"blender://objects/O{n}" for n in range(300)]),
                    ]
                    await anyio.sleep(1.5)
                    code = "import bpy\nbpy.data.objects['Cube'].location.x += 1\nresult = {}"
                    assert not (await client.call_tool("execute_blender_code", {"code": code})).is_error
                    with anyio.fail_after(10):
                        async for event in stream:
                            return words, event
        raise AssertionError("no update")

    (words, event) = asyncio.run(main())
    assert "no resource" in words[0] and "at most 256" in words[1]
    assert event.uri == "blender://objects/Cube"
