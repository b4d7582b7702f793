"""`hermes-blender connect CLIENT`: the one entry each MCP client needs, and merging it into the client's config.

Every entry starts the stdio server (`hermes-blender mcp`), which finds Blender through the runtime file on each
call: the entry holds no address and no token, so it never goes stale. It names an absolute executable, because
GUI clients are often started without the user's shell PATH (the "spawn uvx ENOENT" failure). A merge keeps every
other setting (JSON numbers as they were spelled), writes a timestamped backup first, keeps the file's owner, group,
mode and symlink, loses no change a client makes meanwhile, and refuses a file it cannot parse, changing nothing.
Run as root in a user's home (`sudo -E`), it writes as that user, so it can reach nothing the user could not.
"""

from __future__ import annotations

import contextlib
import datetime
import errno
import functools
import json
import os
import re
import shutil
import stat
import sys
import tempfile
import tomllib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from .contract.host import HostFacts, is_absolute_text, read_small_file
from .errors import ConnectError
from .time_limits import LONG_WORK, MARGIN

SERVER = "blender"
"""The entry's name in every client: the name Hermes and the skill use."""

TOOLKIT_SOURCE = "git+https://github.com/blender-bridge/blender-bridge"
"""What `uvx` runs when the toolkit is not installed (README › Users, step 6)."""

INSTALL_HINT = (
    "install uv (https://docs.astral.sh/uv/getting-started/installation/), then the toolkit with "
    f"`uv tool install {TOOLKIT_SOURCE}`, and run `hermes-blender connect` again"
)


@dataclass(frozen=True)
class Launch:
    """How a client starts the stdio server: an absolute executable and its arguments."""

    command: str
    args: tuple[str, ...]
    via: Literal["toolkit", "uvx"]

    def __post_init__(self) -> None:
        """A path that is not UTF-8 (a byte the shell passed on as it was) cannot be written into any config."""
        for part in (self.command, *self.args):
            try:
                part.encode("utf-8")
            except UnicodeEncodeError:
                raise ConnectError(f"{part!r} is not UTF-8 text, which no client config can hold") from None


def absolute_argument(text: str) -> str:
    """A path for the entry's arguments, expanded and absolute now: a client starts the server in a folder of its
    own choosing, where a relative path names another file. A Windows path (WSL's `C:\\...`) is kept as it is."""
    expanded = HostFacts().expand(text)
    return expanded if is_absolute_text(expanded) else os.path.abspath(expanded)


def find_launch(extra_args: tuple[str, ...] = (), *, which: Callable[[str], str | None] = shutil.which) -> Launch:
    """The installed toolkit's `hermes-blender` if there is one to point at, else `uvx`, else a ConnectError.

    A `hermes-blender` inside uv's cache (`uvx hermes-blender connect ...`) vanishes when the cache is pruned, so it
    is never written into a config: `uvx` is, which finds or rebuilds it on each start.
    """
    for candidate in (which("hermes-blender"), _running_executable()):
        if candidate and not _ephemeral(Path(candidate)):
            return Launch(str(Path(candidate).absolute()), ("mcp", *extra_args), "toolkit")
    uvx = which("uvx")
    if uvx:
        return Launch(
            str(Path(uvx).absolute()), ("--from", TOOLKIT_SOURCE, "hermes-blender", "mcp", *extra_args), "uvx"
        )
    raise ConnectError(f"neither hermes-blender nor uvx is on PATH: {INSTALL_HINT}")


def _running_executable() -> str | None:
    script = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if script is not None and script.stem == "hermes-blender" and script.is_file():
        return str(script)
    return None


def _ephemeral(path: Path) -> bool:
    """Inside uv's cache (`archive-v0/...`, `builds-v0/...`), which `uv cache prune` empties."""
    return any(re.fullmatch(r"(archive|builds)-v\d+", part) for part in path.absolute().parts)


Entry = dict[str, Any]


