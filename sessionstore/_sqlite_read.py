"""Reading a SQLite file without SQLAlchemy: the first page of `sessions list`.

Importing SQLAlchemy is most of the start of a command that opens a store (about 0.25 s
of CPU; `docs/benchmarks.md`, "Stop 25"). On a plain SQLite file whose schema is at the
newest revision, `sessionstore sessions list` reads its page here, on the standard
library's driver opened read-only, and prints the same page the store returns:

- the statement is the store's own (`store._sessions.listing_statement`) compiled for
  SQLite, kept here as text for the first page of the three listings the command asks
  for; a test holds each text equal to the store's compilation;
- the rows become a `Page` through `session_page`, which the store calls too, and the
  stored times through `sqlite_utc`, the store's result processor on SQLite;
- the schema counts only at the revision the scripts' headers name newest
  (`scanned_head`, also the store's check without alembic).

Anything else (a cursor, a file at another revision, a file that cannot be read) returns
None, and the command opens the store as before, which says what is wrong. This module
sits outside `store/` because importing that package loads SQLAlchemy.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import sqlite3
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import closing, contextmanager
from datetime import UTC, datetime
from functools import cache, lru_cache
from pathlib import Path
from typing import Any, TypeVar

from sessionstore.errors import SchemaError
from sessionstore.models import Page, Session

_T = TypeVar("_T")

__all__ = [
    "LISTING_COLUMNS",
    "LISTING_FILTERS",
    "VERSION_TABLE",
    "decode_cursor",
    "encode_cursor",
    "first_page",
    "listing_sql",
    "read_at_head",
    "read_file",
    "scanned_head",
    "script_location",
    "session_model",
    "session_page",
    "shipped_head",
    "sqlite_utc",
]

VERSION_TABLE = "sessionstore_alembic_version"
"""alembic's version table, named so it never clashes with the host application's."""


# ── the scripts' newest revision, without alembic ───────────────────────────────


@cache
def script_location() -> Path:
    """The directory of the migration scripts (in a wheel, or at the top of a checkout)."""
    package = Path(__file__).resolve().parent
    packaged = package / "_migrations"
    if packaged.is_dir():
        return packaged
    checkout = package.parent / "migrations"
    if checkout.is_dir():
        return checkout
    raise SchemaError("sessionstore's migration scripts are missing from this installation")


_HEADER = re.compile(
    r"^(?P<key>revision|down_revision)\s*(?::[^=]*)?=\s*(?P<value>None|\"[^\"]*\"|'[^']*')\s*$",
    flags=re.MULTILINE,
)
"""A script's `revision` or `down_revision` line, as the template writes them."""


@cache
def shipped_head() -> str | None:
    """The newest revision this version ships, read without alembic (see `scanned_head`)."""
    return scanned_head(script_location() / "versions")


def scanned_head(versions: Path) -> str | None:
    """The newest revision of the scripts in `versions`, read from their headers.

    None when the scripts are not a single plain chain of one revision each (a merge,
    a branch, a header this scan cannot read): the store's check then asks alembic. A
    test keeps the result equal to alembic's head.
    """
    revisions: dict[str, str | None] = {}
    for script in versions.glob("*.py"):
        found = {m["key"]: m["value"] for m in _HEADER.finditer(script.read_text("utf-8"))}
        if "revision" not in found or found["revision"] == "None":
            return None
        down = found.get("down_revision", "None")
        revisions[found["revision"][1:-1]] = None if down == "None" else down[1:-1]
    heads = set(revisions) - set(revisions.values())
    is_chain = len(set(revisions.values())) == len(revisions)  # no revision has two children
    return heads.pop() if len(heads) == 1 and is_chain else None


# ── session rows and pages, shared with the store ──────────────────────────────


@lru_cache(maxsize=4096)
def sqlite_utc(value: str | None) -> datetime | None:
    """Parse a time as SQLAlchemy stores it on SQLite (UTC, no offset) to an aware datetime."""
    if value is None:
        return None
    return datetime.fromisoformat(value).replace(tzinfo=UTC)


def session_model(values: Mapping[Any, Any]) -> Session:
    """Build a `Session` from a sessions row's mapping (or the values it was inserted with)."""
    return Session(
        id=values["id"],
        app_name=values["app_name"],
        user_id=values["user_id"],
        title=values["title"],
        metadata=values["metadata"],
        active_loop_id=values["active_loop_id"],
        loop_count=values["loop_count"],
        version=values["version"],
        created_at=values["created_at"],
        updated_at=values["updated_at"],
    )


def session_page(rows: Sequence[Mapping[Any, Any]], limit: int) -> Page:
    """The page of the first `limit` of `rows` (the listing reads one more, to know of a next)."""
    items = [session_model(row) for row in rows[:limit]]
    next_cursor = encode_cursor(items[-1]) if len(rows) > limit else None
    return Page(items=items, next_cursor=next_cursor)


