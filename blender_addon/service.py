"""The bridge's lifecycle: listeners up, runtime file published, jobs flowing; and back down.

It is the seam between the network layer (which knows nothing of bpy) and the tools (which
know nothing of sockets): it implements the MCP ToolHost and the Lab executor by validating
on the calling thread and running the work through the dispatcher on Blender's main thread.
"""

from __future__ import annotations

import atexit
import contextlib
import datetime
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import bpy

from . import dispatch, log
from .errors import BridgeError, BridgeStopped, DispatchTimeout, PortUnavailable, ToolError, UnknownTool
from .net import runtime_file
from .net.auth import Token
from .net.http import HttpConversation, HttpLimits
from .net.lab_protocol import LabConversation, LabSettings, error_envelope
from .net.main_loop import MainLoop
from .net.mcp import McpProtocol, ServerInfo, ToolOutcome, dumps
from .net.mcp_http import ENDPOINT_PATH, McpHttpApp
from .net.peer import same_user
from .net.refusals import refusals
from .net.sessions import SessionStore
from .net.threaded import ThreadedListeners
from .tools import CATALOGUE, Image, Tool
from .tools.python_exec import Deferred, Envelope, execute
from .tools.schema import validate

ADDON_VERSION = "0.1.0"
LOOPBACK_HOST = "127.0.0.1"
JOB_TIMEOUT = 120.0
LAB_PORT = 9876
LAB_JOB_TIMEOUT = 290.0
"""Just under the official Lab client's 300 s, so it hears our answer rather than its own timeout."""
DEFERRED_POLL = 0.05
DEFERRED_LIMIT = 600.0
"""Seconds a deferred result (`check_is_finished`) may take over MCP; on the Lab wire LAB_JOB_TIMEOUT."""

CODE_DISABLED = (
    "Running Python is switched off in this Blender (Hermes Bridge preferences: 'Allow code execution'); "
    "the read-only tools still work"
)

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
    lab_port: int | None = None
    """The Blender Lab listener's port (0: let the OS choose; None: off, the default: it is opt-in)."""
    lab_require_token: bool = False
    allow_code: bool = True
    """False: execute_blender_code and the Lab listener refuse to run code."""
    gui: bool = False
    """Interactive Blender: the timer pump runs jobs and deferred results are polled; else both are the caller's."""
    main_thread: bool = False
    """Background mode: the thread that calls `Bridge.serve` (Blender's main one) serves every connection
    itself, with no thread per connection and no hand-off; nothing is served until it does."""
    log_file: Path | None = None
    """None: `hermes_bridge/bridge.log` in Blender's user config folder."""


