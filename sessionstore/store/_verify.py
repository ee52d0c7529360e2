"""Units of work that check stored data against its invariants, one session at a time.

`SessionStore.verify` runs `verify_session` for each session in its own read transaction
(one consistent snapshot per session, bounded memory). It recomputes what the store
computed when it wrote: each message's content hash and turn, each loop's positions and
counters, the chain of loops, and each block's ranges and provenance. The database's
triggers refuse the edits that break these; `verify` finds what got past them (a trigger
dropped, a restored backup, a bug).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError
from sqlalchemy import Connection, select

from sessionstore._turns import TurnAssigner
from sessionstore.errors import InvalidBlockError
from sessionstore.models import (
    CompactionBlock,
    IntegrityCheck,
    IntegrityProblem,
    LoopRecord,
    content_hash,
    message_payload,
)
from sessionstore.store import _statements as sql
from sessionstore.store._blocks import load_blocks, validate_block
from sessionstore.store._reads import loop_messages
from sessionstore.store._sessions import SessionKey, Tenant, list_loops

__all__ = ["Findings", "session_keys", "verify_session"]


@dataclass(slots=True)
class Findings:
    """What one session's check counted and found."""

    key: SessionKey
    loops: int = 0
    messages: int = 0
    blocks: int = 0
    problems: list[IntegrityProblem] = field(default_factory=list)

    def add(self, check: IntegrityCheck, detail: str, **where: int | None) -> None:
        """Record a problem."""
        self.problems.append(
            IntegrityProblem(check=check, session_id=self.key.session_id, detail=detail, **where)
        )


def session_keys(db: Connection, tenant: Tenant | None) -> list[SessionKey]:
    """Return the keys of the sessions to check (the tenant's, on a tenant handle)."""
    columns = sql.sessions.c
    stmt = select(columns.id, columns.app_name, columns.user_id).order_by(
        columns.created_at, columns.id, columns.app_name, columns.user_id
    )
    if tenant is not None:
        stmt = stmt.where(*sql.TENANT_WHERE)
    rows = db.execute(stmt, tenant.params if tenant is not None else {}).all()
    return [SessionKey(*row) for row in rows]


def verify_session(db: Connection, *, key: SessionKey) -> Findings:
    """Check one session (see the module's docstring); a session deleted since is empty."""
    found = Findings(key)
    session = db.execute(sql.SELECT_SESSION, key.params).first()
    if session is None:
        return found
    loops = list_loops(db, key)
    found.loops = len(loops)
    _check_chain(found, session, loops)
    for loop in loops:
        _check_loop(db, found, loop)
    _check_blocks(db, found, {loop.id: loop for loop in loops})
    return found


def _check_chain(found: Findings, session: Any, loops: list[LoopRecord]) -> None:
    if session.loop_count != len(loops):
        found.add("counters", f"the session counts {session.loop_count} loops but has {len(loops)}")
    sequences = [loop.sequence for loop in loops]
    if sequences != list(range(len(loops))):
        found.add("loops", f"loop sequence numbers are {sequences}, not 0..{len(loops) - 1}")
    by_id = {loop.id: loop for loop in loops}
    active = session.active_loop_id
    if active is None and loops:
        found.add("loops", "the session has loops but no active loop")
    elif active is not None and active not in by_id:
        found.add("loops", f"the active loop {active} is not a loop of the session")
    for loop in loops:
        parent = loop.parent_loop_id
        if parent is not None and parent not in by_id:
            found.add("loops", f"parent loop {parent} is not in the session", loop_id=loop.id)
            continue
        depth = 0 if parent is None else by_id[parent].depth + 1
        if loop.depth != depth:
            found.add("loops", f"depth is {loop.depth}, expected {depth}", loop_id=loop.id)


