"""One running bridge: listeners up, runtime file published, jobs flowing; and back down.

A `Bridge` assembles the pieces its `Mode` calls for (a driver, a dispatcher, the protocols,
`Execution` for what they run) and publishes where it listens; `runtime.py` owns the one a
process runs, and the user's sentences about it are in `notes.py`.
"""

from __future__ import annotations

import datetime
import enum
import os
import threading
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import bpy

from . import dispatch, log
from .agent_mode import AgentMode
from .consent import ASK_TIMEOUT
from .errors import BridgeError, PortUnavailable
from .execution import JOB_TIMEOUT, Execution
from .net.auth import Token
from .net.conversation import Conversation, Peer
from .net.lab_protocol import LabConversation, LabSettings
from .net.main_loop import MainLoop
from .net.peer import same_user
from .net.threaded import ThreadedListeners
from .net.versions import ENDPOINT_PATH
from .owner_files import runtime_file

if TYPE_CHECKING:
    from .mcp_endpoint import McpEndpoint
    from .net.http import HttpLimits
    from .tool_host import ToolHost

ADDON_VERSION = "0.1.0"
LOOPBACK_HOST = "127.0.0.1"


class Mode(enum.Enum):
    """How a Blender gives the bridge its main thread, which decides the driver and the dispatcher."""

    GUI = "gui"
    """Interactive Blender: a thread per connection, jobs queued for the timer pump, deferred results polled."""
    BACKGROUND = "background"
    """`blender -b`: the main thread serves every connection from one loop and runs each job in place."""
    EMBEDDED = "embedded"
    """Blender-as-a-module in a host with threads of its own: a thread per connection; the host gives its main
    thread to `Bridge.serve`, which runs the queued jobs."""

    def dispatcher(self) -> dispatch.Dispatcher:
        return dispatch.InPlaceDispatcher() if self is Mode.BACKGROUND else dispatch.QueuedDispatcher()


@dataclass(frozen=True)
class BridgeConfig:
    """How one bridge serves: its ports, files, limits and mode, fixed for its life (a change is a restart)."""

    port: int = 0
    runtime_file: Path | None = None
    """None: the declared path Hermes reads."""
    job_timeout: float = JOB_TIMEOUT
    http_limits: HttpLimits | None = None
    """None: the defaults (`net/http.py`)."""
    lab_port: int | None = None
    """The Blender Lab listener's port (0: let the OS choose; None: off, the default: it is opt-in)."""
    lab_require_token: bool = False
    allow_code: bool = True
    """False: execute_blender_code and the Lab listener refuse to run code."""
    agent_mode: AgentMode = AgentMode.FULL
    """What the person lets the agent do at the start (the panel switches it while the bridge runs)."""
    ask_timeout: float = ASK_TIMEOUT
    mode: Mode = Mode.EMBEDDED
    log_file: Path | None = None
    """None: `hermes_bridge/bridge.log` in Blender's user config folder."""
    checkpoint_folder: Path | None = None
    """None: `hermes_bridge/checkpoints` in Blender's user config folder."""


