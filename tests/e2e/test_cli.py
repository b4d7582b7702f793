"""The README's commands, run as a person runs them."""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil
import pytest

from hermes_blender.contract.liveness import RuntimeFileSpec
from hermes_blender.headless import HeadlessBlender
from hermes_blender.instances import instance_spec
from tests.other_user import OtherUser, needs_a_made_user
from tests.pseudo_terminal import read_all

CLI = [sys.executable, "-m", "hermes_blender.cli"]


def test_demo_prints_the_factory_scene_and_cleans_up() -> None:
    run = subprocess.run([*CLI, "demo"], capture_output=True, text=True, timeout=180)
    assert run.returncode == 0, run.stderr
    assert "Scene 'Scene': 3 objects" in run.stdout
    for name in ("Camera (CAMERA)", "Cube (MESH) [active, selected]", "Light (LIGHT)"):
        assert name in run.stdout
    assert "runtime file removed" in run.stderr


def test_demo_json_is_machine_readable() -> None:
    run = subprocess.run([*CLI, "demo", "--json"], capture_output=True, text=True, timeout=180)
    assert run.returncode == 0, run.stderr
    payload = json.loads(run.stdout)
    assert payload["is_error"] is False and payload["result"]["active_object"] == "Cube"


def test_call_reads_the_runtime_file_and_never_prints_the_token(tmp_path: Path) -> None:
    path = tmp_path / "server.json"
    with HeadlessBlender(path) as blender:
        token = json.loads(path.read_text())["token"]
        run = subprocess.run(
            [*CLI, "call", "get_objects_summary", "--runtime-file", str(path), "--json"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert blender.pid
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["result"]["scene_name"] == "Scene"
    assert token not in run.stdout + run.stderr


def test_call_writes_the_answers_pictures_to_files_and_prints_their_paths_never_base64(tmp_path: Path) -> None:
    path = tmp_path / "server.json"
    arguments = json.dumps({"tile_size": 64, "views": ["front", "top"]})
    with HeadlessBlender(path):
        named = subprocess.run(
            [
                *CLI,
                "call",
                "get_view_montage",
                "--arguments",
                arguments,
                "--runtime-file",
                str(path),
                "--images",
                str(tmp_path / "pictures"),
            ],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=tmp_path,
        )
        fresh = subprocess.run(
            [*CLI, "call", "get_view_montage", "--arguments", arguments, "--runtime-file", str(path), "--json"],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=tmp_path,
        )
    assert named.returncode == 0, named.stderr
    picture = tmp_path / "pictures" / "get_view_montage-1.png"
    assert f"picture: {picture}" in named.stdout and picture.read_bytes().startswith(b"\x89PNG")
    assert "iVBORw0KGgo" not in named.stdout + fresh.stdout  # a PNG's base64 never reaches the terminal
    written = json.loads(fresh.stdout)["images"]
    assert len(written) == 1 and Path(written[0]).parent.parent == tmp_path
    assert Path(written[0]).read_bytes().startswith(b"\x89PNG")


def test_call_without_blender_names_the_state_and_exits_3(tmp_path: Path) -> None:
    run = subprocess.run(
        [*CLI, "call", "get_objects_summary", "--runtime-file", str(tmp_path / "none.json")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 3
    assert "[app_not_running]" in run.stderr and "no runtime file" in run.stderr


@pytest.mark.skipif(sys.platform == "win32", reason="a command line of bytes that are not UTF-8: POSIX only")
@pytest.mark.parametrize("where", ["tool", "arguments"])
def test_a_call_whose_command_line_is_not_utf8_text_is_a_clear_error_not_a_traceback(
    tmp_path: Path, where: str
) -> None:
    tool = os.fsencode("get_objects_summary") + (b"\xe9" if where == "tool" else b"")
    arguments = b'{"name": "caf\xe9"}' if where == "arguments" else b"{}"
    run = subprocess.run(
        [*map(os.fsencode, CLI), b"call", tool, b"--arguments", arguments, b"--runtime-file", b"none.json"],
        capture_output=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert run.returncode == 2 and b"Traceback" not in run.stderr  # EXIT_FAILURE, as for arguments not JSON
    assert b"not UTF-8 text" in run.stderr


@pytest.mark.skipif(sys.platform == "win32", reason="a command line of bytes that are not UTF-8: POSIX only")
def test_mcp_refuses_a_file_to_pin_whose_name_is_not_utf8_and_says_to_pin_by_pid(tmp_path: Path) -> None:
    """Blender's answers say such a name with U+FFFD, which another file's may share: it cannot pin one Blender."""
    run = subprocess.run(
        [*map(os.fsencode, CLI), b"mcp", b"--file", b"caf\xe9.blend", b"--runtime-file", b"none.json"],
        capture_output=True,
        timeout=60,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
    )
    assert run.returncode == 2 and b"Traceback" not in run.stderr
    assert b"--file caf\\udce9.blend is not UTF-8" in run.stderr and b"--pid" in run.stderr


@contextmanager
def _serving(
    tmp_path: Path,
    *,
    log: bool = True,
    env: dict[str, str] | None = None,
    extra: tuple[str, ...] = (),
    cwd: Path | None = None,
) -> Iterator[subprocess.Popen[str]]:
    """`hermes-blender serve` in its own process group, like a terminal's foreground job; never left running.
    Without `log`, Blender's console goes where serve keeps it by default."""
    serve = subprocess.Popen(
        [
            *CLI,
            "serve",
            "--runtime-file",
            str(tmp_path / "server.json"),
            *(["--log-file", str(tmp_path / "serve.log")] if log else []),
            *extra,
        ],
        stdin=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        env=env,
        cwd=cwd,
    )
    try:
        yield serve
    finally:
        if serve.poll() is None:
            os.killpg(serve.pid, signal.SIGKILL)
            serve.wait()


def _assert_clean_stop(serve: subprocess.Popen[str], code: int, tmp_path: Path) -> None:
    assert serve.stderr is not None
    output = serve.stderr.read()
    assert code == 0, output
    assert output.rstrip().endswith("stopped; runtime file removed") and not (tmp_path / "server.json").exists()
    assert "Fatal Python error" not in output and (tmp_path / "serve.log").is_file()


@pytest.mark.skipif(sys.platform == "win32", reason="process groups and SIGTERM")
@pytest.mark.parametrize("how", ["Ctrl+C to the whole group", "SIGTERM", "stdin closed"])
def test_serve_stops_cleanly_however_it_is_told_to(tmp_path: Path, how: str) -> None:
    with _serving(tmp_path) as serve:
        _until_published(serve, tmp_path / "server.json")
        if how.startswith("Ctrl+C"):
            os.killpg(serve.pid, signal.SIGINT)  # the terminal sends it to Blender's child too
        elif how == "SIGTERM":
            os.kill(serve.pid, signal.SIGTERM)
        else:
            assert serve.stdin is not None
            serve.stdin.close()
        code = serve.wait(60)
    _assert_clean_stop(serve, code, tmp_path)


def _until_published(serve: subprocess.Popen[str], runtime_file: Path) -> None:
    deadline = time.monotonic() + 120
    while not runtime_file.exists():
        assert time.monotonic() < deadline and serve.poll() is None, "serve never published"
        time.sleep(0.05)


@pytest.mark.skipif(sys.platform == "win32", reason="process groups and SIGKILL")
@pytest.mark.timeout(300)
def test_serve_withdraws_the_runtime_file_of_its_blender_killed_with_sigkill(tmp_path: Path) -> None:
    """A killed Blender cannot withdraw its runtime files: serve, which sees it die, withdraws them for it (its own
    records too, and the Lab listener's file), only while they still name that pid."""
    runtime_file = tmp_path / "server.json"
    lab_file = tmp_path / "lab" / "server.json"
    with _serving(tmp_path, extra=("--lab-port", "0")) as serve:
        _until_published(serve, runtime_file)
        (blender,) = psutil.Process(serve.pid).children()
        record = Path(instance_spec(RuntimeFileSpec(path=str(runtime_file)), blender.pid).path)
        assert json.loads(runtime_file.read_text())["pid"] == blender.pid and record.exists()
        assert json.loads(lab_file.read_text())["pid"] == blender.pid
        blender.kill()
        code = serve.wait(60)
    assert serve.stderr is not None
    said = serve.stderr.read()
    assert code == 2 and f"Blender exited with code -{signal.SIGKILL.value}" in said, said
    assert not runtime_file.exists() and not record.exists()
    assert not lab_file.exists() and not list((tmp_path / "lab" / "servers").glob("*.json"))


@pytest.fixture
def planted_home(other_user: OtherUser) -> Iterator[tuple[Path, Path]]:
    """A home of the made user, in which that user, as themselves, has linked ~/.cache/hermes-blender/serve.log to
    a file of root's (0644): the home and root's file."""
    outer = Path(tempfile.mkdtemp(prefix="bb-planted-"))
    try:
        outer.chmod(0o755)
        home, roots_file = outer / "home", outer / "app.conf"
        home.mkdir()
        shutil.chown(home, other_user.uid, other_user.gid)
        roots_file.write_text("root's own settings\n")
        roots_file.chmod(0o644)
        log = home / ".cache" / "hermes-blender" / "serve.log"
        for command in (["mkdir", "-p", str(log.parent)], ["ln", "-s", str(roots_file), str(log)]):
            subprocess.run([*other_user.run_as, *command], check=True, timeout=60)
        yield home, roots_file
    finally:
        shutil.rmtree(outer)


@needs_a_made_user
@pytest.mark.timeout(300)
def test_serve_as_root_in_another_users_home_writes_no_log_through_their_link_and_serves_on(
    tmp_path: Path, planted_home: tuple[Path, Path]
) -> None:
    """`sudo -E hermes-blender serve`: its default log lies in the user's ~/.cache, where the user linked it to
    root's file, which serve appended Blender's console to and made 0600. It says why it keeps no log, and serves."""
    home, roots_file = planted_home
    env = {key: value for key, value in os.environ.items() if key != "XDG_CACHE_HOME"}
    with _serving(tmp_path, log=False, env={**env, "HOME": str(home)}) as serve:
        _until_published(serve, tmp_path / "server.json")
        os.kill(serve.pid, signal.SIGTERM)
        code = serve.wait(60)
    assert serve.stderr is not None
    said = serve.stderr.read()
    assert code == 0 and not (tmp_path / "server.json").exists(), said
    assert roots_file.read_text() == "root's own settings\n" and stat.S_IMODE(roots_file.stat().st_mode) == 0o644
    log = home / ".cache" / "hermes-blender" / "serve.log"
    assert f"hermes-blender: warning: the log is not kept in {log}: {home} (on the way to" in said, said
    assert "serving without a log file" in said


@pytest.mark.skipif(sys.platform == "win32", reason="process groups")
@pytest.mark.parametrize("after", [0.0, 0.5, 1.0])
def test_ctrl_c_while_blender_starts_is_a_clean_stop_not_a_start_failure(tmp_path: Path, after: float) -> None:
    """Once serve has started Blender, wherever start-up has got to (Blender loading, the bridge starting, just
    published), Ctrl+C to the whole group stops it cleanly."""
    with _serving(tmp_path) as serve:
        deadline = time.monotonic() + 60
        while not psutil.Process(serve.pid).children():  # serve has started Blender
            assert time.monotonic() < deadline and serve.poll() is None, "serve never started Blender"
            time.sleep(0.01)
        time.sleep(after)
        os.killpg(serve.pid, signal.SIGINT)
        code = serve.wait(60)
    _assert_clean_stop(serve, code, tmp_path)


_LISTENER = """
import socket, sys
server = socket.create_server(("127.0.0.1", 0))
print(server.getsockname()[1], flush=True)
conn, _ = server.accept()
open(sys.argv[1], "wb").write(conn.recv(65536))
"""


def test_call_never_sends_the_token_to_a_process_that_is_not_the_blender_owning_the_port(tmp_path: Path) -> None:
    """A stale file whose pid is alive but now another program, listening on the old port: the token stays home."""
    received = tmp_path / "received"
    stranger = subprocess.Popen([sys.executable, "-c", _LISTENER, str(received)], stdout=subprocess.PIPE, text=True)
    try:
        assert stranger.stdout is not None
        port = int(stranger.stdout.readline())
        token = "t" * 43
        runtime_file = tmp_path / "server.json"
        runtime_file.write_text(json.dumps({"http": f"http://127.0.0.1:{port}", "token": token, "pid": stranger.pid}))
        run = subprocess.run(
            [*CLI, "call", "get_objects_summary", "--runtime-file", str(runtime_file)],
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        stranger.kill()
        stranger.wait()
    assert run.returncode == 3, run.stderr
    assert "is not a Blender process" in run.stderr and "nothing was sent" in run.stderr
    assert "Traceback" not in run.stderr and token not in run.stderr + run.stdout
    assert not received.exists()


def test_on_a_terminal_a_frame_range_render_draws_a_progress_bar_on_stderr(tmp_path: Path) -> None:
    import pty

    path = tmp_path / "server.json"
    small = "r = bpy.context.scene.render\nr.engine = 'BLENDER_WORKBENCH'\nr.resolution_x = r.resolution_y = 256"
    frames = tmp_path / "frames"
    frames.mkdir()
    arguments = json.dumps({"output_folder": str(frames), "frame_start": 1, "frame_end": 24})
    controller, terminal = pty.openpty()
    with HeadlessBlender(path):
        subprocess.run(
            [
                *CLI,
                "call",
                "execute_blender_code",
                "--arguments",
                json.dumps({"code": small}),
                "--runtime-file",
                str(path),
            ],
            capture_output=True,
            timeout=120,
            check=True,
        )
        run = subprocess.run(
            [*CLI, "call", "render_frames_to_folder", "--arguments", arguments, "--runtime-file", str(path)],
            stdout=subprocess.PIPE,
            stderr=terminal,
            timeout=120,
        )
    os.close(terminal)
    text = read_all(controller)
    assert run.returncode == 0, text
    assert "\r" in text and "%" in text and "[#" in text and "of 24" in text, text
    assert "[#" not in run.stdout.decode()  # the bar is on stderr only; stdout is the result
    assert len(list(frames.glob("*.png"))) == 24


def test_pictures_never_overwrite_a_file_and_a_folder_that_is_a_file_still_prints_the_answer(tmp_path: Path) -> None:
    path = tmp_path / "server.json"
    folder = tmp_path / "pictures"
    folder.mkdir()
    (folder / "get_view_montage-1.png").write_text("the user's own file")
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("a file")
    arguments = json.dumps({"tile_size": 64, "views": ["front"]})
    base = [*CLI, "call", "get_view_montage", "--arguments", arguments, "--runtime-file", str(path), "--json"]
    with HeadlessBlender(path):
        beside = subprocess.run([*base, "--images", str(folder)], capture_output=True, text=True, timeout=120)
        refused = subprocess.run([*base, "--images", str(blocked)], capture_output=True, text=True, timeout=120)
    assert beside.returncode == 0, beside.stderr
    assert (folder / "get_view_montage-1.png").read_text() == "the user's own file"
    assert json.loads(beside.stdout)["images"] == [str(folder / "get_view_montage-1-2.png")]
    assert refused.returncode == 2 and "could not be written" in refused.stderr
    assert json.loads(refused.stdout)["result"]["views"] == ["front"]  # the answer is printed all the same


def _montage(blender: HeadlessBlender, folder: Path) -> subprocess.CompletedProcess[str]:
    """`call get_view_montage --images FOLDER --json`: one picture."""
    arguments = json.dumps({"tile_size": 64, "views": ["front"]})
    return subprocess.run(
        [
            *CLI,
            "call",
            "get_view_montage",
            "--arguments",
            arguments,
            "--runtime-file",
            str(blender.runtime_file),
            "--images",
            str(folder),
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )


def _answered_without_pictures(run: subprocess.CompletedProcess[str]) -> None:
    """Exit 2, one error line saying so, and the answer printed all the same (what the call did is done)."""
    assert run.returncode == 2 and run.stderr.startswith("hermes-blender: error: "), run.stderr
    answer = json.loads(run.stdout)
    assert answer["result"]["views"] == ["front"] and "images" not in answer


@pytest.fixture
def users_folder(other_user: OtherUser) -> Iterator[tuple[Path, Path]]:
    """A folder of the made user's, and a folder only root may enter, side by side in a folder every user may enter."""
    outer = Path(tempfile.mkdtemp(prefix="bb-pictures-"))
    try:
        outer.chmod(0o755)
        theirs, roots = outer / "theirs", outer / "roots"
        theirs.mkdir()
        shutil.chown(theirs, other_user.uid, other_user.gid)
        roots.mkdir(0o700)
        yield theirs, roots
    finally:
        shutil.rmtree(outer)


@needs_a_made_user
@pytest.mark.timeout(300)
def test_pictures_are_never_written_through_a_link_another_user_planted_at_the_folder(
    blender: HeadlessBlender, users_folder: tuple[Path, Path], other_user: OtherUser
) -> None:
    """Root runs `call ... --images /tmp/shots`, which Ana linked to a folder of root's in a folder every user may
    add to (sticky, as /tmp): nothing is written there."""
    theirs, roots = users_folder
    shared = theirs.parent
    shared.chmod(0o1777)
    subprocess.run([*other_user.run_as, "ln", "-s", str(roots), str(shared / "shots")], check=True, timeout=60)
    run = _montage(blender, shared / "shots")
    _answered_without_pictures(run)
    assert f"{shared / 'shots'} is a symbolic link" in run.stderr and "could not be written" in run.stderr
    assert list(roots.iterdir()) == []


@needs_a_made_user
@pytest.mark.timeout(300)
def test_pictures_are_never_written_through_a_link_another_user_planted_on_the_way(
    blender: HeadlessBlender, users_folder: tuple[Path, Path], other_user: OtherUser
) -> None:
    """Root runs `call ... --images ~ana/shots/today`, and Ana's `shots` links to a folder of root's: the folder
    root would make there, and the pictures, are never made."""
    theirs, roots = users_folder
    subprocess.run([*other_user.run_as, "ln", "-s", str(roots), str(theirs / "shots")], check=True, timeout=60)
    run = _montage(blender, theirs / "shots" / "today")
    _answered_without_pictures(run)
    assert f"{theirs} (on the way to {theirs / 'shots' / 'today'}) is not safe" in run.stderr, run.stderr
    assert list(roots.iterdir()) == []


def _montage_here(blender: HeadlessBlender, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`call get_view_montage --json` with no --images, run in `cwd`: its picture goes to a new folder there."""
    arguments = json.dumps({"tile_size": 64, "views": ["front"]})
    return subprocess.run(
        [*CLI, "call", "get_view_montage", "--arguments", arguments, "--runtime-file", str(blender.runtime_file)]
        + ["--json"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
    )


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="a working folder no one may make a folder in: /proc")
@pytest.mark.timeout(300)
def test_pictures_with_no_folder_to_go_to_are_said_and_the_answer_is_printed(blender: HeadlessBlender) -> None:
    """Run where no folder can be made (a read-only place, another user's folder): the call is done all the same."""
    run = _montage_here(blender, Path("/proc"))
    _answered_without_pictures(run)
    assert "could not be written in a new folder in /proc" in run.stderr and "Traceback" not in run.stderr


@needs_a_made_user
@pytest.mark.timeout(300)
def test_pictures_refused_in_another_users_folder_leave_no_folder_behind_there(
    blender: HeadlessBlender, users_folder: tuple[Path, Path], other_user: OtherUser
) -> None:
    """Root runs `call` in Ana's folder: the new folder for the pictures would be root's inside hers (she could
    rename it), so it is refused, and the empty folder made to find that out is removed."""
    theirs, _ = users_folder
    run = _montage_here(blender, theirs)
    _answered_without_pictures(run)
    assert "is not safe: it belongs to another user" in run.stderr, run.stderr
    assert list(theirs.iterdir()) == []


def _of_nobody(folder: Path) -> str:
    if os.name != "posix" or os.geteuid() != 0:
        pytest.skip("giving a folder to another user needs root")
    os.chown(folder, 65534, 65534)
    return "belongs to uid 65534, not to this user"


def _open_to_all(folder: Path) -> str:
    folder.chmod(0o777)
    return "every user may write to it and it has no sticky bit"


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX owners and modes")
@pytest.mark.timeout(300)
@pytest.mark.parametrize("make", [_of_nobody, _open_to_all], ids=["another-users", "open-to-all"])
def test_pictures_are_refused_in_a_folder_another_user_may_change(
    blender: HeadlessBlender, tmp_path: Path, make: Callable[[Path], str]
) -> None:
    """Another user could rename the pictures, or put their own in their place, before anyone looks at them."""
    folder = tmp_path / "shots"
    folder.mkdir()
    said = make(folder)
    run = _montage(blender, folder)
    _answered_without_pictures(run)
    assert said in run.stderr and list(folder.iterdir()) == []


@pytest.mark.timeout(300)
def test_a_picture_whose_every_name_is_taken_is_said_and_the_call_exits_2(
    blender: HeadlessBlender, tmp_path: Path
) -> None:
    """Names are never overwritten: when the 999 a picture may take are all taken, it is not written, and says so."""
    folder = tmp_path / "shots"
    folder.mkdir()
    taken = ["get_view_montage-1.png", *(f"get_view_montage-1-{n}.png" for n in range(2, 1000))]
    for name in taken:
        (folder / name).write_text("the user's own file")
    run = _montage(blender, folder)
    _answered_without_pictures(run)
    assert "get_view_montage-1.png to get_view_montage-1-999.png are all taken" in run.stderr, run.stderr
    assert sorted(p.name for p in folder.iterdir()) == sorted(taken)


@pytest.mark.timeout(300)
def test_inspects_pictures_are_named_for_what_they_show_before_and_after(
    blender: HeadlessBlender, tmp_path: Path
) -> None:
    arguments = json.dumps({"code": "bpy.context.active_object.location.x += 1\nresult = {}", "inspect": True})
    run = subprocess.run(
        [
            *CLI,
            "call",
            "execute_blender_code",
            "--arguments",
            arguments,
            "--runtime-file",
            str(blender.runtime_file),
            "--images",
            str(tmp_path / "shots"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    for shown in ("before", "after"):
        picture = tmp_path / "shots" / f"execute_blender_code-{shown}.png"
        assert f"picture: {picture}" in run.stdout and picture.read_bytes().startswith(b"\x89PNG")


@pytest.mark.skipif(sys.platform == "win32", reason="XDG_DATA_HOME")
@pytest.mark.timeout(300)
@pytest.mark.parametrize("chosen", [None, "relative"], ids=["by default", "a relative --checkpoint-folder"])
def test_serve_keeps_checkpoints_in_the_toolkits_data_folder_after_it_stops(tmp_path: Path, chosen: str | None) -> None:
    """Blender's user folder under serve is a temporary one (and its working folder too: a relative folder is
    serve's); a rescue checkpoint "may hold the only copy"."""
    data = tmp_path / "data"
    env = {**os.environ, "XDG_DATA_HOME": str(data)}
    extra = ("--checkpoint-folder", "data/hermes-blender/checkpoints") if chosen else ()
    with _serving(tmp_path, env=env, extra=extra, cwd=tmp_path) as serve:
        _until_published(serve, tmp_path / "server.json")
        saved = subprocess.run(
            [
                *CLI,
                "call",
                "save_checkpoint",
                "--arguments",
                '{"name": "before-the-chair"}',
                "--runtime-file",
                str(tmp_path / "server.json"),
                "--json",
            ],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
            stdin=subprocess.DEVNULL,
        )
        assert saved.returncode == 0, saved.stdout + saved.stderr
        assert serve.stdin is not None
        serve.stdin.close()
        code = serve.wait(60)
    _assert_clean_stop(serve, code, tmp_path)
    kept = data / "hermes-blender" / "checkpoints"
    assert (kept / "before-the-chair.blend").is_file() and (kept / "before-the-chair.json").is_file()
    assert (kept.stat().st_mode & 0o777) == 0o700
