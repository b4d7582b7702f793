"""Stopping a job's Python code wherever it waits and whatever it catches.

An exception raised into a thread from outside (PyThreadState_SetAsyncExc) lands only between
bytecodes and only once: a job waiting in C (`time.sleep`, a socket, `subprocess`) went on until
the wait ended, and a bare `except:` swallowed it for good. So an interrupt here is three things:

- POSIX: a signal (SIGUSR2) to the main thread, where every job runs. Its handler raises
  JobInterrupted, and a handled signal ends a blocking system call (EINTR), so the wait ends.
  Windows has no signal for a thread: there the exception is raised asynchronously, and a wait in
  C ends when it ends.
- From the first interrupt until the job ends, every line of code that is not installed (agent
  code under any file name: AGENT_CODE, `compile(src, "x.py", ...)`, `exec(open(path).read())`,
  a user's own module) raises JobInterrupted again (`sys.monitoring` LINE events, Python 3.12+),
  so catching it only reaches the next line. Installed code (the standard library, Blender's
  scripts, site-packages, the bridge) is left alone: a raise inside Cycles' engine left Blender
  broken, one in a library's callback or finaliser is printed and ignored, and the bridge's own
  clean-up must run; the repeated signal still reaches it. The tool id is claimed again before
  each job, so agent code that freed or took it breaks only its own job's line policing (said in
  the log). Python 3.11 (Blender 4.5) has no `sys.monitoring` (and `sys.settrace`, which CPython
  switches off once its function raised, misbehaved under repeated signals there): only the
  repeated signal acts, so code that catches every exception and loops back into a wait can
  outlast it.
- The processes the job started (`job_processes.py`) are killed, so a wait for a child that C
  retries on EINTR (`os.system`) ends too.
- Blender's own C code (a render, an operator) runs to its end whatever Python does: the caller
  is told `still_running`.

One `Interrupter` belongs to each dispatcher and holds its running job's state. What is the
process's, not a dispatcher's, lives in `SIGNALS` (the handlers the bridge relies on: `signal.signal`
refuses to change them while any is set, and after every job each is put back, whatever lower-level
calls the job made) and in the `sys.monitoring` tool id, claimed by the interrupter that serves.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import functools
import os
import signal
import sys
import sysconfig
import threading
from collections.abc import Callable, Iterator
from types import CodeType, FrameType
from typing import Any, Protocol

from . import job_processes
from .errors import JobInterrupted
from .log import logger

_SIGNAL: int | None = getattr(signal, "SIGUSR2", None)
AGENT_CODE = "<blender-bridge>"
"""The file name agent-written code is compiled under: the code interrupted line by line."""
_MONITORING = getattr(sys, "monitoring", None)
_TOOL_NAME = "hermes-bridge-interrupt"

Handler = Callable[[int, FrameType | None], Any] | int | None


class Stoppable(Protocol):
    def stopping(self) -> bool: ...


class SignalGuards:
    """The process's signals whose handlers the bridge set: agent code cannot change them (`signal.signal` refuses
    while any is guarded), and `restore` puts each back after a job that went around that refusal."""

    def __init__(self) -> None:
        self._guarded: dict[int, Handler] = {}
        self._original = signal.signal
        self._wakeup: int | None = None
        """The descriptor the bridge's signals wake its watcher through (`guard_wakeup`), set anew with them."""

    def guard(self, signum: int, handler: Handler) -> Handler:
        """Set a handler the bridge relies on (main thread). Returns the previous one."""
        previous = self._original(signum, handler)
        self._guarded[signum] = handler
        signal.signal = self._refusing
        return previous

    def release(self, signum: int, previous: Handler) -> None:
        """Give a guarded signal back (main thread). A handler not set from Python reads as None, which
        `signal.signal` does not take: that one was the default (Blender 5.2's SIGINT)."""
        self._guarded.pop(signum, None)
        self._original(signum, signal.SIG_DFL if previous is None else previous)
        if not self._guarded:
            signal.signal = self._original

    def holds(self, signum: int) -> bool:
        return signum in self._guarded

    def guard_wakeup(self, fd: int) -> int:
        """Make `fd` the signals' wake-up descriptor (main thread), set anew after every job; the old one back."""
        previous = signal.set_wakeup_fd(fd, warn_on_full_buffer=False)
        self._wakeup = fd
        return previous

    def release_wakeup(self, previous: int) -> None:
        self._wakeup = None
        signal.set_wakeup_fd(previous)

    def restore(self) -> None:
        """Main thread, after a job: every guarded handler, and the wake-up descriptor, are ours again, set anew
        whatever Python's table says: agent code can change a handler below it (ctypes' `signal`), which only the
        kernel knows. (A signal the process ignores is discarded when sent, so one sent during that job is lost:
        README › Security.)"""
        for signum, handler in self._guarded.items():
            self._original(signum, handler)
        if self._wakeup is not None:  # without it a later render would hold SIGTERM's stop until it ends
            signal.set_wakeup_fd(self._wakeup, warn_on_full_buffer=False)

    def _refusing(self, signum: int, handler: Handler) -> Handler:
        if signum in self._guarded:
            raise ValueError(
                f"signal {signum} is used by the Blender bridge (to stop jobs and Blender on request); "
                "agent code cannot change its handler"
            )
        return self._original(signum, handler)


