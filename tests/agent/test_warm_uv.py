"""scripts/warm_uv.py against a local git repository: success, each failure, and a timeout."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import PLUGIN_ROOT, REPO_ROOT

SCRIPT = REPO_ROOT / "scripts" / "warm_uv.py"
TOOL = """
import os, sys, time
def main():
    mode = os.environ.get("TINY_MODE", "ok")
    if mode == "fail":
        print("tiny-server: broken configuration", file=sys.stderr)
        sys.exit(3)
    if mode == "fastmcp":
        raise ModuleNotFoundError("No module named 'mcp.server.fastmcp'")
    if mode == "sleep":
        time.sleep(120)
    print("usage: tiny-server [--transport stdio]")
"""

pytestmark = [
    pytest.mark.skipif(shutil.which("git") is None or shutil.which("uv") is None, reason="needs git and uv"),
    pytest.mark.timeout(600),
]


def _git_package(folder: Path, *, backend: str = "hatchling.build") -> str:
    (folder / "tinytool").mkdir(parents=True)
    (folder / "tinytool" / "__init__.py").write_text(TOOL)
    (folder / "pyproject.toml").write_text(
        '[project]\nname = "tinytool"\nversion = "0.1.0"\n[project.scripts]\ntiny-server = "tinytool:main"\n'
        f'[build-system]\nrequires = ["hatchling"]\nbuild-backend = "{backend}"\n'
    )
    git = ["git", "-C", str(folder), "-c", "user.name=t", "-c", "user.email=t@t.invalid"]
    subprocess.run(["git", "init", "-q", str(folder)], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "tiny"], check=True)
    return subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()


@pytest.fixture(scope="module")
def tiny_repo(tmp_path_factory: pytest.TempPathFactory) -> str:
    folder = tmp_path_factory.mktemp("tiny")
    sha = _git_package(folder)
    return f"git+file://{folder}@{sha}"


def _mcp_json(folder: Path, source: str, env: dict[str, str] | None = None) -> Path:
    path = folder / "mcp.json"
    path.write_text(
        json.dumps(
            {
                "$schema": "x",
                "mcpServers": {
                    "tiny": {
                        "type": "stdio",
                        "command": "uv",
                        "args": ["tool", "run", "--from", source, "tiny-server", "--transport", "stdio"],
                        "env": env or {},
                    }
                },
            }
        )
    )
    return path


def _warm(mcp_json: Path, *extra: str, path: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": path if path is not None else os.environ["PATH"]}
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--mcp-json", str(mcp_json), "--server", "tiny", *extra],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


def test_help_works_without_uv_installed() -> None:
    run = subprocess.run([sys.executable, str(SCRIPT), "--help"], capture_output=True, text=True, env={"PATH": ""})
    assert run.returncode == 0 and "--mcp-json" in run.stdout


def test_warming_runs_the_exact_command_from_mcp_json_with_help(tmp_path: Path, tiny_repo: str) -> None:
    run = _warm(_mcp_json(tmp_path, tiny_repo))
    assert run.returncode == 0, run.stderr
    assert f"warming tiny: uv tool run --from {tiny_repo} tiny-server --help" in run.stdout
    assert "usage: tiny-server" in run.stdout and "s] " in run.stdout  # progress lines carry elapsed time
    assert run.stdout.rstrip().endswith("s)") and "ready: tiny" in run.stdout


def test_the_repository_mcp_json_warms_blender_lab_as_the_relay_then_the_official_server_with_the_mcp_pin() -> None:
    warm_uv = _warm_uv_module()
    command, env = warm_uv.load_command(PLUGIN_ROOT / "mcp.json", "blender_lab")
    relay, official = warm_uv.warm_commands(command)
    toolkit = json.loads((PLUGIN_ROOT / "mcp.json").read_text())["mcpServers"]["blender"]["args"][3]
    assert relay == ["uv", "tool", "run", "--from", toolkit, "hermes-blender", "--help"]
    assert official[:5] == ["uv", "tool", "run", "--with", "mcp<2"] and official[-2:] == ["blender-mcp", "--help"]
    assert env == {"BLENDER_MCP_HOST": "127.0.0.1", "BLENDER_MCP_PORT": "9876"}


def test_warming_a_relay_warms_the_server_it_runs_too(tmp_path: Path, tiny_repo: str) -> None:
    """`hermes-blender lab -- uv tool run … blender-mcp …`: the toolkit (this checkout, as tests/hermes points it)
    and the server after `--` (a tiny one here: the official one's host is not reachable) are both built, in turn."""
    mcp = json.loads((PLUGIN_ROOT / "mcp.json").read_text())
    args = mcp["mcpServers"]["blender_lab"]["args"]
    args[args.index("--from") + 1] = str(REPO_ROOT)
    official = args.index("--") + 1
    args[official:] = ["uv", "tool", "run", "--from", tiny_repo, "tiny-server", "--transport", "stdio"]
    (tmp_path / "mcp.json").write_text(json.dumps(mcp))
    run = subprocess.run(
        [sys.executable, str(SCRIPT), "--mcp-json", str(tmp_path / "mcp.json"), "--server", "blender_lab"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    relay = run.stdout.index(f"warming blender_lab: uv tool run --from {REPO_ROOT} hermes-blender --help")
    served = run.stdout.index(f"warming blender_lab: uv tool run --from {tiny_repo} tiny-server --help")
    assert relay < served < run.stdout.index("usage: tiny-server") < run.stdout.index("ready: blender_lab")


def test_a_server_that_exits_non_zero_is_reported_with_its_output(tmp_path: Path, tiny_repo: str) -> None:
    run = _warm(_mcp_json(tmp_path, tiny_repo, {"TINY_MODE": "fail"}))
    assert run.returncode == 1
    assert "the server exited with code 3" in run.stderr and "broken configuration" in run.stderr


def test_the_missing_fastmcp_module_points_at_the_mcp_pin(tmp_path: Path, tiny_repo: str) -> None:
    run = _warm(_mcp_json(tmp_path, tiny_repo, {"TINY_MODE": "fastmcp"}))
    assert run.returncode == 1 and '--with "mcp<2"' in run.stderr


def test_a_build_failure_says_so(tmp_path: Path) -> None:
    folder = tmp_path / "broken"
    sha = _git_package(folder, backend="no_such_backend.build")
    run = _warm(_mcp_json(tmp_path, f"git+file://{folder}@{sha}"))
    assert run.returncode == 1 and "failed to build" in run.stderr


def test_an_unreachable_git_host_is_a_network_message(tmp_path: Path) -> None:
    run = _warm(_mcp_json(tmp_path, "git+https://127.0.0.1:9/lab/blender_mcp.git"))
    assert run.returncode == 1 and "network is unreachable" in run.stderr


def test_a_timeout_stops_the_process_and_says_what_to_do(tmp_path: Path, tiny_repo: str) -> None:
    run = _warm(_mcp_json(tmp_path, tiny_repo, {"TINY_MODE": "sleep"}), "--timeout", "8")
    assert run.returncode == 1 and "not finished after 8 s" in run.stderr and "--timeout" in run.stderr


def test_missing_uv_and_missing_git_are_named(tmp_path: Path, tiny_repo: str) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    run = _warm(_mcp_json(tmp_path, tiny_repo), path=str(empty))
    assert run.returncode == 1 and "uv is not installed" in run.stderr
    only_uv = tmp_path / "only-uv"
    only_uv.mkdir()
    (only_uv / "uv").symlink_to(shutil.which("uv"))  # type: ignore[arg-type]
    run = _warm(_mcp_json(tmp_path, tiny_repo), path=str(only_uv))
    assert run.returncode == 1 and "git is not installed" in run.stderr


def _warm_uv_module():
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import warm_uv
    finally:
        sys.path.pop(0)
    return warm_uv


def test_the_repository_mcp_json_warms_the_relay_at_this_version_first_then_blender_lab() -> None:
    warm_uv = _warm_uv_module()
    assert warm_uv.uv_servers(PLUGIN_ROOT / "mcp.json") == ["blender", "blender_lab"]  # the default: both
    command, env = warm_uv.load_command(PLUGIN_ROOT / "mcp.json", "blender")
    warm = warm_uv.warm_command(command)
    assert warm == [
        "uv",
        "tool",
        "run",
        "--from",
        json.loads((PLUGIN_ROOT / "mcp.json").read_text())["mcpServers"]["blender"]["args"][3],
        "hermes-blender",
        "--help",
    ]
    assert env == {"HERMES_BLENDER_CLIENT": "hermes"}


def test_warming_the_relay_builds_the_toolkit_hermes_will_start(tmp_path: Path) -> None:
    """The shipped entry with its source pointed at this checkout (as tests/hermes does): the toolkit builds and
    answers `--help`, so Hermes's first start of `blender` finds it in uv's cache."""
    mcp = json.loads((PLUGIN_ROOT / "mcp.json").read_text())
    args = mcp["mcpServers"]["blender"]["args"]
    args[args.index("--from") + 1] = str(REPO_ROOT)
    (tmp_path / "mcp.json").write_text(json.dumps(mcp))
    run = subprocess.run(
        [sys.executable, str(SCRIPT), "--mcp-json", str(tmp_path / "mcp.json"), "--server", "blender"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    assert f"warming blender: uv tool run --from {REPO_ROOT} hermes-blender --help" in run.stdout
    assert "ready: blender" in run.stdout and "mcp" in run.stdout  # the toolkit's own help names its commands
