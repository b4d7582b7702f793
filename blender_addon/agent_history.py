"""The agent's own steps in Blender's undo history, and taking exactly those back (or bringing them back).

Each agent call that changed the scene is one named step ("Hermes: Run Python in Blender"), in the GUI and in
a background Blender alike; a background Blender's history starts with a step of the state before the agent's
first change, so the first step can be taken back too. Blender's undo takes back whatever step is last: when the
person at the GUI made edits after the agent's step, undoing would undo theirs first, so it is refused
(`user_edited_since`) and a checkpoint offered. A file opened or reloaded ends the history (Blender's does too).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, NoReturn

import bpy

from .blender_context import window
from .errors import ToolError
from .summaries import BOOKKEEPING, Summary, inverse, merge

if TYPE_CHECKING:
    from .changes import Scene  # the record it follows, given by whoever builds the history

UNDO_PREFIX = "Hermes: "
MOVES = ("agent:undone", "agent:redone")
"""The authors of the agent's own undo and redo in the change record: Blender's history moved, every datablock
was replaced (what the summary names is what the agent's steps had named, not all that reads differently now)."""
BASE_STEP = UNDO_PREFIX + "before the agent's changes"
OWN_UNDO = ("EDIT", "PARTICLE")
"""The modes (`bpy.context.mode` prefixes) whose undo steps take back only what they edit: a light moved by a call
that began or ended in Edit Mode or particle editing stays moved when the step is undone (measured); in Sculpt, the
paint modes, Grease Pencil drawing and Pose mode Blender's step takes the whole call back."""
MARK = "hermes_bridge_step"
"""A property of the scene naming the agent's step its data is at, written just before each step is pushed:
Blender's undo shows by it whether what it took back was that step. A person's edit that Blender keeps a step of
but tells no handler (a timeline marker, the frame range) is otherwise invisible, and undo would take it back in
the agent's place. It is saved with the file, like the rest of what the agent's steps changed (the add-on
registers it, so the interface lists it only with Developer Extras on)."""
MARK_DESCRIPTION = "The agent's last step in this scene (Hermes Bridge): how its undo knows it takes back its own step"
KEPT_STEPS = 64
"""Agent steps kept for the panel and for undo; Blender keeps its own count (Preferences > Undo Steps, 32 by
default), and a step it dropped cannot be taken back: `undo` says so."""


class Step:
    """One agent call that changed the scene."""

    __slots__ = ("number", "tool", "title", "at", "summary", "made_in")

    def __init__(
        self, number: int, tool: str, title: str, at: float, summary: Summary, made_in: str = "OBJECT"
    ) -> None:
        self.number = number
        self.tool = tool
        self.title = title
        self.at = at
        self.summary = summary
        self.made_in = made_in
        """Blender's mode (`bpy.context.mode`) when the call began or, if it was not one with an undo of its own,
        when it pushed its step: in such a mode Blender's step is that mode's, which takes back the edited data
        only, not the rest of what the call changed (`OWN_UNDO`)."""

    def brief(self) -> dict[str, object]:
        return {
            "step": self.number,
            "tool": self.tool,
            "at": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(self.at)),
            "said": self.summary["said"],
            "revision": self.summary["revision"]["after"],
        }


