"""`hermes-blender connect --write` against what users' config files really are: rewritten by their client at the
same moment, owned by someone else than root, kept as symlinks, full of numbers Python would change, or not files."""

from __future__ import annotations

import datetime
import errno
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from hermes_blender import client_configs
from hermes_blender.cli import main
from hermes_blender.client_configs import ATTEMPTS, CLIENTS, Launch, write_entry
from hermes_blender.contract.host import read_small_file
from hermes_blender.errors import ConnectError
from tests.other_user import AS_NOBODY, OtherUser, needs_a_made_user, needs_another_user

pytestmark = pytest.mark.timeout(120)

COMMAND = "/opt/tools/bin/hermes-blender"
LAUNCH = Launch(COMMAND, ("mcp",), "toolkit")
NOW = datetime.datetime(2026, 12, 1, 16, 0, 0)
STAMP = "20261201-160000"
posix_only = pytest.mark.skipif(os.name != "posix", reason="POSIX owners, modes, links and FIFOs")

_CLIENT_WRITES = """
import json, os, sys
path, key, style = sys.argv[1:]
with open(path) as file:
    settings = json.load(file)
settings[key] = True
text = json.dumps(settings)
if style == "rename":  # how Claude Code and Gemini CLI save: a new file renamed over the old
    with open(path + ".saving", "w") as file:
        file.write(text)
    os.replace(path + ".saving", path)
else:  # how a plain editor saves: the same file, rewritten
    with open(path, "r+") as file:
        file.write(text)
        file.truncate()
"""


def _client_writes(path: Path, key: str, style: str) -> None:
    """The client, a real process of its own, adds `key` to its config."""
    subprocess.run([sys.executable, "-c", _CLIENT_WRITES, str(path), key, style], check=True, timeout=60)


