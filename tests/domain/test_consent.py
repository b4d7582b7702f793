"""The person's consent, without Blender: questions wait on the caller's thread and are shown one at a time in
order; an answer, a timeout, a client that left, a mode switch and a stop each end a question exactly once."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from blender_addon.agent_mode import AgentMode
from blender_addon.consent import Answer, AskTheClient, Call, Consent
from blender_addon.errors import ToolError
from blender_addon.net.caller import ClientInput

pytestmark = pytest.mark.timeout(30)


def _call(tool: str = "execute_blender_code", conversation: str | None = "session:a") -> Call:
    return Call(tool, "Run Python in Blender", {"code": "bpy.data.objects.remove(cube)"}, conversation)


class Asking:
    """A call waiting for consent on a thread of its own, as a connection's thread waits."""

    def __init__(self, consent: Consent, call: Call, wanted: Callable[[], bool] = lambda: True) -> None:
        self.outcome: Any = None
        self._thread = threading.Thread(target=self._run, args=(consent, call, wanted), daemon=True)
        self._thread.start()

    def _run(self, consent: Consent, call: Call, wanted: Callable[[], bool]) -> None:
        try:
            consent.check(call, wanted)
            self.outcome = "allowed"
        except ToolError as exc:
            self.outcome = exc

    def result(self) -> Any:
        self._thread.join(20)
        assert not self._thread.is_alive(), "the call still waits"
        return self.outcome


def _asked(consent: Consent, count: int) -> None:
    deadline = time.monotonic() + 10
    while len(consent.waiting()) < count:
        assert time.monotonic() < deadline, "the question never came"
        time.sleep(0.01)


def test_full_allows_without_asking_and_read_only_refuses_with_the_user_action() -> None:
    Consent(AgentMode.FULL, person=False).check(_call(), lambda: True)
    with pytest.raises(ToolError) as refused:
        Consent(AgentMode.READ_ONLY, person=True).check(_call(), lambda: True)
    assert refused.value.state == "read_only" and "Agent may" in str(refused.value)
    assert (
        refused.value.details["retry"] == "after_user_action"
        and "only they can" in refused.value.details["user_action"]
    )


def test_ask_without_a_person_is_unavailable_at_once() -> None:
    consent = Consent(AgentMode.ASK, person=False)
    with pytest.raises(ToolError) as refused:
        consent.check(_call(), lambda: True)
    assert refused.value.state == "confirmation_unavailable" and consent.waiting() == []
    assert "--mode full" in refused.value.details["user_action"]


def test_two_waiting_calls_are_shown_one_at_a_time_in_the_order_they_came() -> None:
    consent = Consent(AgentMode.ASK, person=True)
    first = Asking(consent, _call("execute_blender_code"))
    _asked(consent, 1)
    second = Asking(consent, _call("undo_agent_steps"))
    _asked(consent, 2)
    shown = consent.next_to_show()
    assert shown is not None and shown.call.tool == "execute_blender_code"
    assert consent.next_to_show() is None  # one question in front of the person at a time
    assert consent.answer(shown.number, Answer.DENY, "not the cube")
    denied = first.result()
    assert denied.state == "denied_by_user" and denied.details["reason"] == "not the cube"
    assert "not the cube" in str(denied)
    shown = consent.next_to_show()
    assert shown is not None and shown.call.tool == "undo_agent_steps"
    assert consent.answer(shown.number, Answer.ALLOW)
    assert second.result() == "allowed"


def test_allow_for_this_conversation_lets_its_next_call_through_and_no_other_conversations() -> None:
    consent = Consent(AgentMode.ASK, person=True)
    asking = Asking(consent, _call(conversation="session:a"))
    _asked(consent, 1)
    question = consent.next_to_show()
    assert question is not None and consent.answer(question.number, Answer.ALLOW_CONVERSATION)
    assert asking.result() == "allowed"
    consent.check(_call(conversation="session:a"), lambda: True)  # no question
    other = Asking(consent, _call(conversation="session:b"))
    _asked(consent, 1)
    consent.switch(AgentMode.ASK)  # a switch forgets every allowance, and leaves the waiting question waiting
    assert len(consent.waiting()) == 1
    question = consent.next_to_show()
    assert question is not None and consent.answer(question.number, Answer.ALLOW)
    assert other.result() == "allowed"
    stateless = Asking(consent, _call(conversation=None))  # nothing to remember it by: asked every time
    _asked(consent, 1)
    consent.close()
    assert stateless.result().state == "stopped"


def test_a_question_times_out_with_its_state_and_a_late_answer_is_refused() -> None:
    consent = Consent(AgentMode.ASK, person=True, timeout=0.3)
    asking = Asking(consent, _call())
    _asked(consent, 1)
    question = consent.next_to_show()
    assert question is not None
    timed_out = asking.result()
    assert timed_out.state == "confirmation_timed_out"
    assert not consent.answer(question.number, Answer.ALLOW)  # answered after its timeout: nothing runs
    assert consent.waiting() == []


def test_a_client_that_leaves_withdraws_its_question() -> None:
    consent = Consent(AgentMode.ASK, person=True)
    there = threading.Event()
    there.set()
    asking = Asking(consent, _call(), wanted=there.is_set)
    _asked(consent, 1)
    there.clear()
    assert asking.result().state == "stopped"
    assert consent.waiting() == []


def test_switching_mode_settles_the_waiting_questions_by_the_new_mode() -> None:
    consent = Consent(AgentMode.ASK, person=True)
    allowed = Asking(consent, _call())
    _asked(consent, 1)
    consent.switch(AgentMode.FULL)
    assert allowed.result() == "allowed"
    consent.switch(AgentMode.ASK)
    denied = Asking(consent, _call())
    _asked(consent, 1)
    consent.switch(AgentMode.READ_ONLY)
    assert denied.result().state == "denied_by_user"


