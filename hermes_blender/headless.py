"""A headless Blender serving the bridge: Blender-as-a-module in a child process.

The child installs the add-on from this repository into a private, throw-away user folder
(nothing touches the user's Blender configuration), opens the factory scene or a .blend,
and serves until its standard input closes, which also stops it if this process dies.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType

from .blender_host import USER_FOLDER_OVERRIDES, private_user_folder
from .console_log import ConsoleLog
from .contract.host import HostFacts
from .contract.liveness import LiveEndpoint, RuntimeFileSpec, published_fields, read_live_endpoint
from .errors import HeadlessStartError, LiveEndpointUnavailable
from .instances import instance_spec
from .resources import ADDON_SOURCE

STOP_TIMEOUT = 3.0
"""Seconds a stopping bridge gets before Blender is killed: the bridge's own stop takes at most about one."""
POLL_INTERVAL = 0.02
"""Seconds between two looks at the runtime file while Blender starts, at most: each line Blender prints (its
"started" line follows the publication) brings the next look forward."""
EXIT_TIMEOUT = 30.0
"""Seconds a Blender whose bridge has stopped gets to exit (Blender's own teardown, slow on a loaded machine)."""


LAB_FOLDER = "lab"
"""Beside the runtime file, the Blender Lab listener's own (`lab/server.json`, and its records in `lab/servers/`)."""


def withdraw_for(runtime_file: Path, pid: int) -> None:
    """After a kill: remove the runtime files (the bridge's and its Lab listener's) and their own records if they
    still name `pid`."""
    lab_file = runtime_file.parent / LAB_FOLDER / runtime_file.name
    for path in (lab_file, _own_record(lab_file, pid), runtime_file, _own_record(runtime_file, pid)):
        if published_fields(path).get("pid") == pid:
            with contextlib.suppress(OSError):
                path.unlink()


def _own_record(runtime_file: Path, pid: int) -> Path:
    return Path(instance_spec(RuntimeFileSpec(path=str(runtime_file)), pid).path)


