"""The install gate: refuse what cannot work here before anything is written (policy + host)."""

from __future__ import annotations

from collections.abc import Sequence

from .host import HostFacts
from .locate import locate_app
from .package import PluginPackage
from .requirements import availability

PLATFORM_ALIASES = {"windows": "win32", "macos": "darwin"}


def catalog_refusal(plugin: str, platforms: Sequence[str], host_os: str) -> str | None:
    """A catalog entry's `platforms` (empty = all; windows/macos are aliases) against this host."""
    if not platforms:
        return None
    normalized = [PLATFORM_ALIASES.get(p.lower(), p.lower()) for p in platforms]
    if host_os in normalized:
        return None
    return f"Plugin '{plugin}' is unavailable on {host_os}; supported platforms: {', '.join(platforms)}"


def install_refusals(package: PluginPackage, host: HostFacts) -> list[str]:
    """One refusal per declared server that is not offerable here, in Hermes's words."""
    refusals: list[str] = []
    for name, declaration in package.servers.items():
        found = availability(declaration, host.os, lambda block: locate_app(block, host))
        if found.offerable:
            continue
        version = f", found version {found.version}" if found.state == "version_too_old" and found.version else ""
        refusals.append(f"Plugin '{package.name}' server '{name}' is unavailable: {found.state}{version}.")
    return refusals