def _connect(
    *args: str | bytes, cwd: Path | None = None, env: dict[str, str] | None = None, prefix: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    """The real CLI, as a user runs it."""
    return subprocess.run(
        [*prefix, sys.executable, "-m", "hermes_blender.cli", "connect", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
        env=env,
    )


@pytest.mark.parametrize("style", ["rename", "in-place"])
def test_a_client_that_rewrites_its_config_during_the_merge_loses_nothing(tmp_path: Path, style: str) -> None:
    path = tmp_path / "settings.json"
    path.write_text('{"theme": "dark"}')
    races: list[str] = []

    def client_saves_in_the_window() -> None:
        if len(races) < 3:  # then it is quiet, and the merge goes through
            races.append(f"client-{len(races)}")
            _client_writes(path, races[-1], style)

    written = write_entry(CLIENTS["gemini"], LAUNCH, path, now=NOW, racer=client_saves_in_the_window)
    after = json.loads(path.read_text())
    assert races == ["client-0", "client-1", "client-2"]
    assert all(after[key] is True for key in races) and after["theme"] == "dark"
    assert after["mcpServers"]["blender"]["command"] == COMMAND
    assert written.backup is not None and set(json.loads(written.backup.read_text())) == {"theme", *races}
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([path.name, written.backup.name])


def test_a_config_that_never_stops_changing_is_left_to_its_client(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text("{}")
    keys = iter(range(ATTEMPTS))
    with pytest.raises(ConnectError, match="kept changing while it was merged"):
        write_entry(
            CLIENTS["gemini"], LAUNCH, path, now=NOW, racer=lambda: _client_writes(path, f"k{next(keys)}", "rename")
        )
    assert json.loads(path.read_text()) == {f"k{n}": True for n in range(ATTEMPTS)}
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no backup, no temporary file


_HAMMERING_CLIENT = """
import json, os, random, sys, time
path, stop = sys.argv[1:]
saves = 0
while not os.path.exists(stop):
    with open(path) as file:
        settings = json.load(file)
    if settings.get("saves", 0) < saves:  # our last save is not in the file (yet): never save over its loss
        time.sleep(0.001)
        continue
    saves += 1
    settings["saves"] = saves
    with open(path + ".saving", "w") as file:  # as Claude Code and Gemini CLI save: a new file renamed over
        file.write(json.dumps(settings))
    os.replace(path + ".saving", path)
    if saves == 1:
        print("saving", flush=True)
    time.sleep(random.random() / 500)
print(saves, flush=True)
"""


@pytest.mark.timeout(300)  # 300 merges beside a client that saves every millisecond or two, on a loaded machine
def test_a_client_saving_its_config_all_the_while_loses_no_save_to_many_connects(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A client of its own process saves its config every millisecond or two (a new file renamed over the old),
    while `connect --write` merges into it again and again: every save stays in the file. Each save counts up one
    key, and the client saves again only once its last save is back in the file, so a save that connect's rename
    ever replaced stops the count there (a client's save in the microseconds before connect's rename was lost about
    once in 40 writes before connect exchanged the two files and gave such a save its place back)."""
    path, stop = tmp_path / "settings.json", tmp_path / "stop"
    path.write_text('{"theme": "dark"}')
    client = subprocess.Popen([sys.executable, "-c", _HAMMERING_CLIENT, str(path), str(stop)], stdout=subprocess.PIPE)
    assert client.stdout is not None
    try:
        assert client.stdout.readline() == b"saving\n"
        written = runs = 0
        while written < 300:
            command = f"/opt/{runs % 2}/hermes-blender"  # another entry each time, so that each run writes
            written += main(["connect", "gemini", "--write", "--config", str(path), "--command", command]) == 0
            runs += 1
            assert runs < 3000, "connect could not write among the client's saves"
    finally:
        stop.touch()
        saves = int(client.communicate(timeout=60)[0])
    capsys.readouterr()
    after = json.loads(path.read_text())
    assert after["saves"] == saves and after["theme"] == "dark"
    assert main(["connect", "gemini", "--write", "--config", str(path), "--command", COMMAND]) == 0
    assert json.loads(path.read_text())["mcpServers"]["blender"]["command"] == COMMAND


@posix_only
def test_a_hard_linked_config_is_refused_and_every_name_keeps_the_same_file(tmp_path: Path) -> None:
    """A rename gives one name a new file and leaves the other names the old one: the link would split silently."""
    path, other = tmp_path / "mcp.json", tmp_path / "dotfiles-mcp.json"
    path.write_text('{"theme": "dark"}')
    os.link(path, other)
    before = _state(tmp_path)
    done = _connect("cursor", "--write", "--config", str(path), "--command", COMMAND)
    assert done.returncode == 2 and done.stdout == "" and done.stderr.count("\n") == 1, done
    assert "has 2 hard links" in done.stderr and "nothing was changed" in done.stderr, done.stderr
    assert _state(tmp_path) == before and path.stat().st_ino == other.stat().st_ino


_KILLED_MID_WRITE = """
import sys, time
from pathlib import Path
from hermes_blender.client_configs import CLIENTS, Launch, write_entry

def wait_to_be_killed() -> None:
    print("writing", flush=True)  # its new file is written beside the config, not yet in its place
    time.sleep(600)

write_entry(CLIENTS["cursor"], Launch("/opt/old/hermes-blender", ("mcp",), "toolkit"), Path(sys.argv[1]),
            racer=wait_to_be_killed)
"""


@posix_only
def test_the_temporary_file_of_a_connect_killed_mid_write_is_removed_by_the_next_one(tmp_path: Path) -> None:
    """SIGKILL cannot be caught: a killed connect's file beside the config is named for its process, and the next
    connect removes such files of processes that are gone, never one of a connect still at work."""
    path = tmp_path / "mcp.json"
    path.write_text('{"theme": "dark"}')
    at_work = tmp_path / f".mcp.json.connect-{os.getpid()}-abcd1234.tmp"  # this process is alive
    at_work.write_text("{}")
    killed = subprocess.Popen([sys.executable, "-c", _KILLED_MID_WRITE, str(path)], stdout=subprocess.PIPE, text=True)
    assert killed.stdout is not None and killed.stdout.readline() == "writing\n"
    killed.kill()
    killed.wait(timeout=60)
    backups = set(tmp_path.glob("mcp.json.bak-*"))
    left = set(tmp_path.iterdir()) - {path, at_work, *backups}
    assert len(left) == 1 and json.loads(left.pop().read_text())["mcpServers"]["blender"]["args"] == ["mcp"]
    done = _connect("cursor", "--write", "--config", str(path), "--command", COMMAND)
    assert done.returncode == 0, done.stderr
    assert set(tmp_path.iterdir()) - set(tmp_path.glob("mcp.json.bak-*")) == {path, at_work}
    assert json.loads(path.read_text())["mcpServers"]["blender"]["command"] == COMMAND


def _failing_once(real: Callable[..., Any], when: Callable[..., bool]) -> Callable[..., Any]:
    """`real`, but the first call that `when` picks fails as a disk can (EIO)."""
    failed: list[bool] = []

    def call(*args: Any, **kwargs: Any) -> Any:
        if not failed and when(*args, **kwargs):
            failed.append(True)
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        return real(*args, **kwargs)

    return call


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the exchange is Linux's renameat2")
def test_a_file_displaced_by_the_exchange_that_cannot_be_read_is_given_back_and_the_merge_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whose the displaced file is cannot be told, so it is another writer's until shown otherwise: it takes its
    name back and the merge starts again from it (never "nothing was changed" with the merge in place)."""
    path = tmp_path / "settings.json"
    path.write_text('{"theme": "dark"}')
    monkeypatch.setattr(
        client_configs,
        "read_small_file",
        _failing_once(read_small_file, lambda found, *_, **__: ".connect-" in str(found)),
    )
    written = write_entry(CLIENTS["gemini"], LAUNCH, path, now=NOW)
    after = json.loads(path.read_text())
    assert written.changed and after["theme"] == "dark" and after["mcpServers"]["blender"]["command"] == COMMAND
    assert written.backup is not None
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([path.name, written.backup.name])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the exchange is Linux's renameat2")
@pytest.mark.parametrize("then", ["the put-back fails", "the client removes its config"])
def test_a_save_displaced_by_the_exchange_that_cannot_get_its_name_back_is_kept_and_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, then: str
) -> None:
    """A client saved between the last look and the exchange; then giving its file its name back fails (a disk
    error), or there is no name to give (the client removed its config right after the exchange). Its save is then
    in the only other copy, which is kept and named: never removed under "nothing was changed"."""
    path = tmp_path / "settings.json"
    path.write_text('{"theme": "dark"}')
    exchanges: list[Path] = []

    def exchange(first: Path, second: Path) -> bool:
        exchanges.append(first)
        if len(exchanges) == 1:
            _client_writes(path, "saved-meanwhile", "rename")  # just before our exchange, as a client can
            done = real_exchange(first, second)
            if then == "the client removes its config":
                path.unlink()
            return done
        if then == "the put-back fails":
            raise OSError(errno.EIO, os.strerror(errno.EIO), str(second))
        return real_exchange(first, second)

    real_exchange = client_configs._exchange
    monkeypatch.setattr(client_configs, "_exchange", exchange)
    with pytest.raises(ConnectError) as refused:
        write_entry(CLIENTS["gemini"], LAUNCH, path, now=NOW)
    kept = exchanges[0]
    assert f"the file it held is kept at {kept}" in str(refused.value), refused.value
    assert json.loads(kept.read_text()) == {"theme": "dark", "saved-meanwhile": True}
    if then == "the put-back fails":
        assert json.loads(path.read_text())["mcpServers"]["blender"]["command"] == COMMAND


@needs_another_user
def test_run_as_root_in_a_users_home_the_config_keeps_its_owner_group_and_mode() -> None:
    """`sudo -E hermes-blender connect ... --write`: root writes the user's ~/.claude.json, which holds their sign-in."""
    with tempfile.TemporaryDirectory() as folder:
        home = Path(folder)
        os.chown(home, 65534, 65534)
        config = home / ".claude.json"
        config.write_text('{"oauthAccount": {"emailAddress": "ana@example.com"}}')
        os.chown(config, 65534, 65534)
        config.chmod(0o600)
        done = _connect("claude-code", "--write", "--command", COMMAND, env={**os.environ, "HOME": str(home)})
        assert done.returncode == 0, done.stderr
        backups = list(home.glob(".claude.json.bak-*"))
        assert len(backups) == 1
        for path in (config, *backups):
            status = path.lstat()
            assert (status.st_uid, status.st_gid, stat.S_IMODE(status.st_mode)) == (65534, 65534, 0o600), path
        read = subprocess.run(
            [
                *AS_NOBODY,
                "/usr/bin/python3",
                "-c",
                "import json, sys; print(json.load(open(sys.argv[1]))['mcpServers']['blender']['command'])",
                str(config),
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert read.returncode == 0 and read.stdout.strip() == COMMAND, read.stderr


@pytest.fixture
def users_home(other_user: OtherUser) -> Iterator[Path]:
    """A home the made user owns (0755), in a folder of root's that every user may enter (pytest's are root's alone)."""
    outer = Path(tempfile.mkdtemp(prefix="bb-home-"))
    try:
        outer.chmod(0o755)
        home = outer / "home"
        home.mkdir()
        os.chown(home, other_user.uid, other_user.gid)
        yield home
    finally:
        shutil.rmtree(outer)


@pytest.fixture
def roots_folder() -> Iterator[Path]:
    """A folder only root may enter (0700), holding root's app.json (0644): what a user must never read or change."""
    folder = Path(tempfile.mkdtemp(prefix="bb-root-only-"))
    try:
        (folder / "app.json").write_text('{"secret": "root only"}')
        (folder / "app.json").chmod(0o644)
        yield folder
    finally:
        shutil.rmtree(folder)


def _reads(prefix: tuple[str, ...], path: Path) -> subprocess.CompletedProcess[str]:
    """`path` read by the user `prefix` runs as (the system's Python: another user may not reach our venv)."""
    code = "import sys; print(open(sys.argv[1]).read())"
    return subprocess.run(
        [*prefix, "/usr/bin/python3", "-c", code, str(path)], capture_output=True, text=True, timeout=60
    )


def _as_user(user: OtherUser, path: Path) -> Path:
    """`path` (a link itself, not what it names) given to the user, as what they made is theirs."""
    os.chown(path, user.uid, user.gid, follow_symlinks=False)
    return path


@needs_a_made_user
@pytest.mark.parametrize(
    ("client", "config"), [("cursor", ".cursor/mcp.json"), ("windsurf", ".codeium/windsurf/mcp_config.json")]
)
def test_run_as_root_with_no_config_yet_the_new_folders_and_file_are_the_users_and_owner_only(
    users_home: Path, other_user: OtherUser, client: str, config: str
) -> None:
    """`sudo -E hermes-blender connect cursor --write` made ~/.cursor root's and mcp.json root's 0600: the user could
    no longer read their own config. New folders are 0700 and the file 0600 because a client keeps secrets there."""
    done = _connect(client, "--write", "--command", COMMAND, env={**os.environ, "HOME": str(users_home)})
    assert done.returncode == 0, done.stderr
    path = users_home / config
    made = [users_home / Path(config).parents[n] for n in reversed(range(len(Path(config).parents) - 1))]
    for each, mode in [*((folder, 0o700) for folder in made), (path, 0o600)]:
        status = each.lstat()
        assert (status.st_uid, status.st_gid, stat.S_IMODE(status.st_mode)) == (
            other_user.uid,
            other_user.gid,
            mode,
        ), each
    read = _reads(other_user.run_as, path)
    assert read.returncode == 0 and json.loads(read.stdout)["mcpServers"]["blender"]["command"] == COMMAND, read


def _settings_linked_to(target: Path, home: Path, user: OtherUser) -> Path:
    """The user's own ~/.gemini, its settings.json a link the user made to `target`."""
    (home / ".gemini").mkdir()
    _as_user(user, home / ".gemini")
    (home / ".gemini" / "settings.json").symlink_to(target)
    return _as_user(user, home / ".gemini" / "settings.json")


def _link_to_roots_file(home: Path, roots: Path, user: OtherUser) -> Path:
    return _settings_linked_to(roots / "app.json", home, user)


def _link_to_roots_folder(home: Path, roots: Path, user: OtherUser) -> Path:
    (roots / "settings.json").write_text('{"secret": "root only"}')
    (home / ".gemini").symlink_to(roots)
    return _as_user(user, home / ".gemini")


def _link_to_a_new_file_in_roots_folder(home: Path, roots: Path, user: OtherUser) -> Path:
    return _settings_linked_to(roots / "new.json", home, user)


def _link_to_a_file_of_root_the_user_may_read(home: Path, roots: Path, user: OtherUser) -> Path:
    roots.chmod(0o755)
    return _link_to_roots_file(home, roots, user)


def _hard_link_to_roots_file(home: Path, roots: Path, user: OtherUser) -> Path:
    roots.chmod(0o755)
    (home / ".gemini").mkdir()
    _as_user(user, home / ".gemini")
    os.link(roots / "app.json", home / ".gemini" / "settings.json")  # root may; a user may where hard links are free
    return home / ".gemini" / "settings.json"


@needs_a_made_user
@pytest.mark.parametrize(
    ("plant", "said"),
    [
        (_link_to_roots_file, "Permission denied (root writes it as uid {uid}"),
        (_link_to_roots_folder, "Permission denied (root writes it as uid {uid}"),
        (_link_to_a_new_file_in_roots_folder, "Permission denied (root writes it as uid {uid}"),
        (_link_to_a_file_of_root_the_user_may_read, "belongs to uid 0, not to uid {uid} who owns"),
        (_hard_link_to_roots_file, "belongs to uid 0, not to uid {uid} who owns"),
    ],
    ids=["link-to-file", "link-to-folder", "link-to-new-file", "link-to-readable-file", "hard-link"],
)
def test_run_as_root_a_config_the_user_planted_toward_roots_files_is_refused_and_nothing_changes(
    users_home: Path,
    roots_folder: Path,
    other_user: OtherUser,
    plant: Callable[[Path, Path, OtherUser], Path],
    said: str,
) -> None:
    """The user links ~/.gemini/settings.json (or ~/.gemini) to root's file and waits for `sudo -E ... --write`:
    root must neither write its own file nor leave its bytes in a backup in the user's folder."""
    plant(users_home, roots_folder, other_user)
    before = (_state(users_home), _state(roots_folder), (roots_folder / "app.json").read_bytes())
    done = _connect("gemini", "--write", "--command", COMMAND, env={**os.environ, "HOME": str(users_home)})
    assert done.returncode == 2 and done.stdout == "", done
    assert done.stderr.startswith("hermes-blender: error: ") and done.stderr.count("\n") == 1, done.stderr
    assert said.format(uid=other_user.uid) in done.stderr and "nothing was changed" in done.stderr, done.stderr
    assert (_state(users_home), _state(roots_folder), (roots_folder / "app.json").read_bytes()) == before


@needs_a_made_user
def test_a_backup_of_a_config_linked_from_an_open_folder_is_readable_by_its_owner_only(
    users_home: Path, other_user: OtherUser
) -> None:
    """~/.claude.json links to a 0644 file in the user's 0700 folder: the backup lies beside the link, in the open
    home, where a 0644 copy would hand every user what they could not reach."""
    private = users_home / "private"
    private.mkdir(0o700)
    _as_user(other_user, private)
    original = private / "claude.json"
    original.write_text('{"oauthAccount": {"emailAddress": "ana@example.com"}}')
    original.chmod(0o644)
    _as_user(other_user, original)
    (users_home / ".claude.json").symlink_to("private/claude.json")
    _as_user(other_user, users_home / ".claude.json")
    done = _connect("claude-code", "--write", "--command", COMMAND, env={**os.environ, "HOME": str(users_home)})
    assert done.returncode == 0, done.stderr
    (backup,) = users_home.glob(".claude.json.bak-*")
    status = backup.lstat()
    assert (status.st_uid, status.st_gid, stat.S_IMODE(status.st_mode)) == (other_user.uid, other_user.gid, 0o600)
    assert _reads(other_user.run_as, backup).returncode == 0
    assert _reads(AS_NOBODY, original).returncode != 0  # a third user could not read the original...
    assert _reads(AS_NOBODY, backup).returncode != 0  # ...nor its backup


@pytest.mark.parametrize(
    ("config", "sticky"),
    [("mcp.json", True), ("new/mcp.json", True), ("roots/mcp.json", False)],
    ids=["new-file-in-tmp", "new-folder-in-tmp", "under-an-unsticky-open-folder"],
)
def test_root_creates_nothing_in_a_folder_every_user_may_write_to(tmp_path: Path, config: str, sticky: bool) -> None:
    """In /tmp any user can take a missing name first (a link to root's file) between root's look and its write."""
    if os.name != "posix" or os.geteuid() != 0:
        pytest.skip("root's refusal")
    open_folder = tmp_path / "open"
    open_folder.mkdir()
    (open_folder / "roots").mkdir()
    open_folder.chmod(0o1777 if sticky else 0o777)
    before = _state(open_folder)
    done = _connect("cursor", "--write", "--config", str(open_folder / config), "--command", COMMAND)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done
    assert "which every user may" in done.stderr and "nothing was changed" in done.stderr, done.stderr
    assert _state(open_folder) == before


@posix_only
def test_a_symlinked_config_stays_a_link_and_its_target_is_written(tmp_path: Path) -> None:
    dotfiles, home = tmp_path / "dotfiles", tmp_path / "home"
    dotfiles.mkdir()
    home.mkdir()
    (dotfiles / "claude.json").write_text('{"theme": "dark"}')
    link = home / ".claude.json"
    link.symlink_to("../dotfiles/claude.json")
    written = write_entry(CLIENTS["claude-code"], LAUNCH, link, now=NOW)
    assert link.is_symlink() and os.readlink(link) == "../dotfiles/claude.json"
    after = json.loads((dotfiles / "claude.json").read_text())
    assert after["theme"] == "dark" and after["mcpServers"]["blender"]["command"] == COMMAND
    assert [p.name for p in dotfiles.iterdir()] == ["claude.json"]
    assert written.backup == home / f".claude.json.bak-{STAMP}"
    assert json.loads(written.backup.read_text()) == {"theme": "dark"}


@posix_only
def test_backups_never_overwrite_a_file_or_follow_a_link_planted_at_their_name(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_text('{"a": 1}')
    path.chmod(0o640)
    victim = tmp_path / "victim"
    victim.write_text("mine")
    planted = tmp_path / f"mcp.json.bak-{STAMP}"
    planted.symlink_to(victim)
    first = write_entry(CLIENTS["cursor"], LAUNCH, path, now=NOW)
    path.write_text('{"b": 2}')  # the user changes it, and connects again within the same second
    second = write_entry(CLIENTS["cursor"], LAUNCH, path, now=NOW)
    assert victim.read_text() == "mine" and planted.is_symlink() and os.readlink(planted) == str(victim)
    assert first.backup is not None and second.backup is not None
    assert len({planted, first.backup, second.backup}) == 3
    assert first.backup.read_text() == '{"a": 1}' and second.backup.read_text() == '{"b": 2}'
    for backup in (first.backup, second.backup):
        assert not backup.is_symlink() and stat.S_IMODE(backup.stat().st_mode) == 0o640


@pytest.mark.parametrize(
    ("given", "written"),
    [
        ("rt/server.json", lambda cwd, home: str(cwd / "rt" / "server.json")),
        ("~/rt.json", lambda cwd, home: str(home / "rt.json")),
        ("C:\\Users\\ana\\server.json", lambda cwd, home: "C:\\Users\\ana\\server.json"),  # WSL: the Windows side's
    ],
    ids=["relative", "home", "windows"],
)
def test_every_path_written_into_a_config_is_absolute(
    tmp_path: Path, given: str, written: Callable[[Path, Path], str]
) -> None:
    """A client starts the server in a folder of its own choosing, where a relative path names another file."""
    cwd, home = tmp_path.resolve() / "work", tmp_path.resolve() / "home"
    cwd.mkdir()
    done = _connect(
        "cursor",
        "--write",
        "--config",
        "mcp.json",
        "--command",
        "bin/hermes-blender",
        "--runtime-file",
        given,
        cwd=cwd,
        env={**os.environ, "HOME": str(home)},
    )
    assert done.returncode == 0, done.stderr
    entry = json.loads((cwd / "mcp.json").read_text())["mcpServers"]["blender"]
    assert entry == {
        "command": str(cwd / "bin" / "hermes-blender"),
        "args": ["mcp", "--runtime-file", written(cwd, home)],
    }


def test_numbers_key_order_and_lone_surrogates_are_written_back_as_the_file_had_them(tmp_path: Path) -> None:
    """No Node client parses Python's `Infinity`; a big integer or `1.50` is the user's spelling, not ours."""
    path = tmp_path / "settings.json"
    path.write_text('{"z": 1e400, "m": {"b": [1.50, -0, 12345678901234567890123, 1E-7], "a": "\\ud83d x"}, "e": {}}')
    write_entry(CLIENTS["gemini"], LAUNCH, path, now=NOW)
    assert path.read_text() == (
        "{\n"
        '  "z": 1e400,\n'
        '  "m": {\n'
        '    "b": [\n      1.50,\n      -0,\n      12345678901234567890123,\n      1E-7\n    ],\n'
        '    "a": "\\ud83d x"\n'
        "  },\n"
        '  "e": {},\n'
        '  "mcpServers": {\n'
        f'    "blender": {{\n      "command": "{COMMAND}",\n      "args": [\n        "mcp"\n      ],\n'
        '      "timeout": 3630000\n    }\n'
        "  }\n"
        "}\n"
    )


@pytest.mark.parametrize(
    ("text", "refusal"),
    [
        ('{"theme": "dark", "mcpServers": {}, "theme": "light"}', "has the key 'theme' twice"),
        ('{"mcpServers": {"blender": {"command": "/a", "command": "/b"}}}', "has the key 'command' twice"),
        ('{"scale": NaN}', "NaN is not a JSON number"),
        ('{"scale": -Infinity}', "-Infinity is not a JSON number"),
    ],
    ids=["key-twice", "nested-key-twice", "nan", "infinity"],
)
def test_a_key_twice_or_a_number_json_has_not_is_refused_by_name(tmp_path: Path, text: str, refusal: str) -> None:
    """A merge would keep one of the two values and silently drop the other."""
    path = tmp_path / "settings.json"
    path.write_text(text)
    with pytest.raises(ConnectError, match=refusal + ".*nothing was changed"):
        write_entry(CLIENTS["gemini"], LAUNCH, path, now=NOW)
    assert path.read_text() == text and [p.name for p in tmp_path.iterdir()] == [path.name]


def _without_root_override() -> tuple[str, ...]:
    """Root reads and writes past any mode; without those two capabilities it is held to them like anyone."""
    if os.name != "posix":
        pytest.skip("POSIX modes")
    if os.geteuid() != 0:
        return ()
    if not shutil.which("setpriv"):
        pytest.skip("root needs setpriv to drop its override of file modes")
    return ("setpriv", "--bounding-set=-dac_override,-dac_read_search", "--")


Setup = tuple[tuple[str | bytes, ...], tuple[str, ...]]
"""What a case adds to the command line, and what runs the command (a prefix such as setpriv)."""


def _folder(path: Path) -> Setup:
    path.mkdir()
    return (), ()


def _fifo(path: Path) -> Setup:
    os.mkfifo(path)
    return (), ()


def _device(path: Path) -> Setup:
    """A /dev/null of the test's own: a merge that wrongly wrote the real one would break the whole machine."""
    try:
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))
        os.close(os.open(path, os.O_RDONLY))
    except (AttributeError, PermissionError):
        pytest.skip("making and opening a device node needs root, and a folder not mounted nodev")
    return (), ()


def _deep(path: Path) -> Setup:
    path.write_text('{"a": ' * 100_000 + "1" + "}" * 100_000)
    return (), ()


def _not_utf8(path: Path) -> Setup:
    path.write_bytes(b'{"name": "caf\xe9"}')  # Latin-1
    return (), ()


def _command_not_utf8(path: Path) -> Setup:
    return ("--command", b"/opt/caf\xe9/hermes-blender"), ()  # the last --command given is the one used


def _unreadable(path: Path) -> Setup:
    prefix = _without_root_override()
    path.write_text("{}")
    path.chmod(0)
    return (), prefix


def _unwritable_folder(path: Path) -> Setup:
    prefix = _without_root_override()
    path.write_text("{}")
    path.parent.chmod(0o500)
    return (), prefix


@pytest.mark.parametrize(
    ("make", "said"),
    [
        pytest.param(_folder, "is not a regular file: nothing was changed", marks=posix_only),
        pytest.param(_fifo, "is not a regular file: nothing was changed", marks=posix_only),
        (_device, "is not a regular file: nothing was changed"),
        (_deep, "is nested too deeply to merge: nothing was changed"),
        (_not_utf8, "is not UTF-8 text (invalid continuation byte at byte 13): nothing was changed"),
        pytest.param(_command_not_utf8, "is not UTF-8 text, which no client config can hold", marks=posix_only),
        (_unreadable, "Permission denied: nothing was changed"),
        (_unwritable_folder, "Permission denied: nothing was changed"),
    ],
    ids=["folder", "fifo", "device", "deep", "not-utf8", "command-not-utf8", "unreadable", "unwritable-folder"],
)
def test_a_config_that_cannot_be_merged_is_one_line_exit_2_and_nothing_changed(
    tmp_path: Path, make: Callable[[Path], Setup], said: str
) -> None:
    folder = tmp_path / "config"
    folder.mkdir()
    path = folder / "settings.json"
    args, prefix = make(path)
    before = _state(folder)
    try:
        done = _connect("gemini", "--write", "--config", str(path), "--command", COMMAND, *args, prefix=prefix)
    finally:
        folder.chmod(0o700)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("hermes-blender: error: ") and done.stderr.count("\n") == 1, done.stderr
    assert said in done.stderr
    assert _state(folder) == before


def _state(folder: Path) -> dict[str, tuple[int, int, int]]:
    """Every entry under `folder` by kind and mode, size and time of its last change."""
    return {
        str(p.relative_to(folder)): (p.lstat().st_mode, p.lstat().st_size, p.lstat().st_mtime_ns)
        for p in folder.rglob("*")
    }