@dataclass(frozen=True)
class ClientConfig:
    """Where one client keeps its MCP servers and how it spells an entry."""

    name: str
    title: str
    paths: Mapping[str, str]
    """The user-level config file by OS (win32, darwin, linux), expanded like Hermes expands paths."""
    table: str
    """The key of the servers table in that file."""
    entry: Callable[[Launch], Entry]
    syntax: Literal["json", "toml"] = "json"
    after: str = "Restart the client so it starts the server."

    def path(self, host: HostFacts) -> Path:
        return host.expand_path(self.paths[host.os])

    def snippet(self, launch: Launch) -> str:
        """The entry as the user would paste it into the file."""
        entry = self.entry(launch)
        if self.syntax == "toml":
            return _toml_table(self.table, entry)
        return json.dumps({self.table: {SERVER: entry}}, indent=2, ensure_ascii=False) + "\n"


def _plain(launch: Launch) -> Entry:
    return {"command": launch.command, "args": list(launch.args)}


def _typed(launch: Launch) -> Entry:
    return {"type": "stdio", **_plain(launch)}


GEMINI_TIMEOUT_MS = round((max(LONG_WORK.values()) + MARGIN) * 1000)
"""Gemini CLI's one `timeout` for a server, in ms: its wait for the handshake (`gemini mcp list`: 5 s by default,
which a loaded machine misses) and for every tool call (10 minutes by default, which cuts a frame range the bridge
allows an hour). The longest tool's own limit: the stdio server answers every call by then itself."""


def _gemini(launch: Launch) -> Entry:
    return {**_plain(launch), "timeout": GEMINI_TIMEOUT_MS}


def _zed(launch: Launch) -> Entry:
    return {"source": "custom", **_plain(launch), "env": {}}


def _same(path: str) -> dict[str, str]:
    return {"win32": path, "darwin": path, "linux": path}


CLIENTS: dict[str, ClientConfig] = {
    client.name: client
    for client in (
        ClientConfig(
            "claude-code",
            "Claude Code",
            _same("~/.claude.json"),
            "mcpServers",
            lambda launch: {**_typed(launch), "env": {}},
            after="Every folder's sessions see it (user scope); `claude mcp list` checks it.",
        ),
        ClientConfig(
            "claude-desktop",
            "Claude Desktop",
            {
                "win32": "%APPDATA%/Claude/claude_desktop_config.json",
                "darwin": "~/Library/Application Support/Claude/claude_desktop_config.json",
                "linux": "${XDG_CONFIG_HOME}/Claude/claude_desktop_config.json",
            },
            "mcpServers",
            _plain,
            after="Quit Claude Desktop completely (not only its window) and open it again.",
        ),
        ClientConfig("cursor", "Cursor", _same("~/.cursor/mcp.json"), "mcpServers", _plain),
        ClientConfig(
            "vscode",
            "VS Code",
            {
                "win32": "%APPDATA%/Code/User/mcp.json",
                "darwin": "~/Library/Application Support/Code/User/mcp.json",
                "linux": "${XDG_CONFIG_HOME}/Code/User/mcp.json",
            },
            "servers",
            _typed,
            after="Run 'MCP: List Servers' and start blender (a workspace's .vscode/mcp.json takes the same entry).",
        ),
        ClientConfig(
            "codex",
            "OpenAI Codex CLI",
            _same("${CODEX_HOME}/config.toml"),
            "mcp_servers",
            _plain,
            syntax="toml",
            after="New Codex sessions start it; `codex mcp list` shows it.",
        ),
        ClientConfig(
            "gemini",
            "Gemini CLI",
            _same("~/.gemini/settings.json"),
            "mcpServers",
            _gemini,
            after="`gemini mcp list` checks it (in a folder you trust).",
        ),
        ClientConfig("windsurf", "Windsurf", _same("~/.codeium/windsurf/mcp_config.json"), "mcpServers", _plain),
        ClientConfig(
            "zed",
            "Zed",
            {
                "win32": "%APPDATA%/Zed/settings.json",
                "darwin": "~/.config/zed/settings.json",
                "linux": "${XDG_CONFIG_HOME}/zed/settings.json",
            },
            "context_servers",
            _zed,
        ),
        ClientConfig("lm-studio", "LM Studio", _same("~/.lmstudio/mcp.json"), "mcpServers", _plain),
    )
}


def host_defaults(host: HostFacts) -> HostFacts:
    """The host with the folders these paths use filled in when unset (XDG_CONFIG_HOME, CODEX_HOME)."""
    home = host.home() or str(Path.home())
    env = dict(host.env)
    env.setdefault("XDG_CONFIG_HOME", str(Path(home) / ".config"))
    env.setdefault("CODEX_HOME", str(Path(home) / ".codex"))
    return HostFacts(os=host.os, env=env)


