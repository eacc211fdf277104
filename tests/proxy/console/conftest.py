"""The console's browser: Debian's Chromium, driven by Playwright's Python package (no
browser is downloaded), and where the tests leave their screenshots."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path(os.environ.get("CHATCLI_TEST_CHROMIUM", "/usr/bin/chromium"))


@pytest.fixture
def browser() -> Iterator[Any]:
    """Chromium, headless; a test that asks for it skips, saying why, without Chromium or
    Playwright (and fails without Chromium where ``CHATCLI_REQUIRE_BROWSER`` is set, as
    ``.ci/run`` does: the tests must run there)."""
    if not CHROMIUM.exists():
        why = f"no Chromium at {CHROMIUM}: apt-get install -y chromium (.ci/run does)"
        if os.environ.get("CHATCLI_REQUIRE_BROWSER"):
            pytest.fail(why, pytrace=False)
        pytest.skip(why)
    sync_api = pytest.importorskip("playwright.sync_api", reason="the [dev] extra has playwright")
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=["--no-sandbox"]
        )
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def screenshots(tmp_path: Path) -> Path:
    """Where a test leaves its screenshots: ``$CHATCLI_CONSOLE_SCREENSHOTS`` (``.ci/run``:
    ``artifacts/console``, which git ignores), else its own tmp folder."""
    folder = Path(os.environ.get("CHATCLI_CONSOLE_SCREENSHOTS", str(tmp_path / "screenshots")))
    folder.mkdir(parents=True, exist_ok=True)
    return folder
