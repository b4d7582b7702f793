"""The stdio relay's own promises, in this process over real sockets: it dials only this user's Blender (the
transport's one check, before every new connection), `list_blenders` tells the model no port, and a runtime file
it judged before is read at every call (a rewrite, a mode that lets others write it, a pid that exited)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import types

from hermes_blender.contract.host import HostFacts
from hermes_blender.contract.liveness import RuntimeFileSpec
from hermes_blender.contract.redact import REDACTED, REDACTOR, Secret
from hermes_blender.errors import LiveEndpointUnavailable
from hermes_blender.instances import INSTANCES_FOLDER
from hermes_blender.stdio_calls import BlenderCalls, BlenderChoice, RuntimeFileReader, is_open_file
from hermes_blender.stdio_server import LIST_BLENDERS, StdioBridge, shipped_catalogue
from hermes_blender.transport import Links
from tests.scripted_bridge import ScriptedBridge, json_answer

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def listener() -> Iterator[ScriptedBridge]:
    """Listening where the runtime file says; this test's process (a Python, not a Blender) owns the port."""
    server = ScriptedBridge(lambda conn, request: conn.sendall(json_answer(request, {"content": []})) or True)
    yield server
    server.close()


def _published(folder: Path, port: int, pid: int | None = None) -> RuntimeFileSpec:
    """server.json and the process's own record naming it (this process by default), as a bridge in it would
    publish them."""
    pid = os.getpid() if pid is None else pid
    record = json.dumps({"http": f"http://127.0.0.1:{port}", "token": "relay-test-token-0123456789", "pid": pid})
    for path in (folder / "server.json", folder / INSTANCES_FOLDER / f"{pid}.json"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(record)
        path.chmod(0o600)
    return RuntimeFileSpec(path=str(folder / "server.json"))


def relayed_call(spec: RuntimeFileSpec, tool: str, *, states_as_results: bool = False) -> types.CallToolResult:
    """One call through the real relay, driven by the SDK's client over its in-memory streams."""
    from mcp import Client

    from hermes_blender.stdio_server import server

    async def run() -> types.CallToolResult:
        bridge = _bridge(spec, states_as_results=states_as_results)
        try:
            async with Client(server(bridge), mode="legacy") as client:
                return await client.call_tool(tool, {"code": "..."} if tool == "execute_blender_code" else {})
        finally:
            await bridge.close()

    return anyio.run(run)


def _bridge(spec: RuntimeFileSpec, *, states_as_results: bool = False) -> StdioBridge:
    """The relay's handlers, reaching Blender through `spec`."""
    return StdioBridge(lambda: BlenderCalls(BlenderChoice(spec), Links()), states_as_results=states_as_results)


def _call(spec: RuntimeFileSpec, name: str) -> types.CallToolResult:
    async def call() -> types.CallToolResult:
        bridge = _bridge(spec)
        try:
            return await bridge.call_tool(None, types.CallToolRequestParams(name=name, arguments={}))
        finally:
            await bridge.close()

    return anyio.run(call)


def test_the_relay_sends_nothing_to_a_process_that_is_not_this_users_blender(
    listener: ScriptedBridge, tmp_path: Path
) -> None:
    """A stale runtime file whose port is now held by another program of this user: no connection, no token. The
    program is a child sharing the listening socket, never this pytest, whose command line the developer picks
    (`pytest tests/blender` names a Blender folder)."""
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], pass_fds=[listener.fileno()])
    try:
        result = _call(_published(tmp_path, listener.port, other.pid), "get_objects_summary")
    finally:
        other.kill()
        other.wait()
    payload = json.loads(result.content[0].text)
    assert result.is_error and payload["state"] == "endpoint_unavailable"
    assert f"pid {other.pid}" in payload["detail"] and "is not a Blender process" in payload["detail"]
    assert "nothing was sent" in payload["detail"] and listener.connections == 0


def test_list_blenders_never_shows_the_model_a_port(listener: ScriptedBridge, tmp_path: Path) -> None:
    result = _call(_published(tmp_path, listener.port), LIST_BLENDERS)
    text = result.content[0].text
    assert not result.is_error and json.loads(text)["serving"][0]["pid"] == os.getpid()
    assert str(listener.port) not in text + json.dumps(result.structured_content)


