"""`hermes-blender`: run, query and check a Blender bridge from a terminal.

Exit codes: 0 success; 1 a tool answered with an error; 2 usage or start-up failure;
3 Blender is unavailable (the message names the state).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import logging
import os
import signal
import stat
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import __version__
from .contract import DECLARED_LAB_PATH, DECLARED_PATH
from .contract.redact import REDACTOR
from .errors import BlenderBridgeError, ContractError, HeadlessStartError, LiveEndpointUnavailable, ToolCallFailed
from .protocol import agent_mode
from .resources import PLUGIN_ROOT
from .terminal import ProgressBar, one_line, printable

if TYPE_CHECKING:
    from .client import BridgeClient, ToolResult

# Each command imports what only it needs, in its handler: `mcp` answers a client's `initialize` as soon as the
# SDK is loaded (Gemini CLI gives a stdio server 5 s by default), not after the checks' YAML, the headless runner
# or the contract's parsers (tests/agent/test_stdio_start.py).

EXIT_OK, EXIT_TOOL_ERROR, EXIT_FAILURE, EXIT_UNAVAILABLE = 0, 1, 2, 3
EXIT_BROKEN_PIPE = 128 + signal.SIGPIPE
"""A writer whose reader closed: what a shell reports for a command killed by SIGPIPE."""


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        return args.handler(args)
    except BrokenPipeError:  # `… | head`: the reader has what it wanted; end as a shell expects, without a traceback
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # the interpreter's last flush must not fail again
        return EXIT_BROKEN_PIPE
    except LiveEndpointUnavailable as exc:
        _error(f"Blender is unavailable [{exc.state}]: {exc}")
        return EXIT_UNAVAILABLE
    except BlenderBridgeError as exc:
        _error(str(exc))
        return EXIT_FAILURE
    except KeyboardInterrupt:
        if args.command == "call":
            _error(
                f"interrupted: the call of {args.tool} is cancelled (Blender stops it where it can); whatever it "
                "changed before stands: `hermes-blender call get_agent_history` shows it"
            )
        return 130


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="hermes-blender", description="Connect agents to a live Blender.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve = commands.add_parser("serve", help="run a headless Blender with the bridge until Ctrl+C")
    serve.add_argument("--blend", type=Path, help="open this .blend instead of the factory scene")
    serve.add_argument("--port", type=int, default=0, help="MCP port on 127.0.0.1 (0 = any free port)")
    serve.add_argument(
        "--lab-port",
        type=int,
        default=None,
        help="also start the Blender Lab listener on this port (for blender_lab: 9876; 0 = any); off by default",
    )
    serve.add_argument("--no-lab", action="store_true", help="no Blender Lab listener (the default; kept for scripts)")
    serve.add_argument(
        "--log-file", type=Path, default=_default_serve_log(), help="where Blender's log is kept (default: %(default)s)"
    )
    serve.add_argument(
        "--checkpoint-folder",
        type=Path,
        default=_default_checkpoints(),
        help="where the bridge keeps checkpoints; it outlives serve, so a rescue is never lost (default: %(default)s)",
    )
    serve.add_argument(
        "--mode",
        choices=agent_mode.NAMES,
        default="full",
        help="what agents may do: read-only (look, never change), ask (each change waits for the user of a client "
        "that can ask, MCP elicitation; with none, confirmation_unavailable: this Blender has no window) or full "
        "(default: %(default)s)",
    )
    _runtime_file_option(serve)
    serve.set_defaults(handler=_serve)

    watch = commands.add_parser(
        "watch", help="follow a render task (start_render_frames_task's task_id) with a progress bar until it ends"
    )
    watch.add_argument("task_id", help="the task_id start_render_frames_task answered")
    _runtime_file_option(watch)
    _json_option(watch)
    watch.set_defaults(handler=_watch)

    tools = commands.add_parser(
        "tools", help="list the tools a client gets from the running Blender (while it is closed: those shipped)"
    )
    _runtime_file_option(tools)
    _json_option(tools)
    tools.set_defaults(handler=_tools)

    call = commands.add_parser(
        "call", help="call one tool on the running Blender", epilog="`hermes-blender tools` lists the tools."
    )
    call.add_argument("tool", help="tool name, e.g. get_objects_summary (`hermes-blender tools` lists them)")
    call.add_argument("--arguments", default="{}", help="tool arguments as a JSON object")
    call.add_argument(
        "--pid", type=int, help="with several Blenders serving, the one to call (see `status`); default: server.json's"
    )
    call.add_argument(
        "--images",
        type=Path,
        metavar="FOLDER",
        help="where to write the answer's pictures (PNG files, their paths printed); default: a new folder in the "
        "current one",
    )
    _runtime_file_option(call)
    _json_option(call)
    call.set_defaults(handler=_call)

    mcp = commands.add_parser(
        "mcp", help="serve MCP over stdio for any client, reaching Blender through its runtime file on every call"
    )
    pin = mcp.add_mutually_exclusive_group()
    pin.add_argument("--pid", type=int, help="with several Blenders serving, talk to this one only (see `status`)")
    pin.add_argument("--file", help="talk only to the Blender that has this .blend open (a path, or a file name)")
    _runtime_file_option(mcp)
    mcp.add_argument("--log-file", type=Path, help="keep the log in this file too (0600, rotated at 1 MiB)")
    mcp.set_defaults(handler=_mcp)

    lab = commands.add_parser(
        "lab",
        help="serve the official Blender Lab server (the command after --) over stdio, offering its tools only while "
        "your own Blender's Lab listener runs on the port it dials (BLENDER_MCP_PORT)",
    )
    lab.add_argument(
        "--runtime-file",
        default=DECLARED_LAB_PATH,
        help=f"the Lab listener's runtime file to read (default: {DECLARED_LAB_PATH})",
    )
    lab.add_argument(
        "server_command",
        nargs=argparse.REMAINDER,
        metavar="-- COMMAND ...",
        help="the official server's command line, e.g. -- uv tool run ... blender-mcp --transport stdio",
    )
    lab.set_defaults(handler=_lab)

    connect = commands.add_parser(
        "connect", help="print (or --write) the entry that starts `hermes-blender mcp` in one MCP client's config"
    )
    connect.add_argument(
        "client", metavar="CLIENT", choices=_ClientNames(), help="the MCP client to configure: %(choices)s"
    )
    connect.add_argument(
        "--write", action="store_true", help="merge the entry into the client's config, after a timestamped backup"
    )
    connect.add_argument("--config", type=Path, help="this config file instead of the client's user-level one")
    connect.add_argument(
        "--command",
        type=Path,
        help="the hermes-blender executable the entry runs (in WSL: the Windows one, e.g. /mnt/c/.../hermes-blender.exe)",
    )
    connect.add_argument("--pid", type=int, help="pin the entry to one Blender (rarely wanted: pids change)")
    connect.add_argument("--runtime-file", help="a runtime file other than the default, passed to `mcp`")
    connect.set_defaults(handler=_connect)

    demo = commands.add_parser("demo", help="start a headless Blender, list its scene, stop it")
    demo.add_argument("--blend", type=Path, help="open this .blend instead of the factory scene")
    _json_option(demo)
    demo.set_defaults(handler=_demo)

    build = commands.add_parser("build-addon", help="build and validate the Blender extension zip")
    build.add_argument("--output", type=Path, default=Path("dist"), help="folder for the zip (default: ./dist)")
    build.set_defaults(handler=_build_addon)

    install = commands.add_parser("install-addon", help="install and enable the extension in a Blender")
    install.add_argument("--blender", type=Path, help="a Blender executable (default: the bundled bpy)")
    install.set_defaults(handler=_install_addon)

    validate = commands.add_parser("validate", help="check plugin.json, mcp.json and skills as Hermes does")
    validate.add_argument(
        "plugin_dir", nargs="?", type=Path, default=PLUGIN_ROOT, help="plugin root (default: the bundled plugin)"
    )
    _json_option(validate)
    validate.set_defaults(handler=_validate)

    status = commands.add_parser("status", help="say which link from Hermes to Blender works and which is broken")
    status.add_argument(
        "--plugin-dir", type=Path, default=PLUGIN_ROOT, help="plugin root (default: the bundled plugin)"
    )
    status.add_argument("--server", help="check only this declared server")
    status.add_argument(
        "--no-connect", action="store_true", help="local checks only, like Hermes's probe: no connection"
    )
    _json_option(status)
    status.set_defaults(handler=_status)

    from .farm import add_farm_parser  # stdlib only at import: `mcp` starts no slower

    add_farm_parser(commands)
    return parser


def _runtime_file_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--runtime-file", default=DECLARED_PATH, help=f"runtime file to publish/read (default: {DECLARED_PATH})"
    )


def _json_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="machine-readable output on stdout")


def _serve(args: argparse.Namespace) -> int:
    from .headless import HeadlessBlender

    _require_bpy()
    runtime_file = _expand(args.runtime_file)
    lab_port = None if args.no_lab else args.lab_port
    stop = _stop_requests()  # before Blender starts: a signal during start-up must still stop it cleanly
    blender = HeadlessBlender(
        runtime_file,
        blend=args.blend,
        port=args.port,
        lab_port=lab_port,
        log_file=args.log_file,
        private_log_folder=args.log_file == _default_serve_log(),
        checkpoint_folder=args.checkpoint_folder.expanduser().absolute(),  # Blender runs in a folder of its own
        mode=args.mode,
    )
    try:
        with blender:
            endpoint = blender.endpoint
            assert endpoint is not None
            _progress(f"Blender (pid {endpoint.pid}) serves MCP at {endpoint.url}")
            if blender.log_refusal is None:
                _progress(f"log: {blender.log_path}")
            else:
                _warning(f"{blender.log_refusal}; serving without a log file")
            _progress(f"checkpoints: {args.checkpoint_folder.expanduser().absolute()} (kept after serve stops)")
            _progress(f"agents may: {args.mode}")
            _progress(f"runtime file: {runtime_file}; press Ctrl+C to stop")
            while (code := blender.exit_code()) is None and not stop.wait(0.2):
                pass
            if code is None:
                _progress("stopping...")
                code = blender.stop()  # a clean stop: the bridge withdraws its runtime file
    except HeadlessStartError:
        # Stopped while Blender was starting: Ctrl+C reaches Blender too (the whole process group), so it may end
        # before we saw it serve. That is the stop the user asked for, not a failure to start.
        if not stop.is_set():
            raise
        code = 0
    if code not in (None, 0):
        _error(f"Blender exited with code {code}")
        return EXIT_FAILURE
    _progress("stopped; runtime file removed" if not runtime_file.exists() else "stopped")
    return EXIT_OK


def _stop_requests() -> threading.Event:
    """Set by Ctrl+C, SIGTERM (a service manager, `kill`) and the end of a piped stdin (the parent left).

    A terminal or /dev/null on stdin is not watched: `serve < /dev/null` must keep serving.
    """
    stop = threading.Event()
    for name in ("SIGINT", "SIGTERM", "SIGBREAK"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), lambda *_: stop.set())
    try:
        piped = stat.S_ISFIFO(os.fstat(sys.stdin.fileno()).st_mode)
    except (OSError, ValueError, AttributeError):
        piped = False
    if piped:
        threading.Thread(target=_set_on_eof, args=(stop,), name="hermes-serve-stdin", daemon=True).start()
    return stop


def _set_on_eof(stop: threading.Event) -> None:
    """Raw reads: a daemon thread blocked inside sys.stdin's buffered reader aborts the interpreter at exit."""
    try:
        while os.read(sys.stdin.fileno(), 4096):
            pass
    except (OSError, ValueError):
        pass
    stop.set()


