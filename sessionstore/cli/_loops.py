"""`--loop N` to a loop id, and the session's loop numbers for the output, in one read."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sessionstore.cli._render._loops import LoopNumbers
from sessionstore.errors import LoopNotFoundError

if TYPE_CHECKING:
    from sessionstore import SessionStore

__all__ = ["session_loops"]


async def session_loops(
    store: SessionStore, session_id: str, number: int | None = None
) -> tuple[LoopNumbers, int | None]:
    """Return the session's loop numbers and the id of its loop `number` (None: the active one).

    One query (`list_loops`) whatever the session's size. A number the session has no loop
    for raises `LoopNotFoundError` naming that number, as the store does for an unknown id.
    """
    numbers = LoopNumbers(await store.list_loops(session_id))
    if number is None:
        return numbers, None
    loop_id = numbers.loop_id(number)
    if loop_id is None:
        raise LoopNotFoundError(number, session_id=session_id)
    return numbers, loop_id