def test_a_file_name_that_is_not_utf8_never_pins_a_blender_but_a_file_in_such_a_folder_does(tmp_path: Path) -> None:
    """`mcp --file`: the bridge says such a name with U+FFFD (an answer every client parses), which other names
    share (cp1251 `дом` and `кот` alike): matching it could pin another Blender's scene, so it never matches. A
    bare name still finds its file in a folder that is not UTF-8 (a Latin-1 home)."""
    said = f"{tmp_path}/caf\ufffd/chair.blend"
    assert not is_open_file(said, os.fsdecode(os.fsencode(tmp_path) + b"/caf\xe9/chair.blend"))
    assert not is_open_file(f"{tmp_path}/\ufffd.blend", "\ufffd.blend") and not is_open_file(said, said)
    assert not is_open_file(f"{tmp_path}/\ufffd.blend", os.fsdecode(b"\xe9.blend"))
    assert is_open_file(said, "chair.blend") and not is_open_file(said, "table.blend")
    assert is_open_file(f"{tmp_path}/caf\u00e9.blend", f"{tmp_path}/caf\u00e9.blend")


def test_a_lone_surrogate_an_older_bridge_or_a_record_sends_reaches_the_client_as_u_fffd(tmp_path: Path) -> None:
    """Add-ons before this toolkit escaped a path that is not UTF-8 (`\\udce9`), and any process of the user can
    write a record: parsed, the lone surrogate is one the SDK cannot write, and the relay ended."""
    path = os.fsdecode(b"/home/caf\xe9/chair.blend")

    def answer(conn: Any, request: Any) -> bool:
        listing = request.body["method"] == "tools/list"
        tools = {"tools": shipped_catalogue()}
        failed = {"content": [{"type": "text", "text": f"no file {path}"}], "isError": True}
        conn.sendall(json_answer(request, tools if listing else failed))
        return True

    bridge = ScriptedBridge(answer)
    blender = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)", "blender"], pass_fds=[bridge.fileno()]
    )
    try:
        spec = _published(tmp_path, bridge.port, blender.pid)
        record = tmp_path / INSTANCES_FOLDER / f"{blender.pid}.json"
        record.write_text(json.dumps({**json.loads(record.read_text()), "blender_version": os.fsdecode(b"5.1\xe9")}))
        answered, listed = relayed_call(spec, "get_objects_summary"), _call(spec, LIST_BLENDERS)
    finally:
        blender.kill()
        blender.wait()
        bridge.close()
    assert answered.is_error and answered.content[0].text == "no file /home/caf\ufffd/chair.blend"
    assert json.loads(listed.content[0].text)["serving"][0]["blender_version"] == "5.1\ufffd"
    for result in (answered, listed):
        result.model_dump_json()  # what the SDK's writer does for the relay's client


def _record(path: Path, port: int, token: str, pid: int) -> None:
    """The file as a bridge writes it: in place here, so that only its bytes can tell the versions apart."""
    path.write_text(json.dumps({"http": f"http://127.0.0.1:{port}", "token": token, "pid": pid}))
    path.chmod(0o600)


def test_a_runtime_file_rewritten_with_the_same_size_and_times_is_read_anew(tmp_path: Path) -> None:
    """A bridge restarted in the same Blender (same pid) can rewrite the file within one tick of the file system's
    clock, as long as before, on the inode just freed: the session follows its new port and token at the next call."""
    path = tmp_path / "server.json"
    reader = RuntimeFileReader(HostFacts())
    spec = RuntimeFileSpec(path=str(path))
    _record(path, 40001, "first-token-0123456789", os.getpid())
    before = os.stat(path)
    assert reader.endpoint(spec).port == 40001
    _record(path, 40002, "other-token-0123456789", os.getpid())
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert os.stat(path).st_size == before.st_size and os.stat(path).st_ino == before.st_ino
    endpoint = reader.endpoint(spec)
    assert endpoint.port == 40002 and endpoint.token.reveal() == "other-token-0123456789"


