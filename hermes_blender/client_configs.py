"""`hermes-blender connect CLIENT`: the one entry each MCP client needs, and merging it into the client's config.

Every entry starts the stdio server (`hermes-blender mcp`), which finds Blender through the runtime file on each
call: the entry holds no address and no token, so it never goes stale. It names an absolute executable, because
GUI clients are often started without the user's shell PATH (the "spawn uvx ENOENT" failure). A merge keeps every
other setting, writes a timestamped backup first, and refuses a file it cannot parse, changing nothing.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import shutil
import sys
import tempfile
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from .contract.host import HostFacts
from .errors import ConnectError

SERVER = "blender"
"""The entry's name in every client: the name Hermes and the skill use."""

TOOLKIT_SOURCE = "git+https://github.com/blender-bridge/blender-bridge"
"""What `uvx` runs when the toolkit is not installed (README › Users, step 6)."""

INSTALL_HINT = (
    "install uv (https://docs.astral.sh/uv/getting-started/installation/), then the toolkit with "
    f"`uv tool install {TOOLKIT_SOURCE}`, and run `hermes-blender connect` again"
)


@dataclass(frozen=True)
class Launch:
    """How a client starts the stdio server: an absolute executable and its arguments."""

    command: str
    args: tuple[str, ...]
    via: Literal["toolkit", "uvx"]


def find_launch(extra_args: tuple[str, ...] = (), *, which: Callable[[str], str | None] = shutil.which) -> Launch:
    """The installed toolkit's `hermes-blender` if there is one to point at, else `uvx`, else a ConnectError.

    A `hermes-blender` inside uv's cache (`uvx hermes-blender connect ...`) vanishes when the cache is pruned, so it
    is never written into a config: `uvx` is, which finds or rebuilds it on each start.
    """
    for candidate in (which("hermes-blender"), _running_executable()):
        if candidate and not _ephemeral(Path(candidate)):
            return Launch(str(Path(candidate).absolute()), ("mcp", *extra_args), "toolkit")
    uvx = which("uvx")
    if uvx:
        return Launch(
            str(Path(uvx).absolute()), ("--from", TOOLKIT_SOURCE, "hermes-blender", "mcp", *extra_args), "uvx"
        )
    raise ConnectError(f"neither hermes-blender nor uvx is on PATH: {INSTALL_HINT}")


def _running_executable() -> str | None:
    script = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if script is not None and script.stem == "hermes-blender" and script.is_file():
        return str(script)
    return None


def _ephemeral(path: Path) -> bool:
    """Inside uv's cache (`archive-v0/...`, `builds-v0/...`), which `uv cache prune` empties."""
    return any(re.fullmatch(r"(archive|builds)-v\d+", part) for part in path.absolute().parts)


Entry = dict[str, Any]


@dataclass(frozen=True)
class ClientConfig:
    """Where one client keeps its MCP servers and how it spells an entry."""

    name: str
    title: str
    paths: Mapping[str, str]
    """The user-level config file by OS (win32, darwin, linux), expanded like Hermes expands paths."""
    table: str
    """The key of the servers table in that file."""
    entry: Callable[[Launch], Entry]
    syntax: Literal["json", "toml"] = "json"
    after: str = "Restart the client so it starts the server."

    def path(self, host: HostFacts) -> Path:
        return host.expand_path(self.paths[host.os])

    def snippet(self, launch: Launch) -> str:
        """The entry as the user would paste it into the file."""
        entry = self.entry(launch)
        if self.syntax == "toml":
            return _toml_table(self.table, entry)
        return json.dumps({self.table: {SERVER: entry}}, indent=2, ensure_ascii=False) + "\n"


def _plain(launch: Launch) -> Entry:
    return {"command": launch.command, "args": list(launch.args)}


def _typed(launch: Launch) -> Entry:
    return {"type": "stdio", **_plain(launch)}


def _zed(launch: Launch) -> Entry:
    return {"source": "custom", **_plain(launch), "env": {}}


def _same(path: str) -> dict[str, str]:
    return {"win32": path, "darwin": path, "linux": path}


CLIENTS: dict[str, ClientConfig] = {
    client.name: client
    for client in (
        ClientConfig(
            "claude-code",
            "Claude Code",
            _same("~/.claude.json"),
            "mcpServers",
            lambda launch: {**_typed(launch), "env": {}},
            after="Every folder's sessions see it (user scope); `claude mcp list` checks it.",
        ),
        ClientConfig(
            "claude-desktop",
            "Claude Desktop",
            {
                "win32": "%APPDATA%/Claude/claude_desktop_config.json",
                "darwin": "~/Library/Application Support/Claude/claude_desktop_config.json",
                "linux": "${XDG_CONFIG_HOME}/Claude/claude_desktop_config.json",
            },
            "mcpServers",
            _plain,
            after="Quit Claude Desktop completely (not only its window) and open it again.",
        ),
        ClientConfig("cursor", "Cursor", _same("~/.cursor/mcp.json"), "mcpServers", _plain),
        ClientConfig(
            "vscode",
            "VS Code",
            {
                "win32": "%APPDATA%/Code/User/mcp.json",
                "darwin": "~/Library/Application Support/Code/User/mcp.json",
                "linux": "${XDG_CONFIG_HOME}/Code/User/mcp.json",
            },
            "servers",
            _typed,
            after="Run 'MCP: List Servers' and start blender (a workspace's .vscode/mcp.json takes the same entry).",
        ),
        ClientConfig(
            "codex",
            "OpenAI Codex CLI",
            _same("${CODEX_HOME}/config.toml"),
            "mcp_servers",
            _plain,
            syntax="toml",
            after="New Codex sessions start it; `codex mcp list` shows it.",
        ),
        ClientConfig(
            "gemini",
            "Gemini CLI",
            _same("~/.gemini/settings.json"),
            "mcpServers",
            _plain,
            after="`gemini mcp list` checks it (in a folder you trust).",
        ),
        ClientConfig("windsurf", "Windsurf", _same("~/.codeium/windsurf/mcp_config.json"), "mcpServers", _plain),
        ClientConfig(
            "zed",
            "Zed",
            {
                "win32": "%APPDATA%/Zed/settings.json",
                "darwin": "~/.config/zed/settings.json",
                "linux": "${XDG_CONFIG_HOME}/zed/settings.json",
            },
            "context_servers",
            _zed,
        ),
        ClientConfig("lm-studio", "LM Studio", _same("~/.lmstudio/mcp.json"), "mcpServers", _plain),
    )
}


