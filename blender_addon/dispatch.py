"""The one place where network threads meet bpy.

Every job runs on Blender's main thread, one `Job` at a time, through the dispatcher of the
bridge's mode: in the GUI connection threads queue jobs for a persistent `bpy.app.timers` pump
(`QueuedDispatcher`); in background mode (where timers never fire) the main thread serves the
connections itself and runs each job in place, a watchdog thread interrupting it at its deadline
(`InPlaceDispatcher`); a host embedding Blender-as-a-module with threads of its own gives its
main thread to `QueuedDispatcher.pump_until_stopped`.

A job past its deadline, or running when a stop is asked, is interrupted until it ends by the
dispatcher's `Interrupter` (`interrupt.py` says how: on POSIX a signal ends a wait in C, and the
interrupt is repeated at every line of the job's code, so a bare `except` cannot keep it).

Every serve loop ends through one check, `stop_requested()`: a stop asked from outside, or one asked
from inside a job (`stop_after_job`), which waits for that job's end so its answer goes out.
"""

from __future__ import annotations

import abc
import collections
import contextlib
import math
import queue
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from .errors import BridgeStopped, ClientLeft, DispatchTimeout, JobInterrupted, RequestCancelled
from .interrupt import Interrupter
from .net.caller import ANYONE, Caller

_QUEUED, _RUNNING, _DONE, _CANCELLED = "queued", "running", "done", "cancelled"


class Job:
    """One unit of main-thread work and the rendezvous its submitter waits on."""

    __slots__ = ("_fn", "_done", "_lock", "_state", "_result", "_error", "_thread", "_interrupted", "_caller")
    __slots__ += ("deadline", "_abandoned", "_interrupter")

    def __init__(
        self, fn: Callable[[], Any], interrupter: Interrupter, deadline: float = math.inf, caller: Caller = ANYONE
    ) -> None:
        self._fn = fn
        self._interrupter = interrupter
        self.deadline = deadline
        """When a job run in place is interrupted by the watchdog (`time.monotonic()`)."""
        self._caller = caller
        self._done = threading.Event()
        self._lock = threading.Lock()
        self._state = _QUEUED
        self._result: Any = None
        self._error: BaseException | None = None
        self._thread = 0
        self._interrupted = False
        self._abandoned = False
        """Stopped because its client left while it ran (a hang-up is the cancel signal)."""

    def wait(self, timeout: float) -> Any:
        """The job's result. At the deadline a queued job is cancelled (never run late) and a running
        one is interrupted; the error says which of these happened. A client that leaves while its job
        runs has the job stopped (looked at every WATCH_INTERVAL while waiting)."""
        if not self._wait_watching(timeout):
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
        if self._abandoned:
            raise RequestCancelled("the client left while its request ran; it was stopped, what it changed stays")
        if self._interrupted:
            raise JobInterrupted  # even if it caught the interrupt and answered: that answer is not the truth
        if self._error is not None:
            raise self._error
        return self._result

    def _wait_watching(self, timeout: float) -> bool:
        """Wait for the end up to `timeout`; a running job whose client has left is stopped first."""
        ends = time.monotonic() + timeout
        while not self._done.wait(min(WATCH_INTERVAL, max(0.0, ends - time.monotonic()))):
            if time.monotonic() >= ends:
                return False
            if self.look(time.monotonic()):
                self.stop_within(INTERRUPT_GRACE)
                self._done.wait(max(0.0, ends - time.monotonic()))
                return self._done.is_set()
        return True

    def look(self, now: float) -> bool:
        """The watcher's look at a job not yet done: its client is tended, or, if it has left while the job
        runs, the job is interrupted; whether it was. (A queued job whose client left is dropped at its turn.)"""
        if self._state not in (_QUEUED, _RUNNING):
            return False
        if self._caller.wanted():
            self._caller.tend(now)
            return False
        if self._state != _RUNNING:
            return False
        with self._lock:
            if self._state != _RUNNING:
                return False
            self._abandoned = True
        return self.interrupt()

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
            self._interrupter.deliver(self._thread)
            return True

    def run(self) -> None:
        """Main thread only. A JobInterrupted that arrives after the job has finished reaches the pump."""
        with self._lock:
            if self._state != _QUEUED:
                return
            if not self._caller.wanted():
                self._state = _CANCELLED
                self._error = ClientLeft("the client left before its request's turn came; it was not run")
                self._done.set()
                return
            self._state = _RUNNING
            self._thread = threading.get_ident()
        try:
            with self._interrupter.policed(self):
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

    @property
    def abandoned(self) -> bool:
        return self._abandoned

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


