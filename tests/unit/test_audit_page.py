"""The audit page's content, from a loop audited by hand: every action gets its colour.

No database and no browser: `audit_loop` is pure, and so is rendering the page. What the
page does in a browser is in `tests/integration/cli/test_audit_browser.py`.
"""

from __future__ import annotations

from datetime import UTC, datetime
from html.parser import HTMLParser

from sessionstore import (
    CompactedSection,
    CompactionBlock,
    CompactionSummaryMessage,
    ReplacementMessage,
    SessionAudit,
    ToolResultMessage,
    TurnRange,
)
from sessionstore._audit import AuditSnapshot, audit_loop
from sessionstore.cli._render._html import audit_page
from tests.unit._loops import stored, tool_turn, user

MOMENT = datetime(2026, 5, 9, 14, 30, tzinfo=UTC)


class _Classes(HTMLParser):
    """Collects, for each element with a class, its classes and its text."""

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[tuple[str, list[str]]] = []
        self.elements: list[tuple[set[str], list[str]]] = []
        self.source = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("meta", "link", "input", "br", "img"):
            return
        classes = set((dict(attrs).get("class") or "").split())
        text: list[str] = []
        self.stack.append((tag, text))
        self.elements.append((classes, text))

    def handle_endtag(self, tag: str) -> None:
        if self.stack:
            self.stack.pop()

    def handle_data(self, data: str) -> None:
        for _, text in self.stack:
            text.append(data)

    def texts(self, *classes: str) -> list[str]:
        return [" ".join("".join(t).split()) for c, t in self.elements if set(classes) <= c]


def _page() -> tuple[_Classes, list[int]]:
    """A loop of five turns: kept, summarised, omitted, dropped, then a truncated recent turn."""
    view = stored(
        [
            user("fix the <b>bug</b>"),
            *tool_turn(1, text="look"),
            *tool_turn(2, text="try"),
            *tool_turn(3, text="again"),
            *tool_turn(4, text="done", output="line\n" * 40),
        ]
    )
    ids = [m.id for m in view.messages]
    summary = CompactionSummaryMessage(summary="looked at the code")
    marker = CompactionSummaryMessage(
        summary="turn 2 left out", extra={"sessionstore": {"omitted_turns": [2]}}
    )
    result = view.messages[8].message
    assert isinstance(result, ToolResultMessage)
    cut = result.model_copy(update={"content": "line\n(38 lines cut)"})
    block = CompactionBlock(
        id=1,
        loop_id=1,
        generation=2,
        created_at=MOMENT,
        keep_first=TurnRange(start_turn=0, end_turn=0),
        keep_compacted=CompactedSection(
            range=TurnRange(start_turn=1, end_turn=3),
            messages=[
                ReplacementMessage(id=41, message=summary, covers=ids[1:3], token_count=9),
                ReplacementMessage(id=42, message=marker, covers=ids[3:5], token_count=7),
            ],
        ),
        keep_recent=CompactedSection(
            range=TurnRange(start_turn=4, end_turn=4),
            messages=[
                ReplacementMessage(
                    id=43, message=view.messages[7].message, covers=[ids[7]], token_count=5
                ),
                ReplacementMessage(id=44, message=cut, covers=[ids[8]], token_count=8),
            ],
        ),
    )
    loop = audit_loop(view.loop, block, view.messages, pinned_id=ids[0])
    audit = SessionAudit(session_id="s<1>", overlay="default", loops=[loop])
    page = audit_page(
        "s<1>",
        [
            AuditSnapshot("default", MOMENT, [block], audit),
            AuditSnapshot("default", None, [], audit),
        ],
        generated_at=MOMENT,
    )
    parsed = _Classes()
    parsed.feed(page)
    parsed.source = page
    return parsed, ids