class AgentHistory:
    """The agent's steps of one bridge, newest last, and those it took back, for redo."""

    def __init__(self, changes: Scene, *, gui: bool) -> None:
        self._changes = changes
        self._gui = gui
        self.done: list[Step] = []
        self.undone: list[Step] = []
        """Taken back, the next to bring back last."""
        self._based = gui
        """Blender's history holds a step the agent's first can go back to (the GUI starts with one)."""
        self._loads = changes.loads
        self._foreign = changes.foreign_steps
        """The file loads this history has seen: one more means a file was opened since, and it ended."""
        self._numbers = 0
        self._session = os.urandom(4).hex()
        """In each mark, so a mark saved in a file by another session never passes for one of this session's."""
        self._mode_before = "OBJECT"
        self._undone_at = 0
        """The scene revision after the agent's last undo: a user edit after it forbids the redo."""
        self.ended: str | None = None
        """Why the history ended last (a file opened), told by the next undo that finds nothing to take back."""

    def before_change(self) -> None:
        """Before a job that may change the scene: a history a file load ended starts over, and a background
        Blender's gets its base step."""
        self.follow_loads()
        self._mode_before = _mode()
        if not self._based:
            _push(BASE_STEP)
            self._based = True

    def file_replaced(self, event: str) -> None:
        """A file was opened, reloaded or a checkpoint restored: Blender's history starts over, so does ours."""
        if self.done or self.undone:
            self.ended = f"the agent's history ended: {event}"
        self.done.clear()
        self.undone.clear()
        self._based = self._gui

    def follow_loads(self) -> None:
        """End the history if a file was loaded, or agent code moved Blender's undo history itself, since it last
        looked: what Blender's history holds is no longer the agent's steps."""
        if self._loads != self._changes.loads:
            self._loads = self._changes.loads
            self.file_replaced("a file was opened or reloaded")
        if self._foreign != self._changes.foreign_steps:
            self._foreign = self._changes.foreign_steps
            self.file_replaced("code moved Blender's undo history itself (bpy.ops.ed.undo or redo)")

    def restored(self, what: str) -> None:
        """A checkpoint was loaded: the history starts over from it, with a step that marks the file changed (it is
        no longer what the user's file on disk holds) and that the agent's next step can go back to."""
        self._loads = self._changes.loads
        self.file_replaced(what)
        if self._gui:  # the interface marks a file it just read as saved after this job: the step comes after that
            bpy.app.timers.register(lambda: _push(UNDO_PREFIX + what), first_interval=0.0)
        else:
            _push(UNDO_PREFIX + what)
        self._based = True

    def record(self, tool: str, title: str, summary: Summary) -> Step:
        """A job changed the scene: one named step in Blender's history; whatever was taken back is gone."""
        made_in = self._mode_before if self._mode_before.startswith(OWN_UNDO) else _mode()
        self._numbers += 1
        _set_mark(self._mark(self._numbers))
        _push(UNDO_PREFIX + title)
        step = Step(self._numbers, tool, title, time.time(), summary, made_in)
        self.done.append(step)
        del self.done[:-KEPT_STEPS]
        self.undone.clear()
        self.ended = None
        return step

    def _user_edits_after(self, revision: int) -> list[str]:
        """What the user did after `revision` that is a step of Blender's history, oldest first; when the record no
        longer reaches back that far, a line saying so (what it dropped may have been theirs)."""
        entries = self._changes.entries_after(revision, "user")
        if entries is None:
            return [
                f"changes the bridge no longer lists (it keeps the last {self._changes.journal_size}), which may "
                "include theirs"
            ]
        return [entry.summary["said"] for entry in entries if _undoable(entry.summary)]

    def undo(self, steps: int) -> Summary:
        """Take back the agent's last `steps` steps: the summary of what that changed."""
        self.follow_loads()
        self._check_count(steps, self.done, "take back")
        taken = self.done[-steps:]
        in_way = self._user_edits_after(taken[0].summary["revision"]["after"])  # after the oldest taken back
        if in_way:
            raise ToolError(
                "the person at Blender edited the scene after the agent's step, so undoing it would undo their "
                "work first: " + "; ".join(in_way) + ". Nothing was undone. Save a checkpoint (save_checkpoint) "
                "and ask them, or restore one (list_checkpoints)",
                state="user_edited_since",
                user_edits=in_way,
            )
        if odd := [step for step in taken if step.made_in.startswith(OWN_UNDO)]:
            raise ToolError(
                f"the agent's step {odd[0].number} ({odd[0].summary['said']}) was made while Blender was in "
                f"{odd[0].made_in.replace('_', ' ').title()} mode, where Blender's undo takes back only the data "
                "being edited, not the rest of what the call changed. Nothing was undone. Restore a checkpoint "
                "(list_checkpoints), or change it back with code",
                state="step_not_undoable",
                step=odd[0].number,
                mode=odd[0].made_in,
            )
        moved = self._move(list(reversed(taken)), back=True)
        taken = taken[len(taken) - moved :]
        del self.done[len(self.done) - moved :]
        self.undone.extend(reversed(taken))
        if not moved:
            self._exhausted(moved, steps, "taken back", None)  # nothing moved: `_undone_at` stays as it was
        told = self._told([inverse(step.summary) for step in reversed(taken)], "undone", taken)
        self._undone_at = told["revision"]["after"]  # a redo is refused for a user edit after this
        if moved < steps:
            self._exhausted(moved, steps, "taken back", told)
        return told

    def redo(self, steps: int) -> Summary:
        """Bring back the last `steps` steps taken back, unless the user edited since they were."""
        self.follow_loads()
        self._check_count(steps, self.undone, "bring back")
        in_way = self._user_edits_after(self._undone_at)
        if in_way:
            raise ToolError(
                "the person at Blender edited the scene after the agent's steps were taken back, so redoing them "
                "would lose their work: " + "; ".join(in_way) + ". Nothing was redone",
                state="user_edited_since",
                user_edits=in_way,
            )
        brought = list(reversed(self.undone[-steps:]))
        moved = self._move(brought, back=False)
        brought = brought[:moved]
        del self.undone[len(self.undone) - moved :]
        self.done.extend(brought)
        if not moved:
            self._exhausted(moved, steps, "brought back", None)
        told = self._told([step.summary for step in brought], "redone", brought)
        if moved < steps:
            self._exhausted(moved, steps, "brought back", told)
        return told

    def _check_count(self, steps: int, steps_held: list[Step], verb: str) -> None:
        if steps < 1:
            raise ToolError(f"steps must be 1 or more (got {steps})", state="invalid_arguments")
        if steps > len(steps_held):
            held = len(steps_held)
            why = f" ({self.ended})" if self.ended and not held else ""
            raise ToolError(
                f"the agent has {held} step{'s' if held != 1 else ''} it can {verb}{why}; asked for {steps}. "
                "Nothing was changed",
                state="nothing_to_undo" if verb == "take back" else "nothing_to_redo",
                steps_available=held,
            )

    def _mark(self, number: int) -> str:
        return f"{self._session}:{number}"

    def _move(self, steps: list[Step], *, back: bool) -> int:
        """Move Blender's history once per step (`back`: undo, newest first; else redo): how many it moved (fewer
        when Blender no longer holds them). Each move is checked by the scene's mark: when Blender's undo took back
        something that was not the step (the person's edit no handler told), every move is put back and the call
        refused, with nothing changed."""
        moved = 0
        self._changes.moving_history(True)
        try:
            for step in steps:
                if back and _mark_now() != self._mark(step.number):
                    self._unseen_edit(moved, back)
                if not _once(bpy.ops.ed.undo if back else bpy.ops.ed.redo):
                    break
                if (_mark_now() == self._mark(step.number)) == back:  # Blender moved something else
                    _once(bpy.ops.ed.redo if back else bpy.ops.ed.undo)
                    self._unseen_edit(moved, back)
                moved += 1
        finally:
            self._changes.moving_history(False)
            self._changes.replaced()
        return moved

    def _unseen_edit(self, moved: int, back: bool) -> NoReturn:
        for _ in range(moved):
            _once(bpy.ops.ed.redo if back else bpy.ops.ed.undo)
        raise ToolError(
            "Blender's history holds a step after the agent's that the bridge was never told of (the person's edit: "
            "a timeline marker, the frame range, ...), so moving it would move theirs. Nothing was "
            + ("undone" if back else "redone")
            + ". Save a checkpoint (save_checkpoint) and ask them, or restore one (list_checkpoints)",
            state="user_edited_since",
            user_edits=["an edit Blender keeps a step of but told no handler"],
        )

    def _exhausted(self, moved: int, steps: int, verb: str, done: Summary | None) -> NoReturn:
        """Blender held fewer steps than asked: what did move is told (`done`), and the history follows it."""
        raise ToolError(
            f"Blender's history held only {moved} of the {steps} steps (it keeps "
            f"{bpy.context.preferences.edit.undo_steps}: Preferences > System > Undo Steps); {moved} were {verb}",
            state="history_exhausted",
            moved=moved,
            **({"changes": done} if done else {}),
        )

    def _told(self, summaries: list[Summary], word: str, steps: list[Step]) -> Summary:
        moved_selection = any("selection" in step.summary for step in steps)
        told = merge(summaries, selection=self._changes.selection if moved_selection else None)  # as the move left it
        told["steps"] = [step.number for step in steps]
        self._changes.note(f"agent:{word}", told)  # one of MOVES
        return told


def _undoable(summary: Summary) -> bool:
    """A user edit that may be a step of Blender's history: anything but saving the file (which pushes none). A frame
    change counts: scrubbing, the arrow keys and jumping to a key each push a "Frame Change" step (playback pushes
    none, and is refused all the same: the record cannot tell them apart)."""
    if any(event.get("event") != "saved" for event in summary.get("file", ())):
        return True
    return any(key not in (*BOOKKEEPING, "file") for key in summary)


def _mode() -> str:
    """Blender's mode, read with the window as context (a GUI timer has none)."""
    with window():
        return bpy.context.mode


def _once(operator: Callable[[], set[str]]) -> bool:
    """One move of Blender's history: False when there was none to make (its poll, or not finished)."""
    try:
        with window():
            return "FINISHED" in operator()
    except RuntimeError:  # Blender's poll: no step left to move to
        return False


def _mark_now() -> object:
    with window():
        return bpy.context.scene.get(MARK) if bpy.context.scene is not None else None


def _set_mark(mark: str) -> None:
    with window():
        if bpy.context.scene is not None:
            bpy.context.scene[MARK] = mark


def _push(message: str) -> None:
    with contextlib.suppress(RuntimeError), window():
        bpy.ops.ed.undo_push(message=message)
