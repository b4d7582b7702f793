"""`hermes-blender farm run BUNDLE`: an Open Job Description job bundle (the add-on's `export_render_job` writes
them) rendered on this machine by `openjd run`, in processes of its own, never in the user's Blender.

`openjd-cli` pins its own versions of openjd-model and openjd-sessions, so it lives in an environment of its own,
as the Blender Lab server does: `$HERMES_BLENDER_OPENJD` (a command line), else `openjd` on PATH, else
`uv tool run --from openjd-cli==0.8.0 openjd`. The Blender the job's `blender` runs is the one named (`--blender`),
else the one on PATH. Each step runs in turn; progress comes from OpenJD's task lines, its `openjd_progress` and
`openjd_status` lines and Blender's own `Saved:` lines. A stop (Ctrl+C, SIGTERM) cancels the session the way OpenJD
does (its action's process group ended), then every process the run started that is still there is killed, so none
is left behind; the frames written by then are kept and listed. OpenJD's whole output goes to an owner-only log.

A `farm run` killed outright (SIGKILL, the out-of-memory killer) cancels nothing itself. On Linux the kernel then
sends `openjd` SIGTERM (PR_SET_PDEATHSIG, armed between fork and exec), on which OpenJD cancels its session as on
Ctrl+C: its running action's process group (the job's Blender) is ended and its environments exited. macOS and
Windows have no such signal: there a `farm run` killed outright leaves `openjd` to finish the job by itself.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from .errors import FarmRunError

OPENJD_CLI = "openjd-cli==0.8.0"
OPENJD_VARIABLE = "HERMES_BLENDER_OPENJD"
ADAPTOR_COMMAND = "blender-openjd"
NICENESS = 10
"""A run here renders at a lower priority (`nice`), so the Blender the person works in, and its bridge, keep the
processor whenever they want it; the run takes what they leave."""
CANCEL_GRACE = 30.0
"""Seconds `openjd run` is given to cancel its session after the stop is passed on, before what is left is killed."""
COMPLETED, FAILED, CANCELLED = "completed", "failed", "cancelled"
EXIT_CODES = {COMPLETED: 0, FAILED: 1, CANCELLED: 130}
_TASK = re.compile(r"^\s*Frame\((?:CHUNK\[INT\]|INT)\) = (\S+)")
_PROGRESS = re.compile(r"openjd_progress:\s*([0-9.]+)")
_STATUS = re.compile(r"openjd_status:\s*(.*)")
_SAVED = re.compile(r"Saved: '(.+)'")
_PR_SET_PDEATHSIG = 1
"""prctl(2)'s option: the signal the kernel sends this process when its parent thread ends (Linux)."""
_STAMP = re.compile(r"^\d+:\d\d:\d\d\.\d+\t")
"""The elapsed time `openjd run` puts before each line of its output."""


def add_farm_parser(commands: Any) -> None:
    """`farm run` on the toolkit's command line (cli.py)."""
    farm = commands.add_parser("farm", help="run an Open Job Description job bundle (export_render_job) here")
    verbs = farm.add_subparsers(dest="farm_command", required=True, metavar="VERB")
    run = verbs.add_parser("run", help="render the bundle with `openjd run`, off the user's Blender; Ctrl+C cancels")
    run.add_argument("bundle", type=Path, help="the bundle's folder (template.yaml, parameter_values.yaml, ...)")
    run.add_argument("--blender", help="the Blender the job's `blender` runs (default: `blender` on PATH)")
    run.add_argument("--json", action="store_true", help="end with the outcome as JSON on stdout")
    run.set_defaults(handler=_run_command)


def _run_command(args: argparse.Namespace) -> int:
    stop = threading.Event()
    for name in ("SIGINT", "SIGTERM"):
        signal.signal(getattr(signal, name), lambda *_: stop.set())
    try:
        outcome = FarmRun(args.bundle, blender=args.blender).run(stop, _say)
    except FarmRunError as exc:
        print(f"hermes-blender: farm run refused [{exc.state}]: {exc}", file=sys.stderr)
        if args.json:
            print(json.dumps({"status": "refused", "state": exc.state, "error": str(exc)}))
        return 2
    if args.json:
        print(json.dumps(outcome))
    else:
        print(f"{outcome['status']}: {outcome['message']}")
        print("\n".join(outcome["frames_written"]))
    return EXIT_CODES[outcome["status"]]


