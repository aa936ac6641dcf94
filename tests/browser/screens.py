"""The screenshots kept in the repository (docs/screenshots/), for a person to look at.

A test run writes them beside the others in test-artifacts/ (gitignored), so running the suite
leaves the checkout clean; `MEMORY_UPDATE_SCREENSHOTS=1 pytest tests/browser` refreshes the
repository's copies after a change to the pages.
"""

from __future__ import annotations

import os
from pathlib import Path

from playwright.sync_api import Page

ROOT = Path(__file__).resolve().parents[2]
# Where every screenshot of a run goes (gitignored), these and the `shot` fixture's alike.
ARTIFACTS = ROOT / "test-artifacts"


def destination() -> Path:
    """docs/screenshots/ when asked to refresh them, else test-artifacts/."""
    if os.environ.get("MEMORY_UPDATE_SCREENSHOTS") == "1":
        return ROOT / "docs" / "screenshots"
    return ARTIFACTS


def keep(page: Page, name: str, device: str, *, full_page: bool = False) -> None:
    """What the screen shows, as <destination>/<name>-<device>.png."""
    folder = destination()
    folder.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=folder / f"{name}-{device}.png", full_page=full_page)