class Bridge:
    """One running bridge: its listeners, its token and its runtime file."""

    def __init__(self, config: BridgeConfig, dispatcher: dispatch.Dispatcher) -> None:
        if isinstance(dispatcher, dispatch.InPlaceDispatcher) != (config.mode is Mode.BACKGROUND):
            raise BridgeError(f"a {type(dispatcher).__name__} cannot serve the {config.mode.value} mode")
        self._config = config
        self._dispatcher = dispatcher
        self.log_file = log.configure(config.log_file or default_log_file())
        self._token = Token.generate()
        self.pid = os.getpid()
        self.execution = Execution(
            dispatcher,
            gui=config.mode is Mode.GUI,
            allow_code=config.allow_code,
            agent_mode=config.agent_mode,
            ask_timeout=config.ask_timeout,
            job_timeout=config.job_timeout,
            checkpoint_folder=config.checkpoint_folder or default_checkpoint_folder(),
        )
        self._loading = threading.Lock()
        """Held while the MCP side or the tool host is built (their first use may come from two threads)."""
        self._tool_host: ToolHost | None = None
        self._mcp: McpEndpoint | None = None
        self._closing = False
        """Set (under `_loading`) once `close` began: the MCP side is never built after it looked."""
        try:
            self._loop = MainLoop() if config.mode is Mode.BACKGROUND else None
        except OSError as exc:
            self.execution.close()
            raise BridgeError(f"could not start listening: {exc}") from exc
        self._listeners = self._loop or ThreadedListeners()
        try:
            self._address = self._listeners.listen(
                LOOPBACK_HOST,
                config.port,
                self._mcp_conversation,
                name="hermes-mcp",
            )
            self.url = f"http://{LOOPBACK_HOST}:{self.port}"
            self._lab_address: tuple[str, int] | None = None
            self.lab_error: str | None = None
            if config.lab_port is not None:
                self._start_lab(config.lab_port)
            self.runtime_file = config.runtime_file or runtime_file.expand_declared_path()
            if self._lab_address is not None:
                self._publish_lab()  # first: an agent that found the bridge finds its Lab listener's file too
            try:
                self.publication = self._publish()
            except BaseException:
                if self._lab_address is not None:
                    runtime_file.withdraw(runtime_file.lab_path(self.runtime_file), url=self._lab_url, pid=self.pid)
                raise
            dispatcher.interrupter.install()
        except BaseException as exc:
            self._listeners.close()  # nothing half-started keeps listening
            self.execution.close()
            if isinstance(exc, (OSError, RuntimeError)):  # out of descriptors, no thread could be started
                raise BridgeError(f"could not start listening: {exc}") from exc
            raise

    def _publish(self) -> runtime_file.Publication:
        try:
            return runtime_file.publish(
                self.runtime_file, url=self.url, token=self._token.reveal(), pid=self.pid, extra=self._extra_fields()
            )
        except OSError as exc:
            raise BridgeError(f"cannot write the runtime file {self.runtime_file}: {exc.strerror or exc}") from exc

    def _publish_lab(self) -> None:
        """The Lab listener's own runtime file: the plugin's `blender_lab` server is offered only while it names a
        live Blender of this user (its wire has no credential, so another user may hold the port when it is off)."""
        assert self._lab_address is not None
        try:
            runtime_file.publish(
                runtime_file.lab_path(self.runtime_file),
                url=self._lab_url,
                token=self._token.reveal() if self._config.lab_require_token else "",
                pid=self.pid,
                extra={"protocol": "blender-lab", "mcp_runtime_file": str(self.runtime_file)},
            )
        except OSError as exc:
            raise BridgeError(f"cannot write the Blender Lab runtime file: {exc.strerror or exc}") from exc

    @property
    def _lab_url(self) -> str:
        assert self._lab_address is not None
        return f"http://{self._lab_address[0]}:{self._lab_address[1]}"

    def _start_lab(self, port: int) -> None:
        """A busy or forbidden Lab port is reported, never fatal: the MCP endpoint still serves."""
        settings = LabSettings(
            token=self._token if self._config.lab_require_token else None,
            identify=same_user,
            mcp_endpoint=self.endpoint,
        )
        try:
            self._lab_address = self._listeners.listen(
                LOOPBACK_HOST,
                port,
                partial(LabConversation, executor=self.execution, settings=settings),
                name="hermes-lab",
            )
        except PortUnavailable as exc:
            self.lab_error = f"Blender Lab listener not started: {exc}"

    @property
    def tool_host(self) -> ToolHost:
        """The MCP tools over this bridge's jobs, loaded at their first use (MCP's, or a panel button's)."""
        with self._loading:
            if self._tool_host is None:
                from .tool_host import ToolHost  # not at the start: a Lab-only bridge never needs the catalogue

                self._tool_host = ToolHost(self.execution)
            return self._tool_host

    def _mcp_conversation(self, peer: Peer) -> Conversation:
        """The MCP listener's conversations; its first one brings the MCP side up."""
        mcp = self._mcp or self._mcp_side()
        return mcp.conversation(peer)

    def _mcp_side(self) -> McpEndpoint:
        from .mcp_endpoint import McpEndpoint  # not at the start (mcp_endpoint.py says why)

        tools = self.tool_host
        with self._loading:
            if self._closing:  # an OSError: the listener closes this connection as one whose client left
                raise ConnectionAbortedError("the bridge is stopping")
            if self._mcp is None:
                self._mcp = McpEndpoint(
                    tools,
                    ADDON_VERSION,
                    self._token,
                    lambda: self.port,
                    self._config.http_limits,
                    on_internal_error=_log_exception,
                )
                self.execution.watcher = self._mcp
            return self._mcp

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
    def mode(self) -> Mode:
        return self._config.mode

    @property
    def config(self) -> BridgeConfig:
        """What it was started with: a restart starts the same again."""
        return self._config

    def serve(self) -> None:
        """Background and embedded modes, on the main thread: serve until the dispatcher is asked to stop."""
        dispatcher = self._dispatcher
        if isinstance(dispatcher, dispatch.InPlaceDispatcher):
            assert self._loop is not None
            dispatcher.on_stop(self._loop.wake)
            with dispatcher.serving():
                self._loop.run(dispatcher.stop_requested, dispatcher.background_step)
        elif self._config.mode is Mode.EMBEDDED:
            assert isinstance(dispatcher, dispatch.QueuedDispatcher)
            dispatcher.pump_until_stopped()
        else:
            raise BridgeError("the interactive Blender serves from its timer pump; nothing calls serve()")

    def close(self) -> None:
        """Release waiting jobs, withdraw the runtime file if it is still ours, and stop listening.

        Jobs first: a connection thread waiting on a queued job then answers its client with a
        clean `stopped` error at once, instead of holding the listener's join (and Blender) for it.
        """
        with self._loading:
            self._closing = True
            mcp = self._mcp
        if mcp is not None:
            mcp.close()  # each stream sends its graceful end while its connection is still open
        self._dispatcher.close()
        self.execution.close()
        self.withdraw()  # first: the answers still going out may take the stop policy's seconds
        self._listeners.close()
        self._dispatcher.interrupter.uninstall()

    def withdraw(self) -> None:
        """Take the runtime files back if they still name this bridge (safe from any thread: it only touches files);
        the Lab's first, so no agent is sent to a Lab port about to close."""
        if self._lab_address is not None:
            runtime_file.withdraw(runtime_file.lab_path(self.runtime_file), url=self._lab_url, pid=self.pid)
        runtime_file.withdraw(self.runtime_file, url=self.url, pid=self.pid)

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


def _log_exception(exc: BaseException) -> None:
    log.logger.error("internal error", exc_info=exc)


def default_checkpoint_folder() -> Path:
    return Path(bpy.utils.user_resource("CONFIG", path="hermes_bridge")) / "checkpoints"


def default_log_file() -> Path:
    return Path(bpy.utils.user_resource("CONFIG", path="hermes_bridge")) / "bridge.log"
