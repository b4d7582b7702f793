"""Things a runtime file's path can hold that are not a runtime file, for both sides' readers."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

KINDS = ["fifo", "dev-zero", "huge", "deep"]
posix_only = pytest.mark.skipif(sys.platform == "win32", reason="FIFOs and /dev/zero")


def place(path: Path, kind: str) -> None:
    """A FIFO (opening it would wait for a writer), endless /dev/zero, 2 MiB, or 100 000 levels of nesting."""
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev-zero":
        path.symlink_to("/dev/zero")
    elif kind == "huge":
        path.write_bytes(b'{"pid": 1, "pad": "' + b"x" * (2 * 1024 * 1024) + b'"}')
    else:
        path.write_text("[" * 100_000 + "]" * 100_000)
