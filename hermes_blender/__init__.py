"""Agent-side toolkit for blender-bridge: the contract checks Hermes performs, a client, a headless runner.

The public surface is what `__all__` names; everything in submodules not re-exported here may
change. Names load on first use, so `hermes-blender --version` and the Blender child process
that imports `hermes_blender.blender_host` never pay for the MCP client. The version is written here, once
(pyproject.toml reads it from this file): a lookup in the installed metadata costs each start about 7 ms.
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
__version__ = "0.1.0"
__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'hermes_blender' has no attribute {name!r}")
    return getattr(importlib.import_module(module, __name__), name)


def __dir__() -> list[str]:
    return sorted(__all__)
