"""Agent-side toolkit for blender-bridge: the contract checks Hermes performs, a client, a headless runner.

The public surface is what `__all__` names; everything in submodules not re-exported here may
change. Names load on first use, so `hermes-blender --version` and the Blender child process
that imports `hermes_blender.blender_host` never pay for the MCP client; the version too (reading the
package's metadata costs that child about 50 ms of its start).
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "BridgeClient": ".client",
    "ToolResult": ".client",
    "HeadlessBlender": ".headless",
    "LiveEndpoint": ".contract.liveness",
    "RuntimeFileSpec": ".contract.liveness",
    "read_live_endpoint": ".contract.liveness",
    "HostFacts": ".contract.host",
    "ServerStatus": ".contract.status",
    "status_report": ".checks",
    "validate": ".checks",
    "BlenderBridgeError": ".errors",
    "LiveEndpointUnavailable": ".errors",
    "HeadlessStartError": ".errors",
    "ToolCallFailed": ".errors",
    "ContractError": ".errors",
    "AddonPackageError": ".errors",
}
__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:
    if name == "__version__":
        return _version()
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'hermes_blender' has no attribute {name!r}")
    return getattr(importlib.import_module(module, __name__), name)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("hermes-blender")
    except PackageNotFoundError:  # imported from a source tree that was never installed
        return "0+unknown"


def __dir__() -> list[str]:
    return sorted(__all__)
