"""What Claude Code and Gemini CLI hand their model from a tool call through `hermes-blender mcp`.

Each CLI runs as a new user has it (`connect CLIENT --write`), with its base URL pointed at a scripted stand-in for
its model API on loopback (`model_stand_in.py`), which asks for one tool call and keeps the next request: the tool's
result as the model reads it. The named state must reach the model in every client, with its sentence.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path

import pytest

from tests.clients.conftest import UserHome
from tests.clients.model_stand_in import model_stand_in

PROMPT = "Use the Blender tool."


Launch = tuple[list[str], dict[str, str]]
"""A CLI's command line for one prompt, and its environment."""


def _claude(npm_install: Callable[[str], Path], home: UserHome, tool: str, base_url: str) -> Launch:
    home.connect("claude-code")
    claude = npm_install("claude") / "node_modules" / ".bin" / "claude"
    environment = home.env(
        ANTHROPIC_BASE_URL=base_url,
        ANTHROPIC_API_KEY="stand-in",
        ENABLE_TOOL_SEARCH="false",  # else MCP tools hide behind a search tool
        MCP_CONNECTION_NONBLOCKING="0",  # else the server may still be starting at the first turn
    )
    return [str(claude), "-p", PROMPT, "--allowedTools", f"mcp__blender__{tool}"], environment


def _gemini(npm_install: Callable[[str], Path], home: UserHome, tool: str, base_url: str) -> Launch:
    settings = home.home / ".gemini" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text(json.dumps({"security": {"auth": {"selectedType": "gemini-api-key"}}}))
    home.connect("gemini")  # merged into the user's settings
    gemini = npm_install("gemini") / "node_modules" / ".bin" / "gemini"
    environment = home.env(
        GOOGLE_GEMINI_BASE_URL=base_url, GEMINI_API_KEY="stand-in", GEMINI_CLI_TRUST_WORKSPACE="true"
    )
    # A named model: Gemini's router would otherwise ask the model to classify the prompt first.
    return [str(gemini), "-p", PROMPT, "--approval-mode", "yolo", "-m", "gemini-2.5-flash"], environment


def _gemini_over_http(npm_install: Callable[[str], Path], home: UserHome, tool: str, base_url: str) -> Launch:
    """Gemini with a static HTTP entry for the running Blender (as `gemini mcp add --transport http` writes it)."""
    command, environment = _gemini(npm_install, home, tool, base_url)
    published = json.loads(home.runtime_file.read_text())
    add = [command[0], "mcp", "add", "--transport", "http", "-H", f"Authorization: Bearer {published['token']}"]
    subprocess.run(
        [*add, "blender", published["http"] + "/mcp"], cwd=home.project, env=environment, check=True, timeout=120
    )
    return command, environment


CLIENTS = {"claude-code": _claude, "gemini": _gemini}
RUNNING = {**CLIENTS, "gemini-over-http": _gemini_over_http}
"""With Blender running, Gemini also reaches the bridge's own HTTP endpoint directly."""


def _what_the_model_hears(
    client: str,
    npm_install: Callable[[str], Path],
    home: UserHome,
    tool: str,
    arguments: dict,
    blender: bool,
    mode: str | None = None,
) -> str:
    with model_stand_in(tool, arguments) as (model, base_url), home.blender(mode) if blender else nullcontext():
        command, environment = RUNNING[client](npm_install, home, tool, base_url)
        done = subprocess.run(command, cwd=home.project, env=environment, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        [result] = model.tool_results()
    return result


@pytest.mark.parametrize("client", CLIENTS)
def test_with_blender_closed_the_model_hears_app_not_running_and_its_sentence(
    client: str, npm_install: Callable[[str], Path], user_home: UserHome
) -> None:
    heard = _what_the_model_hears(client, npm_install, user_home, "get_objects_summary", {}, blender=False)
    assert "app_not_running" in heard and "Blender is not running. Start Blender, then try again." in heard, heard
    assert "output schema" not in heard, heard


@pytest.mark.parametrize("client", RUNNING)
def test_a_missing_object_reaches_the_model_as_not_found_and_its_sentence(
    client: str, npm_install: Callable[[str], Path], user_home: UserHome
) -> None:
    heard = _what_the_model_hears(
        client, npm_install, user_home, "get_object_detail_summary", {"name": "Chair"}, blender=True
    )
    assert "not_found" in heard and "No object named 'Chair' in this file" in heard, heard


@pytest.mark.parametrize("client", RUNNING)
def test_with_blender_running_the_model_hears_the_scene(
    client: str, npm_install: Callable[[str], Path], user_home: UserHome
) -> None:
    heard = _what_the_model_hears(client, npm_install, user_home, "get_objects_summary", {}, blender=True)
    assert "scene_name" in heard and "Cube" in heard and 'is_error": true' not in heard, heard


DELETE_CUBE = {"code": "bpy.data.objects.remove(bpy.data.objects['Cube'])"}


ASKED = {"claude-code": "denied_by_user", "gemini": "confirmation_unavailable"}
"""What an ask-first Blender answers each CLI run with `-p`: Claude Code declares it can ask its user and, with
nobody at its prompt, declines (the person's no); Gemini CLI declares no elicitation, so nobody can be asked."""


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("mode", ["read-only", "ask"])
def test_the_persons_mode_reaches_the_model_as_its_state_and_user_action(
    client: str, mode: str, npm_install: Callable[[str], Path], user_home: UserHome
) -> None:
    heard = _what_the_model_hears(
        client, npm_install, user_home, "execute_blender_code", DELETE_CUBE, blender=True, mode=mode
    )
    state = "read_only" if mode == "read-only" else ASKED[client]
    assert state in heard and "user_action" in heard, heard
