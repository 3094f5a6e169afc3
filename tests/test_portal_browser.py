"""The portal's page in a real browser: Debian's Chromium driven through chromedriver
(selenium), on the page the local stack serves (``LocalStack`` on a free port, its own
redis-server and SQLite database). A client takes a seat with lease metadata chosen to
break out of the page; the tenant admin signs in by pasting the key, sees the lease, the
usage charts and the seat keys, frees the seat through the confirmation dialog and sees it
gone. Each license has its own usage chart, readable at desktop and phone width. The
pictures in docs/images/ are made by tools/portal_screenshots.py from an ordinary demo,
which is checked here too.

``make test`` installs chromium and chromium-driver first (``make browser``); where they
cannot be installed, this test skips saying so."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from http_support import post_json

from seatlease.records import db, event_log, store
from seatlease.seats import redisconn
from seatlease_cli.localstack import (
    DEMO_LICENSE,
    DEMO_LICENSES,
    DEMO_TENANT,
    STORY_LICENSE,
    LocalStack,
)
from seatlease_cli.procs import free_port

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
webdriver = pytest.importorskip("selenium.webdriver", reason="selenium: pip install -e '.[dev]'")
if not (CHROMIUM and CHROMEDRIVER):
    MISSING = (
        "chromium and chromium-driver are not installed and could not be (make browser: "
        "apt-get install chromium chromium-driver, as root)"
    )
    if os.environ.get("CI"):  # CI installs them (make test -> make browser): never a skip there
        pytest.fail(MISSING, pytrace=False)
    pytest.skip(MISSING, allow_module_level=True)

from selenium.common.exceptions import NoAlertPresentException  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support import expected_conditions as ready  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

pytestmark = [pytest.mark.usefixtures("restore_environment"), pytest.mark.timeout(300)]

HOSTILE = "<img src=x onerror=alert(1)>"
DESKTOP = (1280, 1500)
PHONE = {"width": 390, "height": 844, "deviceScaleFactor": 2, "mobile": True}  # a common phone


@pytest.fixture
def stack(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for var in ("REDIS_URL", "DATABASE_URL", "PUBSUB_EMULATOR_HOST", "PUBSUB_TOPIC"):
        monkeypatch.delenv(var, raising=False)
    redisconn.reset()
    db.reset()
    # No Pub/Sub emulator (the page reads the usage rollups, seeded below through the
    # store), so no reaper run either: it would publish to no emulator.
    local = LocalStack(port=free_port(), reaper_interval=3600, pubsub=False, say=lambda _: None)
    try:
        yield local.start()
    finally:
        local.stop()


@pytest.fixture
def browser(tmp_path):
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
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
        f"--user-data-dir={tmp_path / 'chromium-profile'}",
        f"--window-size={DESKTOP[0]},{DESKTOP[1]}",
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(CHROMEDRIVER))
    try:
        yield driver
    finally:
        driver.quit()


def _week_of_usage() -> None:
    """Seven days of leases on the demo license, stored through the audit function's
    insert path, so the chart has a shape (the live lease adds its own event later)."""
    start = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(days=6)
    events = []
    for day in range(6):
        for n, hours in enumerate((9, 13)[: 1 + day % 2]):
            at = start + timedelta(days=day, hours=hours - start.hour % 24)
            session = f"hist-{day}-{n}"
            common = {"tenant_id": DEMO_TENANT, "license_id": DEMO_LICENSE, "metadata": {},
                      "session_id": session, "client_id": f"ws-{n}", "seats_total": 2}  # fmt: skip
            events.append({**common, "event_id": f"{session}-a", "type": "lease.acquired",
                           "occurred_at": at, "seats_used": n + 1})  # fmt: skip
            events.append({**common, "event_id": f"{session}-r", "type": "lease.released",
                           "occurred_at": at + timedelta(hours=3), "seats_used": 0})  # fmt: skip
    event_log.insert_events(events)


REPO = Path(__file__).resolve().parent.parent


def screenshots_tool():
    spec = importlib.util.spec_from_file_location(
        "portal_screenshots", REPO / "tools" / "portal_screenshots.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _no_alert(driver) -> None:
    try:
        alert = driver.switch_to.alert
    except NoAlertPresentException:
        return
    text = alert.text
    alert.dismiss()
    raise AssertionError(f"the page ran an injected script: alert({text!r})")


def test_a_tenant_admin_sees_and_frees_a_seat_in_chromium(stack, browser) -> None:
    base, seat_key, admin_key = stack["base_url"], stack["api_key"], stack["admin_key"]
    assert stack["portal_url"] == f"{base}/portal#key={admin_key}"
    _week_of_usage()
    status, lease = post_json(
        f"{base}/acquire",
        {"license_id": DEMO_LICENSE, "client_id": "laptop-1",
         "metadata": {"user": HOSTILE, "host": "pc-7", "note": "<script>alert(2)</script>"}},
        seat_key,
    )  # fmt: skip
    assert status == 201, lease
    wait = WebDriverWait(browser, 20)

    browser.get(f"{base}/portal")
    key_box = wait.until(ready.visibility_of_element_located((By.ID, "key")))
    key_box.send_keys(admin_key)
    browser.find_element(By.CSS_SELECTOR, "#sign-in-form button[type=submit]").click()
    row_css = f'tr[data-session="{lease["session_id"]}"]'
    row = wait.until(ready.visibility_of_element_located((By.CSS_SELECTOR, row_css)))

    # The lease as the client sent it, as text: no element, no script ran.
    assert row.find_element(By.CSS_SELECTOR, ".client").text == "laptop-1"
    assert row.find_element(By.CSS_SELECTOR, ".user").text == HOSTILE
    assert row.find_element(By.CSS_SELECTOR, ".host").text == "pc-7"
    assert "<script>alert(2)</script>" in row.find_element(By.CSS_SELECTOR, ".details").text
    assert browser.find_elements(By.CSS_SELECTOR, "main img, main script") == []
    _no_alert(browser)
    seats = browser.find_element(By.CSS_SELECTOR, f'[data-license="{DEMO_LICENSE}"] .seats')
    assert seats.text == "1 / 2 seats in use"
    # The license's chart (SVG drawn by the page) and the tenant's seat keys.
    chart_css = f'#charts figure[data-license="{DEMO_LICENSE}"] svg polyline.used'
    wait.until(ready.presence_of_element_located((By.CSS_SELECTOR, chart_css)))
    keys = wait.until(
        ready.presence_of_element_located((By.CSS_SELECTOR, "#keys tbody tr[data-prefix]"))
    )
    assert keys.get_attribute("data-prefix") == seat_key[: len("sl_") + 8]
    # The key lives in this tab's sessionStorage, nowhere else.
    stored = browser.execute_script("return [sessionStorage.length, localStorage.length]")
    assert stored == [1, 0] and browser.get_cookies() == []
    # A phone's screen (Chromium's device emulation: a window cannot be made that narrow).
    browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", PHONE)
    wait.until(lambda d: d.execute_script("return window.innerWidth") == PHONE["width"])
    overflow = browser.execute_script(
        "const root = document.documentElement; return root.scrollWidth - root.clientWidth"
    )
    assert overflow == 0, f"the page scrolls sideways by {overflow}px at phone width"
    assert row.find_element(By.CSS_SELECTOR, ".user").is_displayed()
    browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})

    # Free the seat: a confirmation first; Cancel keeps it, Yes frees it.
    row.find_element(By.CSS_SELECTOR, "button.danger").click()
    dialog = wait.until(ready.visibility_of_element_located((By.ID, "confirm")))
    assert "laptop-1" in dialog.text and HOSTILE in dialog.text
    dialog.find_element(By.CSS_SELECTOR, "button[value=cancel]").click()
    wait.until(ready.invisibility_of_element_located((By.ID, "confirm")))
    assert browser.find_elements(By.CSS_SELECTOR, row_css)
    browser.find_element(By.CSS_SELECTOR, f"{row_css} button.danger").click()
    wait.until(ready.visibility_of_element_located((By.ID, "confirm-yes"))).click()
    wait.until(lambda d: not d.find_elements(By.CSS_SELECTOR, row_css))
    assert "Freed the seat held by laptop-1" in browser.find_element(By.ID, "notice").text
    assert "0 / 2 seats in use" in browser.find_element(By.ID, "licenses").text
    status, body = post_json(
        f"{base}/heartbeat",
        {"license_id": DEMO_LICENSE, "session_id": lease["session_id"]},
        seat_key,
    )
    assert status == 410, body
    _no_alert(browser)
    # The page broke no rule of its Content-Security-Policy (a violation is logged).
    violations = [
        entry["message"]
        for entry in browser.get_log("browser")
        if "Content Security Policy" in entry["message"]
    ]
    assert violations == []
    actions = [row["action"] for row in store.list_portal_actions(DEMO_TENANT)]
    assert {"status", "usage", "keys.list", "revoke"} <= set(actions)


def test_a_lease_of_several_seats_shows_its_weight(stack, browser) -> None:
    """A render node takes a lease of 4 seats on an 8-seat license, a laptop a plain one:
    that license's leases get a Seats column, "\u00d74" on the node's lease and 1 on the
    laptop's, and the seats in use count weights (5 / 8)."""
    from seatlease.api import runtime

    store.create_license(DEMO_TENANT, "render", seats=8)
    runtime.refresh_license_cache(DEMO_TENANT, "render")
    base, seat_key = stack["base_url"], stack["api_key"]
    sessions = {}
    uses = (("render", "render-1", {"seats": 4}), ("render", "laptop-1", {}),
            (DEMO_LICENSE, "desk-1", {}))  # fmt: skip
    for license_id, client, extra in uses:
        body = {"license_id": license_id, "client_id": client, **extra}
        status, lease = post_json(f"{base}/acquire", body, seat_key)
        assert status == 201, lease
        sessions[client] = lease["session_id"]

    browser.get(stack["portal_url"])
    wait = WebDriverWait(browser, 20)
    block_css = '[data-license="render"]'
    row_css = f'{block_css} tr[data-session="{sessions["render-1"]}"]'
    node = wait.until(ready.visibility_of_element_located((By.CSS_SELECTOR, row_css)))
    heads = [th.get_attribute("textContent")
             for th in browser.find_elements(By.CSS_SELECTOR, f"{block_css} thead th")]  # fmt: skip
    assert heads[:3] == ["Client", "Seats", "User"], heads
    assert node.find_element(By.CSS_SELECTOR, ".seats-weight").text == "\u00d74"  # x4
    plain = browser.find_element(
        By.CSS_SELECTOR, f'{block_css} tr[data-session="{sessions["laptop-1"]}"] .seats-weight'
    )
    assert plain.text == "1"
    seats = browser.find_element(By.CSS_SELECTOR, f"{block_css} .seats")
    assert seats.text == "5 / 8 seats in use"
    # A license of plain leases has no such column.
    demo = browser.find_elements(By.CSS_SELECTOR, f'[data-license="{DEMO_LICENSE}"] thead th')
    assert [th.get_attribute("textContent") for th in demo][:2] == ["Client", "User"]
    _no_alert(browser)


