"""The MCP Inspector's CLI over stdio: list, call, and the named state when Blender is closed."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from hermes_blender.stdio_server import OWN_TOOLS, shipped_catalogue
from tests.clients.conftest import UserHome


def _inspector(prefix: Path, home: UserHome, *method: str) -> tuple[int, dict]:
    server = [str(Path(sys.executable).parent / "hermes-blender"), "mcp"]
    done = subprocess.run(
        [str(prefix / "node_modules" / ".bin" / "mcp-inspector"), "--cli", *server, *method],
        cwd=prefix,  # its CLI wants a package.json above the folder it runs in
        env=home.env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    first, _ = json.JSONDecoder().raw_decode(done.stdout.lstrip())  # the answer; a tool error adds an error line
    return done.returncode, first


def test_the_inspector_lists_and_calls_the_tools_over_stdio(
    npm_install: Callable[[str], Path], user_home: UserHome
) -> None:
    prefix = npm_install("mcp-inspector")
    with user_home.blender():
        code, listed = _inspector(prefix, user_home, "--method", "tools/list")
        served = [tool["name"] for tool in shipped_catalogue()] + OWN_TOOLS
        assert code == 0 and [tool["name"] for tool in listed["tools"]] == served
        code, called = _inspector(prefix, user_home, "--method", "tools/call", "--tool-name", "get_objects_summary")
    assert code == 0 and not called.get("isError"), called
    assert called["structuredContent"]["scene_name"] == "Scene"
    assert "Cube" in called["content"][0]["text"]


def test_with_blender_closed_the_inspector_gets_the_named_state(
    npm_install: Callable[[str], Path], user_home: UserHome
) -> None:
    code, called = _inspector(
        npm_install("mcp-inspector"), user_home, "--method", "tools/call", "--tool-name", "get_objects_summary"
    )
    assert code != 0 and called["isError"] is True  # the Inspector reports a tool error as a failed call
    payload = json.loads(called["content"][0]["text"])
    assert payload["state"] == "app_not_running" and payload["user_action"] == "Start Blender, then try again."


def test_the_inspector_strict_schema_check_finds_nothing_over_stdio_and_http(
    npm_install: Callable[[str], Path], user_home: UserHome
) -> None:
    """`--strict` lints every tool's schemas for portability (a type array warns: one-type dialects mishandle it)."""
    prefix = npm_install("mcp-inspector")
    inspector = str(prefix / "node_modules" / ".bin" / "mcp-inspector")
    stdio = [str(Path(sys.executable).parent / "hermes-blender"), "mcp"]
    with user_home.blender() as blender:
        published = json.loads(blender.runtime_file.read_text())
        http = [published["http"] + "/mcp", "--header", f"Authorization: Bearer {published['token']}"]
        for server in (stdio, http):
            done = subprocess.run(
                [inspector, "--cli", *server, "--method", "tools/list", "--strict"],
                cwd=prefix,
                env=user_home.env(),
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert done.returncode == 0, done.stderr
            assert "warning" not in done.stderr.lower() and "error" not in done.stderr.lower(), done.stderr
            assert len(json.loads(done.stdout)["tools"]) >= 29
