"""Blender's console, kept in a file that rotates and that only its owner can read.

`serve` runs Blender for as long as the user likes, and anything on the machine can make Blender
print (a refused connection, a failing script): written straight to one file, that grew without
bound. So the child's output comes through a pipe and is appended here, a line at a time, into a
file of at most MAX_BYTES with BACKUPS older ones beside it, as the bridge's own log does. The
files are 0600 (agents' tracebacks and object names pass through), a folder made here 0700.
The stdio server's `--log-file` is kept the same way (`LogFileHandler`).

The file is made in its folder held open (own_folders.py), never through a link: root with another user's HOME
(`sudo -E hermes-blender serve`) appended to, and chmodded, whatever a link that user planted named. A log that
cannot be kept so is not kept: `refusal` says why, and the pipe is still read to its end (Blender would block on a
full pipe), its last lines kept in memory for `tail`.
"""

from __future__ import annotations

import collections
import contextlib
import errno
import logging
import os
import stat
import threading
from pathlib import Path
from typing import BinaryIO

from .errors import UnsafeFolder
from .own_folders import hold_folder

MAX_BYTES = 1024 * 1024
BACKUPS = 3
TAIL_LINES = 100
"""The last lines kept in memory, for a start-up failure's message (`HeadlessBlender.log_tail`)."""

_NEW_LOG = (
    os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
)  # O_NONBLOCK: a FIFO at the name is an error, never a wait for its reader


class ConsoleLog:
    """Copies a pipe into a rotating owner-only file on a thread of its own, until the pipe ends."""

    def __init__(
        self, path: Path, max_bytes: int = MAX_BYTES, backups: int = BACKUPS, *, private_folder: bool = False
    ) -> None:
        """`private_folder`: the folder is the toolkit's own, made 0700 also when it was not (a log of a path the
        user chose leaves its folder's mode as it is)."""
        self.path = path
        self._max_bytes = max_bytes
        self._backups = backups
        self.refusal: str | None = None
        """Why the log is not kept in a file (None: it is)."""
        self.tail: collections.deque[bytes] = collections.deque(maxlen=TAIL_LINES)
        self._folder: int | None = None
        self._out: BinaryIO | None = None
        try:
            self._folder = hold_folder(path.parent, judge_way=True, private=private_folder)
            self._out = self._open()
        except (UnsafeFolder, OSError) as exc:
            self._give_up(exc)
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
        self._close()

    def _copy(self, pipe: BinaryIO) -> None:
        with contextlib.suppress(OSError, ValueError):
            for line in pipe:
                self.tail.append(line)
                self.write(line)
                self.printed.set()

    def write(self, data: bytes) -> None:
        """Append `data`; a file that fails is given up (`refusal` says why), the copying goes on."""
        if self._out is None:
            return
        try:
            if self._out.tell() + len(data) > self._max_bytes and self._out.tell() > 0:
                self._rotate()
            assert self._out is not None
            self._out.write(data)
            self._out.flush()
        except (UnsafeFolder, OSError) as exc:
            self._give_up(exc)

    def _open(self) -> BinaryIO:
        """The log file in the held folder: this user's own regular file, owner-only, never reached through a link."""
        try:
            fd = os.open(self._name(""), _NEW_LOG, 0o600, dir_fd=self._folder)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise UnsafeFolder(f"{self.path} is a symbolic link, and a log is never written through one") from None
            if exc.errno == errno.ENXIO:  # a FIFO nobody reads
                raise UnsafeFolder(f"{self.path} is not a regular file") from None
            raise
        try:
            found = os.fstat(fd)
            if not stat.S_ISREG(found.st_mode):
                raise UnsafeFolder(f"{self.path} is not a regular file")
            if hasattr(os, "geteuid") and found.st_uid != os.geteuid():
                raise UnsafeFolder(f"{self.path} belongs to uid {found.st_uid}, not to this user (uid {os.geteuid()})")
            if hasattr(os, "fchmod"):
                os.fchmod(fd, 0o600)  # one left by an older version, or made under another umask
        except BaseException:
            os.close(fd)
            raise
        return os.fdopen(fd, "ab")

    def _rotate(self) -> None:
        assert self._out is not None
        self._out.close()
        self._out = None
        where = {"src_dir_fd": self._folder, "dst_dir_fd": self._folder}
        for index in range(self._backups - 1, 0, -1):
            with contextlib.suppress(FileNotFoundError):
                os.replace(self._name(f".{index}"), self._name(f".{index + 1}"), **where)
        if self._backups:
            os.replace(self._name(""), self._name(".1"), **where)
        else:
            os.unlink(self._name(""), dir_fd=self._folder)
        self._out = self._open()

    def _name(self, suffix: str) -> str:
        """The log's name (with `suffix`) in the held folder; its whole path where no folder is held (Windows)."""
        name = self.path.name + suffix
        return name if self._folder is not None else str(self.path.with_name(name))

    def _give_up(self, exc: UnsafeFolder | OSError) -> None:
        reason = _said(exc) if isinstance(exc, OSError) else str(exc)
        self.refusal = f"the log is not kept in {self.path}: {reason}"
        self._close()

    def _close(self) -> None:
        if self._out is not None:
            with contextlib.suppress(OSError):
                self._out.close()
            self._out = None
        if self._folder is not None:
            os.close(self._folder)
            self._folder = None


def _said(exc: OSError) -> str:
    """An OSError in words, naming the file."""
    where = f"{exc.filename}: " if exc.filename else ""
    return f"{where}{exc.strerror}" if exc.strerror else str(exc)


class LogFileHandler(logging.Handler):
    """A logger's records in the same rotating owner-only file (the stdio server's `--log-file`)."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self._file = ConsoleLog(path)

    @property
    def refusal(self) -> str | None:
        """Why the records are not kept in the file (None: they are)."""
        return self._file.refusal

    def emit(self, record: logging.LogRecord) -> None:
        self._file.write((self.format(record) + "\n").encode("utf-8", errors="replace"))

    def close(self) -> None:
        self._file.close()
        super().close()
