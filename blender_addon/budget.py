"""The answer budget: how much of an answer's lists a model is sent when its caller named no limit (no bpy: the
tools and the change record share it)."""

from __future__ import annotations

import json
from typing import Any

BUDGET = 20_000
"""Characters of list entries in an answer whose caller gave no limit: a model takes the answer whole (Claude Code
caps a tool result at 25,000 tokens), so lists stop early rather than pass it, and the answer says `cut_at_budget`.
A caller that names a limit gets what it asked for."""


def fitting(entries: list[Any], budget: int) -> tuple[int, int]:
    """How many of `entries`, from the first, fit in `budget` characters, and the characters they take. Each entry
    counts as its JSON text and a separator; a first entry always fits when there is any budget left. Measured as
    one list first, which costs one encoding where one per entry cost 40% of a page (the list's text is the
    entries' plus two characters each)."""
    if budget <= 0 or not entries:
        return 0, 0
    whole = len(json.dumps(entries, ensure_ascii=False)) - len(entries)
    if whole <= budget:
        return len(entries), whole
    spent = 0
    for kept, entry in enumerate(entries):
        size = len(json.dumps(entry, ensure_ascii=False)) + 1
        if kept and spent + size > budget:
            return kept, spent
        spent += size
    return len(entries), spent


def budgeted(lists: dict[str, list[Any]], sized: bool) -> tuple[dict[str, list[Any]], dict[str, bool]]:
    """An answer's lists, in order, sharing one BUDGET unless the caller `sized` them; and `{"cut_at_budget": True}`
    when one was cut, to spread into the answer."""
    if sized:
        return lists, {}
    kept: dict[str, list[Any]] = {}
    left, cut = BUDGET, False
    for key, entries in lists.items():
        count, spent = fitting(entries, left)
        kept[key] = entries[:count]
        cut = cut or count < len(entries)
        left -= spent
    return kept, {"cut_at_budget": True} if cut else {}
