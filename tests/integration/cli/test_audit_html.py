"""`sessionstore audit --html`: one self-contained page, every overlay after every compaction.

What the page does in a browser is tested in `test_audit_browser.py`; here, what it
holds and how the option behaves, on SQLite and PostgreSQL.
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from html.parser import HTMLParser
from pathlib import Path

import pytest

from sessionstore import SessionStore, audit_session
from sessionstore.cli._render._html import LOOPS_SHOWN
from tests.integration.cli.audit_pages import HOSTILE, audited_session, many_loops
from tests.integration.cli.runner import fails, ok, with_store


class _Page(HTMLParser):
    """Collects the tags, attributes and text nodes of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.scripts: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        self._in_script = tag == "script"

    def handle_endtag(self, tag: str) -> None:
        self._in_script = False

    def handle_data(self, data: str) -> None:
        (self.scripts if self._in_script else self.text).append(data)


def parse(page: str) -> _Page:
    parser = _Page()
    parser.feed(page)
    parser.close()
    return parser


def test_the_page_holds_every_overlay_after_every_compaction(db_url: str, tmp_path: Path) -> None:
    session_id = audited_session(db_url)
    report = tmp_path / "report.html"

    out = ok(db_url, "audit", session_id, "--html", str(report)).stdout

    assert f"Wrote {report}: 2 overlay(s), 5 view(s)" in out
    page = parse(report.read_text(encoding="utf-8"))
    views = [attrs for tag, attrs in page.tags if tag == "section" and "data-view" in attrs]
    assert [v["data-view"] for v in views] == ["0", "1", "2", "3", "4"]
    # The page opens on the default overlay as it is now; the others wait, hidden.
    assert ["hidden" in v for v in views] == [True, True, False, True, True]
    overlays = [
        attrs["value"] for tag, attrs in page.tags if tag == "option" and attrs.get("value")
    ]
    assert overlays[:2] == ["0", "1"]
    text = "".join(page.text)
    assert "Overlay default · now (latest)" in text
    assert "Overlay tight · now (latest)" in text
    # The first compaction saw three loops, the second four: the time travel shows both.
    chain = with_store(db_url, lambda store: store.active_chain(session_id))
    assert f"loop {chain[2].number} gen 1 (+2 earlier loops)" in text
    assert f"loop {chain[3].number} gen 1 (+3 earlier loops)" in text
    for action in ("kept", "truncated", "summarised"):
        assert f"act-{action}" in report.read_text(encoding="utf-8")
    # The totals of the view that opens are the library audit's.
    audit = with_store(db_url, lambda store: audit_session(store, session_id))
    assert f"{audit.raw_tokens:,} raw tokens → {audit.context_tokens:,} tokens" in text


def test_the_page_loads_nothing_from_anywhere(db_url: str, tmp_path: Path) -> None:
    session_id = audited_session(db_url)
    report = tmp_path / "report.html"
    ok(db_url, "audit", session_id, "--html", str(report))

    page = parse(report.read_text(encoding="utf-8"))
    linked = [
        (tag, name, value)
        for tag, attrs in page.tags
        for name, value in attrs.items()
        if name in ("src", "href", "action", "srcset")
    ]
    # The only link out is an empty inline icon, so the browser asks no server for one; the
    # others are anchors to the page's own loops and turns.
    outside = [link for link in linked if not (link[2] or "").startswith("#")]
    assert outside == [("link", "href", "data:,")]
    assert any((value or "").startswith("#loop-") for *_, value in linked)
    assert [tag for tag, _ in page.tags if tag in ("script", "style")] == ["style", "script"]


def test_message_text_is_shown_as_text_never_as_markup(db_url: str, tmp_path: Path) -> None:
    session_id = audited_session(db_url)
    report = tmp_path / "report.html"
    ok(db_url, "audit", session_id, "--html", str(report))

    source = report.read_text(encoding="utf-8")
    page = parse(source)
    # One script, ours; no element came from the message.
    assert [tag for tag, _ in page.tags].count("script") == 1
    assert "img" not in [tag for tag, _ in page.tags]
    assert "window.pwned" not in "".join(page.scripts)
    assert "&lt;script&gt;window.pwned = 1&lt;/script&gt;&lt;img src=x onerror=" in source
    assert HOSTILE in "".join(page.text)


def test_html_to_stdout_and_the_options_it_refuses(db_url: str, tmp_path: Path) -> None:
    session_id = audited_session(db_url)

    page = ok(db_url, "audit", session_id, "--html", "-").stdout
    assert page.startswith("<!DOCTYPE html>")
    assert page.rstrip().endswith("</html>")

    report = tmp_path / "report.html"
    refused = fails(db_url, "audit", session_id, "--html", str(report), "--json")
    assert "--json contradicts --html" in refused.stderr
    unknown = fails(db_url, "audit", session_id, "--html", str(report), "--overlay", "nope")
    assert "nope" in unknown.stderr
    missing = fails(db_url, "audit", "no-such-session", "--html", str(report))
    assert "no-such-session" in missing.stderr
    assert not report.exists()


