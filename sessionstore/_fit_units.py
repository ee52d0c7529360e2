"""The parts `fit_context` cuts: units, summaries, the system prompt's sentences (pure).

`group_units` groups the loaded items into what the trimmer keeps or drops whole: each
loop's run of summary messages (with the restored file reads after it) as one summary,
the system prompt, the session's task, the pinned latest request, and raw units (an
assistant message with its tool results). The helpers here shorten one summary, one
system prompt or the latest request's standing instructions; `sessionstore._trim`
decides how far.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

from sessionstore._framing import (
    DIGEST_HEADER,
    framed,
    is_restored_file,
    is_summary_item,
    summary_body,
    text_message,
)
from sessionstore._items import ContextItem
from sessionstore._standing import Request, split_request
from sessionstore._tokens import message_tokens
from sessionstore.models import (
    BranchSummaryMessage,
    CompactionSummaryMessage,
    SessionDigest,
    SystemMessage,
    TextContent,
    ToolResultMessage,
    UserMessage,
)
from sessionstore.strategies._passes import truncate_head_tail_tokens
from sessionstore.summarizers._handoff import looks_like_handoff, parse_handoff

__all__ = [
    "SENTENCES_LEFT_OUT",
    "SENTENCE_END",
    "Kind",
    "Unit",
    "UnitSummary",
    "digest_unit",
    "first_sentence_cost",
    "fold_between_summaries",
    "group_units",
    "make_fold_host",
    "merge_summary_runs",
    "request_parts",
    "shorten_request",
    "shorten_sentences",
    "shorten_summary",
    "summary_item",
]

SENTENCES_LEFT_OUT = "[… {count} more sentence(s) left out to fit the budget]"
"""What follows a system prompt shortened by whole sentences."""

Kind = Literal["system", "pinned", "task", "summary", "raw"]


@dataclass(slots=True)
class UnitSummary:
    header: str
    texts: list[str]
    restored: list[str]
    first: ContextItem
    source: Literal["compacted", "digest", "built"]
    covers: tuple[int, ...]
    pinned: bool

    @property
    def is_placeholder(self) -> bool:
        """True for the digest of dropped turns that has no stored summary to merge into."""
        return self.source == "built" and not self.texts


@dataclass(slots=True)
class Unit:
    kind: Kind
    items: list[ContextItem]
    summary: UnitSummary | None = None
    size: int = 0
    """The unit's cost as loaded (messages)."""


def group_units(items: Sequence[ContextItem], task_loop_id: int | None) -> list[Unit]:
    """Group items into units: summaries (with their restored reads), system, raw units."""
    units: list[Unit] = []
    task_found = task_loop_id is None
    for item in items:
        message = item.message
        last = units[-1] if units else None
        if isinstance(message, ToolResultMessage) and last is not None and last.kind != "summary":
            last.items.append(item)
            continue
        if is_summary_item(item):
            assert isinstance(message, CompactionSummaryMessage | BranchSummaryMessage)
            if (
                last is not None
                and last.summary is not None
                and last.summary.source == "compacted"
                and not last.summary.restored
                and last.items[0].loop_id == item.loop_id
            ):
                last.summary.texts.append(message.summary)
                last.summary.covers += item.covers
                last.summary.pinned = last.summary.pinned or item.pinned
                last.items.append(item)
                continue
            summary = UnitSummary(
                "", [message.summary], [], item, "compacted", item.covers, item.pinned
            )
            units.append(Unit("summary", [item], summary))
            continue
        if (
            last is not None
            and last.summary is not None
            and last.summary.source == "compacted"
            and item.source == "compacted"
            and item.loop_id == last.items[0].loop_id
            and not item.pinned
            and is_restored_file(message)
        ):
            assert isinstance(message, UserMessage)
            last.summary.restored.append(message.text)
            last.summary.covers += item.covers
            last.items.append(item)
            continue
        kind: Kind = "raw"
        first_request = (
            not task_found
            and isinstance(message, UserMessage)
            and item.source == "raw"
            and item.loop_id == task_loop_id
        )
        task_found = task_found or first_request
        if item.pinned:
            kind = "pinned"
        elif isinstance(message, SystemMessage) and item.source == "raw":
            kind = "system"
        elif first_request:
            kind = "task"
        units.append(Unit(kind, [item]))
    for unit in units:
        unit.size = sum(item.tokens for item in unit.items)
    return units


def make_fold_host(units: list[Unit]) -> None:
    """Put an empty digest before the first raw unit unless a handoff is right before it.

    Raw turns the budget drops fold into the handoff before them (see `FoldedTurns`);
    with none there, into this placeholder, which is sent only when they are dropped.
    """
    first = next((i for i, unit in enumerate(units) if unit.kind == "raw"), None)
    if first is None:
        return
    before = next((unit for unit in reversed(units[:first]) if unit.kind == "summary"), None)
    if before is not None:
        assert before.summary is not None
        if looks_like_handoff("\n".join(before.summary.texts)):
            return
    first_item = ContextItem(message=text_message(""), tokens=0, source="built")
    placeholder = UnitSummary(DIGEST_HEADER, [], [], first_item, "built", (), False)
    units.insert(first, Unit("summary", [], placeholder))


