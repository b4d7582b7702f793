"""The bridge's own folders (log, checkpoints): only its user can change them, and no name on the way is a link."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest

from blender_addon.owner_files.folders import NotOwnFolder, own_folder
from tests.other_user import needs_another_user

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.skipif(sys.platform == "win32", reason="POSIX owners and links (Windows: the profile's ACLs)"),
]
NOBODY = 65534


def test_a_missing_folder_is_made_owner_only_and_an_own_one_is_made_0700(tmp_path: Path) -> None:
    made = tmp_path / "a" / "b"
    assert own_folder(made)
    assert stat.S_IMODE(made.stat().st_mode) == 0o700 and stat.S_IMODE((tmp_path / "a").stat().st_mode) == 0o700
    loose = tmp_path / "loose"
    loose.mkdir(mode=0o755)
    loose.chmod(0o755)
    assert own_folder(loose) and stat.S_IMODE(loose.stat().st_mode) == 0o700


def test_a_missing_folder_is_not_made_when_only_looked_at(tmp_path: Path) -> None:
    assert own_folder(tmp_path / "none", create=False) is False
    assert not (tmp_path / "none").exists()


@pytest.mark.parametrize("where", ["the folder itself", "a folder on the way"])
def test_a_link_on_the_way_is_refused_and_nothing_is_made_behind_it(tmp_path: Path, where: str) -> None:
    target = tmp_path / "target"
    target.mkdir()
    (tmp_path / "link").symlink_to(target)
    folder = tmp_path / "link" if where == "the folder itself" else tmp_path / "link" / "inside"
    with pytest.raises(NotOwnFolder, match="link"):
        own_folder(folder)
    assert list(target.iterdir()) == []


def test_a_folder_anyone_may_write_without_a_sticky_bit_is_refused_on_the_way(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    with pytest.raises(NotOwnFolder, match="every user may write"):
        own_folder(shared / "mine")
    assert not (shared / "mine").exists()


@needs_another_user
def test_another_users_folder_is_refused_itself_and_on_the_way_and_not_chmodded(tmp_path: Path) -> None:
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o755)
    theirs.chmod(0o755)
    os.chown(theirs, NOBODY, NOBODY)
    with pytest.raises(NotOwnFolder, match="another user"):
        own_folder(theirs)
    with pytest.raises(NotOwnFolder, match="uid 65534"):
        own_folder(theirs / "config")
    assert not (theirs / "config").exists() and stat.S_IMODE(theirs.stat().st_mode) == 0o755


def test_a_sticky_shared_folder_may_be_on_the_way(tmp_path: Path) -> None:
    sticky = tmp_path / "sticky"
    sticky.mkdir()
    sticky.chmod(0o1777)
    assert own_folder(sticky / "mine")
