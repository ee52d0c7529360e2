"""The store's full-text search over raw messages and summaries (the facade over `_search`)."""

from __future__ import annotations

from sqlalchemy import Connection

from sessionstore._search_core import search_terms
from sessionstore.models import SearchHit
from sessionstore.store._handle import _Handle

__all__ = ["SearchMethods"]


class SearchMethods(_Handle):
    """`SessionStore`'s search."""

    async def search(
        self,
        query: str,
        *,
        session_id: str | None = None,
        limit: int = 20,
        include_summaries: bool = False,
        app_name: str | None = None,
        user_id: str | None = None,
    ) -> list[SearchHit]:
        """Search the text of raw messages, best match first, with the database's own engine.

        Every word of `query` must appear (case-insensitively, whole words; ASCII
        punctuation separates words, so `read_file` finds "read file" and "read-file").
        The query is never read as full-text syntax: quotes, `AND`, `*` or `NEAR(` are
        plain characters or words. A tenant handle searches only its tenant's sessions.

        >>> hits = await store.for_tenant("app", "ada").search("failing test", limit=5)

        Args:
            query: The words to find.
            session_id: Search only this session.
            limit: The most hits to return, 1 to 1000.
            include_summaries: Also search the summaries of the newest compaction blocks
                (hits with `is_summary`).
            app_name: Filter for an unscoped handle (a tenant handle may only name its own).
            user_id: Filter for an unscoped handle (with `app_name`).

        Raises:
            ValueError: the query is blank, `limit` is out of range, or a tenant handle
                names another tenant in `app_name` or `user_id`.
            SessionNotFoundError: `session_id` is not a session this handle can see.
        """
        # A tenant handle's filters are checked against its tenant below, not with each other.
        terms = search_terms(query, limit, app_name, user_id if self._tenant is None else None)
        if self._tenant is not None:
            if app_name not in (None, self._tenant.app_name) or user_id not in (
                None,
                self._tenant.user_id,
            ):
                raise ValueError("a tenant-scoped handle searches its own tenant's sessions only")
            app_name = user_id = None

        # Imported here: a command that never searches (`context`) does not load the search.
        from sessionstore.store import _search

        def work(db: Connection, scan_pending: bool = False) -> list[SearchHit]:
            return _search.search(
                db,
                self._tenant,
                terms,
                session_id=session_id,
                app_name=app_name,
                user_id=user_id,
                limit=limit,
                include_summaries=include_summaries,
                scan_pending=scan_pending,
            )

        try:
            return await self._read(work)
        except _search.IndexBehind:
            pass  # messages appended since the last search: index them (SQLite)
        if self._runner.is_read_only:
            return await self._read(lambda db: work(db, scan_pending=True))

        def index_and_search(db: Connection) -> list[SearchHit]:
            _search.index_pending(db)
            return work(db)

        return await self._write(index_and_search)