def merge_summary_runs(units: Sequence[Unit]) -> list[Unit] | None:
    """Return `units` with each run of adjacent handoff summaries merged into one, or None.

    The session digest and the loop summaries right after it (nothing raw between them)
    become one handoff (`merge_handoffs`, oldest first): one framing instead of one per
    loop, each record's values listed once, and the fitter's priorities at work across
    the loops when the whole must be shortened. A summary with restored file reads, or
    one that is not a structured handoff, is not merged. None when no run has two.
    """
    merged: list[Unit] = []
    run: list[Unit] = []
    changed = False

    def flush() -> None:
        nonlocal changed
        if len(run) < 2:
            merged.extend(run)
        else:
            texts = ["\n".join(unit.summary.texts) for unit in run if unit.summary]
            covers = [raw_id for unit in run if unit.summary for raw_id in unit.summary.covers]
            merged.append(_merged_unit(run, texts, covers))
            changed = True
        run.clear()

    for unit in units:
        if _mergeable(unit):
            run.append(unit)
            continue
        flush()
        merged.append(unit)
    flush()
    return merged if changed else None


def fold_between_summaries(units: Sequence[Unit], dropped: set[int]) -> list[Unit] | None:
    """Return `units` with dropped raw turns between handoffs folded, the run merged; or None.

    A fit that drops every raw turn between two loops' handoffs still sends each handoff
    in a framing of its own (the dropped turns fold into the one before them). Here the
    summaries from the first to the last one with only dropped turns before it become
    one handoff, oldest first, each run of those turns folded into the handoff before it
    as the fit folds them (`FoldedTurns`): one framing instead of one per loop, and the
    handoff fitter's priorities across the loops. None when no such run holds two
    summaries, or when anything else (a kept turn, the session's task, a summary that is
    not a structured handoff) lies between them.
    """
    # Imported here: only a fit that drops turns between handoffs folds them.
    from sessionstore._build_digest import FoldedTurns

    first = next((i for i, unit in enumerate(units) if unit.kind == "summary"), None)
    if first is None:
        return None
    last = None
    for index in range(first + 1, len(units)):
        unit = units[index]
        if _mergeable(unit):
            last = index
        elif not (unit.kind == "raw" and index in dropped) and not (
            unit.kind == "summary" and unit.summary is not None and unit.summary.is_placeholder
        ):
            break
    if last is None or not _mergeable(units[first]):
        return None
    stretch = units[first : last + 1]
    if not any(unit.kind == "raw" for unit in stretch):
        return None  # adjacent summaries: `merge_summary_runs` merges them
    texts: list[str] = []
    covers: list[int] = []
    raw: list[Unit] = []

    def fold() -> None:
        if not raw:
            return
        turns = [[item.message for item in unit.items] for unit in raw]
        ids = [tuple(i for item in unit.items for i in item.covers) for unit in raw]
        digest = FoldedTurns(turns, ids, texts[-1] if texts else None)
        text = digest.text(len(raw))
        covers.extend(digest.covers(len(raw)))
        if texts:
            texts[-1] = text
        else:
            texts.append(text)
        raw.clear()

    for unit in stretch:
        if unit.kind == "raw":
            raw.append(unit)
            continue
        fold()
        if unit.summary is not None and unit.summary.texts:
            texts.append("\n".join(unit.summary.texts))
            covers.extend(unit.summary.covers)
    fold()
    return [*units[:first], _merged_unit(stretch, texts, covers), *units[last + 1 :]]


def _mergeable(unit: Unit) -> bool:
    """Whether a unit is a summary that merges with others: a structured handoff, no reads."""
    summary = unit.summary
    return (
        unit.kind == "summary"
        and summary is not None
        and bool(summary.texts)
        and not summary.restored
        and looks_like_handoff("\n".join(summary.texts))
    )


def _merged_unit(run: Sequence[Unit], texts: Sequence[str], covers: Sequence[int]) -> Unit:
    """One summary unit standing for `run`: the handoffs `texts` merged, covering `covers`."""
    # Imported here: only a context that regroups its summaries merges them.
    from sessionstore.summarizers._merge import merge_digests

    first = run[0].summary
    assert first is not None
    summary = UnitSummary(
        DIGEST_HEADER if first.source == "digest" else first.header,
        [merge_digests(texts)],
        [],
        first.first if run[0].items else next(item for unit in run for item in unit.items),
        "built",
        tuple(covers),
        any(unit.summary.pinned for unit in run if unit.summary),
    )
    unit = Unit("summary", [item for unit in run for item in unit.items], summary)
    unit.size = summary_item(summary, summary.texts, [], None).tokens
    return unit


