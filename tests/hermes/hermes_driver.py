"""Runs INSIDE a real Hermes's virtual environment and drives Hermes's own code.

This is our code calling Hermes's public and internal functions (none of Hermes is copied):
the pytest side (test_real_hermes.py) starts it with the Hermes venv's Python, HERMES_HOME
and HOME pointing at throw-away folders, and reads one JSON line per command from stdout.

Commands (one per stdin line):
  inspect ROOT    what `hermes plugins install` decides about a plugin tree: scan verdict,
                  Python packaging, load diagnostics and the app gate, in install order
  skills          the plugin skills Hermes would offer in the system prompt now
  status          Hermes's local liveness state and sentence for `blender` (no connection)
  discover        Hermes's MCP discovery of the `blender` server; the tools it registered
  call TOOL       a tool call exactly as the model makes it; what the model receives
  quit
"""

from __future__ import annotations

import json
import sys
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


def discover() -> dict[str, Any]:
    from tools.mcp_tool_discovery import discover_mcp_tools

    return {"tools": sorted(discover_mcp_tools(allowed_mcp_names=[SERVER]))}


def call(tool: str) -> dict[str, Any]:
    from model_tools import handle_function_call

    return {"received": handle_function_call(f"mcp__{SERVER}__{tool}", {})}


def main() -> int:
    commands = {"skills": skills, "status": status, "discover": discover}
    for line in sys.stdin:
        word, _, rest = line.strip().partition(" ")
        if word == "quit":
            break
        try:
            if word == "inspect":
                answer = inspect(Path(rest))
            elif word == "call":
                answer = call(rest)
            else:
                answer = commands[word]()
        except Exception as exc:  # the test reads the failure instead of a hang
            answer = {"driver_error": f"{type(exc).__name__}: {exc}"}
        print(json.dumps(answer, default=str), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