@dataclass(frozen=True)
class Written:
    path: Path
    backup: Path | None
    """The file as it was before, beside it; None when there was no file."""
    changed: bool


CONFIG_LIMIT = 256 * 2**20
"""The largest config a merge reads: far above any real one (~/.claude.json keeps each project's history)."""

ATTEMPTS = 10
"""Merges tried while another program keeps rewriting the file, before giving up with nothing changed."""


@dataclass(frozen=True)
class _Seen:
    """A config as one look found it: its bytes, and the stat fields that any rewrite, chmod or chown changes."""

    path: Path
    data: bytes
    identity: tuple[int, ...]
    uid: int
    gid: int
    mode: int


@dataclass(frozen=True)
class _Keeper:
    """The user root acts as on a path: the owner of the first folder or link on the way to it that is not root's."""

    uid: int
    gid: int
    groups: tuple[int, ...]
    where: str


def write_entry(
    client: ClientConfig,
    launch: Launch,
    path: Path,
    *,
    now: datetime.datetime | None = None,
    racer: Callable[[], object] | None = None,
) -> Written:
    """Merge the entry into `path`: other settings kept, a backup first, nothing touched if the file will not parse.

    The merge is a compare-and-swap, because a client rewrites its config whenever it likes and takes no lock: the
    file is read, merged and written beside itself, then looked at again, and put in its place only if it is still
    the file that was read (`_swap`); else the merge starts again from the new file. `racer` runs just before that
    second look, where a client's rewrite would land (tests race a real process there). A symlinked config (stow,
    chezmoi, home-manager) stays a link: its target is written. Every failure is a ConnectError.

    Root writes a path that another user controls as that user (`_keeper`: effective uid, gid and groups switched for
    the merge), so the kernel refuses whatever the user could not do, whatever links they plant or swap meanwhile:
    new folders and files are theirs, and a config that is not theirs is refused (`_look`).
    """
    stamp = (now or datetime.datetime.now()).strftime("%Y%m%d-%H%M%S")
    keeper: _Keeper | None = None
    try:
        keeper = _keeper(path) if os.name == "posix" and os.geteuid() == 0 else None
        _renameat2()  # loaded before acting as the keeper, who may not read this Python's library
        with _acting_as(keeper):
            target = Path(os.path.realpath(path))
            elsewhere = os.path.realpath(path.parent) != str(target.parent)
            _remove_stale_temporaries(target)
            for _ in range(ATTEMPTS):
                seen = _look(target, keeper)
                text = _merged(client, client.entry(launch), seen, target)
                if text is None:
                    return Written(path, None, changed=False)
                backup = _back_up(path, stamp, seen, private=elsewhere) if seen is not None else None
                swapped = False
                try:
                    swapped = _swap(target, text.encode("utf-8"), seen, racer, keeper)
                finally:
                    if backup is not None and not swapped:
                        backup.unlink(missing_ok=True)
                if swapped:
                    return Written(path, backup, changed=True)
    except RecursionError:
        raise ConnectError(f"{path} is nested too deeply to merge: nothing was changed") from None
    except OSError as exc:
        reason = f"{exc.filename or path}: {exc.strerror}" if exc.strerror else str(exc)
        acting = f" (root writes it as uid {keeper.uid}, the owner of {keeper.where})" if keeper else ""
        raise ConnectError(f"{reason}{acting}: nothing was changed") from None
    raise ConnectError(f"{path} kept changing while it was merged (another program writes it): nothing was changed")


