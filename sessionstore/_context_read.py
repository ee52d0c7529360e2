"""The read of a loop's context: the scope's windows, then only what the loops in scope show.

`read_context` is what the store's `SessionStore.read_context` runs, and `sessionstore
context` on a SQLite file: the same function on the same named statements, through a
`Source` (see `_context_source`, which holds the statements' names and the reads of
sessions, loops, chains, blocks and digests this builds on). No SQLAlchemy here.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sessionstore._context_source import (
    SessionKey,
    Source,
    block_rows,
    chain_as_of,
    check_overlay,
    first,
    load_blocks,
    newest_digest,
    only_root,
    resolve_loop,
)
from sessionstore._items import ContextSources, LoopSource
from sessionstore._row_models import block_model, stored_model
from sessionstore._scope import (
    ChainEntry,
    compacted_left_out,
    grow_window,
    loop_context_tokens,
    loops_shown,
    recorded_scope,
    resolve_scope,
    scope_window,
)
from sessionstore.config import CompactionScope, TokenBudget
from sessionstore.errors import BlockNotFoundError
from sessionstore.models import (
    CompactionBlock,
    LoopRecord,
    SessionDigest,
    StoredMessage,
    SystemMessage,
    TurnRange,
)
from sessionstore.models._batch import RecordCache, RecordReading, paused_gc

__all__ = ["blocks_of", "read_context", "scoped_chain"]


def _as_of_time(
    src: Source, key: SessionKey, head: int, overlay: str, as_of: datetime | int | None
) -> datetime | None:
    """Return `as_of` as a time: a generation of the head's block is read as its write time."""
    if as_of is None or isinstance(as_of, datetime):
        return as_of
    params = {**key.params, "lid": head, "overlay": overlay, "generation": as_of}
    row = first(src, "generation_time", params)
    if row is None:
        raise BlockNotFoundError(f"loop {head} has no generation {as_of} of overlay {overlay!r}")
    return row.created_at  # type: ignore[no-any-return]


def scoped_chain(
    src: Source,
    key: SessionKey,
    head: int,
    *,
    scope: CompactionScope | None,
    budget: int,
    overlay: str,
    moment: datetime | None,
    summary_cap: int | None = None,
) -> tuple[list[ChainEntry], int, bool, CompactionScope, dict[int, Any]]:
    """Read the chain a window at a time until the scope ends inside it.

    Returns the chain read (root first, with block headers: a block without its
    sections, which the scope rule does not look at), how many loops before the head
    take part, whether the chain read is the whole chain, the scope used (`scope`, or
    the one the head's current block was compacted with), and the block rows read, by
    loop id, so the caller loads the sections of the loops in scope without reading
    their blocks again.
    """
    read: dict[int, tuple[list[ChainEntry], bool]] = {}
    rows: dict[int, Any] = {}

    def window(size: int) -> tuple[list[ChainEntry], bool]:
        # A window read once is not read again (the recorded scope's first read is reused).
        if size not in read:
            loops, complete = chain_as_of(src, key, head, size, moment)
            _read_block_rows(src, key, [loop.id for loop in loops], rows, overlay, moment)
            headers = [(loop, rows[loop.id]) for loop in loops]
            read[size] = (
                [(loop, None if row is None else block_model(row, {})) for loop, row in headers],
                complete,
            )
        return read[size]

    chosen = scope
    if chosen is None:
        # The head's current block says which scope it was compacted with; it is in the
        # window the default scope reads, which is usually the window needed anyway.
        entries, _ = window(scope_window(recorded_scope(None)))
        chosen = recorded_scope(next((b for loop, b in entries if loop.id == head), None))
    final = chosen

    def attempt(size: int) -> tuple[list[ChainEntry], int, bool] | None:
        entries, complete = window(size)
        earlier = resolve_scope(entries, final, budget, summary_cap=summary_cap)
        if earlier < len(entries) - 1 or complete:
            return entries, earlier, complete
        return None

    entries, earlier, complete = grow_window(scope_window(final), attempt)
    return entries, earlier, complete, final, rows


def _read_block_rows(
    src: Source,
    key: SessionKey,
    loop_ids: Sequence[int],
    rows: dict[int, Any],
    overlay: str,
    moment: datetime | None,
) -> None:
    """Add the current block row (None: no block) of each loop not read yet to `rows`."""
    fresh = [loop_id for loop_id in loop_ids if loop_id not in rows]
    found = block_rows(src, key, fresh, overlay, moment)
    rows.update((loop_id, found.get(loop_id)) for loop_id in fresh)


