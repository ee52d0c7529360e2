"""A session's provider usage, summed per turn, loop and session, read through a `Source`.

The store reads it on its connection (`store._source.StoreSource`) and `sessions show`
on a SQLite file reads it on the standard library's driver (`_sqlite_context`), through
the same two named statements (`usage_recorded`: the usage rows `record_usage` wrote;
`usage_messages`: the usage the appended assistant messages carry in their payloads)
and the same sums here. No SQLAlchemy: a command that reads a file without it imports
this.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sessionstore._context_source import SessionKey, Source
from sessionstore.models import LoopUsage, SessionUsage, TurnUsage, Usage
from sessionstore.models._limits import STORED

__all__ = ["HALF", "USAGE_FIELDS", "USAGE_STATEMENTS", "session_usage"]

USAGE_FIELDS = (
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "reasoning_tokens",
)
"""The token counts of `Usage`, which are also the usage table's columns."""

HALF = 2**32
"""Each count is summed as its high and low 32 bits (`store._usage.split_sums`)."""

USAGE_STATEMENTS = ("usage_recorded", "usage_messages")
"""The statements whose rows are `(loop_id, turn_index, calls, high, low, high, low, ...)`."""


def session_usage(src: Source, key: SessionKey) -> SessionUsage:
    """Return a session's usage per turn and loop, with its total.

    The caller has checked that the session is visible. Every loop counts, branches
    included: a call that was made was paid for.
    """
    sums: dict[tuple[int, int], list[int]] = {}
    for name in USAGE_STATEMENTS:
        for row in src.rows(name, key.params):
            _add(sums, row)
    turns_by_loop: dict[int, list[TurnUsage]] = {}
    for (loop_id, turn_index), (calls, *halves) in sorted(sums.items()):
        totals = [high * HALF + low for high, low in zip(halves[::2], halves[1::2], strict=True)]
        # A total may pass the limit of one call's count: it is read, not stored.
        usage = Usage.model_validate(dict(zip(USAGE_FIELDS, totals, strict=True)), context=STORED)
        turns_by_loop.setdefault(loop_id, []).append(
            TurnUsage(turn_index=turn_index, calls=calls, usage=usage)
        )
    loops = [
        LoopUsage(
            loop_id=loop_id,
            calls=sum(t.calls for t in turns),
            usage=sum((t.usage for t in turns), Usage()),
            turns=turns,
        )
        for loop_id, turns in turns_by_loop.items()
    ]
    return SessionUsage(
        session_id=key.session_id,
        calls=sum(loop.calls for loop in loops),
        usage=sum((loop.usage for loop in loops), Usage()),
        loops=loops,
    )


def _add(sums: dict[tuple[int, int], list[int]], row: Sequence[Any]) -> None:
    loop_id, turn_index, calls, *halves = row
    into = sums.setdefault((loop_id, turn_index), [0] * (1 + len(halves)))
    for i, value in enumerate((calls, *halves)):
        into[i] += int(value)
