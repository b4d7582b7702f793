"""The two ways the bridge serves conversations, for tests that must hold under both."""

from __future__ import annotations

import math
import threading
from collections.abc import Callable

from blender_addon.dispatch import Dispatcher, InPlaceDispatcher, QueuedDispatcher
from blender_addon.net.admission import STOP_TIMEOUT
from blender_addon.net.conversation import QUIET, ClientState, ConversationFactory, OurState, Output, Peer
from blender_addon.net.main_loop import MainLoop
from blender_addon.net.threaded import ThreadedListeners

DRIVERS = ("threads", "main-loop")
"""A thread per connection (the GUI's way) and one loop on one thread (background Blender's way)."""


class Served:
    """Conversations served on a loopback port by one driver, with the dispatcher of its mode.

    As in the bridge: the main loop runs each job in place under an `InPlaceDispatcher` (here the loop
    has a thread of its own); the threaded driver queues jobs for a pump (here a thread, the GUI's timer
    in Blender). A fake tool host runs its work through `dispatcher`.
    """

    def __init__(self, driver: str, conversation: ConversationFactory, *, max_connections: int | None = None) -> None:
        self._loop = MainLoop(max_connections) if driver == "main-loop" else None
        self._listeners = self._loop or ThreadedListeners(max_connections)
        self.address = self._listeners.listen("127.0.0.1", 0, conversation, name="test")
        self.dispatcher: Dispatcher
        if self._loop is not None:
            self.dispatcher = in_place = InPlaceDispatcher()
            in_place.on_stop(self._loop.wake)
            self._thread = threading.Thread(target=self._serve_in_place, args=(in_place, self._loop), daemon=True)
        else:
            self.dispatcher = queued = QueuedDispatcher()
            self._thread = threading.Thread(target=queued.pump_until_stopped, args=(0.05,), daemon=True)
        self._thread.start()

    @staticmethod
    def _serve_in_place(dispatcher: InPlaceDispatcher, loop: MainLoop) -> None:
        with dispatcher.serving():
            loop.run(dispatcher.stop_requested, dispatcher.background_step)

    @property
    def connection_count(self) -> int:
        return self._listeners.connection_count

    def stop(self, timeout: float = STOP_TIMEOUT) -> None:
        """The bridge's order: refuse new jobs and release queued ones, stop serving, close every socket (an
        answer being written has until `timeout` to go out)."""
        self.dispatcher.close()
        self._thread.join(10)
        assert not self._thread.is_alive(), "the driver did not return after its stop was asked"
        self._listeners.close(timeout)


class Holding:
    """A conversation whose one request is in flight from its start (trusted and busy: never evictable).

    `work` runs on the driver's thread; its bytes are the answer, then the connection closes.
    """

    def __init__(self, peer: Peer, work: Callable[[], bytes]) -> None:
        self.client_state, self.our_state, self.trusted = ClientState.DONE, OurState.RUNNING, True
        self._work = work

    def opened(self, now: float) -> Output:
        return Output(run=self._work)

    def received(self, data: bytes, now: float) -> Output:
        raise AssertionError("nothing is read while a request runs")

    def answered(self, result: bytes, now: float) -> Output:
        self.our_state = OurState.MUST_CLOSE
        return Output(result, close=True)

    def deadline(self) -> float:
        return math.inf

    def expired(self, now: float) -> Output:
        return QUIET


class Greeting:
    """Says `text` on accept and closes: the smallest conversation."""

    def __init__(self, peer: Peer, text: bytes = b"hello") -> None:
        self.client_state, self.our_state, self.trusted = ClientState.IDLE, OurState.IDLE, False
        self._text = text

    def opened(self, now: float) -> Output:
        self.our_state = OurState.MUST_CLOSE
        return Output(self._text, close=True)

    def received(self, data: bytes, now: float) -> Output:
        return Output(close=True)

    def answered(self, result: object, now: float) -> Output:
        return Output(close=True)

    def deadline(self) -> float:
        return math.inf

    def expired(self, now: float) -> Output:
        return Output(close=True)


class Quiet:
    """A conversation that waits and says nothing: tests script the part they need in a subclass."""

    def __init__(self, peer: Peer, *, trusted: bool = False) -> None:
        self.client_state, self.our_state, self.trusted = ClientState.IDLE, OurState.IDLE, trusted

    def opened(self, now: float) -> Output:
        return QUIET

    def received(self, data: bytes, now: float) -> Output:
        return QUIET

    def answered(self, result: object, now: float) -> Output:
        return QUIET

    def deadline(self) -> float:
        return math.inf

    def expired(self, now: float) -> Output:
        return QUIET
