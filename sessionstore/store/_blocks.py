"""Units of work on compaction blocks (overlays) and compaction events.

A block is written once, with its sections and their replacement messages, and never
changed: a newer generation for the same loop and overlay supersedes it, and the older
one stays for audit and time travel.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, func, select

from sessionstore import _context_source as source
from sessionstore._search_text import indexed_text
from sessionstore._tokens import TokenCounter
from sessionstore.errors import (
    BlockNotFoundError,
    InvalidBlockError,
    LoopChangedError,
)
from sessionstore.models import (
    CompactedSection,
    CompactionBlock,
    CompactionEvent,
    LoopRecord,
    ReplacementMessage,
    SessionDigest,
)
from sessionstore.models._limits import check_count
from sessionstore.store import _statements as sql
from sessionstore.store._messages import insert_returning_ids
from sessionstore.store._sessions import SessionKey, loop_row
from sessionstore.store._source import StoreSource
from sessionstore.store._tables import (
    event_model,
    replacement_model,
)

__all__ = [
    "DEFAULT_OVERLAY",
    "EVENT_KINDS",
    "block_rows",
    "check_event_refs",
    "check_overlay",
    "current_blocks",
    "insert_block",
    "insert_digest",
    "insert_events",
    "list_events",
    "load_blocks",
    "newest_digest",
    "replacement",
    "validate_block",
]

EVENT_KINDS = ("started", "ended")

# A `CompactionEvent`'s columns: the session's tenant columns are not part of it.
EVENT_COLUMNS = tuple(c for c in sql.events.c if c.name not in ("app_name", "user_id"))

DEFAULT_OVERLAY = source.DEFAULT_OVERLAY


def check_unchanged(
    db: Connection, key: SessionKey, loop_id: int, read_count: int, block: CompactionBlock
) -> None:
    """Refuse a block built from a loop's first `read_count` messages that missed some.

    A message appended since then in a turn the block covers (a tool result joins its
    call's turn) would not be stood for: `LoopChangedError`.
    """
    ranges = block.turn_ranges()
    if not ranges:
        return
    params = {**key.params, "lid": loop_id, "n": read_count, "t": max(r.end_turn for r in ranges)}
    if db.execute(sql.SELECT_APPENDED_INTO_TURNS, params).first() is not None:
        raise LoopChangedError(key.session_id, loop_id)


def check_settled(db: Connection, key: SessionKey, loop: Any, block: CompactionBlock) -> None:
    """Refuse a block that covers an open loop's latest turn while a call there is unanswered.

    `loop` is the loop's row, read with the session locked. The call's result, appended
    later, would join the turn (its assistant message made the call; see `TurnAssigner`)
    and no section would stand for it: no context would show it.
    """
    if loop.closed_at is not None or not loop.open_tool_call_ids:
        return
    latest = loop.turn_count - 1
    if all(span.end_turn < latest for span in block.turn_ranges()):
        return
    columns = sql.messages.c
    stmt = select(columns.tool_call_id).where(
        *sql.keyed(sql.messages),
        columns.loop_id == loop.id,
        columns.turn_index == latest,
        columns.kind == "tool_result",
    )
    answered = set(db.execute(stmt, key.params).scalars())
    waiting = sorted(set(loop.open_tool_call_ids) - answered)
    if waiting:
        raise InvalidBlockError(
            f"the block covers turn {latest}, the latest of open loop {loop.id}, where tool "
            f"call(s) {', '.join(map(repr, waiting[:5]))} have no result yet: a result "
            "appended later would join the turn and no section would stand for it. Leave "
            "the turn out of the block (compaction does) until its calls are answered"
        )


def validate_block(
    db: Connection, key: SessionKey, loop_id: int, turn_count: int, block: CompactionBlock
) -> None:
    """Refuse a block whose ranges leave the loop or overlap, or whose provenance strays."""
    block.check_ranges(loop_id, turn_count)
    covered = {i for _, s in block.sections() for r in s.messages for i in r.covers}
    if not covered:
        return
    columns = sql.messages.c
    stmt = select(columns.id, columns.turn_index).where(
        *sql.keyed(sql.messages),
        columns.loop_id == loop_id,
        columns.id.between(min(covered), max(covered)),
    )
    turn_of = {row.id: row.turn_index for row in db.execute(stmt, key.params).all()}
    foreign = sorted(covered - turn_of.keys())
    if foreign:
        shown = ", ".join(map(str, foreign[:10])) + (" ..." if len(foreign) > 10 else "")
        raise InvalidBlockError(
            f"the block's provenance names messages that are not in loop {loop_id}: {shown}"
        )
    for kind, section in block.sections():
        for item in section.messages:
            outside = [i for i in item.covers if turn_of[i] not in section.range]
            if outside:
                raise InvalidBlockError(
                    f"a keep_{kind} replacement covers messages {outside[:10]} outside its "
                    f"turn range {section.range.start_turn}..{section.range.end_turn}"
                )


def insert_block(
    db: Connection,
    counter: TokenCounter,
    key: SessionKey,
    loop_id: int,
    block: CompactionBlock,
    moment: datetime,
) -> CompactionBlock:
    """Insert a block as the next generation of its loop and overlay; return it as stored."""
    columns = sql.blocks.c
    stmt = select(func.max(columns.generation)).where(
        *sql.keyed(sql.blocks),
        columns.loop_id == loop_id,
        columns.overlay == block.overlay,
    )
    generation = (db.execute(stmt, key.params).scalar() or 0) + 1
    values = {
        **key.columns,
        "loop_id": loop_id,
        "overlay": block.overlay,
        "generation": generation,
        "keep_first_start": block.keep_first.start_turn if block.keep_first else None,
        "keep_first_end": block.keep_first.end_turn if block.keep_first else None,
        "strategy": block.strategy,
        "config": block.config,
        "tokens_before": block.tokens_before,
        "tokens_after": block.tokens_after,
        "created_at": moment,
    }
    (block_id,) = insert_returning_ids(db, sql.blocks, [values])
    stored: dict[str, CompactedSection] = {}
    for kind, section in block.sections():
        row = {
            **key.columns,
            "block_id": block_id,
            "kind": kind,
            "start_turn": section.range.start_turn,
            "end_turn": section.range.end_turn,
        }
        (section_id,) = insert_returning_ids(db, sql.sections, [row])
        stored[kind] = _insert_section_messages(db, counter, key, section_id, section)
    return block.model_copy(
        update={
            "id": block_id,
            "session_id": key.session_id,
            "loop_id": loop_id,
            "generation": generation,
            "created_at": moment,
            "keep_compacted": stored.get("compacted"),
            "keep_recent": stored.get("recent"),
        }
    )


def _insert_section_messages(
    db: Connection,
    counter: TokenCounter,
    key: SessionKey,
    section_id: int,
    section: CompactedSection,
) -> CompactedSection:
    if not section.messages:
        return section
    rows = []
    for position, item in enumerate(section.messages):
        token_count = item.token_count
        if token_count is None:
            token_count = counter.count_message(item.message)
            check_count(token_count, "token_count")  # what the token counter returned
        rows.append(
            {
                **key.columns,
                "section_id": section_id,
                "position": position,
                "kind": item.message.kind,
                "payload": item.message.model_dump(mode="json"),
                "token_count": token_count,
                "covers": sorted(set(item.covers)),
                "search_text": indexed_text(item.message),
            }
        )
    ids = insert_returning_ids(db, sql.section_messages, rows)
    stored = [
        ReplacementMessage(
            message=item.message, covers=row["covers"], token_count=row["token_count"], id=new_id
        )
        for item, row, new_id in zip(section.messages, rows, ids, strict=True)
    ]
    return section.model_copy(update={"messages": stored})


def load_blocks(
    db: Connection, key: SessionKey, rows: Sequence[Any], *, messages: bool = True
) -> list[CompactionBlock]:
    """Return the blocks of block rows, with their sections (and replacement messages)."""
    return source.load_blocks(StoreSource(db), key, rows, messages=messages)


def block_rows(
    db: Connection,
    key: SessionKey,
    loop_ids: Sequence[int],
    overlay: str,
    as_of: datetime | None,
) -> dict[int, Any]:
    """Return the row of the newest block of each loop for `overlay` (written by `as_of`)."""
    return source.block_rows(StoreSource(db), key, loop_ids, overlay, as_of)


def current_blocks(
    db: Connection,
    key: SessionKey,
    loops: Sequence[LoopRecord],
    overlay: str,
    as_of: datetime | None,
    *,
    messages: bool,
) -> dict[int, CompactionBlock]:
    """Return the newest block of each loop for `overlay` (written by `as_of`), by loop id."""
    return source.current_blocks(StoreSource(db), key, loops, overlay, as_of, messages=messages)


def replacement(db: Connection, key: SessionKey, replacement_id: int) -> ReplacementMessage | None:
    """Return one replacement message of the session by id, or None."""
    sm = sql.section_messages.c
    stmt = select(sm.id, sm.payload, sm.token_count, sm.covers).where(
        *sql.keyed(sql.section_messages), sm.id == replacement_id
    )
    row = db.execute(stmt, key.params).first()
    return None if row is None else replacement_model(row)


def check_event_refs(
    db: Connection, key: SessionKey, loop_id: int | None, block_id: int | None
) -> None:
    """Refuse an event whose loop or block is not one of the session's.

    Another session's id (another tenant's too) is refused exactly like an id that does not
    exist, with the same error and wording: an event cannot tell whether an id exists, nor
    tie this session's rows to another session's (whose deletion would cascade into them).
    """
    if loop_id is not None:
        loop_row(db, key, loop_id)
    if block_id is None:
        return
    columns = sql.blocks.c
    stmt = select(columns.id).where(columns.id == block_id, *sql.keyed(sql.blocks))
    where = f"session {key.session_id!r}"
    if loop_id is not None:
        stmt = stmt.where(columns.loop_id == loop_id)
        where = f"loop {loop_id} of {where}"
    if db.execute(stmt, key.params).first() is None:
        raise BlockNotFoundError(f"block {block_id} not found in {where}")


def insert_events(db: Connection, rows: Sequence[dict[str, Any]]) -> list[int]:
    """Insert compaction event rows and return their ids."""
    return insert_returning_ids(db, sql.events, rows) if rows else []


def list_events(db: Connection, key: SessionKey, last: int | None = None) -> list[CompactionEvent]:
    """Return a session's compaction events, oldest first (the newest `last`, if given)."""
    columns = sql.events.c
    stmt = select(*EVENT_COLUMNS).where(*sql.keyed(sql.events))
    if last is None:
        rows = db.execute(stmt.order_by(columns.id), key.params).all()
    else:
        rows = db.execute(stmt.order_by(columns.id.desc()).limit(last), key.params).all()[::-1]
    return [event_model(row._mapping) for row in rows]