def test_moments_keeps_the_newest_compactions_of_each_overlay(db_url: str, tmp_path: Path) -> None:
    session_id = audited_session(db_url)
    report = tmp_path / "report.html"

    out = ok(db_url, "audit", session_id, "--html", str(report), "--moments", "1").stdout

    assert f"Wrote {report}: 2 overlay(s), 4 view(s)" in out
    assert "after its newest 1 compaction(s), and now" in out
    page = parse(report.read_text(encoding="utf-8"))
    views = [attrs for tag, attrs in page.tags if tag == "section" and "data-view" in attrs]
    assert len(views) == 4
    only_now = ok(db_url, "audit", session_id, "--html", str(report), "--moments", "0").stdout
    assert f"Wrote {report}: 2 overlay(s), 2 view(s) (each overlay now)" in only_now


def test_moments_needs_html_and_a_count(db_url: str, tmp_path: Path) -> None:
    session_id = audited_session(db_url)

    alone = fails(db_url, "audit", session_id, "--moments", "2")
    assert "--moments chooses the views of --html" in alone.stderr
    negative = fails(
        db_url, "audit", session_id, "--html", str(tmp_path / "r.html"), "--moments", "-1"
    )
    assert "--moments" in negative.stderr
    assert not (tmp_path / "r.html").exists()


def test_the_page_opens_on_the_overlay_asked_for(db_url: str, tmp_path: Path) -> None:
    session_id = audited_session(db_url)
    report = tmp_path / "report.html"
    ok(db_url, "audit", session_id, "--html", str(report), "--overlay", "tight")

    page = parse(report.read_text(encoding="utf-8"))
    shown = [
        attrs["data-view"]
        for tag, attrs in page.tags
        if tag == "section" and "data-view" in attrs and "hidden" not in attrs
    ]
    assert shown == ["4"]


def test_a_session_without_loops_gets_a_page_that_says_so(db_url: str, tmp_path: Path) -> None:
    async def create(store: SessionStore) -> str:
        return (await store.create_session(app_name="a", user_id="u")).id

    session_id = with_store(db_url, create)
    report = tmp_path / "report.html"
    ok(db_url, "audit", session_id, "--html", str(report))

    assert "The session has no loops." in "".join(parse(report.read_text("utf-8")).text)


@pytest.mark.slow
def test_the_wheel_ships_the_page_template(tmp_path: Path) -> None:
    """`audit --html` after `pip install` needs the template, style sheet and script."""
    root = Path(__file__).resolve().parents[3]
    build = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q"]
    result = subprocess.run(
        [*build, "-w", str(tmp_path), str(root)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    (wheel,) = tmp_path.glob("sessionstore-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    templates = root / "sessionstore" / "cli" / "_render" / "templates"
    shipped = {f"sessionstore/cli/_render/templates/{p.name}" for p in templates.iterdir()}
    assert len(shipped) == 3
    assert shipped <= names


async def _many_loops(store: SessionStore) -> str:
    return await many_loops(store, LOOPS_SHOWN + 6)


def test_a_long_session_folds_its_older_loops_and_links_every_loop_and_turn(
    db_url: str, tmp_path: Path
) -> None:
    session_id = with_store(db_url, _many_loops)
    loops = [loop.number for loop in with_store(db_url, lambda s: s.list_loops(session_id))]
    report = tmp_path / "report.html"
    # A one-loop scope: every loop before the current one is out of scope.
    ok(db_url, "audit", session_id, "--scope", "0", "--html", str(report))

    page = parse(report.read_text(encoding="utf-8"))
    ids = [attrs["id"] for _, attrs in page.tags if attrs.get("id")]
    assert len(ids) == len(set(ids))  # one id each, for the view the page opens on
    assert {f"loop-{number}" for number in loops} <= set(ids)  # numbers in the session: 1, 2, ...
    assert f"loop-{loops[-1]}-turn-0" in ids
    assert f"loop-{loops[-1]}-turn-1" in ids
    hrefs = {attrs.get("href") for tag, attrs in page.tags if tag == "a"}
    assert f"#loop-{loops[0]}" in hrefs
    assert f"#loop-{loops[-1]}-turn-1" in hrefs
    # The timeline lists the newest loops; the older ones are folded behind a button.
    timeline = [a for tag, a in page.tags if "timeline-loop" in (a.get("class") or "")]
    folded = [a for a in timeline if "hidden" in a]
    assert len(timeline) == len(loops)
    assert len(folded) == len(loops) - LOOPS_SHOWN
    assert [a["data-loop"] for a in folded] == [str(number) for number in loops[:6]]
    button = [a for tag, a in page.tags if tag == "button"]
    assert button
    assert button[0]["data-count"] == "6"
    assert any(tag == "details" and "older-loops" in (a.get("class") or "") for tag, a in page.tags)
    assert any(tag == "input" and a.get("type") == "search" for tag, a in page.tags)


def test_audit_html_shows_its_steps_when_asked(db_url: str, tmp_path: Path) -> None:
    session_id = audited_session(db_url)
    report = tmp_path / "report.html"

    quiet = ok(db_url, "audit", session_id, "--html", str(report))
    asked = ok(db_url, "audit", session_id, "--html", str(report), "--progress")

    assert quiet.stderr == ""  # no terminal: nothing unless asked
    assert f"... Reading session {session_id}" in asked.stderr
    assert asked.stdout == quiet.stdout
