"""Whether the person at Blender consents to a call: by the agent's mode, or by their answer to a question.

Decided on the calling thread before any job is queued, so a refused, denied or unanswered call never reaches
Blender's main thread: it changes nothing and leaves no agent step. In `ask` mode the question waits here, on the
connection's own thread (the interactive Blender serves one per connection), while a timer shows it to the person
(`asking.py`): Blender's UI and other clients' reads go on meanwhile. A Blender with nobody at it (background, a
module in a host) answers `confirmation_unavailable` at once. In `full` mode the check is one comparison.
"""

from __future__ import annotations

import enum
import hmac
import itertools
import json
import os
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .agent_mode import READ_ONLY_REFUSAL, SWITCH, AgentMode, told
from .errors import ToolError
from .net.caller import ClientInput

ASK_TIMEOUT = 180.0
"""Seconds a question waits for the person by default (the preferences set it)."""
LOOK = 0.1
"""Seconds between two looks, while a question waits, at whether its client still wants the answer."""


CLIENT_QUESTION = "confirm"
"""The key of the one question a call puts to the client's user."""
SHOWN_LINES = 40
"""Lines of code a question shows (the rest is counted)."""
SEALED = re.compile(r"([0-9]{1,16})\.[0-9a-f]{16}\.[0-9a-f]{64}", re.ASCII)
"""A state this bridge gives: its deadline (milliseconds since the epoch), a nonce, and their seal."""


class AskTheClient(Exception):
    """The call waits for the client's user: answer `input_required` with these questions and this state."""

    def __init__(self, requests: dict[str, Any], state: str) -> None:
        super().__init__("the client asks its user")
        self.requests = requests
        self.state = state


@dataclass(frozen=True)
class Call:
    """What would run if the person allowed it."""

    tool: str
    title: str
    arguments: dict[str, Any]
    conversation: str | None = None
    """The client's conversation (its MCP session, or the id its relay sends); None: it has none to remember."""

    @property
    def code(self) -> str | None:
        code = self.arguments.get("code")
        return code if isinstance(code, str) else None

    def said(self) -> str:
        """The question in words: the tool, its arguments in a line, the code itself."""
        arguments = json.dumps({key: value for key, value in self.arguments.items() if key != "code"})[1:-1]
        text = f"The agent asks to run {self.tool} ({self.title}) in Blender: {self.tool}({arguments[:300]})"
        if self.code is not None:
            lines = self.code.splitlines()
            text += "\n\n" + "\n".join(lines[:SHOWN_LINES])
            if len(lines) > SHOWN_LINES:
                text += f"\n… and {len(lines) - SHOWN_LINES} more lines"
        return text + "\n\nAccept to allow it; decline and nothing runs."

    def fingerprint(self) -> bytes:
        return json.dumps([self.tool, self.conversation, self.arguments], sort_keys=True).encode()


class Answer(enum.Enum):
    ALLOW = "allow"
    ALLOW_CONVERSATION = "allow for this conversation"
    DENY = "deny"


@dataclass
class Question:
    """One call waiting for the person's answer."""

    number: int
    call: Call
    asked_at: float
    shown: bool = False
    """The person has it in front of them (a dialog is open for it)."""
    answer: Answer | None = None
    reason: str = ""
    ended: str | None = None
    """Why it stopped waiting without an answer: its client left, it timed out, the bridge stopped."""
    _settled: threading.Event = field(default_factory=threading.Event)

    @property
    def open(self) -> bool:
        return not self._settled.is_set()