def _keeper(path: Path) -> _Keeper | None:
    """Whom root must act as to write `path`: the owner of the first folder or symlink on the way to it (links
    followed as the kernel does) that is not root's; None when root's alone lead to it (root's own config).

    Only the entries up to that one are trusted, and only root can change them: what lies beyond, the user can swap
    at any moment, so no check of it made now would hold when it is written. A file that root's folder holds is not
    an owner that counts (only root can swap it); its owner is kept as always. In a folder every user may write to
    (/tmp), a missing name could be anyone's next, so root refuses to create it there.
    """
    whole = Path(os.path.abspath(path))
    pending, current, links = list(reversed(whole.parts[1:])), Path(whole.anchor), 0
    while pending:
        part = pending.pop()
        if part == "..":
            current = current.parent
            continue
        step = current / part
        try:
            status = os.lstat(step)
        except FileNotFoundError:
            if os.lstat(current).st_mode & stat.S_IWOTH:
                raise ConnectError(
                    f"{path}: root does not create {step} in {current}, which every user may write to: "
                    "nothing was changed"
                ) from None
            return None
        link = stat.S_ISLNK(status.st_mode)
        if not pending and not link:
            return None
        if status.st_uid != 0:
            return _keeper_of(status.st_uid, status.st_gid, str(step))
        if link:
            links += 1
            if links > 40:
                raise ConnectError(f"{path}: too many levels of symbolic links: nothing was changed")
            target = Path(os.readlink(step))
            if target.is_absolute():
                current, parts = Path(target.anchor), target.parts[1:]
            else:
                parts = target.parts
            pending.extend(reversed(parts))
            continue
        if stat.S_ISDIR(status.st_mode) and status.st_mode & stat.S_IWOTH and not status.st_mode & stat.S_ISVTX:
            raise ConnectError(
                f"{path}: root does not write under {step}, which every user may change: nothing was changed"
            )
        current = step
    return None


def _keeper_of(uid: int, gid: int, where: str) -> _Keeper:
    """The user's own groups, and the group of what they own on the way if it is one of theirs (new files get it)."""
    import pwd  # POSIX only, as is acting as another user

    try:
        entry = pwd.getpwuid(uid)
    except KeyError:
        return _Keeper(uid, gid, (gid,), where)
    groups = tuple(os.getgrouplist(entry.pw_name, entry.pw_gid))
    return _Keeper(uid, gid if gid in groups else entry.pw_gid, groups, where)


@contextlib.contextmanager
def _acting_as(keeper: _Keeper | None) -> Iterator[None]:
    """Root's effective uid, gid and groups switched to the keeper's for the block, and back after it."""
    if keeper is None:
        yield
        return
    groups, gid = os.getgroups(), os.getegid()
    try:
        os.setgroups(keeper.groups)
        os.setegid(keeper.gid)
        os.seteuid(keeper.uid)
    except PermissionError:
        os.setegid(gid)
        os.setgroups(groups)
        raise ConnectError(
            f"root cannot act as uid {keeper.uid}, the owner of {keeper.where}, to write there: nothing was changed"
        ) from None
    try:
        yield
    finally:
        os.seteuid(0)
        os.setegid(gid)
        os.setgroups(groups)


def _look(path: Path, keeper: _Keeper | None = None) -> _Seen | None:
    """The file now, or None when there is none; anything but a readable regular file is an OSError, never a hang.

    Its stat is the opened file's, so it describes the bytes read. When root acts as a user, a file of anyone else
    (a link or hard link to root's) is refused: its bytes would land in a backup that user owns. A file with hard
    links is refused too: the new file would take this name only, and the other names keep the old one."""
    opened: list[os.stat_result] = []

    def check(status: os.stat_result) -> None:
        opened.append(status)
        if keeper is not None and status.st_uid != keeper.uid:
            raise ConnectError(
                f"{path} belongs to uid {status.st_uid}, not to uid {keeper.uid} who owns {keeper.where} "
                "(root writes it as that user): nothing was changed"
            )
        if status.st_nlink > 1:
            raise ConnectError(
                f"{path} has {status.st_nlink} hard links, and a merge writes a new file that only this name would "
                "see: nothing was changed; make the other names symbolic links, or add the entry printed without "
                "--write by hand"
            )

    try:
        data = read_small_file(path, CONFIG_LIMIT, check=check)
    except FileNotFoundError:
        return None
    status = opened[0]
    identity = (status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns, status.st_ctime_ns)
    return _Seen(path, data, identity, status.st_uid, status.st_gid, stat.S_IMODE(status.st_mode))


def _merged(client: ClientConfig, entry: Entry, seen: _Seen | None, path: Path) -> str | None:
    """The file's text with the entry merged in; None when it already holds this entry."""
    original = _decoded(seen.data, path) if seen is not None else None
    parse = _parse_toml if client.syntax == "toml" else _parse_json
    current = parse(original, path) if original is not None else {}
    table = current.get(client.table, {})
    if not isinstance(table, dict):
        raise ConnectError(f"{path}: {client.table!r} is not a table of servers; add the entry by hand")
    if _read_as_json(table.get(SERVER)) == entry:
        return None
    if client.syntax == "toml":
        return _merged_toml(original or "", client.table, entry, path)
    return _json_text({**current, client.table: {**table, SERVER: entry}}) + "\n"


