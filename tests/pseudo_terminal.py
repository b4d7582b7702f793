"""What a command wrote to a pseudo-terminal (its stderr, as a person's terminal receives it)."""

from __future__ import annotations

import os


def read_all(controller: int) -> str:
    """Everything written to the terminal whose controlling side is `controller`, once its other side is closed;
    the controller is closed after."""
    drawn = b""
    while True:
        try:
            chunk = os.read(controller, 65536)
        except OSError:  # the terminal's other end is closed: all of it was read
            break
        if not chunk:
            break
        drawn += chunk
    os.close(controller)
    return drawn.decode(errors="replace")