@pytest.mark.parametrize("change", ["group-writable", "another owner"])
def test_a_runtime_file_judged_before_is_refused_once_another_user_could_write_it(tmp_path: Path, change: str) -> None:
    """The owner and mode are checked at every read, the bytes unchanged: a file made group-writable, or given to
    another user, since it was judged is not trusted any more."""
    if change == "another owner" and os.geteuid() != 0:
        pytest.skip("giving a file to another user needs root (CI runs as root)")
    path = tmp_path / "server.json"
    reader = RuntimeFileReader(HostFacts())
    spec = RuntimeFileSpec(path=str(path))
    _record(path, 40001, "first-token-0123456789", os.getpid())
    assert reader.endpoint(spec).port == 40001
    if change == "group-writable":
        path.chmod(0o620)
    else:
        os.chown(path, 65534, -1)
    said = "can be written by other users" if change == "group-writable" else "belongs to uid 65534"
    with pytest.raises(LiveEndpointUnavailable, match=said) as refused:
        reader.endpoint(spec)
    assert refused.value.state == "endpoint_unavailable"


def test_a_runtime_file_judged_before_names_no_blender_once_its_pid_has_exited(tmp_path: Path) -> None:
    """The same bytes, and the Blender gone (killed: it never withdrew the file): Blender has exited, at once."""
    path = tmp_path / "server.json"
    reader = RuntimeFileReader(HostFacts())
    spec = RuntimeFileSpec(path=str(path))
    blender = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        _record(path, 40001, "first-token-0123456789", blender.pid)
        assert reader.endpoint(spec).pid == blender.pid
    finally:
        blender.kill()
        blender.wait()
    with pytest.raises(LiveEndpointUnavailable, match="which is not running") as gone:
        reader.endpoint(spec)
    assert gone.value.state == "app_not_running"


def test_the_token_of_a_judged_file_stays_redacted_at_every_call(tmp_path: Path) -> None:
    """The redactor keeps the latest tokens it was given: one the session keeps sending is given again at each call,
    or other Blenders' tokens (restarts, `list_blenders` reading every record) would push it out of the log's guard."""
    path = tmp_path / "server.json"
    token = "kept-session-token-0123456789"
    _record(path, 40001, token, os.getpid())
    reader, spec = RuntimeFileReader(HostFacts()), RuntimeFileSpec(path=str(path))
    reader.endpoint(spec)
    for i in range(64):
        REDACTOR.register(Secret(f"another-blender-token-{i:04d}"))
    assert reader.endpoint(spec).token.reveal() == token
    assert REDACTOR.redact(f"Bearer {token}") == f"Bearer {REDACTED}"


def test_a_session_that_followed_a_restart_stays_with_the_blender_it_follows_now(tmp_path: Path) -> None:
    """Blender X closed and the session followed the runtime file to Y: a newer Z that publishes the runtime file
    afterwards does not take the session from Y, whose own record it reads now, not X's."""
    blenders = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]) for _ in range(3)]
    x, y, z = (blender.pid for blender in blenders)
    records = tmp_path / INSTANCES_FOLDER
    records.mkdir()
    try:
        choice = BlenderChoice(_published(tmp_path, 40001, x))
        _record(records / f"{y}.json", 40002, "y-token-0123456789abcdef", y)
        assert anyio.run(choice.endpoint)[0].pid == x
        blenders[0].kill()
        blenders[0].wait()
        (records / f"{x}.json").unlink()
        _record(tmp_path / "server.json", 40002, "y-token-0123456789abcdef", y)
        followed, note = anyio.run(choice.endpoint)
        assert followed.pid == y and note is not None and f"pid {x}" in note
        _record(records / f"{z}.json", 40003, "z-token-0123456789abcdef", z)
        _record(tmp_path / "server.json", 40003, "z-token-0123456789abcdef", z)
        kept, note = anyio.run(choice.endpoint)
        assert kept.pid == y and note is None
    finally:
        for blender in blenders:
            blender.kill()
            blender.wait()


def test_a_session_keeps_at_most_a_few_runtime_files_judged_the_least_recently_read_dropped(tmp_path: Path) -> None:
    """A session that followed many Blenders keeps what it judged of the last few files only."""
    reader = RuntimeFileReader(HostFacts())
    specs = []
    for i in range(RuntimeFileReader.KEPT + 1):
        _record(tmp_path / f"{i}.json", 40000 + i, f"token-{i:02d}-0123456789abcdef", os.getpid())
        specs.append(RuntimeFileSpec(path=str(tmp_path / f"{i}.json")))
    for spec in specs[: RuntimeFileReader.KEPT]:
        reader.endpoint(spec)
    reader.endpoint(specs[0])  # read again: now the most recent
    reader.endpoint(specs[-1])  # one more than kept: the least recently read (specs[1]) goes
    assert list(reader._judged) == [*specs[2 : RuntimeFileReader.KEPT], specs[0], specs[-1]]
