"""Blender's console, kept in a file that rotates and that only its owner can read.

`serve` runs Blender for as long as the user likes, and anything on the machine can make Blender
print (a refused connection, a failing script): written straight to one file, that grew without
bound. So the child's output comes through a pipe and is appended here, a line at a time, into a
file of at most MAX_BYTES with BACKUPS older ones beside it, as the bridge's own log does. The
files are 0600 (agents' tracebacks and object names pass through), a folder made here 0700.
The stdio server's `--log-file` is kept the same way (`LogFileHandler`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from pathlib import Path
from typing import BinaryIO

MAX_BYTES = 1024 * 1024
BACKUPS = 3


class ConsoleLog:
    """Copies a pipe into a rotating owner-only file on a thread of its own, until the pipe ends."""

    def __init__(self, path: Path, max_bytes: int = MAX_BYTES, backups: int = BACKUPS) -> None:
        self.path = path
        self._max_bytes = max_bytes
        self._backups = backups
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._out = self._open()
        self._thread: threading.Thread | None = None
        self.printed = threading.Event()
        """Set at each line the child prints (it says so when it has published its endpoint): a waiter wakes then."""

    def follow(self, pipe: BinaryIO) -> None:
        self._thread = threading.Thread(target=self._copy, args=(pipe,), name="hermes-console-log", daemon=True)
        self._thread.start()

    def close(self, timeout: float = 5.0) -> None:
        """Wait for the pipe's end (the child has exited), then close the file."""
        if self._thread is not None:
            self._thread.join(timeout)
        self._out.close()

    def _copy(self, pipe: BinaryIO) -> None:
        with contextlib.suppress(OSError, ValueError):
            for line in pipe:
                self.write(line)
                self.printed.set()

    def write(self, data: bytes) -> None:
        if self._out.tell() + len(data) > self._max_bytes and self._out.tell() > 0:
            self._rotate()
        self._out.write(data)
        self._out.flush()

    def _open(self) -> BinaryIO:
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        if hasattr(os, "fchmod"):
            os.fchmod(fd, 0o600)  # one left by an older version, or made under another umask
        return os.fdopen(fd, "ab")

    def _rotate(self) -> None:
        self._out.close()
        for index in range(self._backups - 1, 0, -1):
            older = self.path.with_name(f"{self.path.name}.{index}")
            if older.exists():
                os.replace(older, self.path.with_name(f"{self.path.name}.{index + 1}"))
        if self._backups:
            os.replace(self.path, self.path.with_name(f"{self.path.name}.1"))
        else:
            self.path.unlink()
        self._out = self._open()


class LogFileHandler(logging.Handler):
    """A logger's records in the same rotating owner-only file (the stdio server's `--log-file`)."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self._file = ConsoleLog(path)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self._file.write((self.format(record) + "\n").encode("utf-8", errors="replace"))
        except OSError:
            self.handleError(record)

    def close(self) -> None:
        self._file.close()
        super().close()