class HeadlessBlender:
    """Context manager: `with HeadlessBlender(runtime_file) as blender: blender.endpoint`."""

    def __init__(
        self,
        runtime_file: Path,
        *,
        blend: Path | None = None,
        port: int = 0,
        lab_port: int | None = None,
        startup_timeout: float = 120.0,
        log_file: Path | None = None,
        private_log_folder: bool = False,
        checkpoint_folder: Path | None = None,
        mode: str | None = None,
    ) -> None:
        """`private_log_folder`: `log_file`'s folder is the toolkit's own, made 0700 also when it was not.
        `checkpoint_folder`: where the bridge keeps checkpoints; by default in Blender's user folder, which is a
        temporary one here and goes with this object (`serve` names a folder that outlives it).
        `mode`: what agents may do (read-only, ask, full); None: the add-on's default, full."""
        self.runtime_file = runtime_file
        self._blend = blend
        self._port = port
        self._lab_port = lab_port
        self._startup_timeout = startup_timeout
        self._log_file = log_file
        self._private_log_folder = private_log_folder
        self._checkpoint_folder = checkpoint_folder
        self._mode = mode
        self._workdir = tempfile.TemporaryDirectory(prefix="hermes-blender-")
        self._process: subprocess.Popen[bytes] | None = None
        self._console: ConsoleLog | None = None
        self.endpoint: LiveEndpoint | None = None

    @property
    def pid(self) -> int:
        if self._process is None:
            raise HeadlessStartError("the headless Blender is not started")
        return self._process.pid

    @property
    def log_path(self) -> Path:
        """Blender's console (the bridge logs there too); a temp file unless the caller chose where it is kept."""
        return self._log_file or Path(self._workdir.name) / "blender.log"

    @property
    def log_refusal(self) -> str | None:
        """Why Blender's console is not kept in `log_path` (a link or another user's folder on the way); None: it is."""
        return self._console.refusal if self._console is not None else None

    def start(self) -> LiveEndpoint:
        if not (ADDON_SOURCE / "blender_manifest.toml").is_file():
            raise HeadlessStartError(f"the Blender add-on source is missing at {ADDON_SOURCE}")
        if self._blend is not None and not self._blend.is_file():
            raise HeadlessStartError(f"no such .blend file: {self._blend}")
        work = Path(self._workdir.name)
        command = [
            sys.executable,
            "-m",
            "hermes_blender.blender_host",
            "--addon-source",
            str(ADDON_SOURCE),
        ]
        if self._blend is not None:
            command += ["--blend", str(self._blend)]
        command += ["--", "--port", str(self._port), "--runtime-file", str(self.runtime_file), "--stop-on-stdin-eof"]
        command += ["--no-lab"] if self._lab_port is None else ["--lab-port", str(self._lab_port)]
        if self._checkpoint_folder is not None:
            command += ["--checkpoint-folder", str(self._checkpoint_folder)]
        if self._mode is not None:
            command += ["--mode", self._mode]
        env = {k: v for k, v in os.environ.items() if k not in USER_FOLDER_OVERRIDES}
        env.update(BLENDER_USER_RESOURCES=str(private_user_folder(work / "user")), PYTHONUNBUFFERED="1")
        self._console = ConsoleLog(self.log_path, private_folder=self._private_log_folder)
        try:
            self._process = subprocess.Popen(
                command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, cwd=work
            )
        except OSError as exc:
            self._console.close()
            raise HeadlessStartError(f"cannot start {sys.executable}: {exc}") from exc
        assert self._process.stdout is not None
        self._console.follow(self._process.stdout)
        self.endpoint = self._wait_until_published()
        return self.endpoint

    def _wait_until_published(self) -> LiveEndpoint:
        assert self._process is not None and self._console is not None
        spec = RuntimeFileSpec(path=str(self.runtime_file))
        deadline = time.monotonic() + self._startup_timeout
        printed = self._console.printed
        while time.monotonic() < deadline:
            printed.clear()  # before the look: a line printed after it ends the wait below at once
            code = self._process.poll()
            if code is not None:
                self._console.close()  # all it printed is in the log before the tail is read
                raise HeadlessStartError(f"Blender exited with code {code} before serving:\n{self.log_tail()}")
            try:
                endpoint = read_live_endpoint(spec, HostFacts())
            except LiveEndpointUnavailable:
                endpoint = None
            if endpoint is not None and endpoint.pid == self._process.pid:
                return endpoint
            printed.wait(POLL_INTERVAL)
        self.stop()
        raise HeadlessStartError(
            f"Blender did not publish its endpoint within {self._startup_timeout:g} s:\n{self.log_tail()}"
        )

    def exit_code(self) -> int | None:
        """The child's exit code once it has exited; None while it runs (or before it started)."""
        return self._process.poll() if self._process is not None else None

    def stop(self, timeout: float = STOP_TIMEOUT) -> int | None:
        """Close stdin (a clean stop that withdraws the runtime file); force only if that fails.

        The bridge ends a stop within a second even when a job will not (it withdraws its file and exits), but
        not when a job holds Python itself (a C loop that never lets go of the GIL, or code that ignores the
        stop): then, `timeout` seconds on, Blender is killed and its runtime file withdrawn here, so none is left
        behind. A Blender whose bridge has stopped is given EXIT_TIMEOUT more to exit as it likes. One that had
        exited before it was asked to stop (killed, crashed) could not withdraw its runtime file: it is withdrawn
        here, if it still names that pid.
        """
        process, self._process = self._process, None
        if process is None:
            return None
        if process.poll() is not None:
            withdraw_for(self.runtime_file, process.pid)
        if process.stdin is not None:
            try:
                process.stdin.close()
            except OSError:
                pass
        deadline = time.monotonic() + timeout
        while process.poll() is None and time.monotonic() < deadline and self._still_published(process.pid):
            time.sleep(0.02)
        try:
            code = process.wait(0 if self._still_published(process.pid) else EXIT_TIMEOUT)
        except subprocess.TimeoutExpired:
            process.kill()
            code = process.wait()
            withdraw_for(self.runtime_file, process.pid)
        if self._console is not None:
            self._console.close()
        return code

    def _still_published(self, pid: int) -> bool:
        """Whether this Blender's bridge still serves: its own record is withdrawn when it stops."""
        return published_fields(_own_record(self.runtime_file, pid)).get("pid") == pid

    def log_tail(self, lines: int = 30) -> str:
        """Blender's last lines, as the console log kept them in memory: never read back through the log's path,
        which may name another file than the one written (a link planted after the log was refused)."""
        kept = list(self._console.tail) if self._console is not None else []
        text = b"".join(kept).decode("utf-8", errors="replace")
        return "\n".join(text.splitlines()[-lines:]) or "(no output)"

    def close(self) -> None:
        self.stop()
        self._workdir.cleanup()

    def __enter__(self) -> HeadlessBlender:
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