def encode_cursor(session: Session) -> str:
    """The cursor of the page after the one `session` ends."""
    last = [session.created_at.isoformat(), session.id, session.app_name, session.user_id]
    return base64.urlsafe_b64encode(json.dumps(last).encode()).decode()


def decode_cursor(cursor: str) -> tuple[datetime, list[str]]:
    """Return the time and `[id, app_name, user_id]` of a cursor (`[id]` from older ones)."""
    invalid = f"invalid cursor {cursor!r}: pass a next_cursor from list_sessions"
    try:
        created_at, *last = json.loads(base64.urlsafe_b64decode(cursor.encode()))
        moment = datetime.fromisoformat(created_at)
    except (binascii.Error, ValueError, TypeError) as exc:
        raise ValueError(invalid) from exc
    if moment.tzinfo is None or len(last) not in (1, 3):  # cursors this store writes
        raise ValueError(invalid)
    return moment, [str(value) for value in last]


# ── the first page, on the standard library's driver ───────────────────────────

_TABLE = "sessionstore_sessions"
LISTING_COLUMNS = (
    "id",
    "app_name",
    "user_id",
    "title",
    "metadata",
    "active_loop_id",
    "version",
    "loop_count",
    "created_at",
    "updated_at",
)
"""The sessions table's columns, in the order the store's `select(sessions)` reads them."""

LISTING_FILTERS: tuple[tuple[str, ...], ...] = ((), ("app_name",), ("app_name", "user_id"))
"""The filters of the first pages read here: none, the application, the application and user."""


def listing_sql(filters: tuple[str, ...]) -> str:
    """The store's listing statement for a first page with `filters`, compiled for SQLite.

    Its parameters, in order: each filter's value, the number of rows, the offset (0).
    """
    columns = ", ".join(f"{_TABLE}.{name}" for name in LISTING_COLUMNS)
    where = " AND ".join(f"{_TABLE}.{name} = ?" for name in filters)
    return (
        f"SELECT {columns} \nFROM {_TABLE} "
        + (f"\nWHERE {where} " if where else "")
        + f"ORDER BY {_TABLE}.created_at DESC, {_TABLE}.id DESC, {_TABLE}.app_name DESC, "
        f"{_TABLE}.user_id DESC\n LIMIT ? OFFSET ?"
    )


@contextmanager
def read_at_head(uri: str, *, timeout: float) -> Iterator[sqlite3.Connection | None]:
    """A read transaction on the SQLite file at `uri`, or None when it is not at the head.

    The connection when the file's schema is at the revision the scripts name newest
    (`shipped_head`), with a read transaction open (the revision check and every read
    after it see one snapshot); None otherwise. Closing the connection at the end rolls
    the read back. A `sqlite3.Error` (no such file, not a database) is the caller's.
    """
    head = shipped_head()
    with closing(sqlite3.connect(uri, uri=True, timeout=timeout, isolation_level=None)) as db:
        db.execute("BEGIN")
        revisions = [row[0] for row in db.execute(f"SELECT version_num FROM {VERSION_TABLE}")]
        yield db if head is not None and revisions == [head] else None


def read_file(
    uri: str, timeout: float, read: Callable[[sqlite3.Connection], _T | None]
) -> _T | None:
    """`read(connection)` in one read transaction of the SQLite file at `uri`, or None.

    None when the file is at another revision than the newest, or a driver error stops
    the read: the command then reads through the store, which says what is wrong.
    """
    try:
        with read_at_head(uri, timeout=timeout) as db:
            return None if db is None else read(db)
    except sqlite3.Error:
        return None


def first_page(
    uri: str,
    *,
    timeout: float,
    limit: int,
    app_name: str | None = None,
    user_id: str | None = None,
) -> Page | None:
    """Read the first page of sessions from the SQLite file at `uri` (a `file:` URI).

    Returns None when this cannot answer as the store would: a filter by user without
    one by application, a schema at another revision than the newest, or any error
    (the store then reads, or says what is wrong).
    """
    if user_id is not None and app_name is None:
        return None
    values = [value for value in (app_name, user_id) if value is not None]
    filters = ("app_name", "user_id")[: len(values)]
    try:
        with read_at_head(uri, timeout=timeout) as db:
            if db is None:
                return None
            cursor = db.execute(listing_sql(filters), (*values, limit + 1, 0))
            return session_page([_session_row(row) for row in cursor], limit)
    except (sqlite3.Error, ValueError):
        return None  # the store's path reads it, or raises what it says


def _session_row(row: tuple[Any, ...]) -> dict[str, Any]:
    """A sessions row as the store's SQLite types read it: JSON decoded, times aware UTC."""
    values = dict(zip(LISTING_COLUMNS, row, strict=True))
    values["metadata"] = None if values["metadata"] is None else json.loads(values["metadata"])
    values["created_at"] = sqlite_utc(values["created_at"])
    values["updated_at"] = sqlite_utc(values["updated_at"])
    return values
