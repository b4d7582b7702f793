"""What the bridge keeps between calls stays bounded however long Blender runs: finished frame tasks
(frame_tasks.py) by count and by age, and the objects remembered by name (tools/scene_index.py)."""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pytest

from hermes_blender.blender_host import ADDON_MODULE

from .test_frame_folders import Tasks

pytestmark = pytest.mark.timeout(120)
NAMES_KEPT = 10_000
"""The most objects remembered by name (README › Decisions: about 2 MiB)."""


@pytest.fixture
def tasks(factory_scene: None) -> Iterator[Tasks]:
    driver = Tasks()
    try:
        yield driver
    finally:
        driver.job.tasks.close()


def _finished(tasks: Tasks, folder: Path) -> str:
    """A task that started and was cancelled before its first frame: finished, nothing rendered."""
    task_id = tasks.start(folder, 1, 1)
    tasks.module.cancel({"task_id": task_id}, tasks.job)
    return task_id


def _known(tasks: Tasks, task_id: str) -> bool:
    try:
        tasks.job.tasks.task(task_id)
    except tasks.table.ToolError:
        return False
    return True


def test_beyond_the_kept_count_the_oldest_finished_tasks_are_forgotten_and_working_ones_never(
    tasks: Tasks, tmp_path: Path
) -> None:
    working = tasks.start(tmp_path, 1, 1)
    kept = tasks.table.KEPT
    finished = [_finished(tasks, tmp_path) for _ in range(kept + 2)]
    tasks.job.tasks.forget_old()
    assert [_known(tasks, task_id) for task_id in finished] == [False] * 2 + [True] * kept
    assert _known(tasks, working) and len(tasks.job.tasks) == kept + 1


def test_a_finished_task_is_forgotten_once_its_time_to_live_has_passed_and_a_working_one_never(
    tasks: Tasks, tmp_path: Path
) -> None:
    working = tasks.start(tmp_path, 1, 1)
    finished = _finished(tasks, tmp_path)
    ended = tasks.job.tasks.task(finished).updated
    ttl = tasks.table.TTL
    tasks.job.tasks.forget_old(ended + ttl)
    assert _known(tasks, finished)
    tasks.job.tasks.forget_old(ended + ttl + 1)
    assert not _known(tasks, finished) and _known(tasks, working)


def test_a_task_past_its_time_to_live_is_no_longer_listed_nor_cancelled_as_finished(
    tasks: Tasks, tmp_path: Path
) -> None:
    finished = _finished(tasks, tmp_path)
    tasks.job.tasks.task(finished).updated -= tasks.table.TTL + 1
    assert finished not in tasks.job.tasks.ids()  # what resources/list offers: a read would not find it
    with pytest.raises(tasks.table.ToolError) as refused:
        tasks.module.cancel({"task_id": finished}, tasks.job)
    assert refused.value.state != "task_finished"  # gone, as a read says, not "already finished"


@pytest.fixture
def scene_index(addon: ModuleType, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """The module with an empty memory of its own for this test (the add-on's is put back after)."""
    module = importlib.import_module(f"{ADDON_MODULE}.tools.scene_index")
    monkeypatch.setattr(module, "_named", {})
    return module


def test_remembering_more_names_than_the_bound_keeps_memory_within_it_forgetting_the_oldest(
    scene_index: ModuleType,
) -> None:
    """Every page read remembers its objects' names: an agent paging a 100,000-object scene must not grow it."""
    seen = [SimpleNamespace(name=f"hermes-test-{n}", library=None) for n in range(NAMES_KEPT + 1)]
    for obj in seen:
        scene_index.remember(obj.name, obj)
    kept = len(scene_index._named)
    assert kept <= NAMES_KEPT
    assert scene_index.object_named(seen[-1].name) is seen[-1]
    assert scene_index.object_named(seen[0].name) is None  # not in this scene, and no longer remembered