def test_a_seat_key_cannot_sign_in(stack, browser) -> None:
    browser.get(f"{stack['base_url']}/portal")
    wait = WebDriverWait(browser, 20)
    wait.until(ready.visibility_of_element_located((By.ID, "key"))).send_keys(stack["api_key"])
    browser.find_element(By.CSS_SELECTOR, "#sign-in-form button[type=submit]").click()
    notice = wait.until(ready.visibility_of_element_located((By.ID, "notice")))
    wait.until(lambda _d: "seat key" in notice.text)
    assert browser.find_element(By.ID, "sign-in").is_displayed()
    assert not browser.find_element(By.ID, "app").is_displayed()
    assert browser.execute_script("return sessionStorage.length") == 0


def test_the_make_run_link_signs_in_and_leaves_the_address_bar(stack, browser) -> None:
    browser.get(stack["portal_url"])
    wait = WebDriverWait(browser, 20)
    wait.until(ready.visibility_of_element_located((By.ID, "licenses")))
    wait.until(lambda d: "Organisation demo" in d.find_element(By.ID, "tenant").text)
    assert "#key=" not in browser.current_url and stack["admin_key"] not in browser.current_url


# -- issue 34, items 9 and 10: a chart per license, readable on a phone; the pictures -----

# Per chart: the license, the period, the number of changes, the polyline's vertices, its
# box, the limit line's height and the seats in use at the top of the chart's y labels;
# per text label: its text, its rendered font size (CSS px times the SVG's scale) and box.
CHARTS_JS = """
return [...document.querySelectorAll('#charts figure')].map((figure) => {
  const chart = figure.querySelector('svg');
  const scale = chart.getBoundingClientRect().width / chart.viewBox.baseVal.width;
  const used = figure.querySelector('polyline.used');
  const box = used.getBoundingClientRect();
  const limit = figure.querySelector('line.limit');
  return {
    license: figure.dataset.license, period: figure.dataset.period,
    changes: Number(figure.dataset.changes),
    vertices: used.getAttribute('points').trim().split(/\\s+/).length,
    ys: used.getAttribute('points').trim().split(/\\s+/).map((p) => Number(p.split(',')[1])),
    xs: used.getAttribute('points').trim().split(/\\s+/).map((p) => Number(p.split(',')[0])),
    box: [box.left, box.top, box.width, box.height], right: chart.getBoundingClientRect().right,
    chart_width: chart.getBoundingClientRect().width,
    limit_y: limit ? Number(limit.getAttribute('y1')) : null,
    key: figure.querySelector('.key').innerText,
    labels: [...chart.querySelectorAll('text')].map((t) => [
      t.textContent, parseFloat(getComputedStyle(t).fontSize) * scale,
      t.getBoundingClientRect().height]),
  };
});
"""


