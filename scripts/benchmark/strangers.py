"""`--strangers-only`: honest calls beside another process's attacks without a token (scripts/stranger.py)."""

from __future__ import annotations

import http.client
import itertools
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from blender_addon.net.loopback import BACKLOG

from . import ROOT
from .measure import SUMMARY, SUMMARY_HEADERS, InlineFloor, http_echo, percentiles

STRANGER = ROOT / "scripts" / "stranger.py"


STRANGER_MODES = ("idle", "half-header", "slowloris", "connect-flood")


HONEST_PAUSE = 0.02
"""Seconds between two honest calls, as a model leaves them: long enough that its kept connection is idle."""


class Relay:
    """`hermes-blender mcp` spoken to in raw JSON lines, as a client does: one call, one answer."""

    def __init__(self, runtime_file: Path) -> None:
        command = [sys.executable, "-m", "hermes_blender.cli", "mcp", "--runtime-file", str(runtime_file)]
        self._process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self._next = itertools.count(2)
        self._send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": _INITIALIZE})
        self._answer(1)
        self._send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def call(self) -> bool:
        """One get_objects_summary; whether it came back with the scene."""
        n = next(self._next)
        self._send({"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": {"name": "get_objects_summary"}})
        return not self._answer(n)["result"].get("isError")

    def close(self) -> None:
        assert self._process.stdin is not None
        self._process.stdin.close()
        self._process.wait(timeout=30)

    def _send(self, message: dict[str, Any]) -> None:
        assert self._process.stdin is not None
        self._process.stdin.write(json.dumps(message) + "\n")
        self._process.stdin.flush()

    def _answer(self, request_id: int) -> dict[str, Any]:
        assert self._process.stdout is not None
        while (message := json.loads(self._process.stdout.readline())).get("id") != request_id:
            pass  # a notification (a changed tool list) before the answer
        return message


_INITIALIZE = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}


def new_connection_call(port: int, headers: dict[str, str]) -> bool:
    """One get_objects_summary on a connection of its own, as a client without keep-alive makes it."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        conn.request("POST", "/mcp", body=SUMMARY, headers={**SUMMARY_HEADERS, **headers})
        answer = conn.getresponse()
        return answer.status == 200 and b'"isError":true' not in answer.read().replace(b" ", b"")
    except (OSError, http.client.HTTPException):
        return False
    finally:
        conn.close()


def honest_calls(call: Callable[[], bool], n: int, warmup: int = 10) -> dict[str, float]:
    """p50/p99 of `n` calls with a pause between each (after `warmup` untimed ones), the slowest (a connection that
    waited for the kernel's SYN retransmit takes a second or more), and how many were lost."""
    for _ in range(warmup):
        call()
    samples, lost = [], 0
    for _ in range(n):
        started = time.perf_counter()
        if call():
            samples.append(time.perf_counter() - started)
        else:
            lost += 1
        time.sleep(HONEST_PAUSE)
    return {**percentiles(samples), "max": max(samples, default=0.0) * 1000, "lost": lost}


def stranger_command(user: str | None, folder: Path) -> list[str]:
    """How the stranger is started: by this user with this Python, or by another OS user (a real account, given
    by name) with the system's Python, from a copy of the script that user may read (the checkout may be closed)."""
    if user is None:
        return [sys.executable, str(STRANGER)]
    import pwd  # POSIX only: the bench's other tables run elsewhere too

    entry = pwd.getpwnam(user)
    folder.chmod(0o755)
    copy = folder / STRANGER.name
    shutil.copyfile(STRANGER, copy)
    copy.chmod(0o644)
    as_user = ["setpriv", f"--reuid={entry.pw_uid}", f"--regid={entry.pw_gid}", "--clear-groups", "--"]
    return [*as_user, "/usr/bin/python3", str(copy)]


def under_strangers(
    runtime_file: Path, port: int, headers: dict[str, str], n: int, user: str | None = None
) -> list[dict[str, Any]]:
    """Each attack a second process can make without a token (scripts/stranger.py: 300 idle, half-header or
    slowloris connections, or a connect flood), the honest calls through the relay and on a new connection each
    timed beside a quiet phase run just before, in the same run. Under the connect flood the same calls to the
    floor (one thread accepting and answering HTTP inline, the bridge's listen queue) show what the queue itself
    costs: every connection the flood put in it before the honest one is accepted first. `user`: the stranger is
    that OS user (as root: `useradd -M NAME` makes one), as it is on a shared machine."""
    floor = InlineFloor(http_echo, backlog=BACKLOG)
    rows = []
    relay = Relay(runtime_file)
    scratch = Path(tempfile.mkdtemp(prefix="bench-stranger-"))
    stranger = stranger_command(user, scratch)
    try:
        for mode in STRANGER_MODES:
            paths: list[tuple[str, int, Callable[[], bool]]] = [
                ("relay", port, relay.call),
                ("new connection", port, lambda: new_connection_call(port, headers)),
            ]
            if mode == "connect-flood":
                paths.append(("floor, new connection", floor.port, lambda: new_connection_call(floor.port, {})))
            for path, target, call in paths:
                quiet = honest_calls(call, n)
                load = subprocess.Popen([*stranger, str(target), mode, "300"], stdout=subprocess.PIPE, text=True)
                try:
                    assert load.stdout is not None and load.stdout.readline().strip() == "ready"
                    loud = honest_calls(call, n)
                finally:
                    load.kill()
                    load.communicate()
                rows.append(
                    {
                        "attack": mode,
                        "path": path,
                        "quiet": quiet,
                        "loud": loud,
                        "ratio_p99": loud["p99"] / quiet["p99"],
                    }
                )
    finally:
        relay.close()
        floor.close()
        shutil.rmtree(scratch)
    return rows


def stranger_lines(rows: list[dict[str, Any]]) -> list[str]:
    lines = [
        f"{'honest get_objects_summary beside another process (no token)':<50} {'quiet p50':>9} {'p99':>7}"
        f" {'loud p50':>9} {'p99':>7} {'max':>7} {'p99 x':>6} {'lost':>5}"
    ]
    for r in rows:
        q, loud = r["quiet"], r["loud"]
        lines.append(
            f"{r['attack'] + ', ' + r['path']:<50} {q['p50']:>9.2f} {q['p99']:>7.2f}"
            f" {loud['p50']:>9.2f} {loud['p99']:>7.2f} {loud['max']:>7.1f} {r['ratio_p99']:>6.2f} {loud['lost']:>5}"
        )
    return lines
