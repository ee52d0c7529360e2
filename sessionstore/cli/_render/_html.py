"""The audit as one self-contained web page: every overlay, after every compaction, side by side.

`audit_page` turns the snapshots of `audit_snapshots` into view models (plain dataclasses,
all text still raw), and the Jinja template `templates/audit.html.j2` renders them with
autoescaping on, so message text, which is hostile, is always shown as text. The page's
style sheet and script are inlined from the same folder: it loads nothing from anywhere.

Each message's text is written once, in an inert `<template>`, however many views and
expansions show it; a view's cards name it by key, and the script copies it in (as text)
when the view is shown. So is each loop's section and its timeline entry, however many
views show them the same: a loop compacted once looks the same in every view after, so
a page of K compactions of N loops would otherwise hold K x N of each. A view refers to
a section written in another view, and the script copies it in when the view is shown
(`_share`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

import jinja2

from sessionstore import AssistantMessage, StoredMessage, ToolResultMessage
from sessionstore._audit import Action, AuditedTurn, AuditSnapshot, LoopAudit
from sessionstore._framing import digest_tokens
from sessionstore.cli._render._context import message_text
from sessionstore.cli._render._loops import LoopNumbers
from sessionstore.cli._render._output import share, when
from sessionstore.cli._render._printable import printable
from sessionstore.models import Message, ReplacementMessage

__all__ = ["LOOPS_SHOWN", "audit_page"]

LOOPS_SHOWN = 20
"""The newest loops a view lists at first; older ones out of scope are folded (a button
and a `<details>` open them), so a session of hundreds of loops stays one screen long."""


@dataclass(frozen=True, slots=True)
class _Card:
    """One message as the page shows it."""

    label: str
    """`user #12`, `assistant #13 → read_file`, `replacement #41`."""
    tokens: int
    text_key: str
    """Where the page keeps the message's text (`m12` for raw message 12, `r41` for
    replacement 41)."""
    action: Action
    pinned: bool = False


@dataclass(frozen=True, slots=True)
class _Shown:
    """One entry of a turn's right-hand column: what the model sees."""

    action: Action
    note: str
    card: _Card | None = None
    """The replacement message shown, when there is one."""
    covers: list[_Card] = field(default_factory=list)
    """The raw messages the replacement stands for (what expanding it shows)."""


@dataclass(frozen=True, slots=True)
class _Turn:
    index: int
    action: str
    raw: list[_Card]
    shown: list[_Shown]
    raw_tokens: int
    context_tokens: int


@dataclass(frozen=True, slots=True)
class _Loop:
    number: int
    """The loop's number in its session (1, 2, ...): its label and its anchor `#loop-N`."""
    is_current: bool
    status: str
    """`in scope`, `digest` (folded into the session digest) or `out of scope`."""
    block: str
    raw_tokens: int
    context_tokens: int
    raw_width: float
    context_width: float
    """The token bars, in percent of the largest loop of the whole report."""
    turns: list[_Turn]
    created_at: str
    messages: int
    section: int = 0
    """The loop's section as this view shows it: equal numbers, equal sections (`_share`)."""
    shared: bool = False
    """The section (and the timeline entry, which it determines) is written in full
    elsewhere on the page: this view holds references."""


@dataclass(frozen=True, slots=True)
class _Digest:
    tokens: int
    loops: str
    text: str


@dataclass(frozen=True, slots=True)
class _View:
    index: int
    overlay_index: int
    label: str
    raw_tokens: int
    context_tokens: int
    ratio: str
    loops: list[_Loop]
    digest: _Digest | None
    older: int = 0
    """The oldest loops, all out of scope, that the view folds (see `LOOPS_SHOWN`)."""


@dataclass(frozen=True, slots=True)
class _Overlay:
    index: int
    name: str
    views: list[_View]


def _label(stored: StoredMessage | None, message: Message, number: str) -> str:
    label = f"{message.kind} {number}"
    if isinstance(message, AssistantMessage) and message.tool_calls:
        label += " → " + ", ".join(call.name for call in message.tool_calls)
    if isinstance(message, ToolResultMessage) and message.tool_name:
        label += f" ({message.tool_name}{', error' if message.is_error else ''})"
    if stored is not None:
        label += f" · turn {stored.turn_index}"
    return label


def _raw_card(stored: StoredMessage, action: Action, *, pinned: bool = False) -> _Card:
    return _Card(
        label=_label(stored, stored.message, f"#{stored.id}"),
        tokens=stored.token_count,
        text_key=f"m{stored.id}",
        action=action,
        pinned=pinned,
    )