class Dispatcher(abc.ABC):
    """What every way of reaching the main thread shares: the running job, the stop, the wake-ups."""

    def __init__(self) -> None:
        self._stop = threading.Event()
        self._closed = False
        self._running: Job | None = None
        self._wakers: list[Callable[[], None]] = []
        self._stop_when_idle = False
        self.interrupter = Interrupter()
        """Stops this dispatcher's running job; installed on the main thread while its bridge serves."""

    @abc.abstractmethod
    def call(self, fn: Callable[[], Any], timeout: float, caller: Caller = ANYONE) -> Any:
        """`fn()` run on the main thread. A job past `timeout` is interrupted and its caller told so
        (DispatchTimeout); one whose caller is gone when its turn comes is dropped, or stopped while it runs."""

    def _answer(self, job: Job, wait: float, timeout: float) -> Any:
        try:
            return job.wait(wait)
        except JobInterrupted:
            if job.abandoned:
                raise RequestCancelled("the client left while its request ran; it was stopped") from None
            if self._stop.is_set():
                raise BridgeStopped(
                    "the bridge stopped while the request ran; what it changed before stopping stays"
                ) from None
            raise _ran_too_long(timeout) from None

    @abc.abstractmethod
    def start_background(self, step: Callable[[], bool]) -> None:
        """Run `step()` on the main thread between the jobs of requests, again while it returns True (a task's
        frames, one per step): requests are served between two steps. It never raises on purpose."""

    def stop_requested(self) -> bool:
        """The one check every serve loop ends by: a stop asked, or one asked by a job that has ended."""
        return self._stop.is_set() or (self._stop_when_idle and self._running is None)

    def stop_after_job(self) -> None:
        """Like `request_stop`, but the running job is left to finish and answer (it asked for the stop itself)."""
        self._stop_when_idle = True
        for wake in self._wakers:
            wake()

    def on_stop(self, wake: Callable[[], None]) -> None:
        """Have `request_stop` also call `wake` (which must be safe from a signal handler)."""
        self._wakers.append(wake)

    def running(self) -> bool:
        """Whether a job is running on the main thread now."""
        return self._running is not None

    def in_job(self) -> bool:
        """Whether the caller is inside the running job (its code called back into the bridge)."""
        job = self._running
        return job is not None and job.thread == threading.get_ident()

    def _run(self, job: Job) -> None:
        self._running = job
        try:
            job.run()
        except JobInterrupted:
            pass  # it arrived just after the job ended: nothing is left to stop
        finally:
            self._running = None

    def interrupt_running(self) -> bool:
        """Stop the job running on the main thread, if any, until it ends (safe from a signal handler; in
        place, the watchdog repeats it while a stop is asked)."""
        job = self._running
        return job.interrupt() if job is not None else False

    def request_stop(self) -> None:
        """Ask whoever serves to return; safe from signal handlers and other threads."""
        self._stop.set()
        for wake in self._wakers:
            wake()

    def close(self) -> None:
        """Refuse new jobs."""
        self._closed = True
        self.request_stop()


