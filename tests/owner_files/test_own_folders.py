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


@needs_another_user
@pytest.mark.parametrize("where", ["the folder itself", "a folder on the way"])
def test_a_link_another_user_made_on_the_way_is_refused_and_nothing_is_made_behind_it(
    tmp_path: Path, where: str
) -> None:
    target = tmp_path / "target"
    target.mkdir()
    (tmp_path / "link").symlink_to(target)
    os.lchown(tmp_path / "link", NOBODY, NOBODY)
    folder = tmp_path / "link" if where == "the folder itself" else tmp_path / "link" / "inside"
    with pytest.raises(NotOwnFolder, match="link another user"):
        own_folder(folder)
    assert list(target.iterdir()) == []


@pytest.mark.parametrize("where", ["the folder itself", "a folder on the way"])
def test_a_link_this_user_made_is_followed_and_its_target_checked(tmp_path: Path, where: str) -> None:
    """~/.config kept in a dotfiles folder, /home a link to /var/home: links the user or root made are theirs."""
    target = tmp_path / "target"
    target.mkdir(mode=0o700)
    (tmp_path / "link").symlink_to(target)
    folder = tmp_path / "link" if where == "the folder itself" else tmp_path / "link" / "inside"
    assert own_folder(folder)
    assert (target if where == "the folder itself" else target / "inside").is_dir()


def test_a_shared_sticky_folder_or_one_others_may_write_is_never_the_bridges_own_and_is_not_chmodded(
    tmp_path: Path,
) -> None:
    sticky, open_to_all = tmp_path / "sticky-final", tmp_path / "open"
    sticky.mkdir()
    sticky.chmod(0o1777)
    open_to_all.mkdir()
    open_to_all.chmod(0o777)
    with pytest.raises(NotOwnFolder, match="shared folder"):
        own_folder(sticky)
    with pytest.raises(NotOwnFolder, match="every user may write"):
        own_folder(open_to_all)
    assert stat.S_IMODE(sticky.stat().st_mode) == 0o1777 and stat.S_IMODE(open_to_all.stat().st_mode) == 0o777


def test_a_relative_folder_is_refused() -> None:
    with pytest.raises(NotOwnFolder, match="absolute"):
        own_folder(Path("checkpoints"))


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


@pytest.mark.parametrize("kind", ["a hard link", "another user's file"])
def test_a_log_is_never_appended_to_a_file_not_this_users_alone(tmp_path: Path, kind: str) -> None:
    from blender_addon.owner_files.permissions import open_owner_only_for_append

    precious = tmp_path / "precious"
    precious.write_text("root's own\n")
    precious.chmod(0o644)
    log_file = tmp_path / "bridge.log"
    if kind == "a hard link":
        os.link(precious, log_file)
    else:
        if os.geteuid() != 0:
            pytest.skip("giving a file to another user needs root")
        log_file.write_text("theirs\n")
        os.chown(log_file, NOBODY, NOBODY)
    with pytest.raises(PermissionError, match="not a file of this user's alone"):
        open_owner_only_for_append(log_file)
    assert precious.read_text() == "root's own\n" and stat.S_IMODE(precious.stat().st_mode) == 0o644