SIGNALS = SignalGuards()


def _installed_folders() -> tuple[str, ...]:
    """Folders of code that is not the job's own: the bridge, the standard library, site-packages (bpy's too),
    Blender's scripts. Code from anywhere else (a file name agent code chose, a user's module) is policed."""
    folders = {
        os.path.dirname(os.path.abspath(__file__)),
        sys.prefix,
        sys.base_prefix,
        sys.exec_prefix,
        *(sysconfig.get_paths().get(key) for key in ("stdlib", "platstdlib", "purelib", "platlib")),
    }
    bpy = sys.modules.get("bpy")  # inside Blender it is loaded before any add-on; the net/ tests run without it
    if bpy is not None:  # Blender's own scripts (Cycles' engine among them) lie beside its Python, not inside it
        folders |= {bpy.utils.system_resource("SCRIPTS"), *bpy.utils.script_paths()}
        # Installed extensions and their wheels (`extensions/.local`), in every repository the user set up.
        folders |= {bpy.utils.system_resource("EXTENSIONS"), bpy.utils.user_resource("EXTENSIONS")}
        extensions = getattr(getattr(bpy.context, "preferences", None), "extensions", None)
        folders |= {repo.directory for repo in (extensions.repos if extensions is not None else ())}
    return tuple(os.path.join(os.path.realpath(folder), "") for folder in folders if folder)


_INSTALLED = _installed_folders()


@functools.lru_cache(maxsize=4096)
def installed(filename: str) -> bool:
    """Code from the bridge, the standard library or an installed package (not the job's own): never policed."""
    if filename == AGENT_CODE:
        return False
    if filename.startswith("<frozen "):
        return True
    return os.path.realpath(filename).startswith(_INSTALLED) if os.path.isabs(filename) else False


