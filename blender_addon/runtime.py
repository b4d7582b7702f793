"""The one owner of this process's bridge: start, stop and restart, from the UI, the CLI or agent code.

A stop or a start asked from inside a job (agent code that disables the add-on, presses Stop or Start,
or restarts the bridge) is a command: the job's dispatcher is told to stop after the job, every serve
loop (the GUI's timer pump here, the embedded pump, the background main loop) ends through that one
check, and the command is carried out then, once the job's answer is on its way. A start from inside a
job is a restart, never a second bridge beside the first.
"""

from __future__ import annotations

import atexit
import enum

import bpy

from . import dispatch, log, notes
from .errors import BridgeError
from .net.refusals import refusals
from .service import Bridge, BridgeConfig, Mode

GUI_BUDGET = 0.02
"""Seconds of jobs per tick, so a burst of requests never freezes the UI."""
ACTIVE_INTERVAL = 0.0
"""While jobs come: the next event-loop iteration (about 5 ms in an idle Blender)."""
IDLE_INTERVAL = 0.01
"""When none came: measured under Xvfb, intervals down to 0.005 s cost no CPU beyond the run-to-run noise
(1.5-4 % of a core), 0 cost about 1.5 % more, and after idling the wait is set by Blender's loop and the
machine's wake-ups more than by this interval (docs/performance.md, GUI)."""


class Command(enum.Enum):
    STOP = "stop"
    RESTART = "restart"


class Pending:
    """A command asked from inside a job, carried out after it."""

    __slots__ = ("command", "config")

    def __init__(self, command: Command, config: BridgeConfig | None = None) -> None:
        self.command = command
        self.config = config


class Runtime:
    """Owns the bridge of this process (at most one), the last start's failure, and the GUI's timer pump."""

    def __init__(self) -> None:
        self._bridge: Bridge | None = None
        self._pending: Pending | None = None
        self._stop_asked = False
        """A stop asked from a signal or another thread (`request_stop`): no restart follows it."""
        self.last_error: str | None = None
        """Why the last start failed, for the panel; cleared by a successful start."""
        self._tick = self.tick
        """One bound method, kept: `bpy.app.timers` finds a registered callback by identity."""

    @property
    def bridge(self) -> Bridge | None:
        return self._bridge

    @property
    def pumping(self) -> bool:
        """Whether the GUI's timer pump is registered."""
        return bpy.app.timers.is_registered(self._tick)

    def start(self, config: BridgeConfig) -> Bridge | None:
        """Start the bridge, stopping a running one first. From inside a job it is a restart carried out after the
        job: None then."""
        if self._ask(Pending(Command.RESTART, config)):
            return None
        self._stop_asked = False  # one asked after the last bridge stopped is not for this one
        return self._start(config)

    def _start(self, config: BridgeConfig) -> Bridge:
        self.stop()
        try:
            bridge = Bridge(config, config.mode.dispatcher())
        except BridgeError as exc:
            self.last_error = str(exc)
            log.logger.error("did not start: %s", exc)
            raise
        self.last_error = None
        self._bridge = bridge
        if config.mode is Mode.GUI and not bpy.app.timers.is_registered(self._tick):
            bpy.app.timers.register(self._tick, first_interval=0.0, persistent=True)
        atexit.register(self.stop)
        lab = bridge.lab_address or "off"
        log.logger.info(
            "started: MCP at %s, runtime file %s, Blender Lab %s", bridge.endpoint, bridge.runtime_file, lab
        )
        for warning in (bridge.lab_error, notes.takeover(bridge.publication)):
            if warning:
                log.logger.warning("%s", warning)
        return bridge

    def stop(self) -> None:
        """Stop the running bridge, if any. Idempotent. From inside a job, carried out after the job: closing the
        listeners under it would drop its answer."""
        if self._ask(Pending(Command.STOP)):
            return
        bridge, self._bridge = self._bridge, None
        self._pending = None
        if bridge is None:
            return
        if bpy.app.timers.is_registered(self._tick):
            bpy.app.timers.unregister(self._tick)
        bridge.close()
        refusals.flush(log.logger)
        log.logger.info("stopped: %s", bridge.endpoint)
        atexit.unregister(self.stop)

    def request_stop(self) -> None:
        """End serving and stop the running job too (a signal, stdin's end); safe from any thread and from a signal
        handler. The serve loop returns and its caller stops the bridge; a restart asked meanwhile is dropped."""
        self._stop_asked = True
        bridge = self._bridge
        if bridge is not None:
            bridge.dispatcher.request_stop()
            bridge.dispatcher.interrupt_running()

    def serve(self) -> None:
        """Background and embedded modes, on the main thread: serve until a stop, carrying out each restart."""
        while (bridge := self._bridge) is not None and not self._stop_asked:
            bridge.serve()
            if not self.carry_out():
                return

    def carry_out(self) -> bool:
        """After the job that asked: its stop or restart; whether a bridge serves now (False when none was asked:
        the loop ended for a stop from outside, which its caller carries out)."""
        pending, self._pending = self._pending, None
        if pending is None:
            return False
        restart = pending.config if pending.command is Command.RESTART else None
        self.stop()  # up to the stop policy's deadline: a stop asked meanwhile still counts
        if restart is None or self._stop_asked:
            return False
        try:
            self._start(restart)
        except BridgeError:
            return False  # logged, and shown in the panel
        return True

    def _ask(self, pending: Pending) -> bool:
        """Whether the caller is inside the running bridge's job: then `pending` waits for the job's end."""
        bridge = self._bridge
        if bridge is None or not bridge.dispatcher.in_job():
            return False
        self._pending = pending  # the last word counts: a stop after a restart stops
        bridge.dispatcher.stop_after_job()
        return True

    def tick(self) -> float | None:
        """Timer callback: drain within budget, carry out a command asked by a job, then pick the next interval.
        It never raises: Blender silently unregisters a timer whose callback raises."""
        bridge = self._bridge
        if bridge is None:
            return None
        dispatcher = bridge.dispatcher
        assert isinstance(dispatcher, dispatch.QueuedDispatcher)
        try:
            ran = dispatcher.run_pending(GUI_BUDGET)
            if dispatcher.stop_requested():
                if not self.carry_out():
                    self.stop()  # asked from outside a job (`request_stop`): nothing waits to be carried out
                return ACTIVE_INTERVAL if self._bridge is not None else None
            if ran:
                _redraw_sidebars()  # the panel shows the agent's steps and tasks as they happen
        except Exception:
            log.logger.exception("the timer pump caught an error; it keeps running")
            ran = 1
        return ACTIVE_INTERVAL if ran or dispatcher.pending() else IDLE_INTERVAL


def _redraw_sidebars() -> None:
    """Tag the 3D Viewports' sidebars for redraw: a flag Blender reads at its next draw, nothing drawn here."""
    manager = bpy.context.window_manager
    for window in manager.windows if manager is not None else ():
        for area in window.screen.areas:
            if area.type == "VIEW_3D":
                for region in area.regions:
                    if region.type == "UI":
                        region.tag_redraw()


RUNTIME = Runtime()
"""The process's one owner of the bridge: Blender's operators, panel and command line reach it here."""