def _shown(turn: AuditedTurn, raw_by_id: dict[int, StoredMessage], in_scope: bool) -> list[_Shown]:
    """Return what the model sees for a turn, in the order the turn's messages come."""
    if not in_scope:
        return [
            _Shown("kept", f"latest user request #{m.message.id}, verbatim")
            for m in turn.messages
            if m.pinned
        ]
    shown: list[_Shown] = []
    action_of: dict[int, Action] = {
        m.replacement_id: m.action for m in turn.messages if m.replacement_id is not None
    }
    verbatim = [
        m.message.id for m in turn.messages if m.action == "kept" and m.replacement_id is None
    ]
    if verbatim:
        shown.append(_Shown("kept", "raw, verbatim: " + ", ".join(f"#{i}" for i in verbatim)))
    for replacement in turn.replacements:
        shown.append(_replacement(replacement, action_of, raw_by_id))
    listed = {r.id for r in turn.replacements}
    elsewhere = sorted(
        {m.replacement_id for m in turn.messages if m.replacement_id is not None} - listed
    )
    for replacement_id in elsewhere:
        shown.append(
            _Shown(action_of[replacement_id], f"in replacement #{replacement_id}, shown above")
        )
    dropped = [m.message.id for m in turn.messages if m.action == "dropped"]
    if dropped:
        ids = ", ".join(f"#{i}" for i in dropped)
        shown.append(_Shown("dropped", f"nothing stands for {ids}"))
    for m in turn.messages:
        if m.pinned and m.action != "kept":
            shown.append(_Shown("kept", f"latest user request #{m.message.id}, shown verbatim"))
    return shown


def _replacement(
    replacement: ReplacementMessage,
    action_of: dict[int, Action],
    raw_by_id: dict[int, StoredMessage],
) -> _Shown:
    action = action_of.get(replacement.id or 0, "summarised")
    covers = [
        _raw_card(raw_by_id[raw_id], action) for raw_id in replacement.covers if raw_id in raw_by_id
    ]
    card = _Card(
        label=_label(None, replacement.message, f"· replacement #{replacement.id}"),
        tokens=replacement.token_count or 0,
        text_key=f"r{replacement.id}",
        action=action,
    )
    count = len(replacement.covers)
    return _Shown(
        action, f"stands for {count} raw message{'s' if count != 1 else ''}", card, covers
    )


_Built = dict[tuple[int, bool, str], _Loop]
"""The loops a page built, by their audit's identity, whether current, and their status."""


def _loop(
    loop: LoopAudit, *, is_current: bool, digested: set[int], scale: int, built: _Built
) -> _Loop:
    """A loop as a view shows it; one audit (`audit_snapshots` reuses them) is built once."""
    status = (
        "in scope" if loop.in_scope else "digest" if loop.loop.id in digested else "out of scope"
    )
    key = (id(loop), is_current, status)
    found = built.get(key)
    if found is None:
        found = built[key] = _build_loop(loop, is_current=is_current, status=status, scale=scale)
    return found


def _build_loop(loop: LoopAudit, *, is_current: bool, status: str, scale: int) -> _Loop:
    raw_by_id = {m.message.id: m.message for turn in loop.turns for m in turn.messages}
    turns = [
        _Turn(
            index=turn.turn_index,
            action=turn.action if loop.in_scope else "out",
            raw=[_raw_card(m.message, m.action, pinned=m.pinned) for m in turn.messages],
            shown=_shown(turn, raw_by_id, loop.in_scope),
            raw_tokens=turn.raw_tokens,
            context_tokens=turn.context_tokens if loop.in_scope else 0,
        )
        for turn in loop.turns
    ]
    return _Loop(
        number=loop.loop.number,
        is_current=is_current,
        status=status,
        block="no block" if loop.block is None else f"block gen {loop.block.generation}",
        raw_tokens=loop.raw_tokens,
        context_tokens=loop.context_tokens,
        raw_width=_width(loop.raw_tokens, scale),
        context_width=_width(loop.context_tokens, scale),
        turns=turns,
        created_at=when(loop.loop.created_at),
        messages=sum(len(turn.messages) for turn in loop.turns),
    )


def _width(tokens: int, scale: int) -> float:
    return round(100 * tokens / scale, 2) if scale else 0.0


def _view_label(number: int, snapshot: AuditSnapshot, numbers: LoopNumbers) -> str:
    if snapshot.as_of is None:
        return "now (latest)"
    newest = max(snapshot.blocks, key=lambda block: block.loop_id or 0)
    loop = numbers.optional(newest.loop_id)
    label = f"{number} · {when(snapshot.as_of)} · loop {loop} gen {newest.generation}"
    others = len(snapshot.blocks) - 1
    return label + (f" (+{others} earlier loop{'s' if others != 1 else ''})" if others else "")


def _view(
    index: int,
    overlay_index: int,
    label: str,
    snapshot: AuditSnapshot,
    scale: int,
    numbers: LoopNumbers,
    built: _Built,
) -> _View:
    audit = snapshot.audit
    digest = audit.digest
    folded = audit.digested_loop_ids
    digested = set(folded)
    current = audit.loops[-1].loop.id if audit.loops else None
    first_in_scope = next(
        (number for number, loop in enumerate(audit.loops) if loop.in_scope), len(audit.loops)
    )
    return _View(
        older=max(0, min(len(audit.loops) - LOOPS_SHOWN, first_in_scope)),
        index=index,
        overlay_index=overlay_index,
        label=label,
        raw_tokens=audit.raw_tokens,
        context_tokens=audit.context_tokens,
        ratio=share(audit.context_tokens, audit.raw_tokens),
        loops=[
            _loop(
                loop,
                is_current=loop.loop.id == current,
                digested=digested,
                scale=scale,
                built=built,
            )
            for loop in audit.loops
        ],
        digest=None
        if digest is None
        else _Digest(
            tokens=digest_tokens(digest),
            loops=", ".join(str(numbers(loop_id)) for loop_id in folded),
            text=digest.message.summary,
        ),
    )


