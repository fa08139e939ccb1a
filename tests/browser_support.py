"""Debian's Chromium, headless, driven by Playwright for Python, against ``kubetrain dashboard`` as a person
runs it: the fixtures of the browser tier (and of the e2e tier's Jobs view test), imported by their conftests.
Every page a test opens fails the test if it sent a request anywhere but the dashboard's own origin."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Browser, Page, sync_playwright

from waiting import PATIENCE

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_HOME = Path(__file__).resolve().parents[1] / ".state" / "tools" / "chromium"
"""Chromium's home: what it keeps of its own beside Playwright's throwaway profile (~/.config/chromium,
~/.cache/chromium, ~/.pki) stays in the checkout instead of the machine's home."""
SCREENSHOTS_ENV = "KUBETRAIN_SCREENSHOTS"
"""A directory to keep the tests' screenshots in (docs/images when refreshing the docs' pictures)."""


@contextlib.contextmanager
def _environment(name: str, value: str) -> Iterator[None]:
    """``name`` set to ``value`` in this process's environment while inside, as it was after."""
    before = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if before is None:
            del os.environ[name]
        else:
            os.environ[name] = before


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    if not CHROMIUM.exists():
        pytest.skip(f"browser tier skipped: no {CHROMIUM} (make host-packages installs Debian's chromium)")
    temporary = CHROMIUM_HOME / "tmp"
    temporary.mkdir(parents=True, exist_ok=True)
    # Playwright's driver makes the profile and artifacts directories in its TMPDIR, read from the environment
    # it starts with, and a driver or Chromium killed mid-run leaves them there: the checkout's, not /tmp.
    with _environment("TMPDIR", str(temporary)), sync_playwright() as playwright:
        own_home = {
            "HOME": str(CHROMIUM_HOME),
            "XDG_CONFIG_HOME": str(CHROMIUM_HOME / ".config"),
            "XDG_CACHE_HOME": str(CHROMIUM_HOME / ".cache"),
            "TMPDIR": str(temporary),  # Chromium's own org.chromium.Chromium.* files
        }
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), env={**os.environ, **own_home})
        yield launched
        launched.close()


@dataclass
class Viewer:
    """One browser tab on the dashboard, recording where each of its requests went."""

    page: Page
    base: str
    requests: list[str] = field(default_factory=list)

    def open(self, fragment: str = "") -> Page:
        self.page.goto(f"{self.base}{fragment}")
        return self.page

    def foreign_requests(self) -> list[str]:
        origin = urlsplit(self.base)
        return [url for url in self.requests if urlsplit(url)[:2] != origin[:2]]

    def screenshot(self, name: str) -> None:
        directory = os.environ.get(SCREENSHOTS_ENV)
        if directory:
            Path(directory).mkdir(parents=True, exist_ok=True)
            self.page.screenshot(path=str(Path(directory) / f"{name}.png"), full_page=True)


@pytest.fixture
def viewer_for(browser: Browser, tmp_path: Path) -> Iterator[Callable[[str], Viewer]]:
    """``viewer_for(url)``: a fresh tab (own cookies) on the dashboard at ``url``. What each tab showed last
    is kept as ``last-<n>.png`` in the test's temporary directory, for a failure's post-mortem."""
    opened: list[Viewer] = []

    def make(base: str) -> Viewer:
        context = browser.new_context(viewport={"width": 1280, "height": 860})
        page = context.new_page()
        page.set_default_timeout(PATIENCE * 1000)  # a click or a page waits for its outcome, not a speed
        viewer = Viewer(page, base)
        page.on("request", lambda request: viewer.requests.append(request.url))
        opened.append(viewer)
        return viewer

    yield make
    for number, viewer in enumerate(opened):
        viewer.page.screenshot(path=str(tmp_path / f"last-{number}.png"), full_page=True)
        viewer.page.context.close()
    for viewer in opened:
        assert viewer.foreign_requests() == [], "the page sent requests outside the dashboard's origin"
