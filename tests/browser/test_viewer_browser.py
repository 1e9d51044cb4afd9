"""The viewer in headless chromium: scrub with the keyboard, jump on the timeline, and
measure key-press-to-frame latency at 720p against a plain fetch-and-draw of the same
frames in the same page and run (load slows both alike)."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("selenium")

from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import Select, WebDriverWait

from hyperframes.viewer import BackgroundServer, Viewer, open_viewed
from hyperframes.viewer.server import allowed_hosts

P95_TARGET_MS = 50.0
"""The figure an idle machine gives (warm cache, JPEG): recorded in latency.json, not asserted,
since on a loaded machine it measures the machine."""
PRESSES = 50
RATIO = 1.5
SLACK_MS = 5.0
"""The viewer's p95 key-to-frame latency may be at most RATIO x the p95 of a plain
fetch-decode-draw-paint of the same frames, plus SLACK_MS for the key event and the page's
bookkeeping. It is usually below the plain figure, since the page reads ahead."""


@pytest.fixture(scope="module")
def served(clip_store: Path) -> Iterator[tuple[Viewer, str]]:
    viewer = Viewer(
        open_viewed(clip_store), default_format="png", allowed_hosts=allowed_hosts("127.0.0.1")
    )
    server = BackgroundServer(viewer.app, port=0)
    server.start()
    try:
        yield viewer, server.url
    finally:
        server.close()
        viewer.close()


@pytest.fixture(scope="module")
def page(browser: Any, served: tuple[Viewer, str]) -> Any:
    _, url = served
    browser.get(url)
    wait_index(browser, 0)
    return browser


def wait_for(driver: Any, script: str, timeout: float = 15) -> Any:
    """Wait until the JS expression ``script`` is truthy; returns its value."""
    return WebDriverWait(driver, timeout).until(lambda d: d.execute_script(f"return {script}"))


def wait_index(driver: Any, index: int) -> None:
    wait_for(driver, f"hfViewer.state.index === {index} && !hfViewer.state.inflight")
    assert driver.find_element(By.ID, "index").text == str(index)


def shown_hash(driver: Any) -> str:
    value: str = driver.execute_async_script(
        "const done = arguments[0]; hfViewer.frameHash().then(done);"
    )
    return value


def store_hash(viewer: Viewer, index: int) -> str:
    return hashlib.sha256(viewer.viewed.store[index].tobytes()).hexdigest()


def press(driver: Any, key: str, times: int = 1) -> None:
    for _ in range(times):
        ActionChains(driver).send_keys(key).perform()


def test_keyboard_scrubbing_shows_the_store_frames(page: Any, served: tuple[Viewer, str]) -> None:
    viewer, _ = served
    assert shown_hash(page) == store_hash(viewer, 0)
    press(page, Keys.ARROW_RIGHT, 5)
    wait_index(page, 5)
    assert shown_hash(page) == store_hash(viewer, 5)
    press(page, Keys.ARROW_LEFT, 2)
    wait_index(page, 3)
    assert shown_hash(page) == store_hash(viewer, 3)
    assert page.find_element(By.ID, "time").text == "0.120 s"  # 25 fps
    press(page, Keys.END)
    wait_index(page, 47)
    assert shown_hash(page) == store_hash(viewer, 47)


def test_clicking_a_boundary_jumps_to_it(page: Any, served: tuple[Viewer, str]) -> None:
    viewer, _ = served
    boundaries = [int(b) for b in viewer.viewed.store.groups.starts[1:-1]]
    target = boundaries[len(boundaries) // 2]
    wait_for(page, "hfViewer.state.timeline !== null")
    timeline = page.find_element(By.ID, "timeline")
    width = timeline.rect["width"]
    x = (target + 0.5) / len(viewer.viewed.store) * width
    ActionChains(page).move_to_element_with_offset(
        timeline, int(x - width / 2), 0
    ).click().perform()
    wait_index(page, target)
    assert shown_hash(page) == store_hash(viewer, target)


def test_cache_figures_change_while_scrubbing(page: Any) -> None:
    before = wait_for(page, "hfViewer.state.stats")
    served_text = page.find_element(By.ID, "served").text
    assert "frames served from" in served_text
    # another format: the page's own cache of decoded frames cannot serve these
    Select(page.find_element(By.ID, "format")).select_by_value("jpeg")
    press(page, Keys.HOME)
    wait_index(page, 0)
    press(page, Keys.ARROW_RIGHT, 3)
    wait_index(page, 3)
    after = wait_for(
        page, f"hfViewer.state.stats && hfViewer.state.stats.requests > {before['requests']}"
    )
    assert after
    stats = page.execute_script("return hfViewer.state.stats")

    def lookups(figures: Any) -> int:
        tiers = figures["tiers"]
        return sum(tiers[t]["hits"] + tiers[t]["misses"] for t in ("hot", "warm"))

    # the page may draw some frames from its own read-ahead, but the store was asked again
    assert lookups(stats) > lookups(before)
    assert page.find_element(By.ID, "served").text != served_text
    assert len(page.find_elements(By.CSS_SELECTOR, "#recent span")) >= 4
    assert page.find_element(By.ID, "tier").text.split()[0] in ("hot", "warm", "cold")


def test_screenshot_artifact(page: Any, artifacts: Path) -> None:
    wait_for(page, "hfViewer.state.timeline && hfViewer.state.timeline.complete")
    path = artifacts / "viewer.png"
    assert page.save_screenshot(str(path))
    assert path.stat().st_size > 10_000


PLAIN_FETCH_AND_DRAW = """
const [indices, format, done] = arguments;
(async () => {
  const canvas = document.createElement("canvas");
  document.body.appendChild(canvas);
  const times = [];
  for (const i of indices) {
    const start = performance.now();
    const response = await fetch(`/api/frame/${i}?format=${format}`);
    const bitmap = await createImageBitmap(await response.blob(), {
      colorSpaceConversion: "none", premultiplyAlpha: "none",
    });
    canvas.width = bitmap.width;
    canvas.height = bitmap.height;
    canvas.getContext("2d").drawImage(bitmap, 0, 0);
    await new Promise((resolve) => requestAnimationFrame(() => setTimeout(resolve, 0)));
    times.push(performance.now() - start);
  }
  canvas.remove();
  done(times);
})().catch((error) => done(String(error)));
"""
"""The least any page must do per frame: fetch it from the same server, decode, draw, paint."""

SLOW_KEY_HANDLER = """
window.hfSlowKey = () => { const t = performance.now(); while (performance.now() - t < 150) {} };
window.addEventListener("keydown", window.hfSlowKey, { capture: true });
"""
"""A planted fault: 150 ms of work on every key press, after the viewer's own handler."""


