"""A stranger's load on a bridge's port, without any token: what another OS user can do to it (run until killed).

    python3 scripts/stranger.py PORT MODE [CONNECTIONS]

MODE is one of:
- idle: keep CONNECTIONS connections open that send nothing, opening a new one for each the bridge closes;
- half-header: the same, each having sent half a header block;
- slowloris: the same, each sending one more header byte every second;
- connect-flood: connect and close as fast as the machine allows, CONNECTIONS attempts in flight at once.

Prints one line, `ready`, once the load is up, then a line of counts every second. Standard library only, so a
second OS user can run it with the system's Python (tests/e2e/test_cap_churn.py, scripts/bench.py).
"""

from __future__ import annotations

import errno
import selectors
import socket
import sys
import time

HALF_HEADER = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: appl"
MODES = ("idle", "half-header", "slowloris", "connect-flood")


def hold(port: int, mode: str, connections: int) -> None:
    """Keep `connections` sockets open, each replaced as soon as the bridge closes it."""
    selector = selectors.DefaultSelector()
    opened = closed = 0

    def open_one() -> None:
        nonlocal opened
        sock = socket.socket()
        sock.setblocking(False)
        sock.connect_ex(("127.0.0.1", port))
        selector.register(sock, selectors.EVENT_WRITE, [0])
        opened += 1

    for _ in range(connections):
        open_one()
    print("ready", flush=True)
    next_drip = next_report = time.monotonic() + 1.0
    while True:
        for key, events in selector.select(0.1):
            sock = key.fileobj
            assert isinstance(sock, socket.socket)
            try:
                if events & selectors.EVENT_WRITE:
                    if mode == "half-header":
                        sock.send(HALF_HEADER)
                    selector.modify(sock, selectors.EVENT_READ, key.data)
                    continue
                if sock.recv(65536):
                    continue  # a refusal's answer: the close follows
            except OSError:
                pass
            selector.unregister(sock)
            sock.close()
            closed += 1
            open_one()
        now = time.monotonic()
        if mode == "slowloris" and now >= next_drip:
            next_drip = now + 1.0
            for key in list(selector.get_map().values()):
                sent = key.data
                if sent[0] < len(HALF_HEADER):
                    try:
                        key.fileobj.send(HALF_HEADER[sent[0] : sent[0] + 1])  # type: ignore[union-attr]
                        sent[0] += 1
                    except OSError:
                        pass
        if now >= next_report:
            next_report = now + 1.0
            print(f"opened {opened} closed-by-bridge {closed}", flush=True)


def connect_flood(port: int, in_flight: int) -> None:
    """Connections opened and closed at once, `in_flight` at a time: a full accept queue is what it costs others."""
    selector = selectors.DefaultSelector()
    done = 0

    def start() -> None:
        sock = socket.socket()
        sock.setblocking(False)
        if sock.connect_ex(("127.0.0.1", port)) not in (0, errno.EINPROGRESS):
            sock.close()
            return
        selector.register(sock, selectors.EVENT_WRITE)

    for _ in range(in_flight):
        start()
    print("ready", flush=True)
    next_report = time.monotonic() + 1.0
    while True:
        for key, _ in selector.select(0.1):
            selector.unregister(key.fileobj)
            key.fileobj.close()  # type: ignore[union-attr]
            done += 1
            start()
        while len(selector.get_map()) < in_flight:
            start()
        if time.monotonic() >= next_report:
            next_report = time.monotonic() + 1.0
            print(f"connections {done}", flush=True)


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 3) or argv[1] not in MODES or not argv[0].isdigit():
        print(__doc__, file=sys.stderr)
        return 2
    port, mode = int(argv[0]), argv[1]
    count = int(argv[2]) if len(argv) == 3 else 300
    if mode == "connect-flood":
        connect_flood(port, count)
    else:
        hold(port, mode, count)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
