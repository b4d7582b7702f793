"""The processes a job started, so that its deadline ends them too.

C's `system()` waits for its child again when a signal interrupts the wait, so `os.system("sleep 150")` held a job
(and every client behind it) past its deadline until the child exited. A job's processes are told apart from
Blender's own and earlier jobs' by a mark taken as it begins: a clock read and, on Linux, the children the job's
thread already has (one small file, about 6 µs), so a process an earlier job left running is spared even when it
began within the same clock tick. Past the deadline the descendants of this process that began since the mark, in
no subtree the mark holds, are killed. The process table is read only then: Linux reads /proc; macOS asks `ps`
(start times to the second, and no children in the mark: a process started in the second before the job counts
as its own); Windows has no signal to end a wait with, so there a job's child is left to end by itself.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


class Mark:
    """Where a job began: when, and which children its thread already had."""

    __slots__ = ("at", "children")

    def __init__(self, at: float, children: frozenset[int]) -> None:
        self.at = at
        self.children = children


NO_JOB = Mark(float("inf"), frozenset())


def mark() -> Mark:
    """Taken on the job's thread as the job begins."""
    return Mark(_now(), _thread_children())


def end_started_since(since: Mark) -> list[int]:
    """Kill (SIGKILL) every descendant of this process started since the mark; the pids killed."""
    if not hasattr(signal, "SIGKILL") or since.at == NO_JOB.at:
        return []
    ended = []
    for pid in _descendants_started_since(since):
        try:
            os.kill(pid, signal.SIGKILL)
            ended.append(pid)
        except OSError:  # it ended meanwhile
            pass
    return ended


def _now() -> float:
    """Now, on the clock process start times are measured against (seconds since boot on Linux)."""
    if sys.platform.startswith("linux"):
        return time.clock_gettime(time.CLOCK_BOOTTIME)
    return time.time()


def _thread_children() -> frozenset[int]:
    """Read with os calls: through pathlib and a text file it cost about 25 µs of every job, 6 µs so."""
    if not sys.platform.startswith("linux"):
        return frozenset()
    try:
        fd = os.open(f"/proc/self/task/{threading.get_native_id()}/children", os.O_RDONLY)
    except OSError:  # a kernel without CONFIG_PROC_CHILDREN: the start times alone decide
        return frozenset()
    try:
        listing = b""
        while chunk := os.read(fd, 65536):
            listing += chunk
    except OSError:
        return frozenset()
    finally:
        os.close(fd)
    return frozenset(int(pid) for pid in listing.split())


def _descendants_started_since(since: Mark) -> list[int]:
    table = dict(_linux_table() if sys.platform.startswith("linux") else _ps_table())
    children: dict[int, list[int]] = {}
    for pid, (parent, _) in table.items():
        children.setdefault(parent, []).append(pid)
    found, pending = [], [pid for pid in children.get(os.getpid(), []) if pid not in since.children]
    while pending:
        pid = pending.pop()
        pending += children.get(pid, [])
        if table[pid][1] >= since.at:
            found.append(pid)
    return found


def _linux_table(proc: Path = Path("/proc")) -> Iterator[tuple[int, tuple[int, float]]]:
    """pid -> (parent pid, start in seconds since boot), from /proc/<pid>/stat (the name in it may hold spaces)."""
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # gone meanwhile
        # After the name: state, ppid, ... starttime is field 22 of the whole line, the 20th after the name.
        # The start is rounded down to a tick: a child started within the job's first tick still counts.
        yield int(entry.name), (int(fields[1]), (int(fields[19]) + 1) / _TICKS)


def _ps_table() -> Iterator[tuple[int, tuple[int, float]]]:
    """pid -> (parent pid, start as a time.time()), from `ps` (macOS and other POSIX): elapsed time to a second."""
    try:
        listing = subprocess.run(
            ["ps", "-A", "-o", "pid=,ppid=,etime="], capture_output=True, text=True, timeout=10
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return
    now = time.time()
    for line in listing.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0].isdigit() and parts[1].isdigit():
            yield int(parts[0]), (int(parts[1]), now - _elapsed(parts[2]) + 1.0)


def _elapsed(etime: str) -> float:
    """ps's [[dd-]hh:]mm:ss as seconds."""
    days, _, rest = etime.rpartition("-")
    seconds = 0
    for part in rest.split(":"):
        seconds = seconds * 60 + int(part)
    return seconds + int(days or 0) * 86400
