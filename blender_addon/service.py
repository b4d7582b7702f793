"""The bridge's lifecycle: listener up, runtime file published, jobs flowing; and back down.

It is the seam between the network layer (which knows nothing of bpy) and the tools (which
know nothing of sockets): it implements the protocol's ToolHost by validating arguments on
the calling thread and running the tool through the dispatcher on Blender's main thread.
"""

from __future__ import annotations

import atexit
import datetime
import os
import sys
import traceback
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import bpy

from . import dispatch
from .errors import BridgeError, BridgeStopped, DispatchTimeout, ToolError, UnknownTool
from .net import runtime_file
from .net.auth import Token
from .net.http import HttpLimits, serve_http_connection
from .net.listener import TcpListener
from .net.mcp import McpProtocol, ServerInfo, ToolOutcome
from .net.mcp_http import ENDPOINT_PATH, McpHttpApp
from .net.sessions import SessionStore
from .tools import CATALOGUE, Tool
from .tools.schema import validate

ADDON_VERSION = "0.1.0"
LOOPBACK_HOST = "127.0.0.1"
JOB_TIMEOUT = 120.0

INSTRUCTIONS = (
    "Tools for the Blender instance that published this endpoint. Read get_objects_summary before "
    "changing anything. Code execution in Blender is not a sandbox."
)


@dataclass(frozen=True)
class BridgeConfig:
    port: int = 0
    runtime_file: Path | None = None
    """None: the declared path Hermes reads."""
    job_timeout: float = JOB_TIMEOUT
    http_limits: HttpLimits = HttpLimits()


class Bridge:
    """One running bridge: an MCP listener, its token and its runtime file."""

    def __init__(self, config: BridgeConfig, dispatcher: dispatch.Dispatcher) -> None:
        self._config = config
        self._dispatcher = dispatcher
        self._token = Token.generate()
        self._pid = os.getpid()
        protocol = McpProtocol(self, ServerInfo("blender-bridge", ADDON_VERSION, INSTRUCTIONS))
        app = McpHttpApp(protocol, self._token, lambda: self.port, SessionStore(), on_internal_error=_log_exception)
        limits = config.http_limits
        self._listener = TcpListener(
            LOOPBACK_HOST, config.port, partial(serve_http_connection, app=app, limits=limits), name="hermes-mcp"
        )
        self.url = f"http://{LOOPBACK_HOST}:{self.port}"
        self.runtime_file = config.runtime_file or runtime_file.expand_declared_path()
        try:
            self.publication = runtime_file.publish(
                self.runtime_file, url=self.url, token=self._token.reveal(), pid=self._pid, extra=_extra_fields()
            )
        except OSError as exc:
            self._listener.stop()
            raise BridgeError(f"cannot write the runtime file {self.runtime_file}: {exc.strerror or exc}") from exc

    @property
    def port(self) -> int:
        return self._listener.address[1]

    @property
    def endpoint(self) -> str:
        return self.url + ENDPOINT_PATH

    @property
    def dispatcher(self) -> dispatch.Dispatcher:
        return self._dispatcher

    def takeover_note(self) -> str | None:
        """A sentence for the user when starting replaced another bridge's runtime file."""
        publication = self.publication
        if publication.replaced_pid is None:
            return None
        if publication.replaced_live:
            return (
                f"Took over the runtime file from another running Blender (pid {publication.replaced_pid}); "
                "agents now connect to this one."
            )
        return f"Replaced a stale runtime file left by a process that has exited (pid {publication.replaced_pid})."

    def close(self) -> None:
        """Stop listening, release waiting jobs and withdraw the runtime file if it is still ours."""
        self._listener.stop()
        self._dispatcher.close()
        runtime_file.withdraw(self.runtime_file, url=self.url, pid=self._pid)

    # ToolHost -----------------------------------------------------------------------------

    def list_tools(self) -> list[dict[str, Any]]:
        return [tool.descriptor() for tool in CATALOGUE.values()]

    def call_tool(self, name: str, arguments: dict[str, Any]) -> ToolOutcome:
        tool = CATALOGUE.get(name)
        if tool is None:
            raise UnknownTool(f"Unknown tool: {name!r}")
        try:
            validate(tool.input_schema, arguments)
            job = self._dispatcher.submit(partial(_run_tool, tool, arguments))
            return job.wait(self._config.job_timeout)
        except ToolError as exc:
            return ToolOutcome.error(str(exc), state=exc.state, **exc.details)
        except DispatchTimeout as exc:
            return ToolOutcome.error(str(exc), state="busy")
        except BridgeStopped as exc:
            return ToolOutcome.error(str(exc), state="stopped")


def _run_tool(tool: Tool, arguments: dict[str, Any]) -> ToolOutcome:
    """Main thread: run the tool and serialise its result here, where bpy may be touched."""
    try:
        data = tool.run(arguments)
    except ToolError:
        raise
    except Exception as exc:  # noqa: BLE001 - a tool that raises is an answer, not a crash
        return ToolOutcome.error(f"{tool.name} failed: {type(exc).__name__}: {exc}", state="tool_failed")
    try:
        return ToolOutcome.json(data)
    except (TypeError, ValueError) as exc:
        return ToolOutcome.error(f"{tool.name} produced a result that is not JSON: {exc}", state="tool_failed")


def _extra_fields() -> dict[str, Any]:
    return {
        "endpoint_path": ENDPOINT_PATH,
        "blender_version": bpy.app.version_string,
        "addon_version": ADDON_VERSION,
        "started_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }


def _log_exception(exc: BaseException) -> None:
    traceback.print_exception(exc, file=sys.stderr)


# --- the process-wide bridge --------------------------------------------------------------

_active: Bridge | None = None
last_error: str | None = None
"""Why the last start failed, for the panel; cleared by a successful start."""


def active() -> Bridge | None:
    return _active


def start(config: BridgeConfig, *, gui: bool) -> Bridge:
    """Start the bridge (stopping a running one first); `gui` picks the timer pump."""
    global _active, last_error
    stop()
    dispatcher = dispatch.Dispatcher()
    try:
        bridge = Bridge(config, dispatcher)
    except BridgeError as exc:
        last_error = str(exc)
        raise
    last_error = None
    _active = bridge
    if gui:
        dispatch.start_gui_pump(dispatcher)
    atexit.register(stop)
    return bridge


def stop() -> None:
    """Stop the running bridge, if any. Idempotent."""
    global _active
    bridge, _active = _active, None
    if bridge is None:
        return
    dispatch.stop_gui_pump()
    bridge.close()
    atexit.unregister(stop)