def blocks_of(
    src: Source,
    key: SessionKey,
    loops: Sequence[LoopRecord],
    rows: dict[int, Any],
    overlay: str,
    moment: datetime | None,
    *,
    messages: bool,
) -> dict[int, CompactionBlock]:
    """Return the current blocks of `loops` with their sections, from the rows already read."""
    _read_block_rows(src, key, [loop.id for loop in loops], rows, overlay, moment)
    wanted = [row for row in (rows[loop.id] for loop in loops) if row is not None]
    loaded = load_blocks(src, key, wanted, messages=messages)
    return {block.loop_id: block for block in loaded if block.loop_id is not None}


@paused_gc()  # the records of every loop in scope survive the read, for the build
def read_context(
    src: Source,
    key: SessionKey,
    *,
    scope: CompactionScope | None,
    budget: int,
    loop_id: int | None,
    overlay: str,
    as_of: datetime | int | None,
    new_overlay: bool = False,
    records: RecordCache | None = None,
) -> ContextSources:
    """Read what the loader needs to build a loop's context (see `SessionStore.read_context`).

    With `records`, the raw messages go through it (`RecordCache`): those it holds from
    the last read are taken again, and it keeps this read's when the read is done.
    """
    # Imported here: it pulls the trimming code, which a call that builds no context (a
    # listing) never needs at start.
    from sessionstore._overlay import segments

    head = resolve_loop(src, key, loop_id)
    if not new_overlay:
        check_overlay(src, key, overlay)
    if head is None:
        return ContextSources([], None, None)
    moment = _as_of_time(src, key, head, overlay, as_of)
    entries, earlier, complete, used, rows = scoped_chain(
        src, key, head, scope=scope, budget=budget, overlay=overlay, moment=moment
    )
    if not entries:
        return ContextSources([], None, moment, used)
    in_scope = [loop for loop, _ in entries[len(entries) - earlier - 1 :]]
    digest, after = _digest_and_loops_after(
        src, key, head, [loop for loop, _ in entries], complete, overlay, moment
    )
    # The digest stands for its loops; every loop after them is shown (they were in
    # scope when it was written, or have come since).
    in_scope = list(loops_shown(used, in_scope, after if digest is not None else None))
    left_out = 0
    if isinstance(used, TokenBudget) and digest is None and len(entries) > earlier + 1:
        left_out = loop_context_tokens(*entries[len(entries) - earlier - 2])
    whole: list[LoopRecord] | None = [loop for loop, _ in entries] if complete else None

    def whole_chain() -> list[LoopRecord]:
        """The whole chain, root first, read once and only when the window did not hold it."""
        nonlocal whole
        if whole is None:
            whole, _ = chain_as_of(src, key, head, None, moment)
        return whole

    root: LoopRecord | None = None
    if in_scope and in_scope[0].parent_loop_id is not None:
        root = (whole[0] if whole is not None else None) or only_root(src, key, moment)
        if root is None:
            root = whole_chain()[0]
        if isinstance(used, TokenBudget) and digest is None:
            # No digest stands for the loops the budget left out: the chain's first loop,
            # which holds the session's task, stays in (the trimmer shortens it, last).
            # When the current loop alone fills the budget, so do the newest compacted
            # loops of the window read (`compacted_left_out`): their summaries stand for
            # them, where they vanished between the task and the current loop.
            compacted = compacted_left_out(entries, earlier)
            compacted = [loop for loop in compacted if loop.id != root.id]
            if compacted and compacted[-1] is entries[len(entries) - earlier - 2][0]:
                left_out = 0  # the newest loop left out is in after all: loaded, counted
            in_scope = [root, *compacted, *in_scope]
            root = None
    blocks = blocks_of(src, key, in_scope, rows, overlay, moment, messages=True)
    reading = None if records is None else records.reading()
    # A loop without a block shows all its turns raw: those loops are read together.
    unblocked = _raw_loops(
        src, key, [loop.id for loop in in_scope if loop.id not in blocks], moment, reading
    )
    sources = []
    for loop in in_scope:
        block = blocks.get(loop.id)
        raw: Sequence[StoredMessage] = []
        if block is None:
            raw = unblocked.get(loop.id, ())
        else:
            raw = [
                stored
                for turns, kind in segments(loop.turn_count, block)
                if kind == "raw"
                for stored in _raw_turns(src, key, loop.id, turns, moment, reading)
            ]
        sources.append(LoopSource(loop, block, raw))
    newest = [loop.id for loop, _ in reversed(entries)]
    latest = _latest_user(src, key, newest, moment)
    if latest is None and not complete:
        known = set(newest)
        older = [loop.id for loop in reversed(whole_chain()) if loop.id not in known]
        latest = _latest_user(src, key, older, moment)
    system = [] if root is None else _system_prompt(src, key, root, moment, reading)
    if records is not None and reading is not None:
        records.keep(reading)
    return ContextSources(sources, latest, moment, used, digest, left_out, system)