class QueuedDispatcher(Dispatcher):
    """The GUI's and an embedding host's way: callers on other threads queue jobs, and a pump on the main
    thread runs them (the GUI's timer, or `pump_until_stopped` where the host gives its main thread)."""

    def __init__(self) -> None:
        super().__init__()
        self._queue: queue.SimpleQueue[Job | None] = queue.SimpleQueue()

    def call(self, fn: Callable[[], Any], timeout: float, caller: Caller = ANYONE) -> Any:
        return self._answer(self.submit(fn, caller), timeout, timeout)

    def submit(self, fn: Callable[[], Any], caller: Caller = ANYONE) -> Job:
        if self._closed:
            raise BridgeStopped("the bridge is stopping; the request was not run")
        job = Job(fn, self.interrupter, caller=caller)
        self._queue.put(job)
        return job

    def start_background(self, step: Callable[[], bool]) -> None:
        """Each step is queued behind the jobs already waiting, so a request waits at most one step."""
        if self._closed:
            raise BridgeStopped("the bridge is stopping; the task was not started")

        def again() -> None:
            if step() and not self._closed:
                self._queue.put(Job(again, self.interrupter))

        self._queue.put(Job(again, self.interrupter))

    def pending(self) -> bool:
        return not self._queue.empty()

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

    def pump_until_stopped(self, poll: float = 0.5) -> None:
        """Run jobs on this thread (the main one) until a stop is requested: for a host that brings its own threads."""
        while not self.stop_requested():
            try:
                job = self._queue.get(timeout=poll)
            except queue.Empty:
                continue
            if job is not None:
                self._run(job)

    def request_stop(self) -> None:
        super().request_stop()
        self._queue.put(None)

    def close(self) -> None:
        """Refuse new jobs and release everyone waiting on a queued one."""
        super().close()
        while True:
            try:
                job = self._queue.get_nowait()
            except queue.Empty:
                return
            if job is not None:
                job.cancel(BridgeStopped("the bridge stopped before the request ran"))


class InPlaceDispatcher(Dispatcher):
    """Background Blender's way: the thread that serves every connection (Blender's main one) runs each job
    where it meets it, and a watchdog thread interrupts a job at its deadline."""

    def __init__(self) -> None:
        super().__init__()
        self._serving_thread: int | None = None
        self._background: collections.deque[Callable[[], bool]] = collections.deque()

    def call(self, fn: Callable[[], Any], timeout: float, caller: Caller = ANYONE) -> Any:
        if self._serving_thread != threading.get_ident():
            raise RuntimeError("jobs run in place on the thread inside `serving()` only")
        if self._closed:
            raise BridgeStopped("the bridge is stopping; the request was not run")
        job = Job(fn, self.interrupter, time.monotonic() + timeout, caller)
        self._run(job)
        return self._answer(job, 0.0, timeout)

    def start_background(self, step: Callable[[], bool]) -> None:
        if self._closed:
            raise BridgeStopped("the bridge is stopping; the task was not started")
        self._background.append(step)

    def background_step(self) -> bool:
        """One step of the background work, in place (the main loop calls this once per turn, after the turn's
        requests); whether any work remains. A step is watched as a job is, for a stop; once a stop is asked no
        step starts (a frame begun then ran to its end, past the stop's one second)."""
        if not self._background or self._closed or self.stop_requested():
            return False
        step = self._background.popleft()
        job = Job(step, self.interrupter)
        self._run(job)
        try:
            again = job.wait(0.0)
        except BaseException:  # the step was interrupted (the bridge is stopping); it said so in its own state
            again = False
        if again and not self._closed:
            self._background.append(step)
        return bool(self._background)

    @contextlib.contextmanager
    def serving(self) -> Iterator[None]:
        """While inside, jobs that `call` meets on this thread run in place, watched for their deadline."""
        self._serving_thread = threading.get_ident()
        done = threading.Event()
        watchdog = threading.Thread(target=self._watch, args=(done,), name="hermes-watchdog", daemon=True)
        watchdog.start()
        try:
            yield
        finally:
            self._serving_thread = None
            done.set()
            watchdog.join()

    def _watch(self, done: threading.Event) -> None:
        while not done.wait(WATCH_INTERVAL):
            job = self._running
            if job is None:
                continue
            if time.monotonic() > job.deadline or self._stop.is_set() or job.abandoned:
                job.interrupt()  # again at each look while it runs: an interrupt it swallowed is repeated
            else:
                job.look(time.monotonic())  # progress goes out; a client that hung up has its job stopped
