"""The read of a loop's context, written once against a source of named statements.

`_context_read.read_context` (the store's `SessionStore.read_context`, and `sessionstore
context` on a SQLite file) reads the chain a window at a time until the scope is known to
end inside it, then only what the loops in scope show, with the functions here (the
session, its loops and chain, blocks and digests). Every statement they run is named
here and run by a `Source`: the store's runs the SQLAlchemy
statement of that name (`store/_source.py`), and `_sqlite_context` runs the same
statement compiled for SQLite, as text, on the standard library's driver (a test holds
each text equal to the store's compilation). So the algorithm, the scope rule and the
rows-to-models conversion exist once, and this module imports no SQLAlchemy.

A source returns a statement's rows as the store's column types give them (aware UTC
times, decoded JSON), each readable by position and by column name.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from sessionstore._row_models import (
    block_model,
    digest_model,
    loop_model,
    replacement_from_text,
)
from sessionstore._scope import (
    grow_window,
)
from sessionstore.errors import (
    AmbiguousSessionError,
    LoopNotFoundError,
    OverlayNotFoundError,
    SessionNotFoundError,
)
from sessionstore.models import (
    MAX_INT,
    CompactedSection,
    CompactionBlock,
    LoopRecord,
    ReplacementMessage,
    SessionDigest,
    StoredMessage,
    TurnRange,
)
from sessionstore.models._batch import RecordReading
from sessionstore.models._limits import check_count, check_id, check_text
from sessionstore.models._limits import check_overlay as check_overlay_name

__all__ = [
    "DEFAULT_OVERLAY",
    "IDS_PER_STATEMENT",
    "STATEMENTS",
    "BlockMemo",
    "SessionKey",
    "Source",
    "block_rows",
    "chain",
    "chain_as_of",
    "chain_digest",
    "check_aware",
    "check_overlay",
    "check_read",
    "check_session_id",
    "chunks",
    "first",
    "key_from_tenants",
    "list_loops",
    "load_blocks",
    "loop_row",
    "newest_digest",
    "only_root",
    "resolve_loop",
    "rows_for_ids",
    "visible_session",
]

DEFAULT_OVERLAY = "default"

STATEMENTS = (
    "session",
    "session_tenants",
    "loop",
    "loops",
    "chain",
    "chain_limited",
    "root",
    "loop_stats_as_of",
    "generation_time",
    "overlay_block",
    "block_rows",
    "block_rows_as_of",
    "digest",
    "digest_as_of",
    "digest_heads",
    "digest_heads_as_of",
    "sections",
    "section_messages",
    "raw_turns",
    "raw_turns_as_of",
    "raw_loops",
    "raw_loops_as_of",
    "latest_user",
    "latest_user_as_of",
    "usage_recorded",
    "usage_messages",
    "chain_counts",
    "loop_page",
    "loop_blocks",
)
"""The statements a context read runs, by name (the parameters each takes: its callers here),
the two of a session's usage (`_usage_read`), the two of its raw history a page at a
time and a loop's every block (`_file_history.FileHistory`, for `export` and `audit`).

A parameter that is a list (`loops`, `heads`, `blocks`, `sections`) is an `IN` list
expanded when the statement runs.
"""


class Source(Protocol):
    """Runs a named statement (one of `STATEMENTS`) with parameters; returns its rows."""

    def rows(self, name: str, params: Mapping[str, Any]) -> Sequence[Any]:
        """Return every row of the statement `name` run with `params`."""
        ...

    def messages(
        self,
        name: str,
        params: Mapping[str, Any],
        session_id: str,
        reading: RecordReading | None = None,
    ) -> list[StoredMessage]:
        """Return the stored messages of a statement of the message columns, each decoded.

        For the messages a context build uses every one of (`raw_turns`, `raw_loops`).
        With `reading` (of a `RecordCache`), a message it holds is taken again, not decoded.
        """
        ...


def first(src: Source, name: str, params: Mapping[str, Any]) -> Any:
    """Return the statement's first row, or None."""
    found = src.rows(name, params)
    return found[0] if found else None


IDS_PER_STATEMENT = 5_000
"""Ids bound in one statement's `IN` list. PostgreSQL's protocol carries at most 32,767
parameters a statement (asyncpg refuses more), and a chain may hold more loops than that:
a statement about a chain's loops runs once per this many."""