def _decoded(data: bytes, path: Path) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConnectError(
            f"{path} is not UTF-8 text ({exc.reason} at byte {exc.start}): nothing was changed"
        ) from None


@dataclass(frozen=True)
class _Number:
    """A JSON number as the file spells it: `1e400` stays `1e400` (Python would write `Infinity`, which no Node
    client parses) and `12345678901234567890.5` keeps its digits."""

    text: str


def _parse_json(text: str, path: Path) -> dict[str, Any]:
    if not text.strip():
        return {}
    try:
        value = json.loads(
            text,
            parse_int=_Number,
            parse_float=_Number,
            parse_constant=_not_json,
            object_pairs_hook=lambda pairs: _object(pairs, path),
        )
    except ValueError as exc:
        raise ConnectError(
            f"{path} is not plain JSON ({exc}; comments are not kept by a merge): nothing was changed; "
            "add the entry printed without --write by hand"
        ) from None
    if not isinstance(value, dict):
        raise ConnectError(f"{path} does not hold a JSON object: nothing was changed")
    return value


def _read_as_json(value: Any) -> Any:
    """The value with each number as JSON reads it, to compare with an entry: Gemini's `"timeout": 3630000` is the
    same entry whether the file spells it so or Python wrote it."""
    if isinstance(value, _Number):
        return json.loads(value.text)
    if isinstance(value, dict):
        return {key: _read_as_json(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_read_as_json(item) for item in value]
    return value


def _not_json(word: str) -> None:
    raise ValueError(f"{word} is not a JSON number")


def _object(pairs: list[tuple[str, Any]], path: Path) -> dict[str, Any]:
    """The object in the file's order; a key twice is refused, since a merge would keep one and drop the other."""
    value: dict[str, Any] = {}
    for key, item in pairs:
        if key in value:
            raise ConnectError(f"{path} has the key {key!r} twice in one object: nothing was changed")
        value[key] = item
    return value


def _json_text(value: Any, indent: str = "") -> str:
    """What `json.dumps(value, indent=2, ensure_ascii=False)` writes, each number spelled as the file spelled it."""
    inner = indent + "  "
    if isinstance(value, _Number):
        return value.text
    if isinstance(value, str):
        return _json_string(value)
    if isinstance(value, dict) and value:
        items = (f"{inner}{_json_string(key)}: {_json_text(item, inner)}" for key, item in value.items())
        return "{\n" + ",\n".join(items) + f"\n{indent}}}"
    if isinstance(value, list) and value:
        return "[\n" + ",\n".join(inner + _json_text(item, inner) for item in value) + f"\n{indent}]"
    return json.dumps(value)  # null, true, false, {} and []


def _json_string(text: str) -> str:
    """The string as it reads, but escaped when it holds a lone surrogate (JSON's `\\ud83d`, which UTF-8 cannot)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(text)
    return json.dumps(text, ensure_ascii=False)


def _parse_toml(text: str, path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConnectError(f"{path} is not valid TOML ({exc}): nothing was changed") from None


_TABLE_HEADER = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")


def _merged_toml(text: str, table: str, entry: Entry, path: Path) -> str:
    """The file with its `[table.blender]` section (and subtables) replaced by ours, checked by parsing it back.

    Whole-line comments in that section stay where they were: those after its keys are the user's notes on what
    follows, and any note is theirs to drop, not the merge's."""
    ours = f"{table}.{SERVER}"
    kept: list[str] = []
    skipping = False
    for line in text.splitlines(keepends=True):
        header = _TABLE_HEADER.match(line)
        if header:
            name = header.group(1).replace('"', "").replace(" ", "")
            skipping = name == ours or name.startswith(ours + ".")
        if not skipping or line.lstrip().startswith("#"):
            kept.append(line)
    body = "".join(kept)
    if body and not body.endswith("\n"):
        body += "\n"
    merged = body + ("\n" if body.strip() else "") + _toml_table(table, entry)
    refusal = ConnectError(f"{path} defines {ours} in a form this merge does not rewrite: nothing was changed")
    before = _parse_toml(text, path)
    try:
        after = tomllib.loads(merged)
    except tomllib.TOMLDecodeError:
        raise refusal from None
    if after != {**before, table: {**before.get(table, {}), SERVER: entry}}:
        raise refusal  # the line-based cut reached something else (a header inside a multi-line string)
    return merged


def _toml_table(table: str, entry: Entry) -> str:
    """A TOML table of strings and string lists (JSON's string escapes are TOML's basic-string escapes)."""
    lines = [f"[{table}.{SERVER}]"]
    lines += [f"{key} = {json.dumps(value, ensure_ascii=False)}" for key, value in entry.items()]
    return "\n".join(lines) + "\n"


def _swap(
    path: Path, data: bytes, seen: _Seen | None, racer: Callable[[], object] | None, keeper: _Keeper | None = None
) -> bool:
    """Write beside the file, then put it in the file's place if that is still the file the merge read (False: it
    changed). A crash leaves the old file or the new one, never half.

    No rename compares and swaps in one step, so another writer can still save between the last look and ours:
    where the system can (`_exchange`), the two names are exchanged rather than one replaced, so the file we displaced
    comes back to us; when it is not the one the merge read, it is given its place back at once (`_put_back`) and
    the merge starts over from it, so its keys are never lost. Elsewhere the window is made as short as it can be.
    """
    _make_folders(path.parent)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=_temporary_prefix(path), suffix=".tmp")
    aside, kept = Path(temporary), None
    try:
        _fill(handle, data, seen)
        if racer is not None:
            racer()
        if _look(path, keeper) != seen:
            return False
        if seen is None:
            return _create(aside, path)
        ours = _inode(aside)  # taken before: after the exchange the client may already have removed the name
        try:
            exchanged = _exchange(aside, path)
        except FileNotFoundError:
            return False  # the client removed its config meanwhile: merge again, into nothing
        if not exchanged:
            os.replace(aside, path)
            return True
        try:
            if _unchanged(aside, seen):
                return True
        except OSError:
            pass  # the displaced file cannot be read: given its place back, as another writer's would be
        try:
            _put_back(aside, path, ours=ours)
        except OSError as exc:
            kept = aside  # it may be the only copy of another writer's save: never removed
            raise ConnectError(
                f"{path} was exchanged with the merged file, and giving the file it held its name back failed "
                f"({exc.strerror or exc}): the file it held is kept at {kept}; compare the two"
            ) from None
        return False
    finally:
        if kept is None:
            aside.unlink(missing_ok=True)