def _say(line: str) -> None:
    """Progress goes to stderr: stdout holds the outcome (with --json, only it)."""
    print(f"farm: {line}", file=sys.stderr, flush=True)


def openjd_command(environ: dict[str, str] | None = None) -> list[str]:
    """How to run `openjd` here; FarmRunError `openjd_missing`, with the command that installs it."""
    environ = dict(os.environ) if environ is None else environ
    path = environ.get("PATH", os.defpath)
    if named := environ.get(OPENJD_VARIABLE):
        return shlex.split(named)
    if found := shutil.which("openjd", path=path):
        return [found]
    if uv := shutil.which("uv", path=path):
        return [uv, "tool", "run", "--from", OPENJD_CLI, "openjd"]
    raise FarmRunError(
        f"no `openjd` here: neither ${OPENJD_VARIABLE}, nor `openjd` on PATH, nor uv to run it. Install it in an "
        f"environment of its own: `uv tool install {OPENJD_CLI}` (or `pipx install {OPENJD_CLI}`)",
        state="openjd_missing",
    )


class Bundle:
    """A job bundle's folder as `openjd run` takes it: its template, steps and parameter values."""

    def __init__(self, folder: Path) -> None:
        import yaml  # only this command reads YAML

        self.folder = folder.expanduser().absolute()
        self.template_path = self.folder / "template.yaml"
        _judge_folder(self.folder)
        try:
            template = yaml.safe_load(self.template_path.read_text(encoding="utf-8"))
            listed = yaml.safe_load((self.folder / "parameter_values.yaml").read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
            raise FarmRunError(
                f"{self.folder} is not a readable job bundle ({exc}); it needs template.yaml and parameter_values.yaml "
                "(export_render_job writes both)",
                state="not_a_bundle",
            ) from None
        try:
            self.steps = [str(step["name"]) for step in template["steps"]]
            self.values = {str(entry["name"]): entry["value"] for entry in listed["parameterValues"]}
        except (TypeError, KeyError) as exc:
            raise FarmRunError(
                f"{self.folder}'s template.yaml has no list of named steps, or its parameter_values.yaml no "
                f"parameterValues list of name and value ({exc!r})",
                state="not_a_bundle",
            ) from None
        self.commands = {str(command) for command in _commands(template)}


def _judge_folder(folder: Path) -> None:
    """A bundle runs its template's commands, so it is run only from a folder nobody else may change, nor any folder
    or link on the way to it (own_folders.py): else another user's template ran as this user (root too), or theirs
    was swapped in between `openjd check` and `openjd run`. FarmRunError `unsafe_folder`; a folder that is not there
    is `not_a_bundle`, and nothing is made."""
    from .errors import UnsafeFolder
    from .own_folders import hold_folder

    if not folder.is_dir():
        raise FarmRunError(
            f"{folder} is not a folder; a job bundle is a folder holding template.yaml and parameter_values.yaml "
            "(export_render_job writes both)",
            state="not_a_bundle",
        )
    try:
        held = hold_folder(folder, judge_way=True)
    except UnsafeFolder as exc:
        raise FarmRunError(
            f"{exc}. A bundle's template runs commands, so it runs only from a folder nobody else may change: copy "
            "it into a folder of your own. Nothing was run",
            state="unsafe_folder",
        ) from None
    except OSError as exc:
        raise FarmRunError(f"{folder} could not be opened ({exc.strerror or exc})", state="not_a_bundle") from None
    if held is not None:
        os.close(held)


def _commands(node: Any) -> Iterator[Any]:
    """Every action's `command` in a template."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "command":
                yield value
            else:
                yield from _commands(value)
    elif isinstance(node, list):
        for item in node:
            yield from _commands(item)


class FarmRun:
    """A bundle made ready to run here: every refusal (FarmRunError) is raised while it is made, before anything
    runs; `run` renders every step in turn, until done, failed or stopped."""

    def __init__(self, folder: Path, *, blender: str | None = None, environ: dict[str, str] | None = None) -> None:
        environ = dict(os.environ) if environ is None else environ
        self.bundle = Bundle(folder)
        self.openjd = openjd_command(environ)
        _check(self.openjd, self.bundle, environ)
        self._scratch = Path(tempfile.mkdtemp(prefix="hermes-farm-"))  # 0700
        try:
            self.env = _job_environment(self.bundle, blender, self._scratch, environ)
        except BaseException:
            shutil.rmtree(self._scratch, ignore_errors=True)
            raise
        self.progress: Run | None = None
        """The run under way, once `run` began (its frames written so far)."""

    def run(self, stop: threading.Event, say: Callable[[str], None]) -> dict[str, Any]:
        """The outcome (JSON): status, message, steps, frames_written, log, seconds."""
        started = time.monotonic()
        try:
            self.progress = run = Run(self.bundle, say)
            values = self._scratch / "values.json"
            values.write_text(json.dumps(self.bundle.values), encoding="utf-8")
            nice = [found, "-n", str(NICENESS)] if (found := shutil.which("nice")) else []  # it execs: one pid
            for step in self.bundle.steps:
                command = [*nice, *self.openjd, "run", str(self.bundle.template_path), "--step", step]
                command += ["-p", f"file://{values}"]
                if run.step(step, command, self.env, stop) != COMPLETED:
                    break
        finally:
            shutil.rmtree(self._scratch, ignore_errors=True)
        return run.outcome(time.monotonic() - started)


def _check(openjd: list[str], bundle: Bundle, environ: dict[str, str]) -> None:
    """`openjd check` on the template: a bundle edited into an invalid one is refused before anything runs."""
    try:
        checked = subprocess.run(
            [*openjd, "check", str(bundle.template_path)],
            capture_output=True,
            text=True,
            timeout=300,
            env=environ,
            preexec_fn=_ended_with_this_process(),  # a farm run killed outright takes its check along
        )
    except OSError as exc:
        raise FarmRunError(f"`{shlex.join(openjd)}` could not be started: {exc}", state="openjd_missing") from None
    if checked.returncode != 0:
        words = (checked.stdout + checked.stderr).strip()
        errors = [line for line in words.splitlines() if line.startswith("ERROR: ")]
        if not errors:  # openjd never judged it (uv could not start it, say)
            raise FarmRunError(f"`{shlex.join(openjd)} check` did not run: {words[-2000:]}", state="openjd_failed")
        raise FarmRunError(
            f"{bundle.template_path} is not a valid job template (openjd check): {' '.join(errors)[:2000]}",
            state="invalid_template",
        )


def _job_environment(bundle: Bundle, blender: str | None, scratch: Path, environ: dict[str, str]) -> dict[str, str]:
    """The environment the job's commands run in: the Blender named first on PATH (and as BLENDER_EXECUTABLE, which
    AWS's adaptor reads), or the one found on PATH; FarmRunError `blender_missing` or `adaptor_missing`."""
    env = dict(environ)
    path = env.get("PATH", os.defpath)
    found = shutil.which(blender, path=path) if blender else shutil.which("blender", path=path)
    if "blender" in bundle.commands or ADAPTOR_COMMAND in bundle.commands:
        if found is None:
            raise FarmRunError(
                f"no Blender {'at ' + repr(blender) if blender else 'on PATH'}: the job runs `blender`. Name one "
                "with --blender PATH",
                state="blender_missing",
            )
        links = scratch / "bin"
        links.mkdir(mode=0o700)
        (links / "blender").symlink_to(os.path.abspath(found))
        env["PATH"] = f"{links}{os.pathsep}{path}"
        env["BLENDER_EXECUTABLE"] = str(links / "blender")
    if ADAPTOR_COMMAND in bundle.commands and shutil.which(ADAPTOR_COMMAND, path=env["PATH"]) is None:
        raise FarmRunError(
            f"the bundle runs AWS's Blender adaptor (`{ADAPTOR_COMMAND}`), which is not on PATH. Install it "
            "(`uv tool install deadline-cloud-for-blender`), or export the bundle in the plain flavour",
            state="adaptor_missing",
        )
    return env


class Run:
    """One `farm run`: its steps' outcomes, the frames written, and the log every line of OpenJD's output goes to."""

    def __init__(self, bundle: Bundle, say: Callable[[str], None]) -> None:
        self.bundle = bundle
        self.say = say
        self.status = COMPLETED
        self.message = ""
        self.written: list[str] = []
        self.steps: list[dict[str, Any]] = []
        logs = bundle.folder / "logs"
        logs.mkdir(mode=0o700, exist_ok=True)
        self.log_path = logs / f"farm-run-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log"
        self._log = open(os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600), "a", encoding="utf-8")

    def step(self, step: str, command: list[str], env: dict[str, str], stop: threading.Event) -> str:
        """`openjd run` of one step; its status."""
        if stop.is_set():
            self.status, self.message = CANCELLED, f"cancelled before step {step!r}"
            return CANCELLED
        self.say(f"step {step!r}: {shlex.join(command)}")
        self._log.write(f"$ {shlex.join(command)}\n")
        process = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            cwd=self.bundle.folder,
            start_new_session=True,  # a terminal's Ctrl+C reaches this command, which passes it on once
            preexec_fn=_ended_with_this_process(),  # this thread waits for it below, so outlives it unless killed
            text=True,
            errors="replace",
        )
        reader = threading.Thread(target=self._read, args=(step, process), daemon=True)
        reader.start()
        cancelled = False
        while process.poll() is None:
            if stop.wait(0.2) and not cancelled:
                cancelled = True
                self.say(f"step {step!r}: cancelling (the frames written are kept)")
                _cancel(process)
        reader.join(10)
        self._log.flush()
        if cancelled:
            status, message = CANCELLED, f"cancelled during step {step!r}"
        elif process.returncode != 0:
            status, message = FAILED, f"step {step!r} failed (openjd exit {process.returncode}); see {self.log_path}"
        else:
            status, message = COMPLETED, f"step {step!r} done"
        self.steps.append({"step": step, "status": status})
        self.status, self.message = status, message
        return status

    def _read(self, step: str, process: subprocess.Popen[str]) -> None:
        assert process.stdout is not None
        for raw in process.stdout:
            self._log.write(raw)
            line = _STAMP.sub("", raw.rstrip("\n"))
            if task := _TASK.match(line):
                self.say(f"step {step!r}: task Frame={task.group(1)} started")
            elif saved := _SAVED.search(line):
                if os.path.isfile(saved.group(1)):
                    self.written.append(saved.group(1))
                    self.say(f"step {step!r}: written {saved.group(1)}")
            elif progress := _PROGRESS.search(line):
                self.say(f"step {step!r}: task {float(progress.group(1)):.0f}%")
            elif status := _STATUS.search(line):
                self.say(f"step {step!r}: {status.group(1)}")

    def outcome(self, seconds: float) -> dict[str, Any]:
        self._log.close()
        written = list(dict.fromkeys(self.written))
        if self.status == COMPLETED:
            self.message = f"all {len(self.steps)} steps done, {len(written)} frames written"
        else:
            self.message += f"; {len(written)} frames written before it, kept"
        return {
            "status": self.status,
            "message": self.message,
            "steps": self.steps,
            "frames_written": written,
            "log": str(self.log_path),
            "seconds": round(seconds, 3),
        }


def _ended_with_this_process() -> Callable[[], None] | None:
    """Linux: what the child runs between fork and exec so that the kernel sends it SIGTERM (OpenJD's cancel) when
    this process's thread that started it ends, even by SIGKILL; None elsewhere, where no such signal exists."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    prctl = ctypes.CDLL(None, use_errno=True).prctl  # loaded here: the forked child only calls it, takes no lock
    parent = os.getpid()

    def arm() -> None:
        if prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM)) != 0 or os.getppid() != parent:
            os._exit(127)  # not armed, or this process died before it was: openjd would be left on its own

    return arm


def _cancel(process: subprocess.Popen[str]) -> None:
    """OpenJD's own cancel (it ends its running action's process group), then every process the run started that is
    still there, killed: none is left behind."""
    import psutil

    try:
        started = psutil.Process(process.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        started = []
    process.send_signal(signal.SIGINT)
    try:
        process.wait(CANCEL_GRACE)
    except subprocess.TimeoutExpired:
        pass
    try:
        started += psutil.Process(process.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        pass
    for child in started:
        try:
            child.kill()
        except psutil.NoSuchProcess:
            pass
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()
