"""What `SessionStore.verify` found: the integrity report of a database."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

__all__ = ["IntegrityCheck", "IntegrityProblem", "IntegrityReport"]

IntegrityCheck = Literal["hash", "payload", "positions", "turns", "counters", "loops", "provenance"]
"""The checks `verify` makes, one name per kind of problem."""


class IntegrityProblem(BaseModel):
    """One thing wrong in the stored data."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    check: IntegrityCheck
    """Which check found it: `hash` (a message's content no longer matches its hash),
    `payload` (a message that cannot be read), `positions` (a gap or a duplicate in a
    loop), `turns` (a turn index that turn assignment would not give), `counters` (a
    loop's or session's cached counts), `loops` (the chain: parents, depths, the active
    loop), `provenance` (a block whose ranges or covered messages do not fit its loop, or a
    loop's current block over a turn that the result of a call it waited for joined after
    the block was written)."""
    session_id: str
    loop_id: int | None = None
    message_id: int | None = None
    block_id: int | None = None
    detail: str
    """What is wrong, in words."""


class IntegrityReport(BaseModel):
    """The result of `SessionStore.verify`: what was checked and every problem found."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    sessions: int = 0
    loops: int = 0
    messages: int = 0
    blocks: int = 0
    problems: list[IntegrityProblem] = []

    @property
    def is_ok(self) -> bool:
        """True when no problem was found."""
        return not self.problems
