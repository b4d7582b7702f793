"""The full run's load rows: throughput with 1, 4 and 8 clients, and an honest client under a no-token flood made by a
second process (`bench.py --flood PORT`)."""

from __future__ import annotations

import http.client
import itertools
import json
import socket
import subprocess
import sys
import threading
import time
from typing import Any

from . import ENTRY
from .measure import SUMMARY, KeepAlive, percentiles


def throughput(port: int, headers: dict[str, str], clients: int, calls: int) -> dict[str, float]:
    errors: list[str] = []

    def worker() -> None:
        link = KeepAlive(port, headers)
        for _ in range(calls):
            try:
                link.post("/mcp", SUMMARY)
            except Exception as exc:
                errors.append(str(exc))

    threads = [threading.Thread(target=worker) for _ in range(clients)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    return {
        "clients": clients,
        "calls": clients * calls,
        "per_second": clients * calls / elapsed,
        "errors": len(errors),
    }


FLOOD_CONNECTIONS = 64


FLOOD_BLOCKS = (
    (b"X-Flood: " + b"a" * 150 + b"\r\n") * 98,
    b"X-Flood: a\r\n" * 1300,
)
"""The costliest header blocks anyone may send without a token, about 16 KiB each: one header repeated to the
line limit in long lines (100 with the request line and Host), and in as many short lines as fit (refused
once counted now; the old parser joined them in quadratic time)."""


def flood(port: int) -> None:
    """The worst no-token load a second process can make (run as `bench.py --flood PORT` until killed): 64
    connections at once, each sending a header block and reading its refusal, every fourth one opened and
    closed at once (churn); each is replaced as soon as it ends. Prints what it achieved, per second."""
    import selectors

    selector = selectors.DefaultSelector()
    requests = [b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n%s\r\n" % (port, block) for block in FLOOD_BLOCKS]
    done = {"header blocks": 0, "connections": 0}
    opened = itertools.count()

    def open_one() -> None:
        sock = socket.socket()
        sock.setblocking(False)
        sock.connect_ex(("127.0.0.1", port))
        n = next(opened)
        selector.register(sock, selectors.EVENT_WRITE, None if n % 4 == 0 else requests[n % 2])

    for _ in range(FLOOD_CONNECTIONS):
        open_one()
    started = reported = time.perf_counter()
    while True:
        for key, _ in selector.select(0.5):
            sock, request = key.fileobj, key.data
            try:
                if key.events == selectors.EVENT_WRITE and request is not None:
                    sock.sendall(request)  # non-blocking: what does not fit is the bridge's to refuse anyway
                    selector.modify(sock, selectors.EVENT_READ, request)
                    continue
                if request is not None and sock.recv(65536):
                    continue
            except OSError:
                pass
            selector.unregister(sock)
            sock.close()
            done["header blocks" if request is not None else "connections"] += 1
            open_one()
        if time.perf_counter() - reported >= 0.5:
            reported = time.perf_counter()
            print(json.dumps({kind: count / (reported - started) for kind, count in done.items()}), flush=True)


def under_flood(port: int, headers: dict[str, str], n: int) -> dict[str, Any]:
    """An honest keep-alive client's latency without, then during, the worst no-token flood; calls lost."""

    def honest() -> tuple[dict[str, float], int]:
        link, samples, lost = KeepAlive(port, headers), [], 0
        for _ in range(n):
            started = time.perf_counter()
            try:
                link.post("/mcp", SUMMARY)
            except (OSError, RuntimeError, http.client.HTTPException):
                lost += 1
                link = KeepAlive(port, headers)
                continue
            samples.append(time.perf_counter() - started)
        return percentiles(samples), lost

    quiet, quiet_lost = honest()
    flooder = subprocess.Popen([sys.executable, str(ENTRY), "--flood", str(port)], stdout=subprocess.PIPE, text=True)
    try:
        assert flooder.stdout is not None
        while not all(json.loads(flooder.stdout.readline()).values()):
            pass  # until both kinds of flood are under way
        loud, loud_lost = honest()
        rates = json.loads(flooder.stdout.readline())  # the rate over the whole flood, the honest calls included
    finally:
        flooder.kill()
        flooder.communicate()
    return {
        "without": {**quiet, "lost": quiet_lost},
        "with": {**loud, "lost": loud_lost},
        "ratio_p99": loud["p99"] / quiet["p99"],
        "flood_per_second": rates,
    }
