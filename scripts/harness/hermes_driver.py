"""Runs INSIDE a real Hermes's virtual environment and drives Hermes's own code.

This is our code calling Hermes's public and internal functions (none of Hermes is copied):
HermesDriver (hermes.py, for tests/hermes/ and the benchmark) starts it with the Hermes venv's Python,
HERMES_HOME and HOME pointing at throw-away folders, and reads one JSON line per command from stdout.

Commands (one per stdin line):
  inspect ROOT    what `hermes plugins install` decides about a plugin tree: scan verdict,
                  Python packaging, load diagnostics and the app gate, in install order
  skills          the plugin skills Hermes would offer in the system prompt now
  status          Hermes's local liveness state and sentence for `blender` (no connection)
  discover [SERVER]   Hermes's MCP discovery of one server (default `blender`); the tools it registered
  registered [SERVER] that server's `mcp__<server>__` tools in Hermes's registry now (what the model can call)
  call TOOL [JSON] a tool call exactly as the model makes it (JSON: its arguments); what the model receives, and how
                  long it took. TOOL is a `blender` tool's name, or a whole name (`mcp__blender_lab__…`)
  messages        Hermes's own sentences for an open breaker and for a stdio child lost mid-call (the skill quotes
                  them), made by Hermes's code for a server named `blender`
  launcher        what Hermes resolves a bare `uv` to for a stdio server (its managed copy)
  bench JSON      {"servers": [...], "tool": T, "n": N}: discover those servers, then call T on each in turn,
                  server by server, N times after 10 warm-up rounds; each call's seconds (scripts/benchmark/hermes.py)
  quit
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

SERVER = "blender"


def inspect(root: Path) -> dict[str, Any]:
    from hermes_cli import plugins_cmd_install
    from hermes_cli.agent_plugins import load_agent_plugin
    from hermes_cli.plugins_cmd import PluginOperationError
    from pm.plugin_declarations import read_python_declaration
    from tools.plugin_guard import scan_plugin, should_allow_plugin_install

    scan = scan_plugin(root)
    allowed, reason = should_allow_plugin_install(scan)
    python = read_python_declaration(root)
    package = load_agent_plugin(root, root.parent / ".driver-data")
    try:
        plugins_cmd_install._refuse_unavailable_portable_plugin(package.name, root)
        gate = None
    except PluginOperationError as exc:
        gate = str(exc)
    return {
        "verdict": scan.verdict,
        "allowed": allowed,
        "reason": reason,
        "findings": [{"severity": f.severity, "category": f.category, "file": f.file} for f in scan.findings],
        "python_member": python.is_member,
        "python_requirements": list(python.install_requirements),
        "name": package.name,
        "diagnostics": [str(d) for d in package.diagnostics],
        "servers": sorted(package.server_declarations),
        "skills": [s.name for s in package.skills],
        "gate_refusal": gate,
    }


def skills() -> dict[str, Any]:
    from agent.prompt_builder import _plugin_skill_prompt_rows

    return {"skills": [name for name, _ in _plugin_skill_prompt_rows(set(), None, None, None)]}


def status() -> dict[str, Any]:
    from hermes_cli.plugins import discover_plugins
    from tools.mcp_liveness import unavailable_details

    discover_plugins()
    details = unavailable_details(SERVER)
    if details is None:
        return {"declared": False}
    _decl, current, sentence = details
    return {
        "declared": True,
        "state": current.state,
        "sentence": sentence,
        "user_action": current.user_action,
        "retry": current.retry,
        "availability": current.availability.state,
    }


def discover(server: str = SERVER) -> dict[str, Any]:
    from tools.mcp_tool_discovery import discover_mcp_tools

    return {"tools": sorted(discover_mcp_tools(allowed_mcp_names=[server]))}


def registered(server: str = SERVER) -> dict[str, Any]:
    from tools.registry import registry

    return {"tools": sorted(name for name in registry.get_all_tool_names() if name.startswith(f"mcp__{server}__"))}


def call(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    from model_tools import handle_function_call

    started = time.monotonic()
    received = handle_function_call(tool if tool.startswith("mcp__") else f"mcp__{SERVER}__{tool}", arguments)
    return {"received": received, "seconds": round(time.monotonic() - started, 3)}


def messages() -> dict[str, Any]:
    """Hermes's sentences, produced by Hermes's code on a throw-away server key, then that key's count cleared."""
    from tools import mcp_tool as core
    from tools.mcp_tool_handlers import _STDIO_OUTCOME_UNCERTAIN_MSG, _check_circuit_breaker

    for _ in range(core._CIRCUIT_BREAKER_THRESHOLD):
        core._bump_server_error(SERVER, application=True)
    breaker = json.loads(_check_circuit_breaker(SERVER))["error"]
    core._reset_server_error(SERVER)
    return {
        "breaker": breaker,
        "threshold": core._CIRCUIT_BREAKER_THRESHOLD,
        "cooldown": core._CIRCUIT_BREAKER_COOLDOWN_SEC,
        "lost_stdio": _STDIO_OUTCOME_UNCERTAIN_MSG.format(s=SERVER),
    }


def launcher() -> dict[str, Any]:
    import os

    from tools.mcp_tool_config import _resolve_stdio_command

    command, env = _resolve_stdio_command("uv", {"PATH": os.environ.get("PATH", "")})
    return {"command": command, "path": env.get("PATH", "")}


def bench(request: dict[str, Any]) -> dict[str, Any]:
    from model_tools import handle_function_call
    from tools.mcp_tool_discovery import discover_mcp_tools

    servers, tool, n = request["servers"], request["tool"], int(request["n"])
    registered = set(discover_mcp_tools(allowed_mcp_names=list(servers)))
    missing = [f"mcp__{server}__{tool}" for server in servers if f"mcp__{server}__{tool}" not in registered]
    if missing:
        raise RuntimeError(f"not registered: {missing}")
    samples: dict[str, list[float]] = {server: [] for server in servers}
    for round_ in range(n + 10):
        for server in servers:
            started = time.perf_counter()
            received = handle_function_call(f"mcp__{server}__{tool}", {})
            elapsed = time.perf_counter() - started
            if "error" in json.loads(received):
                raise RuntimeError(f"{server}: {received[:300]}")
            if round_ >= 10:
                samples[server].append(elapsed)
    return {"samples": samples}


def main() -> int:
    commands = {"skills": skills, "status": status, "messages": messages, "launcher": launcher}
    naming_a_server = {"discover": discover, "registered": registered}
    for line in sys.stdin:
        word, _, rest = line.strip().partition(" ")
        if word == "quit":
            break
        try:
            if word == "inspect":
                answer = inspect(Path(rest))
            elif word == "call":
                tool, _, arguments = rest.partition(" ")
                answer = call(tool, json.loads(arguments) if arguments else {})
            elif word == "bench":
                answer = bench(json.loads(rest))
            elif word in naming_a_server:
                answer = naming_a_server[word](rest or SERVER)
            else:
                answer = commands[word]()
        except Exception as exc:  # the test reads the failure instead of a hang
            answer = {"driver_error": f"{type(exc).__name__}: {exc}"}
        print(json.dumps(answer, default=str), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
