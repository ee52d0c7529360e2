"""Stored records (sessions, loops, stored messages), compaction blocks and their lifecycle."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from itertools import pairwise
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    NonNegativeInt,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)

from sessionstore.errors import InvalidBlockError
from sessionstore.models._limits import (
    STRATEGY_MAX_LENGTH,
    BigCount,
    Count,
    IdList,
    JsonField,
    OverlayName,
    bounded_text,
)
from sessionstore.models._messages import CompactionSummaryMessage, Message
from sessionstore.models._stored_json import stored_message

# ── stored records ─────────────────────────────────────────────────────────────


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, defer_build=True)


_PENDING = "_pending_field"
_new = object.__new__
_set = object.__setattr__


class _LazyRecord(_Record):
    """A record one field of which (`_lazy_field`) is decoded from stored text when first used.

    A bulk read builds many records whose every field is not looked at; decoding that
    field only when it is used keeps the read cheap. The record behaves as an eagerly
    built one: attribute access, equality, hashing, copying, pickling and serialisation
    (nested too) decode it first.
    """

    _lazy_field: ClassVar[str]

    def _pend(self, pending: Any) -> None:
        """Leave the lazy field to be decoded from `pending` when first used."""
        # A default `model_construct` filled in would hide the field from `__getattr__`.
        self.__dict__.pop(self._lazy_field, None)
        _set(self, "__pydantic_fields_set__", self.__pydantic_fields_set__ - {self._lazy_field})
        _set(self, "__pydantic_private__", {_PENDING: pending})

    def _decoded(self, pending: Any) -> Any:
        """Return the lazy field's value, decoded from what `_pend` was given."""
        raise NotImplementedError

    def _decode(self) -> None:
        private = self.__pydantic_private__
        if not private or _PENDING not in private:
            return
        name = self._lazy_field
        self.__dict__[name] = self._decoded(private[_PENDING])
        _set(self, "__pydantic_fields_set__", {*self.__pydantic_fields_set__, name})
        _set(self, "__pydantic_private__", None)

    if not TYPE_CHECKING:

        def __getattr__(self, name: str) -> Any:
            if name == type(self)._lazy_field:
                self._decode()
                return self.__dict__[name]
            return super().__getattr__(name)

    @model_serializer(mode="wrap")
    def _serialize(self, handler: SerializerFunctionWrapHandler) -> Any:
        self._decode()
        return handler(self)

    def __eq__(self, other: object) -> bool:
        self._decode()
        if isinstance(other, _LazyRecord):
            other._decode()
        return super().__eq__(other)

    def __hash__(self) -> int:
        self._decode()
        return super().__hash__()

    def __iter__(self) -> Any:
        self._decode()
        return super().__iter__()

    def __repr_args__(self) -> Any:
        self._decode()
        return super().__repr_args__()

    def __getstate__(self) -> dict[Any, Any]:
        self._decode()
        return super().__getstate__()

    def __copy__(self) -> Self:
        self._decode()
        return super().__copy__()

    def __deepcopy__(self, memo: dict[int, Any] | None = None) -> Self:
        self._decode()
        return super().__deepcopy__(memo)

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """Return a copy (see `pydantic.BaseModel.model_copy`), the lazy field decoded."""
        self._decode()
        fields_set: Any = self.__pydantic_fields_set__
        if isinstance(fields_set, frozenset):
            # A bulk-built record shares its fields set; the copy updates its own.
            _set(self, "__pydantic_fields_set__", set(fields_set))
        return super().model_copy(update=update, deep=deep)


class Session(_Record):
    """One agent conversation, owned by a tenant (`app_name`, `user_id`)."""

    id: str
    """The session id (chosen by the caller or generated)."""
    app_name: str
    """The application that owns the session."""
    user_id: str
    """The user within that application."""
    title: str | None = None
    """A human-readable title."""
    metadata: dict[str, JsonValue] = Field(default_factory=dict)
    """Free-form application data."""
    active_loop_id: int | None = None
    """The head of the active chain, or None before the first loop."""
    loop_count: int = 0
    """How many loops the session has, on every branch."""
    version: int
    """Bumped by every write; pass it back as `expected_version` for optimistic concurrency."""
    created_at: datetime
    """When the session was created (UTC)."""
    updated_at: datetime
    """When the session was last written (UTC)."""


