"""The store's calls on provider usage (the facade over `_usage`)."""

from __future__ import annotations

from sqlalchemy import Connection

from sessionstore.models import SessionUsage, Usage, UsageRecord
from sessionstore.models._limits import TOOL_NAME_MAX_LENGTH, check_count, check_id, check_text
from sessionstore.store import _sessions, _usage
from sessionstore.store._handle import _Handle
from sessionstore.store._sessions import now

__all__ = ["UsageMethods"]


class UsageMethods(_Handle):
    """`SessionStore`'s calls on provider usage."""

    async def record_usage(
        self,
        session_id: str,
        usage: Usage,
        *,
        loop_id: int | None = None,
        turn_index: int | None = None,
        model: str | None = None,
    ) -> UsageRecord:
        """Record the usage of one model call whose message did not carry it.

        An `AssistantMessage` appended with `usage` is recorded by `append_messages`
        itself, on its turn; call this for the rest: a call whose usage arrived after its
        message was stored, a retried call, or a call that produced no stored message.

        Args:
            session_id: The session.
            usage: The tokens the provider reported.
            loop_id: The loop; the active loop by default.
            turn_index: The turn the call answered; the loop's last turn by default.
            model: The model that was called.

        Raises:
            SessionNotFoundError: no such session (or another tenant's).
            LoopNotFoundError: `loop_id` is not a loop of this session.
            NotFoundError: the loop has no such turn (or the session no loop yet).
            ValueError: `loop_id` or `turn_index` outside its column's range, a token
                count past `2**63 - 1`, or `model` longer than 255 characters.
        """
        if not isinstance(usage, Usage):
            raise TypeError(f"usage must be a Usage, got {type(usage).__name__}")
        check_id(loop_id, "loop_id")
        check_count(turn_index, "turn_index")
        if model is not None:
            check_text(model, "model", max_length=TOOL_NAME_MAX_LENGTH)
        moment = now()

        def work(db: Connection) -> UsageRecord:
            key = self._key(db, session_id)
            locked = _sessions.lock(db, key, moment)
            target = loop_id if loop_id is not None else locked.active_loop_id
            return _usage.insert_usage(db, key, target, turn_index, usage, model, moment)

        return await self._write(work)

    async def usage(self, session_id: str) -> SessionUsage:
        """Return a session's recorded usage: per turn, per loop and in total.

        Every loop counts, branches included: a call that was made was paid for.

        Raises:
            SessionNotFoundError: no such session (or another tenant's).
        """

        def work(db: Connection) -> SessionUsage:
            key = self._key(db, session_id)
            _sessions.visible_session(db, key)
            return _usage.session_usage(db, key)

        return await self._read(work)