def _temporary_prefix(path: Path) -> str:
    """How the files a merge writes beside `path` begin: named for this process, which a SIGKILL stops before it can
    remove them (`_remove_stale_temporaries`)."""
    return f".{path.name}.connect-{os.getpid()}-"


def _remove_stale_temporaries(path: Path) -> None:
    """Remove the files beside `path` that a connect killed mid-write left (its pid is gone): a new file not yet in
    place, or the old one an exchange had just displaced (the backup keeps its bytes). A pid alive is left alone,
    whoever has it now."""
    pattern = re.compile(re.escape(f".{path.name}.connect-") + r"(\d+)-\w+\.tmp")
    try:
        names = os.listdir(path.parent)
    except OSError:
        return  # a clean-up: the merge goes on without it (a folder this user may write but not list)
    for name in names:
        found = pattern.fullmatch(name)
        if found and not HostFacts().pid_alive(int(found.group(1))):
            with contextlib.suppress(OSError):
                (path.parent / name).unlink()


RENAME_NOREPLACE, RENAME_EXCHANGE = 1, 2
"""renameat2's flags (linux/fs.h)."""


def _create(new: Path, path: Path) -> bool:
    """Give `new` the name `path` only if nothing has it yet (False: a client made the file meanwhile)."""
    try:
        done = _rename2(new, path, RENAME_NOREPLACE)
    except FileExistsError:
        return False
    if not done:
        os.replace(new, path)
    return True


def _exchange(first: Path, second: Path) -> bool:
    """Swap what the two names name, in one step; False where the system or the file system cannot."""
    return _rename2(first, second, RENAME_EXCHANGE)


