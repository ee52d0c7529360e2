"""Retention: purge the sessions not updated for a while, with every row they own.

A purge walks the sessions last updated before a cutoff, oldest first, a bounded batch per
transaction, and deletes each batch through its session rows (ON DELETE CASCADE), the same
path as `delete_session`: no raw message or block row is ever deleted on its own.

When the database refuses a batch, that batch is rolled back and its sessions are deleted
one per transaction: a session that cannot be deleted (a lock held past the lock timeout,
a rule of the host database) is reported in `PurgeReport.failed` and skipped, and never
keeps the other sessions, of any tenant, from being purged.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from sqlalchemy import Connection, Table, and_, func, or_, select, tuple_

from sessionstore.errors import StorageError
from sessionstore.models import PurgeFailure, PurgeReport
from sessionstore.store import _statements as sql
from sessionstore.store._handle import _Handle
from sessionstore.store._plain import is_citus
from sessionstore.store._sessions import Tenant, delete_session_rows, now
from sessionstore.store._tables import metadata

__all__ = ["MAX_BATCH_SIZE", "RetentionMethods"]

MAX_BATCH_SIZE = 10_000

_PREFIX = "sessionstore_"


def _session_tables() -> list[Table]:
    """Every table holding rows of a session, children first (the sessions table last)."""
    tables = [
        table
        for table in metadata.sorted_tables
        if "session_id" in table.c and table is not sql.sessions
    ]
    return [*reversed(tables), sql.sessions]


def _name(table: Table) -> str:
    return table.name.removeprefix(_PREFIX)


# A purge's position: (updated_at, id, app_name, user_id) of the last session it reached,
# a total order (ids are per tenant).
_Cursor = tuple[datetime, str, str, str]


def _candidates(tenant: Tenant | None, cutoff: datetime, after: _Cursor | None) -> list[Any]:
    columns = sql.sessions.c
    where: list[Any] = [columns.updated_at < cutoff]
    if tenant is not None:
        where += [columns.app_name == tenant.app_name, columns.user_id == tenant.user_id]
    if after is not None:
        moment, *last = after
        where.append(
            or_(
                columns.updated_at > moment,
                and_(
                    columns.updated_at == moment,
                    tuple_(columns.id, columns.app_name, columns.user_id) > tuple_(*last),
                ),
            )
        )
    return where


def _count_candidates(db: Connection, tenant: Tenant | None, cutoff: datetime) -> int:
    stmt = select(func.count()).select_from(sql.sessions).where(*_candidates(tenant, cutoff, None))
    return int(db.execute(stmt).scalar_one())


def _next_batch(
    db: Connection,
    tenant: Tenant | None,
    cutoff: datetime,
    after: _Cursor | None,
    size: int,
    *,
    lock: bool,
) -> list[_Cursor]:
    columns = sql.sessions.c
    stmt = (
        select(columns.updated_at, columns.id, columns.app_name, columns.user_id)
        .where(*_candidates(tenant, cutoff, after))
        .order_by(columns.updated_at, columns.id, columns.app_name, columns.user_id)
        .limit(size)
    )
    if lock:
        # Row locks on PostgreSQL, so no writer updates a session between this read and its
        # deletion (SQLite's write transaction already excludes every other writer).
        stmt = stmt.with_for_update()
    return [(row[0], row[1], row[2], row[3]) for row in db.execute(stmt).all()]


def _keys_in(table: Table, keys: Sequence[tuple[str, str, str]]) -> Any:
    """`table`'s rows of these sessions, by their keys `(session_id, app_name, user_id)`."""
    sid = table.c.id if table is sql.sessions else table.c.session_id
    return tuple_(sid, table.c.app_name, table.c.user_id).in_(list(keys))


def _count_rows(db: Connection, keys: Sequence[tuple[str, str, str]]) -> dict[str, int]:
    counts = {}
    for table in _session_tables():
        stmt = select(func.count()).select_from(table).where(_keys_in(table, keys))
        counts[_name(table)] = int(db.execute(stmt).scalar_one())
    return counts


def _purge_one(
    db: Connection, tenant: Tenant | None, cutoff: datetime, key: _Cursor
) -> dict[str, int]:
    """Purge one session of a batch the database refused, if it is still a candidate."""
    keys = [key[1:]]
    # Still last updated before the cutoff (a writer may have moved it since the batch).
    # One session's rows are on one shard, so Citus takes this row lock too.
    stmt = (
        select(sql.sessions.c.id)
        .where(*_candidates(tenant, cutoff, None), _keys_in(sql.sessions, keys))
        .with_for_update()
    )
    if db.execute(stmt).first() is None:
        return {}
    counts = _count_rows(db, keys)
    delete_session_rows(db, _keys_in(sql.sessions, keys), sql.sessions.c.updated_at < cutoff)
    return counts