def test_each_license_has_its_own_readable_chart(stack, browser) -> None:
    """Two licenses whose usage coincides: each has its own chart, its own seat limit
    line, its steps (exact: a week of a few changes), labels of at least 11 px at 1280 and
    390 px, and the times' zone said (it used to be one chart, one limit line in the last
    license's colour, the lines hiding one another, labels of about 4 px on a phone)."""
    screenshots_tool().week_of_usage(DEMO_TENANT, list(DEMO_LICENSES))
    wait = WebDriverWait(browser, 20)
    browser.execute_cdp_cmd("Emulation.setTimezoneOverride", {"timezoneId": "America/New_York"})
    browser.get(stack["portal_url"])
    wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#charts figure")) == 2)
    note = browser.find_element(By.ID, "usage-note").text
    assert "a step at each change" in note
    assert "Times in America/New_York (UTC-05:00)" in note
    browser.execute_cdp_cmd("Emulation.setTimezoneOverride", {"timezoneId": "UTC"})
    for width in (DESKTOP[0], PHONE["width"]):
        if width == PHONE["width"]:
            browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", PHONE)
            wait.until(lambda d: d.execute_script("return window.innerWidth") == PHONE["width"])
        browser.find_element(By.CSS_SELECTOR, "[data-days='7']").click()  # redraw
        wait.until(lambda d: "Times in UTC." in d.find_element(By.ID, "usage-note").text)
        charts = browser.execute_script(CHARTS_JS)
        assert [c["license"] for c in charts] == sorted(DEMO_LICENSES), width
        for chart in charts:
            where = (width, chart["license"])
            assert chart["period"] == "exact", where
            # The start, then each change: two vertices per step, one at each end.
            assert chart["changes"] >= 10 and chart["vertices"] == 2 * chart["changes"], where
            _left, _top, box_width, box_height = chart["box"]
            # Drawn across its chart, which takes the section's width (about 900 px on a
            # desktop, 340 on a phone).
            assert chart["chart_width"] > (800 if width == DESKTOP[0] else 320), where
            assert box_width > 0.8 * chart["chart_width"] and box_height > 40, where
            assert chart["right"] <= width, where  # not cut at the screen's edge
            # Its own limit line, at its own seats (2): the week's peak (2) reaches it.
            assert chart["limit_y"] is not None and min(chart["ys"]) == chart["limit_y"], where
            assert "seat limit (2)" in chart["key"], where
            sizes = [size for _text, size, _height in chart["labels"]]
            assert len(sizes) >= 4 and min(sizes) >= 11, (where, chart["labels"])
            assert min(height for *_rest, height in chart["labels"]) >= 11, where
    overflow = browser.execute_script(
        "const root = document.documentElement; return root.scrollWidth - root.clientWidth"
    )
    assert overflow == 0


def test_a_few_minutes_of_use_in_a_week_are_drawn_wide(stack, browser) -> None:
    """The README tour's first hour: a minute of use in the 7-day window. The chart starts
    just before the first change (and says so) instead of squeezing the minute into the
    last pixel at the right edge."""
    now = datetime.now(UTC)
    common = {"tenant_id": DEMO_TENANT, "license_id": DEMO_LICENSE, "metadata": {},
              "seats_total": 2}  # fmt: skip
    story = [("a", "lease.acquired", 120, 1), ("b", "lease.acquired", 100, 2),
             ("a", "lease.released", 80, 1), ("b", "lease.released", 60, 0)]  # fmt: skip
    event_log.insert_events([
        {**common, "event_id": f"{session}-{ago}", "type": kind, "session_id": session,
         "client_id": f"laptop-{session}", "occurred_at": now - timedelta(seconds=ago),
         "seats_used": used}
        for session, kind, ago, used in story
    ])  # fmt: skip
    wait = WebDriverWait(browser, 20)
    browser.get(stack["portal_url"])
    figure = f'#charts figure[data-license="{DEMO_LICENSE}"]'
    wait.until(ready.presence_of_element_located((By.CSS_SELECTOR, figure)))
    (chart,) = [c for c in browser.execute_script(CHARTS_JS) if c["license"] == DEMO_LICENSE]
    assert chart["period"] == "exact" and chart["changes"] == 5
    changes = [x for x, y0, y1 in zip(chart["xs"], chart["ys"], chart["ys"][1:], strict=False)
               if y0 != y1]  # fmt: skip
    spread = (max(changes) - min(changes)) / chart["chart_width"]
    assert spread > 0.25, chart["xs"]  # a minute of four changes, not one pixel
    assert "since just before the first use" in browser.find_element(By.ID, "usage-note").text


