"""Loop numbers as the CLI shows them: 1, 2, ... within each session, in order of creation.

A loop's id is unique in the database, so it depends on every session written before (a
second `sessionstore demo` in the same file had loops 13-24). Every output of the CLI
names a loop by its number in its session instead (`LoopRecord.number`, `sequence + 1`,
a column every loop has: no migration, no extra query beyond the session's loop list), and
`--loop N` takes that number. JSON outputs keep the ids (the store API's) and add numbers.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sessionstore.models import LoopRecord

__all__ = ["LoopNumbers"]


class LoopNumbers:
    """Each loop's number in its session, by loop id, read once from the session's loops."""

    def __init__(self, loops: Iterable[LoopRecord]) -> None:
        self._numbers = {loop.id: loop.number for loop in loops}
        self._ids = {number: loop_id for loop_id, number in self._numbers.items()}

    def __call__(self, loop_id: int) -> int:
        """Return the number of the loop with this id (a loop of the session)."""
        return self._numbers[loop_id]

    def optional(self, loop_id: int | None) -> int | None:
        """Return the loop's number, or None for no loop."""
        return None if loop_id is None else self._numbers[loop_id]

    def all(self, loop_ids: Iterable[int]) -> list[int]:
        """Return the numbers of these loops, in the same order."""
        return [self._numbers[loop_id] for loop_id in loop_ids]

    def loop_id(self, number: int) -> int | None:
        """Return the id of the session's loop with this number, or None if it has none."""
        return self._ids.get(number)
