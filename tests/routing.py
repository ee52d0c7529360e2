"""The statement-routing rule: every statement the store sends names the session key.

During the PostgreSQL suite, the `store` fixture records every statement its engine sends
(`Recorder`) as asyncpg receives it: SQLAlchemy's statements and those the store sends
straight to the driver (`_pg_append.insert_on_driver`, `_plain.read_plain`) alike, with no
cursor listener, which would send the store down SQLAlchemy's path. When the run ends, each
must bind the distribution column to a value, in its WHERE (`session_id = $n`, or
`sessionstore_sessions.id = $n`) or in the VALUES of an INSERT of the session's rows, so
that Citus sends it to the one node that holds the session. The
calls that read or write many sessions by design fan out: `FAN_OUT` lists them, each with
the statements it may send (docs/guides/scale-out.md lists the same calls).
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

__all__ = ["FAN_OUT", "Recorder", "routed", "violations"]

_PARAM = r"(?:\$\d+|%\(\w+\)s|:\w+)"

_ROUTED = (
    # A child table's rows of one session (also a CTE's anchor, a join's side).
    re.compile(rf"\bsession_id = {_PARAM}"),
    # The sessions table by its distribution column.
    re.compile(rf"\bsessionstore_sessions\.id = {_PARAM}"),
    # An INSERT of rows that carry their session's key.
    re.compile(r"^\s*INSERT INTO sessionstore_\w+ \((?:session_id|id), ", re.S),
)

FAN_OUT: dict[str, re.Pattern[str]] = {
    # `list_sessions`: a page of all sessions, or of a tenant's (spread over the shards).
    "list_sessions": re.compile(
        r"ORDER BY sessionstore_sessions\.created_at DESC, sessionstore_sessions\.id DESC"
    ),
    # `search` without `session_id`: every session's messages (or the tenant's).
    "search across sessions": re.compile(r"(?:_fts MATCH|search_vector @@)", re.S),
    # `purge`: the sessions updated before a cutoff, their rows counted, then deleted.
    "purge": re.compile(
        r"sessionstore_sessions\.updated_at < |IN \(__\[POSTCOMPILE|\) IN \(", re.S
    ),
    # `verify`: the keys of the sessions to check (each is then checked by its key).
    "verify": re.compile(
        r"^SELECT sessionstore_sessions\.id, sessionstore_sessions\.app_name, "
        r"sessionstore_sessions\.user_id\s+FROM sessionstore_sessions\s.*ORDER BY "
        r"sessionstore_sessions\.created_at, ",
        re.S,
    ),
}
"""The calls that fan out by design, with what their statements look like."""


def routed(statement: str) -> bool:
    """Whether a statement binds the distribution column (one node can answer it)."""
    return any(pattern.search(statement) for pattern in _ROUTED)


def fan_out_call(statement: str) -> str | None:
    """The documented fan-out call a statement belongs to, if any."""
    for call, pattern in FAN_OUT.items():
        if pattern.search(statement):
            return call
    return None


@dataclass
class Recorder:
    """Every distinct statement the recorded engines sent to a sessionstore table."""

    statements: set[str] = field(default_factory=set)

    def record(self, statement: str) -> None:
        """Keep a statement the store sends (a test's own SQL is left out)."""
        if "sessionstore_" in statement and _sent_by_the_store():
            self.statements.add(statement)

    def engine_kwargs(self) -> dict[str, Any]:
        """What to pass to `SessionStore.from_url` (PostgreSQL) to record its statements.

        Its connections are asyncpg connections that record each statement as it is sent,
        in the caller's stack: those SQLAlchemy prepares (it runs each as a prepared
        statement, prepared once per connection) and those run on the connection itself
        (`fetch`, `execute`, ..., as `insert_on_driver` does). asyncpg's query loggers are
        no help here: they see no prepared statement, and run later, out of the stack.
        """
        return {"connect_args": {"connection_class": _recording(self)}}


def _recording(recorder: Recorder) -> type[Any]:
    """An asyncpg connection class that shows each statement to `recorder` first."""
    import asyncpg  # type: ignore[import-untyped]  # asyncpg ships no type hints

    class RecordingConnection(asyncpg.Connection):  # type: ignore[misc]  # untyped base
        __slots__ = ()

        async def prepare(self, query: str, **kwargs: Any) -> Any:
            recorder.record(query)
            return await super().prepare(query, **kwargs)

        async def execute(self, query: str, *args: Any, **kwargs: Any) -> Any:
            recorder.record(query)
            return await super().execute(query, *args, **kwargs)

        async def executemany(self, command: str, args: Any, **kwargs: Any) -> Any:
            recorder.record(command)
            return await super().executemany(command, args, **kwargs)

        async def fetch(self, query: str, *args: Any, **kwargs: Any) -> Any:
            recorder.record(query)
            return await super().fetch(query, *args, **kwargs)

        async def fetchrow(self, query: str, *args: Any, **kwargs: Any) -> Any:
            recorder.record(query)
            return await super().fetchrow(query, *args, **kwargs)

        async def fetchval(self, query: str, *args: Any, **kwargs: Any) -> Any:
            recorder.record(query)
            return await super().fetchval(query, *args, **kwargs)

    return RecordingConnection


def _sent_by_the_store() -> bool:
    """Whether the statement comes from a store call (not from a test's own SQL).

    The connection's coroutine runs in its caller's await chain, so the frames of the
    store's calls (or of SQLAlchemy's, called by a test) are on the stack.
    """
    frame: FrameType | None = sys._getframe(2)
    while frame is not None:
        if frame.f_globals.get("__name__", "").startswith("sessionstore.store."):
            return True
        frame = frame.f_back
    return False


def violations(statements: set[str]) -> list[str]:
    """The statements that neither bind the session key nor belong to a fan-out call."""
    return sorted(s for s in statements if not routed(s) and fan_out_call(s) is None)
