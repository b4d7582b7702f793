"""Conformance with the official `mcp` client in both protocol eras, through the runtime file."""

from __future__ import annotations

import asyncio
import json
import os
import stat
import sys

import httpx2
import pytest

from hermes_blender.client import modern_request
from hermes_blender.contract.liveness import RuntimeFileSpec
from hermes_blender.headless import HeadlessBlender
from tests.sdk_client import SdkClient


def _client(blender: HeadlessBlender, mode: str) -> SdkClient:
    return SdkClient(RuntimeFileSpec(path=str(blender.runtime_file)), mode=mode)  # type: ignore[arg-type]


def test_runtime_file_has_three_fields_owner_only_live_pid_and_loopback_http(blender: HeadlessBlender) -> None:
    record = json.loads(blender.runtime_file.read_text())
    assert {"http", "token", "pid"} <= record.keys()
    assert record["pid"] == blender.pid and isinstance(record["pid"], int)
    assert record["http"].startswith("http://127.0.0.1:") and record["http"].rsplit(":", 1)[1].isdigit()
    assert len(record["token"]) >= 32
    if sys.platform != "win32":
        assert stat.S_IMODE(os.stat(blender.runtime_file).st_mode) == 0o600


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28", "auto"])
def test_official_client_lists_tools_and_reads_the_factory_scene(blender: HeadlessBlender, mode: str) -> None:
    client = _client(blender, mode)
    tools = asyncio.run(client.list_tools())
    summary_tool = next(tool for tool in tools if tool["name"] == "get_objects_summary")
    assert summary_tool["annotations"]["readOnlyHint"] is True
    assert summary_tool["outputSchema"]["anyOf"][0]["properties"]["collections"]
    result = asyncio.run(client.call_tool("get_objects_summary"))
    assert not result.is_error
    [collection] = result.structured["collections"][0]["children"]
    assert [obj["name"] for obj in collection["objects"]] == [
        "Cube",
        "Light",
        "Camera",
    ]  # Blender's own order: as linked
    assert json.loads(result.text) == result.structured


def test_legacy_era_negotiates_a_session_and_modern_era_does_not(blender: HeadlessBlender) -> None:
    async def versions() -> tuple[str, str]:
        async with _client(blender, "legacy").session() as legacy, _client(blender, "2026-07-28").session() as modern:
            return legacy.protocol_version, modern.protocol_version

    assert asyncio.run(versions()) == ("2025-11-25", "2026-07-28")


def _post(blender: HeadlessBlender, headers: dict[str, str]) -> httpx2.Response:
    assert blender.endpoint is not None
    body, envelope_headers = modern_request("tools/list", {})
    return httpx2.post(blender.endpoint.url, content=body, headers={**envelope_headers, **headers}, timeout=10)


def test_no_token_or_wrong_token_is_401(blender: HeadlessBlender) -> None:
    assert _post(blender, {}).status_code == 401
    assert _post(blender, {"Authorization": "Bearer wrong"}).status_code == 401
    assert blender.endpoint is not None
    assert _post(blender, blender.endpoint.headers()).status_code == 200


def test_foreign_origin_or_host_is_403(blender: HeadlessBlender) -> None:
    assert blender.endpoint is not None
    auth = blender.endpoint.headers()
    assert _post(blender, {**auth, "Origin": "https://evil.example"}).status_code == 403
    assert _post(blender, {**auth, "Host": "evil.example"}).status_code == 403
