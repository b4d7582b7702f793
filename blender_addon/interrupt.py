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

While a job runs, `signal.signal` refuses to change the signals the bridge relies on, and after
the job every such handler is put back, whatever lower-level calls the job made.
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
from types import CodeType, FrameType, TracebackType
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


_current: Stoppable | None = None
_current_thread = 0
_raised = False
"""Whether the running job has had its JobInterrupted raised by the signal handler."""
_guarded: dict[int, Handler] = {}
"""Signals whose handlers the bridge set, and those handlers: restored after every job."""
_original_signal = signal.signal
_tool_id: int | None = None
_policing = threading.Lock()
"""Orders turning line events on (any thread) against the job's end turning them off (its own thread)."""
_job_began = job_processes.NO_JOB
"""Where the running job began, to tell the processes it started (job_processes.py)."""


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


def install() -> None:
    """Main thread: the handler that turns the interrupt signal into JobInterrupted (idempotent)."""
    if threading.current_thread() is not threading.main_thread():
        return
    if _SIGNAL is not None and _SIGNAL not in _guarded:
        guard(_SIGNAL, _on_signal)
    if _tool_id is None:
        _claim_tool()


def _claim_tool() -> None:
    """Hold a `sys.monitoring` tool id with our line callback; agent code may have freed it, taken it or replaced
    the callback since the last job. With no id free, jobs are policed by the signal alone (said once)."""
    global _tool_id
    if _MONITORING is None:
        return
    if _tool_id is not None and _MONITORING.get_tool(_tool_id) == _TOOL_NAME:
        _MONITORING.register_callback(_tool_id, _MONITORING.events.LINE, _on_line)
        return
    lost, _tool_id = _tool_id, None
    for candidate in (4, 3):  # the ids no standard tool (debugger, coverage, profiler, optimizer) takes
        if _MONITORING.get_tool(candidate) is None:
            _MONITORING.use_tool_id(candidate, _TOOL_NAME)
            _MONITORING.register_callback(candidate, _MONITORING.events.LINE, _on_line)
            _tool_id = candidate
            break
    if lost is not None:
        if _tool_id is None:
            logger.warning(
                "agent code took the monitoring tool id the bridge polices jobs with, and none is free: "
                "deadlines now stop jobs by signal alone, and code that catches every exception can outlast them"
            )
        else:
            logger.warning("agent code freed the monitoring tool id the bridge polices jobs with; claimed it again")


def guard(signum: int, handler: Handler) -> Handler:
    """Set a handler the bridge relies on (main thread); jobs cannot change it. Returns the previous one."""
    previous = _original_signal(signum, handler)
    _guarded[signum] = handler
    return previous


def release(signum: int, previous: Handler) -> None:
    """Give a guarded signal back (main thread)."""
    _guarded.pop(signum, None)
    _original_signal(signum, previous)


def deliver(thread_id: int) -> None:
    """Interrupt the job running on `thread_id` (any thread may call this, as often as it likes)."""
    with _policing:
        if _current is None:
            return  # its job has left `policed` (it is ending): turning the line events on now would leave them on
        _police_lines(True)
    job_processes.end_started_since(_job_began)  # a wait for them (C retries it on EINTR) ends with them
    if _SIGNAL is not None and _SIGNAL in _guarded and thread_id == threading.main_thread().ident:
        signal.pthread_kill(thread_id, _SIGNAL)
    else:
        _raise_in(thread_id, JobInterrupted)


class policed:
    """Around one job on its thread: interrupts reach it, its signal changes do not outlive it."""

    def __init__(self, job: Stoppable) -> None:
        self._job = job

    def __enter__(self) -> None:
        global _current, _current_thread, _raised, _job_began
        if threading.current_thread() is threading.main_thread():
            _claim_tool()
        _current, _current_thread, _raised = self._job, threading.get_ident(), False
        _job_began = job_processes.mark()
        signal.signal = _refusing_signal

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        global _current
        with _policing:
            _current = None
            _police_lines(False)
        _raise_in(_current_thread, None)  # withdraw one not delivered yet
        signal.signal = _original_signal
        if threading.current_thread() is threading.main_thread():
            for signum, handler in _guarded.items():
                if signal.getsignal(signum) is not handler:
                    _original_signal(signum, handler)


