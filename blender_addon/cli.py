"""`blender -b [file.blend] --command hermes_bridge [--port N]`: serve until interrupted.

In background mode (and Blender-as-a-module) timers never fire and nothing else needs the main
thread, so the bridge serves every connection from it. The headless runner calls `run` directly
with the same arguments.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import sys
import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from types import FrameType

from . import notes, prefs, service
from .agent_mode import NAMES, AgentMode
from .errors import BridgeError
from .interrupt import SIGNALS
from .runtime import RUNTIME

COMMAND = "hermes_bridge"


def run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog=f"blender -b [file.blend] --command {COMMAND}",
        description="Serve this Blender to local agents over MCP (loopback only) until interrupted.",
    )
    parser.add_argument("--port", type=int, default=None, help="MCP port on 127.0.0.1 (default: preference, 0 = any)")
    parser.add_argument(
        "--lab-port",
        type=int,
        default=None,
        help="start the Blender Lab listener on this port (0 = any; default: the preference, off unless turned on)",
    )
    parser.add_argument("--no-lab", action="store_true", help="do not start the Blender Lab listener")
    parser.add_argument("--no-code-execution", action="store_true", help="refuse to run agent-written Python")
    parser.add_argument(
        "--mode",
        choices=NAMES,
        default=None,
        help="what agents may do: read-only, ask (a change waits for the user of a client that can ask; with none, "
        "it is refused: nobody is at this Blender's window) or full (default: the preference, full unless changed)",
    )
    parser.add_argument(
        "--runtime-file", type=Path, default=None, help="where to publish the endpoint (default: the path Hermes reads)"
    )
    parser.add_argument(
        "--checkpoint-folder",
        type=Path,
        default=None,
        help="where checkpoints are kept (default: hermes_bridge/checkpoints in Blender's config folder)",
    )
    parser.add_argument(
        "--stop-on-stdin-eof", action="store_true", help="also stop when standard input closes (for supervisors)"
    )
    args = parser.parse_args(argv)

    defaults = prefs.config()
    lab_port = None if args.no_lab else defaults.lab_port if args.lab_port is None else args.lab_port
    config = replace(
        defaults,
        port=defaults.port if args.port is None else args.port,
        lab_port=lab_port,
        runtime_file=args.runtime_file,
        checkpoint_folder=args.checkpoint_folder,
        allow_code=defaults.allow_code and not args.no_code_execution,
        agent_mode=defaults.agent_mode if args.mode is None else AgentMode.parse(args.mode),
        mode=service.Mode.BACKGROUND,
    )

    def stop_now() -> None:
        """Stop serving and stop a running job too: a runaway script must not keep Blender from exiting.

        A job held by Blender's own C code cannot be stopped: then, after STOP_GRACE, the runtime file is
        withdrawn and the process ends anyway, so a stop never takes longer than that or leaves the file.
        """
        deadman.stop_asked()
        RUNTIME.request_stop()

    deadman = Deadman(_exit_without_the_job)
    restore = _on_signals(stop_now)  # before the bridge publishes: a signal from then on stops it cleanly
    try:
        bridge = RUNTIME.start(config)
        assert bridge is not None  # not inside a job: started now
    except BaseException as exc:
        restore()
        deadman.settle()  # a stop asked during the start must not end the process while it reports the failure
        if not isinstance(exc, BridgeError):
            raise
        print(f"{COMMAND}: error: {exc}", file=sys.stderr, flush=True)
        return 2
    try:
        if args.stop_on_stdin_eof:
            threading.Thread(target=_wait_for_eof, args=(stop_now,), name="hermes-stdin", daemon=True).start()
        print(f"{COMMAND}: serving MCP at {bridge.endpoint} (runtime file {bridge.runtime_file})", flush=True)
        if bridge.lab_address is not None:
            print(f"{COMMAND}: Blender Lab listener on {bridge.lab_address}", flush=True)
        elif bridge.lab_error is not None:
            print(f"{COMMAND}: warning: {bridge.lab_error}", flush=True)
        if note := notes.takeover(bridge.publication):
            print(f"{COMMAND}: {note}", flush=True)
        RUNTIME.serve()
    finally:
        restore()
        deadman.settle()  # serving is over, so no job is left to force; the stop's own deadline bounds the rest
        RUNTIME.stop()
        print(f"{COMMAND}: stopped", flush=True)
    if RUNTIME.last_error is not None:  # a restart asked by agent code failed: nothing serves
        print(f"{COMMAND}: error: {RUNTIME.last_error}", file=sys.stderr, flush=True)
        return 2
    return 0


STOP_GRACE = 1.0
"""Seconds a stop waits for the running job to end before the process ends without it."""


class Deadman:
    """Ends the process when a stop was asked and serving has not ended STOP_GRACE later (a job held in C).

    A stop comes from a signal's Python handler on the main thread and from the wake-up watcher on another
    thread, both for one signal, and from stdin's end: often at once. Starting this thread from the stop raced
    (two starts of one Thread ran its bootstrap twice, a KeyError in threading's bookkeeping, and nothing forced
    the exit). So it starts here, once, and waits for a lock a stop releases: releasing takes no other lock and
    exactly one release succeeds, from any thread or a signal handler.
    """

    def __init__(self, exit_now: Callable[[], None]) -> None:
        self._asked = threading.Lock()
        self._asked.acquire()
        self._served = threading.Event()
        self._exit_now = exit_now
        self._thread = threading.Thread(target=self._watch, name="hermes-stop", daemon=True)
        self._thread.start()

    def stop_asked(self) -> None:
        self._release()

    def settle(self) -> None:
        """Serving is over: nothing is left to force, and the thread ends before this returns (a thread of ours
        alive at exit hung bpy 4.5's teardown in 4 exits of 5)."""
        self._served.set()
        self._release()
        self._thread.join()

    def _release(self) -> None:
        with contextlib.suppress(RuntimeError):  # released already: the second stop, or the end after a stop
            self._asked.release()

    def _watch(self) -> None:
        self._asked.acquire()
        if not self._served.wait(STOP_GRACE):
            self._exit_now()


def _exit_without_the_job() -> None:
    bridge = RUNTIME.bridge
    if bridge is not None:
        bridge.withdraw()
    print(f"{COMMAND}: stopped without waiting for a job that Blender's own code holds", flush=True)
    os._exit(0)


def _wait_for_eof(stop: Callable[[], None]) -> None:
    try:
        while os.read(sys.stdin.fileno(), 4096):  # raw: a daemon thread inside sys.stdin's buffer aborts exit
            pass
    except (OSError, ValueError):
        pass
    stop()


def _on_signals(stop: Callable[[], None]) -> Callable[[], None]:
    """Route SIGINT/SIGTERM (SIGBREAK on Windows) to `stop`; returns a function restoring the old handlers.

    A Python handler runs only when the main thread is back in Python, which a render in Blender's C code
    delays to its end. So the signal also reaches a thread of ours at once, through the wake-up descriptor
    its C-level handler writes to, and `stop` (safe from any thread) starts from there.
    """
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    names = ("SIGINT", "SIGTERM", "SIGBREAK")
    wanted = [getattr(signal, name) for name in names if hasattr(signal, name)]

    def handler(signum: int, frame: FrameType | None) -> None:
        stop()

    previous = {signum: SIGNALS.guard(signum, handler) for signum in wanted}  # agent code cannot replace them
    unwatch = _watch_wakeups(frozenset(wanted), stop)

    def restore() -> None:
        unwatch()
        for signum, old in previous.items():
            SIGNALS.release(signum, old)

    return restore


def _watch_wakeups(signums: frozenset[int], stop: Callable[[], None]) -> Callable[[], None]:
    """A thread that hears `signums` while the main thread is held in C; returns how to stop it (joined)."""
    reader, writer = socket.socketpair()
    writer.setblocking(False)
    try:
        previous = SIGNALS.guard_wakeup(writer.fileno())
    except (ValueError, OSError):  # not the main thread of the main interpreter, or a platform without it
        reader.close()
        writer.close()
        return lambda: None

    def watch() -> None:
        with contextlib.suppress(OSError):
            while numbers := reader.recv(64):
                if signums.intersection(numbers):
                    stop()

    watcher = threading.Thread(target=watch, name="hermes-signals", daemon=True)
    watcher.start()

    def unwatch() -> None:
        SIGNALS.release_wakeup(previous)
        with contextlib.suppress(OSError):
            reader.shutdown(socket.SHUT_RDWR)
        watcher.join()  # a thread still alive at exit hangs bpy 4.5's own teardown
        reader.close()
        writer.close()

    return unwatch