def chunks(ids: Sequence[int]) -> list[list[int]]:
    """`ids` in lists of at most `IDS_PER_STATEMENT`, in order (none for no ids)."""
    return [
        list(ids[start : start + IDS_PER_STATEMENT])
        for start in range(0, len(ids), IDS_PER_STATEMENT)
    ]


def rows_for_ids(
    src: Source, name: str, params: Mapping[str, Any], list_name: str, ids: Sequence[int]
) -> list[Any]:
    """The rows of `name` with the list parameter `list_name` bound to `ids`, a chunk at a time.

    For a statement whose rows are each about one of the ids (a filter, a group by one
    of them): the chunks' rows, in the order of the chunks.
    """
    found: list[Any] = []
    for chunk in chunks(ids):
        found.extend(src.rows(name, {**params, list_name: chunk}))
    return found


@dataclass(frozen=True, slots=True)
class SessionKey:
    """A session's key, `(session_id, app_name, user_id)`: its id is unique within its tenant.

    Every row of the session carries it, and every statement about the session is
    scoped by it (`_statements.keyed`).
    """

    session_id: str
    app_name: str
    user_id: str

    @property
    def params(self) -> dict[str, str]:
        """The bind parameters of `_statements.keyed`."""
        return {"sid": self.session_id, "app": self.app_name, "user": self.user_id}

    @property
    def columns(self) -> dict[str, str]:
        """The key's columns, as a row of the session's tables holds them."""
        return {"session_id": self.session_id, "app_name": self.app_name, "user_id": self.user_id}


def key_from_tenants(session_id: str, rows: Sequence[Sequence[Any]]) -> SessionKey:
    """The key of `session_id` from its tenants' rows (`session_tenants`: at most two)."""
    if not rows:
        raise SessionNotFoundError(session_id)
    if len(rows) > 1:
        raise AmbiguousSessionError(session_id)
    return SessionKey(session_id, rows[0][0], rows[0][1])


def check_aware(moment: datetime | None) -> None:
    """Refuse a naive `as_of` datetime."""
    if moment is not None and moment.tzinfo is None:
        raise ValueError("as_of must be an aware datetime")


def check_session_id(session_id: str) -> None:
    """Refuse a session id that is not text or not valid Unicode (it cannot be sent)."""
    if not isinstance(session_id, str):
        raise TypeError(f"session_id must be a str, got {type(session_id).__name__}")
    check_text(session_id, "session_id")


def check_read(
    *, budget: int, loop_id: int | None, overlay: str, as_of: datetime | int | None
) -> None:
    """Refuse the arguments of a context read that no statement should see."""
    if budget < 1:
        raise ValueError("budget must be at least 1")
    if isinstance(as_of, datetime):
        check_aware(as_of)
    else:
        check_count(as_of, "as_of", low=-MAX_INT - 1)  # a generation: a 32-bit column
    check_id(loop_id, "loop_id")
    check_overlay_name(overlay)


# ── sessions and loops ─────────────────────────────────────────────────────────


def visible_session(src: Source, key: SessionKey) -> Any:
    """Return the session's row; raise `SessionNotFoundError` if there is none."""
    row = first(src, "session", key.params)
    if row is None:
        raise SessionNotFoundError(key.session_id)
    return row


def loop_row(src: Source, key: SessionKey, loop_id: int) -> Any:
    """Return a loop's row; raise `LoopNotFoundError` if it is not a loop of the session."""
    row = first(src, "loop", {"lid": loop_id, **key.params})
    if row is None:
        raise LoopNotFoundError(loop_id, session_id=key.session_id)
    return row


def resolve_loop(src: Source, key: SessionKey, loop_id: int | None) -> int | None:
    """Return `loop_id` (checked to be in the session) or the session's active loop."""
    session = visible_session(src, key)
    if loop_id is None:
        return session.active_loop_id  # type: ignore[no-any-return]  # a nullable int column
    loop_row(src, key, loop_id)
    return loop_id


def list_loops(src: Source, key: SessionKey) -> list[LoopRecord]:
    """Return every loop of a session, in order of creation."""
    return [loop_model(row) for row in src.rows("loops", key.params)]


def chain(src: Source, key: SessionKey, head: int, limit: int | None) -> list[LoopRecord]:
    """Return the chain of loops ending at `head`, root first (the newest `limit` of them)."""
    # A window grown past what a chain can hold reads the whole chain; the query's hop
    # counter is 32-bit on PostgreSQL.
    if limit is not None:
        limit = min(limit, MAX_INT)
    params = {"head": head, "limit": limit, **key.params}
    rows = src.rows("chain_limited" if limit is not None else "chain", params)
    return [loop_model(row) for row in rows]


