"""Running agent-written Python in Blender, with the Blender Lab execution contract.

Not a sandbox: the code can do anything this user can. The blocklist only stops the few
calls that would end or reset Blender itself, so a mistaken script cannot take the session
(and the bridge) down with it.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import sys
import traceback
from collections.abc import Callable, Iterator
from types import CodeType
from typing import Any, TextIO

import bpy

from ..errors import JobInterrupted
from ..jsontext import RawJson, dumps
from .context import Interrupts, JobContext

BLOCKED_OPERATORS = frozenset(
    {
        ("wm", "quit_blender"),
        ("wm", "read_factory_settings"),
        ("wm", "read_factory_userpref"),
        ("wm", "read_userpref"),
    }
)
FILENAME = "<blender-bridge>"
"""The file name agent-written code is compiled under: not a path, so a stop polices it line by line."""
PYTHON_ENGINE_OPERATORS = frozenset({("render", "render"), ("object", "bake")})
"""Operators that run a render engine's Python (Cycles'): an interrupt waits until they return (`shielded`)."""

Envelope = dict[str, Any]


class Deferred:
    """The code left a `check_is_finished` callable: the answer comes from polling it."""

    __slots__ = ("poll",)

    def __init__(self, poll: Callable[[], Envelope | None]) -> None:
        self.poll = poll
        """Main thread only: None while pending, else the final envelope."""


def execute(code: str, job: JobContext, *, strict_json: bool, preload_bpy: bool = False) -> Envelope | Deferred:
    """Run `code` in a fresh namespace seeded with `result = {}` and `progress(fraction, message)` (heard by a
    client that asked for progress); return the Lab envelope."""
    namespace: dict[str, Any] = {"__name__": "__blender_bridge__", "result": {}, "progress": job.report}
    if preload_bpy:
        namespace["bpy"] = bpy
    captured = _Capture()
    with captured, blocked_operators(job.interrupts):
        try:
            exec(_compiled(code), namespace)
        except JobInterrupted:
            raise  # the bridge is stopping this job: let it go
        except SystemExit:
            return captured.envelope(error="sys.exit() is not allowed in LLM-generated code")
        except BaseException as exc:  # KeyboardInterrupt and friends too: agent code must never end Blender
            from .hints import hint_for  # only when code failed: a Blender's start and a success pay nothing

            return captured.envelope(error=_traceback(exc), hint=hint_for(exc, code, FILENAME))
    check = namespace.get("check_is_finished")
    if callable(check):
        return Deferred(lambda: _poll(check, strict_json, captured, job.interrupts))
    return _finish(namespace.get("result"), strict_json, captured)


CACHED_SOURCES = 128
CACHEABLE_SOURCE_CHARS = 16 * 1024
"""Only small sources are kept compiled: the official Lab server's fixed snippets are a few KiB, while agent
scripts of megabytes are new each time and kept code objects of them grew Blender by hundreds of MiB. So the
cache holds at most CACHED_SOURCES x CACHEABLE_SOURCE_CHARS of source (2 MiB) and their code."""


def _compiled(code: str) -> CodeType:
    """Compiled once per distinct small source: the official Lab server sends the same snippet for each tool."""
    if len(code) > CACHEABLE_SOURCE_CHARS:
        return compile(code, FILENAME, "exec")
    return _compiled_small(code)


@functools.lru_cache(maxsize=CACHED_SOURCES)
def _compiled_small(code: str) -> CodeType:
    return compile(code, FILENAME, "exec")


def _poll(check: Callable[[], Any], strict_json: bool, captured: _Capture, interrupts: Interrupts) -> Envelope | None:
    with captured, blocked_operators(interrupts):
        try:
            value = check()
        except JobInterrupted:
            raise
        except SystemExit:
            return captured.envelope(error="sys.exit() is not allowed in LLM-generated code")
        except BaseException as exc:
            return captured.envelope(error=_traceback(exc))
    return None if value is None else _finish(value, strict_json, captured)


def _finish(result: Any, strict_json: bool, captured: _Capture) -> Envelope:
    if not isinstance(result, dict):
        return captured.envelope(
            error=f"The `result` variable must be a dict, not {type(result).__name__}. "
            'Wrap your return value: `result = {"key": value}`'
        )
    try:
        text = (
            dumps(result)
            if strict_json
            else json.dumps(result, default=repr, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        )
    except ValueError as exc:
        if _NOT_A_NUMBER in str(exc):  # JSON has no NaN or infinity: one answer on both listeners, never "NaN"
            return captured.envelope(error=NOT_FINITE)
        return captured.envelope(error=f"The `result` value is not JSON-serializable: {exc}")
    except TypeError as exc:
        return captured.envelope(error=f"The `result` value is not JSON-serializable: {exc}")
    return captured.envelope(result=RawJson(text))


_NOT_A_NUMBER = "Out of range float values"
NOT_FINITE = (
    "The `result` value holds NaN or an infinity, which JSON cannot carry. The code ran (what it changed stays): "
    "turn such numbers into None or a string before assigning `result`"
)


def _traceback(exc: BaseException) -> str:
    """The traceback from the agent's own code down; none of the bridge's frames above it."""
    frames = traceback.extract_tb(exc.__traceback__)
    ours = next((i for i, frame in enumerate(frames) if frame.filename == FILENAME), None)
    if ours is None:  # raised before the code ran (a SyntaxError from compile): only the error itself
        return "".join(traceback.format_exception_only(type(exc), exc)).rstrip()
    tb = exc.__traceback__
    for _ in range(ours):
        tb = tb.tb_next if tb is not None else None
    return "".join(traceback.format_exception(type(exc), exc, tb)).rstrip()


class _Capture:
    """Tee stdout/stderr into buffers while the code runs (the main thread is the only writer)."""

    def __init__(self) -> None:
        self.out = io.StringIO()
        self.err = io.StringIO()
        self._saved: tuple[TextIO, TextIO] = (sys.stdout, sys.stderr)

    def __enter__(self) -> _Capture:
        self._saved = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = _Tee(self.out, self._saved[0]), _Tee(self.err, self._saved[1])
        return self

    def __exit__(self, *exc_info: object) -> None:
        sys.stdout, sys.stderr = self._saved

    def envelope(self, *, result: RawJson | None = None, error: str | None = None, hint: str | None = None) -> Envelope:
        envelope: Envelope = (
            {"status": "ok", "result": result} if error is None else {"status": "error", "message": error}
        )
        if hint is not None:  # read from the running Blender's API when agent code failed (tools/hints.py)
            envelope["hint"] = hint
        for key, buffer in (("stdout", self.out), ("stderr", self.err)):
            if text := buffer.getvalue():
                envelope[key] = text
        return envelope


class _Tee(io.TextIOBase):
    def __init__(self, *targets: TextIO) -> None:
        self._targets = targets

    def write(self, text: str) -> int:
        for target in self._targets:
            with contextlib.suppress(Exception):
                target.write(text)
        return len(text)

    def flush(self) -> None:
        for target in self._targets:
            with contextlib.suppress(Exception):
                target.flush()


class _Shielded:
    """An operator called with interrupts held until it returns; everything else is the operator's."""

    def __init__(self, operator: Any, interrupts: Interrupts) -> None:
        self._operator = operator
        self._interrupts = interrupts

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._interrupts.held(self._operator, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._operator, name)


@contextlib.contextmanager
def blocked_operators(interrupts: Interrupts) -> Iterator[None]:
    """Refuse the operators that quit Blender or reset it to factory state, for this call only.

    Hooks `bpy.ops`'s sub-module lookup, which every `bpy.ops.<module>.<name>` goes through in
    4.2 to 5.3 alike (the operator object behind it changed in 5.0; this hook did not).
    """
    ops = sys.modules["bpy.ops"]
    original = ops._bpy_ops_submodule__getattr__

    def guarded(module: str, name: str) -> Any:
        if (module, name) in BLOCKED_OPERATORS:
            raise RuntimeError(f"bpy.ops.{module}.{name} is not allowed in LLM-generated code")
        operator = original(module, name)
        return _Shielded(operator, interrupts) if (module, name) in PYTHON_ENGINE_OPERATORS else operator

    ops._bpy_ops_submodule__getattr__ = guarded
    try:
        yield
    finally:
        ops._bpy_ops_submodule__getattr__ = original