def test_the_readme_picture_is_an_ordinary_demo(tmp_path) -> None:
    """The portal's pictures (tools/portal_screenshots.py) show ordinary names, never the
    browser test's hostile strings (the README's picture once showed
    ``<img src=x onerror=alert(1)>`` as a user name), and the page's times in its one
    format; the committed ones too."""
    tool = screenshots_tool()
    texts = tool.render(tmp_path / "shots", tmp_path)
    committed = {name: tool.read_page_text(REPO / "docs" / "images" / name) for name in texts}
    for name, text in [*texts.items(), *((f"docs/images/{n}", t) for n, t in committed.items())]:
        for word in ("laptop-1", "ann", "pc-7", "Organisation demo"):
            assert word in text, (name, word)
        for hostile in ("<img", "onerror", "alert(", "<script"):
            assert hostile not in text, (name, hostile)
        # the page's one time format (issue 42), no "8:34:58 AM" or "11/26/2026"
        assert STAMP.search(text) and not OLD_TIMES.search(text), (name, text)
    assert "seat limit (2)" in texts["portal-desktop.png"]
    assert (tmp_path / "shots" / "portal-phone.png").read_bytes()[:4] == b"\x89PNG"


def test_the_page_shows_each_licenses_term(stack, browser) -> None:
    """The term (issue 30): when it ends, a grace banner, an expired state, and the
    entitlements, from licenses stored in the local stack's SQLite database; its times in
    the page's one format (issue 42), here in UTC."""
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    store.create_license(
        DEMO_TENANT, "grace-app", seats=1, expires_at=now - timedelta(days=2),
        grace_seconds=7 * 86400, entitlements=["pro", "render"], max_version="2026.4",
    )  # fmt: skip
    store.create_license(DEMO_TENANT, "old-app", seats=1, expires_at=now - timedelta(days=30))
    ends = now + timedelta(days=364, hours=1)
    store.create_license(DEMO_TENANT, "year-app", seats=1, expires_at=ends)
    wait = WebDriverWait(browser, 20)
    browser.execute_cdp_cmd("Emulation.setTimezoneOverride", {"timezoneId": "UTC"})
    browser.get(f"{stack['base_url']}/portal")
    wait.until(ready.visibility_of_element_located((By.ID, "key"))).send_keys(stack["admin_key"])
    browser.find_element(By.CSS_SELECTOR, "#sign-in-form button[type=submit]").click()

    def block(name: str):
        css = f'[data-license="{name}"]'
        return wait.until(ready.visibility_of_element_located((By.CSS_SELECTOR, css)))

    grace = block("grace-app")
    banner = grace.find_element(By.CSS_SELECTOR, ".banner.grace").text
    assert f"works until {shown(now + timedelta(days=5), 'UTC')} (its grace)" in banner
    assert grace.find_element(By.CSS_SELECTOR, ".term-state").text == "in grace"
    term = grace.find_element(By.CSS_SELECTOR, ".term").text
    assert "entitlements: pro, render" in term and "versions up to 2026.4" in term
    old = block("old-app")
    assert old.find_element(By.CSS_SELECTOR, ".term-state").text == "expired"
    assert "no new seat is granted" in old.find_element(By.CSS_SELECTOR, ".banner.expired").text
    year = block("year-app")
    assert year.find_element(By.CSS_SELECTOR, ".term").text == (
        f"expires {shown(ends, 'UTC')} (in 365 days), no grace"
    )
    assert year.find_elements(By.CSS_SELECTOR, ".banner, .term-state") == []
    demo = block(DEMO_LICENSE)  # perpetual: no term line at all
    assert demo.find_elements(By.CSS_SELECTOR, ".term, .banner") == []


SIZING_JS = """
return [...document.querySelectorAll('#charts figure')].map((figure) => {
  const line = (name) => figure.querySelector('line.' + name);
  const sizing = figure.querySelector('p.sizing');
  const box = sizing ? sizing.getBoundingClientRect() : null;
  return {
    license: figure.dataset.license,
    limit_y: line('limit') ? Number(line('limit').getAttribute('y1')) : null,
    needed_y: line('recommended') ? Number(line('recommended').getAttribute('y1')) : null,
    key: figure.querySelector('.key').innerText,
    verdict: sizing ? sizing.dataset.verdict : null,
    sentence: sizing ? sizing.innerText : null,
    font: sizing ? parseFloat(getComputedStyle(sizing).fontSize) : 0,
    right: box ? box.right : 0,
  };
});
"""


def _refused_minutes(license_id: str, minutes: int, clients: int) -> None:
    """``clients`` clients refused and not served in each of ``minutes`` minutes of the
    week's busiest hours (the reaper's lease.refused events, through the insert path)."""
    start = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(days=6)
    at = start + timedelta(hours=10 - start.hour % 24)  # within the first day's 9:00 lease
    events = []
    for m in range(minutes):
        minute = at + timedelta(minutes=m)
        for c in range(clients):
            events.append({
                "event_id": f"refused-{license_id}-{m}-{c}", "type": "lease.refused",
                "tenant_id": DEMO_TENANT, "license_id": license_id, "session_id": None,
                "client_id": f"turned-away-{c}", "occurred_at": minute + timedelta(minutes=11),
                "seats_used": None, "seats_total": None, "count": 3,
                "metadata": {"minute": minute.isoformat().replace("+00:00", "Z"),
                             "served": False, "true_denial": m == minutes - 1,
                             "waiting": False},
            })  # fmt: skip
    event_log.insert_events(events)


