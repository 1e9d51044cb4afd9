"""The viewer in headless chromium: scrub with the keyboard, jump on the timeline, and
measure key-press-to-frame latency at 720p (p95 <= 50 ms with a warm cache)."""

from __future__ import annotations

import hashlib
import json
import os
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
PRESSES = 50
OVERLOAD = 1.5
"""Load average per core above which a missed latency budget is reported, not failed: the
figure measures the viewer only when the browser and server get the cores they ask for."""


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


def measure(page: Any, fmt: str, *, warm: bool) -> dict[str, float]:
    """p95 key press -> frame shown over :data:`PRESSES` presses with a warm cache.

    The warm pass steps through every frame once, which puts all of them in the store's
    hot tier; the timed presses then go back and forth from the end.
    """
    Select(page.find_element(By.ID, "format")).select_by_value(fmt)
    if warm:
        press(page, Keys.HOME)
        wait_index(page, 0)
        for _ in range(47):
            press(page, Keys.ARROW_RIGHT)
            wait_for(page, "!hfViewer.state.inflight && hfViewer.state.pendingKeys.length === 0")
    else:
        press(page, Keys.END)
        wait_index(page, 47)
    page.execute_script("hfViewer.state.latencies.length = 0")
    key = Keys.ARROW_LEFT
    for n in range(PRESSES):
        if n and n % 40 == 0:
            key = Keys.ARROW_RIGHT if key == Keys.ARROW_LEFT else Keys.ARROW_LEFT
        press(page, key)
        wait_for(page, "!hfViewer.state.inflight && hfViewer.state.pendingKeys.length === 0")
    values = page.execute_script("return hfViewer.state.latencies.slice()")
    p95 = page.execute_script("return hfViewer.percentile(arguments[0], 95)", values)
    p50 = page.execute_script("return hfViewer.percentile(arguments[0], 50)", values)
    return {"format": fmt, "presses": len(values), "p50_ms": p50, "p95_ms": p95,
            "max_ms": max(values), "sorted_ms": sorted(round(v, 1) for v in values)}  # fmt: skip


def test_key_to_frame_latency_at_720p(
    page: Any, served: tuple[Viewer, str], artifacts: Path, record_property: Any
) -> None:
    viewer, _ = served
    assert viewer.viewed.store.spec.shape == (720, 1280, 3)
    figures = [measure(page, "jpeg", warm=True), measure(page, "png", warm=False)]
    (artifacts / "latency.json").write_text(json.dumps(figures, indent=2))
    for row in figures:
        record_property(f"p95_ms_{row['format']}", row["p95_ms"])
        print(f"key -> frame at 720p, {row['format']}: {row}")
    jpeg = figures[0]
    assert jpeg["presses"] >= PRESSES
    load = os.getloadavg()[0] / (os.cpu_count() or 1)
    if jpeg["p95_ms"] > P95_TARGET_MS and load > OVERLOAD:
        pytest.xfail(
            f"p95 {jpeg['p95_ms']:.1f} ms over {P95_TARGET_MS} ms on a machine at load "
            f"{load:.1f} per core: a figure under such load measures the machine (latency.json)"
        )
    assert jpeg["p95_ms"] <= P95_TARGET_MS, figures
