"""The runtime file reader: the only source of an endpoint, strict, never a fallback."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from hermes_blender.contract import host as host_facts
from hermes_blender.contract.host import HostFacts
from hermes_blender.contract.liveness import RuntimeFileSpec, endpoint_url, read_live_endpoint
from hermes_blender.contract.redact import REDACTOR
from hermes_blender.errors import LiveEndpointUnavailable
from tests.hostile_files import KINDS, place, posix_only
from tests.other_user import AS_NOBODY, needs_another_user


def _host(alive: bool = True) -> HostFacts:
    return HostFacts(os="linux", env={"HOME": "/nonexistent"}, pid_alive=lambda pid: alive)


def _write(tmp_path: Path, record: object) -> RuntimeFileSpec:
    path = tmp_path / "server.json"
    path.write_text(record if isinstance(record, str) else json.dumps(record))
    return RuntimeFileSpec(path=str(path))


def test_valid_file_gives_the_rebuilt_endpoint_and_bearer_header(tmp_path: Path) -> None:
    spec = _write(tmp_path, {"http": "http://127.0.0.1:4567/ignored?x=1", "token": "tok-valid-0123456789", "pid": 42})
    endpoint = read_live_endpoint(spec, _host())
    assert endpoint.url == "http://127.0.0.1:4567/mcp"
    assert endpoint.pid == 42
    assert endpoint.headers() == {"Authorization": "Bearer tok-valid-0123456789"}


def test_token_is_registered_for_redaction_before_use_and_never_in_repr(tmp_path: Path) -> None:
    spec = _write(tmp_path, {"http": "http://127.0.0.1:4567", "token": "tok-secret-xyz-0123456789", "pid": 42})
    endpoint = read_live_endpoint(spec, _host())
    assert "tok-secret-xyz-0123456789" not in repr(endpoint) and "tok-secret-xyz-0123456789" not in str(endpoint)
    assert "tok-secret-xyz-0123456789" not in REDACTOR.redact("Authorization: Bearer tok-secret-xyz-0123456789")


def test_runtime_file_without_token_gives_no_authorization_header(tmp_path: Path) -> None:
    spec = _write(tmp_path, {"http": "http://127.0.0.1:4567", "pid": 42})
    assert read_live_endpoint(spec, _host()).headers() == {}


def test_dead_pid_is_app_not_running(tmp_path: Path) -> None:
    spec = _write(tmp_path, {"http": "http://127.0.0.1:4567", "token": "tok-valid-0123456789", "pid": 42})
    with pytest.raises(LiveEndpointUnavailable) as caught:
        read_live_endpoint(spec, _host(alive=False))
    assert caught.value.state == "app_not_running"


@pytest.mark.parametrize(
    "record",
    [
        None,
        "not json",
        "[1, 2]",
        {"http": "http://127.0.0.1:1"},
        {"http": "http://127.0.0.1:1", "pid": False},
        {"http": "http://127.0.0.1:1", "pid": 0},
        {"http": "http://127.0.0.1:1", "pid": 2**31},
        {"http": "http://127.0.0.1:1", "pid": "42"},
    ],
)
def test_missing_or_malformed_file_is_app_not_running_as_in_hermes(tmp_path: Path, record: object) -> None:
    spec = RuntimeFileSpec(path=str(tmp_path / "absent.json")) if record is None else _write(tmp_path, record)
    with pytest.raises(LiveEndpointUnavailable) as caught:
        read_live_endpoint(spec, _host())
    assert caught.value.state == "app_not_running"


@pytest.mark.parametrize(
    ("url", "state"),
    [
        ("http://127.0.0.1:1", "hermes_not_connected"),
        ("http://10.0.0.1:1", "endpoint_unavailable"),
    ],
)
def test_boolean_pid_is_never_dialled_but_reports_what_hermes_reads_as_pid_1(
    tmp_path: Path, url: str, state: str
) -> None:
    with pytest.raises(LiveEndpointUnavailable) as caught:
        read_live_endpoint(_write(tmp_path, {"http": url, "token": "tok-valid-0123456789", "pid": True}), _host())
    assert caught.value.state == state and "boolean pid" in str(caught.value)


@pytest.mark.parametrize(
    "url",
    [
        "https://127.0.0.1:4567",
        "http://user:pw@127.0.0.1:4567",
        "http://192.168.1.5:4567",
        "http://example.com:80",
        "http://127.0.0.1",
        "http://127.0.0.1:99999",
        "http://[::1:4567",
        "http://127.0.0.1:0",
        "ftp://127.0.0.1:21",
        "",
        12345,
        None,
        "http://127.0.0.1.evil.test:80",
    ],
)
def test_hostile_or_malformed_endpoints_are_unavailable_and_never_contacted(tmp_path: Path, url: object) -> None:
    spec = _write(tmp_path, {"http": url, "token": "tok-valid-0123456789", "pid": 42})
    with pytest.raises(LiveEndpointUnavailable) as caught:
        read_live_endpoint(spec, _host())
    assert caught.value.state == "endpoint_unavailable"


def test_ipv6_loopback_keeps_its_brackets() -> None:
    assert endpoint_url("http://[::1]:9000") == "http://[::1]:9000/mcp"
    assert endpoint_url("http://localhost:9000/x", "/other/path") == "http://localhost:9000/other/path"


@pytest.mark.parametrize("path", ["mcp", "/../etc", "/a b", "/mcp?x=1", "@evil.test/mcp"])
def test_hostile_endpoint_paths_are_refused(path: str) -> None:
    with pytest.raises(LiveEndpointUnavailable):
        endpoint_url("http://127.0.0.1:9000", path)


def test_a_path_that_looks_like_a_host_stays_on_the_published_port() -> None:
    assert endpoint_url("http://127.0.0.1:9000", "//evil.test/mcp") == "http://127.0.0.1:9000//evil.test/mcp"


def test_the_file_is_read_fresh_on_every_call(tmp_path: Path) -> None:
    spec = _write(tmp_path, {"http": "http://127.0.0.1:1111", "token": "tok-aaaaaaaaaaaaaaaa", "pid": 42})
    assert read_live_endpoint(spec, _host()).url.endswith(":1111/mcp")
    _write(tmp_path, {"http": "http://127.0.0.1:2222", "token": "tok-bbbbbbbbbbbbbbbb", "pid": 42})
    assert read_live_endpoint(spec, _host()).url.endswith(":2222/mcp")


def test_declared_path_expands_home_and_posix_vars_but_not_windows_vars_off_windows() -> None:
    host = HostFacts(os="linux", env={"HOME": "/home/ana", "XDG": "/x"})
    assert host.expand("~/AppData/Local/Blender/server.json") == "/home/ana/AppData/Local/Blender/server.json"
    assert host.expand("$XDG/a") == "/x/a" and host.expand("${XDG}/a") == "/x/a"
    assert host.expand("%LOCALAPPDATA%/Blender") == "%LOCALAPPDATA%/Blender"
    assert host.expand("$UNSET/a") == "$UNSET/a"
    windows = HostFacts(
        os="win32", env={"USERPROFILE": "C:\\Users\\ana", "LOCALAPPDATA": "C:\\Users\\ana\\AppData\\Local"}
    )
    assert windows.expand("%LOCALAPPDATA%/Blender") == "C:\\Users\\ana\\AppData\\Local/Blender"
    assert windows.expand("~/AppData") == "C:\\Users\\ana/AppData"


def test_real_pid_check_uses_the_live_process_table(tmp_path: Path) -> None:
    spec = _write(tmp_path, {"http": "http://127.0.0.1:4567", "token": "tok-valid-0123456789", "pid": os.getpid()})
    assert read_live_endpoint(spec, HostFacts()).pid == os.getpid()


def test_a_pid_is_alive_as_hermes_judges_it_by_signal_0() -> None:
    exited = subprocess.Popen([sys.executable, "-c", "pass"])
    exited.wait()
    host = HostFacts()
    assert host.pid_alive(os.getpid())
    assert not host.pid_alive(exited.pid)
    assert not host.pid_alive(0)  # signal 0 to pid 0 would reach this process group


@needs_another_user
def test_another_users_process_is_alive_though_this_user_may_not_signal_it(tmp_path: Path) -> None:
    """ "Permission denied" is a live process, as Hermes reads it: a Blender of another user is not "not running"
    (whether it may be trusted is the check before each connection, tests/e2e/test_trust.py)."""
    folder = Path(tempfile.mkdtemp(prefix="bb-other-user-"))
    try:
        folder.chmod(0o755)
        shutil.copyfile(Path(host_facts.__file__), folder / "host.py")
        asked = subprocess.run(
            [*AS_NOBODY, "/usr/bin/python3", "-c", f"import host; print(host._pid_alive({os.getpid()}))"],
            capture_output=True,
            text=True,
            cwd=folder,
            timeout=30,
        )
    finally:
        shutil.rmtree(folder)
    assert asked.stdout.strip() == "True", asked.stderr


def test_reading_never_opens_a_connection(tmp_path: Path) -> None:
    decoy = socket.socket()
    decoy.bind(("127.0.0.1", 0))
    decoy.listen()
    decoy.setblocking(False)
    port = decoy.getsockname()[1]
    spec = _write(tmp_path, {"http": f"http://127.0.0.1:{port}", "token": "tok-valid-0123456789", "pid": 42})
    read_live_endpoint(spec, _host())
    with pytest.raises(BlockingIOError):
        decoy.accept()
    decoy.close()


@pytest.mark.parametrize(
    "token", ["tok\nready", "tok\x00-0123456789abcdef", "\x1b]0;owned\x07-0123456789", "short", "a b" * 8]
)
def test_a_token_no_blender_writes_is_never_used(tmp_path: Path, token: str) -> None:
    spec = _write(tmp_path, {"http": "http://127.0.0.1:4567", "token": token, "pid": 42})
    with pytest.raises(LiveEndpointUnavailable) as caught:
        read_live_endpoint(spec, _host())
    assert caught.value.state == "endpoint_unavailable" and token not in str(caught.value)


@posix_only
@pytest.mark.parametrize("kind", KINDS)
def test_a_hostile_runtime_file_is_a_clear_state_not_a_hang(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "server.json"
    place(path, kind)
    with pytest.raises(LiveEndpointUnavailable) as caught:
        read_live_endpoint(RuntimeFileSpec(path=str(path)), _host())
    assert caught.value.state == "app_not_running"


def test_with_no_home_at_all_nothing_is_read_from_the_working_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No HOME and no home in the user database: `~/...` would be a path relative to wherever we were started."""
    monkeypatch.chdir(tmp_path)
    planted = tmp_path / "~" / "AppData" / "Local" / "Blender"
    planted.mkdir(parents=True)
    (planted / "server.json").write_text(json.dumps({"http": "http://127.0.0.1:4567", "pid": 42}))
    homeless = HostFacts(os="linux", env={}, pid_alive=lambda pid: True, account_home=lambda: None)
    with pytest.raises(LiveEndpointUnavailable, match="not absolute: this account has no home folder") as caught:
        read_live_endpoint(RuntimeFileSpec(), homeless)
    assert caught.value.state == "app_not_running"
