"""The one place where network threads meet bpy.

Every job runs on Blender's main thread. In the GUI, connection threads queue jobs for a
persistent `bpy.app.timers` pump. In background mode and Blender-as-a-module (where timers
never fire) the main thread serves the connections itself (`inline()`: a job runs in place,
a watchdog thread interrupts it at its deadline); the blocking queue pump (`serve`) remains
for hosts that bring their own threads.

A job past its deadline, or running when a stop is asked, is interrupted until it ends
(`interrupt.py` says how: on POSIX a signal ends a wait in C, and the interrupt is repeated at
every line of the job's code, so a bare `except` cannot keep it).
"""

from __future__ import annotations

import contextlib
import math
import queue
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import bpy

from . import interrupt, log
from .errors import BridgeStopped, ClientLeft, DispatchTimeout, JobInterrupted

_QUEUED, _RUNNING, _DONE, _CANCELLED = "queued", "running", "done", "cancelled"


class Job:
    """One unit of main-thread work and the rendezvous its submitter waits on."""

    __slots__ = ("_fn", "_done", "_lock", "_state", "_result", "_error", "_thread", "_interrupted", "_wanted")
    __slots__ += ("deadline",)

    def __init__(
        self, fn: Callable[[], Any], deadline: float = math.inf, wanted: Callable[[], bool] | None = None
    ) -> None:
        self._fn = fn
        self.deadline = deadline
        """When a job run in place is interrupted by the watchdog (`time.monotonic()`)."""
        self._wanted = wanted
        """Asked just before the job starts: False (its client has left) drops it unrun."""
        self._done = threading.Event()
        self._lock = threading.Lock()
        self._state = _QUEUED
        self._result: Any = None
        self._error: BaseException | None = None
        self._thread = 0
        self._interrupted = False

    def wait(self, timeout: float) -> Any:
        """The job's result. At the deadline a queued job is cancelled (never run late) and a running
        one is interrupted; the error says which of these happened."""
        if not self._done.wait(timeout):
            with self._lock:
                if self._state == _QUEUED:
                    self._state = _CANCELLED
                    raise DispatchTimeout(
                        f"Blender's main thread did not take the request within {timeout:g} s; it is busy "
                        "(a modal operator, a render or a long script). The request was not run; try again."
                    )
            if self.stop_within(INTERRUPT_GRACE):
                raise _ran_too_long(timeout)
            raise DispatchTimeout(
                f"the request is still running after {timeout:g} s inside Blender's own code (a render or an "
                "operator cannot be interrupted from Python); its result will be discarded. Check the scene "
                "before repeating it.",
                state="still_running",
            )
        if self._interrupted:
            raise JobInterrupted  # even if it caught the interrupt and answered: that answer is not the truth
        if self._error is not None:
            raise self._error
        return self._result

    def stop_within(self, grace: float) -> bool:
        """Interrupt the running job again and again until it ends; whether it ended within `grace` seconds."""
        ends = time.monotonic() + grace
        while self.interrupt():
            if self._done.wait(min(REPEAT_INTERVAL, max(0.0, ends - time.monotonic()))):
                return True
            if time.monotonic() >= ends:
                return False
        return self._done.wait(max(0.0, ends - time.monotonic()))

    def cancel(self, error: BaseException) -> None:
        with self._lock:
            if self._state != _QUEUED:
                return
            self._state = _CANCELLED
        self._error = error
        self._done.set()

    def interrupt(self) -> bool:
        """Make the running job stop: from now on it is interrupted at every line until it ends (interrupt.py)."""
        with self._lock:
            if self._state != _RUNNING:
                return False
            self._interrupted = True
            interrupt.deliver(self._thread)
            return True

    def run(self) -> None:
        """Main thread only. A JobInterrupted that arrives after the job has finished reaches the pump."""
        with self._lock:
            if self._state != _QUEUED:
                return
            if self._wanted is not None and not self._wanted():
                self._state = _CANCELLED
                self._error = ClientLeft("the client left before its request's turn came; it was not run")
                self._done.set()
                return
            self._state = _RUNNING
            self._thread = threading.get_ident()
        try:
            with interrupt.policed(self):
                self._result = self._fn()
        except KeyboardInterrupt:
            raise
        except BaseException as exc:
            self._error = exc
        finally:
            try:
                with self._lock:
                    self._state = _DONE
            finally:
                self._done.set()

    @property
    def thread(self) -> int:
        """The thread running the job (0 before it starts)."""
        return self._thread

    def stopping(self) -> bool:
        """Whether the running job is being interrupted (the signal handler and the line policer ask)."""
        return self._interrupted and self._state == _RUNNING