def _rename2(source: Path, target: Path, flags: int) -> bool:
    """Linux's renameat2; False where it is missing or the file system does not take `flags` (an OSError else). A
    refusal is also left to the plain rename, which says it again when it is the file's (a sandbox may refuse the
    call itself)."""
    call = _renameat2()
    if call is None:
        return False
    import ctypes

    if call(-100, os.fsencode(source), -100, os.fsencode(target), flags) == 0:  # -100: AT_FDCWD
        return True
    code = ctypes.get_errno()
    if code in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.EPERM):
        return False
    raise OSError(code, os.strerror(code), str(target))


@functools.cache
def _renameat2() -> Callable[[int, bytes, int, bytes, int], int] | None:
    """libc's renameat2 (Linux; glibc 2.28, musl 1.1.20), None elsewhere."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        call = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return None
    call.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint)
    call.restype = ctypes.c_int
    return call


def _inode(path: Path) -> tuple[int, int]:
    status = os.lstat(path)
    return status.st_dev, status.st_ino


def _unchanged(displaced: Path, seen: _Seen) -> bool:
    """Whether the file our exchange displaced is the one the merge read: the same inode, not written since (a
    rename changes its ctime, not its mtime), the same bytes (a rewrite within one tick of the clock)."""
    status = os.lstat(displaced)
    if (status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns) != seen.identity[:4]:
        return False
    return read_small_file(displaced, CONFIG_LIMIT) == seen.data


def _put_back(displaced: Path, path: Path, ours: tuple[int, int]) -> None:
    """Exchange again, so the file a writer saved in the microseconds before our exchange has its name back.

    Should a writer save once more in the microseconds between the two exchanges, what comes back is not ours but
    their newer file, which is given the name in turn; what is left at `displaced` is what we put there last."""
    for _ in range(ATTEMPTS):
        returning = _inode(displaced)
        _exchange(displaced, path)
        if _inode(displaced) == ours:
            return
        ours = returning


def _make_folders(folder: Path) -> None:
    """The folders a new config needs, each owner-only (0700) like the file: the client keeps secrets in some."""
    try:
        folder.mkdir(0o700)
    except FileNotFoundError:
        _make_folders(folder.parent)
        folder.mkdir(0o700, exist_ok=True)
    except FileExistsError:
        pass  # or made meanwhile; anything but a folder fails when the file is made in it


def _back_up(path: Path, stamp: str, seen: _Seen, *, private: bool = False) -> Path:
    """The bytes a merge replaces, in a new file beside `path`: never over an existing file, never through a link.

    `private`: `path` is a link to a file in another folder, which may be closed to those this one is open to, so
    the backup keeps only its owner's access."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
    count = 0
    while True:
        backup = path.with_name(f"{path.name}.bak-{stamp}" + (f"-{count}" if count else ""))
        try:
            handle = os.open(backup, flags, 0o600)
            break
        except FileExistsError:
            count += 1  # an earlier backup from the same second, or a link planted at the name
    try:
        _fill(handle, seen.data, seen, mode=seen.mode & 0o700 if private else None)
    except BaseException:
        backup.unlink(missing_ok=True)
        raise
    return backup


def _fill(handle: int, data: bytes, seen: _Seen | None, mode: int | None = None) -> None:
    """Write a new file and close it, giving it the replaced file's owner, group and mode (`sudo -E` runs as root in
    the user's home, and a root-owned ~/.claude.json locks its user out); a file new to the folder is owner-only."""
    with os.fdopen(handle, "wb") as file:
        file.write(data)
        file.flush()
        os.fsync(file.fileno())
        if os.name != "posix":
            return  # Windows gives a new file its folder's ACL
        created = os.fstat(file.fileno())
        if seen is not None and (seen.uid, seen.gid) != (created.st_uid, created.st_gid):
            try:
                os.fchown(file.fileno(), seen.uid, seen.gid)
            except PermissionError:
                raise ConnectError(
                    f"{seen.path} belongs to uid {seen.uid} and gid {seen.gid}, which this user cannot give "
                    "a new file: nothing was changed; run as its owner"
                ) from None
        if mode is None:
            mode = seen.mode if seen is not None else 0o600
        os.fchmod(file.fileno(), mode)  # after the chown, which clears set-id bits
