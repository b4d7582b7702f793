"""Whether Hermes can start a plugin's stdio server here: the command it will run, found the way Hermes finds it.

Hermes runs a bare `uv`/`uvx` (and `npx`, `npm`, `node`) as the copy its own package manager keeps, never the
user's: it downloads that copy the first time a server needs it, which fails without the internet, and the server
then has no tools. Any other bare command is looked up on PATH. This reads, never starts, installs or downloads.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .host import HostFacts

MANAGED_UV = ("uv", "uvx")


@dataclass(frozen=True)
class LauncherCheck:
    ok: bool
    detail: str
    problem: str | None = None
    """What Hermes will meet, and the one thing to do; None when the command is there."""
    uncertain: bool = False
    """Not found where Hermes keeps it by default; a packaged Hermes (Docker, Nix) may keep it elsewhere."""


def hermes_home_of(host: HostFacts) -> Path:
    """Hermes's home as Hermes finds it: HERMES_HOME, else its platform default (`hermes_constants`)."""
    home = host.env.get("HERMES_HOME") or ("%LOCALAPPDATA%/hermes" if host.os == "win32" else "~/.hermes")
    return host.expand_path(home)


def hermes_tools_store(host: HostFacts) -> Path:
    """Where Hermes's package manager keeps its tools: `<Hermes home>/tools`."""
    return hermes_home_of(host) / "tools"


def managed_uv(host: HostFacts, name: str = "uv") -> Path | None:
    """Hermes's own uv (or uvx) as its package manager recorded it, when it is there."""
    store = hermes_tools_store(host)
    try:
        fact = json.loads((store / "facts.json").read_text(encoding="utf-8-sig"))["packages"]["uv"]
        entry = store / fact["entry"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    executable = entry / (f"{name}.exe" if host.os == "win32" else name)
    return executable if executable.is_file() else None


def check_launcher(server: dict[str, Any], host: HostFacts) -> LauncherCheck | None:
    """The row for a stdio server's command; None for a server Hermes does not start (a URL)."""
    if server.get("type") != "stdio" or not isinstance(server.get("command"), str):
        return None
    command: str = server["command"]
    args = [arg for arg in server.get("args", []) if isinstance(arg, str)]
    if command.startswith("./"):
        return LauncherCheck(True, f"{command} (in the plugin)")
    if command in MANAGED_UV:
        found = managed_uv(host, command)
        if found is None:
            return LauncherCheck(
                False,
                f"Hermes's own {command} is not installed (looked in {hermes_tools_store(host)})",
                f"Hermes starts this server with its own {command}, not yours, and has none yet: it downloads it the "
                "first time it starts the server, which needs the internet (offline the server has no tools). "
                f"Where there is a connection, run `hermes pm install uv`, then restart Hermes",
                uncertain=True,
            )
        git = any(arg.startswith("git+") for arg in args)
        if git and _which("git", host) is None:
            return LauncherCheck(
                False,
                f"Hermes's own {command} at {found}; git is not on PATH",
                "the server is fetched from a git repository: install Git, then restart Hermes",
            )
        return LauncherCheck(True, f"Hermes's own {command} at {found}" + (", git on PATH" if git else ""))
    found_on_path = _which(command, host)
    if found_on_path is None:
        toolkit = (
            " (the blender-bridge toolkit: `uv tool install …`, see the README)" if "hermes-blender" in command else ""
        )
        return LauncherCheck(
            False,
            f"{command} is not on PATH",
            f"Hermes runs `{command}` from PATH and finds none: install it{toolkit}, then restart Hermes",
        )
    return LauncherCheck(True, f"{command} at {found_on_path}")


def _which(command: str, host: HostFacts) -> str | None:
    return shutil.which(command, path=host.env.get("PATH", ""))


def runs_the_relay(server: dict[str, Any]) -> bool:
    """Whether a stdio server is this toolkit's relay (`hermes-blender mcp`, however it is launched)."""
    args = [arg for arg in server.get("args", []) if isinstance(arg, str)]
    words = [server.get("command", ""), *args]
    return any(
        word.rsplit("/", 1)[-1] == "hermes-blender" and words[i + 1 : i + 2] == ["mcp"] for i, word in enumerate(words)
    )