def test_each_chart_says_how_many_seats_were_needed(stack, browser) -> None:
    """Right-sizing on the page (issue 41): each license's chart has its recommended seats
    as a dotted line (the fewest seats meeting 99 % of the busy minutes' demand) and the
    report's sentence beside it, readable at 1280 and 390 px; a license that turned
    clients away in more than 1 % of its busy minutes is drawn needing more than it has."""
    screenshots_tool().week_of_usage(DEMO_TENANT, list(DEMO_LICENSES))
    _refused_minutes(DEMO_LICENSE, 60, 2)
    wait = WebDriverWait(browser, 20)
    browser.get(stack["portal_url"])
    wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#charts p.sizing")) == 2)
    for width in (DESKTOP[0], PHONE["width"]):
        if width == PHONE["width"]:
            browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", PHONE)
            wait.until(lambda d: d.execute_script("return window.innerWidth") == PHONE["width"])
            browser.find_element(By.CSS_SELECTOR, "[data-days='7']").click()  # redraw
            wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#charts p.sizing")) == 2)
        charts = {c["license"]: c for c in browser.execute_script(SIZING_JS)}
        turned_away, other = charts[DEMO_LICENSE], charts[STORY_LICENSE]
        assert turned_away["verdict"] == "undersized", turned_away
        assert "2 clients were turned away in 60 minutes" in turned_away["sentence"]
        # needing more than it has: the dotted line above the dashed one (SVG y grows down)
        assert turned_away["needed_y"] < turned_away["limit_y"], turned_away
        assert "seats needed (" in turned_away["key"]
        assert (
            other["verdict"] in ("right", "oversized")
            and "No client was turned away" in (other["sentence"])
        )
        for chart in charts.values():
            assert chart["font"] >= 11 and chart["right"] <= width, (width, chart)
    overflow = browser.execute_script(
        "const root = document.documentElement; return root.scrollWidth - root.clientWidth"
    )
    assert overflow == 0


# -- issue 42, item 7: one time format with its zone; a term not started; the Seats line --

MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
# The page's one format: "28 Nov 2026, 03:13 UTC", or with the offset of a zone not at UTC
# at that instant, "28 Nov 2026, 08:43 UTC+05:30".
STAMP = re.compile(
    rf"\d{{1,2}} (?:{'|'.join(MONTHS)}) \d{{4}}, \d{{2}}:\d{{2}} UTC(?:[+-]\d{{2}}:\d{{2}})?"
)
# A chart's tick label: that format's day, day and time, or time (with seconds over 10
# minutes or less); its zone is said by the note above the charts.
TICK = re.compile(
    rf"\d{{1,2}} (?:{'|'.join(MONTHS)})(?:, \d{{2}}:\d{{2}})?|\d{{2}}:\d{{2}}(?::\d{{2}})?"
)
# Anything that looks like a time or a date in another format: "3:13:10 AM",
# "11/28/2026", "2027-06-30", "Nov 28", "02:57 AM UTC".
TIMEISH = re.compile(
    rf"\d{{1,2}}:\d{{2}}|\d{{4}}-\d{{2}}-\d{{2}}|\d{{1,2}}/\d{{1,2}}/\d{{2,4}}|\b[AP]M\b"
    rf"|\b(?:{'|'.join(MONTHS)})\b|\bUTC\b|\bGMT\b"
)

# The formats the page used to mix: "3:13:10 AM", "11/28/2026", "2027-06-30".
OLD_TIMES = re.compile(r"\b[AP]M\b|\d{1,2}/\d{1,2}/\d{4}|\d{4}-\d{2}-\d{2}")


def shown(at: datetime | str, zone: str) -> str:
    """``at`` as the page shows it in the time zone ``zone``."""
    if isinstance(at, str):
        at = datetime.fromisoformat(at.replace("Z", "+00:00"))
    local = at.astimezone(ZoneInfo(zone))
    minutes = int(local.utcoffset().total_seconds()) // 60
    sign = "+" if minutes > 0 else "-"
    offset = f"UTC{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}" if minutes else "UTC"
    return f"{local.day} {MONTHS[local.month - 1]} {local.year}, {local:%H:%M} {offset}"


# Every time the page shows: the visible text (the charts' labels on lines of their own),
# the charts' labels, and each <time> with where it is.
TIMES_JS = """
const place = (t) =>
  t.closest('#as-of') ? 'status' : t.closest('#usage-note') ? 'usage'
  : t.closest('tr[data-session]') ? 'lease' : t.closest('#keys') ? 'key'
  : t.closest('.banner') ? 'banner' : t.closest('.term') ? 'term' : 'elsewhere';
return {
  text: document.body.innerText,
  labels: [...document.querySelectorAll('svg text')].map((t) => t.textContent),
  times: [...document.querySelectorAll('time')].filter((t) => t.getClientRects().length > 0)
    .map((t) => [place(t), t.closest('[data-license]')?.dataset.license ?? null,
                 t.getAttribute('datetime'), t.textContent]),
};
"""