class Interrupter:
    """Makes the job running on its dispatcher's main thread stop, and holds off while the job is `shielded`."""

    def __init__(self) -> None:
        self._current: Stoppable | None = None
        self._thread = 0
        self._raised = False
        """Whether the running job has had its JobInterrupted raised by the signal handler."""
        self._shielded = 0
        """How deep the running job is inside Blender's own render (`shielded`)."""
        self._policing = threading.Lock()
        """Orders turning line events on (any thread) against the job's end turning them off (its own thread)."""
        self._began = job_processes.NO_JOB
        """Where the running job began, to tell the processes it started (job_processes.py)."""
        self._tool_id: int | None = None
        self._lines_on = False
        """Whether this job turned the line events on (only then are lines it switched off watched again)."""

    def install(self) -> None:
        """Main thread, as its dispatcher starts serving: the signal that raises JobInterrupted, and the line
        events' tool id."""
        if threading.current_thread() is not threading.main_thread():
            return
        if _SIGNAL is not None:
            SIGNALS.guard(_SIGNAL, self.on_signal)
        self._claim_tool()

    def uninstall(self) -> None:
        """Main thread, as its dispatcher stops: the signal back to its default, the tool id freed."""
        if threading.current_thread() is not threading.main_thread():
            return
        if _SIGNAL is not None and signal.getsignal(_SIGNAL) == self.on_signal:
            SIGNALS.release(_SIGNAL, signal.SIG_DFL)
        self._free_tool()

    def _claim_tool(self) -> None:
        """Hold a `sys.monitoring` tool id with our line callback; agent code may have freed it, taken it or
        replaced the callback since the last job. With no id free, jobs are policed by the signal alone (said)."""
        if _MONITORING is None:
            return
        if self._tool_id is not None and _MONITORING.get_tool(self._tool_id) == _TOOL_NAME:
            _MONITORING.register_callback(self._tool_id, _MONITORING.events.LINE, self._on_line)
            return
        lost, self._tool_id = self._tool_id, None
        for candidate in (4, 3):  # the ids no standard tool (debugger, coverage, profiler, optimizer) takes
            if _MONITORING.get_tool(candidate) in (None, _TOOL_NAME):  # ours: a stopped bridge's, never freed
                if _MONITORING.get_tool(candidate) is None:
                    _MONITORING.use_tool_id(candidate, _TOOL_NAME)
                _MONITORING.register_callback(candidate, _MONITORING.events.LINE, self._on_line)
                self._tool_id = candidate
                atexit.register(self._free_tool)  # no callback of ours may run while the interpreter tears down
                break
        if lost is not None:
            if self._tool_id is None:
                logger.warning(
                    "agent code took the monitoring tool id the bridge polices jobs with, and none is free: "
                    "deadlines now stop jobs by signal alone, and code that catches every exception can outlast them"
                )
            else:
                logger.warning("agent code freed the monitoring tool id the bridge polices jobs with; claimed it again")

    def _free_tool(self) -> None:
        tool_id, self._tool_id = self._tool_id, None
        atexit.unregister(self._free_tool)
        if tool_id is not None and _MONITORING is not None and _MONITORING.get_tool(tool_id) == _TOOL_NAME:
            _MONITORING.set_events(tool_id, 0)
            _MONITORING.register_callback(tool_id, _MONITORING.events.LINE, None)
            _MONITORING.free_tool_id(tool_id)

    def deliver(self, thread_id: int) -> None:
        """Interrupt the job running on `thread_id` (any thread may call this, as often as it likes)."""
        with self._policing:
            if self._current is None:
                return  # its job has left `policed` (it is ending): turning the line events on now would leave them on
            self._police_lines(True)
        if _SIGNAL is not None and SIGNALS.holds(_SIGNAL) and thread_id == threading.main_thread().ident:
            signal.pthread_kill(thread_id, _SIGNAL)
        else:
            _raise_in(thread_id, JobInterrupted)
        # Then its processes, so that a wait for them (C retries it on EINTR) ends with them. After the signal: the
        # process table is read file by file, and each read gives the GIL to a job spinning in Python for the switch
        # interval (5 ms), so that a scan first held a busy loop's interrupt for seconds (Python 3.11 has no line
        # events to stop it meanwhile). The caller holds the job running (Job.interrupt), so the mark is this job's.
        job_processes.end_started_since(self._began)

    @contextlib.contextmanager
    def policed(self, job: Stoppable) -> Iterator[None]:
        """Around one job on its thread: interrupts reach it, its signal changes do not outlive it."""
        main = threading.current_thread() is threading.main_thread()
        if main:
            self._claim_tool()
        self._current, self._thread, self._raised = job, threading.get_ident(), False
        self._began = job_processes.mark()
        try:
            yield
        finally:
            with self._policing:
                self._current = None
                self._police_lines(False)
            _raise_in(self._thread, None)  # withdraw one not delivered yet
            if main:
                SIGNALS.restore()

    def on_signal(self, signum: int, frame: FrameType | None) -> None:
        """Raise once wherever the job is; after that only in agent code that caught it and went on. A second raise
        while the first unwinds would land in the bridge's own clean-up (stdout, the operator guard) and cut it short."""
        job = self._current
        if job is None or not job.stopping() or threading.get_ident() != self._thread:
            return  # it arrived between jobs: nothing to stop
        if self._shielded:
            return  # inside Blender's render: asked again at each repeat, raised once it is out
        if self._raised and (frame is None or installed(frame.f_code.co_filename)):
            return
        self._raised = True
        raise JobInterrupted

    @contextlib.contextmanager
    def shielded(self) -> Iterator[None]:
        """While inside, an interrupt raises nowhere: Blender's render calls back into Python (Cycles' engine is
        Python code), and a JobInterrupted raised there is swallowed by Blender and left Cycles broken, so that a
        later render crashed the process (bpy 5.3, in place). The interrupt stays asked; it is raised after, at the
        next line of agent code or the bridge's next `checkpoint`, and the job's answer says it was stopped."""
        self._shielded += 1
        try:
            yield
        finally:
            self._shielded -= 1

    def held(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """`fn(...)` with a stop asked meanwhile held until it returns (`shielded`), then raised (`checkpoint`),
        where its caller called it: Python 3.11 has no line events to raise it at agent code's next line."""
        with self.shielded():
            result = fn(*args, **kwargs)
        self.checkpoint()
        return result

    def stopping(self) -> bool:
        """Whether the job running on this thread is being stopped (asked inside `shielded`, where nothing raises)."""
        job = self._current
        return job is not None and job.stopping() and threading.get_ident() == self._thread

    def checkpoint(self) -> None:
        """Raise JobInterrupted if the running job is being stopped: where the bridge's own work over Blender's
        render (a frame range, a still) leaves `shielded`, the one place a stop asked meanwhile is raised."""
        if self.stopping():
            raise JobInterrupted

    def _on_line(self, code: CodeType, line: int, disable: object = getattr(_MONITORING, "DISABLE", None)) -> object:
        if installed(code.co_filename):
            return disable
        job = self._current
        if job is not None and job.stopping() and threading.get_ident() == self._thread and not self._shielded:
            raise JobInterrupted
        return None

    def _police_lines(self, on: bool) -> None:
        """Line events on or off; a tool id agent code freed meanwhile leaves this job to the signal alone."""
        if self._tool_id is not None:
            assert _MONITORING is not None
            try:
                _MONITORING.set_events(self._tool_id, _MONITORING.events.LINE if on else 0)
            except ValueError:
                return  # not ours any more: claimed again before the next job
            # Lines switched off with DISABLE are watched again next time: after a job whose lines were watched
            # only, since a restart makes every function re-check itself at its next call (tens of µs a job).
            if on:
                self._lines_on = True
            elif self._lines_on:
                self._lines_on = False
                _MONITORING.restart_events()


def _raise_in(thread_id: int, exception: type[BaseException] | None) -> None:
    ctypes.pythonapi.PyThreadState_SetAsyncExc(
        ctypes.c_ulong(thread_id), ctypes.py_object(exception) if exception else None
    )