def _check_loop(db: Connection, found: Findings, loop: LoopRecord) -> None:
    stored = loop_messages(db, found.key, loop.id, None)
    found.messages += len(stored)
    positions = [message.position for message in stored]
    if positions != list(range(len(stored))):
        missing = sorted(set(range(max(positions, default=-1) + 1)) - set(positions))
        doubled = sorted({p for p in positions if positions.count(p) > 1})
        found.add(
            "positions",
            f"positions are not 0..{len(stored) - 1}: missing {missing[:10]}, "
            f"duplicated {doubled[:10]}",
            loop_id=loop.id,
        )
    if loop.message_count != len(stored):
        found.add(
            "counters",
            f"the loop counts {loop.message_count} messages but has {len(stored)}",
            loop_id=loop.id,
        )
    tokens = sum(message.token_count for message in stored)
    if loop.token_total != tokens:
        found.add(
            "counters",
            f"the loop's token total is {loop.token_total}, its messages hold {tokens}",
            loop_id=loop.id,
        )
    assigner: TurnAssigner | None = TurnAssigner()
    for item in stored:
        try:
            message = item.message
        except (ValidationError, ValueError) as exc:
            found.add(
                "payload",
                f"the message cannot be read: {type(exc).__name__}",
                loop_id=loop.id,
                message_id=item.id,
            )
            assigner = None  # the turns after it cannot be recomputed
            continue
        if content_hash(message_payload(message)) != item.content_hash:
            found.add(
                "hash",
                "the content does not match its content_hash (the message was rewritten)",
                loop_id=loop.id,
                message_id=item.id,
            )
        if assigner is not None:
            turn = assigner.assign(message)
            if turn != item.turn_index:
                found.add(
                    "turns",
                    f"turn index {item.turn_index}, expected {turn}",
                    loop_id=loop.id,
                    message_id=item.id,
                )
    if assigner is None:
        return
    if loop.turn_count != assigner.next_turn:
        found.add(
            "counters",
            f"the loop counts {loop.turn_count} turns but its messages make {assigner.next_turn}",
            loop_id=loop.id,
        )
    row = db.execute(sql.SELECT_LOOP_STATE, {"lid": loop.id, **found.key.params}).one()
    if sorted(row.open_tool_call_ids) != sorted(assigner.open_call_ids):
        found.add(
            "counters",
            "the loop's open tool call ids do not match its last turn",
            loop_id=loop.id,
        )


def _check_blocks(db: Connection, found: Findings, loops: dict[int, LoopRecord]) -> None:
    stmt = select(sql.blocks).where(*sql.keyed(sql.blocks))
    rows = db.execute(stmt, found.key.params).all()
    found.blocks = len(rows)
    newest: dict[tuple[int, str], int] = {}
    for row in rows:
        key = (row.loop_id, row.overlay)
        newest[key] = max(newest.get(key, 0), row.generation)
    for row in rows:
        where: dict[str, int | None] = {"loop_id": row.loop_id, "block_id": row.id}
        loop = loops.get(row.loop_id)
        if loop is None:
            found.add("provenance", "the block's loop is not a loop of the session", **where)
            continue
        try:
            (block,) = load_blocks(db, found.key, [row])
            validate_block(db, found.key, loop.id, loop.turn_count, block)
        except (InvalidBlockError, ValidationError, ValueError) as exc:
            detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            found.add("provenance", detail, **where)
            continue
        if row.generation == newest[row.loop_id, row.overlay]:  # what contexts show
            _check_joined_after(db, found, block, row.created_at, where)


def _check_joined_after(
    db: Connection, found: Findings, block: CompactionBlock, written: Any, where: dict[str, Any]
) -> None:
    """Find the results that joined a covered turn, for a call it was waiting for.

    A tool result joins an open turn (`TurnAssigner`). A block written by a version that
    let a compaction cover a turn whose call had no result yet does not stand for the
    result that came after, and no context shows it. (A later result for no waiting call
    is an orphan, which the context leaves out whether its turn is covered or not.) A
    compaction after the next turn has started covers the turn whole.
    """
    ranges = block.turn_ranges()
    if not ranges or block.loop_id is None:
        return
    columns = sql.messages.c
    stmt = select(columns.id).where(
        *sql.keyed(sql.messages),
        columns.loop_id == block.loop_id,
        columns.turn_index <= max(r.end_turn for r in ranges),
        columns.created_at > written,
        columns.kind == "tool_result",
    )
    late = set(db.execute(stmt, found.key.params).scalars())
    if not late:
        return
    turns: dict[int, list[Any]] = {}
    for message in loop_messages(db, found.key, block.loop_id, None):
        turns.setdefault(message.turn_index, []).append(message)
    for turn, stored in sorted(turns.items()):
        if not any(turn in r for r in ranges) or not late.intersection(m.id for m in stored):
            continue
        opener = stored[0].message
        calls = {call.id for call in opener.tool_calls} if opener.kind == "assistant" else set()
        answered = {
            m.message.tool_call_id
            for m in stored
            if m.message.kind == "tool_result" and m.created_at <= written
        }
        for joined in stored:
            if joined.id in late and joined.message.tool_call_id in calls - answered:
                found.add(
                    "provenance",
                    f"message {joined.id}, the result of call "
                    f"{joined.message.tool_call_id!r}, joined turn {turn} after the block "
                    "covered it: no section stands for it and no context shows it; "
                    "compact again once another turn has started",
                    message_id=joined.id,
                    **where,
                )