def test_every_time_on_the_page_has_one_format_with_its_zone(stack, browser) -> None:
    """Issue 42, item 7: the page showed "3:13:10 AM" (no zone), "11/28/2026, 3:23:05 AM",
    "2027-06-30" and "02:57 AM UTC". Every time it shows now, the status's, each lease's
    since and until, the terms and their banners, the seat keys' created and revoked, the
    usage note's, is one format with its zone, in the browser's zone (here Australia/Darwin,
    UTC+09:30 all year), at 1280 and at 390 px; the charts' ticks are that format's day or time,
    their zone said by the note."""
    zone, offset = "Australia/Darwin", "UTC+09:30"
    now = datetime.now(UTC)
    base, seat_key, admin_key = stack["base_url"], stack["api_key"], stack["admin_key"]
    store.create_license(DEMO_TENANT, "term-app", seats=1, expires_at=now + timedelta(days=30),
                         grace_seconds=3 * 86400)  # fmt: skip
    store.create_license(DEMO_TENANT, "grace-app", seats=1, expires_at=now - timedelta(days=2),
                         grace_seconds=7 * 86400)  # fmt: skip
    store.create_license(DEMO_TENANT, "soon-app", seats=1, starts_at=now + timedelta(days=3),
                         expires_at=now + timedelta(days=60), grace_seconds=86400)  # fmt: skip
    desk = {"license_id": DEMO_LICENSE, "client_id": "desk-1"}
    status, lease = post_json(f"{base}/acquire", desk, seat_key)
    assert status == 201, lease
    status, made = post_json(f"{base}/portal", {"action": "keys.create", "label": "old"}, admin_key)
    assert status == 201, made
    status, body = post_json(
        f"{base}/portal", {"action": "keys.revoke", "prefix": made["prefix"]}, admin_key
    )
    assert status == 200, body
    # A few minutes of use: the usage note says since when the chart is drawn.
    common = {"tenant_id": DEMO_TENANT, "license_id": DEMO_LICENSE, "metadata": {},
              "seats_total": 2, "client_id": "laptop-a", "session_id": "a"}  # fmt: skip
    event_log.insert_events([
        {**common, "event_id": "a-1", "type": "lease.acquired",
         "occurred_at": now - timedelta(seconds=400), "seats_used": 1},
        {**common, "event_id": "a-2", "type": "lease.released",
         "occurred_at": now - timedelta(seconds=100), "seats_used": 0},
    ])  # fmt: skip

    wait = WebDriverWait(browser, 20)
    browser.execute_cdp_cmd("Emulation.setTimezoneOverride", {"timezoneId": zone})
    browser.get(stack["portal_url"])
    wait.until(ready.presence_of_element_located((By.CSS_SELECTOR, "#keys tbody tr[data-prefix]")))
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#charts figure svg"))
    for width in (DESKTOP[0], PHONE["width"]):
        if width == PHONE["width"]:
            browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", PHONE)
            wait.until(lambda d: d.execute_script("return window.innerWidth") == PHONE["width"])
            browser.find_element(By.CSS_SELECTOR, "[data-days='7']").click()  # redraw
            wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#charts figure svg"))
        page = browser.execute_script(TIMES_JS)
        # Each <time> in the one format, in the browser's zone, saying its own instant.
        for where, license_id, iso, text in page["times"]:
            assert STAMP.fullmatch(text), (width, where, license_id, text)
            assert text == shown(iso, zone), (width, where, license_id, iso, text)
            assert text.endswith(offset), (width, where, text)
        places = {}
        for where, license_id, _iso, _text in page["times"]:
            places[where, license_id] = places.get((where, license_id), 0) + 1
        assert places == {
            ("status", None): 1,  # as of
            ("lease", DEMO_LICENSE): 2,  # since, expires
            ("key", None): 3,  # two created, one revoked
            ("usage", None): 1,  # since just before the first use
            ("term", "term-app"): 2,  # expires, grace until
            ("term", "grace-app"): 2,  # expired, stops
            ("banner", "grace-app"): 2,  # expired on, works until
            ("term", "soon-app"): 3,  # starts, expires, grace until
            ("banner", "soon-app"): 1,  # starts on
        }, (width, places)
        # Nothing else on the page looks like a time in another format (the charts' labels
        # are on lines of their own; the note's "Times in Australia/Darwin (UTC+09:30).").
        labels = set(page["labels"])
        rest = "\n".join(line for line in page["text"].splitlines() if line not in labels)
        note = f"Times in {zone} ({offset})."
        assert note in page["text"], page["text"]
        rest = rest.replace(note, "")
        assert TIMEISH.findall(STAMP.sub("", rest)) == [], (width, STAMP.sub("", rest))
        ticks = [label for label in page["labels"] if not label.isdigit()]
        assert len(ticks) >= 2 and all(TICK.fullmatch(t) for t in ticks), (width, ticks)
        overflow = browser.execute_script(
            "const root = document.documentElement; return root.scrollWidth - root.clientWidth"
        )
        assert overflow == 0, (width, overflow)
    _no_alert(browser)


def test_a_term_not_yet_started_shows_its_start_end_and_grace(stack, browser) -> None:
    """Issue 42, item 7: a license whose term has not started said when it starts and
    ends but not its grace (only the in-grace banner named a grace). Now its term says
    all three, and a banner that no seat is granted before the start; one without a grace
    says so."""
    zone = "America/New_York"
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    starts, ends = now + timedelta(days=3), now + timedelta(days=33)
    store.create_license(DEMO_TENANT, "soon-app", seats=2, starts_at=starts, expires_at=ends,
                         grace_seconds=7 * 86400)  # fmt: skip
    store.create_license(DEMO_TENANT, "soon-strict", seats=2, starts_at=starts, expires_at=ends)
    wait = WebDriverWait(browser, 20)
    browser.execute_cdp_cmd("Emulation.setTimezoneOverride", {"timezoneId": zone})
    browser.get(stack["portal_url"])

    def block(name: str):
        css = f'[data-license="{name}"]'
        return wait.until(ready.visibility_of_element_located((By.CSS_SELECTOR, css)))

    soon = block("soon-app")
    assert soon.find_element(By.CSS_SELECTOR, ".term-state").text == "not started"
    assert soon.find_element(By.CSS_SELECTOR, ".term").text == (
        f"starts {shown(starts, zone)}, expires {shown(ends, zone)}, "
        f"grace until {shown(ends + timedelta(days=7), zone)}"
    )
    banner = soon.find_element(By.CSS_SELECTOR, ".banner.not-started").text
    assert banner == f"This license starts on {shown(starts, zone)}: no seat is granted before."
    strict = block("soon-strict")
    assert strict.find_element(By.CSS_SELECTOR, ".term").text == (
        f"starts {shown(starts, zone)}, expires {shown(ends, zone)}, no grace"
    )
    assert strict.find_elements(By.CSS_SELECTOR, ".banner.not-started")


def _shown_heads(browser, license_id: str) -> list[str]:
    """The column heads shown above a license's leases (none at phone width: cards)."""
    heads = browser.find_elements(By.CSS_SELECTOR, f'[data-license="{license_id}"] thead th')
    return [th.text for th in heads if th.is_displayed()]


# Per lease row of a license: its session, whether it has a Seats cell shown (a column
# at 1280, a line of its card at 390) and that cell's text.
SEATS_JS = """
return [...document.querySelectorAll('[data-license] tr[data-session]')].map((row) => {
  const cell = [...row.cells].find((td) => td.dataset.label === 'Seats');
  return [row.closest('[data-license]').dataset.license, row.dataset.session,
          Boolean(cell && cell.getClientRects().length > 0), cell ? cell.innerText : null];
});
"""


