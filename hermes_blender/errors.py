"""The agent side's one exception hierarchy (documented in one place, like httpx's)."""

from __future__ import annotations


class BlenderBridgeError(Exception):
    """Base of every deliberate error in hermes_blender; the message is meant for a person."""


class LiveEndpointUnavailable(BlenderBridgeError):
    """The runtime file gives no usable endpoint; there is never a fallback to a configured URL.

    `state` is the named availability state the failure maps to (`app_not_running` for a dead
    pid, `endpoint_unavailable` for a missing or malformed file or endpoint).
    """

    def __init__(self, message: str, *, state: str) -> None:
        super().__init__(message)
        self.state = state


class HeadlessStartError(BlenderBridgeError):
    """A headless Blender could not be started or did not publish its endpoint."""


class ToolCallFailed(BlenderBridgeError):
    """The bridge answered, but the call failed (transport, protocol or tool error)."""


class SwitchedOff(BlenderBridgeError):
    """An opt-in part of the bridge (the Blender Lab listener) is off in this Blender: not a failure; the message
    says how to turn it on."""


class ContractError(BlenderBridgeError):
    """plugin.json, mcp.json or a skill breaks a rule Hermes enforces; names the rule."""


class AddonPackageError(BlenderBridgeError):
    """Building, validating or installing the extension failed; the message says where."""


class ConnectError(BlenderBridgeError):
    """A client's config could not be written (or the stdio server has no executable to name); nothing changed."""


class UnsafeFolder(BlenderBridgeError):
    """A folder the toolkit will not write its own files into (pictures, a log): a link, or another user may change
    it. The message says which folder and why."""


class FarmRunError(BlenderBridgeError):
    """A job bundle could not be run here (`hermes-blender farm run`): `state` names why (`openjd_missing`,
    `blender_missing`, `not_a_bundle`, `unsafe_folder`, `invalid_template`, ...); nothing was rendered."""

    def __init__(self, message: str, *, state: str) -> None:
        super().__init__(message)
        self.state = state
