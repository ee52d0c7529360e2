"""Rows to models, shared by the store and the read of a SQLite file without SQLAlchemy.

A row here is any sequence whose values are what the store's column types give on the
way out (aware UTC times, decoded JSON, payloads as JSON text where a statement casts
them), with its columns also readable by name (a SQLAlchemy `Row`, or the named tuples
`_sqlite_context` makes). This module imports no SQLAlchemy: `sessionstore context` on a
SQLite file builds its models here without loading it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sessionstore.models import (
    MESSAGE_ADAPTER,
    CompactedSection,
    CompactionBlock,
    CompactionSummaryMessage,
    LoopRecord,
    ReplacementMessage,
    SessionDigest,
    StoredMessage,
    TurnRange,
)
from sessionstore.models._limits import STORED

__all__ = [
    "block_model",
    "digest_model",
    "loop_model",
    "replacement_from_text",
    "replacement_model",
    "stored_model",
    "stored_models",
]


def loop_model(row: Any) -> LoopRecord:
    """Build a `LoopRecord` from a row with the loop columns."""
    return LoopRecord(
        id=row.id,
        session_id=row.session_id,
        parent_loop_id=row.parent_loop_id,
        sequence=row.sequence,
        depth=row.depth,
        created_at=row.created_at,
        closed_at=row.closed_at,
        message_count=row.message_count,
        token_total=row.token_total,
        turn_count=row.turn_count,
    )


def stored_model(row: Sequence[Any], session_id: str) -> StoredMessage:
    """Build a `StoredMessage` from a row of the store's message columns, in their order."""
    # Positional unpacking: faster than attribute access on a hot path.
    message_id, loop_id, position, turn_index, tokens, digest, client_id, created_at, payload = row
    return StoredMessage._from_columns(
        message_id,
        session_id,
        loop_id,
        position,
        turn_index,
        tokens,
        digest,
        created_at,
        payload,
        client_id,
    )


def stored_models(rows: Iterable[Sequence[Any]], session_id: str) -> list[StoredMessage]:
    """Build the `StoredMessage`s of many rows (their messages decoded when first used)."""
    build = StoredMessage._from_columns
    return [
        build(message_id, session_id, loop_id, position, turn, tokens, digest, at, payload, cid)
        for message_id, loop_id, position, turn, tokens, digest, cid, at, payload in rows
    ]


def replacement_model(row: Any) -> ReplacementMessage:
    """Build a `ReplacementMessage` from a section-messages row."""
    return ReplacementMessage.model_validate(
        {
            "message": MESSAGE_ADAPTER.validate_python(row.payload, context=STORED),
            "covers": row.covers,
            "token_count": row.token_count,
            "id": row.id,
        },
        context=STORED,
    )


def replacement_from_text(row: Any) -> ReplacementMessage:
    """Build a `ReplacementMessage` from a trusted row whose payload was read as JSON text."""
    return ReplacementMessage.model_construct(
        message=MESSAGE_ADAPTER.validate_json(row.payload, context=STORED),
        covers=row.covers,
        token_count=row.token_count,
        id=row.id,
    )


def block_model(row: Any, sections: Mapping[str, CompactedSection]) -> CompactionBlock:
    """Build a `CompactionBlock` from a blocks row and its sections by kind."""
    keep_first = None
    if row.keep_first_start is not None:
        keep_first = TurnRange(start_turn=row.keep_first_start, end_turn=row.keep_first_end)
    return CompactionBlock.model_validate(
        {
            "id": row.id,
            "session_id": row.session_id,
            "loop_id": row.loop_id,
            "overlay": row.overlay,
            "generation": row.generation,
            "keep_first": keep_first,
            "keep_compacted": sections.get("compacted"),
            "keep_recent": sections.get("recent"),
            "strategy": row.strategy,
            "config": row.config,
            "tokens_before": row.tokens_before,
            "tokens_after": row.tokens_after,
            "created_at": row.created_at,
        },
        context=STORED,
    )


def digest_model(row: Any) -> SessionDigest:
    """Build a `SessionDigest` from a digests row whose `folded` was read as JSON text.

    `folded` names the loops the digest folded itself; it is decoded the first time it is
    used, which a resume never does.
    """
    digest = SessionDigest.model_construct(
        id=row.id,
        session_id=row.session_id,
        overlay=row.overlay,
        head_loop_id=row.head_loop_id,
        through_loop_id=row.through_loop_id,
        extends_id=row.extends_id,
        message=CompactionSummaryMessage.model_validate(row.payload, context=STORED),
        token_count=row.token_count,
        details=row.details,
        created_at=row.created_at,
    )
    digest._pend(row.folded)
    return digest
