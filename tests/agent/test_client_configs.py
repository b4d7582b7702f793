"""`hermes-blender connect`: each client's entry, and merging it without losing anything."""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from hermes_blender.client_configs import CLIENTS, TOOLKIT_SOURCE, Launch, find_launch, host_defaults, write_entry
from hermes_blender.contract.host import HostFacts
from hermes_blender.errors import ConnectError

pytestmark = pytest.mark.timeout(120)

LAUNCH = Launch("/opt/tools/bin/hermes-blender", ("mcp",), "toolkit")
NOW = datetime.datetime(2026, 12, 1, 16, 0, 0)


def _entry_in(path: Path, table: str) -> dict:
    data = tomllib.loads(path.read_text()) if path.suffix == ".toml" else json.loads(path.read_text())
    return data[table]["blender"]


@pytest.mark.parametrize("name", sorted(CLIENTS))
def test_every_entry_starts_the_stdio_server_by_absolute_path_with_no_address_or_token(
    name: str, tmp_path: Path
) -> None:
    client = CLIENTS[name]
    path = tmp_path / ("config.toml" if client.syntax == "toml" else "config.json")
    write_entry(client, LAUNCH, path, now=NOW)
    entry = _entry_in(path, client.table)
    assert entry["command"] == LAUNCH.command and entry["args"] == ["mcp"]
    text = path.read_text()
    assert "http" not in text and "token" not in text.lower() and "Authorization" not in text
    assert client.snippet(LAUNCH).count(LAUNCH.command) == 1


def test_a_merge_keeps_every_other_setting_and_backs_up_the_file_first(tmp_path: Path) -> None:
    path = tmp_path / ".claude.json"
    before = {"theme": "dark", "mcpServers": {"other": {"command": "/bin/other", "args": []}}, "oauth": {"k": 1}}
    path.write_text(json.dumps(before))
    path.chmod(0o600)
    written = write_entry(CLIENTS["claude-code"], LAUNCH, path, now=NOW)
    after = json.loads(path.read_text())
    assert after["theme"] == "dark" and after["oauth"] == {"k": 1}
    assert after["mcpServers"]["other"] == before["mcpServers"]["other"] and "blender" in after["mcpServers"]
    assert written.backup == tmp_path / ".claude.json.bak-20261201-160000"
    assert json.loads(written.backup.read_text()) == before
    if os.name == "posix":
        assert path.stat().st_mode & 0o777 == 0o600 and written.backup.stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize("name", sorted(CLIENTS))
def test_connecting_the_same_client_again_says_nothing_changed_and_makes_no_backup(name: str, tmp_path: Path) -> None:
    """Gemini's entry holds a number (its timeout), which the merge reads as the file spells it: the same entry
    written again must still be the same entry, for every client, not another identical file and backup."""
    path = tmp_path / ("config.toml" if CLIENTS[name].syntax == "toml" else "config.json")
    path.write_text("")  # a file that exists: the first write backs it up
    command = [sys.executable, "-m", "hermes_blender.cli", "connect", name, "--write", "--config", str(path)]
    first = subprocess.run([*command, "--command", LAUNCH.command], capture_output=True, text=True, timeout=60)
    text = path.read_text()
    again = subprocess.run([*command, "--command", LAUNCH.command], capture_output=True, text=True, timeout=60)
    assert first.returncode == 0 and "wrote the 'blender' entry" in first.stderr, first.stderr
    assert again.returncode == 0 and "already has this entry; nothing changed" in again.stderr, again.stderr
    assert path.read_text() == text and len(list(tmp_path.glob("config.*.bak-*"))) == 1


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("zed", '{\n  // my settings\n  "theme": "One Dark"\n}\n'),  # Zed's settings allow comments
        ("cursor", '{"mcpServers": {'),
        ("cursor", '["not", "an", "object"]'),
        ("cursor", '{"mcpServers": ["a list"]}'),
        ("codex", "model = \n"),
    ],
)
def test_a_config_the_merge_cannot_read_is_refused_and_left_as_it_was(name: str, text: str, tmp_path: Path) -> None:
    path = tmp_path / ("config.toml" if name == "codex" else "settings.json")
    path.write_text(text)
    with pytest.raises(ConnectError, match="nothing was changed|not a table of servers"):
        write_entry(CLIENTS[name], LAUNCH, path, now=NOW)
    assert path.read_text() == text and [p.name for p in tmp_path.iterdir()] == [path.name]


