"""The toolkit trusts only the user's own Blender: another OS user's process, socket or runtime file gets nothing.

A root bridge that crashes leaves its runtime file; another user who gets the dead Blender's pid and listens on
the old port under a script named `blender` must never receive the token, and its words must never reach the
model as a tool result (the red team's impostor, issue 31). Every path that dials is tried: `call`, the stdio
relay and `status`.
"""

from __future__ import annotations

import json
import os
import pwd
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from hermes_blender.contract.host import serving_blender_problem
from tests.other_user import IMPOSTOR, Impostor, OtherUser, needs_a_made_user
from tests.stdio_frames import INITIALIZE, INITIALIZED

pytestmark = [pytest.mark.timeout(120), needs_a_made_user]

CLI = [sys.executable, "-m", "hermes_blender.cli"]
TOKEN = "k" * 43


@pytest.fixture
def impostor(other_user: OtherUser) -> Iterator[Impostor]:
    planted = Impostor(other_user)
    try:
        yield planted
    finally:
        planted.received()


def _call(runtime_file: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, "call", "get_objects_summary", "--runtime-file", str(runtime_file)],
        capture_output=True,
        text=True,
        timeout=60,
    )


def _stale_root_file(folder: Path, impostor: Impostor) -> Path:
    """What a crashed root bridge leaves behind, now naming the other user's pid and port."""
    path = folder / "server.json"
    path.write_text(json.dumps({"http": f"http://127.0.0.1:{impostor.port}", "token": TOKEN, "pid": impostor.pid}))
    path.chmod(0o600)
    return path


def test_call_sends_nothing_to_another_users_process_named_blender_on_the_port(
    impostor: Impostor, other_user: OtherUser, tmp_path: Path
) -> None:
    runtime_file = _stale_root_file(tmp_path, impostor)
    run = _call(runtime_file)
    assert not impostor.received()
    assert run.returncode == 3, run.stderr
    assert f"runs as uid {other_user.uid}" in run.stderr and "nothing was sent" in run.stderr
    assert "SYSTEM" not in run.stdout + run.stderr and TOKEN not in run.stdout + run.stderr


def test_the_stdio_relay_answers_a_named_state_and_never_the_other_users_words(
    impostor: Impostor, other_user: OtherUser, tmp_path: Path
) -> None:
    runtime_file = _stale_root_file(tmp_path, impostor)
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "get_objects_summary"}}
    relay = subprocess.Popen(
        [*CLI, "mcp", "--runtime-file", str(runtime_file)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert relay.stdin is not None and relay.stdout is not None
    try:
        for frame in (INITIALIZE, INITIALIZED, call):
            relay.stdin.write(json.dumps(frame) + "\n")
            relay.stdin.flush()
        answers = {message.get("id"): message for message in (json.loads(relay.stdout.readline()) for _ in range(2))}
    finally:
        relay.stdin.close()
        relay.wait(timeout=30)
        relay.stdout.close()
    result = answers[2]["result"]
    assert not impostor.received()
    assert result["isError"] is True and "endpoint_unavailable" in result["content"][0]["text"]
    assert f"runs as uid {other_user.uid}" in json.dumps(result) and "SYSTEM" not in json.dumps(answers)


def test_another_user_listening_where_localhost_also_leads_is_never_trusted(
    other_user: OtherUser, tmp_path: Path
) -> None:
    """Our Blender on 127.0.0.1:P, a stranger on [::1]:P: a client dialing `localhost` may reach either."""
    (script := tmp_path / "blender").write_text(IMPOSTOR)
    ours = subprocess.Popen([sys.executable, str(script), "127.0.0.1"], stdout=subprocess.PIPE, text=True)
    try:
        assert ours.stdout is not None
        port = int(ours.stdout.readline())
        stranger = Impostor(other_user, host="::1", port=port)
        try:
            problem = serving_blender_problem(ours.pid, "localhost", port)
            assert problem is not None and f"uid {other_user.uid}" in problem
            # Dialing 127.0.0.1 cannot reach [::1], so that one is the Blender's own business (its name decides).
            assert "uid" not in (serving_blender_problem(ours.pid, "127.0.0.1", port) or "")
        finally:
            stranger.received()
    finally:
        ours.kill()
        ours.wait()


@pytest.mark.parametrize("unsafe", ["another user's", "writable by others"])
def test_a_runtime_file_someone_else_could_have_written_is_never_used(
    unsafe: str, other_user: OtherUser, impostor: Impostor, tmp_path: Path
) -> None:
    runtime_file = _stale_root_file(tmp_path, impostor)
    if unsafe == "another user's":
        os.chown(runtime_file, other_user.uid, other_user.gid)
    else:
        runtime_file.chmod(0o666)
    run = _call(runtime_file)
    assert not impostor.received()
    assert run.returncode == 3, run.stderr
    expected = f"belongs to uid {other_user.uid}" if unsafe == "another user's" else "can be written by other users"
    assert expected in run.stderr


def test_without_home_the_runtime_file_is_never_read_from_the_working_folder(tmp_path: Path) -> None:
    """A launcher with a bare environment, started in a folder someone else controls, which holds a planted file
    naming a listener that would pass every other check (a process of ours called `blender`)."""
    (script := tmp_path / "blender").write_text(IMPOSTOR)
    planted = subprocess.Popen([sys.executable, str(script), "127.0.0.1"], stdout=subprocess.PIPE, text=True)
    try:
        assert planted.stdout is not None
        port = int(planted.stdout.readline())
        folder = tmp_path / "~" / "AppData" / "Local" / "Blender"
        folder.mkdir(parents=True)
        record = {"http": f"http://127.0.0.1:{port}", "token": TOKEN, "pid": planted.pid}
        (folder / "server.json").write_text(json.dumps(record))
        environment = {"PATH": os.environ["PATH"], **{k: v for k, v in os.environ.items() if k.startswith("UV_")}}
        run = subprocess.run(
            [*CLI, "call", "get_objects_summary"],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=tmp_path,
            env=environment,
        )
    finally:
        planted.kill()
        out, _ = planted.communicate(timeout=30)
    assert "RECEIVED" not in out
    assert run.returncode == 3 and str(folder) not in run.stderr and "SYSTEM" not in run.stdout
    assert str(Path(pwd.getpwuid(os.getuid()).pw_dir) / "AppData") in run.stderr  # the account's home instead