def p95(values: list[float]) -> float:
    """Nearest-rank 95th percentile (computed here, not by the page's own helper)."""
    ordered = sorted(values)
    return ordered[max(1, math.ceil(0.95 * len(ordered))) - 1]


def warm_up(page: Any, fmt: str) -> None:
    """Show every frame once in ``fmt``: all of them are then in the store's hot tier."""
    Select(page.find_element(By.ID, "format")).select_by_value(fmt)
    press(page, Keys.HOME)
    wait_index(page, 0)
    for _ in range(47):
        press(page, Keys.ARROW_RIGHT)
        wait_for(page, "!hfViewer.state.inflight && hfViewer.state.pendingKeys.length === 0")


def measure(page: Any, fmt: str, *, presses: int = PRESSES, baseline: bool = True) -> dict:
    """Key press -> frame shown over ``presses`` presses going back and forth from the end;
    with ``baseline``, each press is followed by the plain fetch-and-draw of the frame it
    showed, so that the two figures see the same load."""
    Select(page.find_element(By.ID, "format")).select_by_value(fmt)
    press(page, Keys.END)
    wait_index(page, 47)
    page.execute_script("hfViewer.state.latencies.length = 0")
    plain: list[float] = []
    key = Keys.ARROW_LEFT
    for n in range(presses):
        if n and n % 40 == 0:
            key = Keys.ARROW_RIGHT if key == Keys.ARROW_LEFT else Keys.ARROW_LEFT
        press(page, key)
        wait_for(page, "!hfViewer.state.inflight && hfViewer.state.pendingKeys.length === 0")
        if baseline:
            shown = page.execute_script("return hfViewer.state.index")
            times = page.execute_async_script(PLAIN_FETCH_AND_DRAW, [shown], fmt)
            assert isinstance(times, list), f"the plain fetch failed: {times}"
            plain += times
    viewer = page.execute_script("return hfViewer.state.latencies.slice()")
    row = {"format": fmt, "presses": len(viewer), "p50_ms": sorted(viewer)[len(viewer) // 2],
           "p95_ms": p95(viewer), "max_ms": max(viewer),
           "sorted_ms": sorted(round(v, 1) for v in viewer)}  # fmt: skip
    if baseline:
        row.update(plain_p95_ms=p95(plain), budget_ms=RATIO * p95(plain) + SLACK_MS)
        row["plain_sorted_ms"] = sorted(round(v, 1) for v in plain)
    return row


@pytest.mark.slow  # 27 s: make test-slow (CI runs it after make test)
def test_key_to_frame_latency_at_720p(
    page: Any, served: tuple[Viewer, str], artifacts: Path, record_property: Any
) -> None:
    viewer, _ = served
    assert viewer.viewed.store.spec.shape == (720, 1280, 3)
    warm_up(page, "jpeg")
    before = viewer.frames.stats()["served"]
    jpeg = measure(page, "jpeg")
    after = viewer.frames.stats()["served"]
    jpeg["p95_under_target"] = jpeg["p95_ms"] <= P95_TARGET_MS  # recorded, not asserted
    figures = [jpeg, measure(page, "png", baseline=False)]  # png: recorded only
    (artifacts / "latency.json").write_text(json.dumps(figures, indent=2))
    for row in figures:
        record_property(f"p95_ms_{row['format']}", row["p95_ms"])
        print(f"key -> frame at 720p, {row['format']}: {row}")
    record_property("plain_p95_ms_jpeg", jpeg["plain_p95_ms"])
    assert jpeg["presses"] >= PRESSES
    # warm: no frame of the timed presses or of the baseline was read from the disk
    assert after["cold"] == before["cold"], (before, after)
    assert jpeg["p95_ms"] <= jpeg["budget_ms"], jpeg


@pytest.mark.slow
def test_the_latency_check_catches_a_slow_key_handler(page: Any) -> None:
    """The comparison above fails when the page does 150 ms of work per key press."""
    warm_up(page, "jpeg")
    page.execute_script(SLOW_KEY_HANDLER)
    try:
        slow = measure(page, "jpeg", presses=20)
    finally:
        page.execute_script('window.removeEventListener("keydown", window.hfSlowKey, true)')
    assert slow["p95_ms"] > slow["budget_ms"], slow
