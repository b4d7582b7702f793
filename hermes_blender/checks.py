"""`validate` and `status`: the contract checks, rendered for a person or a program."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

from .client import BridgeClient
from .contract.declaration import ServerDeclaration
from .contract.gate import install_refusals
from .contract.host import HostFacts, serving_blender_problem
from .contract.launcher import check_launcher, hermes_home_of, runs_the_relay
from .contract.liveness import LiveEndpoint, RuntimeFileSpec, parse_liveness, published_fields, read_live_endpoint
from .contract.locate import blender_cli_version, where_searched
from .contract.package import PluginPackage, load_plugin
from .contract.requirements import version_at_least
from .contract.status import Check, Connect, ServerStatus, compose, describe
from .errors import BlenderBridgeError, ContractError, LiveEndpointUnavailable, SwitchedOff, ToolCallFailed
from .instances import Instance, live_instances
from .lab import lab_execute
from .terminal import one_line

APP_TITLE = "Blender"
LAB_OFF = (
    "the Blender Lab listener is off in this Blender (it is opt-in): turn it on in Edit > Preferences > Add-ons > "
    "Hermes Bridge > Blender Lab listener (or `hermes-blender serve --lab-port 9876`), then restart the bridge"
)


def validate(root: Path, host: HostFacts) -> PluginPackage:
    """Load like Hermes, then be stricter: what Hermes would drop or degrade is an error here."""
    package = load_plugin(root)
    if package.diagnostics:
        raise ContractError("; ".join(package.diagnostics))
    for name, declaration in package.servers.items():
        try:
            parse_liveness(declaration.liveness, host.os)
        except ContractError as exc:
            raise ContractError(f"server '{name}' liveness: {exc} (Hermes would silently treat it as static)") from None
    return package


def validation_report(package: PluginPackage, host: HostFacts) -> dict[str, Any]:
    return {
        "valid": True,
        "plugin": package.name,
        "install_gate": install_refusals(package, host),
        "version": package.version,
        "servers": {name: server.get("type") for name, server in package.mcp_servers.items()},
        "declared": sorted(package.servers),
        "skills": [skill.name for skill in package.skills],
        "warnings": list(package.warnings),
    }


def status_report(package: PluginPackage, host: HostFacts, *, connect: bool, only: str | None = None) -> dict[str, Any]:
    statuses = [
        _server_status(name, declaration, package, host, connect)
        for name, declaration in package.servers.items()
        if only in (None, name)
    ]
    instances = _instances(package, host)
    return {
        "plugin": package.name,
        "serving": [_bridge_works(instance) for instance in instances] if connect else [],
        "ready": any(status.ready for status in statuses)
        and all(status.ready or status.off for status in statuses)
        and not any(_cannot_launch(status) for status in statuses),
        "servers": [status.payload() for status in statuses],
        "instances": [instance.payload() for instance in instances],
        "warnings": duplicate_server_warnings(package, host) + _split_by_version(statuses),
    }


def _bridge_works(instance: Instance) -> dict[str, Any]:
    """Whether a serving Blender's bridge answers a tool call, whatever Hermes's own checks say: what `call` and
    `mcp` (and every client but Hermes) meet."""
    endpoint = instance.endpoint
    try:
        _mcp_round_trip(endpoint, told=lambda mode: None)
        problem = None
    except (BlenderBridgeError, OSError) as exc:
        problem = one_line(str(exc))
    return {"pid": endpoint.pid, "url": endpoint.url, "works": problem is None, "problem": problem}


def _cannot_launch(status: ServerStatus) -> bool:
    """Hermes cannot start this server (its launcher is certainly missing): no tools, whatever Blender does."""
    return any(check.name == "launcher" and check.ok is False for check in status.checks)


def _instances(package: PluginPackage, host: HostFacts) -> list[Instance]:
    """Every Blender serving beside the runtime files the plugin declares (one file: one list)."""
    specs = {}
    for declaration in package.servers.values():
        with contextlib.suppress(ContractError):
            liveness = parse_liveness(bridge_liveness(declaration).liveness, host.os)
            if liveness.spec is not None:
                specs.setdefault(host.expand_path(liveness.spec.path), liveness.spec)
    return [instance for spec in specs.values() for instance in live_instances(spec, host)]


def _split_by_version(statuses: list[ServerStatus]) -> list[str]:
    """An older Blender can serve one server and not another (blender_lab needs 5.1): say which."""
    old = [s for s in statuses if s.state == "version_too_old"]
    fine = [s.server for s in statuses if s.state not in ("version_too_old", "missing_app")]
    if not old or not fine:
        return []
    found = old[0].availability.version or "this version"
    too_old = ", ".join(f"'{s.server}' (needs {s.availability.min_version} or newer)" for s in old)
    return [f"Blender {found} serves {', '.join(repr(n) for n in fine)}, but is too old for {too_old}"]


LAB_FILE = "lab/server.json"
"""The tail of the Lab listener's own runtime file, which `blender_lab`'s liveness names (beside `server.json`)."""


def bridge_liveness(declaration: ServerDeclaration) -> ServerDeclaration:
    """`blender_lab`'s liveness names the Lab listener's own file, there only while that opt-in listener runs;
    `status` judges the Blender by the bridge's file beside it, and the Lab listener by its round trip (off is a
    note with its user action, not a failure: README › Decisions)."""
    live = declaration.liveness
    path = live.get("path") if isinstance(live, dict) else None
    if not (isinstance(path, str) and path.endswith("/" + LAB_FILE)):
        return declaration
    return replace(declaration, liveness={**live, "path": path[: -len(LAB_FILE)] + "server.json"})


def _server_status(
    name: str, declaration: ServerDeclaration, package: PluginPackage, host: HostFacts, connect: bool
) -> ServerStatus:
    declaration = bridge_liveness(declaration)
    server = package.mcp_servers.get(name, {})
    probe: Connect | None = None
    modes: list[dict[str, Any]] = []
    if connect and (server.get("type") == "streamable-http" or runs_the_relay(server)):
        probe = partial(_mcp_round_trip, told=modes.append)
    elif connect and "BLENDER_MCP_PORT" in server.get("env", {}):
        probe = partial(_lab_round_trip, int(server["env"]["BLENDER_MCP_PORT"]))
    status = _with_serving_blender(compose(name, declaration, host, connect=probe, title=APP_TITLE), declaration, host)
    if modes:  # what the person at Blender lets agents do, as the model will hear it
        status = replace(status, checks=(*status.checks, Check("agent mode", True, modes[0]["meaning"])))
    return _with_launcher(_with_log_path(_with_cli_version(status, declaration, host), declaration, host), server, host)


def _with_launcher(status: ServerStatus, server: dict[str, Any], host: HostFacts) -> ServerStatus:
    """The command Hermes starts the server with (its own uv, or the toolkit on PATH). A missing one means no
    tools whatever Blender does, so it is named in a row and a warning; the state stays Blender's (and Hermes's),
    and the row says "not found" rather than FAIL where Hermes may keep its tools elsewhere (a packaged Hermes)."""
    launcher = check_launcher(server, host)
    if launcher is None:
        return status
    row = Check("launcher", True if launcher.ok else (None if launcher.uncertain else False), launcher.detail)
    warnings = status.warnings if launcher.problem is None else (*status.warnings, launcher.problem)
    return replace(status, checks=(row, *status.checks), warnings=warnings)


def _mcp_round_trip(endpoint: LiveEndpoint, told: Callable[[dict[str, Any]], None]) -> None:
    """A real tool call (the agent's history, which changes nothing in any mode); `told` hears the agent's mode."""
    client = BridgeClient(RuntimeFileSpec(path=str(endpoint.runtime_file)), timeout=15.0)
    answer = asyncio.run(client.call_tool("get_agent_history", {}))
    if answer.is_error:
        raise ToolCallFailed(f"the bridge answered get_agent_history with an error: {answer.text[:300]}")
    mode = answer.data().get("agent_mode")
    if isinstance(mode, dict) and isinstance(mode.get("meaning"), str):
        told(mode)


def _lab_round_trip(port: int, endpoint: LiveEndpoint) -> None:
    """What the pinned Blender Lab server will meet on the port mcp.json gives it."""
    record = published_fields(endpoint.runtime_file)
    if isinstance(record.get("lab_error"), str):
        raise ToolCallFailed(record["lab_error"])
    if "lab" not in record:
        raise SwitchedOff(LAB_OFF)
    published = record.get("lab")
    if isinstance(published, str) and not published.endswith(f":{port}"):
        raise ToolCallFailed(f"Blender's Lab listener is on {published}, but mcp.json's server connects to port {port}")
    _require_blender_on(endpoint, port)
    envelope = lab_execute(port, "import bpy\nresult = {'blender': bpy.app.version_string}", timeout=15.0)
    if envelope.get("status") != "ok":
        message = str(envelope.get("message", ""))
        if "requires a token" in message:
            raise ToolCallFailed("'Require token' is on in Blender, and the pinned Blender Lab server cannot send one")
        raise ToolCallFailed(f"the Blender Lab listener on port {port} answered an error: {message}")


def _require_blender_on(endpoint: LiveEndpoint, port: int) -> None:
    """`ready` means the Blender the file names answers: never an impostor on a stale file's port."""
    problem = serving_blender_problem(endpoint.pid, endpoint.address, port)
    if problem is not None:
        raise ToolCallFailed(problem)


def _with_serving_blender(status: ServerStatus, declaration: ServerDeclaration, host: HostFacts) -> ServerStatus:
    """Hermes looks for the app before it reads the runtime file, so a Blender that serves where Hermes does not look
    (`hermes-blender serve` on bpy, a Blender unpacked off PATH) is never reached: say which one serves, and why."""
    block = declaration.app_for(host.os)
    if status.state != "missing_app" or block is None:
        return status
    try:
        liveness = parse_liveness(declaration.liveness, host.os)
        if liveness.spec is None:
            return status
        endpoint = read_live_endpoint(liveness.spec, host)
    except (ContractError, LiveEndpointUnavailable):
        return status
    serving = Check("serving", None, f"Blender pid {endpoint.pid} at {endpoint.url} ({endpoint.runtime_file})")
    example = " (a `blender` executable on PATH: e.g. `ln -s /path/to/blender ~/.local/bin/blender`)"
    gate = (
        f"a Blender serves (pid {endpoint.pid} at {endpoint.url}), but Hermes first looks for the Blender app "
        f"({', '.join(where_searched(block, host))}), finds none and reports 'missing_app' without connecting: "
        f"install Blender where Hermes looks{example if host.os == 'linux' else ''}, then restart Hermes"
    )
    return replace(status, checks=(*status.checks, serving), warnings=(*status.warnings, gate))


def _with_log_path(status: ServerStatus, declaration: ServerDeclaration, host: HostFacts) -> ServerStatus:
    """Where the running Blender logs (its add-on publishes the path), for a bug report or a refusal."""
    liveness = parse_liveness(declaration.liveness, host.os)
    if liveness.spec is None or not any(c.name == "runtime file" and c.ok for c in status.checks):
        return status
    path = published_fields(host.expand_path(liveness.spec.path)).get("log")
    if not isinstance(path, str):
        return status
    return replace(status, checks=(*status.checks, Check("Blender log", None, path)))


def _with_cli_version(status: ServerStatus, declaration: ServerDeclaration, host: HostFacts) -> ServerStatus:
    """Where no declared version source exists (Linux), ask the executable.

    Hermes cannot see this version, but an action that can never work on a too-old Blender
    helps nobody: a version below the minimum fails the row and the state becomes
    `version_too_old` ("Update Blender"), with a warning saying what Hermes itself will show.
    """
    found = status.availability
    block = declaration.app_for(host.os)
    if found.path is None or found.version is not None or block is None or block.presence != "executable":
        return status
    version = blender_cli_version(found.path)
    if version is None:
        return status
    minimum = declaration.requires.min_version
    too_old = bool(minimum) and not version_at_least(version, minimum)
    detail = f"{version}; needs {minimum} or newer" if minimum else version
    checks = tuple(
        Check(c.name, False if too_old else c.ok, f"{detail} (from --version; Hermes reads no version here)")
        if c.name == "version"
        else c
        for c in status.checks
    )
    if not too_old:
        return replace(status, checks=checks)
    seen = replace(found, state="version_too_old", version=version)
    reason, action, retry = describe("version_too_old", APP_TITLE, seen)
    hermes_view = (
        f"Hermes reads no version on {host.os} and will report '{status.state}' instead; "
        f"the Hermes Bridge extension needs Blender {minimum} or newer"
    )
    return replace(
        status,
        state="version_too_old",
        reason=reason,
        user_action=action,
        retry=retry,
        availability=seen,
        checks=checks,
        warnings=(*status.warnings, hermes_view),
    )


def duplicate_server_warnings(package: PluginPackage, host: HostFacts) -> list[str]:
    """Hermes keeps only the first server of a name: say so when another installed plugin has ours."""
    hermes_home = hermes_home_of(host)
    warnings: list[str] = []
    for mcp_json in sorted(hermes_home.glob("plugins/*/mcp.json")):
        if mcp_json.parent.resolve() == package.root.resolve() or _plugin_name(mcp_json.parent) == package.name:
            continue  # our own copy, installed or not
        try:
            names = set(json.loads(mcp_json.read_text(encoding="utf-8")).get("mcpServers", {}))
        except (OSError, ValueError, AttributeError):
            continue
        for clash in sorted(names & set(package.servers)):
            warnings.append(
                f"the plugin in {mcp_json.parent} also defines server '{clash}' (the official Blender plugin does): "
                "Hermes keeps only the first one; enable only one of the two plugins"
            )
    return warnings


def _plugin_name(root: Path) -> str | None:
    try:
        name = json.loads((root / "plugin.json").read_text(encoding="utf-8")).get("name")
    except (OSError, ValueError, AttributeError):
        return None
    return name if isinstance(name, str) else None


def render_validation(report: dict[str, Any]) -> str:
    lines = [f"{report['plugin']} {report['version']}: valid"]
    lines.append("  servers: " + ", ".join(f"{name} ({kind})" for name, kind in report["servers"].items()))
    lines.append("  declared: " + (", ".join(report["declared"]) or "none"))
    lines.append("  skills: " + (", ".join(report["skills"]) or "none"))
    gate = report["install_gate"]
    lines.append("  install gate on this machine: " + ("passes" if not gate else "Hermes will refuse it"))
    lines += [f"    {refusal}" for refusal in gate]
    lines += [f"  warning: {warning}" for warning in report["warnings"]]
    return "\n".join(lines)


def render_status(report: dict[str, Any]) -> str:
    """What works first (the bridge itself, as `call`, `mcp` and every client meet it), then Hermes's view."""
    lines: list[str] = []
    for bridge in report.get("serving", []):
        if bridge["works"]:
            lines.append(f"the bridge at {bridge['url']} serves (Blender pid {bridge['pid']}): `call` and `mcp` work")
        else:
            lines.append(f"the bridge at {bridge['url']} (Blender pid {bridge['pid']}) fails: {bridge['problem']}")
    if lines:
        lines.append("for Hermes, which checks more before it connects:")
    for server in report["servers"]:
        lines.append(f"{server['server']}: " + ("off (opt-in: not a failure)" if server["off"] else server["state"]))
        for check in server["checks"]:
            mark = {True: "ok", False: "FAIL", None: "-"}[check["ok"]]
            lines.append(f"  {check['name']:<15} {mark:<5} {one_line(check['detail'])}")
        if server["error"] and not server["off"]:
            lines.append(f"  => {one_line(server['error'])} (retry: {server['retry']})")
        lines += [f"  warning: {one_line(warning)}" for warning in server["warnings"]]
    if len(report["instances"]) > 1:
        lines.append(f"{len(report['instances'])} Blenders are serving (`hermes-blender call --pid N` picks one):")
        lines += [f"  {_describe_instance(instance)}" for instance in report["instances"]]
    lines += [f"warning: {one_line(warning)}" for warning in report["warnings"]]
    works = any(bridge["works"] for bridge in report.get("serving", []))
    lines.append("ready" if report["ready"] else "not ready for Hermes" if works else "not ready")
    return "\n".join(lines)


def _describe_instance(instance: dict[str, Any]) -> str:
    version = f"Blender {instance['blender_version']}" if instance["blender_version"] else "Blender"
    since = f", since {instance['started_at']}" if instance["started_at"] else ""
    named = " <- server.json (Hermes uses this one)" if instance["current"] else ""
    return one_line(f"pid {instance['pid']}: {version} at {instance['url']}{since}{named}")
