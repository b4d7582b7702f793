"""Composition: one named state, one sentence, one user action and a retry policy per server.

Follows Hermes's order (availability, then the interactive-session rule, then the runtime
file), with Hermes's sentences, so what `hermes-blender status` says is what Hermes will say.
It adds what only a local tool can: an optional authenticated MCP round trip (`ready`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Literal, cast

from ..errors import BlenderBridgeError, ContractError, LiveEndpointUnavailable, SwitchedOff
from .declaration import ServerDeclaration
from .host import HostFacts
from .liveness import STATIC, LiveEndpoint, LivenessDeclaration, parse_liveness, read_live_endpoint
from .locate import locate_app, where_searched
from .requirements import Availability, availability

State = Literal[
    "ready",
    "missing_app",
    "version_too_old",
    "no_interactive_session",
    "app_not_running",
    "endpoint_unavailable",
    "hermes_not_connected",
]
Retry = Literal["after_user_action", "never_here", "none"]
Connect = Callable[[LiveEndpoint], None]
"""One authenticated MCP round trip; raises BlenderBridgeError when it fails, SwitchedOff when it is opt-in and off."""


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool | None
    """None: not checked (an earlier link is broken, or the check does not apply)."""
    detail: str


@dataclass(frozen=True)
class ServerStatus:
    server: str
    state: State
    reason: str
    user_action: str
    retry: Retry
    availability: Availability
    checks: tuple[Check, ...] = ()
    warnings: tuple[str, ...] = ()
    off: bool = False
    """An opt-in server switched off in this Blender (its check says how to turn it on): not ready, not a failure."""

    @property
    def ready(self) -> bool:
        return self.state == "ready"

    @property
    def sentence(self) -> str:
        return f"{self.reason} {self.user_action}".strip()

    def payload(self) -> dict[str, Any]:
        """The structured unavailable-tool answer, in Hermes's shape (plus `checks`)."""
        app = {
            "name": self.server,
            "version": self.availability.version,
            "path": str(self.availability.path) if self.availability.path else None,
        }
        return {
            "server": self.server,
            "state": self.state,
            "error": None if self.ready else self.sentence,
            "app": app,
            "user_action": self.user_action or None,
            "retry": self.retry,
            "checks": [{"name": c.name, "ok": c.ok, "detail": c.detail} for c in self.checks],
            "warnings": list(self.warnings),
            "off": self.off,
        }


def describe(state: State, name: str, found: Availability | None = None) -> tuple[str, str, Retry]:
    """Hermes's reason sentence, its one action and the retry policy for a state."""
    if state == "ready":
        return f"{name} is ready.", "", "none"
    if state == "missing_app":
        return f"{name} is not installed.", f"Install {name}, then try again.", "after_user_action"
    if state == "version_too_old":
        version = f" version {found.version}" if found and found.version else ""
        minimum = f"; version {found.min_version} or newer is required" if found and found.min_version else ""
        return f"{name}{version} is too old{minimum}.", f"Update {name}, then try again.", "after_user_action"
    if state == "no_interactive_session":
        return (
            f"{name} needs an interactive desktop session.",
            f"Open an interactive desktop session and start {name}, then try again.",
            "never_here",
        )
    if state == "endpoint_unavailable":
        return (
            f"{name}'s local endpoint is unavailable.",
            f"Open {name} and enable its local connection, then try again.",
            "after_user_action",
        )
    if state == "hermes_not_connected":
        return (
            f"{name}'s MCP connection is missing.",
            f"Reconnect {name} in Hermes, then try again.",
            "after_user_action",
        )
    return f"{name} is not running.", f"Start {name}, then try again.", "after_user_action"


def compose(
    name: str,
    declaration: ServerDeclaration,
    host: HostFacts,
    *,
    connect: Connect | None = None,
    title: str | None = None,
) -> ServerStatus:
    """Walk the chain link by link; the first broken link names the state.

    `title` names the app in sentences instead of the server slug, as Hermes's Plugins tab does.
    """
    checks: list[Check] = []
    warnings: list[str] = []
    found = availability(declaration, host.os, lambda block: locate_app(block, host))
    checks += _app_checks(declaration, found, host)

    def finish(state: State) -> ServerStatus:
        reason, action, retry = describe(state, title or name, found)
        return ServerStatus(name, state, reason, action, retry, found, tuple(checks), tuple(warnings))

    if found.state in ("missing_app", "unsupported_os"):
        return finish("missing_app")
    if found.state == "version_too_old":
        return finish("version_too_old")
    try:
        liveness = parse_liveness(declaration.liveness, host.os)
    except ContractError as exc:
        warnings.append(f"invalid liveness block ({exc}); Hermes treats it as static")
        liveness = STATIC
    if liveness.kind == "interactive_session":
        interactive = host.interactive_session()
        checks.append(Check("interactive session", interactive, "yes" if interactive else "no graphical login session"))
        return finish("hermes_not_connected" if interactive else "no_interactive_session")
    if liveness.kind != "server_json" or declaration.app_for(host.os) is None:
        checks.append(Check("runtime file", None, "not declared (static liveness)"))
        return finish("hermes_not_connected")
    return _runtime_file(liveness, host, connect, checks, finish)


def _runtime_file(
    liveness: LivenessDeclaration,
    host: HostFacts,
    connect: Connect | None,
    checks: list[Check],
    finish: Callable[[State], ServerStatus],
) -> ServerStatus:
    assert liveness.spec is not None
    try:
        endpoint = read_live_endpoint(liveness.spec, host)
    except LiveEndpointUnavailable as exc:
        checks.append(Check("runtime file", False, str(exc)))
        return finish(cast(State, exc.state))
    checks.append(Check("runtime file", True, f"{endpoint.runtime_file} (pid {endpoint.pid} running)"))
    checks.append(Check("endpoint", True, endpoint.url))
    if connect is None:
        checks.append(Check("MCP round trip", None, "not attempted (local checks only)"))
        return finish("hermes_not_connected")
    try:
        connect(endpoint)
    except SwitchedOff as exc:
        checks.append(Check("MCP round trip", None, f"not attempted: {exc}"))
        return replace(finish("endpoint_unavailable"), off=True)
    except BlenderBridgeError as exc:
        checks.append(Check("MCP round trip", False, str(exc)))
        return finish("endpoint_unavailable")
    checks.append(Check("MCP round trip", True, "authenticated, tools listed"))
    return finish("ready")


def _app_checks(declaration: ServerDeclaration, found: Availability, host: HostFacts) -> list[Check]:
    minimum = declaration.requires.min_version
    if found.state == "no_requirements":
        return [Check("app", None, "no requirement declared")]
    block = declaration.app_for(host.os)
    if found.state == "unsupported_os" or block is None:
        return [Check("app", False, f"no app block for {host.os}")]
    if found.state == "missing_app":
        looked = ", ".join(where_searched(block, host))
        return [
            Check("app", False, f"not found (looked at {looked})"),
            Check("version", None, f"needs {minimum} or newer" if minimum else "any"),
        ]
    version = found.version or "unknown (no version source here)"
    ok = found.state == "available"
    requirement = f"{version}; needs {minimum} or newer" if minimum else version
    return [Check("app", True, str(found.path)), Check("version", ok, requirement)]


__all__ = ["Check", "ServerStatus", "State", "compose", "describe"]
