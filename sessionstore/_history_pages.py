"""A chain's raw history a page at a time: the paging `iter_history` and a SQLite file share.

The chain and each loop's message count are read once, when the read begins
(`chain_counts`); a page then reads each loop from the position reached up to the count
it had then, so messages appended since are not read, and every page can be a short
transaction of its own. How a loop's range is read is the caller's (the store's
statement through SQLAlchemy, or the same statement as SQLite text on `sqlite3`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

__all__ = ["history_page"]

_T = TypeVar("_T")


def history_page(
    chain: tuple[Sequence[int], Sequence[int]],
    start: tuple[int, int],
    size: int,
    read_range: Callable[[int, int, int], list[_T]],
) -> tuple[list[_T], tuple[int, int]]:
    """Return up to `size` messages of `chain` from `start`, and where the next page starts.

    `chain` is the loops' ids and message counts, root first; `start` is a loop's index
    in it and a position in that loop; `read_range(loop_id, start, stop)` reads a loop's
    messages at positions `start` to `stop` (excluded), in order.
    """
    ids, counts = chain
    index, position = start
    page: list[_T] = []
    while index < len(ids) and len(page) < size:
        stop = min(counts[index], position + size - len(page))
        if position < stop:
            page += read_range(ids[index], position, stop)
            position = stop
        if position >= counts[index]:
            index, position = index + 1, 0
    return page, (index, position)
