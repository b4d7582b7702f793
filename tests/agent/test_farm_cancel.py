"""A cancel of `farm run` leaves no process of the run behind, even one OpenJD's own cancel misses: a task's process
that left its action's process group (a daemon, as AWS's adaptor starts one) is killed after OpenJD's cancel. The
real `openjd run`; the job is a Python program, so no Blender is needed."""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from hermes_blender.farm import CANCELLED, FarmRun

pytestmark = pytest.mark.timeout(300)
ESCAPES = """
import subprocess, sys, time
daemon = subprocess.Popen(
    [sys.executable, "-c", "import time; time.sleep(600)"],
    start_new_session=True,  # out of the action's process group: OpenJD's cancel does not reach it
    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
)
open(sys.argv[1] + ".partial", "w").write(str(daemon.pid))
__import__("os").replace(sys.argv[1] + ".partial", sys.argv[1])
time.sleep(600)
"""


def escaping_bundle(folder: Path, pid_file: Path) -> Path:
    """A bundle whose one task starts a process in a session of its own, writes its pid, then waits."""
    template = {
        "specificationVersion": "jobtemplate-2023-09",
        "name": "escapes",
        "steps": [
            {
                "name": "Escape",
                "script": {
                    "actions": {"onRun": {"command": sys.executable, "args": ["-c", ESCAPES, str(pid_file)]}},
                },
            }
        ],
    }
    folder.mkdir()
    (folder / "template.yaml").write_text(json.dumps(template))
    (folder / "parameter_values.yaml").write_text(json.dumps({"parameterValues": []}))
    return folder


def running(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_a_cancel_kills_the_processes_openjds_own_cancel_leaves(tmp_path: Path) -> None:
    pid_file = tmp_path / "daemon.pid"
    run = FarmRun(escaping_bundle(tmp_path / "bundle", pid_file))
    stop = threading.Event()
    outcome: dict[str, Any] = {}
    worker = threading.Thread(target=lambda: outcome.update(run.run(stop, lambda line: None)), daemon=True)
    worker.start()
    daemon: psutil.Process | None = None
    try:
        while not pid_file.exists():
            assert worker.is_alive(), outcome
            time.sleep(0.05)
        daemon = psutil.Process(int(pid_file.read_text()))
        stop.set()
        worker.join(120)
        assert outcome["status"] == CANCELLED, outcome
        deadline = time.monotonic() + 60  # SIGKILL is not instant; a bound on the wait, not a measure
        while running(daemon) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not running(daemon), daemon
    finally:
        if daemon is not None and running(daemon):
            daemon.kill()


SLOW_CHECK = """
import os, sys, time
if sys.argv[1] == "check":
    open(os.environ["CHECK_PID"] + ".partial", "w").write(str(os.getpid()))
    os.replace(os.environ["CHECK_PID"] + ".partial", os.environ["CHECK_PID"])
    time.sleep(600)
"""


def test_a_farm_run_killed_during_openjd_check_leaves_no_check_running(tmp_path: Path) -> None:
    """SIGKILL while `openjd check` judges the template: the kernel ends the check too (PR_SET_PDEATHSIG)."""
    import os
    import shlex
    import signal
    import subprocess

    fake = tmp_path / "openjd.py"
    fake.write_text(SLOW_CHECK)
    pid_file = tmp_path / "check.pid"
    env = {**os.environ, "HERMES_BLENDER_OPENJD": shlex.join([sys.executable, str(fake)]), "CHECK_PID": str(pid_file)}
    folder = escaping_bundle(tmp_path / "bundle", tmp_path / "unused.pid")
    farm = subprocess.Popen(
        [str(Path(sys.executable).parent / "hermes-blender"), "farm", "run", str(folder)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    check = None
    try:
        deadline = time.monotonic() + 60
        while not pid_file.exists():
            assert farm.poll() is None and time.monotonic() < deadline, "the check never started"
            time.sleep(0.05)
        check = psutil.Process(int(pid_file.read_text()))
        farm.send_signal(signal.SIGKILL)
        farm.wait(30)
        deadline = time.monotonic() + 10
        while running(check) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not running(check), "openjd check outlived the farm run that started it"
    finally:
        farm.kill()
        if check is not None and running(check):
            check.kill()