def test_every_action_has_its_colour_on_both_sides():
    page, ids = _page()

    # Two views (the compaction, and now) of the same loop, which looks the same in both:
    # its section is written once, in the view the page opens on (see the test below).
    assert page.texts("turn-number") == ["0", "1", "2", "3", "4"]
    raw = page.texts("card")
    assert any(t.startswith(f"user #{ids[0]} · turn 0 latest user request kept") for t in raw)
    for action, message_id in [
        ("summarised", ids[1]),
        ("omitted", ids[3]),
        ("dropped", ids[5]),
        ("truncated", ids[8]),
        ("kept", ids[7]),
    ]:
        cards = [t for t in page.texts("card", f"act-{action}") if f"#{message_id} " in t]
        assert cards, action
    shown = page.texts("shown-note")
    assert f"raw, verbatim: #{ids[0]}" in shown
    assert f"nothing stands for #{ids[5]}, #{ids[6]}" in shown
    assert page.texts("shown-note", "act-dropped") == [f"nothing stands for #{ids[5]}, #{ids[6]}"]


def test_a_replacement_lists_the_raw_messages_it_stands_for():
    page, ids = _page()

    expands = page.texts("expand")
    summary = next(t for t in expands if t.startswith("stands for 2 raw messages"))
    assert f"assistant #{ids[1]} → bash · turn 1" in summary
    assert f"tool_result #{ids[2]} (bash) · turn 1" in summary
    replacements = page.texts("card-label")
    assert "compaction_summary · replacement #42" in replacements
    assert "tool_result · replacement #44 (bash)" in replacements
    # The recent copy of the assistant message is the same message: kept, not truncated.
    assert any("replacement #43" in t for t in page.texts("card", "act-kept"))
    assert not any("replacement #43" in t for t in page.texts("card", "act-truncated"))
    assert any("replacement #44" in t for t in page.texts("card", "act-truncated"))


def test_generations_are_labelled_by_when_and_which_block():
    page, _ = _page()

    titles = page.texts("view-title")
    assert titles == [
        "Overlay default · 1 · 2026-05-09 14:30:00 UTC · loop 1 gen 2",
        "Overlay default · now (latest)",
    ]
    # Markup in the session id and in messages stays text.
    assert page.texts("card-label")
    assert any("fix the <b>bug</b>" in t for t in page.texts("message-text"))


class _Sections(HTMLParser):
    """Collects the loop sections written in full and the references to them, view by view."""

    def __init__(self) -> None:
        super().__init__()
        self.view = -1
        self.full: list[tuple[int, str, str]] = []
        """(view, loop number, section number) of each section written in full."""
        self.refs: list[tuple[int, str, str]] = []
        """(view, loop number, section number) of each reference."""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag != "section":
            return
        if "data-view" in found:
            self.view = int(found["data-view"] or 0)
        elif "data-section" in found:
            self.full.append(
                (self.view, found["data-loop-section"] or "", found["data-section"] or "")
            )
        elif "data-ref" in found:
            self.refs.append((self.view, found["data-loop-section"] or "", found["data-ref"] or ""))


def _sections(page: str) -> _Sections:
    parsed = _Sections()
    parsed.feed(page)
    return parsed


def test_a_loop_shown_the_same_in_two_views_is_written_once_and_referred_to():
    page, _ = _page()

    sections = _sections(page.source)
    # The page opens on `now` (view 1): its section in full, the compaction's a reference.
    assert sections.full == [(1, "1", "0")]
    assert sections.refs == [(0, "1", "0")]


def test_a_loop_that_looks_different_in_another_view_is_written_there_in_full():
    view = stored([user("fix it"), *tool_turn(1, text="look"), *tool_turn(2, text="try")])
    first = audit_loop(view.loop, None, view.messages[:3], pinned_id=view.messages[0].id)
    now = audit_loop(view.loop, None, view.messages, pinned_id=view.messages[0].id)
    out = audit_loop(view.loop, None, view.messages, in_scope=False)
    snapshots = [
        AuditSnapshot(name, None, [], SessionAudit(session_id="s", overlay=name, loops=[loop]))
        for name, loop in (("a", first), ("b", now), ("c", out), ("d", first))
    ]

    sections = _sections(audit_page("s", snapshots, generated_at=MOMENT))

    # Fewer messages, all of them, out of scope: three sections, each in full; the fourth
    # view shows the first one's again, which the page opens on.
    assert sections.full == [(0, "1", "0"), (1, "1", "1"), (2, "1", "2")]
    assert sections.refs == [(3, "1", "0")]