def chain_as_of(
    src: Source, key: SessionKey, head: int, limit: int | None, as_of: datetime | None
) -> tuple[list[LoopRecord], bool]:
    """Return the newest `limit` loops of the chain (root first) and whether that is all.

    With `as_of`, loops created later are skipped, so the chain ends at the newest
    ancestor of `head` that existed then, and each loop's counters are as they were.
    """

    def attempt(fetch: int | None) -> tuple[list[LoopRecord], bool] | None:
        loops = chain(src, key, head, fetch)
        complete = fetch is None or len(loops) < fetch or loops[0].parent_loop_id is None
        if as_of is not None:
            loops = [loop for loop in loops if loop.created_at <= as_of]
        if limit is None or len(loops) > limit or complete:
            return loops, limit is None or len(loops) <= limit
        return None

    if limit is None:
        found = attempt(None)
        assert found is not None  # an unlimited read is always complete
        loops, complete = found
    else:
        # One loop more than asked, so a full read proves the chain goes on.
        loops, complete = grow_window(limit + 1, attempt)
    if not complete:
        loops = loops[len(loops) - (limit or 0) :]
    if as_of is not None:
        loops = _loops_as_of(src, key, loops, as_of)
    return loops, complete


def only_root(src: Source, key: SessionKey, moment: datetime | None) -> LoopRecord | None:
    """Return the session's one root loop, or None when it has several (or `moment` is set).

    A chain's first loop is the root it ends at. A session with one root (no chain was
    started anew) needs no walk of a long chain to find it: one probe of the parent index,
    so a resume stays flat in the chain's length. Otherwise the caller walks the chain.
    """
    if moment is not None:
        return None  # the counters as of then: the walk reads them
    rows = src.rows("root", key.params)
    return loop_model(rows[0]) if len(rows) == 1 else None


def _loops_as_of(
    src: Source, key: SessionKey, loops: list[LoopRecord], as_of: datetime
) -> list[LoopRecord]:
    """Return the loops with their cached counters as they were at `as_of`."""
    if not loops:
        return loops
    params = {**key.params, "t": as_of}
    found = rows_for_ids(src, "loop_stats_as_of", params, "loops", [loop.id for loop in loops])
    stats = {row[0]: row[1:] for row in found}
    result = []
    for loop in loops:
        count, tokens, last_turn = stats.get(loop.id, (0, 0, None))
        closed = loop.closed_at if loop.closed_at and loop.closed_at <= as_of else None
        changes = {
            "message_count": count,
            "token_total": int(tokens),
            "turn_count": 0 if last_turn is None else last_turn + 1,
            "closed_at": closed,
        }
        result.append(loop.model_copy(update=changes))
    return result


# ── blocks and digests ─────────────────────────────────────────────────────────


BlockMemo = dict[tuple[int, bool], CompactionBlock]
"""Blocks already loaded, by block id and whether with their replacement messages.

A block's rows are never updated (the database refuses it), so a reader that keeps one
read transaction may load each block once for all its reads (`FileHistory`'s audit)."""


def load_blocks(
    src: Source,
    key: SessionKey,
    rows: Sequence[Any],
    *,
    messages: bool = True,
    memo: BlockMemo | None = None,
) -> list[CompactionBlock]:
    """Return the blocks of block rows, with their sections (and replacement messages).

    With `memo`, only the blocks not in it are read, and they are added to it.
    """
    if memo is not None:
        missing = [row for row in rows if (row.id, messages) not in memo]
        loaded = load_blocks(src, key, missing, messages=messages)
        for row, block in zip(missing, loaded, strict=True):
            memo[row.id, messages] = block
        return [memo[row.id, messages] for row in rows]
    if not rows:
        return []
    section_rows = rows_for_ids(src, "sections", key.params, "blocks", [row.id for row in rows])
    replacements: dict[int, list[ReplacementMessage]] = {s.id: [] for s in section_rows}
    if section_rows and messages:
        # A section's messages come in one chunk, in position order.
        for row in rows_for_ids(
            src, "section_messages", key.params, "sections", list(replacements)
        ):
            replacements[row.section_id].append(replacement_from_text(row))
    by_block: dict[int, dict[str, CompactedSection]] = {}
    for section in section_rows:
        by_block.setdefault(section.block_id, {})[section.kind] = CompactedSection(
            range=TurnRange(start_turn=section.start_turn, end_turn=section.end_turn),
            messages=replacements[section.id],
        )
    return [block_model(row, by_block.get(row.id, {})) for row in rows]


