"""Policy: does this host satisfy a declaration's `requires`? Pure; host I/O is passed in."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from .declaration import AppBlock, ServerDeclaration
from .locate import AppCopy

AvailabilityState = Literal["no_requirements", "unsupported_os", "missing_app", "version_too_old", "available"]
OFFERABLE = ("no_requirements", "available")
_COMPONENT = re.compile(r"[0-9]{1,9}")


@dataclass(frozen=True)
class Availability:
    state: AvailabilityState
    version: str | None = None
    path: Path | None = None
    min_version: str | None = None

    @property
    def offerable(self) -> bool:
        return self.state in OFFERABLE


def version_at_least(found: str | None, minimum: str) -> bool:
    """Dotted numbers of 1-9 ASCII digits, compared zero-padded; anything else fails closed."""
    if found is None:
        return False
    have, need = found.strip().split("."), minimum.split(".")
    if not all(_COMPONENT.fullmatch(part) for part in have + need):
        return False
    width = max(len(have), len(need))
    pad = lambda parts: [int(part) for part in parts] + [0] * (width - len(parts))  # noqa: E731
    return pad(have) >= pad(need)


def availability(
    declaration: ServerDeclaration, host_os: str, locate: Callable[[AppBlock], Sequence[AppCopy]]
) -> Availability:
    """The declaration's availability here; `locate` is only called when something must be checked."""
    requires = declaration.requires
    if not requires.app:
        return Availability("no_requirements")
    block = declaration.app_for(host_os)
    if block is None:
        return Availability("unsupported_os", min_version=requires.min_version)
    copies = list(locate(block))
    if not copies:
        return Availability("missing_app", min_version=requires.min_version)
    minimum = requires.min_version
    if minimum is None or (block.version_kind == "none" and block.os == "linux"):
        first = copies[0]
        return Availability("available", first.version, first.path, minimum)
    for copy in copies:
        if version_at_least(copy.version, minimum):
            return Availability("available", copy.version, copy.path, minimum)
    readable = [copy for copy in copies if copy.version is not None and version_at_least(copy.version, "0")]
    best = max(readable, key=lambda c: [int(p) for p in c.version.split(".")], default=copies[0])  # type: ignore[union-attr]
    return Availability("version_too_old", best.version, best.path, minimum)