@atexit.register
def _free_tool() -> None:
    """At exit: no callback of ours may be called while the interpreter tears modules down."""
    global _tool_id
    if _tool_id is not None and _MONITORING is not None and _MONITORING.get_tool(_tool_id) == _TOOL_NAME:
        _MONITORING.set_events(_tool_id, 0)
        _MONITORING.register_callback(_tool_id, _MONITORING.events.LINE, None)
        _MONITORING.free_tool_id(_tool_id)
        _tool_id = None


def _refusing_signal(signum: int, handler: Handler) -> Handler:
    if signum in _guarded:
        raise ValueError(
            f"signal {signum} is used by the Blender bridge (to stop jobs and Blender on request); "
            "agent code cannot change its handler"
        )
    return _original_signal(signum, handler)


def _on_signal(signum: int, frame: FrameType | None) -> None:
    """Raise once wherever the job is; after that only in agent code that caught it and went on. A second raise
    while the first unwinds would land in the bridge's own clean-up (stdout, the operator guard) and cut it short."""
    global _raised
    job = _current
    if job is None or not job.stopping() or threading.get_ident() != _current_thread:
        return  # it arrived between jobs: nothing to stop
    if _shielded:
        return  # inside Blender's render: asked again at each repeat, raised once it is out
    if _raised and (frame is None or _installed(frame.f_code.co_filename)):
        return
    _raised = True
    raise JobInterrupted


_shielded = 0
"""How deep the running job is inside Blender's own render (`shielded`)."""


@contextlib.contextmanager
def shielded() -> Iterator[None]:
    """While inside, an interrupt raises nowhere: Blender's render calls back into Python (Cycles' engine is
    Python code), and a JobInterrupted raised there is swallowed by Blender and left Cycles broken, so that a
    later render crashed the process (bpy 5.3, in place). The interrupt stays asked; it is raised after, at the
    next line of agent code or the bridge's next `checkpoint`, and the job's answer says it was stopped."""
    global _shielded
    _shielded += 1
    try:
        yield
    finally:
        _shielded -= 1


def held(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """`fn(...)` with a stop asked meanwhile held until it returns (`shielded`), then raised (`checkpoint`), where
    its caller called it: Python 3.11 has no line events to raise it at agent code's next line."""
    with shielded():
        result = fn(*args, **kwargs)
    checkpoint()
    return result


def stopping() -> bool:
    """Whether the job running on this thread is being stopped (asked inside `shielded`, where nothing raises)."""
    job = _current
    return job is not None and job.stopping() and threading.get_ident() == _current_thread


def checkpoint() -> None:
    """Raise JobInterrupted if the running job is being stopped: where the bridge's own work over Blender's
    render (a frame range, a still) leaves `shielded`, the one place a stop asked meanwhile is raised."""
    if stopping():
        raise JobInterrupted


@functools.lru_cache(maxsize=4096)
def _installed(filename: str) -> bool:
    """Code from the bridge, the standard library or an installed package (not the job's own): never policed."""
    if filename == AGENT_CODE:
        return False
    if filename.startswith("<frozen "):
        return True
    return os.path.realpath(filename).startswith(_INSTALLED) if os.path.isabs(filename) else False


def _on_line(code: CodeType, line: int, disable: object = getattr(_MONITORING, "DISABLE", None)) -> object:
    if _installed(code.co_filename):
        return disable
    job = _current
    if job is not None and job.stopping() and threading.get_ident() == _current_thread and not _shielded:
        raise JobInterrupted
    return None


def _police_lines(on: bool) -> None:
    """Line events on or off; a tool id agent code freed meanwhile leaves this job to the signal alone."""
    if _tool_id is not None:
        assert _MONITORING is not None
        try:
            _MONITORING.set_events(_tool_id, _MONITORING.events.LINE if on else 0)
        except ValueError:
            return  # not ours any more: claimed again before the next job
        if not on:
            _MONITORING.restart_events()  # lines switched off with DISABLE are watched again next time


def _raise_in(thread_id: int, exception: type[BaseException] | None) -> None:
    ctypes.pythonapi.PyThreadState_SetAsyncExc(
        ctypes.c_ulong(thread_id), ctypes.py_object(exception) if exception else None
    )
