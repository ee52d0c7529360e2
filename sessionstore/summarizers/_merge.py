"""Merging adjacent digests into one at build time (pure).

When a context must shorten its summaries, the session digest and the loop summaries
right after it are sent as one handoff (`sessionstore._fit_units.merge_summary_runs`):
one framing instead of one per loop, each record's values listed once, and
`fit_handoff`'s priorities at work across the loops. `merge_handoffs` keeps the newest
request as the task and the first as the goal; the requests in between would vanish
with their loops' framing, so the constraints they state (`the cheapest`, `I don't need
insurance`, `without changing the dates`) are carried as the user's constraints, and
an older loop's last assistant note (the amounts it worked out) stays as the note before
the newest, dropped first.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from sessionstore.summarizers._facts import SENTENCE_CHARS, is_constraint
from sessionstore.summarizers._handoff import (
    FOLLOW_UP,
    Handoff,
    Item,
    parse_handoff,
    render_handoff,
    state_item,
)
from sessionstore.summarizers._handoff_merge import merge_handoffs
from sessionstore.summarizers._scan import cut, sentences

__all__ = ["merge_digests"]

LAST_NOTE = "Last assistant note:"
EARLIER_NOTE = "Earlier assistant note:"
REQUEST_CONSTRAINT_RANK = 2
"""The rank a constraint of a request between the first and the latest gets (the user's)."""


def merge_digests(texts: Sequence[str]) -> str:
    """Return the handoffs `texts` (oldest first) merged into one, rendered."""
    docs = [parse_handoff(text) for text in texts]
    merged = docs[0]
    for newer in docs[1:]:
        replaced = merged.task if newer.task and newer.task != merged.task else ""
        if any(item.key == "note" for item in newer.state):
            merged = replace(merged, state=[_earlier(item) for item in merged.state])
        merged = merge_handoffs(merged, newer)
        if replaced:
            merged = _with_request_constraints(merged, replaced)
    return render_handoff(merged)


def _earlier(item: Item) -> Item:
    """Return the last assistant note of an older loop as the note before the newest."""
    if item.key != "note":
        return item
    return state_item(EARLIER_NOTE + item.text.removeprefix(LAST_NOTE))


def _with_request_constraints(doc: Handoff, request: str) -> Handoff:
    """Return `doc` with the constraints a replaced request states, each once."""
    kept = doc.task + "\n" + doc.goal
    known = {item.identity for item in doc.constraints}
    added: list[Item] = []
    for line in request.split("\n"):
        if line.startswith(FOLLOW_UP):
            line = line.removeprefix(FOLLOW_UP).removesuffix('"')
        for sentence in sentences(line):
            clean = cut(sentence.lstrip("-*• "), SENTENCE_CHARS)
            if not is_constraint(clean) or clean in known or clean in kept:
                continue
            known.add(clean)
            added.append(Item(clean, REQUEST_CONSTRAINT_RANK))
    return replace(doc, constraints=[*doc.constraints, *added]) if added else doc
