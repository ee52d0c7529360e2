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
from tests.integration.cli.audit_pages import HOSTILE, audited_session
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
    assert f"loop {chain[2].id} gen 1 (+2 earlier loops)" in text
    assert f"loop {chain[3].id} gen 1 (+3 earlier loops)" in text
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
    # The only link is an empty inline icon, so the browser asks no server for one.
    assert linked == [("link", "href", "data:,")]
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
