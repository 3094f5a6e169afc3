#!/usr/bin/env python3
"""Render docs/images/portal-desktop.png and portal-phone.png, the pictures the README and
docs/portal.md show, from an ordinary demo: a local stack (``seatlease local`` on a free
port, in a temporary folder, SQLite, no Pub/Sub), a week of ordinary usage on the demo
tenant's two licenses (stored through the audit function's insert path), ann and bob
holding seats as the README's tour does, and the portal opened with the link ``make run``
prints, in Debian's Chromium at 1280 px and at a phone's 390 px.

Each PNG carries the page's visible text in a text chunk (``seatlease-page-text``), so a
test (tests/test_portal_browser.py) checks what a picture shows without reading pixels:
ordinary names, never the browser test's hostile strings.

Usage:
    .venv/bin/python tools/portal_screenshots.py               # rewrite docs/images/
    .venv/bin/python tools/portal_screenshots.py --out DIR     # somewhere else
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
OUTPUT = REPO / "docs" / "images"
TEXT_KEY = "seatlease-page-text"
DESKTOP = (1280, 1500)
PHONE = {"width": 390, "height": 844, "deviceScaleFactor": 2, "mobile": True}
# Who holds a seat in the picture: the README tour's own example, and a colleague.
HOLDERS = [
    ("demo-app", "laptop-1", {"user": "ann", "host": "pc-7"}),
    ("demo-app", "laptop-2", {"user": "bob", "host": "pc-9"}),
    ("demo-crash", "build-3", {"user": "carol", "host": "ci-2"}),
]


def chrome(profile: Path) -> Any:
    """Headless Chromium through chromedriver (selenium), at desktop size."""
    from selenium import webdriver

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or shutil.which("chromium-browser") or ""
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        "--hide-scrollbars",
        f"--user-data-dir={profile}",
        f"--window-size={DESKTOP[0]},{DESKTOP[1]}",
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    service = webdriver.ChromeService(shutil.which("chromedriver"))
    return webdriver.Chrome(options=options, service=service)


def week_of_usage(tenant: str, licenses: list[str]) -> None:
    """Six days of ordinary leases on each license (the same hours on both: their lines
    coincide, as issue 34 saw), stored through the audit function's insert path."""
    from seatlease.records import event_log

    start = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(days=6)
    events = []
    for license_id in licenses:
        for day in range(6):
            for n, hour in enumerate((9, 13)[: 1 + day % 2]):
                at = start + timedelta(days=day, hours=hour - start.hour % 24)
                session = f"{license_id}-{day}-{n}"
                common = {"tenant_id": tenant, "license_id": license_id, "metadata": {},
                          "session_id": session, "client_id": f"ws-{n}",
                          "seats_total": 2}  # fmt: skip
                events.append({**common, "event_id": f"{session}-a", "type": "lease.acquired",
                               "occurred_at": at, "seats_used": n + 1})  # fmt: skip
                ended = at + timedelta(hours=3)
                events.append({**common, "event_id": f"{session}-r", "type": "lease.released",
                               "occurred_at": ended, "seats_used": 0})  # fmt: skip
    event_log.insert_events(events)


def page_text(driver: Any) -> str:
    return str(driver.execute_script("return document.body.innerText"))


def save(driver: Any, path: Path) -> str:
    """A screenshot with the page's visible text in its ``seatlease-page-text`` chunk."""
    from PIL import Image
    from PIL.PngImagePlugin import PngInfo

    text = page_text(driver)
    path.parent.mkdir(parents=True, exist_ok=True)
    assert driver.save_screenshot(str(path))
    with Image.open(path) as image:
        image.load()
        info = PngInfo()
        info.add_text(TEXT_KEY, text)
        image.save(path, pnginfo=info, optimize=True)
    return text


def read_page_text(path: Path) -> str:
    from PIL import Image

    with Image.open(path) as image:
        return str(image.text.get(TEXT_KEY, ""))  # type: ignore[attr-defined]


def render(out: Path, folder: Path) -> dict[str, str]:
    """Start a local stack in ``folder``, hold the seats, open the portal's link and save
    ``portal-desktop.png`` and ``portal-phone.png`` into ``out``; returns each picture's
    page text."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ready
    from selenium.webdriver.support.ui import WebDriverWait

    from seatlease.records import db
    from seatlease.seats import redisconn
    from seatlease_cli.localstack import DEMO_LICENSES, DEMO_TENANT, LocalStack
    from seatlease_cli.procs import free_port
    from seatlease_client import SeatClient

    for var in ("REDIS_URL", "DATABASE_URL", "PUBSUB_EMULATOR_HOST", "PUBSUB_TOPIC"):
        os.environ.pop(var, None)
    redisconn.reset()
    db.reset()
    previous = Path.cwd()
    os.chdir(folder)
    stack = LocalStack(port=free_port(), reaper_interval=3600, pubsub=False, say=lambda _: None)
    driver = None
    try:
        state = stack.start()
        week_of_usage(DEMO_TENANT, list(DEMO_LICENSES))
        # Verified, as a product is: pinned to the local stack's own keys (issue 48).
        keys_url = f"{state['base_url']}/keys"
        with urllib.request.urlopen(keys_url, timeout=10) as served:  # noqa: S310
            pinned = [jwk["x"] for jwk in json.load(served)["keys"]]
        client = SeatClient(state["base_url"], state["api_key"], pinned_keys=pinned)
        for license_id, client_id, metadata in HOLDERS:
            client.acquire(license_id, client_id, metadata=metadata)
        driver = chrome(folder / "chromium-profile")
        driver.get(state["portal_url"])
        wait = WebDriverWait(driver, 30)
        wait.until(ready.presence_of_element_located((By.CSS_SELECTOR, "#keys tbody tr")))
        wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#charts figure")) == 2)
        time.sleep(0.5)  # fonts and the meters settle
        texts = {"portal-desktop.png": save(driver, out / "portal-desktop.png")}
        driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", PHONE)
        wait.until(lambda d: d.execute_script("return window.innerWidth") == PHONE["width"])
        time.sleep(0.5)  # the charts redraw at the new width
        texts["portal-phone.png"] = save(driver, out / "portal-phone.png")
        return texts
    finally:
        if driver is not None:
            driver.quit()
        stack.stop()
        redisconn.reset()
        db.reset()
        os.chdir(previous)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=OUTPUT)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="seatlease-portal-") as folder:
        texts = render(args.out.resolve(), Path(folder))
    print(json.dumps({name: text.splitlines()[:3] for name, text in texts.items()}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
