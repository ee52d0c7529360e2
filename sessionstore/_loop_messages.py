"""`LoopMessages`: a loop's stored messages held as columns, each built when it is used.

A compaction reads every message of a loop but looks closely at few of them: the
strategy needs the id, turn index and token count of each message (the turn map, token
sums and provenance), and whole messages only for the turns it summarises or keeps. A
list of 20,000 `StoredMessage` models is 20,000 objects the cyclic garbage collector
walks again and again; the columns below are a handful of flat arrays and lists of
strings, which it does not. Indexing builds the `StoredMessage` (its message decoded
when first used) and does not keep it.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime
from typing import Any, overload

from sessionstore.models import StoredMessage

__all__ = ["LoopMessages", "message_columns"]


class LoopMessages(Sequence[StoredMessage]):
    """A read-only sequence of one loop's stored messages, in order, held as columns."""

    __slots__ = (
        "_client_ids",
        "_created",
        "_hashes",
        "_payloads",
        "_positions",
        "_session_id",
        "ids",
        "loop_id",
        "token_counts",
        "turn_indexes",
    )

    def __init__(self, session_id: str, loop_id: int, rows: Iterable[Sequence[Any]]) -> None:
        """Hold `rows` of the store's message columns, in order.

        The columns are the store's `MESSAGE_COLUMNS`: id, loop id, position, turn index,
        token count, content hash, client id, created at and the payload as JSON text.
        """
        self._session_id = session_id
        self.loop_id = loop_id
        self.ids = array("q")
        """The messages' ids, in order."""
        self._positions = array("q")
        self.turn_indexes = array("q")
        """The messages' turn indices, in order."""
        self.token_counts = array("q")
        """The messages' cached token counts, in order."""
        self._hashes: list[str] = []
        self._client_ids: list[str | None] = []
        self._created: list[datetime] = []
        self._payloads: list[str | bytes] = []
        for message_id, _, position, turn, tokens, digest, client_id, created, payload in rows:
            self.ids.append(message_id)
            self._positions.append(position)
            self.turn_indexes.append(turn)
            self.token_counts.append(tokens)
            self._hashes.append(digest)
            self._client_ids.append(client_id)
            self._created.append(created)
            self._payloads.append(payload)

    def __len__(self) -> int:
        return len(self.ids)

    def _build(self, i: int) -> StoredMessage:
        return StoredMessage._from_columns(
            self.ids[i],
            self._session_id,
            self.loop_id,
            self._positions[i],
            self.turn_indexes[i],
            self.token_counts[i],
            self._hashes[i],
            self._created[i],
            self._payloads[i],
            self._client_ids[i],
        )

    @overload
    def __getitem__(self, index: int) -> StoredMessage: ...

    @overload
    def __getitem__(self, index: slice) -> list[StoredMessage]: ...

    def __getitem__(self, index: int | slice) -> StoredMessage | list[StoredMessage]:
        if isinstance(index, slice):
            return [self._build(i) for i in range(*index.indices(len(self.ids)))]
        if index < 0:
            index += len(self.ids)
        if not 0 <= index < len(self.ids):
            raise IndexError("message index out of range")
        return self._build(index)

    def __iter__(self) -> Iterator[StoredMessage]:
        return (self._build(i) for i in range(len(self.ids)))

    def head(self, count: int) -> LoopMessages:
        """Return the first `count` messages, still held as columns."""
        head = LoopMessages(self._session_id, self.loop_id, ())
        head.ids = self.ids[:count]
        head._positions = self._positions[:count]
        head.turn_indexes = self.turn_indexes[:count]
        head.token_counts = self.token_counts[:count]
        head._hashes = self._hashes[:count]
        head._client_ids = self._client_ids[:count]
        head._created = self._created[:count]
        head._payloads = self._payloads[:count]
        return head

    def __repr__(self) -> str:
        return f"LoopMessages(loop_id={self.loop_id}, messages={len(self.ids)})"


def message_columns(
    messages: Sequence[StoredMessage],
) -> tuple[Sequence[int], Sequence[int], Sequence[int]]:
    """Return the ids, turn indices and token counts of `messages`, without building them."""
    if isinstance(messages, LoopMessages):
        return messages.ids, messages.turn_indexes, messages.token_counts
    return (
        [m.id for m in messages],
        [m.turn_index for m in messages],
        [m.token_count for m in messages],
    )
