"""Hermes's install gate on this host: refuse what cannot work here before anything is written (policy + host).

`validate` reports it, so a person learns before `hermes plugins install` that Hermes will refuse.
"""

from __future__ import annotations

from .host import HostFacts
from .locate import locate_app
from .package import PluginPackage
from .requirements import availability


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
