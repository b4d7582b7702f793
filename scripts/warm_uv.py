#!/usr/bin/env python3
"""Prepare the plugin's uv environments before Hermes first connects to them.

Hermes starts both servers of the plugin with `uv tool run`: `blender` (the blender-bridge toolkit's relay,
pinned to this plugin's version) and `blender_lab` (the same toolkit's `hermes-blender lab`, which runs the official
Blender Lab server, pinned to a commit, with `uv tool run` in its turn). The first run of each clones and builds
it, which can take longer than a normal MCP connection timeout. This runs the exact command from mcp.json once per
server, with `--help` in place of the server's own arguments (and for `blender_lab` the official server's command
after `--` too, the same way), so the next start is quick (uv keeps the built environment in its cache, which Hermes's own uv reads too: Hermes passes
HOME and XDG_* to its servers). Standard library only: it works with `uv run scripts/warm_uv.py` and with plain
`python scripts/warm_uv.py`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections import deque
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_TIMEOUT = 900.0
HEARTBEAT = 10.0
# `uv tool run` options that take a separate value; the first other bare word is the command.
_VALUE_OPTIONS = {
    "--from",
    "--with",
    "-w",
    "--with-editable",
    "--with-requirements",
    "--python",
    "-p",
    "--index",
    "--index-url",
    "-i",
    "--extra-index-url",
    "--default-index",
    "--find-links",
    "-f",
    "--constraints",
    "-c",
    "--overrides",
    "--build-constraints",
    "-b",
    "--cache-dir",
    "--directory",
    "--project",
    "--config-file",
    "--env-file",
}
_NETWORK = re.compile(
    r"could not resolve host|connection refused|network is unreachable|failed to connect|"
    r"dns error|timed out|name or service not known|temporary failure in name resolution",
    re.I,
)
_BUILD = re.compile(r"failed to build|failed to prepare|build backend|error: failed to download and build", re.I)


class WarmError(Exception):
    """A failure with the one thing to do about it."""


def load_command(mcp_json: Path, server: str) -> tuple[list[str], dict[str, str]]:
    """The stdio command and env of `server`, exactly as mcp.json declares them."""
    try:
        config = json.loads(mcp_json.read_text(encoding="utf-8"))
        entry = config["mcpServers"][server]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise WarmError(f"cannot read server {server!r} from {mcp_json}: {exc}") from None
    if entry.get("type") != "stdio":
        raise WarmError(f"server {server!r} in {mcp_json} is not a stdio server; nothing to warm")
    root, data = str(mcp_json.parent), str(mcp_json.parent / ".plugin-data")
    expand = lambda text: text.replace("${PLUGIN_ROOT}", root).replace("${PLUGIN_DATA}", data)  # noqa: E731
    command = [entry["command"], *(expand(arg) for arg in entry.get("args", []))]
    env = {key: expand(value) for key, value in entry.get("env", {}).items()}
    return command, env


def uv_servers(mcp_json: Path) -> list[str]:
    """The servers mcp.json starts with `uv tool run`, in its order: what there is to warm."""
    try:
        servers = json.loads(mcp_json.read_text(encoding="utf-8"))["mcpServers"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise WarmError(f"cannot read the servers of {mcp_json}: {exc}") from None
    return [
        name
        for name, entry in servers.items()
        if isinstance(entry, dict) and entry.get("command") == "uv" and entry.get("args", [])[:2] == ["tool", "run"]
    ]


def warm_command(command: list[str]) -> list[str]:
    """The same command, with `--help` instead of the server's own arguments."""
    return [*command[: _tool_index(command) + 1], "--help"]


def warm_commands(command: list[str]) -> list[list[str]]:
    """What to run to warm a server: its own command with `--help`, then, where the tool runs another `uv tool run`
    command after `--` (`hermes-blender lab -- uv tool run … blender-mcp …`), that one with `--help` too."""
    tool = _tool_index(command)
    warm = [warm_command(command)]
    if "--" in command[tool + 1 :]:
        inner = command[command.index("--", tool + 1) + 1 :]
        if inner[:3] == ["uv", "tool", "run"]:
            warm.append(warm_command(inner))
    return warm