def test_the_codex_merge_replaces_only_its_own_table(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    original = (
        'model = "o4"\n\n[mcp_servers.blender]\ncommand = "/old/hermes-blender"\nargs = ["mcp", "--pid", "1"]\n\n'
        '[mcp_servers.blender.env]\nX = "1"\n\n[mcp_servers.other]\ncommand = "/bin/other"\n'
    )
    path.write_text(original)
    write_entry(CLIENTS["codex"], LAUNCH, path, now=NOW)
    data = tomllib.loads(path.read_text())
    assert data["model"] == "o4" and data["mcp_servers"]["other"] == {"command": "/bin/other"}
    assert data["mcp_servers"]["blender"] == {"command": LAUNCH.command, "args": ["mcp"]}


def test_the_codex_merge_keeps_every_comment_of_the_file_also_those_inside_and_after_its_own_table(
    tmp_path: Path,
) -> None:
    """The comments after the old table are the user's notes on what follows; a merge replaces only the entry."""
    path = tmp_path / "config.toml"
    path.write_text(
        '# my Codex settings\nmodel = "o4"\n\n[mcp_servers.blender]\ncommand = "/old/hermes-blender"\n'
        '# args = ["mcp", "--pid", "1"]\nargs = ["mcp"]\n\n# the work servers below: ask Ana before changing\n'
        '[mcp_servers.other]\ncommand = "/bin/other"\n\n[mcp_servers.blender.env]\nX = "1"\n# the end of my file\n'
    )
    comments = [line for line in path.read_text().splitlines() if line.startswith("#")]
    write_entry(CLIENTS["codex"], LAUNCH, path, now=NOW)
    text = path.read_text()
    assert [line for line in text.splitlines() if line.startswith("#")] == comments
    data = tomllib.loads(text)
    assert data["model"] == "o4" and data["mcp_servers"]["other"] == {"command": "/bin/other"}
    assert data["mcp_servers"]["blender"] == {"command": LAUNCH.command, "args": ["mcp"]}


@pytest.mark.parametrize(
    "text",
    [
        'mcp_servers = { blender = { command = "/old" } }\n',
        'notes = """\n[mcp_servers.blender]\nkept\n[other]\n"""\n',  # a header inside a string is not a table
    ],
)
def test_a_codex_table_the_merge_cannot_rewrite_is_refused(tmp_path: Path, text: str) -> None:
    path = tmp_path / "config.toml"
    path.write_text(text)
    with pytest.raises(ConnectError, match="in a form this merge does not rewrite: nothing was changed"):
        write_entry(CLIENTS["codex"], LAUNCH, path, now=NOW)
    assert path.read_text() == text


def test_the_installed_toolkit_is_named_by_its_absolute_path() -> None:
    launch = find_launch(which=lambda name: {"hermes-blender": "/home/ana/.local/bin/hermes-blender"}.get(name))
    assert launch == Launch("/home/ana/.local/bin/hermes-blender", ("mcp",), "toolkit")


def test_a_toolkit_inside_uvs_cache_is_never_written_uvx_is(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "argv", ["/home/ana/.cache/uv/archive-v0/Ab12/bin/hermes-blender"])
    paths = {"hermes-blender": "/home/ana/.cache/uv/archive-v0/Ab12/bin/hermes-blender", "uvx": "/usr/local/bin/uvx"}
    launch = find_launch(("--pid", "7"), which=paths.get)
    assert launch.via == "uvx" and launch.command == "/usr/local/bin/uvx"
    assert launch.args == ("--from", TOOLKIT_SOURCE, "hermes-blender", "mcp", "--pid", "7")


def test_with_neither_the_toolkit_nor_uv_connect_says_how_to_install_them(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path), "PATH": str(tmp_path)}  # no hermes-blender, no uvx
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from hermes_blender.cli import main; sys.exit(main())",
            "connect",
            "cursor",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and done.stdout == ""
    assert "neither hermes-blender nor uvx is on PATH" in done.stderr and "install uv" in done.stderr


def test_each_client_has_its_user_config_on_every_os() -> None:
    windows = host_defaults(
        HostFacts(os="win32", env={"USERPROFILE": r"C:\Users\ana", "APPDATA": r"C:\Users\ana\AppData\Roaming"})
    )
    linux = host_defaults(HostFacts(os="linux", env={"HOME": "/home/ana"}))
    assert str(CLIENTS["claude-desktop"].path(windows)).replace("\\", "/") == (
        "C:/Users/ana/AppData/Roaming/Claude/claude_desktop_config.json"
    )
    assert str(CLIENTS["codex"].path(linux)) == "/home/ana/.codex/config.toml"
    assert str(CLIENTS["vscode"].path(linux)) == "/home/ana/.config/Code/User/mcp.json"
    for client in CLIENTS.values():
        for host in (windows, linux):
            assert "$" not in str(client.path(host)) and "%" not in str(client.path(host)), client.name


def test_an_entry_for_wsl_names_the_windows_toolkit_and_a_client_can_start_it(tmp_path: Path) -> None:
    """WSL's interop runs a Windows .exe from Linux with stdio piped through; here a stand-in executable plays the
    Windows toolkit (it only relays to `hermes-blender mcp`), started from the entry `connect --command` wrote."""
    windows_side = tmp_path / "mnt" / "c" / "Users" / "ana" / ".local" / "bin" / "hermes-blender.exe"
    windows_side.parent.mkdir(parents=True)
    windows_side.write_text(f'#!/bin/sh\nexec {sys.executable} -m hermes_blender.cli "$@"\n')
    windows_side.chmod(0o755)
    config = tmp_path / "home" / ".claude.json"
    command = [sys.executable, "-m", "hermes_blender.cli", "connect", "claude-code", "--write"]
    subprocess.run([*command, "--command", str(windows_side), "--config", str(config)], check=True, timeout=60)
    entry = json.loads(config.read_text())["mcpServers"]["blender"]
    assert entry["command"] == str(windows_side) and entry["args"] == ["mcp"]
    handshake = (
        '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18",'
        '"capabilities":{},"clientInfo":{"name":"t","version":"1"}}}\n'
    )
    started = subprocess.Popen(
        [entry["command"], *entry["args"]], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert started.stdin is not None and started.stdout is not None
    started.stdin.write(handshake)
    started.stdin.flush()
    answer = json.loads(started.stdout.readline())
    started.stdin.close()
    assert started.wait(timeout=30) == 0
    assert answer["result"]["serverInfo"]["name"] == "blender"