def _ran_too_long(timeout: float) -> DispatchTimeout:
    return DispatchTimeout(
        f"the request ran longer than {timeout:g} s and was stopped. What it changed before "
        "stopping stays: check the scene before repeating it.",
        state="interrupted",
    )


INTERRUPT_GRACE = 0.9
"""Seconds an interrupted job gets to unwind before its caller is told Blender's own code holds it."""
REPEAT_INTERVAL = 0.05
"""How often an interrupt is repeated while the job goes on (each one ends a wait in C, on POSIX)."""
WATCH_INTERVAL = 0.05
"""How often the watchdog looks at a job run in place: the deadline holds to this (a look is a few microseconds)."""


class Dispatcher:
    """A job queue drained on the main thread by whichever pump is running."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
        self._stop = threading.Event()
        self._closed = False
        self._running: Job | None = None
        self._inline_thread: int | None = None
        self._wakers: list[Callable[[], None]] = []
        self._stop_when_idle = False

    def call(self, fn: Callable[[], Any], timeout: float, wanted: Callable[[], bool] | None = None) -> Any:
        """`fn()` run on the main thread: in place on the thread serving `inline()`, else queued for the pump.

        Either way a job past `timeout` is interrupted and its caller told so (DispatchTimeout), and one
        whose `wanted()` is False when its turn comes (the client left) is dropped, never run.
        """
        if self._inline_thread != threading.get_ident():
            job, wait = self.submit(fn, wanted), timeout
        elif self._closed:
            raise BridgeStopped("the bridge is stopping; the request was not run")
        else:
            job, wait = Job(fn, time.monotonic() + timeout, wanted), 0.0
            self._run(job)
        try:
            return job.wait(wait)
        except JobInterrupted:
            if self._stop.is_set():
                raise BridgeStopped(
                    "the bridge stopped while the request ran; what it changed before stopping stays"
                ) from None
            raise _ran_too_long(timeout) from None

    @contextlib.contextmanager
    def inline(self) -> Iterator[None]:
        """While inside, jobs that `call` meets on this thread run in place, watched for their deadline."""
        self._inline_thread = threading.get_ident()
        interrupt.install()
        done = threading.Event()
        watchdog = threading.Thread(target=self._watch, args=(done,), name="hermes-watchdog", daemon=True)
        watchdog.start()
        try:
            yield
        finally:
            self._inline_thread = None
            done.set()
            watchdog.join()

    def _watch(self, done: threading.Event) -> None:
        while not done.wait(WATCH_INTERVAL):
            job = self._running
            if job is not None and (time.monotonic() > job.deadline or self._stop.is_set()):
                job.interrupt()  # again at each look while it runs: an interrupt it swallowed is repeated

    def stop_requested(self) -> bool:
        return self._stop.is_set() or (self._stop_when_idle and self._running is None)

    def stop_after_job(self) -> None:
        """Like `request_stop`, but the running job is left to finish and answer (it asked for the stop itself)."""
        self._stop_when_idle = True
        for wake in self._wakers:
            wake()

    def on_stop(self, wake: Callable[[], None]) -> None:
        """Have `request_stop` also call `wake` (which must be safe from a signal handler)."""
        self._wakers.append(wake)

    def submit(self, fn: Callable[[], Any], wanted: Callable[[], bool] | None = None) -> Job:
        if self._closed:
            raise BridgeStopped("the bridge is stopping; the request was not run")
        job = Job(fn, wanted=wanted)
        self._queue.put(job)
        return job

    def pending(self) -> bool:
        return not self._queue.empty()

    def running(self) -> bool:
        """Whether a job is running on the main thread now."""
        return self._running is not None

    def in_job(self) -> bool:
        """Whether the caller is inside the running job (its code called back into the bridge)."""
        job = self._running
        return job is not None and job.thread == threading.get_ident()

    def queued(self) -> int:
        """How many jobs wait for the main thread (approximate while threads submit)."""
        return self._queue.qsize()

    def run_pending(self, budget: float) -> int:
        """Run queued jobs until the queue is empty or `budget` seconds are used (main thread only)."""
        deadline = time.monotonic() + budget
        ran = 0
        while True:
            try:
                job = self._queue.get_nowait()
            except queue.Empty:
                return ran
            if job is not None:
                self._run(job)
                ran += 1
            if time.monotonic() >= deadline:
                return ran

    def serve(self, poll: float = 0.5) -> None:
        """Blocking pump for background mode: run jobs until request_stop() (main thread only)."""
        interrupt.install()
        while not self._stop.is_set():
            try:
                job = self._queue.get(timeout=poll)
            except queue.Empty:
                continue
            if job is not None:
                self._run(job)

    def _run(self, job: Job) -> None:
        self._running = job
        try:
            job.run()
        except JobInterrupted:
            pass  # it arrived just after the job ended: nothing is left to stop
        finally:
            self._running = None

    def interrupt_running(self) -> bool:
        """Stop the job running on the main thread, if any, until it ends (safe from a signal handler; on the
        main loop the watchdog repeats it while a stop is asked)."""
        job = self._running
        return job.interrupt() if job is not None else False

    def request_stop(self) -> None:
        """Ask the blocking pump to return; safe from signal handlers and other threads."""
        self._stop.set()
        self._queue.put(None)
        for wake in self._wakers:
            wake()

    def close(self) -> None:
        """Refuse new jobs and release everyone waiting on a queued one."""
        self._closed = True
        self.request_stop()
        while True:
            try:
                job = self._queue.get_nowait()
            except queue.Empty:
                return
            if job is not None:
                job.cancel(BridgeStopped("the bridge stopped before the request ran"))


# --- GUI pump ---------------------------------------------------------------------------
# A module-level function (not a bound method) so `is_registered` finds it, and one that
# never raises, because Blender silently unregisters a timer whose callback raises.

GUI_BUDGET = 0.02
"""Seconds of jobs per tick, so a burst of requests never freezes the UI."""
ACTIVE_INTERVAL = 0.0
"""While jobs come: the next event-loop iteration (about 5 ms in an idle Blender)."""
IDLE_INTERVAL = 0.01
"""When none came: measured under Xvfb, intervals down to 0.005 s cost no CPU beyond the run-to-run noise
(1.5-4 % of a core), 0 cost about 1.5 % more, and after idling the wait is set by Blender's loop and the
machine's wake-ups more than by this interval (docs/performance.md, GUI)."""

_gui_dispatcher: Dispatcher | None = None


def gui_tick() -> float | None:
    """Timer callback: drain within budget, then pick the next interval."""
    dispatcher = _gui_dispatcher
    if dispatcher is None:
        return None
    try:
        ran = dispatcher.run_pending(GUI_BUDGET)
    except Exception:
        log.logger.exception("the timer pump caught an error; it keeps running")
        ran = 1
    return ACTIVE_INTERVAL if ran or dispatcher.pending() else IDLE_INTERVAL


def start_gui_pump(dispatcher: Dispatcher) -> None:
    global _gui_dispatcher
    _gui_dispatcher = dispatcher
    interrupt.install()
    if not bpy.app.timers.is_registered(gui_tick):
        bpy.app.timers.register(gui_tick, first_interval=0.0, persistent=True)


def stop_gui_pump() -> None:
    global _gui_dispatcher
    _gui_dispatcher = None
    if bpy.app.timers.is_registered(gui_tick):
        bpy.app.timers.unregister(gui_tick)
