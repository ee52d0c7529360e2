"""The audit page in a real headless Chromium, driven by Selenium, on SQLite and PostgreSQL.

The page loads without a console error, a summary expands to the raw messages it stands
for, the generation and overlay switches change the view, and message markup stays
text. Skipped only where no Chromium (with its driver) is installed; `.ci/run` installs
Debian's `chromium` and `chromium-driver` and fails if these tests were skipped.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.command import Command
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.select import Select
from selenium.webdriver.support.wait import WebDriverWait

from sessionstore import SessionStore, expand
from sessionstore.cli._render._html import LOOPS_SHOWN
from sessionstore.config import FixedCount
from tests.integration.cli.audit_pages import CONFIG, HOSTILE, audited_session, many_loops
from tests.integration.cli.runner import ok, with_store

pytestmark = pytest.mark.slow  # a browser: `python -m pytest -m slow` (and `.ci/run`) runs it

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")


@pytest.fixture(scope="module")
def browser() -> Iterator[webdriver.Chrome]:
    if CHROMIUM is None or CHROMEDRIVER is None:
        pytest.skip("no Chromium with chromedriver on the PATH (Debian: chromium chromium-driver)")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage"):
        options.add_argument(argument)
    options.add_argument("--window-size=1400,1000")
    # Every console message, so a test can say there was no error.
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    # The driver is the one installed beside Chromium: nothing is downloaded.
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def console_log(browser: webdriver.Chrome) -> list[dict[str, object]]:
    """Return (and clear) what the page wrote to the console since the last call."""
    # What `Chrome.get_log("browser")` sends, which selenium leaves unannotated.
    entries: list[dict[str, object]] = browser.execute(Command.GET_LOG, {"type": "browser"})[
        "value"
    ]
    return entries


def open_report(browser: webdriver.Chrome, db_url: str, tmp_path: Path) -> str:
    """Write the report of a fresh session, open it, and return the session id."""
    session_id = audited_session(db_url)
    report = tmp_path / "report.html"
    ok(db_url, "audit", session_id, "--html", str(report))
    console_log(browser)  # what earlier pages logged is not this page's
    browser.get(report.as_uri())
    return session_id


def visible_view(browser: webdriver.Chrome, pane: int = 0) -> WebElement:
    (view,) = [
        view
        for view in browser.find_elements(By.CSS_SELECTOR, f'.pane[data-pane="{pane}"] .view')
        if view.is_displayed()
    ]
    return view


def choose(browser: webdriver.Chrome, pane: int, kind: str, text: str) -> None:
    """Choose the option of a pane's overlay or (visible) generation select by its text."""
    selects = browser.find_elements(
        By.CSS_SELECTOR, f'.pane-controls[data-pane="{pane}"] .{kind}-select'
    )
    (select,) = [s for s in selects if s.is_displayed()]
    Select(select).select_by_visible_text(text)


def timeline(view: WebElement) -> list[str]:
    return [item.text.split("\n")[0] for item in view.find_elements(By.CSS_SELECTOR, ".loop-name")]


def test_the_page_loads_without_console_errors(browser, db_url, tmp_path):
    open_report(browser, db_url, tmp_path)

    assert browser.title.startswith("Audit of session ")
    view = visible_view(browser)
    assert "Overlay default · now (latest)" in view.text
    assert len(timeline(view)) == 4
    assert console_log(browser) == []


def test_expanding_a_summary_shows_its_raw_messages(browser, db_url, tmp_path):
    session_id = open_report(browser, db_url, tmp_path)
    replacement = visible_view(browser).find_element(By.CSS_SELECTOR, ".replacement")
    label = replacement.find_element(By.CSS_SELECTOR, ".card-label").text
    replacement_id = int(label.rsplit("#", 1)[1])
    covered = replacement.find_elements(By.CSS_SELECTOR, ".covered .card")
    assert covered
    assert not any(card.is_displayed() for card in covered)

    replacement.find_element(By.CSS_SELECTOR, "details.expand > summary").click()

    assert all(card.is_displayed() for card in covered)
    raw = with_store(db_url, lambda store: expand(store, session_id, replacement_id))
    shown = [card.find_element(By.CSS_SELECTOR, ".card-label").text for card in covered]
    assert [label.split(" ")[1] for label in shown] == [f"#{m.id}" for m in raw]
    assert console_log(browser) == []


