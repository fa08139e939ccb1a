"""The browser tier's fixtures: ``browser`` and ``viewer_for`` (tests/browser_support.py).

Every ``expect`` waits as long as any other wait in the tests (tests/waiting.py): a page on a loaded CI
machine may take far longer than Playwright's 5 s default to show what it must."""

from playwright.sync_api import expect

from browser_support import browser, viewer_for
from waiting import PATIENCE

expect.set_options(timeout=PATIENCE * 1000)  # Playwright counts milliseconds

__all__ = ["browser", "viewer_for"]
