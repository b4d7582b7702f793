"""A job's deadline ends the processes it started, and none that Blender or an earlier job started."""

from __future__ import annotations

import subprocess
import sys

import pytest

from blender_addon import job_processes

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.skipif(sys.platform == "win32", reason="Windows has no signal to end a wait: children are left"),
]


def test_a_deadline_ends_the_jobs_own_processes_and_spares_an_earlier_jobs_started_just_before() -> None:
    """An earlier job's helper began a moment before this job (within one clock tick of /proc's start times)."""
    earlier = subprocess.Popen(["sleep", "60"])
    began = job_processes.mark()
    own = subprocess.Popen(["sh", "-c", "sleep 60; true"])  # a shell and its child, as os.system makes
    try:
        ended = job_processes.end_started_since(began)
        assert own.wait(timeout=10) == -9 and own.pid in ended
        assert earlier.poll() is None and earlier.pid not in ended
    finally:
        for process in (earlier, own):
            process.kill()
            process.wait()


def test_without_a_job_nothing_is_ended() -> None:
    stray = subprocess.Popen(["sleep", "60"])
    try:
        assert job_processes.end_started_since(job_processes.NO_JOB) == []
        assert stray.poll() is None
    finally:
        stray.kill()
        stray.wait()