def test_the_seats_line_is_only_on_the_heavy_leases_card(stack, browser) -> None:
    """Issue 42, item 7: the Seats line was on every card of a license with a lease of
    several seats at phone width ("Seats 1" on each plain lease). At 1280 px that license
    has a Seats column ("\u00d74" on the node's lease, 1 on the laptop's, for the rows to line
    up); at 390 px, where each lease is a card of its own, only the node's card has the
    line; a license of plain leases has neither at either width."""
    from seatlease.api import runtime

    store.create_license(DEMO_TENANT, "render", seats=8)
    runtime.refresh_license_cache(DEMO_TENANT, "render")
    base, seat_key = stack["base_url"], stack["api_key"]
    sessions = {}
    uses = (("render", "render-1", {"seats": 4}), ("render", "laptop-1", {}),
            (DEMO_LICENSE, "desk-1", {}), (DEMO_LICENSE, "desk-2", {}))  # fmt: skip
    for license_id, client, extra in uses:
        body = {"license_id": license_id, "client_id": client, **extra}
        status, lease = post_json(f"{base}/acquire", body, seat_key)
        assert status == 201, lease
        sessions[lease["session_id"]] = client
    wait = WebDriverWait(browser, 20)
    browser.get(stack["portal_url"])
    wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "tr[data-session]")) == 4)
    for width in (DESKTOP[0], PHONE["width"]):
        if width == PHONE["width"]:
            browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", PHONE)
            wait.until(lambda d: d.execute_script("return window.innerWidth") == PHONE["width"])
        rows = {
            sessions[session]: (license_id, displayed, text)
            for license_id, session, displayed, text in browser.execute_script(SEATS_JS)
        }
        heads = {name: _shown_heads(browser, name) for name in ("render", DEMO_LICENSE)}
        assert rows["render-1"] == ("render", True, "\u00d74"), width
        assert not rows["desk-1"][1] and not rows["desk-2"][1], (width, rows)
        if width == DESKTOP[0]:
            assert rows["laptop-1"] == ("render", True, "1"), rows
            assert heads["render"][:3] == ["CLIENT", "SEATS", "USER"], heads
            assert "SEATS" not in heads[DEMO_LICENSE], heads
        else:
            assert not rows["laptop-1"][1], rows  # no "Seats 1" line on the laptop's card
            assert heads == {"render": [], DEMO_LICENSE: []}, heads  # cards: no header row
            cards = [r.text for r in browser.find_elements(By.CSS_SELECTOR, "tr[data-session]")]
            assert sum("\u00d74" in card for card in cards) == 1, cards
    _no_alert(browser)


def test_the_wait_queue_is_listed_under_its_license(stack, browser) -> None:
    """A full license with a queue: the clients waiting in line are listed under it, in
    their order, with their user and, for a client waiting for several seats, how many
    (docs/portal.md; it once said the page did not list them)."""
    from seatlease.api import runtime

    store.create_license(DEMO_TENANT, "queued", seats=2, policy={"queue": True})
    runtime.refresh_license_cache(DEMO_TENANT, "queued")
    base, seat_key = stack["base_url"], stack["api_key"]
    asks = (("holder", {"seats": 2}, 201), ("wendy-pc", {"metadata": {"user": "wendy"}}, 202),
            ("render-9", {"seats": 2}, 202))  # fmt: skip
    for client, extra, expected in asks:
        body = {"license_id": "queued", "client_id": client, "queue": True, **extra}
        status, answer = post_json(f"{base}/acquire", body, seat_key)
        assert status == expected, answer

    browser.get(stack["portal_url"])
    wait = WebDriverWait(browser, 20)
    queue_css = '[data-license="queued"] ol.queue li'
    wait.until(ready.visibility_of_element_located((By.CSS_SELECTOR, queue_css)))
    waiting = [li.text for li in browser.find_elements(By.CSS_SELECTOR, queue_css)]
    assert waiting == ["wendy-pc · wendy", "render-9 · \u00d72 seats"], waiting
    heading = browser.find_element(By.CSS_SELECTOR, '[data-license="queued"] h4')
    assert heading.text == "Waiting for a seat: 2"
    _no_alert(browser)
    portal_doc = (REPO / "docs" / "portal.md").read_text()
    assert "*Waiting for a seat: N*" in portal_doc and "which it does not yet" not in portal_doc


