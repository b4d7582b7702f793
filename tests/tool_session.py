"""Tool calls to one bridge through the official SDK's client, for tests that call many: `ok` asserts the call
succeeded and answers its structured content, `run` runs code in Blender and answers its `result`."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from hermes_blender.client import ToolResult
from hermes_blender.contract.liveness import RuntimeFileSpec
from tests.sdk_client import SdkClient


class Session:
    def __init__(self, runtime_file: Path) -> None:
        self.runtime_file = runtime_file
        self.client = SdkClient(RuntimeFileSpec(path=str(runtime_file)), mode="2026-07-28")

    def call(self, name: str, arguments: dict[str, Any] | None = None) -> ToolResult:
        return asyncio.run(self.client.call_tool(name, arguments or {}))

    def ok(self, name: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        result = self.call(name, arguments)
        assert not result.is_error, result.text
        assert result.structured is not None
        return result.structured

    def run(self, code: str) -> Any:
        return self.ok("execute_blender_code", {"code": code})["result"]