def digest_unit(digest: SessionDigest) -> Unit:
    summary = UnitSummary(
        DIGEST_HEADER,
        [digest.message.summary],
        [],
        ContextItem(message=text_message(""), tokens=0, source="digest"),
        "digest",
        (),
        False,
    )
    unit = Unit("summary", [], summary)
    unit.size = summary_item(summary, [digest.message.summary], [], None).tokens
    return unit


def summary_item(
    summary: UnitSummary,
    texts: Sequence[str],
    restored: Sequence[str],
    note: str | None,
    more: bool = False,
    terse: bool = False,
) -> ContextItem:
    body = summary_body(texts, restored)
    if summary.header:
        body = f"{summary.header}\n{body}"
    message = text_message(framed(body, note, more=more, terse=terse))
    first = summary.first
    return ContextItem(
        message=message,
        tokens=message_tokens(message),
        source=summary.source,
        loop_id=first.loop_id,
        replacement_id=first.replacement_id,
        covers=summary.covers,
        pinned=summary.pinned,
        flexible=True,
    )


def shorten_summary(text: str, max_tokens: int, system: Sequence[str] = ()) -> str:
    """Return a summary's text within `max_tokens` (as `estimate_tokens` counts).

    A structured handoff is re-fitted by priority (`fit_handoff`: the least valuable
    items go first, the task last; what the `system` prompts sent with it state, first
    of its constraints); any other text keeps its first and last lines.
    """
    if max_tokens <= 0:
        return ""
    if looks_like_handoff(text):
        # Imported here: only a summary over its share needs the fitter (and its
        # patterns), so opening a store or a context that fits does not load it.
        from sessionstore.summarizers._fit import fit_handoff

        return fit_handoff(parse_handoff(text), max_tokens, system=system)
    return truncate_head_tail_tokens(text, max_tokens)


SENTENCE_END = re.compile(r"(?<=[.!?:;])\s+|\n+")


def shorten_sentences(text: str, max_tokens: int) -> str:
    """Return the leading whole sentences of `text` that fit `max_tokens`, and a note.

    Sentences end at `.`, `!`, `?`, `:` or `;` before white space, or at a line break;
    none is ever cut. The note says how many were left out. Empty when not even the
    first sentence fits.
    """
    if (
        message_tokens(SystemMessage.model_construct(content=[TextContent(text=text)]))
        <= max_tokens
    ):
        return text
    ends = [match.start() for match in SENTENCE_END.finditer(text)] + [len(text)]
    total = len(ends)

    def cost(count: int) -> int:
        kept = text[: ends[count - 1]].rstrip()
        note = SENTENCES_LEFT_OUT.format(count=total - count)
        return message_tokens(
            SystemMessage.model_construct(content=[TextContent(text=f"{kept}\n{note}")])
        )

    low, high, best = 1, total - 1, 0
    while low <= high:
        middle = (low + high) // 2
        if cost(middle) <= max_tokens:
            best, low = middle, middle + 1
        else:
            high = middle - 1
    if best == 0:
        return ""
    kept = text[: ends[best - 1]].rstrip()
    return f"{kept}\n{SENTENCES_LEFT_OUT.format(count=total - best)}"


def first_sentence_cost(item: ContextItem) -> int:
    """Return what a system message costs shortened to its first sentence (and the note)."""
    message = item.message
    assert isinstance(message, SystemMessage)
    text = message.text
    end = SENTENCE_END.search(text)
    if end is None:
        return item.tokens
    rest = len(SENTENCE_END.findall(text))
    shortened = f"{text[: end.start()].rstrip()}\n{SENTENCES_LEFT_OUT.format(count=rest)}"
    return min(item.tokens, message_tokens(SystemMessage(content=shortened)))


def request_parts(item: ContextItem, shared: Sequence[str]) -> Request | None:
    """Return the latest request split into task text and standing instructions.

    None when it has no standing part, or its text is not one block (nothing to cut by
    rule). `shared` holds the system prompt's texts (see `split_request`).
    """
    message = item.message
    if not isinstance(message, UserMessage):
        return None
    texts = [block for block in message.content if isinstance(block, TextContent)]
    if len(texts) != 1:
        return None
    request = split_request(texts[0].text, shared=shared)
    return request if request.has_standing else None


def shorten_request(item: ContextItem, request: Request, cap: int) -> ContextItem:
    """Return the latest request within `cap` tokens, its standing instructions shortened.

    The task text stays verbatim, and so do its images; when not even the task text
    alone fits, the request with every standing sentence left out. Never longer than the
    request itself.
    """
    message = item.message
    assert isinstance(message, UserMessage)

    def with_text(text: str) -> UserMessage:
        content = [
            TextContent(text=text) if isinstance(block, TextContent) else block
            for block in message.content
        ]
        return message.model_copy(update={"content": content})

    text = request.shorten(lambda text: message_tokens(with_text(text)) <= cap)
    if text is None:
        text = request.keeping(0)
    shortened = with_text(text)
    tokens = message_tokens(shortened)
    if text == request.text or tokens >= item.tokens:
        return item  # a marker longer than what it stands for saves nothing
    return replace(item, message=shortened, tokens=tokens, source="shortened")
