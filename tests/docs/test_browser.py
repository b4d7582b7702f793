"""The built site in a real browser: Debian's Chromium, headless, opens the home page, the tool reference and the
troubleshooting page over HTTP, takes a screenshot of each and dumps the DOM its scripts made. Each page must have
the search box, the navigation to every page, and a table; the screenshots must be pictures of a page, not of a
blank window. They are kept in build/docs-screenshots (`HERMES_DOCS_ARTIFACTS` moves it) for a person to look at.

Without Chromium this tier is skipped with the command that installs it; with CI=true a missing Chromium fails it
(.ci/run installs it)."""

from __future__ import annotations

import functools
import os
import re
import shutil
import struct
import subprocess
import threading
import zlib
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.timeout(240)
CHROMIUM = shutil.which("chromium")
WINDOW = (1280, 900)
ARTIFACTS = Path(os.environ.get("HERMES_DOCS_ARTIFACTS") or REPO_ROOT / "build" / "docs-screenshots")
PAGES = {
    "home": ("", "know why it said it cannot"),
    "tools": ("tools/", "get_objects_summary"),
    "troubleshooting": ("troubleshooting/", "app_not_running"),
}
"""Each page: its path in the site, and a word its table must hold."""
NAV = ("Install", "Tool reference", "Troubleshooting", "Security", "Platforms", "Decisions", "Contributing")

if CHROMIUM is None:
    if os.environ.get("CI") == "true":
        raise RuntimeError("CI needs Chromium for the documentation's browser test: apt-get install chromium")
    pytest.skip("no chromium on PATH: `sudo apt-get install chromium` runs this tier", allow_module_level=True)


@pytest.fixture(scope="module")
def served(site: Path) -> Iterator[str]:
    handler = functools.partial(_Quiet, directory=str(site))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


def _chromium(*args: str, profile: Path) -> subprocess.CompletedProcess[str]:
    """Headless Chromium as root runs it: no sandbox, no GPU, a fresh profile, 3 s of page time for the scripts."""
    return subprocess.run(
        [
            str(CHROMIUM),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            f"--user-data-dir={profile}",
            f"--window-size={WINDOW[0]},{WINDOW[1]}",
            "--virtual-time-budget=3000",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=90,
    )


def _png_rows(path: Path) -> tuple[int, int, list[bytes]]:
    """A PNG's width, height and its rows' raw bytes, filter byte first (enough to tell a blank picture)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    at, chunks, header = 8, b"", b""
    while at < len(data):
        length, kind = struct.unpack(">I4s", data[at : at + 8])
        body = data[at + 8 : at + 8 + length]
        header = body if kind == b"IHDR" else header
        chunks += body if kind == b"IDAT" else b""
        at += 12 + length
    width, height, depth, colour = struct.unpack(">IIBB", header[:10])
    channels = {2: 3, 6: 4}[colour]
    assert depth == 8, f"{path}: {depth} bits per channel"
    raw, stride = zlib.decompress(chunks), 1 + width * channels
    return width, height, [raw[row * stride : (row + 1) * stride] for row in range(height)]


@pytest.mark.parametrize("name", PAGES)
def test_each_page_renders_with_search_navigation_and_a_table(name: str, served: str, tmp_path: Path) -> None:
    path, word = PAGES[name]
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / f"{name}.png"
    shot.unlink(missing_ok=True)
    taken = _chromium(f"--screenshot={shot}", served + path, profile=tmp_path / "shot")
    assert taken.returncode == 0 and shot.is_file(), taken.stderr[-2000:]
    width, height, rows = _png_rows(shot)
    assert (width, height) == WINDOW
    distinct = {row[1 + x * 3 : 4 + x * 3] for row in rows[::20] for x in range(0, width, 20)}
    assert len(distinct) > 20, f"{shot} shows {len(distinct)} colours: a blank or broken page"

    dumped = _chromium("--dump-dom", served + path, profile=tmp_path / "dom")
    dom = dumped.stdout
    assert dumped.returncode == 0 and "</html>" in dom, dumped.stderr[-2000:]
    assert re.search(r'<input[^>]*class="md-search__input"', dom), "no search box"
    links = re.findall(r'<a[^>]*class="md-nav__link[^"]*"[^>]*>\s*(?:<span[^>]*>)?\s*([^<]+?)\s*<', dom)
    assert set(NAV) <= set(links), f"the navigation lacks {set(NAV) - set(links)}"
    tables = re.findall(r"<table>.*?</table>", dom, re.S)
    assert any(word in table for table in tables), f"no table holding {word!r}"
