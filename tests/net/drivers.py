"""The two ways the bridge serves conversations, for tests that must hold under both."""

from __future__ import annotations

import math
import threading
from collections.abc import Callable

from blender_addon.net.conversation import QUIET, ConversationFactory, Output, Peer, Phase
from blender_addon.net.main_loop import MainLoop
from blender_addon.net.threaded import ThreadedListeners

DRIVERS = ("threads", "main-loop")
"""A thread per connection (the GUI's way) and one loop on one thread (background Blender's way)."""


class Served:
    """Conversations served on a loopback port by one driver; the main loop runs on a thread of its own here."""

    def __init__(self, driver: str, conversation: ConversationFactory, *, max_connections: int | None = None) -> None:
        self._loop = MainLoop(max_connections) if driver == "main-loop" else None
        self._listeners = self._loop or ThreadedListeners(max_connections)
        self.address = self._listeners.listen("127.0.0.1", 0, conversation, name="test")
        if self._loop is not None:
            self._stopping = threading.Event()
            self._thread = threading.Thread(target=self._loop.run, args=(self._stopping.is_set,), daemon=True)
            self._thread.start()

    @property
    def connection_count(self) -> int:
        return self._listeners.connection_count

    def stop(self) -> None:
        if self._loop is not None:
            self._stopping.set()
            self._loop.wake()
            self._thread.join(10)
            assert not self._thread.is_alive(), "the main loop did not return after its stop was asked"
        self._listeners.close()


class Holding:
    """A conversation whose one request is in flight from its start (trusted and busy: never evictable).

    `work` runs on the driver's thread; its bytes are the answer, then the connection closes.
    """

    def __init__(self, peer: Peer, work: Callable[[], bytes]) -> None:
        self.phase, self.trusted = Phase.RUNNING, True
        self._work = work

    def opened(self, now: float) -> Output:
        return Output(run=self._work)

    def received(self, data: bytes, now: float) -> Output:
        raise AssertionError("nothing is read while a request runs")

    def answered(self, result: bytes, now: float) -> Output:
        self.phase = Phase.CLOSED
        return Output(result, close=True)

    def deadline(self) -> float:
        return math.inf

    def expired(self, now: float) -> Output:
        return QUIET


class Greeting:
    """Says `text` on accept and closes: the smallest conversation."""

    def __init__(self, peer: Peer, text: bytes = b"hello") -> None:
        self.phase, self.trusted = Phase.WAITING, False
        self._text = text

    def opened(self, now: float) -> Output:
        self.phase = Phase.CLOSED
        return Output(self._text, close=True)

    def received(self, data: bytes, now: float) -> Output:
        return Output(close=True)

    def answered(self, result: object, now: float) -> Output:
        return Output(close=True)

    def deadline(self) -> float:
        return math.inf

    def expired(self, now: float) -> Output:
        return Output(close=True)
