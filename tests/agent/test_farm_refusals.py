"""`hermes-blender farm run` refuses what it cannot run before anything starts, each with a named state and the
way out: no `openjd`, no Blender, no adaptor, a folder that is no bundle, a template edited into an invalid one.
The real `openjd check` judges the template; the bundles are the add-on's own templates (`job_templates.py`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from blender_addon.tools.job_templates import Job
from hermes_blender.errors import FarmRunError
from hermes_blender.farm import FarmRun
from tests.other_user import OtherUser, needs_a_made_user

pytestmark = pytest.mark.timeout(300)
HERMES_BLENDER = Path(sys.executable).parent / "hermes-blender"


def bundle(folder: Path, flavour: str = "plain") -> Path:
    job = Job(
        name="shot",
        blend=str(folder / "scene" / "shot.blend"),
        output_folder=str(folder / "frames"),
        frames=[1, 2, 3],
        scene="Scene",
        view_layers=["ViewLayer"],
        engine="BLENDER_WORKBENCH",
        output_format="PNG",
        file_pattern="frame_####",
        chunk_size=2,
        flavour=flavour,
    )
    folder.mkdir(exist_ok=True)
    (folder / "template.yaml").write_text(json.dumps(job.template()))
    (folder / "parameter_values.yaml").write_text(json.dumps(job.parameter_values()))
    return folder


def refused(folder: Path, **environ: str) -> FarmRunError:
    env = {**os.environ, **environ}
    with pytest.raises(FarmRunError) as caught:
        FarmRun(folder, environ=env)
    return caught.value


def path_without(command: str, *first: Path) -> str:
    """This machine's PATH but the folders that hold `command`, after the folders `first`."""
    kept = [part for part in os.environ["PATH"].split(os.pathsep) if not (Path(part) / command).exists()]
    return os.pathsep.join([*map(str, first), *kept])


def test_no_openjd_anywhere_is_openjd_missing_with_the_command_that_installs_it(tmp_path: Path) -> None:
    error = refused(bundle(tmp_path / "bundle"), PATH=str(tmp_path), HERMES_BLENDER_OPENJD="")
    assert error.state == "openjd_missing" and "uv tool install openjd-cli==0.8.0" in str(error)


def test_no_blender_is_blender_missing_and_runs_nothing(tmp_path: Path) -> None:
    folder = bundle(tmp_path / "bundle")
    error = refused(folder, PATH=path_without("blender"))
    assert error.state == "blender_missing" and "--blender" in str(error)
    assert not (folder / "logs").exists()


def test_the_adaptor_flavour_without_aws_adaptor_is_adaptor_missing(tmp_path: Path) -> None:
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "blender").symlink_to("/bin/true")  # never run: the adaptor is missing
    error = refused(
        bundle(tmp_path / "bundle", "deadline_adaptor"), PATH=path_without("blender-openjd", tmp_path / "bin")
    )
    assert error.state == "adaptor_missing" and "deadline-cloud-for-blender" in str(error)


@pytest.mark.parametrize(
    "edit, state",
    [
        (lambda t: t | {"specificationVersion": "jobtemplate-1999-01"}, "invalid_template"),
        (lambda t: t | {"steps": [step | {"script": {"actions": {}}} for step in t["steps"]]}, "invalid_template"),
        (lambda t: {"specificationVersion": t["specificationVersion"]}, "not_a_bundle"),
    ],
    ids=["unknown specification", "a step that runs nothing", "no steps"],
)
def test_a_template_edited_by_hand_into_an_invalid_one_is_refused_before_it_runs(
    tmp_path: Path, edit: Any, state: str
) -> None:
    folder = bundle(tmp_path / "bundle")
    template = json.loads((folder / "template.yaml").read_text())
    (folder / "template.yaml").write_text(json.dumps(edit(template)))
    error = refused(folder)
    assert error.state == state, str(error)
    assert not (folder / "logs").exists()


def test_a_folder_that_is_no_bundle_is_refused_on_the_command_line_with_its_state(tmp_path: Path) -> None:
    done = subprocess.run(
        [str(HERMES_BLENDER), "farm", "run", str(tmp_path), "--json"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert json.loads(done.stdout)["state"] == "not_a_bundle" and "[not_a_bundle]" in done.stderr


def shared_folder(tmp_path: Path) -> Path:
    """A folder every user may add to (sticky, as /tmp), under folders everyone may enter."""
    tmp_path.chmod(0o755)
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o1777)
    shared.chmod(0o1777)
    return shared


def given_to(user: OtherUser, folder: Path) -> Path:
    subprocess.run(["chown", "-R", f"{user.uid}:{user.gid}", str(folder)], check=True, timeout=60)
    return folder


@needs_a_made_user
def test_a_bundle_in_a_folder_another_user_owns_is_unsafe_folder_and_runs_nothing(
    tmp_path: Path, other_user: OtherUser
) -> None:
    """Their template is their code: root (or anyone) never runs it, nor writes a log in their folder."""
    folder = given_to(other_user, bundle(shared_folder(tmp_path) / "bundle"))
    error = refused(folder)
    assert error.state == "unsafe_folder", str(error)
    assert f"uid {other_user.uid}" in str(error)
    assert not (folder / "logs").exists()


@needs_a_made_user
def test_a_bundle_reached_through_a_link_another_user_planted_is_unsafe_folder(
    tmp_path: Path, other_user: OtherUser
) -> None:
    """The link's owner could name another bundle between `openjd check` and `openjd run`."""
    mine = bundle(tmp_path / "mine")
    link = shared_folder(tmp_path) / "bundle"
    link.symlink_to(mine)
    os.lchown(link, other_user.uid, other_user.gid)  # as if they made it (pytest's folders are closed to them)
    error = refused(link)
    assert error.state == "unsafe_folder", str(error)
    assert not (mine / "logs").exists()


@needs_a_made_user
def test_a_bundle_in_a_folder_another_user_may_write_is_unsafe_folder(tmp_path: Path, other_user: OtherUser) -> None:
    """Its group may write it and has another member: the template could be swapped after it is checked."""
    folder = bundle(tmp_path / "bundle")
    os.chown(folder, 0, other_user.gid)
    folder.chmod(0o770)
    error = refused(folder)
    assert error.state == "unsafe_folder", str(error)
    assert not (folder / "logs").exists()


@needs_a_made_user
def test_a_bundle_of_ones_own_inside_another_users_folder_is_unsafe_folder(
    tmp_path: Path, other_user: OtherUser
) -> None:
    """They may rename it and put a bundle of theirs in its place between `openjd check` and `openjd run`."""
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o755)
    folder = bundle(theirs / "bundle")
    os.chown(theirs, other_user.uid, other_user.gid)
    error = refused(folder)
    assert error.state == "unsafe_folder", str(error)
    assert f"{theirs} (on the way to {folder})" in str(error)
    assert not (folder / "logs").exists()
