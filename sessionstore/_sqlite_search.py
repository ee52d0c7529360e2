"""`sessionstore search` on a SQLite file without SQLAlchemy, on `sqlite3`.

The statements and the hits are `_search_core`'s, which the store's search runs too; here
they run on a read-only connection at the newest revision (`read_at_head`), their rows
converted as the store's column types convert them on SQLite (a time by `sqlite_utc`, a
JSON list by `json.loads`). The session is found as the unscoped store finds it, so a
missing or shared id raises what the store raises.

The raw messages' index is brought up to date by a search that writes (migration 0009).
This reader does not write: when messages were appended since the index was last brought
up to date, it answers None and the command searches through the store, which indexes
them first (a read-only store would match them word by word instead, and leave every
later search that work again). Any driver error answers None too: the store then says
what is wrong.
"""

from __future__ import annotations

import json
import sqlite3
from collections import namedtuple
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from sessionstore._context_source import check_session_id, visible_session
from sessionstore._search_core import INDEXED_THROUGH, NEWEST, RowKind, search_rows
from sessionstore._sqlite_context import SqliteSource, converted_rows, session_key_of
from sessionstore._sqlite_read import read_file, sqlite_utc
from sessionstore.models import SearchHit

__all__ = ["search_file"]

_CONVERTERS: dict[str, Callable[[Any], Any]] = {"created_at": sqlite_utc, "covers": json.loads}
"""The columns of a search's rows the store's types convert on SQLite (`store/_search._typed`)."""


def search_file(
    uri: str,
    *,
    timeout: float,
    terms: list[str],
    session_id: str | None,
    app_name: str | None,
    user_id: str | None,
    limit: int,
    include_summaries: bool,
) -> list[SearchHit] | None:
    """The unscoped store's search of the SQLite file at `uri`, or None (see the module).

    `terms` are the query's (`query_terms`), `limit` and the filters checked as the
    store checks them (`_search_core.search_terms`).
    """
    if session_id is not None:
        check_session_id(session_id)

    def read(db: sqlite3.Connection) -> list[SearchHit] | None:
        key = None
        if session_id is not None:
            src = SqliteSource(db)
            key = session_key_of(src, session_id)
            visible_session(src, key)
        if not terms:
            return []
        through = db.execute(INDEXED_THROUGH).fetchone()[0]
        if db.execute(NEWEST).fetchone()[0] > through:
            return None  # messages not indexed yet: the store's search indexes them
        return search_rows(
            _runner(db),
            terms,
            postgres=False,
            key=key,
            app_name=app_name,
            user_id=user_id,
            tenant=None,
            limit=limit,
            include_summaries=include_summaries,
            behind=None,
        )

    return read_file(uri, timeout, read)


def _runner(db: sqlite3.Connection) -> Callable[[RowKind, str, Mapping[str, Any]], Iterable[Any]]:
    """Run a search statement on `db`: rows as named tuples, converted as the store's."""
    row_types: dict[str, Any] = {}

    def run(kind: RowKind, sql: str, params: Mapping[str, Any]) -> Iterable[Any]:
        cursor = db.execute(sql, dict(params))
        fields = tuple(column[0] for column in cursor.description)
        row_type = row_types.get(kind)
        if row_type is None:
            row_type = row_types[kind] = namedtuple(f"{kind}_hit_row", fields)
        return converted_rows(cursor, row_type, [_CONVERTERS.get(name) for name in fields])

    return run