def _section_of(loop: _Loop) -> str:
    """What a loop's section shows (all the template writes of it but its ids), as a key."""
    return repr(
        (
            loop.number,
            loop.is_current,
            loop.status,
            loop.block,
            loop.raw_tokens,
            loop.context_tokens,
            loop.created_at,
            loop.messages,
            loop.turns,
        )
    )


def _share(overlays: list[_Overlay], opened: _View) -> None:
    """Number each view's loop sections by what they show; write each one once in full.

    The view the page opens on holds all its sections in full (with the ids the links
    name); any other view holds a section in full only where no view before it, nor the
    opened one, holds the same: otherwise a reference the script fills from it.
    """
    numbers: dict[str, int] = {}
    of_loop: dict[int, int] = {}  # by the identity of a loop `_loop` built once, for many views

    def number_of(loop: _Loop) -> int:
        found = of_loop.get(id(loop))
        if found is None:
            found = of_loop[id(loop)] = numbers.setdefault(_section_of(loop), len(numbers))
        return found

    written = {number_of(loop) for loop in opened.loops}
    for overlay in overlays:
        for view in overlay.views:
            shared = []
            for loop in view.loops:
                number = number_of(loop)
                is_shared = view is not opened and number in written
                written.add(number)
                shared.append(replace(loop, section=number, shared=is_shared))
            view.loops[:] = shared


def _texts(snapshots: Sequence[AuditSnapshot]) -> dict[str, str]:
    """Return the text of every message the views show, by the key their cards name."""
    texts: dict[str, str] = {}
    for snapshot in snapshots:
        for loop in snapshot.audit.loops:
            for turn in loop.turns:
                for audited in turn.messages:
                    key = f"m{audited.message.id}"
                    if key not in texts:
                        texts[key] = message_text(audited.message.message)
                for replacement in turn.replacements:
                    key = f"r{replacement.id}"
                    if key not in texts:
                        texts[key] = message_text(replacement.message)
    return texts


def _printable_value(value: object) -> object:
    if not isinstance(value, str):
        return value
    # Markup (HTML already escaped) stays Markup, so it is not escaped twice.
    return type(value)(printable(value)) if hasattr(value, "__html__") else printable(value)


def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.PackageLoader("sessionstore.cli._render", "templates"),
        # Every value is escaped, whatever the template's name: message text is hostile.
        autoescape=True,
        # ... and printable: the page may be printed to a terminal (`--html -`).
        finalize=_printable_value,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def audit_page(
    session_id: str,
    snapshots: Sequence[AuditSnapshot],
    *,
    overlay: str = "default",
    generated_at: datetime,
    numbers: LoopNumbers | None = None,
) -> str:
    """Return the audit report of a session as one self-contained HTML page.

    `overlay` is the overlay the page opens on (at its latest snapshot). Loops are named
    and linked (`#loop-N`) by their number in the session: `numbers` (the CLI reads the
    session's loops), else the numbers of the loops the snapshots hold.
    """
    if numbers is None:
        numbers = LoopNumbers(loop.loop for s in snapshots for loop in s.audit.loops)
    scale = max(
        (loop.raw_tokens for s in snapshots for loop in s.audit.loops),
        default=0,
    )
    overlays: list[_Overlay] = []
    built: _Built = {}
    for index, snapshot in enumerate(snapshots):
        if not overlays or overlays[-1].name != snapshot.overlay:
            overlays.append(_Overlay(len(overlays), snapshot.overlay, []))
        current = overlays[-1]
        label = _view_label(len(current.views) + 1, snapshot, numbers)
        current.views.append(_view(index, current.index, label, snapshot, scale, numbers, built))
    if not overlays:
        raise ValueError("an audit page needs at least one snapshot")
    opened = next((o for o in overlays if o.name == overlay), overlays[0])
    _share(overlays, opened.views[-1])
    # The right pane (shown to compare) opens on another overlay, else on the generation
    # before the left pane's.
    other = next((o for o in overlays if o is not opened), None)
    right = other.views[-1] if other is not None else opened.views[max(len(opened.views) - 2, 0)]
    template = _environment().get_template("audit.html.j2")
    return template.render(
        session_id=session_id,
        overlays=overlays,
        left=opened.views[-1],
        right=right,
        texts=_texts(snapshots),
        generated_at=when(generated_at),
        actions=("kept", "truncated", "summarised", "omitted", "dropped"),
    )
