"""After-screenshots kept in the repository (docs/screenshots/), for a person to look at."""

from __future__ import annotations

from pathlib import Path

from playwright.sync_api import Page

DOCS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"


def keep(page: Page, name: str, device: str, *, full_page: bool = False) -> None:
    """What the screen shows, as docs/screenshots/<name>-<device>.png."""
    DOCS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=DOCS / f"{name}-{device}.png", full_page=full_page)
