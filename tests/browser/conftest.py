"""The browser tier's fixtures: ``browser`` and ``viewer_for`` (tests/browser_support.py)."""

from browser_support import browser, viewer_for

__all__ = ["browser", "viewer_for"]
