"""Which other users' listening sockets a dial to the bridge's address could reach (Linux's socket tables, written
here as the kernel prints them): a stranger there means nothing is trusted; one that cannot catch the dial must
not cut the user off."""

from __future__ import annotations

import ipaddress
import os
import sys
from pathlib import Path

import pytest

from hermes_blender.contract.host import _foreign_listeners

PORT = 43210
STRANGER = os.geteuid() + 1
HEAD = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"


def _hex(address: str) -> str:
    """An address as /proc/net/tcp{,6} print it: 32-bit words in the host's byte order."""
    raw = ipaddress.ip_address(address).packed
    words = [raw[at : at + 4] for at in range(0, len(raw), 4)]
    return "".join((word[::-1] if sys.byteorder == "little" else word).hex().upper() for word in words)


def _tables(folder: Path, listeners: list[tuple[str, int]]) -> Path:
    rows: dict[str, list[str]] = {"tcp": [], "tcp6": []}
    for number, (address, uid) in enumerate(listeners):
        table = "tcp6" if ":" in address else "tcp"
        remote = "0" * len(_hex(address))
        rows[table].append(f"{number:4}: {_hex(address)}:{PORT:04X} {remote}:0000 0A 0:0 00:0 0 {uid} 0 1 1\n")
    for table, lines in rows.items():
        (folder / table).write_text(HEAD + "".join(lines))
    return folder


@pytest.mark.parametrize(
    ("dialled", "stranger_on", "caught"),
    [
        ("127.0.0.1", "127.0.0.1", True),
        ("127.0.0.1", "0.0.0.0", True),
        ("127.0.0.1", "::ffff:127.0.0.1", True),
        ("127.0.0.1", "::", False),  # IPv6-only beside a listening 127.0.0.1: it catches nothing of ours
        ("::1", "0.0.0.0", False),
        ("::1", "::", True),
        ("localhost", "::", True),  # localhost may resolve to ::1
        ("localhost", "0.0.0.0", True),
        ("127.0.0.1", "10.0.0.1", False),
    ],
)
def test_a_stranger_counts_only_where_the_dial_could_reach_it(
    tmp_path: Path, dialled: str, stranger_on: str, caught: bool
) -> None:
    tables = _tables(tmp_path, [(stranger_on, STRANGER), ("127.0.0.1", os.geteuid())])
    assert _foreign_listeners(dialled, PORT, tables) == ([STRANGER] if caught else [])
