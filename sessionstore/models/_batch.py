"""Building a read's records in one batch: the batch decode and the pause of the collector.

A public list read returns thousands of records whose every message its caller uses.
Built one at a time, the calls per record and the cyclic garbage collector (run again
and again over the growing heap) cost more than the decoding itself; here the records
are built in one loop with the collector paused.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from itertools import islice
from typing import Any, Final

from pydantic import BaseModel, ValidationError

from sessionstore.models._records import _ALL_FIELDS, StoredMessage, _LazyRecord
from sessionstore.models._stored_json import decode_stored, shared_validator

__all__ = ["RecordCache", "RecordReading", "decode_all", "decoded_records", "paused_gc"]

_new = object.__new__
_SLOTS = vars(BaseModel)
# A model's instance state, set through its slots' own descriptors: one C call each,
# without `object.__setattr__`'s lookup of the name (a read builds thousands of records).
_set_dict = _SLOTS["__dict__"].__set__
_set_fields_set = _SLOTS["__pydantic_fields_set__"].__set__
_set_extra = _SLOTS["__pydantic_extra__"].__set__
_set_private = _SLOTS["__pydantic_private__"].__set__
_SETTERS: Final = (_set_dict, _set_fields_set, _set_extra, _set_private)


_Entry = tuple[tuple[Any, ...], StoredMessage]
"""A record kept by a `RecordCache`: its row's columns but the id and payload, and itself."""


class RecordCache:
    """The raw messages a session's context reads decoded, for its next read to take again.

    A caller that builds one session's context again and again (an agent before each
    model call; the OpenAI Agents SDK session's context mode on every `get_items`) hands
    the same cache to each build (`build_context(..., records=cache)`). The read then
    takes a message the last read decoded, when its row reads back the same column for
    column (id, loop, position, turn, tokens, content hash, client id, time), as it
    was, instead of decoding its payload again: a raw message never changes, and its
    content hash stands for its payload. Only the messages a read decodes go through it
    (those of the loops it reads raw), and it holds those of the last read and no more,
    up to `max_records` (the last ones the read used, the newest turns). A record
    costs about 4-6 KB (the decoded models, with the message's `extra`): a 128,000-token
    context of small messages, about 2,000 of them, is about 10 MB. The records it returns
    are shared between the builds: they are frozen models, not to be changed in place.

    >>> cache = RecordCache()
    >>> async def each_turn(store, session_id):
    ...     context = await build_context(
    ...         store, session_id, max_context_tokens=128_000, records=cache
    ...     )
    ...     return context.messages
    """

    __slots__ = ("_kept", "max_records")

    def __init__(self, max_records: int = 10_000) -> None:
        """Make an empty cache that keeps at most `max_records` records (0 keeps none).

        Raises:
            ValueError: `max_records` is negative.
        """
        if max_records < 0:
            raise ValueError(f"max_records must not be negative, got {max_records}")
        self.max_records = max_records
        self._kept: dict[int, _Entry] = {}

    def __len__(self) -> int:
        """How many records the last read left in it."""
        return len(self._kept)

    def reading(self) -> RecordReading:
        """Start a read: what it decodes or takes again is kept when it ends (`keep`)."""
        return RecordReading(self._kept)

    def keep(self, reading: RecordReading) -> None:
        """End a read: the records it used replace those kept (a new mapping each time).

        Past `max_records`, the last ones it used are kept.
        """
        found = reading.found
        over = len(found) - self.max_records
        if over > 0:
            found = dict(islice(found.items(), over, None))
        self._kept = found


class RecordReading:
    """One read's use of a `RecordCache`: the records it may take again, and those it used."""

    __slots__ = ("before", "found")

    def __init__(self, before: dict[int, _Entry]) -> None:
        self.before = before
        self.found: dict[int, _Entry] = {}