class LoopRecord(_Record):
    """One agent run: the work done for one user request."""

    id: int
    """The loop id, unique in the database."""
    session_id: str
    """The session it belongs to."""
    parent_loop_id: int | None
    """The loop it continues, or None for a root."""
    sequence: int
    """Its number in the session, in order of creation, from 0."""
    depth: int
    """Its distance from the root of its chain (a root is 0)."""
    created_at: datetime
    """When the loop started (UTC)."""
    closed_at: datetime | None
    """When the loop was closed (a new loop started after it, or it was closed explicitly)."""
    message_count: int
    """How many messages it holds (cached)."""
    token_total: int
    """The sum of its messages' token counts (cached)."""
    turn_count: int
    """How many turns it holds (cached)."""

    @property
    def number(self) -> int:
        """Its number in the session, from 1 (`sequence + 1`): the loop number the CLI shows.

        `id` is unique in the database, so it depends on every session written before;
        `number` counts this session's loops only, in order of creation (all branches).
        """
        return self.sequence + 1


def _bare(
    cls: type[StoredMessage],
    values: dict[str, Any],
    fields_set: frozenset[str] | set[str],
    private: dict[str, Any] | None,
) -> StoredMessage:
    """Set an instance's state the way `model_construct` does, without its per-field loop."""
    stored = _new(cls)
    _set(stored, "__dict__", values)
    _set(stored, "__pydantic_fields_set__", fields_set)
    _set(stored, "__pydantic_extra__", None)
    _set(stored, "__pydantic_private__", private)
    return stored


class StoredMessage(_LazyRecord):
    """A message as stored: the immutable message plus where and when it was written."""

    id: int
    """The message id, unique in the database; replacement messages name these ids."""
    session_id: str
    """The session it belongs to."""
    loop_id: int
    """The loop it belongs to."""
    position: int
    """Its position in the loop, from 0, contiguous."""
    turn_index: int
    """The turn it belongs to, from 0 in each loop."""
    token_count: int
    """Its token count, computed once when it was appended."""
    content_hash: str
    """SHA-256 of its canonical payload."""
    created_at: datetime
    """When it was appended (UTC)."""
    message: Message
    """The message itself (read from the database, it is decoded the first time it is used)."""

    _lazy_field: ClassVar[str] = "message"

    @classmethod
    def from_row(cls, payload: str | bytes, client_id: str | None, **fields: Any) -> StoredMessage:
        """Build a stored message whose message is decoded from `payload` when first used.

        A bulk read builds thousands of these; decoding each message only when it is
        used keeps a read cheap (no cyclic-GC pressure from objects never looked at).
        The object behaves as an eagerly built one: attribute access, equality,
        hashing, copying, pickling and serialisation (nested too) decode it first.
        """
        stored = cls.model_construct(**fields)
        stored._pend((payload, client_id))
        return stored

    @classmethod
    def _from_columns(
        cls,
        message_id: int,
        session_id: str,
        loop_id: int,
        position: int,
        turn_index: int,
        token_count: int,
        content_hash: str | bytes,
        created_at: datetime,
        payload: str | bytes,
        client_id: str | None,
    ) -> StoredMessage:
        """Build a lazily decoded stored message from trusted columns (see `from_row`).

        The store's bulk reads build thousands of these: this sets the instance's state
        the way `model_construct` does, without its per-field loop (about 4x faster).
        """
        columns = {
            "id": message_id,
            "session_id": session_id,
            "loop_id": loop_id,
            "position": position,
            "turn_index": turn_index,
            "token_count": token_count,
            # The store keeps the digest's bytes (migration 0011); a plain read returns them.
            "content_hash": content_hash.hex() if isinstance(content_hash, bytes) else content_hash,
            "created_at": created_at,
        }
        # The fields set are shared until the message is decoded, which gives the
        # instance its own set.
        return _bare(cls, columns, _COLUMN_FIELDS, {_PENDING: (payload, client_id)})

    @classmethod
    def _of(
        cls,
        message_id: int,
        session_id: str,
        loop_id: int,
        position: int,
        turn_index: int,
        token_count: int,
        content_hash: str,
        created_at: datetime,
        message: Message,
    ) -> StoredMessage:
        """Build a stored message from a message just validated and the values written.

        For the append path: validating again a message that is a model already costs as
        much as the insert of its row (the union is discriminated once more, every field
        checked), so the instance's state is set as `_from_columns` sets it.
        """
        values = {
            "id": message_id,
            "session_id": session_id,
            "loop_id": loop_id,
            "position": position,
            "turn_index": turn_index,
            "token_count": token_count,
            "content_hash": content_hash,
            "created_at": created_at,
            "message": message,
        }
        return _bare(cls, values, _ALL_FIELDS, None)

    def _decoded(self, pending: Any) -> Any:
        return stored_message(*pending)


_ALL_FIELDS = frozenset(StoredMessage.model_fields)
_COLUMN_FIELDS = _ALL_FIELDS - {"message"}