def test_switching_generation_changes_the_view(browser, db_url, tmp_path):
    session_id = open_report(browser, db_url, tmp_path)
    chain = with_store(db_url, lambda store: store.active_chain(session_id))
    now = visible_view(browser)
    assert len(timeline(now)) == 4

    generation = browser.find_element(
        By.CSS_SELECTOR, '.pane-controls[data-pane="0"] .generation-control:not([hidden]) select'
    )
    first = Select(generation).options[0].text
    Select(generation).select_by_index(0)

    then = visible_view(browser)
    assert not now.is_displayed()
    assert first in then.text
    # The first compaction was written before the fourth loop began.
    assert timeline(then) == [f"loop {loop.number}" for loop in chain[:2]] + [
        f"loop {chain[2].number} (current)"
    ]
    assert console_log(browser) == []


def _section_texts(browser: webdriver.Chrome, view: WebElement) -> dict[str, str]:
    """Each loop section of a view by its loop number: its whole text, shown or folded."""
    found: dict[str, str] = browser.execute_script(
        "var out = {};"
        "arguments[0].querySelectorAll('section.loop').forEach(function (s) {"
        "  out[s.getAttribute('data-loop-section')] = s.textContent; });"
        "return out;",
        view,
    )
    return found


def test_a_view_shows_in_full_the_loops_it_shares_with_another(browser, db_url, tmp_path):
    """A loop that looks the same in two views is written once; the other view copies it."""
    open_report(browser, db_url, tmp_path)
    now = visible_view(browser)
    shown_now = _section_texts(browser, now)
    # The second compaction of `default` saw the four loops as they are now: its view holds
    # references to the sections the view on show (now) holds in full.
    second = browser.find_element(By.CSS_SELECTOR, '.pane[data-pane="0"] .view[data-view="1"]')
    refs = second.find_elements(By.CSS_SELECTOR, "section.loop-ref")
    assert refs
    assert len(second.find_elements(By.CSS_SELECTOR, "li.timeline-ref")) == len(refs)
    shared = [ref.get_attribute("data-loop-section") for ref in refs]

    generation = browser.find_element(
        By.CSS_SELECTOR, '.pane-controls[data-pane="0"] .generation-control:not([hidden]) select'
    )
    Select(generation).select_by_index(1)

    then = visible_view(browser)
    assert then.get_attribute("data-view") == "1"
    assert then.find_elements(By.CSS_SELECTOR, "section.loop-ref, li.timeline-ref") == []
    shown_then = _section_texts(browser, then)
    assert sorted(shown_then) == sorted(
        item.get_attribute("data-loop") or ""
        for item in then.find_elements(By.CSS_SELECTOR, ".timeline-loop")
    )
    for number in shared:
        assert shown_then[number] == shown_now[number]
    # Every card got its text, and the copies brought no second id into the page.
    assert browser.execute_script(
        "return Array.from(arguments[0].querySelectorAll('.card pre.text'))"
        ".every(function (pre) { return pre.textContent.length > 0; })",
        then,
    )
    ids = browser.execute_script(
        "return Array.from(document.querySelectorAll('[id]')).map(function (e) { return e.id; })"
    )
    assert len(ids) == len(set(ids))
    # A copied section works as the original does, and links find it in this view.
    summary = then.find_element(By.CSS_SELECTOR, "details.expand > summary")
    browser.execute_script("arguments[0].closest('details.turns').open = true", summary)
    summary.click()
    assert then.find_element(By.CSS_SELECTOR, "details.expand .covered .card").is_displayed()
    browser.get(browser.current_url.partition("#")[0] + f"#loop-{shared[0]}")
    WebDriverWait(browser, 5).until(lambda b: b.find_elements(By.CSS_SELECTOR, ".target"))
    (target,) = browser.find_elements(By.CSS_SELECTOR, ".target")
    assert target.get_attribute("data-loop-section") == shared[0]
    assert target.is_displayed()
    assert console_log(browser) == []


def test_switching_overlay_and_comparing_side_by_side(browser, db_url, tmp_path):
    open_report(browser, db_url, tmp_path)
    right_pane = browser.find_element(By.CSS_SELECTOR, '.pane[data-pane="1"]')
    assert not right_pane.is_displayed()

    choose(browser, 0, "overlay", "tight")
    assert "Overlay tight · now (latest)" in visible_view(browser).text

    browser.find_element(By.CSS_SELECTOR, ".compare-toggle").click()
    assert right_pane.is_displayed()
    choose(browser, 1, "overlay", "default")
    left, right = visible_view(browser, 0), visible_view(browser, 1)
    assert "Overlay tight" in left.text
    assert "Overlay default · now (latest)" in right.text
    # Side by side: the two panes share the width.
    assert right.location["x"] > left.location["x"] + left.size["width"] / 2
    # The copy in the right pane works as the original does.
    summary = right.find_element(By.CSS_SELECTOR, "details.expand > summary")
    summary.click()
    assert right.find_element(By.CSS_SELECTOR, "details.expand .covered .card").is_displayed()
    assert console_log(browser) == []


