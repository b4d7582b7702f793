"""The add-on's one exception hierarchy.

Every error the bridge raises on purpose derives from BridgeError, so the panel, the CLI
command and the protocol layers can turn it into a clear message without guessing.
"""

from __future__ import annotations

from typing import Any


class BridgeError(Exception):
    """Base of every deliberate add-on error; its message is meant for a person."""


class NonLoopbackAddress(BridgeError):
    """A listener was asked to bind an address that is not loopback."""


class PortUnavailable(BridgeError):
    """The port is held by another program or forbidden by the OS."""


class DispatchTimeout(BridgeError):
    """Blender's main thread did not take or finish a job in time.

    `state`: `busy` (never started, not run), `interrupted` (stopped at its deadline) or
    `still_running` (inside Blender's own code, which Python cannot interrupt).
    """

    def __init__(self, message: str, *, state: str = "busy") -> None:
        super().__init__(message)
        self.state = state


class BridgeStopped(BridgeError):
    """The bridge stopped while a job was waiting."""


class ClientLeft(BridgeStopped):
    """The client went away before its request's turn came: the request was dropped, never run."""


class RequestCancelled(BridgeStopped):
    """The client went away while its request ran: the job was stopped (what it changed until then stays)."""


class ToolError(BridgeError):
    """A tool could not do what was asked; the message goes back to the agent.

    `state` names a structured condition the agent can act on (for example
    `no_interactive_session`); `details` carries extra JSON-able facts.
    """

    def __init__(self, message: str, *, state: str | None = None, **details: object) -> None:
        super().__init__(message)
        self.state = state
        self.details = details


class InvalidArguments(ToolError):
    """The arguments did not match the tool's input schema."""

    def __init__(self, message: str, **details: object) -> None:
        super().__init__(message, state="invalid_arguments", **details)


class UnknownTool(BridgeError):
    """No tool of that name is in the catalogue."""


class UnknownResource(BridgeError):
    """No resource of that URI is served (nor a template that makes it)."""


class UnknownTask(BridgeError):
    """No task of that id is kept (never given, or finished and forgotten)."""


class RpcError(BridgeError):
    """A JSON-RPC error answer: code, message and optional data (the protocol layers send it as is)."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def as_error(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


class JobInterrupted(BaseException):
    """Raised inside a running job's code to stop it (its deadline passed, or the bridge is stopping).

    A BaseException, not an Exception, so `except Exception` in agent-written code cannot swallow it.
    """