class Page(_Record):
    """One page of a cursor-paginated listing."""

    items: list[Session]
    """The sessions on this page."""
    next_cursor: str | None
    """Pass this as `cursor` for the next page; None on the last page."""

    def __iter__(self) -> Iterator[Session]:  # type: ignore[override]  # the items, not the fields
        """Iterate the sessions on this page: `for session in await tenant.list_sessions()`."""
        return iter(self.items)

    def __len__(self) -> int:
        """The number of sessions on this page."""
        return len(self.items)

    def __getitem__(self, index: int) -> Session:
        """The session at `index` on this page."""
        return self.items[index]


class TurnRange(_Record):
    """An inclusive range of turn indices inside one loop."""

    start_turn: Annotated[NonNegativeInt, Count]
    end_turn: Annotated[NonNegativeInt, Count]

    @model_validator(mode="after")
    def _ordered(self) -> TurnRange:
        if self.end_turn < self.start_turn:
            raise ValueError(f"end_turn {self.end_turn} is before start_turn {self.start_turn}")
        return self

    def __contains__(self, turn_index: object) -> bool:
        return isinstance(turn_index, int) and self.start_turn <= turn_index <= self.end_turn

    def __len__(self) -> int:
        return self.end_turn - self.start_turn + 1


class ReplacementMessage(_Record):
    """A message a compaction put in place of raw messages, naming the ids it covers."""

    message: Message
    """What the model sees instead of the raw messages."""
    covers: Annotated[list[int], IdList] = Field(default_factory=list)
    """The ids of the raw messages it stands for (its provenance)."""
    token_count: Annotated[NonNegativeInt, Count] | None = None
    """Its token count; the store computes it when it is None."""
    id: int | None = None
    """Its id once stored."""


class CompactedSection(_Record):
    """A turn range plus the replacement messages that stand for it."""

    range: TurnRange
    messages: list[ReplacementMessage] = Field(default_factory=list)


class CompactionBlock(_Record):
    """A non-destructive overlay on one loop.

    A strategy builds one with the section fields; the store fills in `id`,
    `session_id`, `loop_id`, `generation` and `created_at` when it writes it.
    """

    overlay: OverlayName = "default"
    """The overlay's name (`OVERLAY_PATTERN`); several named overlays can coexist on one loop."""
    keep_first: TurnRange | None = None
    """Turns kept verbatim from the start (only for the most recent loop)."""
    keep_compacted: CompactedSection | None = None
    """Summarised turns (for every loop)."""
    keep_recent: CompactedSection | None = None
    """Recent turns with tool output truncated (only for the most recent loop)."""
    strategy: Annotated[str, bounded_text(STRATEGY_MAX_LENGTH)] = "manual"
    """The name of the strategy that built it (at most 128 characters)."""
    config: Annotated[dict[str, JsonValue], JsonField] = Field(default_factory=dict)
    """A snapshot of the configuration it was built with (JSON, finite numbers)."""
    tokens_before: Annotated[NonNegativeInt, BigCount] = 0
    """Estimated tokens of the raw messages it covers."""
    tokens_after: Annotated[NonNegativeInt, BigCount] = 0
    """Estimated tokens of what the model sees instead."""
    id: int | None = None
    session_id: str | None = None
    loop_id: int | None = None
    generation: int | None = None
    """1 for the first block of a loop and overlay, then 2, 3, ..."""
    created_at: datetime | None = None

    def check_ranges(self, loop_id: int | None, turn_count: int) -> None:
        """Refuse ranges that leave a loop of `turn_count` turns or overlap each other.

        Raises:
            InvalidBlockError: a range is out of bounds, or two ranges overlap.
        """
        ranges = [("keep_first", self.keep_first)] + [
            (f"keep_{kind}", section.range) for kind, section in self.sections()
        ]
        for name, span in ranges:
            if span is not None and span.end_turn >= turn_count:
                raise InvalidBlockError(
                    f"{name} turn range {span.start_turn}..{span.end_turn} is out of bounds: "
                    f"loop {loop_id} has {turn_count} turns"
                )
        present = sorted(
            ((span, name) for name, span in ranges if span is not None),
            key=lambda pair: pair[0].start_turn,
        )
        for (before, first), (after, second) in pairwise(present):
            if after.start_turn <= before.end_turn:
                raise InvalidBlockError(
                    f"{first} ({before.start_turn}..{before.end_turn}) and {second} "
                    f"({after.start_turn}..{after.end_turn}) overlap: a turn is shown once"
                )

    def sections(self) -> Sequence[tuple[str, CompactedSection]]:
        """Return the present sections as `(kind, section)`, `compacted` first."""
        found = [("compacted", self.keep_compacted), ("recent", self.keep_recent)]
        return [(kind, section) for kind, section in found if section is not None]

    def turn_ranges(self) -> list[TurnRange]:
        """Return the turn ranges the block covers: `keep_first`'s, then its sections'."""
        first = [] if self.keep_first is None else [self.keep_first]
        return first + [section.range for _, section in self.sections()]