def test_an_idle_lease_and_a_shared_seat_say_so(stack, browser) -> None:
    """Issue 50: a lease warned by its license's idle rule reads "idle, reclaimed at
    <time> unless used" (the page's one time format), two sessions of one user on a
    license that shares by user read "shared by 2 sessions", each such license says its
    rule, and a license with neither gets no State column."""
    from seatlease.api import runtime

    store.create_license(DEMO_TENANT, "idle-app", seats=2, idle_timeout_seconds=600)
    store.create_license(DEMO_TENANT, "shared-app", seats=1, share="user", share_limit=3)
    for license_id in ("idle-app", "shared-app"):
        runtime.refresh_license_cache(DEMO_TENANT, license_id)
    base, seat_key = stack["base_url"], stack["api_key"]
    status, idle = post_json(f"{base}/acquire", {"license_id": "idle-app", "client_id": "ws-idle"},
                             seat_key)  # fmt: skip
    assert status == 201, idle
    said_idle = {"license_id": "idle-app", "session_id": idle["session_id"], "idle_seconds": 700}
    status, beat = post_json(f"{base}/heartbeat", said_idle, seat_key)
    assert status == 200 and beat.get("idle_reclaim_at"), beat
    shared = []
    for client in ("pc-1", "pc-2"):
        body = {"license_id": "shared-app", "client_id": client, "metadata": {"user": "ann"}}
        status, lease = post_json(f"{base}/acquire", body, seat_key)
        assert status == 201, lease
        shared.append(lease["session_id"])
    status, lease = post_json(f"{base}/acquire", {"license_id": DEMO_LICENSE, "client_id": "desk"},
                              seat_key)  # fmt: skip
    assert status == 201, lease

    browser.get(stack["portal_url"])
    wait = WebDriverWait(browser, 20)
    row_css = f'[data-license="idle-app"] tr[data-session="{idle["session_id"]}"]'
    row = wait.until(ready.visibility_of_element_located((By.CSS_SELECTOR, row_css)))
    state = row.find_element(By.CSS_SELECTOR, "td[data-label='State'] .idle")
    assert state.text.startswith("idle, reclaimed at ") and state.text.endswith(" unless used")
    stamp = state.find_element(By.TAG_NAME, "time")
    assert stamp.get_attribute("datetime") == beat["idle_reclaim_at"]
    assert STAMP.fullmatch(stamp.text), stamp.text
    rules = browser.find_element(By.CSS_SELECTOR, '[data-license="idle-app"] p.rules').text
    assert rules == ("Idle seats: a program unused for 10 min is warned, then its seat is "
                     "reclaimed when someone needs the seat")  # fmt: skip
    for session in shared:
        cell = browser.find_element(
            By.CSS_SELECTOR, f'[data-license="shared-app"] tr[data-session="{session}"] .shared'
        )
        assert cell.text == "shared by 2 sessions"
    seats = browser.find_element(By.CSS_SELECTOR, '[data-license="shared-app"] .seats')
    assert seats.text == "1 / 1 seats in use"
    rules = browser.find_element(By.CSS_SELECTOR, '[data-license="shared-app"] p.rules').text
    assert rules == "Shared seats: one user's sessions share one seat (up to 3 sessions a seat)"
    demo = browser.find_elements(By.CSS_SELECTOR, f'[data-license="{DEMO_LICENSE}"] thead th')
    assert "State" not in [th.get_attribute("textContent") for th in demo]
    assert not browser.find_elements(By.CSS_SELECTOR, f'[data-license="{DEMO_LICENSE}"] p.rules')
    _no_alert(browser)


def test_a_tenant_admin_manages_webhook_endpoints_in_chromium(stack, browser) -> None:
    """Issue 51, the portal's Webhooks section: add an endpoint (its secret shown once,
    then gone from the page), "Send test" reaches a real receiver signed with that secret
    (verified by the standardwebhooks library) and shows in the recent deliveries, a
    refused URL says why and stores nothing, and Delete (after its confirmation) removes
    the endpoint. The URL a tenant typed is text on the page, never markup."""
    from standardwebhooks import Webhook
    from webhook_receiver import receiving

    from seatlease.webhooks import store as webhooks

    with receiving() as receiver:
        url = receiver.url("/hook?x=<b>bold</b>")
        browser.get(stack["portal_url"])
        wait = WebDriverWait(browser, 30)
        wait.until(ready.visibility_of_element_located((By.ID, "new-webhook-url")))
        wait.until(lambda d: "No endpoint yet." in d.find_element(By.ID, "webhooks").text)

        # a private address is refused with the reason; nothing is stored
        browser.find_element(By.ID, "new-webhook-url").send_keys("http://10.1.2.3/hook")
        browser.find_element(By.CSS_SELECTOR, "#new-webhook-form button[type=submit]").click()
        wait.until(lambda d: "10.1.2.3" in d.find_element(By.ID, "notice").text)
        assert "No endpoint yet." in browser.find_element(By.ID, "webhooks").text
        assert browser.find_element(By.ID, "new-webhook-secret").get_attribute("hidden")

        box = browser.find_element(By.ID, "new-webhook-url")
        box.clear()
        box.send_keys(url)
        browser.find_element(By.CSS_SELECTOR, "#new-webhook-form button[type=submit]").click()
        row = wait.until(
            ready.visibility_of_element_located((By.CSS_SELECTOR, "#webhooks tr[data-endpoint]"))
        )
        secret = browser.find_element(By.ID, "new-webhook-secret-value").text
        assert secret.startswith("whsec_")
        [stored] = [e["url"] for e in webhooks.list_endpoints(DEMO_TENANT)]
        assert stored.endswith("/hook?x=%3Cb%3Ebold%3C/b%3E")  # kept as a URL, quoted
        assert row.find_element(By.CSS_SELECTOR, ".url").text == stored  # as text
        assert not browser.find_elements(By.CSS_SELECTOR, "#webhooks b")

        row.find_element(By.XPATH, ".//button[text()='Send test']").click()
        wait.until(lambda d: "Sent a test event" in d.find_element(By.ID, "notice").text)
        assert "HTTP 200 (delivered)" in browser.find_element(By.ID, "notice").text
        [request] = receiver.wait_for("/hook?x=%3Cb%3Ebold%3C/b%3E", 1)
        payload = Webhook(secret).verify(request.body, request.headers)
        assert payload["type"] == "webhook.test" and payload["tenant_id"] == DEMO_TENANT
        delivered = wait.until(
            ready.visibility_of_element_located(
                (By.CSS_SELECTOR, f'#webhook-deliveries tr[data-event="{payload["id"]}"]')
            )
        )
        assert "webhook.test" in delivered.text and "delivered" in delivered.text
        assert "200" in delivered.text

        # signing out forgets the secret shown; signing in again does not show it
        browser.refresh()
        wait.until(
            ready.visibility_of_element_located((By.CSS_SELECTOR, "#webhooks tr[data-endpoint]"))
        )
        assert secret not in browser.page_source

        row = browser.find_element(By.CSS_SELECTOR, "#webhooks tr[data-endpoint]")
        row.find_element(By.CSS_SELECTOR, "button.danger").click()
        wait.until(ready.visibility_of_element_located((By.ID, "confirm-yes"))).click()
        wait.until(lambda d: "No endpoint yet." in d.find_element(By.ID, "webhooks").text)
        assert "Deleted the endpoint" in browser.find_element(By.ID, "notice").text
        _no_alert(browser)
    actions = [row["action"] for row in store.list_portal_actions(DEMO_TENANT)]
    assert {"webhook_create", "webhook_test", "webhook_delete", "webhook_list"} <= set(actions)