def _call(args: argparse.Namespace) -> int:
    from .client import BridgeClient
    from .contract.liveness import RuntimeFileSpec
    from .instances import instance_spec, live_instances
    from .summary import format_objects_summary

    try:
        arguments = json.loads(args.arguments)
    except ValueError as exc:
        _error(f"--arguments is not valid JSON: {exc}")
        return EXIT_FAILURE
    if not isinstance(arguments, dict):
        _error("--arguments must be a JSON object")
        return EXIT_FAILURE
    try:
        json.dumps([args.tool, arguments], ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:  # bytes from the command line that are not UTF-8: no request can carry them
        _error("the tool name or --arguments hold bytes that are not UTF-8 text")
        return EXIT_FAILURE
    spec = RuntimeFileSpec(path=args.runtime_file)
    if args.pid is not None:
        spec = instance_spec(spec, args.pid)
        if not Path(spec.path).exists():
            running = ", ".join(
                str(instance.endpoint.pid) for instance in live_instances(RuntimeFileSpec(args.runtime_file))
            )
            _error(f"no Blender with pid {args.pid} is serving (serving: {running or 'none'})")
            return EXIT_UNAVAILABLE
    client = BridgeClient(spec)
    bar = ProgressBar(sys.stderr) if sys.stderr.isatty() and not args.json else None

    async def calling() -> ToolResult:
        waiting = asyncio.create_task(bar.unanswered()) if bar is not None else None
        try:
            return await client.call_tool(args.tool, arguments, bar.heard if bar else None)
        finally:
            if waiting is not None:
                waiting.cancel()

    try:
        result = asyncio.run(calling())
    except ToolCallFailed as exc:
        if "Unknown tool" not in str(exc):
            raise
        _error(f"{exc}{_nearest_tools(client, args.tool)}")
        return EXIT_FAILURE
    finally:
        if bar is not None:
            bar.close()
    stems = _picture_stems(args.tool, result.data(), len(result.images))
    pictures, unwritten = _write_pictures(result.images, stems, args.images, args.tool)
    _print_result(result, args.json, format_objects_summary if args.tool == "get_objects_summary" else None, pictures)
    for problem in unwritten:  # the answer (and what the call changed) is printed all the same
        _error(problem)
    if unwritten:
        return EXIT_FAILURE
    return EXIT_TOOL_ERROR if result.is_error else EXIT_OK


def _nearest_tools(client: BridgeClient, name: str) -> str:
    """ "Did you mean …" with the nearest names this Blender lists, or a pointer to `tools`."""
    import difflib

    try:
        names = [tool["name"] for tool in asyncio.run(client.list_tools())]
    except BlenderBridgeError:
        return "; `hermes-blender tools` lists the tools"
    nearest = difflib.get_close_matches(name, names, n=3, cutoff=0.6)
    if not nearest:
        return "; `hermes-blender tools` lists the tools"
    return f"; did you mean {' or '.join(nearest)}? (`hermes-blender tools` lists them all)"


WATCH_POLL = 0.5
"""Seconds between two looks at a watched task (the task's own poll interval when it says a longer one)."""


def _watch(args: argparse.Namespace) -> int:
    """A render task followed to its end: a bar on a terminal, then its last answer; exit 0 when it completed."""
    from .client import BridgeClient
    from .contract.liveness import RuntimeFileSpec

    client = BridgeClient(RuntimeFileSpec(path=args.runtime_file))
    bar = ProgressBar(sys.stderr) if sys.stderr.isatty() and not args.json else None

    async def follow() -> ToolResult:
        while True:
            result = await client.call_tool("get_render_frames_task", {"task_id": args.task_id})
            data = result.data()
            if result.is_error or not isinstance(data, dict):
                return result
            if bar is not None:
                done, count = data.get("done", 0), data.get("count") or None
                await bar.heard({"progress": done, "total": count, "message": f"{done} of {count} frames"})
            if data.get("status") != "working":
                return result
            await asyncio.sleep(max(WATCH_POLL, data.get("poll_interval_ms", 0) / 1000))

    try:
        result = asyncio.run(follow())
    finally:
        if bar is not None:
            bar.close()
    _print_result(result, args.json, None)
    data = result.data()
    completed = not result.is_error and isinstance(data, dict) and data.get("status") == "completed"
    return EXIT_OK if completed else EXIT_TOOL_ERROR


def _tools(args: argparse.Namespace) -> int:
    """The tools as a client lists them: from the running Blender, or, while none serves, the shipped ones."""
    from .client import BridgeClient
    from .contract.liveness import RuntimeFileSpec
    from .stdio_server import shipped_catalogue

    try:
        listed = asyncio.run(BridgeClient(RuntimeFileSpec(path=args.runtime_file)).list_tools())
        source = None
    except LiveEndpointUnavailable as exc:
        listed = shipped_catalogue()
        source = f"Blender is unavailable [{exc.state}]; these are the tools this toolkit ships, listed while it is"
    if args.json:
        print(json.dumps(listed, indent=2, ensure_ascii=False))
        return EXIT_OK
    width = max((len(tool["name"]) for tool in listed), default=0)
    for tool in listed:
        said = str(tool.get("description", "")).split(". ")[0].rstrip(".")
        print(printable(f"{tool['name']:<{width}}  {one_line(said)[:110]}"))
    if source is not None:
        _warning(source)
    return EXIT_OK


def _picture_stems(tool: str, data: Any, count: int) -> list[str]:
    """Each picture's file name, without `.png`: what it shows where the answer says (`inspect`'s before and after,
    those it has: one that could not be made is a sentence there), else its place in the answer."""
    told = data.get("inspect") if isinstance(data, dict) else None
    if isinstance(told, dict):
        shown = [label for label in ("before", "after") if isinstance(told.get(label), dict)]
        if len(shown) == count:
            return [f"{tool}-{label}" for label in shown]
    return [f"{tool}-{number}" for number in range(1, count + 1)]


def _write_pictures(
    images: tuple[bytes, ...], stems: list[str], folder: Path | None, tool: str
) -> tuple[tuple[Path, ...], list[str]]:
    """Each picture of an answer as a new PNG file named by its stem (never base64 on a terminal, never over a file
    or through a link): in `folder`, or a new folder here. Also what could not be written, in words.

    The folder is held open (own_folders.py): it is no link, it is this user's and nobody else may change it, nor
    any folder or link on the way to it (else a root shell's pictures went wherever a link another user planted
    named, at the folder or above it), and each file is made through it."""
    if not images:
        return (), []
    from .errors import UnsafeFolder
    from .own_folders import hold_folder

    made: Path | None = None
    if folder is None:
        try:
            made = Path(tempfile.mkdtemp(prefix=f"{tool}-", dir=Path.cwd()))
        except OSError as exc:  # a working folder this user may not write to: the call is done, its answer is told
            return (), [f"the answer's pictures could not be written in a new folder in {Path.cwd()}: {_reason(exc)}"]
    where = made if made is not None else folder
    try:
        held = hold_folder(where, judge_way=True)
    except (OSError, UnsafeFolder) as exc:
        if made is not None:
            made.rmdir()  # empty, and ours: refused only for where it lies
        return (), [f"the answer's pictures could not be written in {where}: {_reason(exc)}"]
    written, unwritten = [], []
    try:
        for stem, png in zip(stems, images, strict=True):
            try:
                written.append(_new_picture(held, where, stem, png))
            except OSError as exc:
                unwritten.append(f"the picture {stem}.png could not be written in {where}: {_reason(exc)}")
    finally:
        if held is not None:
            os.close(held)
    return tuple(written), unwritten


PICTURE_NAMES = 999
"""Names a picture may take (`stem.png`, then `stem-2.png` on): a name taken is never overwritten."""


def _new_picture(held: int | None, folder: Path, stem: str, png: bytes) -> Path:
    """`png` in a new file of the held folder, at the first of its names nobody has taken."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
    for attempt in range(1, PICTURE_NAMES + 1):
        name = f"{stem}.png" if attempt == 1 else f"{stem}-{attempt}.png"
        try:
            fd = os.open(name if held is not None else folder / name, flags, 0o644, dir_fd=held)
        except FileExistsError:
            continue
        with open(fd, "wb") as out:
            out.write(png)
        return Path(os.path.abspath(folder / name))
    raise FileExistsError(f"{stem}.png to {stem}-{PICTURE_NAMES}.png are all taken")


def _reason(exc: BaseException) -> str:
    return exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)


def _mcp(args: argparse.Namespace) -> int:
    from .collector import paused_then_frozen
    from .console_log import LogFileHandler
    from .surrogates import well_formed

    with paused_then_frozen():
        from .stdio_server import run  # the server's imports (the SDK's) are for this command only

    if args.file is not None and well_formed(args.file) != args.file:
        _error(
            f"--file {printable(one_line(args.file))} is not UTF-8: Blender's answers show such a name with U+FFFD, "
            "which another file's may share, so it cannot pin one Blender. Pin it with --pid (list_blenders shows "
            "each Blender's pid and file)"
        )
        return EXIT_FAILURE
    handlers: list[logging.Handler] = [logging.StreamHandler()]  # stderr: stdout is the protocol
    if args.log_file is not None:
        kept = LogFileHandler(_expand(str(args.log_file)))
        if kept.refusal is not None:
            _warning(f"{kept.refusal}; logging to stderr only")
        handlers.append(kept)
    for handler in handlers:
        handler.setFormatter(_Redacting("%(asctime)s hermes-blender mcp: %(levelname)s: %(message)s"))
    logging.basicConfig(level=logging.WARNING, handlers=handlers)
    run(args.runtime_file, pid=args.pid, file=args.file)
    return EXIT_OK


def _lab(args: argparse.Namespace) -> int:
    from .lab_relay import serve_lab

    command = list(args.server_command)
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        _error("name the official Blender Lab server's command after `--` (see mcp.json's blender_lab)")
        return EXIT_FAILURE
    return serve_lab(command, args.runtime_file)


class _ClientNames:
    """`connect`'s choices, the client table loaded only when argparse asks: with tomllib it is about 6 ms of a start,
    and `mcp` answers a client's `initialize` without it."""

    def __contains__(self, name: object) -> bool:
        from .client_configs import CLIENTS

        return name in CLIENTS

    def __iter__(self) -> Iterator[str]:
        from .client_configs import CLIENTS

        return iter(sorted(CLIENTS))


def _connect(args: argparse.Namespace) -> int:
    from .client_configs import (
        CLIENTS,
        SERVER,
        TOOLKIT_SOURCE,
        Launch,
        absolute_argument,
        find_launch,
        host_defaults,
        write_entry,
    )
    from .contract.host import HostFacts

    client = CLIENTS[args.client]
    extra: tuple[str, ...] = ()
    if args.runtime_file is not None:
        extra += ("--runtime-file", absolute_argument(args.runtime_file))
    if args.pid is not None:
        extra += ("--pid", str(args.pid))
    if args.command is not None:
        launch = Launch(str(args.command.absolute()), ("mcp", *extra), "toolkit")
    else:
        launch = find_launch(extra)
    path = args.config if args.config is not None else client.path(host_defaults(HostFacts()))
    if launch.via == "uvx":
        _progress(f"hermes-blender is not installed: the entry runs it through uvx ({TOOLKIT_SOURCE})")
    if not args.write:
        print(client.snippet(launch), end="")
        _progress(f"add this to {path} (or run again with --write to merge it there). {client.after}")
        return EXIT_OK
    written = write_entry(client, launch, path)
    if not written.changed:
        _progress(f"{path} already has this entry; nothing changed. {client.after}")
        return EXIT_OK
    if written.backup is not None:
        _progress(f"backup of the previous file: {written.backup}")
    _progress(f"wrote the {SERVER!r} entry for {client.title} to {path}. {client.after}")
    return EXIT_OK


def _demo(args: argparse.Namespace) -> int:
    from .client import BridgeClient
    from .contract.liveness import RuntimeFileSpec
    from .headless import HeadlessBlender
    from .summary import format_objects_summary

    _require_bpy()
    with tempfile.TemporaryDirectory(prefix="hermes-demo-") as folder:
        runtime_file = Path(folder) / "server.json"
        _progress(
            "starting a headless Blender with the bridge (factory scene)..."
            if args.blend is None
            else f"starting a headless Blender with the bridge on {args.blend}..."
        )
        with HeadlessBlender(runtime_file, blend=args.blend) as blender:
            endpoint = blender.endpoint
            assert endpoint is not None
            _progress(f"runtime file published: {endpoint.url} (pid {endpoint.pid}); asking for the scene...")
            client = BridgeClient(RuntimeFileSpec(path=str(runtime_file)))
            result = asyncio.run(client.call_tool("get_objects_summary"))
        gone = not runtime_file.exists()
        _print_result(result, args.json, format_objects_summary)
        _progress(
            "Blender stopped; runtime file removed."
            if gone
            else "Blender stopped, but its runtime file is still there."
        )
    if not gone:
        return EXIT_FAILURE
    return EXIT_TOOL_ERROR if result.is_error else EXIT_OK


def _build_addon(args: argparse.Namespace) -> int:
    from .addon_package import build_addon

    _progress("building the extension with Blender's own builder...")
    path = build_addon(args.output)
    print(path)
    _progress("built and validated by Blender's extension validator")
    return EXIT_OK


def _install_addon(args: argparse.Namespace) -> int:
    from .addon_package import ONE_PREFERENCE, install_addon

    where = str(args.blender) if args.blender else "the bundled Blender (bpy)"
    _progress(f"installing the Hermes Bridge extension into {where}...")
    install_addon(args.blender)
    _progress(f"installed and enabled. {ONE_PREFERENCE}")
    return EXIT_OK


def _validate(args: argparse.Namespace) -> int:
    from .checks import render_validation, validate, validation_report
    from .contract.host import HostFacts

    host = HostFacts()
    try:
        package = validate(args.plugin_dir, host)
    except ContractError as exc:
        if args.json:
            print(json.dumps({"valid": False, "error": str(exc)}, indent=2))
        else:
            _error(f"{args.plugin_dir}: invalid: {exc}")
        return EXIT_FAILURE
    report = validation_report(package, host)
    print(json.dumps(report, indent=2) if args.json else render_validation(report))
    return EXIT_OK


def _status(args: argparse.Namespace) -> int:
    from .checks import render_status, status_report, validate
    from .contract.host import HostFacts

    host = HostFacts()
    package = validate(args.plugin_dir, host)
    if args.server is not None and args.server not in package.servers:
        _error(f"no declared server named {args.server!r} (declared: {', '.join(package.servers)})")
        return EXIT_FAILURE
    report = status_report(package, host, connect=not args.no_connect, only=args.server)
    print(printable(REDACTOR.redact(json.dumps(report, indent=2) if args.json else render_status(report))))
    return EXIT_OK if report["ready"] else EXIT_UNAVAILABLE


def _print_result(
    result: ToolResult,
    as_json: bool,
    formatter: Callable[[dict[str, Any]], str] | None,
    pictures: tuple[Path, ...] = (),
) -> None:
    data = result.data()
    if as_json:
        answer: dict[str, Any] = {"is_error": result.is_error, "result": data}
        if pictures:
            answer["images"] = [str(path) for path in pictures]
        print(REDACTOR.redact(json.dumps(answer, indent=2)))
        return
    for path in pictures:
        print(printable(f"picture: {path}"))
    if result.is_error or formatter is None or not isinstance(data, dict):
        text = data if isinstance(data, str) else json.dumps(data, indent=2)
        print(printable(REDACTOR.redact(("tool error: " if result.is_error else "") + text)))
    else:
        print(printable(REDACTOR.redact(formatter(data))))


def _require_bpy() -> None:
    if importlib.util.find_spec("bpy") is None:
        raise HeadlessStartError(
            "Blender-as-a-module (bpy, Blender 4.5 LTS or newer) is not installed for this Python: install "
            "'hermes-blender[blender]', or run `uv run hermes-blender ...` in a checkout"
        )


def _default_serve_log() -> Path:
    """In a folder of its own, made owner-only (a log of a chosen path leaves its folder as it is)."""
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "hermes-blender" / "serve.log"


def _default_checkpoints() -> Path:
    """The toolkit's data folder, which outlives every `serve` (Blender's user folder under `serve` is a temporary
    one): `$XDG_DATA_HOME` or ~/.local/share, ~/Library/Application Support on macOS, %LOCALAPPDATA% on Windows."""
    if sys.platform == "win32":
        data = os.environ.get("LOCALAPPDATA") or str(Path.home() / "AppData" / "Local")
    elif sys.platform == "darwin":
        data = str(Path.home() / "Library" / "Application Support")
    else:
        data = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data) / "hermes-blender" / "checkpoints"


def _expand(path: str) -> Path:
    from .contract.host import HostFacts

    return HostFacts().expand_path(path)


class _Redacting(logging.Formatter):
    """Log lines as the CLI prints: no token, no control characters."""

    def format(self, record: logging.LogRecord) -> str:
        return printable(REDACTOR.redact(super().format(record)))


def _progress(message: str) -> None:
    print(printable(REDACTOR.redact(message)), file=sys.stderr, flush=True)


def _warning(message: str) -> None:
    print(f"hermes-blender: warning: {printable(REDACTOR.redact(message))}", file=sys.stderr, flush=True)


def _error(message: str) -> None:
    print(f"hermes-blender: error: {printable(REDACTOR.redact(message))}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    sys.exit(main())