def decoded_records(
    rows: Iterable[Sequence[Any]],
    session_id: str,
    parse_time: Callable[[Any], datetime] | None = None,
    unescape: tuple[Callable[[str], str], Callable[[str], str]] | None = None,
    reading: RecordReading | None = None,
) -> list[StoredMessage]:
    """Build stored messages from trusted columns, each message decoded now.

    Each row is `(id, loop_id, position, turn_index, token_count, content_hash,
    client_id, created_at, payload)`; `parse_time` turns a stored time into a datetime
    when the rows come straight from a driver (a time repeated from the row before, as
    a batch of messages appended together has, is parsed once); `unescape`, when the
    rows come straight from a driver whose strings are stored encoded (PostgreSQL's NUL
    encoding), is the pair of functions that decode the payload's JSON text and a
    string (the client id). Each record's state is
    set as `StoredMessage._of` sets it, in one loop: a decoded read builds thousands, and
    the calls per record (one builder calling the next) were about a tenth of it. Each
    message is decoded as `stored_message` decodes it. With a `reading` of a
    `RecordCache`, a row whose columns are those of a record the cache holds is that
    record, and every record is kept in `reading.found`.
    """
    validate = shared_validator().validate_json
    cls, fields, new = StoredMessage, _ALL_FIELDS, _new
    set_dict, set_fields, set_extra, set_private = _SETTERS
    records: list[StoredMessage] = []
    append = records.append
    stored_at: Any = None
    at = None
    before: dict[int, _Entry] | None = None
    found: dict[int, _Entry] = {}
    if reading is not None:
        before, found = reading.before, reading.found
    for row in rows:
        if before is not None:
            columns = tuple(row[1:8])
            hit = found.get(row[0]) or before.get(row[0])
            if hit is not None and hit[0] == columns:
                found[row[0]] = hit
                append(hit[1])
                continue
        message_id, loop_id, position, turn, tokens, digest, client_id, when, text = row
        if unescape is not None:
            text = unescape[0](text)
            if client_id is not None:
                client_id = unescape[1](client_id)
        try:
            message = validate(text)
        except ValidationError:
            message = decode_stored(text)
        if client_id is not None:
            # As in `stored_message`: the model was just built and no one else holds it.
            message.__dict__["client_id"] = client_id
            message.__pydantic_fields_set__.add("client_id")
        if parse_time is None:
            at = when
        elif when != stored_at:
            stored_at, at = when, parse_time(when)
        stored = new(cls)
        set_dict(
            stored,
            {
                "id": message_id,
                "session_id": session_id,
                "loop_id": loop_id,
                "position": position,
                "turn_index": turn,
                "token_count": tokens,
                # The store keeps the digest's bytes (migration 0011); a plain read returns them.
                "content_hash": digest.hex() if isinstance(digest, bytes) else digest,
                "created_at": at,
                "message": message,
            },
        )
        set_fields(stored, fields)
        set_extra(stored, None)
        set_private(stored, None)
        append(stored)
        if before is not None:
            found[message_id] = (columns, stored)
    return records


_PROMOTE_AT: Final = 10_000
"""How many objects a paused batch must leave to the collector for them to be promoted."""
_GROWTH_MIN: Final = 100_000
"""How many allocated blocks the heap must grow by, at least, for a full collection."""
_measure = False
"""Whether a batch was promoted since the heap was last measured."""
_heap_blocks = 0
"""The heap's allocated blocks when last measured (the least seen since the last full
collection `paused_gc` ran; 0 before the first promotion). Updated without a lock: a lost
update moves a collection a little."""


def _collect_if_grown() -> None:
    """Run a full collection when the heap grew by a quarter since the last measure.

    Promoted objects never count towards the interpreter's own full collection (it runs
    when the objects that survived into the oldest generation grow by a quarter), so a
    cycle promoted with a batch would stay until the process ends. Measured when the
    next batch starts, once after each promotion: the batch promoted is freed by then
    when its caller dropped it, so a heap that does not grow is not collected (what a
    read returns dies young).
    """
    global _measure, _heap_blocks
    _measure = False
    blocks = sys.getallocatedblocks()
    if _heap_blocks and blocks - _heap_blocks >= max(_GROWTH_MIN, _heap_blocks // 4):
        gc.collect()
        _heap_blocks = sys.getallocatedblocks()
    elif not _heap_blocks or blocks < _heap_blocks:
        _heap_blocks = blocks


@contextmanager
def paused_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector for a bounded batch of work (nests safely).

    A context manager, or a decorator (`@paused_gc()`) for a function whose work it is.

    Building thousands of objects that all survive (a read's records, an append's rows)
    makes the collector run again and again over the growing heap, each pass finding
    nothing to free: it was about 60% of a decoded full read. Paused, it would still
    visit every one of them once when it runs next (the young generation's collection
    over a 10,000-message read took as long as building it). So when the batch leaves
    at least `_PROMOTE_AT` new objects, they are moved to the oldest generation
    unvisited (`gc.freeze()` then `gc.unfreeze()`), where only a full collection looks
    at them, as at objects that survived two collections. Objects that die are still
    freed at once (reference counting). The objects younger than the batch are moved
    with it: a cycle among them is freed by the full collection that the next batch
    runs when the heap has grown by a quarter (`_collect_if_grown`). Not done
    when the application froze objects itself (`gc.get_freeze_count()`): `unfreeze`
    would release them.
    """
    global _measure
    if _measure:
        _collect_if_grown()
    was_enabled = gc.isenabled()
    if was_enabled:
        gc.disable()
    before = gc.get_count()[0]
    try:
        yield
    finally:
        if was_enabled:
            if gc.get_count()[0] - before >= _PROMOTE_AT and not gc.get_freeze_count():
                gc.freeze()
                gc.unfreeze()
                _measure = True
            gc.enable()


def decode_all(records: Sequence[_LazyRecord]) -> None:
    """Decode the lazy field of every record now, with the garbage collector paused.

    For a read whose caller uses every message (a public list read): decoded one at a
    time as they are used, the collector runs over them again and again (`paused_gc`).
    Messages decoded already are left as they are.
    """
    with paused_gc():
        for record in records:
            record._decode()
