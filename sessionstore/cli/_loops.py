"""`--loop N` to a loop id, and the session's loop numbers for the output, in one read."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sessionstore.cli._render._loops import LoopNumbers
from sessionstore.errors import LoopNotFoundError

if TYPE_CHECKING:
    from sessionstore import SessionStore
    from sessionstore._file_history import FileHistory
    from sessionstore.models import LoopRecord

__all__ = ["numbered", "session_loops"]


async def session_loops(
    store: SessionStore | FileHistory, session_id: str, number: int | None = None
) -> tuple[LoopNumbers, int | None]:
    """Return the session's loop numbers and the id of its loop `number` (None: the active one).

    One query (`list_loops`) whatever the session's size. A number the session has no loop
    for raises `LoopNotFoundError` naming that number, as the store does for an unknown id.
    """
    return numbered(await store.list_loops(session_id), session_id, number)


def numbered(
    loops: list[LoopRecord], session_id: str, number: int | None
) -> tuple[LoopNumbers, int | None]:
    """`session_loops` from the session's loops, read by the caller."""
    numbers = LoopNumbers(loops)
    if number is None:
        return numbers, None
    loop_id = numbers.loop_id(number)
    if loop_id is None:
        raise LoopNotFoundError(number, session_id=session_id)
    return numbers, loop_id