def host_defaults(host: HostFacts) -> HostFacts:
    """The host with the folders these paths use filled in when unset (XDG_CONFIG_HOME, CODEX_HOME)."""
    home = host.home() or str(Path.home())
    env = dict(host.env)
    env.setdefault("XDG_CONFIG_HOME", str(Path(home) / ".config"))
    env.setdefault("CODEX_HOME", str(Path(home) / ".codex"))
    return HostFacts(os=host.os, env=env)


@dataclass(frozen=True)
class Written:
    path: Path
    backup: Path | None
    """The file as it was before, beside it; None when there was no file."""
    changed: bool


def write_entry(client: ClientConfig, launch: Launch, path: Path, *, now: datetime.datetime | None = None) -> Written:
    """Merge the entry into `path`: other settings kept, a backup first, nothing touched if the file will not parse."""
    entry = client.entry(launch)
    original = path.read_text(encoding="utf-8") if path.exists() else None
    parse = _parse_toml if client.syntax == "toml" else _parse_json
    current = parse(original, path) if original is not None else {}
    table = current.get(client.table, {})
    if not isinstance(table, dict):
        raise ConnectError(f"{path}: {client.table!r} is not a table of servers; add the entry by hand")
    if table.get(SERVER) == entry:
        return Written(path, None, changed=False)
    if client.syntax == "toml":
        text = _merged_toml(original or "", client.table, entry, path)
    else:
        text = json.dumps({**current, client.table: {**table, SERVER: entry}}, indent=2, ensure_ascii=False) + "\n"
    backup = None
    if original is not None:
        stamp = (now or datetime.datetime.now()).strftime("%Y%m%d-%H%M%S")
        backup = path.with_name(f"{path.name}.bak-{stamp}")
        shutil.copy2(path, backup)  # the mode too: ~/.claude.json also holds the user's sign-in
    _replace(path, text)
    return Written(path, backup, changed=True)


def _parse_json(text: str, path: Path) -> dict[str, Any]:
    if not text.strip():
        return {}
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise ConnectError(
            f"{path} is not plain JSON ({exc}; comments are not kept by a merge): nothing was changed; "
            "add the entry printed without --write by hand"
        ) from None
    if not isinstance(value, dict):
        raise ConnectError(f"{path} does not hold a JSON object: nothing was changed")
    return value


def _parse_toml(text: str, path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConnectError(f"{path} is not valid TOML ({exc}): nothing was changed") from None


_TABLE_HEADER = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")


def _merged_toml(text: str, table: str, entry: Entry, path: Path) -> str:
    """The file with its `[table.blender]` section (and subtables) replaced by ours, checked by parsing it back."""
    ours = f"{table}.{SERVER}"
    kept: list[str] = []
    skipping = False
    for line in text.splitlines(keepends=True):
        header = _TABLE_HEADER.match(line)
        if header:
            name = header.group(1).replace('"', "").replace(" ", "")
            skipping = name == ours or name.startswith(ours + ".")
        if not skipping:
            kept.append(line)
    body = "".join(kept)
    if body and not body.endswith("\n"):
        body += "\n"
    merged = body + ("\n" if body.strip() else "") + _toml_table(table, entry)
    refusal = ConnectError(f"{path} defines {ours} in a form this merge does not rewrite: nothing was changed")
    before = _parse_toml(text, path)
    try:
        after = tomllib.loads(merged)
    except tomllib.TOMLDecodeError:
        raise refusal from None
    if after != {**before, table: {**before.get(table, {}), SERVER: entry}}:
        raise refusal  # the line-based cut reached something else (a header inside a multi-line string)
    return merged


def _toml_table(table: str, entry: Entry) -> str:
    """A TOML table of strings and string lists (JSON's string escapes are TOML's basic-string escapes)."""
    lines = [f"[{table}.{SERVER}]"]
    lines += [f"{key} = {json.dumps(value, ensure_ascii=False)}" for key, value in entry.items()]
    return "\n".join(lines) + "\n"


def _replace(path: Path, text: str) -> None:
    """Write beside the file, then rename over it: a crash leaves the old file or the new one, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = path.stat().st_mode & 0o777 if path.exists() else 0o600
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as file:
            file.write(text)
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
