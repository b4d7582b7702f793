"""The documents a user reads: every relative link resolves inside the repository (or, in docs/, to a page the site's
build makes: scripts/docs_hooks.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT
from tests.docs.conftest import docs_hooks

DOCUMENTS = sorted(
    path
    for path in REPO_ROOT.rglob("*.md")
    if not any(part.startswith(".") for part in path.relative_to(REPO_ROOT).parts)
)
_LINK = re.compile(r"\]\(([^)\s]+)\)")
DOCS = REPO_ROOT / "docs"
GENERATED = {DOCS / uri for uri in docs_hooks().GENERATED}
"""What the documentation site's build makes: no file on disk (tests/docs/ hold those pages)."""


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda path: str(path.relative_to(REPO_ROOT)))
def test_every_relative_link_points_at_a_file_inside_the_repository(document: Path) -> None:
    broken = []
    for target in _LINK.findall(document.read_text()):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue  # a web address or an anchor on the same page
        resolved = (document.parent / target.split("#", 1)[0]).resolve()
        if resolved in GENERATED and document.is_relative_to(DOCS):
            continue
        if not resolved.is_relative_to(REPO_ROOT) or not resolved.exists():
            broken.append(target)
    assert broken == []
