"""The add-on's one logger, `hermes_bridge`, to Blender's console and a rotating file.

No bpy here: the caller says where the file goes (Blender's user config folder), so net/
modules can log through child loggers (`hermes_bridge.net`) and stay testable without Blender.
What is logged: starts, stops, takeovers, refusals (reason and peer port) and tool errors.
Never a token, a request body or code sent by a client.
"""

from __future__ import annotations

import logging
import logging.handlers
import sys
from pathlib import Path

LOGGER_NAME = "hermes_bridge"
MAX_BYTES = 1024 * 1024
BACKUPS = 3
_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

logger = logging.getLogger(LOGGER_NAME)
_installed: list[logging.Handler] = []


def configure(log_file: Path | None) -> Path | None:
    """(Re)install the console and file handlers; returns the file actually logged to, if any.

    A file that cannot be opened (read-only config folder) is reported on the console and
    skipped: logging must never stop the bridge from starting.
    """
    for handler in _installed:
        logger.removeHandler(handler)
        handler.close()
    _installed.clear()
    logger.setLevel(logging.INFO)
    logger.propagate = False
    console = logging.StreamHandler(sys.stderr)
    console.setFormatter(logging.Formatter("hermes_bridge: %(levelname)s: %(message)s"))
    _install(console)
    if log_file is None:
        return None
    try:
        log_file.parent.mkdir(parents=True, exist_ok=True)
        handler = logging.handlers.RotatingFileHandler(
            log_file, maxBytes=MAX_BYTES, backupCount=BACKUPS, encoding="utf-8"
        )
    except OSError as exc:
        logger.warning("cannot write the log file %s: %s", log_file, exc.strerror or exc)
        return None
    handler.setFormatter(logging.Formatter(_FORMAT))
    _install(handler)
    return log_file


def _install(handler: logging.Handler) -> None:
    logger.addHandler(handler)
    _installed.append(handler)
