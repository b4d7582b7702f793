"""Host facts (I/O): the operating system, environment, files, processes.

Everything the contract needs to know about this machine comes through `HostFacts`, so
policy code stays pure and tests can state a host instead of needing one.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import psutil

_POSIX_VAR = re.compile(r"\$(\w+)|\$\{(\w+)\}")
_WINDOWS_VAR = re.compile(r"%([^%]+)%")


def _pid_alive(pid: int) -> bool:
    return psutil.pid_exists(pid)


@dataclass(frozen=True)
class HostFacts:
    os: str = sys.platform if sys.platform in ("win32", "darwin") else "linux"
    """Hermes's OS keys: win32, darwin or linux."""
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    pid_alive: Callable[[int], bool] = _pid_alive

    def home(self) -> str | None:
        return self.env.get("USERPROFILE") if self.os == "win32" else self.env.get("HOME")

    def expand(self, text: str) -> str:
        """Expand like Hermes: `~` and `$VAR`/`${VAR}` everywhere, `%VAR%` on Windows; unset stays literal."""
        if self.os == "win32":
            text = _WINDOWS_VAR.sub(lambda m: self.env.get(m.group(1), m.group(0)), text)
        text = _POSIX_VAR.sub(lambda m: self.env.get(m.group(1) or m.group(2), m.group(0)), text)
        if text.startswith("~") and (home := self.home()):
            if len(text) == 1 or text[1] in "/\\":
                text = home + text[1:]
        return text

    def expand_path(self, text: str) -> Path:
        return Path(self.expand(text))