def test_a_mode_that_is_not_one_of_the_three_is_refused_naming_them() -> None:
    with pytest.raises(ValueError, match="read-only, ask, full"):
        AgentMode.parse("everything")


def _asked_by_client(consent: Consent, call: Call) -> str:
    with pytest.raises(AskTheClient) as asking:
        consent.check(call, lambda: True, ClientInput())
    question = asking.value.requests["confirm"]
    assert question["method"] == "elicitation/create" and "bpy.data.objects.remove" in question["params"]["message"]
    return asking.value.state


def _accept(state: str, **content: Any) -> ClientInput:
    return ClientInput({"confirm": {"action": "accept", "content": content}}, state)


def test_a_client_that_can_ask_gets_the_question_and_its_accept_runs_that_call_once() -> None:
    consent = Consent(AgentMode.ASK, person=False)  # nobody at the window: the client asks instead
    call = _call()
    state = _asked_by_client(consent, call)
    consent.check(call, lambda: True, _accept(state))
    with pytest.raises(ToolError) as replayed:
        consent.check(call, lambda: True, _accept(state))  # an answer runs one call, once
    assert replayed.value.state == "invalid_confirmation"


def test_an_accept_for_other_arguments_or_a_forged_state_runs_nothing() -> None:
    consent = Consent(AgentMode.ASK, person=False)
    state = _asked_by_client(consent, _call())
    other = Call("execute_blender_code", "Run Python in Blender", {"code": "import os"}, "session:a")
    for call, brought in ((other, state), (_call(), "1.2.3"), (_call(), "")):
        with pytest.raises(ToolError) as refused:
            consent.check(call, lambda: True, _accept(brought))
        assert refused.value.state == "invalid_confirmation"


def test_a_decline_is_denied_by_user_and_an_answer_after_the_timeout_is_timed_out() -> None:
    consent = Consent(AgentMode.ASK, person=False, timeout=0.2)
    state = _asked_by_client(consent, _call())
    with pytest.raises(ToolError) as declined:
        consent.check(_call(), lambda: True, ClientInput({"confirm": {"action": "decline"}}, state))
    assert declined.value.state == "denied_by_user"
    late = _asked_by_client(consent, _call())
    time.sleep(0.3)
    with pytest.raises(ToolError) as timed_out:
        consent.check(_call(), lambda: True, _accept(late))
    assert timed_out.value.state == "confirmation_timed_out"


def test_a_client_accept_for_the_conversation_lets_its_next_call_through_unasked() -> None:
    consent = Consent(AgentMode.ASK, person=False)
    state = _asked_by_client(consent, _call())
    consent.check(_call(), lambda: True, _accept(state, conversation=True))
    consent.check(_call(), lambda: True, ClientInput())  # no question: allowed for session:a


def test_a_request_state_that_is_not_ascii_or_not_ours_is_invalid_confirmation_never_a_crash() -> None:
    consent = Consent(AgentMode.ASK, person=False)
    state = _asked_by_client(consent, _call())
    issued, _, mac = state.rpartition(".")
    for forged in (f"{issued}.{mac[:-1]}é", "é", f"{issued}.{mac.upper()}", f"{state}.", f" {state}", "\ud800.1.2"):
        with pytest.raises(ToolError) as refused:
            consent.check(_call(), lambda: True, _accept(forged))
        assert refused.value.state == "invalid_confirmation", forged
    consent.check(_call(), lambda: True, _accept(state))  # the real answer was not spent by the forgeries


def test_an_answer_is_good_once_even_when_the_person_shortens_and_lengthens_the_timeout_meanwhile() -> None:
    consent = Consent(AgentMode.ASK, person=False, timeout=0.5)
    state = _asked_by_client(consent, _call())
    consent.check(_call(), lambda: True, _accept(state))
    time.sleep(0.6)
    consent.timeout = 0.01  # the preferences: shorter (a look now forgets the answers spent before it) ...
    with pytest.raises(ToolError):
        consent.check(_call(), lambda: True, _accept(state))
    consent.timeout = 3600.0  # ... then far longer: the answer must not be good again
    with pytest.raises(ToolError) as replayed:
        consent.check(_call(), lambda: True, _accept(state))
    assert replayed.value.state in ("invalid_confirmation", "confirmation_timed_out")


def test_a_call_asked_after_the_bridge_stopped_ends_at_once_unrun() -> None:
    consent = Consent(AgentMode.ASK, person=True)
    consent.close()
    asking = Asking(consent, _call())
    assert asking.result().state == "stopped"
    assert consent.waiting() == []


def test_a_switch_to_read_only_between_the_mode_look_and_the_question_leaves_nothing_to_allow() -> None:
    consent = Consent(AgentMode.ASK, person=True)
    ask = consent._ask

    def racing(call: Call) -> Any:  # the person clicks Read-only just as the call is about to be asked
        consent.switch(AgentMode.READ_ONLY)
        return ask(call)

    consent._ask = racing  # type: ignore[method-assign]
    asking = Asking(consent, _call())
    deadline = time.monotonic() + 2
    while not consent.waiting() and asking._thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.01)
    for question in consent.waiting():
        consent.answer(question.number, Answer.ALLOW)  # a dialog still open from before the switch
    assert asking.result().state == "read_only"


def test_full_decides_without_the_lock_a_waiting_question_holds() -> None:
    """Full costs one comparison: it never waits on the lock the questions, answers and switches take."""
    consent = Consent(AgentMode.FULL, person=True)
    with consent._lock:  # held, as by an answer or a switch on another thread
        asking = Asking(consent, _call())
        assert asking.result() == "allowed"