class Bridge:
    """One running bridge: its listeners, its token and its runtime file."""

    def __init__(self, config: BridgeConfig, dispatcher: dispatch.Dispatcher) -> None:
        self._config = config
        self._dispatcher = dispatcher
        self.log_file = log.configure(config.log_file or default_log_file())
        self._token = Token.generate()
        self._pid = os.getpid()
        protocol = McpProtocol(self, ServerInfo("blender-bridge", ADDON_VERSION, INSTRUCTIONS))
        app = McpHttpApp(protocol, self._token, lambda: self.port, SessionStore(), on_internal_error=_log_exception)
        try:
            self._loop = MainLoop() if config.main_thread else None
        except OSError as exc:
            raise BridgeError(f"could not start listening: {exc}") from exc
        self._listeners = self._loop or ThreadedListeners()
        try:
            self._address = self._listeners.listen(
                LOOPBACK_HOST,
                config.port,
                partial(HttpConversation, app=app, limits=config.http_limits, gate=app.gate),
                name="hermes-mcp",
            )
            self.url = f"http://{LOOPBACK_HOST}:{self.port}"
            self._lab_address: tuple[str, int] | None = None
            self.lab_error: str | None = None
            if config.lab_port is not None:
                self._start_lab(config.lab_port)
            self.runtime_file = config.runtime_file or runtime_file.expand_declared_path()
            self.publication = self._publish()
        except BaseException as exc:
            self._stop_listeners()  # nothing half-started keeps listening
            if isinstance(exc, (OSError, RuntimeError)):  # out of descriptors, no thread could be started
                raise BridgeError(f"could not start listening: {exc}") from exc
            raise

    def _publish(self) -> runtime_file.Publication:
        try:
            return runtime_file.publish(
                self.runtime_file, url=self.url, token=self._token.reveal(), pid=self._pid, extra=self._extra_fields()
            )
        except OSError as exc:
            raise BridgeError(f"cannot write the runtime file {self.runtime_file}: {exc.strerror or exc}") from exc

    def _start_lab(self, port: int) -> None:
        """A busy or forbidden Lab port is reported, never fatal: the MCP endpoint still serves."""
        settings = LabSettings(
            token=self._token if self._config.lab_require_token else None,
            identify=same_user,
            mcp_endpoint=self.endpoint,
        )
        try:
            self._lab_address = self._listeners.listen(
                LOOPBACK_HOST, port, partial(LabConversation, executor=self, settings=settings), name="hermes-lab"
            )
        except PortUnavailable as exc:
            self.lab_error = f"Blender Lab listener not started: {exc}"

    @property
    def port(self) -> int:
        return self._address[1]

    @property
    def endpoint(self) -> str:
        return self.url + ENDPOINT_PATH

    @property
    def lab_address(self) -> str | None:
        if self._lab_address is None:
            return None
        host, port = self._lab_address
        return f"{host}:{port}"

    @property
    def open_connections(self) -> int:
        """Clients connected right now, on both listeners (shown in the panel)."""
        return self._listeners.connection_count

    @property
    def dispatcher(self) -> dispatch.Dispatcher:
        return self._dispatcher

    @property
    def gui(self) -> bool:
        return self._config.gui

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

    def reachability_note(self) -> str | None:
        """A sentence for the panel when agents do not reach this Blender through the runtime file; None when they do.

        Read fresh: another Blender may publish, or stop and hand the file back, at any moment.
        """
        named = runtime_file.named_pid(self.runtime_file)
        if named == self._pid:
            return None
        if named is None:
            return "The runtime file is gone, so agents cannot find this Blender: stop and start the bridge."
        return (
            f"Agents connect to the Blender started last (pid {named}); this one takes over when that one stops. "
            f"To reach this one now: hermes-blender call --pid {self._pid}"
        )

    def serve(self) -> None:
        """Background mode, on Blender's main thread: serve until the dispatcher is asked to stop."""
        if self._loop is None:
            self._dispatcher.serve()
            return
        self._dispatcher.on_stop(self._loop.wake)
        with self._dispatcher.inline():
            self._loop.run(self._dispatcher.stop_requested)

    def close(self) -> None:
        """Release waiting jobs, stop listening and withdraw the runtime file if it is still ours.

        Jobs first: a connection thread waiting on a queued job then answers its client with a
        clean `stopped` error at once, instead of holding the listener's join (and Blender) for it.
        """
        self._dispatcher.close()
        self._stop_listeners()
        self.withdraw()

    def withdraw(self) -> None:
        """Take the runtime file back if it still names this bridge (safe from any thread: it only touches files)."""
        runtime_file.withdraw(self.runtime_file, url=self.url, pid=self._pid)

    def _stop_listeners(self) -> None:
        self._listeners.close()

    def _extra_fields(self) -> dict[str, Any]:
        extra: dict[str, Any] = {
            "endpoint_path": ENDPOINT_PATH,
            "blender_version": bpy.app.version_string,
            "addon_version": ADDON_VERSION,
            "started_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        }
        if self.log_file is not None:
            extra["log"] = str(self.log_file)
        if self.lab_address is not None:
            extra["lab"] = self.lab_address
        elif self.lab_error is not None:
            extra["lab_error"] = self.lab_error
        return extra

    # ToolHost (MCP) ---------------------------------------------------------------------------

    def list_tools(self) -> list[dict[str, Any]]:
        return [tool.descriptor() for tool in CATALOGUE.values()]

    def call_tool(
        self, name: str, arguments: dict[str, Any], connected: Callable[[], bool] = lambda: True
    ) -> ToolOutcome:
        tool = CATALOGUE.get(name)
        if tool is None:
            raise UnknownTool(f"Unknown tool: {name!r}")
        if tool.runs_code and not self._config.allow_code:
            return ToolOutcome.error(CODE_DISABLED, state="code_execution_disabled")
        try:
            validate(tool.input_schema, arguments)
            outcome = self._dispatcher.call(
                partial(_run_tool, tool, arguments, self._config.gui), self._config.job_timeout, connected
            )
            if isinstance(outcome, Deferred):
                answer = self._poll_deferred(outcome, connected, DEFERRED_LIMIT)
                if answer is None:  # the client hung up: drop the job, as on the Lab wire
                    return ToolOutcome.error("the client left before the deferred result was ready", state="stopped")
                outcome = _present(tool, answer)
        except ToolError as exc:
            log.logger.info("tool %s failed [%s]: %s", log.one_line(name), exc.state, log.one_line(exc))
            return ToolOutcome.error(str(exc), state=exc.state, **exc.details)
        except DispatchTimeout as exc:
            return ToolOutcome.error(str(exc), state=exc.state)
        except BridgeStopped as exc:
            return ToolOutcome.error(str(exc), state="stopped")
        return outcome

    # LabExecutor ------------------------------------------------------------------------------

    def execute(self, code: str, strict_json: bool, connected: Callable[[], bool]) -> Envelope | None:
        if not self._config.allow_code:
            return error_envelope(CODE_DISABLED)
        try:
            outcome = self._dispatcher.call(partial(execute, code, strict_json=strict_json), LAB_JOB_TIMEOUT, connected)
            if isinstance(outcome, Deferred):
                return self._poll_deferred(outcome, connected, LAB_JOB_TIMEOUT)
        except (ToolError, DispatchTimeout, BridgeStopped) as exc:
            return error_envelope(str(exc))
        return outcome

    def _poll_deferred(self, deferred: Deferred, connected: Callable[[], bool], limit: float) -> Any:
        """Poll a deferred result once per tick (GUI only) for at most `limit` seconds; None when the client left."""
        if not self._config.gui:
            raise ToolError(
                "Deferred responses via `check_is_finished` are only supported by the interactive (GUI) bridge; "
                "in background mode compute the result before the code returns",
                state="no_interactive_session",
            )
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            if not connected():
                return None  # the client left: drop the job, never replay it
            time.sleep(DEFERRED_POLL)
            answer = self._dispatcher.call(deferred.poll, LAB_JOB_TIMEOUT)
            if answer is not None:
                return answer
        raise DispatchTimeout(f"the deferred result did not finish within {limit:g} s", state="interrupted")


def _run_tool(tool: Tool, arguments: dict[str, Any], gui: bool) -> ToolOutcome | Deferred:
    """Main thread: run the tool, make a change one named undo step, serialise while bpy is safe."""
    try:
        data = tool.run(arguments)
    except ToolError:
        raise
    except Exception as exc:
        return ToolOutcome.error(f"{tool.name} failed: {type(exc).__name__}: {exc}", state="tool_failed")
    if gui and tool.mutating:
        with contextlib.suppress(RuntimeError):
            bpy.ops.ed.undo_push(message=f"Hermes: {tool.title}")
    if isinstance(data, Deferred):
        return data
    return _present(tool, data)


def _present(tool: Tool, data: Any) -> ToolOutcome:
    """Tool data in MCP terms: an image as image content, anything else as JSON."""
    if isinstance(data, Image):
        return ToolOutcome(
            [
                {"type": "image", "data": data.base64(), "mimeType": "image/png"},
                {"type": "text", "text": dumps(data.details)},
            ]
        )
    try:
        return ToolOutcome.json(data)
    except (TypeError, ValueError) as exc:
        return ToolOutcome.error(f"{tool.name} produced a result that is not JSON: {exc}", state="tool_failed")


def _log_exception(exc: BaseException) -> None:
    log.logger.error("internal error", exc_info=exc)


def default_log_file() -> Path:
    return Path(bpy.utils.user_resource("CONFIG", path="hermes_bridge")) / "bridge.log"


# --- the process-wide bridge --------------------------------------------------------------

_active: Bridge | None = None
last_error: str | None = None
"""Why the last start failed, for the panel; cleared by a successful start."""


def active() -> Bridge | None:
    return _active


def start(config: BridgeConfig, dispatcher: dispatch.Dispatcher | None = None) -> Bridge:
    """Start the bridge (stopping a running one first); a caller may bring the dispatcher it already listens to."""
    global _active, last_error
    stop()
    dispatcher = dispatcher or dispatch.Dispatcher()
    try:
        bridge = Bridge(config, dispatcher)
    except BridgeError as exc:
        last_error = str(exc)
        log.logger.error("did not start: %s", exc)
        raise
    last_error = None
    _active = bridge
    if config.gui:
        dispatch.start_gui_pump(dispatcher)
    atexit.register(stop)
    lab = bridge.lab_address or "off"
    log.logger.info("started: MCP at %s, runtime file %s, Blender Lab %s", bridge.endpoint, bridge.runtime_file, lab)
    for warning in (bridge.lab_error, bridge.takeover_note()):
        if warning:
            log.logger.warning("%s", warning)
    return bridge


def stop() -> None:
    """Stop the running bridge, if any. Idempotent.

    Called from inside a job (agent code that disables the add-on), the stop waits for that job's answer to be
    sent: the loop that serves it ends after this turn and its caller stops the bridge (background), or a timer
    does once the job is done (GUI). Closing the listeners under the job would drop its answer.
    """
    global _active
    if _active is not None and _active.dispatcher.in_job():
        if _active.gui:
            bpy.app.timers.register(stop, first_interval=0.0)
        else:
            _active.dispatcher.stop_after_job()
        return
    bridge, _active = _active, None
    if bridge is None:
        return
    dispatch.stop_gui_pump()
    bridge.close()
    refusals.flush(log.logger)
    log.logger.info("stopped: %s", bridge.endpoint)
    atexit.unregister(stop)
