"""What the person at Blender lets the agent do: look only, ask first, or everything.

The person's choice alone (the preferences, the sidebar panel, `--mode`): no tool sets it. Agent code runs in
Blender and could reach the preference, which is why the mode is a guard against a careless model and not a
sandbox: in `read-only` no agent code runs at all, and in `ask` none runs before the person has read it.
"""

from __future__ import annotations

import enum


class AgentMode(enum.Enum):
    READ_ONLY = "read-only"
    ASK = "ask"
    FULL = "full"

    @classmethod
    def parse(cls, text: object) -> AgentMode:
        """The mode a person named; ValueError with the three names for anything else."""
        for mode in cls:
            if text == mode.value:
                return mode
        raise ValueError(f"the agent's mode is one of {', '.join(NAMES)}, not {text!r}")

    @property
    def meaning(self) -> str:
        """One sentence a model reads before it tries anything."""
        return MEANINGS[self]


NAMES = tuple(mode.value for mode in AgentMode)

MEANINGS = {
    AgentMode.READ_ONLY: (
        "read-only: the person at Blender lets you look, not change: tools that change nothing work (reads, "
        "montages, screenshots, listings); code, edits, renders to files, restores, undo and redo are refused"
    ),
    AgentMode.ASK: (
        "ask: every call that would change the scene or the disk waits until the person at Blender allows it; "
        "say what you are about to do, then call"
    ),
    AgentMode.FULL: "full: every tool works without asking",
}

SWITCH = "the person at Blender can switch it in the Hermes sidebar panel (Agent may), or start it with `--mode full`"
"""The user action of every refusal the mode makes."""

READ_ONLY_REFUSAL = (
    "This Blender is read-only for agents: the person at Blender lets the agent look, not change, so {tool} was "
    f"not run and nothing changed. To let it change the scene, {SWITCH}."
)

ACTIONS = {
    "read_only": "Ask the person at Blender to switch Agent may (Hermes sidebar panel) to Ask first or Full: only they can",
    "denied_by_user": "Do not repeat the call: ask the user what they want instead",
    "confirmation_timed_out": "Ask the user to watch Blender's window, then call once more",
    "confirmation_unavailable": (
        "Ask the user to switch Agent may in the Hermes sidebar panel, or to start this Blender with `--mode full`"
    ),
}
"""Each refusal's one user action, told with its state as the reach states tell theirs."""


def told(state: str) -> dict[str, str]:
    """A refusal's user action and retry policy (the fields a reach state carries too)."""
    return {"user_action": ACTIONS[state], "retry": "after_user_action"}
