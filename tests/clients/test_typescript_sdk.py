"""The official TypeScript SDK's stdio client: list and call, its output-schema check included."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from hermes_blender.stdio_server import OWN_TOOLS, shipped_catalogue
from tests.clients.conftest import UserHome

SCRIPT = Path(__file__).with_name("ts_stdio_client.cjs")


def test_the_typescript_sdk_lists_and_calls_with_the_structured_content_matching_its_schema(
    npm_install: Callable[[str], Path], user_home: UserHome
) -> None:
    prefix = npm_install("sdk")
    server = [str(Path(sys.executable).parent / "hermes-blender"), "mcp"]
    with user_home.blender():
        done = subprocess.run(
            ["node", str(SCRIPT), str(prefix), *server],
            env=user_home.env(),
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 0, done.stderr  # the SDK throws when structuredContent breaks the outputSchema
    answer = json.loads(done.stdout)
    assert answer["tools"] == [tool["name"] for tool in shipped_catalogue()] + OWN_TOOLS
    assert answer["hasOutputSchema"] and not answer["isError"] and answer["sceneName"] == "Scene"
