"""The two ways the bridge serves conversations, for tests that must hold under both."""

from __future__ import annotations

import threading

from blender_addon.net.listener import ConversationFactory, ThreadedListeners
from blender_addon.net.main_loop import MainLoop

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
            self._thread = threading.Thread(target=self._loop.serve, args=(self._stopping.is_set,), daemon=True)
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