def _system_prompt(
    src: Source,
    key: SessionKey,
    root: LoopRecord,
    moment: datetime | None,
    reading: RecordReading | None = None,
) -> list[StoredMessage]:
    """Return the system messages that open the chain's first loop (its system prompt)."""
    if root.turn_count == 0:
        return []
    found: list[StoredMessage] = []
    first_turn = TurnRange(start_turn=0, end_turn=0)
    for stored in _raw_turns(src, key, root.id, first_turn, moment, reading):
        if not isinstance(stored.message, SystemMessage):
            break
        found.append(stored)
    return found


def _digest_and_loops_after(
    src: Source,
    key: SessionKey,
    head: int,
    window: list[LoopRecord],
    complete: bool,
    overlay: str,
    moment: datetime | None,
) -> tuple[SessionDigest | None, list[LoopRecord]]:
    """Return the chain's newest digest and the loops after the ones it folds.

    A digest is the chain's when the loop that was current when it was written is in
    the chain. The window read for the scope is searched first; a longer chain is read
    whole only when the session has digests of this overlay and none is in the window.
    """
    digest = newest_digest(src, key, overlay, [loop.id for loop in window], moment)
    loops = window
    if digest is None and not complete:
        if newest_digest(src, key, overlay, None, moment) is None:
            return None, []
        loops, _ = chain_as_of(src, key, head, None, moment)
        digest = newest_digest(src, key, overlay, [loop.id for loop in loops], moment)
    if digest is None:
        return None, []
    ids = [loop.id for loop in loops]
    if digest.through_loop_id not in ids:
        loops, _ = chain_as_of(src, key, head, None, moment)
        ids = [loop.id for loop in loops]
    return digest, loops[ids.index(digest.through_loop_id) + 1 :]


def _raw_turns(
    src: Source,
    key: SessionKey,
    loop_id: int,
    turns: TurnRange,
    as_of: datetime | None,
    reading: RecordReading | None = None,
) -> list[StoredMessage]:
    """The raw messages of a loop's turns (written by `as_of`), in order, decoded."""
    params: dict[str, Any] = {
        **key.params,
        "lid": loop_id,
        "a": turns.start_turn,
        "b": turns.end_turn,
    }
    if as_of is None:
        return src.messages("raw_turns", params, key.session_id, reading)
    return src.messages("raw_turns_as_of", {**params, "t": as_of}, key.session_id, reading)


_LOOPS_PER_STATEMENT = 500
"""Loop ids bound in one statement (under every driver's parameter limit)."""


def _raw_loops(
    src: Source,
    key: SessionKey,
    loop_ids: Sequence[int],
    as_of: datetime | None,
    reading: RecordReading | None = None,
) -> dict[int, list[StoredMessage]]:
    """Every message row of these loops (written by `as_of`), by loop, in order.

    What `_raw_turns` reads of a loop without a block (all its turns; a loop holds no
    turn past its count), for many loops in a statement rather than one a loop: a
    resume of hundreds of short loops (a chat, each request a loop) sent a statement
    for each.
    """
    found: dict[int, list[StoredMessage]] = {}
    name = "raw_loops" if as_of is None else "raw_loops_as_of"
    for start in range(0, len(loop_ids), _LOOPS_PER_STATEMENT):
        params: dict[str, Any] = {
            **key.params,
            "loops": list(loop_ids[start : start + _LOOPS_PER_STATEMENT]),
        }
        if as_of is not None:
            params["t"] = as_of
        for stored in src.messages(name, params, key.session_id, reading):
            found.setdefault(stored.loop_id, []).append(stored)
    return found


def _latest_user(
    src: Source, key: SessionKey, loop_ids: Sequence[int], as_of: datetime | None
) -> StoredMessage | None:
    """Return the newest raw user message of these loops (newest loop first)."""
    for loop_id in loop_ids:
        params: dict[str, Any] = {**key.params, "lid": loop_id}
        if as_of is None:
            row = first(src, "latest_user", params)
        else:
            row = first(src, "latest_user_as_of", {**params, "t": as_of})
        if row is not None:
            return stored_model(row, key.session_id)
    return None
