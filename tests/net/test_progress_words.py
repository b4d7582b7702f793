"""What a job's progress says on the wire (net/event_stream.py over a real socket pair, net/caller.py `Progress`):
words cut to a bounded length, the last word kept when a report has none, and nothing after the final message."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from typing import Any

import pytest

from blender_addon.net.caller import Progress
from blender_addon.net.event_stream import END, HEAD, EventStream

WORD_LIMIT = 200
"""The most characters of a job's word a client hears: each notification stays small whatever the job says."""


@pytest.fixture
def wire() -> Iterator[tuple[socket.socket, socket.socket]]:
    """Our end (non-blocking, as the driver's socket is while a job runs) and the client's."""
    ours, theirs = socket.socketpair()
    ours.setblocking(False)
    theirs.setblocking(False)
    yield ours, theirs
    ours.close()
    theirs.close()


def _arrived(theirs: socket.socket) -> bytes:
    """Everything the client could read now."""
    chunks = []
    while True:
        try:
            chunk = theirs.recv(65536)
        except BlockingIOError:
            return b"".join(chunks)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def _notes(raw: bytes) -> list[dict[str, Any]]:
    """The progress params of the SSE events in `raw` (one `data:` line each)."""
    messages = [json.loads(line[6:]) for line in raw.decode().splitlines() if line.startswith("data: ")]
    return [m["params"] for m in messages if m.get("method") == "notifications/progress"]


def test_a_long_progress_word_reaches_the_client_cut_at_200_characters(
    wire: tuple[socket.socket, socket.socket],
) -> None:
    """A render handler's stats line or agent code's own text may be any length; the client gets a bounded word."""
    ours, theirs = wire
    stream = EventStream("t", 0.0, ours.send)
    word = "frame 1 of 10: " + "detail " * 100
    stream.progress.report(0.1, word)
    stream.tend(0.5)
    [note] = _notes(_arrived(theirs))
    assert note["message"] == word[:WORD_LIMIT]


def test_nothing_is_written_after_the_streams_final_message(wire: tuple[socket.socket, socket.socket]) -> None:
    """The response ends the chunked body; a byte after it would be read as the start of the next answer."""
    ours, theirs = wire
    stream = EventStream("t", 0.0, ours.send)
    stream.progress.report(0.5, "half way")
    stream.tend(0.5)
    assert _arrived(theirs).startswith(HEAD)
    rest = stream.finish({"jsonrpc": "2.0", "id": 1, "result": {}})
    assert rest.endswith(END) and b'"result":{}' in rest
    stream.progress.report(0.9, "after the answer")  # a watcher's look racing the job's end
    stream.tend(2.5)  # past the heartbeat too
    assert _arrived(theirs) == b""


def test_a_report_without_a_word_keeps_the_last_one_and_one_without_a_fraction_keeps_the_last_fraction(
    wire: tuple[socket.socket, socket.socket],
) -> None:
    """A render reports its fraction per sample and its word per frame: the client must not see the word turn into
    "running for N s" between two frames."""
    ours, theirs = wire
    stream = EventStream("t", 0.0, ours.send)
    stream.progress.report(0.25, "frame 1 of 4")
    stream.tend(0.5)
    stream.progress.report(0.5)  # a fraction only
    stream.tend(1.0)
    first, second = _notes(_arrived(theirs))
    assert first["message"] == second["message"] == "frame 1 of 4"
    progress = Progress()
    progress.report(0.5, "frame 2 of 4")
    progress.report()  # neither
    said = progress.said()
    assert (said.fraction, said.message) == (0.5, "frame 2 of 4")
    progress.report(message="frame 3 of 4")  # a word only
    assert progress.said().fraction == 0.5
