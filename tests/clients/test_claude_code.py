"""Claude Code's own CLI, configured by `hermes-blender connect claude-code --write`, as a new user would."""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import Callable
from pathlib import Path

from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.clients.conftest import UserHome


def _claude_mcp_list(claude: Path, home: UserHome) -> str:
    done = subprocess.run(
        [str(claude), "mcp", "list"], cwd=home.project, env=home.env(), capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _scene_through_entry(entry: dict, home: UserHome) -> str:
    """Start the entry's command exactly as written in the config and ask for the scene."""

    async def main() -> str:
        server = StdioServerParameters(command=entry["command"], args=entry["args"], env=home.env())
        async with Client(stdio_client(server), read_timeout_seconds=60) as client:  # type: ignore[arg-type]
            result = await client.call_tool("get_objects_summary", {})
        assert not result.is_error, result
        return result.structured_content["scene_name"]

    return asyncio.run(main())


def test_claude_code_connects_through_the_written_entry_across_a_blender_restart(
    npm_install: Callable[[str], Path], user_home: UserHome
) -> None:
    claude = npm_install("claude") / "node_modules" / ".bin" / "claude"
    written = user_home.connect("claude-code")
    config = user_home.home / ".claude.json"
    assert "wrote the 'blender' entry for Claude Code" in written.stderr
    entry = json.loads(config.read_text())["mcpServers"]["blender"]
    assert Path(entry["command"]).is_absolute() and entry["args"] == ["mcp"]  # no address, no token

    urls = []
    for _start in ("first", "second"):
        with user_home.blender() as blender:
            urls.append(json.loads(blender.runtime_file.read_text())["http"])
            listed = _claude_mcp_list(claude, user_home)
            assert "blender:" in listed and "✔ Connected" in listed, listed
            assert json.loads(config.read_text())["mcpServers"]["blender"] == entry  # untouched
            assert _scene_through_entry(entry, user_home) == "Scene"
    assert urls[0] != urls[1]  # a new port: the same entry followed it
