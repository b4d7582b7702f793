"""The add-on's one logger, `hermes_bridge`, to Blender's console and a rotating file.

No bpy here: the caller says where the file goes (Blender's user config folder), so net/
modules can log through child loggers (`hermes_bridge.net`) and stay testable without Blender.
What is logged: starts, stops, takeovers, refusals (reason and peer port) and tool errors.
Never a token, a request body or code sent by a client.
"""

from __future__ import annotations

import logging
import logging.handlers
import re
import sys
from pathlib import Path

from .owner_files.folders import NotOwnFolder, own_folder
from .owner_files.permissions import open_owner_only_for_append

LOGGER_NAME = "hermes_bridge"
MAX_BYTES = 1024 * 1024
BACKUPS = 3
REFUSAL_MARK = "hermes_refusal"
"""The attribute a refusal's record carries (net/refusals.py), so the console leaves it to the file."""
_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]")


def one_line(value: object) -> str:
    """A client-supplied value inside a log line: no line breaks, control or bidi characters (escaped)."""
    return _UNPRINTABLE.sub(lambda found: f"\\u{ord(found.group()):04x}", str(value))


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
    if log_file is not None:  # refusals go to the file alone: a console captured to a file must not double them
        console.addFilter(lambda record: not getattr(record, REFUSAL_MARK, False))
    _install(console)
    if log_file is None:
        return None
    try:
        own_folder(log_file.parent)
        handler = OwnerOnlyRotatingFileHandler(
            log_file, maxBytes=MAX_BYTES, backupCount=BACKUPS, encoding="utf-8", errors="backslashreplace"
        )  # a path that is not UTF-8 (lone surrogates) is written escaped: strict, the whole line was dropped
    except NotOwnFolder as exc:
        logger.warning("not writing the log file %s: %s", log_file, exc)
        return None
    except OSError as exc:
        logger.warning("cannot write the log file %s: %s", log_file, exc.strerror or exc)
        return None
    handler.setFormatter(logging.Formatter(_FORMAT))
    _install(handler)
    return log_file


class OwnerOnlyRotatingFileHandler(logging.handlers.RotatingFileHandler):
    """Every file it opens (the log and each new one after a rollover) is 0600: the log holds agents' tracebacks."""

    def _open(self):  # type: ignore[no-untyped-def]
        return open(
            open_owner_only_for_append(self.baseFilename), self.mode, encoding=self.encoding, errors=self.errors
        )


def _install(handler: logging.Handler) -> None:
    logger.addHandler(handler)
    _installed.append(handler)
