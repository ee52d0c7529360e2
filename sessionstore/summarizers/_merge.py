"""Merging adjacent digests into one at build time (pure).

When a context must shorten its summaries, the session digest and the loop summaries
right after it are sent as one handoff (`sessionstore._fit_units.merge_summary_runs`):
one framing instead of one per loop, each record's values listed once, and
`fit_handoff`'s priorities at work across the loops. `merge_handoffs` keeps the newest
request as the task (the user's replies after it as its follow-ups) and the first as the
goal, and carries the constraints of the requests in between as the user's; an older
loop's last assistant note (the amounts it worked out) stays as the note before the
newest, dropped first.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from sessionstore.summarizers._handoff import (
    Item,
    parse_handoff,
    render_handoff,
    state_item,
)
from sessionstore.summarizers._handoff_merge import merge_handoffs

__all__ = ["merge_digests"]

LAST_NOTE = "Last assistant note:"
EARLIER_NOTE = "Earlier assistant note:"


def merge_digests(texts: Sequence[str]) -> str:
    """Return the handoffs `texts` (oldest first) merged into one, rendered."""
    docs = [parse_handoff(text) for text in texts]
    merged = docs[0]
    for newer in docs[1:]:
        if any(item.key == "note" for item in newer.state):
            merged = replace(merged, state=[_earlier(item) for item in merged.state])
        merged = merge_handoffs(merged, newer)
    return render_handoff(merged)


def _earlier(item: Item) -> Item:
    """Return the last assistant note of an older loop as the note before the newest."""
    if item.key != "note":
        return item
    return state_item(EARLIER_NOTE + item.text.removeprefix(LAST_NOTE))