def _tool_index(command: list[str]) -> int:
    """Where the tool's name is in a `uv tool run` command."""
    if command[:3] != ["uv", "tool", "run"]:
        raise WarmError(f"expected a `uv tool run` command, found: {' '.join(command[:3])}")
    index = 3
    while index < len(command):
        arg = command[index]
        if arg in _VALUE_OPTIONS:
            index += 2
        elif arg.startswith("-"):
            index += 1
        else:
            return index
    raise WarmError("the uv command names no tool to run")


def check_tools(command: list[str]) -> None:
    if shutil.which("uv") is None:
        raise WarmError(
            "uv is not installed (or not on PATH): install it from https://docs.astral.sh/uv/ "
            "or with `pip install uv`, then run this again"
        )
    if any("git+" in arg for arg in command) and shutil.which("git") is None:
        raise WarmError(
            "git is not installed (or not on PATH): the server is fetched from a git repository; "
            "install git, then run this again"
        )


def run(command: list[str], env: dict[str, str], timeout: float, out: callable = print) -> float:  # type: ignore[valid-type]
    """Run with live progress; return the elapsed seconds or raise WarmError with the reason."""
    started = time.monotonic()
    tail: deque[str] = deque(maxlen=40)
    process = subprocess.Popen(
        command,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**os.environ, **env},
        text=True,
        errors="replace",
    )
    last_output = [time.monotonic()]

    def pump() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            tail.append(line.rstrip())
            last_output[0] = time.monotonic()
            out(f"[{time.monotonic() - started:6.1f}s] {line.rstrip()}")

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    while process.poll() is None:
        elapsed = time.monotonic() - started
        if elapsed > timeout:
            process.kill()
            process.wait()
            raise WarmError(
                f"not finished after {timeout:g} s; run this again (uv keeps what it already "
                "downloaded) or allow more time with --timeout"
            )
        if time.monotonic() - last_output[0] > HEARTBEAT:
            out(f"[{elapsed:6.1f}s] still working...")
            last_output[0] = time.monotonic()
        time.sleep(0.2)
    reader.join(5)
    elapsed = time.monotonic() - started
    if process.returncode != 0:
        raise WarmError(explain_failure(process.returncode, list(tail)))
    return elapsed


def explain_failure(code: int, tail: list[str]) -> str:
    text = "\n".join(tail)
    last = "\n".join(f"    {line}" for line in tail[-12:])
    if "No module named 'mcp.server.fastmcp'" in text:
        return (
            "the server needs the MCP SDK 1.x (`mcp.server.fastmcp` was removed in mcp 2); this repository's "
            'mcp.json passes `--with "mcp<2"` to uv for exactly this: check that your mcp.json still has it\n' + last
        )
    if _NETWORK.search(text):
        return (
            "the network is unreachable from here (or the git host is down); check your connection, then run again\n"
            + last
        )
    if _BUILD.search(text):
        return "the server failed to build; the last lines say why\n" + last
    return f"the server exited with code {code}\n" + last


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Prepare the uv environment of a stdio MCP server from mcp.json.")
    parser.add_argument(
        "--mcp-json",
        type=Path,
        default=ROOT / "hermes_plugin" / "mcp.json",
        help="the plugin's mcp.json (default: this repository's)",
    )
    parser.add_argument("--server", help="the one stdio server to warm (default: every `uv tool run` server)")
    parser.add_argument(
        "--timeout", type=float, default=DEFAULT_TIMEOUT, help=f"seconds before giving up (default {DEFAULT_TIMEOUT:g})"
    )
    args = parser.parse_args(argv)
    try:
        servers = [args.server] if args.server else uv_servers(args.mcp_json)
    except WarmError as exc:
        print(f"warm_uv: {exc}", file=sys.stderr, flush=True)
        return 1
    failed = 0
    for server in servers:
        try:
            failed += warm(args.mcp_json, server, args.timeout)
        except KeyboardInterrupt:
            return 130
    return 1 if failed else 0


def warm(mcp_json: Path, server: str, timeout: float) -> int:
    """Warm one server; 0 when it is ready, 1 when it failed (and said why on stderr)."""
    elapsed = 0.0
    try:
        command, env = load_command(mcp_json, server)
        for warm in warm_commands(command):
            check_tools(warm)
            print(f"warming {server}: {' '.join(warm)}", flush=True)
            elapsed += run(warm, env, timeout, out=lambda line: print(line, flush=True))
    except WarmError as exc:
        print(f"warm_uv: {server}: {exc}", file=sys.stderr, flush=True)
        return 1
    print(f"ready: {server} starts without building next time ({elapsed:.1f} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
