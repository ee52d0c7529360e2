"""Audit: turn by turn, what happened (raw messages) against what the model sees (the overlay).

For every raw message of a loop, the loop's current block says what became of it:

| action       | meaning                                                              |
|--------------|----------------------------------------------------------------------|
| `kept`       | shown verbatim (raw, or a `keep_recent` copy identical to it)        |
| `truncated`  | shown as a `keep_recent` copy with its tool output cut               |
| `summarised` | stood for by a `keep_compacted` summary (`replacement_id` says which)|
| `omitted`    | stood for by a marker that says turns were left out of the summary   |
| `dropped`    | inside a section's range, but no replacement message covers it      |

A loop outside the scope of the context is flagged `in_scope=False`: the model sees
none of it, whatever its block says. `expand` returns the raw messages a replacement
message stands for. `audit_snapshots` audits every named overlay of the chain as it was
after each compaction (time travel), for the browser report.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, Protocol

from sessionstore._framing import digest_tokens, shown_section
from sessionstore._overlay import segments
from sessionstore._scope import (
    ChainEntry,
    compacted_left_out,
    loops_shown,
    recorded_scope,
    resolve_scope,
    token_budget_window,
)
from sessionstore.config import CompactionConfig, CompactionScope, TokenBudget, validated_config
from sessionstore.models import (
    CompactionBlock,
    LoopRecord,
    ReplacementMessage,
    SessionDigest,
    StoredMessage,
    TurnRange,
    UserMessage,
)

if TYPE_CHECKING:  # the audit reads through `AuditReader`; a SQLite file needs no store
    from sessionstore.store import SessionStore, TenantStore

__all__ = [
    "Action",
    "AuditReader",
    "AuditSnapshot",
    "AuditedMessage",
    "AuditedTurn",
    "LoopAudit",
    "SessionAudit",
    "audit_loop",
    "audit_session",
    "audit_snapshots",
    "expand",
]

Action = Literal["kept", "truncated", "summarised", "omitted", "dropped"]


class AuditReader(Protocol):
    """What an audit reads: a `SessionStore` or `TenantStore` (or the CLI's file reader)."""

    async def chain_blocks(
        self,
        session_id: str,
        *,
        loop_id: int | None = None,
        overlay: str = "default",
        as_of: datetime | None = None,
        limit: int | None = None,
    ) -> list[ChainEntry]:
        """The chain ending at `loop_id`, root first, each loop with its current block."""
        ...

    async def get_digest(
        self,
        session_id: str,
        *,
        loop_id: int | None = None,
        overlay: str = "default",
        as_of: datetime | None = None,
    ) -> SessionDigest | None:
        """The session digest the context of `loop_id` starts with."""
        ...

    async def get_messages(
        self, session_id: str, loop_id: int | None = None
    ) -> list[StoredMessage]:
        """A loop's raw messages, in order."""
        ...

    async def block_history(self, session_id: str, loop_id: int) -> list[CompactionBlock]:
        """Every block of a loop, oldest first."""
        ...


@dataclass(frozen=True, slots=True)
class AuditedMessage:
    """One raw message and what the overlay did with it."""

    message: StoredMessage
    action: Action
    replacement_id: int | None = None
    """The replacement message that stands for it, when there is one."""
    pinned: bool = False
    """True for the latest user request: the context shows it verbatim whatever the
    overlay did with its turn (its tokens count in the turn's `context_tokens`)."""


@dataclass(frozen=True, slots=True)
class AuditedTurn:
    """One turn: its raw messages, what stands for them, and the tokens of both."""

    loop_id: int
    turn_index: int
    messages: list[AuditedMessage]
    replacements: list[ReplacementMessage]
    """The replacement messages first shown for this turn (a summary covering several
    turns is listed, and counted, with the first of them)."""
    raw_tokens: int
    context_tokens: int
    """Tokens the overlay shows for this turn: raw messages kept and its replacements."""

    @property
    def action(self) -> Action | Literal["mixed"]:
        """The action of all its messages, or `mixed`."""
        actions = {m.action for m in self.messages}
        return actions.pop() if len(actions) == 1 else "mixed"


@dataclass(frozen=True, slots=True)
class LoopAudit:
    """One loop's audit under its current block."""

    loop: LoopRecord
    block: CompactionBlock | None
    turns: list[AuditedTurn]
    in_scope: bool = True
    """False when the loop is outside the scope of the context: the model sees none of it."""
    framing_tokens: int = 0
    """What showing the compacted section as one framed summary adds to (or saves on) the
    sum of its replacement messages' counts."""

    @property
    def raw_tokens(self) -> int:
        """The cached tokens of the loop's raw messages."""
        return sum(turn.raw_tokens for turn in self.turns)

    @property
    def context_tokens(self) -> int:
        """The tokens the overlay shows for the loop (out of scope: only a pinned request)."""
        if self.in_scope:
            return sum(turn.context_tokens for turn in self.turns) + self.framing_tokens
        # Out of scope the model sees nothing of the loop but a pinned latest request.
        return sum(m.message.token_count for t in self.turns for m in t.messages if m.pinned)


@dataclass(frozen=True, slots=True)
class SessionAudit:
    """A session's audit: every loop of the active chain, root first, with totals."""

    session_id: str
    overlay: str
    loops: list[LoopAudit] = field(default_factory=list)
    digest: SessionDigest | None = None
    """The session digest that stands for the loops before the scope, if any."""

    @property
    def raw_tokens(self) -> int:
        """The cached tokens of every raw message audited."""
        return sum(loop.raw_tokens for loop in self.loops)

    @property
    def context_tokens(self) -> int:
        """The tokens the overlays (and the digest) show for the loops (before any trim)."""
        shown = sum(loop.context_tokens for loop in self.loops)
        return shown + (digest_tokens(self.digest) if self.digest is not None else 0)

    @property
    def digested_loop_ids(self) -> list[int]:
        """The loops the digest stands for, root first (none without a digest).

        They are the chain's loops from the root through the digest's `through_loop_id`. A
        digest folds the loops after those of the digest it extends (`extends_id`),
        through its `through_loop_id`, and the first digest folds from the root: together,
        the chain's loops up to that one.
        """
        if self.digest is None:
            return []
        ids = [loop.loop.id for loop in self.loops]
        through = self.digest.through_loop_id
        return ids[: ids.index(through) + 1] if through in ids else []

    @property
    def ratio(self) -> float:
        """`context_tokens / raw_tokens` (0 for an empty session)."""
        return self.context_tokens / self.raw_tokens if self.raw_tokens else 0.0

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-able summary (the CLI's `--json`)."""
        return {
            "session_id": self.session_id,
            "overlay": self.overlay,
            "raw_tokens": self.raw_tokens,
            "context_tokens": self.context_tokens,
            "ratio": round(self.ratio, 4),
            "digest": None
            if self.digest is None
            else {
                "id": self.digest.id,
                "through_loop_id": self.digest.through_loop_id,
                "folded_loop_ids": self.digested_loop_ids,
                "tokens": digest_tokens(self.digest),
                "summary": self.digest.message.summary,
            },
            "loops": [
                {
                    "loop_id": loop.loop.id,
                    "in_scope": loop.in_scope,
                    "block_id": loop.block.id if loop.block else None,
                    "generation": loop.block.generation if loop.block else None,
                    "raw_tokens": loop.raw_tokens,
                    "context_tokens": loop.context_tokens,
                    "turns": [
                        {
                            "turn": turn.turn_index,
                            "action": turn.action,
                            "raw_tokens": turn.raw_tokens,
                            "context_tokens": turn.context_tokens,
                            "messages": [
                                {
                                    "id": m.message.id,
                                    "kind": m.message.message.kind,
                                    "tokens": m.message.token_count,
                                    "action": m.action,
                                    "replacement_id": m.replacement_id,
                                }
                                for m in turn.messages
                            ],
                            "replacements": [
                                {"id": r.id, "covers": r.covers, "tokens": r.token_count}
                                for r in turn.replacements
                            ],
                        }
                        for turn in loop.turns
                    ],
                }
                for loop in self.loops
            ],
        }


def _is_omission_marker(replacement: ReplacementMessage) -> bool:
    marker = replacement.message.extra.get("sessionstore")
    return isinstance(marker, dict) and "omitted_turns" in marker


def audit_loop(
    loop: LoopRecord,
    block: CompactionBlock | None,
    messages: Sequence[StoredMessage],
    *,
    in_scope: bool = True,
    pinned_id: int | None = None,
) -> LoopAudit:
    """Audit one loop's raw messages (all of them, in order) against its block. Pure.

    `pinned_id` is the latest user request's id when it is in this loop: the context
    shows it verbatim even when the overlay summarised its turn.
    """
    by_turn: dict[int, list[StoredMessage]] = {}
    for stored in messages:
        by_turn.setdefault(stored.turn_index, []).append(stored)
    turn_count = max(loop.turn_count, max(by_turn, default=-1) + 1)
    turns: list[AuditedTurn] = []
    for turn_range, kind in segments(turn_count, block):
        section = None
        if block is not None and kind != "raw":
            section = block.keep_compacted if kind == "compacted" else block.keep_recent
        covering: dict[int, ReplacementMessage] = {}
        first_turn_of: dict[int, int] = {}
        if section is not None:
            turn_of = {m.id: t for t in _turns(turn_range) for m in by_turn.get(t, ())}
            for replacement in section.messages:
                for raw_id in replacement.covers:
                    covering.setdefault(raw_id, replacement)
                shown_at = min(
                    (turn_of[i] for i in replacement.covers if i in turn_of), default=None
                )
                if replacement.id is not None:
                    first_turn_of[replacement.id] = (
                        shown_at if shown_at is not None else turn_range.start_turn
                    )
        for turn in _turns(turn_range):
            raw = by_turn.get(turn, [])
            audited = [_audit_message(stored, kind, covering.get(stored.id)) for stored in raw]
            replacements = [
                r
                for r in (section.messages if section is not None else [])
                if r.id is not None and first_turn_of.get(r.id) == turn
            ]
            audited = [replace(m, pinned=True) if m.message.id == pinned_id else m for m in audited]
            kept_raw = sum(
                m.message.token_count
                for m in audited
                if kind == "raw" or (m.pinned and m.action != "kept")
            )
            turns.append(
                AuditedTurn(
                    loop_id=loop.id,
                    turn_index=turn,
                    messages=audited,
                    replacements=replacements,
                    raw_tokens=sum(stored.token_count for stored in raw),
                    context_tokens=kept_raw + sum(r.token_count or 0 for r in replacements),
                )
            )
    framing = 0
    if block is not None and block.keep_compacted is not None:
        shown = [r.message for r in block.keep_compacted.messages]
        counted = sum(r.token_count or 0 for r in block.keep_compacted.messages)
        framing = shown_section(shown)[1] - counted
    return LoopAudit(loop=loop, block=block, turns=turns, in_scope=in_scope, framing_tokens=framing)


def _turns(turns: TurnRange) -> range:
    return range(turns.start_turn, turns.end_turn + 1)


def _audit_message(
    stored: StoredMessage, kind: str, replacement: ReplacementMessage | None
) -> AuditedMessage:
    if kind == "raw":
        return AuditedMessage(stored, "kept")
    if replacement is None:
        return AuditedMessage(stored, "dropped")
    if _is_omission_marker(replacement):
        return AuditedMessage(stored, "omitted", replacement.id)
    if kind == "recent":
        same = replacement.message == stored.message
        return AuditedMessage(stored, "kept" if same else "truncated", replacement.id)
    return AuditedMessage(stored, "summarised", replacement.id)


async def audit_session(
    store: AuditReader,
    session_id: str,
    *,
    loop_id: int | None = None,
    overlay: str = "default",
    config: CompactionConfig | dict[str, Any] | None = None,
    scope: CompactionScope | None = None,
    max_context_tokens: int = 100_000,
    as_of: datetime | None = None,
    only_loop: bool = False,
) -> SessionAudit:
    """Audit the active chain ending at `loop_id` (default: the active loop), root first.

    Loops outside the scope are flagged `in_scope=False`. The scope is `scope`, else
    `config.compaction_scope` when a config is given, else the scope the loop's current
    block was compacted with. With `only_loop`, only the loop `loop_id` is audited.
    With `as_of`, blocks and messages written later are left out.
    """
    return await _audit_session(
        store,
        session_id,
        loop_id=loop_id,
        overlay=overlay,
        config=config,
        scope=scope,
        max_context_tokens=max_context_tokens,
        as_of=as_of,
        only_loop=only_loop,
        reused=None,
    )


_LoopKey = tuple[object, ...]
"""What a loop's audit is made of (`_loop_key`): equal keys, equal audits."""


@dataclass(slots=True)
class _Reused:
    """What `audit_snapshots` reads and audits once for its many audits of one chain.

    It audits the chain once a compaction, and each audit reads every loop's messages and
    audits every loop: anew each time, K compactions of N loops cost K x N of each.
    """

    closed: set[int] = field(default_factory=set)
    """The loops known closed now, whatever a chain as of an earlier moment says of them."""
    messages: dict[int, list[StoredMessage]] = field(default_factory=dict)
    """Each closed loop's messages, by loop id: a closed loop takes no more messages and
    raw messages never change, so one read serves every audit (each filters them by its
    own `as_of`). An open loop is read for each audit."""
    audits: dict[_LoopKey, LoopAudit] = field(default_factory=dict)
    """Each loop audited, by its inputs (`_loop_key`)."""


def _loop_key(
    loop: LoopRecord,
    block: CompactionBlock | None,
    messages: Sequence[StoredMessage],
    in_scope: bool,
    pinned_id: int | None,
) -> _LoopKey | None:
    """The inputs of `audit_loop`, as a key; None when they cannot be told apart cheaply.

    The loop record's values; the block by id (a stored block never changes); the
    messages by their count and the newest one's id (a loop's messages, in order, as of
    a moment are a prefix of them all); the pinned id only when it is one of this loop's,
    as `audit_loop` marks it only there.
    """
    if block is not None and block.id is None:
        return None
    inside = pinned_id is not None and any(m.id == pinned_id for m in messages)
    return (
        tuple(loop.__dict__.values()),
        None if block is None else block.id,
        len(messages),
        messages[-1].id if messages else None,
        in_scope,
        pinned_id if inside else None,
    )


async def _loop_messages(
    store: AuditReader, session_id: str, loop: LoopRecord, reused: _Reused | None
) -> list[StoredMessage]:
    """A loop's messages: read once for all audits when the loop is closed (`_Reused`)."""
    if reused is None or (loop.closed_at is None and loop.id not in reused.closed):
        return await store.get_messages(session_id, loop.id)
    messages = reused.messages.get(loop.id)
    if messages is None:
        messages = reused.messages[loop.id] = await store.get_messages(session_id, loop.id)
    return messages


async def _audit_session(
    store: AuditReader,
    session_id: str,
    *,
    loop_id: int | None,
    overlay: str,
    config: CompactionConfig | dict[str, Any] | None,
    scope: CompactionScope | None,
    max_context_tokens: int,
    as_of: datetime | None,
    only_loop: bool,
    reused: _Reused | None,
) -> SessionAudit:
    """`audit_session`; with `reused`, what an audit before read or audited is reused."""
    chain = await store.chain_blocks(session_id, loop_id=loop_id, overlay=overlay, as_of=as_of)
    if scope is None:
        scope = (
            validated_config(config, CompactionConfig).compaction_scope
            if config is not None
            else recorded_scope(chain[-1][1] if chain else None)
        )
    earlier = resolve_scope(chain, scope, max_context_tokens)
    first_in_scope = len(chain) - earlier - 1
    digest = await store.get_digest(session_id, loop_id=loop_id, overlay=overlay, as_of=as_of)
    also: set[int] = set()
    """Loops before `first_in_scope` that the context shows all the same."""
    if digest is not None:
        # As the loader does (`loops_shown`): the loops after the digest's, or the scope's.
        through = [loop.id for loop, _ in chain].index(digest.through_loop_id)
        shown = loops_shown(scope, chain[first_in_scope:], chain[through + 1 :])
        first_in_scope = len(chain) - len(shown)
    elif isinstance(scope, TokenBudget) and first_in_scope > 0:
        # As the loader does with no digest: the chain's first loop (the task) and the
        # compacted loops the budget left out of the window it read stay in.
        window = chain[-token_budget_window(earlier) :]
        also = {chain[0][0].id, *(loop.id for loop in compacted_left_out(window, earlier))}
    loaded = []
    for index, (loop, block) in enumerate(chain):
        if only_loop and index != len(chain) - 1:
            continue
        messages = await _loop_messages(store, session_id, loop, reused)
        if as_of is not None:
            messages = [m for m in messages if m.created_at <= as_of]
        loaded.append((index, loop, block, messages))
    pinned_id = next(
        (
            m.id
            for _, _, _, messages in reversed(loaded)
            for m in reversed(messages)
            if isinstance(m.message, UserMessage)
        ),
        None,
    )
    audits = []
    for index, loop, block, messages in loaded:
        in_scope = index >= first_in_scope or loop.id in also
        key = None if reused is None else _loop_key(loop, block, messages, in_scope, pinned_id)
        audit = None if key is None or reused is None else reused.audits.get(key)
        if audit is None:
            audit = audit_loop(loop, block, messages, in_scope=in_scope, pinned_id=pinned_id)
            if key is not None and reused is not None:
                reused.audits[key] = audit
        audits.append(audit)
    return SessionAudit(session_id=session_id, overlay=overlay, loops=audits, digest=digest)


@dataclass(frozen=True, slots=True)
class AuditSnapshot:
    """One overlay's audit as it stood at one moment: after a compaction, or now."""

    overlay: str
    as_of: datetime | None
    """When the compaction wrote its blocks; None for now (messages written since count)."""
    blocks: list[CompactionBlock]
    """The blocks of the chain that compaction wrote (none for now)."""
    audit: SessionAudit


async def audit_snapshots(
    store: AuditReader,
    session_id: str,
    *,
    loop_id: int | None = None,
    scope: CompactionScope | None = None,
    max_context_tokens: int = 100_000,
    moments: int | None = None,
) -> list[AuditSnapshot]:
    """Audit every overlay of the chain ending at `loop_id` after each of its compactions.

    The overlays are `default` and every name a block of the chain carries, in that order
    (then by name). For each overlay, one snapshot per moment a compaction wrote blocks of
    the chain, oldest first (`audit_session` with `as_of` that moment), then one for now.
    With `moments`, only the newest `moments` of each overlay's moments, then now: a
    snapshot audits the whole chain, so a long session compacted many times makes many
    snapshots of many loops each.

    Raises:
        ValueError: `moments` is negative.
    """
    if moments is not None and moments < 0:
        raise ValueError(f"moments must be at least 0, not {moments}")
    chain = await store.chain_blocks(session_id, loop_id=loop_id)
    written: dict[str, dict[datetime, list[CompactionBlock]]] = {}
    for loop, _ in chain:
        for block in await store.block_history(session_id, loop.id):
            if block.created_at is not None:
                by_moment = written.setdefault(block.overlay, {})
                by_moment.setdefault(block.created_at, []).append(block)
    snapshots = []
    reused = _Reused(closed={loop.id for loop, _ in chain if loop.closed_at is not None})
    for overlay in sorted({"default", *written}, key=lambda name: (name != "default", name)):
        written_at = written.get(overlay, {})
        shown = sorted(written_at)
        if moments is not None:
            shown = shown[-moments:] if moments else []
        for as_of in [*shown, None]:
            audit = await _audit_session(
                store,
                session_id,
                loop_id=loop_id,
                overlay=overlay,
                config=None,
                scope=scope,
                max_context_tokens=max_context_tokens,
                as_of=as_of,
                only_loop=False,
                reused=reused,
            )
            blocks = written_at[as_of] if as_of is not None else []
            snapshots.append(AuditSnapshot(overlay, as_of, blocks, audit))
    return snapshots


async def expand(
    store: SessionStore | TenantStore, session_id: str, replacement_id: int
) -> list[StoredMessage]:
    """Return the raw messages a replacement message stands for, in order.

    Raises:
        BlockNotFoundError: no replacement message with this id in the session.
    """
    replacement = await store.get_replacement_message(session_id, replacement_id)
    return await store.get_messages_by_id(session_id, replacement.covers)
