"""The schema's column types: aware UTC times, NUL-safe JSON payloads and strings, ids.

Shared by the tables (`_tables`) and the statements that bind or read these types
outside a table (`_search`). Migrations keep frozen copies of their own (see 0001).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import BigInteger, DateTime, Dialect, Integer
from sqlalchemy.types import TypeDecorator

from sessionstore._sqlite_read import sqlite_utc
from sessionstore.models import SESSION_ID_MAX_LENGTH
from sessionstore.store._nul import NulSafeJSON, NulSafeJSONDocument, NulSafeString

__all__ = ["Id", "JSONPayload", "MessagePayload", "SessionId", "UTCDateTime", "sqlite_utc"]

# JSON on SQLite, JSONB on PostgreSQL, where NUL characters are encoded (see _nul.py).
JSONPayload = NulSafeJSON()
# The raw messages' payloads: `json` on PostgreSQL, their text kept (migration 0014).
MessagePayload = NulSafeJSONDocument()
# Every string column is a NulSafeString (VARCHAR, with NUL encoded on PostgreSQL), sized by
# the limits the models and the store check before writing (`sessionstore.models`), so no
# backend refuses what another accepts.
SessionId = NulSafeString(SESSION_ID_MAX_LENGTH)
# SQLite only auto-increments an INTEGER PRIMARY KEY, which is 64-bit there anyway.
Id = BigInteger().with_variant(Integer(), "sqlite")


class UTCDateTime(TypeDecorator[datetime]):
    """An aware UTC datetime that survives SQLite, which stores no time zone.

    Naive datetimes are refused on the way in; values read back are always aware UTC.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        """Refuse naive datetimes; store UTC (without an offset on SQLite)."""
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime: sessionstore stores aware UTC datetimes only")
        value = value.astimezone(UTC)
        # SQLite compares the stored text, so every value is written in one offset-free form.
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        """Return an aware UTC datetime."""
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)

    def result_processor(self, dialect: Dialect, coltype: Any) -> Any:
        """On SQLite, parse the stored text straight to an aware datetime (memoised).

        A bulk read of messages holds a few distinct times (one per append call), so
        most values are a cache hit instead of a regular-expression parse and a copy.
        """
        if dialect.name == "sqlite":
            return sqlite_utc
        return super().result_processor(dialect, coltype)