def _purge_batch(
    db: Connection,
    tenant: Tenant | None,
    cutoff: datetime,
    after: _Cursor | None,
    size: int,
    dry_run: bool,
) -> tuple[list[_Cursor], dict[str, int]]:
    """Purge (or count) the next batch; return its positions and rows per table."""
    # Citus takes no row locks in a query over many shards: there the DELETE checks again
    # that each session is still expired, so one written meanwhile stays.
    batch = _next_batch(db, tenant, cutoff, after, size, lock=not dry_run and not is_citus(db))
    keys = [(session_id, app, user) for _, session_id, app, user in batch]
    if not keys:
        return batch, {}
    counts = _count_rows(db, keys)
    if not dry_run:
        delete_session_rows(db, _keys_in(sql.sessions, keys), sql.sessions.c.updated_at < cutoff)
    return batch, counts


class RetentionMethods(_Handle):
    """`SessionStore`'s retention calls."""

    async def purge(
        self,
        *,
        older_than: timedelta | datetime,
        batch_size: int = 500,
        dry_run: bool = False,
        progress: Callable[[int, int], None] | None = None,
    ) -> PurgeReport:
        """Delete every session last updated before a cutoff, with all its rows.

        A session's last update is its `updated_at`: every write to it (an append, a loop,
        a block, an event) moves it. Each purged session goes with everything it owns
        (loops, messages, blocks, events, digests), exactly as by `delete_session`; nothing
        else is touched. A tenant handle purges only its tenant's sessions.

        The sessions are purged oldest first, `batch_size` per transaction, so a large
        purge never holds a long lock; if it stops half-way, the batches done stay done
        and running it again finishes the work. If the database refuses a batch, its
        sessions are purged one per transaction instead, and a session that still cannot
        be deleted is reported in `failed` and skipped: it never blocks the others.

        Args:
            older_than: A positive `timedelta` (sessions not updated for that long) or an
                aware `datetime` (sessions not updated since then).
            batch_size: Sessions per transaction, 1 to 10,000.
            dry_run: Count what would be purged, and delete nothing.
            progress: Called after each batch with the sessions done so far and the
                total found when the purge started.

        Returns:
            The cutoff, the sessions purged and their rows per table, and the sessions
            that could not be deleted (with the error).

        Example:
            >>> report = await store.purge(older_than=timedelta(days=30))  # doctest: +SKIP
        """
        cutoff = _cutoff(older_than)
        if not 1 <= batch_size <= MAX_BATCH_SIZE:
            raise ValueError(f"batch_size must be between 1 and {MAX_BATCH_SIZE}")
        tenant = self._tenant
        total = await self._read(lambda db: _count_candidates(db, tenant, cutoff))
        rows = {_name(table): 0 for table in _session_tables()}
        after: _Cursor | None = None
        batches = done = 0
        failed: list[PurgeFailure] = []
        while True:
            work = partial(
                _purge_batch,
                tenant=tenant,
                cutoff=cutoff,
                after=after,
                size=batch_size,
                dry_run=dry_run,
            )
            try:
                batch, counts = await (self._read(work) if dry_run else self._write(work))
            except StorageError:
                if dry_run:
                    raise
                # Rolled back whole: find the session(s) at fault by deleting one at a time.
                batch, counts = await self._purge_one_by_one(
                    tenant, cutoff, after, batch_size, failed
                )
            if not batch:
                break
            batches += 1
            after = batch[-1]
            for name, count in counts.items():
                rows[name] += count
            done += len(batch)
            if progress is not None:
                progress(min(done, total), total)
            if len(batch) < batch_size:
                break
        return PurgeReport(
            cutoff=cutoff,
            dry_run=dry_run,
            sessions=rows["sessions"],
            rows=rows,
            batches=batches,
            failed=failed,
        )

    async def _purge_one_by_one(
        self,
        tenant: Tenant | None,
        cutoff: datetime,
        after: _Cursor | None,
        size: int,
        failed: list[PurgeFailure],
    ) -> tuple[list[_Cursor], dict[str, int]]:
        """Purge a batch the database refused, one session per transaction.

        A session whose deletion fails again is recorded in `failed` and skipped.
        """
        batch = await self._read(
            lambda db: _next_batch(db, tenant, cutoff, after, size, lock=False)
        )
        totals: dict[str, int] = {}
        for key in batch:
            try:
                work = partial(_purge_one, tenant=tenant, cutoff=cutoff, key=key)
                counts = await self._write(work)
            except StorageError as exc:
                _, session_id, app_name, user_id = key
                failed.append(
                    PurgeFailure(
                        session_id=session_id, app_name=app_name, user_id=user_id, error=str(exc)
                    )
                )
                continue
            for name, count in counts.items():
                totals[name] = totals.get(name, 0) + count
        return batch, totals


def _cutoff(older_than: timedelta | datetime) -> datetime:
    if isinstance(older_than, datetime):
        if older_than.tzinfo is None:
            raise ValueError("older_than must be an aware datetime (or a timedelta)")
        return older_than
    if isinstance(older_than, timedelta):
        if older_than <= timedelta(0):
            raise ValueError("older_than must be a positive duration")
        return now() - older_than
    raise TypeError("older_than must be a timedelta or an aware datetime")
