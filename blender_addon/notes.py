"""The sentences a user reads about a running bridge (the panel, the log, the command line)."""

from __future__ import annotations

from pathlib import Path

from .owner_files import runtime_file


def takeover(publication: runtime_file.Publication) -> str | None:
    """A sentence for the user when starting replaced another bridge's runtime file."""
    if publication.replaced_pid is None:
        return None
    if publication.replaced_live:
        return (
            f"Took over the runtime file from another running Blender (pid {publication.replaced_pid}); "
            "agents now connect to this one."
        )
    return f"Replaced a stale runtime file left by a process that has exited (pid {publication.replaced_pid})."


def reachability(path: Path, pid: int) -> str | None:
    """A sentence for the panel when agents do not reach this Blender (`pid`) through the runtime file at `path`;
    None when they do. Read fresh: another Blender may publish, or stop and hand the file back, at any moment."""
    named = runtime_file.named_pid(path)
    if named == pid:
        return None
    if named is None:
        return "The runtime file is gone, so agents cannot find this Blender: stop and start the bridge."
    return (
        f"Agents connect to the Blender started last (pid {named}); this one takes over when that one stops. "
        f"To reach this one now: hermes-blender call --pid {pid}"
    )
