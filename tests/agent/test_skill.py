"""The workflow skill loads under Hermes's skill rules; a broken front matter is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from hermes_blender.checks import validate
from hermes_blender.contract.host import HostFacts
from hermes_blender.contract.package import load_plugin
from hermes_blender.errors import ContractError
from tests.conftest import PLUGIN_ROOT

LINUX = HostFacts(os="linux", env={"HOME": "/home/ana", "PATH": ""})


def test_the_repository_skill_is_accepted_and_covers_every_state() -> None:
    [skill] = load_plugin(PLUGIN_ROOT).skills
    assert skill.name == "blender" and 1 <= len(skill.description) <= 1024
    text = skill.path.read_text()
    for state in (
        "missing_app",
        "version_too_old",
        "app_not_running",
        "endpoint_unavailable",
        "hermes_not_connected",
        "no_interactive_session",
    ):
        assert f"`{state}`" in text, state
    assert "not a sandbox" in text and (skill.path.parent / "references" / "states.md").is_file()


def test_the_skill_quotes_what_the_model_really_receives_and_names_the_real_reload_command() -> None:
    """The messages are the ones tests/hermes/test_real_hermes.py receives from (or makes with) the real Hermes."""
    text = (PLUGIN_ROOT / "skills" / "blender" / "SKILL.md").read_text()
    for message in (
        '"state": "app_not_running"',
        "MCP server 'blender' rejected the last 3 calls (it is reachable; see the error text those calls returned).",
        "MCP server 'blender' lost its stdio subprocess after the tool call began.",
        "Unknown tool: mcp__blender__get_objects_summary",
    ):
        assert message in text, message
    assert "`/reload-mcp`" in text and "mcp.reload" not in text
    assert "requires_apps: [blender]" in text  # the real Hermes hides the skill where Blender is absent


def test_a_closed_blender_is_never_answered_with_reload_mcp() -> None:
    """The relay follows Blender at the next call: a reload is advice only where Hermes could not start it."""
    text = (PLUGIN_ROOT / "skills" / "blender" / "SKILL.md").read_text()
    closed = [line for line in text.splitlines() if "app_not_running" in line or "endpoint_unavailable" in line]
    assert len(closed) >= 3 and all("reload" not in line for line in closed), closed


@pytest.mark.parametrize(
    ("front_matter", "rule"),
    [
        ("name: Blender\ndescription: x", "name must match the directory"),
        ("name: blender-tools\ndescription: x", "name must match the directory"),
        ("name: blender", "description must be a non-empty string"),
        ("name: blender\ndescription: " + "x" * 1025, "at most 1024 characters"),
        ("name: blender\ndescription: x\ncompatibility: ''", "compatibility must be a string of 1 to 500"),
        ("name: blender\ndescription: x\nmetadata: {a: 1}", "metadata must map string keys to string values"),
        ("name: blender\ndescription: [unclosed", "invalid YAML frontmatter"),
        ("name: blender\ndescription: x\nmetadata: " + "[" * 5000 + "]" * 5000, "nested too deeply"),
    ],
    ids=["name", "folder", "description", "long", "compatibility", "metadata", "yaml", "deep"],
)
def test_a_broken_front_matter_in_a_copy_is_rejected(plugin_copy, front_matter: str, rule: str) -> None:
    root = plugin_copy(None)
    skill = root / "skills" / "blender" / "SKILL.md"
    body = skill.read_text().split("\n---\n", 1)[1]
    skill.write_text(f"---\n{front_matter}\n---\n{body}")
    with pytest.raises(ContractError, match="skill:blender") as caught:
        validate(root, LINUX)
    assert rule in str(caught.value)


def test_a_skill_that_links_outside_the_plugin_root_is_refused(plugin_copy, tmp_path: Path) -> None:
    root = plugin_copy(None)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "SKILL.md").write_text("---\nname: leak\ndescription: x\n---\n")
    (root / "skills" / "leak").symlink_to(outside, target_is_directory=True)
    with pytest.raises(ContractError, match="skill:leak: SKILL.md must be a regular in-root file"):
        validate(root, LINUX)


def test_a_plugin_json_nested_too_deeply_is_a_clear_refusal(plugin_copy) -> None:
    root = plugin_copy(None)
    (root / "plugin.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ContractError, match="nested too deeply"):
        validate(root, LINUX)


def test_the_skill_teaches_the_long_work_path_with_the_tools_that_exist() -> None:
    """Renders longer than a client waits go through the task trio; scripts say how far they are."""
    from hermes_blender.stdio_server import shipped_catalogue

    text = (PLUGIN_ROOT / "skills" / "blender" / "SKILL.md").read_text()
    names = {tool["name"] for tool in shipped_catalogue()}
    for tool in (
        "render_frames_to_folder",
        "start_render_frames_task",
        "get_render_frames_task",
        "cancel_render_frames_task",
    ):
        assert f"`{tool}`" in text and tool in names, tool
    assert "progress(fraction" in text and "poll_interval_ms" in text