# ── session digests ────────────────────────────────────────────────────────────


def insert_digest(
    db: Connection, key: SessionKey, digest: SessionDigest, moment: datetime
) -> SessionDigest:
    """Insert a session digest; return it as stored.

    Its loops are checked to be the session's, and the digest it extends one of the
    session's of the same overlay.
    """
    for loop_id in (digest.head_loop_id, digest.through_loop_id):
        loop_row(db, key, loop_id)
    if digest.extends_id is not None:
        found = db.execute(
            sql.select_digest_overlay(), {**key.params, "id": digest.extends_id}
        ).scalar()
        if found != digest.overlay:
            raise ValueError(
                f"the digest extends digest {digest.extends_id}, which is not one of the "
                f"session's digests of overlay {digest.overlay!r}"
            )
    values = {
        **key.columns,
        "overlay": digest.overlay,
        "head_loop_id": digest.head_loop_id,
        "through_loop_id": digest.through_loop_id,
        "folded": [list(pair) for pair in digest.folded],
        "extends_id": digest.extends_id,
        "payload": digest.message.model_dump(mode="json"),
        "token_count": digest.token_count,
        "details": dict(digest.details),
        "created_at": moment,
    }
    (digest_id,) = insert_returning_ids(db, sql.digests, [values])
    return digest.model_copy(
        update={"id": digest_id, "session_id": key.session_id, "created_at": moment}
    )


def newest_digest(
    db: Connection,
    key: SessionKey,
    overlay: str,
    head_ids: Sequence[int] | None,
    as_of: datetime | None,
) -> SessionDigest | None:
    """Return the newest digest of `overlay` written at one of `head_ids` (None: any loop)."""
    return source.newest_digest(StoreSource(db), key, overlay, head_ids, as_of)


def check_overlay(db: Connection, key: SessionKey, overlay: str) -> None:
    """Refuse an overlay name that no block or digest of the session carries.

    `default` is always valid: a session never compacted shows its raw messages.
    """
    source.check_overlay(StoreSource(db), key, overlay)