def test_message_markup_is_shown_as_text_and_never_runs(browser, db_url, tmp_path):
    open_report(browser, db_url, tmp_path)

    assert browser.execute_script("return window.pwned === undefined")
    texts = [
        pre.text
        for pre in visible_view(browser).find_elements(By.CSS_SELECTOR, ".card pre.text")
        if pre.is_displayed()
    ]
    assert any(HOSTILE in text for text in texts)
    assert browser.find_elements(By.CSS_SELECTOR, ".view img") == []
    assert console_log(browser) == []


def test_search_lists_matching_messages_and_a_hit_opens_its_turn(browser, db_url, tmp_path):
    open_report(browser, db_url, tmp_path)

    browser.find_element(By.CSS_SELECTOR, "input.search").send_keys("pwned")
    results = browser.find_element(By.CSS_SELECTOR, ".search-results")
    WebDriverWait(browser, 5).until(lambda _: results.is_displayed())
    hits = results.find_elements(By.CSS_SELECTOR, ".search-hits li a")
    assert hits
    fragment = hits[0].get_attribute("href").rpartition("#")[2]
    assert fragment.startswith("loop-")
    assert "-turn-" in fragment
    # The hit's text is shown as text: the markup it quotes never runs.
    assert "pwned" in results.text
    assert browser.execute_script("return window.pwned === undefined")

    hits[0].click()
    WebDriverWait(browser, 5).until(lambda b: b.find_elements(By.CSS_SELECTOR, ".target"))
    (target,) = browser.find_elements(By.CSS_SELECTOR, ".target")
    assert browser.current_url.endswith("#" + fragment)
    assert target.get_attribute("data-turn") == fragment.rpartition("-")[2]
    assert target.is_displayed()
    assert console_log(browser) == []


def test_a_link_to_a_loop_opens_it_in_the_view_on_show(browser, db_url, tmp_path):
    open_report(browser, db_url, tmp_path)
    first = visible_view(browser).find_element(By.CSS_SELECTOR, ".timeline-loop")
    loop_id = first.get_attribute("data-loop")

    browser.get(browser.current_url.partition("#")[0] + f"#loop-{loop_id}")
    browser.refresh()

    WebDriverWait(browser, 5).until(lambda b: b.find_elements(By.CSS_SELECTOR, ".target"))
    (target,) = browser.find_elements(By.CSS_SELECTOR, ".target")
    assert target.get_attribute("data-loop-section") == loop_id
    assert target.find_element(By.CSS_SELECTOR, "details.turns").get_attribute("open") is not None
    assert console_log(browser) == []


ONE_LOOP = CONFIG.model_copy(update={"compaction_scope": FixedCount(0)})


async def _long_compacted_session(store: SessionStore) -> str:
    """More loops than a view lists at first, compacted twice with a one-loop scope."""
    compact_after = (LOOPS_SHOWN + 1, LOOPS_SHOWN + 3)
    return await many_loops(store, LOOPS_SHOWN + 4, compact_after=compact_after, config=ONE_LOOP)


def test_older_loops_a_view_shares_unfold_when_asked(browser, db_url, tmp_path):
    session_id = with_store(db_url, _long_compacted_session)
    report = tmp_path / "report.html"
    ok(db_url, "audit", session_id, "--scope", "0", "--html", str(report))
    console_log(browser)
    browser.get(report.as_uri())

    generation = browser.find_element(
        By.CSS_SELECTOR, '.pane-controls[data-pane="0"] .generation-control:not([hidden]) select'
    )
    Select(generation).select_by_index(0)  # the first compaction: its older loops are shared
    view = visible_view(browser)
    assert view.get_attribute("data-view") == "0"
    items = view.find_elements(By.CSS_SELECTOR, ".timeline li")
    classes = [(item.get_attribute("class") or "").split() for item in items]
    assert [names[0] for names in classes] == ["timeline-loop"] * len(items)
    folded = [item for item in items if not item.is_displayed()]
    assert folded
    assert all("older" in (item.get_attribute("class") or "").split() for item in folded)

    view.find_element(By.CSS_SELECTOR, ".show-older").click()

    assert all(item.is_displayed() for item in items)
    assert len(items) == LOOPS_SHOWN + 2  # the loops the first compaction saw
    assert console_log(browser) == []