class Consent:
    """The agent's mode, the questions waiting for the person, and the conversations they allowed."""

    def __init__(self, mode: AgentMode, *, person: bool, timeout: float = ASK_TIMEOUT) -> None:
        self._mode = mode
        self.person = person
        """Someone can be asked in Blender itself (the interactive Blender)."""
        self.timeout = timeout
        self._lock = threading.Lock()
        self._waiting: list[Question] = []
        self._numbers = itertools.count(1)
        self._allowed: set[str] = set()
        self._key = os.urandom(32)
        """Seals the state a client brings back with its user's answer: only a question this bridge asked, about
        this very call, is answered."""
        self._spent: dict[str, float] = {}
        """Sealed states already answered, with the deadline each was sealed with (kept until then): an answer is
        used once."""
        self._closed = False
        """The bridge stopped: nothing is asked any more."""

    @property
    def mode(self) -> AgentMode:
        return self._mode

    def switch(self, mode: AgentMode) -> None:
        """The person chose a mode: conversations allowed before are asked again; a waiting question is settled by
        the new mode (full: allowed; read-only: denied), or keeps waiting (ask)."""
        with self._lock:
            self._mode = mode
            self._allowed.clear()
            waiting = list(self._waiting) if mode is not AgentMode.ASK else []
        for question in waiting:
            self._settle(question, Answer.ALLOW if mode is AgentMode.FULL else Answer.DENY, f"switched to {mode.value}")

    def check(self, call: Call, wanted: Callable[[], bool], client: ClientInput | None = None) -> None:
        """Return when the call may run; raise ToolError with its named state when it may not, or AskTheClient when
        the client (`client`: it declares it can ask its user) is to ask its user and call again."""
        mode = self._mode
        if mode is AgentMode.FULL:
            return
        self.refuse_read_only(call.tool)
        if call.conversation is not None and call.conversation in self._allowed:
            return
        if client is not None:
            if client.state is None:
                raise AskTheClient({CLIENT_QUESTION: _elicitation(call)}, self._seal(call))
            return self._answered_by_client(call, client)
        if not self.person:
            raise ToolError(
                f"This Blender asks its person before every change, and nobody can be asked here (a Blender without "
                f"its window), so {call.tool} was not run and nothing changed. To run it, {SWITCH}.",
                state="confirmation_unavailable",
                **told("confirmation_unavailable"),
                mode=mode.value,
            )
        question = self._ask(call)
        if question is not None:
            self._wait(question, wanted)

    def _seal(self, call: Call) -> str:
        """The state for this call's question: its deadline (the timeout of this moment, sealed in, so a later
        change of the timeout neither revives nor forgets it), a nonce, and the seal of both with the call."""
        issued = f"{int((time.time() + self.timeout) * 1000)}.{os.urandom(8).hex()}"
        return f"{issued}.{self._mac(issued, call)}"

    def _mac(self, issued: str, call: Call) -> str:
        return hmac.new(self._key, issued.encode() + b"|" + call.fingerprint(), "sha256").hexdigest()

    def _answered_by_client(self, call: Call, client: ClientInput) -> None:
        """The client's user answered the question this bridge asked about this call: allow it, or say why not."""
        state = client.state or ""
        issued, _, mac = state.rpartition(".")
        if SEALED.fullmatch(state) is None or not hmac.compare_digest(mac, self._mac(issued, call)):
            raise ToolError(
                f"The answer this client brought back is not for this call of {call.tool} (its requestState was not "
                "given for these arguments by this Blender): call again without it to be asked",
                state="invalid_confirmation",
            )
        now = time.time()
        deadline = int(issued.split(".")[0]) / 1000
        with self._lock:
            self._spent = {spent: until for spent, until in self._spent.items() if now <= until}
            if state in self._spent:
                raise ToolError(
                    f"This answer was already used for {call.tool}: every run is asked once; call again without it",
                    state="invalid_confirmation",
                )
            if now > deadline:
                raise ToolError(
                    f"The question about {call.tool} was answered after its timeout; it was not run and nothing "
                    "changed. Call again to be asked again.",
                    state="confirmation_timed_out",
                    **told("confirmation_timed_out"),
                )
            self._spent[state] = deadline
        response = (client.responses or {}).get(CLIENT_QUESTION)
        action = response.get("action") if isinstance(response, dict) else None
        if action == "accept":
            content = response.get("content") if isinstance(response, dict) else None
            if isinstance(content, dict) and content.get("conversation") is True and call.conversation is not None:
                with self._lock:
                    self._allowed.add(call.conversation)
            return
        raise ToolError(
            f"The person denied {call.tool} ({'declined' if action == 'decline' else 'the question was dismissed'} "
            "where their client asked); it was not run and nothing changed.",
            state="denied_by_user",
            **told("denied_by_user"),
        )

    def refuse_read_only(self, tool: str) -> None:
        """Raise `read_only` when the agent may only look."""
        if self._mode is AgentMode.READ_ONLY:
            raise ToolError(
                READ_ONLY_REFUSAL.format(tool=tool),
                state="read_only",
                mode=AgentMode.READ_ONLY.value,
                **told("read_only"),
            )

    def _ask(self, call: Call) -> Question | None:
        """The call's question, waiting in line; None when the person switched to full since `check` looked (a
        switch to read-only meanwhile refuses it: a switch settles only the questions already waiting)."""
        with self._lock:
            mode, closed = self._mode, self._closed
            if mode is AgentMode.ASK and not closed:
                question = Question(next(self._numbers), call, time.monotonic())
                self._waiting.append(question)
                return question
        if closed:
            raise ToolError(f"{call.tool} was not run: the bridge stopped", state="stopped")
        self.refuse_read_only(call.tool)
        return None

    def _wait(self, question: Question, wanted: Callable[[], bool]) -> None:
        deadline = question.asked_at + self.timeout
        while not question._settled.wait(LOOK):
            if not wanted():
                self._end(question, "its client left before the person answered")
            elif time.monotonic() >= deadline:
                self._end(question, "timed out")
        if question.answer in (Answer.ALLOW, Answer.ALLOW_CONVERSATION):
            return
        tool = question.call.tool
        if question.answer is Answer.DENY:
            said = f" They said: {question.reason}" if question.reason else ""
            raise ToolError(
                f"The person at Blender denied {tool}; it was not run and nothing changed.{said}",
                state="denied_by_user",
                **told("denied_by_user"),
                reason=question.reason or None,
            )
        if question.ended == "timed out":
            raise ToolError(
                f"Nobody answered the question about {tool} in Blender within {self.timeout:g} s; it was not run and "
                "nothing changed. Ask the person to watch Blender, then call again.",
                state="confirmation_timed_out",
                **told("confirmation_timed_out"),
            )
        raise ToolError(f"{tool} was not run: {question.ended}", state="stopped")

    def waiting(self) -> list[Question]:
        with self._lock:
            return list(self._waiting)

    def next_to_show(self) -> Question | None:
        """The oldest question, when nothing is in front of the person now (one question at a time, in order)."""
        with self._lock:
            if any(question.shown for question in self._waiting):
                return None
            if not self._waiting:
                return None
            question = self._waiting[0]
            question.shown = True
            return question

    def answer(self, number: int, answer: Answer, reason: str = "") -> bool:
        """The person's answer; False when that question no longer waits (it timed out, or its client left)."""
        with self._lock:
            question = next((question for question in self._waiting if question.number == number), None)
            if question is None:
                return False
            if answer is Answer.ALLOW_CONVERSATION and question.call.conversation is not None:
                self._allowed.add(question.call.conversation)
        self._settle(question, answer, reason)
        return True

    def close(self) -> None:
        """The bridge stops: every waiting call ends, unrun, and none is asked from now on."""
        with self._lock:
            self._closed = True
        for question in self.waiting():
            self._end(question, "the bridge stopped")

    def _end(self, question: Question, why: str) -> None:
        with self._lock:
            if question in self._waiting:
                self._waiting.remove(question)
                question.ended = why
        question._settled.set()

    def _settle(self, question: Question, answer: Answer, reason: str) -> None:
        with self._lock:
            if question not in self._waiting:
                return
            self._waiting.remove(question)
            question.answer = answer
            question.reason = reason
        question._settled.set()


def _elicitation(call: Call) -> dict[str, Any]:
    """The question as the client puts it to its user (a form with one box: the rest of this conversation)."""
    schema: dict[str, Any] = {"type": "object", "properties": {}}
    if call.conversation is not None:
        schema["properties"]["conversation"] = {
            "type": "boolean",
            "title": "Allow the rest of this conversation",
            "default": False,
        }
    return {
        "method": "elicitation/create",
        "params": {"mode": "form", "message": call.said(), "requestedSchema": schema},
    }