def block_rows(
    src: Source,
    key: SessionKey,
    loop_ids: Sequence[int],
    overlay: str,
    as_of: datetime | None,
) -> dict[int, Any]:
    """Return the row of the newest block of each loop for `overlay` (written by `as_of`)."""
    if not loop_ids:
        return {}
    params: dict[str, Any] = {**key.params, "overlay": overlay}
    if as_of is not None:
        params["t"] = as_of
    name = "block_rows_as_of" if as_of is not None else "block_rows"
    newest: dict[int, Any] = {}
    for row in rows_for_ids(src, name, params, "loops", loop_ids):
        if row.loop_id not in newest or row.generation > newest[row.loop_id].generation:
            newest[row.loop_id] = row
    return newest


def current_blocks(
    src: Source,
    key: SessionKey,
    loops: Sequence[LoopRecord],
    overlay: str,
    as_of: datetime | None,
    *,
    messages: bool,
    memo: BlockMemo | None = None,
) -> dict[int, CompactionBlock]:
    """Return the newest block of each loop for `overlay` (written by `as_of`), by loop id."""
    rows = block_rows(src, key, [loop.id for loop in loops], overlay, as_of)
    loaded = load_blocks(src, key, list(rows.values()), messages=messages, memo=memo)
    return {block.loop_id: block for block in loaded if block.loop_id is not None}


def newest_digest(
    src: Source,
    key: SessionKey,
    overlay: str,
    head_ids: Sequence[int] | None,
    as_of: datetime | None,
) -> SessionDigest | None:
    """Return the newest digest of `overlay` written at one of `head_ids` (None: any loop)."""
    params: dict[str, Any] = {**key.params, "overlay": overlay}
    if as_of is not None:
        params["t"] = as_of
    suffix = "_as_of" if as_of is not None else ""
    if head_ids is None:
        row = first(src, "digest" + suffix, params)
    else:
        # The newest of each chunk's newest (the statement takes the highest id).
        found = rows_for_ids(src, "digest_heads" + suffix, params, "heads", head_ids)
        row = max(found, key=lambda candidate: candidate.id, default=None)
    return None if row is None else digest_model(row)


DIGEST_WINDOW = 64
"""The chain's newest loops `chain_digest` reads first (then eight times more each try)."""


def chain_digest(
    src: Source,
    key: SessionKey,
    head: int,
    overlay: str,
    as_of: datetime | None,
    *,
    reach: Sequence[int] = (),
) -> tuple[SessionDigest | None, list[LoopRecord], bool]:
    """Return the chain's newest digest, its newest loops, and whether they are all of it.

    The chain's digest is the newest written at one of its loops (by `as_of`). The loops
    returned end at `head` and hold the digest's `through_loop_id` and every loop of
    `reach` on the chain (or are the whole chain). The session's newest digest is looked
    at first: written at one of the chain's newest loops, as every compaction of a chain
    that did not branch writes it, it is the chain's, and only the loops back to the last
    it folds are read, however long the chain. When it is another branch's, the window
    grows to the whole chain. When the session has no digest of `overlay`, nothing is
    read: `(None, [], False)`.
    """
    newest = newest_digest(src, key, overlay, None, as_of)
    if newest is None:
        return None, [], False
    wanted = {newest.head_loop_id, newest.through_loop_id, *reach}
    limit = DIGEST_WINDOW
    while True:
        loops, complete = chain_as_of(src, key, head, limit, as_of)
        ids = {loop.id for loop in loops}
        if wanted <= ids:
            return newest, loops, complete
        if complete:
            if newest.head_loop_id in ids:
                return newest, loops, True
            return newest_digest(src, key, overlay, list(ids), as_of), loops, True
        limit *= 8


def check_overlay(src: Source, key: SessionKey, overlay: str) -> None:
    """Refuse an overlay name that no block or digest of the session carries.

    `default` is always valid: a session never compacted shows its raw messages.
    """
    if overlay == DEFAULT_OVERLAY:
        return
    if first(src, "overlay_block", {**key.params, "overlay": overlay}) is None:
        raise OverlayNotFoundError(overlay, session_id=key.session_id)