class CompactionEvent(_Record):
    """A persisted `CompactionStarted` or `CompactionEnded` event."""

    id: int
    session_id: str
    loop_id: int | None
    block_id: int | None
    event: Literal["started", "ended"]
    tokens_before: int
    tokens_after: int | None
    duration_ms: float | None
    details: Annotated[dict[str, JsonValue], JsonField] = Field(default_factory=dict)
    created_at: datetime


# ── compaction lifecycle ───────────────────────────────────────────────────────


@dataclass(frozen=True, slots=True)
class CompactionStarted:
    """Fired before a compaction runs; persisted as a `started` compaction event."""

    session_id: str
    current_loop_id: int
    loop_ids: list[int]
    """The loops in scope, oldest first."""
    tokens_before: int
    """The estimated context tokens of the loops in scope before this compaction."""
    strategy: str
    overlay: str

    def record(self) -> dict[str, Any]:
        """Return the fields of its `CompactionEvent` row (without id and time)."""
        return {
            "event": "started",
            "loop_id": self.current_loop_id,
            "block_id": None,
            "tokens_before": self.tokens_before,
            "tokens_after": None,
            "duration_ms": None,
            "details": {
                "loop_ids": self.loop_ids,
                "strategy": self.strategy,
                "overlay": self.overlay,
            },
        }


@dataclass(frozen=True, slots=True)
class CompactionEnded:
    """Fired after the blocks are built and before they are written; persisted as `ended`.

    Raising from `after_compaction_end` vetoes the compaction: nothing is written. A
    failed compaction is recorded with `status="failed"` and the `error`.
    """

    session_id: str
    current_loop_id: int
    loop_ids: list[int]
    tokens_before: int
    tokens_after: int | None
    """The estimated context tokens of the loops in scope with the new blocks."""
    blocks: list[tuple[int, CompactionBlock]]
    """`(loop_id, block)` for every block about to be written (not yet stored)."""
    duration_ms: float
    strategy: str = ""
    overlay: str = "default"
    status: Literal["ok", "failed"] = "ok"
    error: str | None = None
    """`Type: message` of the exception that failed the compaction."""
    skipped_loop_ids: list[int] = field(default_factory=list)
    """Earlier loops in scope whose current block was already a summary built the same way."""
    details: dict[str, Any] = field(default_factory=dict)
    """More to record: loops left as they were and why, the user-facing feedback."""

    def record(self) -> dict[str, Any]:
        """Return the fields of its `CompactionEvent` row (without id and time)."""
        details: dict[str, Any] = {"status": self.status, "loop_ids": self.loop_ids}
        if self.status == "ok":
            details["compacted_loop_ids"] = [loop_id for loop_id, _ in self.blocks]
            details["skipped_loop_ids"] = self.skipped_loop_ids
        details.update(self.details)
        details["strategy"] = self.strategy
        details["overlay"] = self.overlay
        if self.error is not None:
            details["error"] = self.error
        return {
            "event": "ended",
            "loop_id": self.current_loop_id,
            "block_id": None,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "duration_ms": self.duration_ms,
            "details": details,
        }


class SessionDigest(_LazyRecord):
    """The loops of a chain before a compaction's scope, summarised and carried forward.

    Each compaction updates it from the previous one and the loops that left the scope
    since, so the original task and the key facts survive any number of loops. The loader
    shows it first, and shows every loop after `through_loop_id`.
    """

    id: int | None = None
    session_id: str | None = None
    overlay: OverlayName = "default"
    """The overlay it belongs to (`OVERLAY_PATTERN`)."""
    head_loop_id: int
    """The current loop of the compaction that wrote it."""
    through_loop_id: int
    """The newest loop it folds; the loops after it are shown by their own blocks."""
    folded: list[tuple[int, int]] = Field(default_factory=list)
    """Provenance: `(loop_id, messages folded)` for each loop this digest folded in itself,
    oldest first. The loops it stands for are those of the digest it extends
    (`extends_id`), then these: the chain's loops from the root through
    `through_loop_id`."""
    extends_id: int | None = None
    """The digest (of the same session and overlay) this one updated; None for the first.
    A digest written before migration 0016 has none and lists every loop it folds."""
    message: CompactionSummaryMessage
    """The digest, as a summary message."""
    token_count: Annotated[NonNegativeInt, Count]
    details: Annotated[dict[str, JsonValue], JsonField] = Field(default_factory=dict)
    """Who wrote it: the summarizer's model, prompt version, duration and budget."""
    created_at: datetime | None = None

    _lazy_field: ClassVar[str] = "folded"

    def _decoded(self, pending: Any) -> Any:
        # The stored JSON text of `[[loop_id, count], ...]`: one pair per loop folded,
        # which a resume of a long chain does not need to parse.
        return [(loop_id, count) for loop_id, count in json.loads(pending)]
