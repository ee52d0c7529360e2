"""Engines: URL checks, driver selection, SQLite pragmas and pools; every dialect quirk lives here.

`make_engine(url)` accepts `sqlite+aiosqlite://` and `postgresql+asyncpg://` URLs (and
the driverless `sqlite://` and `postgresql://` forms, which pick those drivers).
"""

from __future__ import annotations

import asyncio
import importlib.util
import math
import sqlite3
import threading
import weakref
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import URL, Connection, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, OperationalError, SQLAlchemyError
from sqlalchemy.pool import StaticPool

from sessionstore._defaults import DEFAULT_LOCK_TIMEOUT, DEFAULT_URL
from sessionstore.errors import ConfigurationError, MissingDependencyError
from sessionstore.store._db_errors import (
    connection_error,
    is_busy,
    is_sqlite_busy,
    storage_error,
)

if TYPE_CHECKING:
    # Imported where an async engine is made: SQLAlchemy's asyncio extension imports its
    # ORM, which a store on a SQLite file does not need to answer a call (see
    # `SqliteFile`).
    from sqlalchemy.ext.asyncio import AsyncEngine
    from sqlalchemy.pool import PoolProxiedConnection

__all__ = [
    "DEFAULT_LOCK_TIMEOUT",
    "DEFAULT_URL",
    "INLINE_READ_MAX_MESSAGES",
    "INLINE_WRITE_MAX_MESSAGES",
    "POSTGRES_POOL_RECYCLE_S",
    "WRITE_OPTION",
    "SqliteFile",
    "StateCache",
    "TransactionRunner",
    "is_read_only_sqlite",
    "make_engine",
    "normalize_url",
]

_T = TypeVar("_T")
_K = TypeVar("_K")
_V = TypeVar("_V")

SQLITE_WORKERS = 4
"""Worker threads (and pooled connections) for a SQLite file."""

POSTGRES_POOL_RECYCLE_S = 1800
"""Seconds after which a pooled PostgreSQL connection is replaced (instead of a ping a call)."""

INLINE_WRITE_MAX_MESSAGES = 200
"""Appends of at most this many messages try the SQLite write inline, on the event loop."""

INLINE_READ_MAX_MESSAGES = 200
"""Reads of the newest this many messages (or fewer) run inline too (see `_try_inline`)."""

WRITE_OPTION = "sessionstore_write"
"""Execution option that marks a connection's next transaction as a write transaction."""

_DRIVERS = {"sqlite": ("aiosqlite", None), "postgresql": ("asyncpg", "postgres")}


def normalize_url(url: str | URL) -> URL:
    """Parse `url` and fill in the async driver sessionstore uses for its dialect.

    Raises:
        ConfigurationError: the URL cannot be parsed, or names an unsupported database or driver.
        MissingDependencyError: the driver's extra is not installed.
    """
    try:
        parsed = make_url(url)
    except ArgumentError as exc:
        raise ConfigurationError(f"cannot parse database URL {str(url)!r}: {exc}") from exc
    backend, _, driver = parsed.drivername.partition("+")
    if backend == "postgres":
        backend = "postgresql"
    if backend not in _DRIVERS:
        raise ConfigurationError(
            f"unsupported database {backend!r}: use sqlite+aiosqlite:// or postgresql+asyncpg://"
        )
    wanted, extra = _DRIVERS[backend]
    if driver and driver != wanted:
        raise ConfigurationError(
            f"unsupported driver {driver!r} for {backend}: sessionstore is async and uses "
            f"{backend}+{wanted}://"
        )
    if importlib.util.find_spec(wanted) is None:
        hint = f"pip install 'sessionstore[{extra}]'" if extra else f"pip install {wanted}"
        raise MissingDependencyError(f"the {wanted} driver is not installed: {hint}")
    return parsed.set(drivername=f"{backend}+{wanted}")


SQLITE_SYNCHRONOUS = ("normal", "full")
"""The SQLite durability settings `make_engine` accepts (`PRAGMA synchronous`)."""


def make_engine(
    url: str | URL,
    *,
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
    synchronous: str = "normal",
    **kwargs: Any,
) -> AsyncEngine:
    """Create an `AsyncEngine` configured for sessionstore.

    On SQLite: foreign keys on, WAL journal with `synchronous=NORMAL` by default (durable
    against application crashes; a power loss can lose the last commits, never corrupt
    the file; `synchronous="full"` makes every commit survive a power loss too),
    a busy timeout for writers in other processes, and write transactions that take the
    write lock up front (`BEGIN IMMEDIATE`) so two writers never deadlock on a lock
    upgrade. A read-only URL (`sqlite+aiosqlite:///file:path.db?mode=ro&uri=true`, or
    `immutable=1` for read-only media) never writes: the journal mode is left as it is.
    On PostgreSQL: `lock_timeout` set on each connection, and no ping on every checkout
    (it costs a round trip a call): connections are recycled after
    `POSTGRES_POOL_RECYCLE_S`, and a disconnect invalidates the pool, so the next call
    gets a fresh connection.

    Args:
        url: The database URL.
        lock_timeout: Seconds a statement waits for a lock another transaction holds
            (a hung transaction holding a session) before raising `LockTimeoutError`.
        synchronous: SQLite's durability (`PRAGMA synchronous`), ignored on PostgreSQL:
            `"normal"` (the default) survives an application crash, a power cut may
            lose the last commits; `"full"` syncs the WAL on every commit, so a commit
            survives a power cut too, at the cost of a disk flush per write (the setting
            of the OpenAI Agents SDK's SQLite sessions).
        **kwargs: Passed to `create_async_engine`.

    Raises:
        ValueError: `lock_timeout` is not a positive number of seconds, or `synchronous`
            is not `"normal"` or `"full"`.
    """
    from sqlalchemy.ext.asyncio import create_async_engine

    parsed, milliseconds, level = _checked(url, lock_timeout, synchronous)
    if parsed.get_backend_name() == "sqlite":
        return _sqlite_engine(parsed, milliseconds, level, **kwargs)
    kwargs.setdefault("pool_recycle", POSTGRES_POOL_RECYCLE_S)
    # A connection setting, so it costs no round trip per transaction.
    connect_args = dict(kwargs.pop("connect_args", {}))
    settings = dict(connect_args.get("server_settings") or {})
    settings.setdefault("lock_timeout", f"{milliseconds}ms")
    connect_args["server_settings"] = settings
    return create_async_engine(parsed, connect_args=connect_args, **kwargs)


def _checked(url: str | URL, lock_timeout: float, synchronous: str) -> tuple[URL, int, str]:
    """`make_engine`'s checks: the URL with its driver, the lock timeout in ms, the level."""
    if not 0 < lock_timeout < math.inf:  # NaN fails both comparisons
        raise ValueError("lock_timeout must be a positive number of seconds")
    level: object = synchronous.lower() if isinstance(synchronous, str) else synchronous  # type: ignore[redundant-expr]  # callers without type checking
    if level not in SQLITE_SYNCHRONOUS:
        raise ValueError(f'synchronous must be "normal" or "full", not {synchronous!r}')
    return normalize_url(url), max(1, round(lock_timeout * 1000)), str(level)


def _is_memory(url: URL) -> bool:
    return url.database in (None, "", ":memory:") or "mode=memory" in str(url.query)


def is_read_only_sqlite(url: URL) -> bool:
    """Return whether a SQLite URL opens its database read-only (`mode=ro` or `immutable=1`)."""
    query = url.query
    return query.get("mode") == "ro" or query.get("immutable") == "1"


@dataclass(frozen=True, slots=True)
class _SqliteSettings:
    busy_timeout_ms: int
    is_read_only: bool
    synchronous: str = "normal"


# The settings of the SQLite engines make_engine created, so the worker-thread engine a
# TransactionRunner makes for the same file gets the same ones.
_SQLITE_SETTINGS: weakref.WeakKeyDictionary[Engine, _SqliteSettings] = weakref.WeakKeyDictionary()


def _sqlite_engine(url: URL, busy_timeout_ms: int, synchronous: str, **kwargs: Any) -> AsyncEngine:
    from sqlalchemy.ext.asyncio import create_async_engine

    in_memory = _is_memory(url)
    if in_memory:
        # Every connection to ":memory:" is a new, empty database: share one connection.
        kwargs.setdefault("poolclass", StaticPool)
    engine = create_async_engine(url, **kwargs)
    settings = _SqliteSettings(busy_timeout_ms, is_read_only_sqlite(url), synchronous)
    _SQLITE_SETTINGS[engine.sync_engine] = settings
    _configure_sqlite(engine.sync_engine, in_memory=in_memory, settings=settings)
    return engine


def _configure_sqlite(
    engine: Engine,
    *,
    in_memory: bool,
    settings: _SqliteSettings,
    busy_timeout_ms: int | None = None,
    is_pysqlite: bool = False,
) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Let SQLAlchemy's "begin" event emit BEGIN itself instead of pysqlite's implicit,
        # late BEGIN, so reads see one snapshot and writers can ask for IMMEDIATE.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA foreign_keys=ON")
        busy = settings.busy_timeout_ms if busy_timeout_ms is None else busy_timeout_ms
        cursor.execute(f"PRAGMA busy_timeout={busy}")
        # Setting the journal mode writes the file's header: a read-only database keeps
        # the mode it has (a database this store wrote is in WAL mode already).
        if not in_memory and not settings.is_read_only:
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute(f"PRAGMA synchronous={settings.synchronous.upper()}")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Connection) -> None:
        is_write = connection.get_execution_options().get(WRITE_OPTION, False)
        statement = "BEGIN IMMEDIATE" if is_write else "BEGIN"
        if not is_pysqlite:
            connection.exec_driver_sql(statement)
            return
        # Straight on the stdlib connection: through exec_driver_sql it costs 40 µs more.
        raw: Any = connection.connection.driver_connection
        if raw.in_transaction:  # begun on the connection itself (the inline write path)
            return
        try:
            raw.execute(statement)
        except sqlite3.Error as exc:
            raise OperationalError(statement, None, exc) from exc


class StateCache(Generic[_K, _V]):
    """A small bounded mapping (oldest entries dropped first) of state kept between calls.

    Entries are only ever trusted after a check against the database (for example a
    version the write lock returned), so losing one only costs a read.
    """

    def __init__(self, size: int = 4096) -> None:
        self._size = size
        self._entries: dict[_K, _V] = {}
        self._guard = threading.Lock()

    def get(self, key: _K) -> _V | None:
        return self._entries.get(key)

    def put(self, key: _K, value: _V) -> None:
        with self._guard:
            self._entries.pop(key, None)
            self._entries[key] = value
            while len(self._entries) > self._size:
                del self._entries[next(iter(self._entries))]


class SqliteFile:
    """A SQLite file's URL and settings, and the async engine of its store, made on first use.

    A store on a SQLite file runs every call on the standard library's driver in its
    worker threads (`TransactionRunner`). Its async engine (aiosqlite, through
    SQLAlchemy's asyncio extension, which imports the ORM) serves only
    `SessionStore.engine`, the migrations and the schema check's slow path, so a command
    that only reads neither makes it nor imports them.
    """

    def __init__(self, url: URL, settings: _SqliteSettings, make: Callable[[], AsyncEngine]):
        self.url = url
        self.settings = settings
        self._make = make
        self.engine: AsyncEngine | None = None
        """The engine, once made."""

    @classmethod
    def of(cls, url: str | URL, **engine_kwargs: Any) -> SqliteFile | None:
        """Return the deferred engine of a SQLite file store, None for any other store.

        `url` and `engine_kwargs` are checked as `make_engine` checks them, now. Only
        `lock_timeout` and `synchronous` are deferred: with any other engine argument
        (for `create_async_engine`) this returns None, and the caller makes the engine.
        """
        if set(engine_kwargs) - {"lock_timeout", "synchronous"}:
            return None
        lock_timeout = engine_kwargs.get("lock_timeout", DEFAULT_LOCK_TIMEOUT)
        synchronous = engine_kwargs.get("synchronous", "normal")
        parsed, milliseconds, level = _checked(url, lock_timeout, synchronous)
        if parsed.get_backend_name() != "sqlite" or _is_memory(parsed):
            return None
        settings = _SqliteSettings(milliseconds, is_read_only_sqlite(parsed), level)
        return cls(parsed, settings, lambda: make_engine(url, **engine_kwargs))

    def get(self) -> AsyncEngine:
        """Return the engine, made now if it was not yet."""
        if self.engine is None:
            self.engine = self._make()
        return self.engine


class TransactionRunner:
    """Runs a unit of work, a sync function of a `Connection`, in one transaction.

    On PostgreSQL (and in-memory SQLite) the work runs through
    `AsyncConnection.run_sync` on the async engine. On a SQLite file it runs in a
    worker thread on the standard library's sqlite3 driver, the same model aiosqlite
    uses, but with one thread hop for the whole transaction instead of one for every
    cursor operation: appends and reads are several times faster.

    A small write (`inline=True`) on a SQLite file first tries to run on the event loop's
    thread, on a connection whose busy timeout is 0: it takes the write lock with
    `BEGIN IMMEDIATE`, or fails at once if another connection (another thread or
    process) holds it, and then waits for it in a worker thread as any other call. Once
    the lock is held nothing else can make it wait (WAL readers never block a writer),
    so the event loop is never blocked on a lock, and the thread hop, which costs more
    than the whole transaction of one append, is saved. Such a call still yields to the
    event loop once before it returns, so other tasks get their turn on every call.

    Driver errors are raised as `StorageError`, with the original chained.
    """

    def __init__(self, engine: AsyncEngine | SqliteFile) -> None:
        self._engine = engine
        url = engine.url
        self._url = url
        self.is_read_only = url.get_backend_name() == "sqlite" and is_read_only_sqlite(url)
        """Whether the store opened a SQLite database read-only (it can never write)."""
        self.loop_states: StateCache[tuple[Any, int], Any] = StateCache()
        """Each loop's append state as this store last committed it (see `_message_api`)."""
        self.last_appends: StateCache[str, Any] = StateCache()
        """By session id: the key and loop state of this store's last append to it."""
        self.appends_alone = url.get_backend_name() == "postgresql"
        """Whether an append may be one statement outside a transaction block (`run_alone`):
        PostgreSQL until a connection finds Citus."""
        self.appends_take_turns = url.get_backend_name() == "postgresql"
        """Whether this store's appends to one session take turns (`append_turn`):
        PostgreSQL, Citus included."""
        self._append_turns: weakref.WeakValueDictionary[str, asyncio.Lock] = (
            weakref.WeakValueDictionary()
        )
        self._sync_engine: Engine | None = None
        self._inline_engine: Engine | None = None
        self._inline: Connection | None = None
        # Held while the inline connection is in use; a second event loop in another
        # thread falls back to the workers instead of sharing it.
        self._inline_lock = threading.Lock()
        self._executor: ThreadPoolExecutor | None = None
        if url.get_backend_name() == "sqlite" and not _is_memory(url):
            sync_url = url.set(drivername="sqlite+pysqlite")
            self._sync_engine = create_engine(
                sync_url,
                pool_size=SQLITE_WORKERS,
                # Each connection is used by one worker thread at a time, never two.
                connect_args={"check_same_thread": False},
            )
            if isinstance(engine, SqliteFile):
                settings = engine.settings
            else:
                settings = _SQLITE_SETTINGS.get(engine.sync_engine) or _SqliteSettings(
                    round(DEFAULT_LOCK_TIMEOUT * 1000), is_read_only_sqlite(url)
                )
            _configure_sqlite(
                self._sync_engine, in_memory=False, settings=settings, is_pysqlite=True
            )
            self._inline_engine = create_engine(
                sync_url,
                poolclass=StaticPool,
                connect_args={"check_same_thread": False},
            )
            _configure_sqlite(
                self._inline_engine,
                in_memory=False,
                settings=settings,
                busy_timeout_ms=0,
                is_pysqlite=True,
            )
            self._executor = ThreadPoolExecutor(SQLITE_WORKERS, thread_name_prefix="sessionstore")

    async def run(
        self,
        work: Callable[[Connection], _T],
        *,
        write: bool = False,
        inline: bool = False,
        snapshot: bool = True,
    ) -> _T:
        """Run `work` in a transaction (a write transaction when `write`) and return its result.

        With `inline` (small calls only), a SQLite file call runs on the event loop's
        thread when SQLite lets it start at once (a write: the write lock is free). An
        exception raised by `work` rolls the transaction back and propagates.

        `snapshot=False`, for a read whose statements need not see one snapshot (each
        answer holds on its own, as under PostgreSQL's default READ COMMITTED, where each
        statement takes its own snapshot anyway): on PostgreSQL the read runs outside a
        transaction block, each statement its own transaction, which saves the round trips
        of `BEGIN` and `COMMIT` (two of a newest-50 read's four).
        """
        try:
            if self._executor is not None:
                if inline:
                    done, result = self._try_inline(work, write)
                    if done:
                        # A call that never waited would never yield: a task appending
                        # in a loop would starve every other task of the process.
                        await asyncio.sleep(0)
                        return result  # type: ignore[return-value]  # done => work's result
                loop = asyncio.get_running_loop()
                return await loop.run_in_executor(self._executor, self._run_sync, work, write)
            async with self.engine.connect() as connection:
                if write:
                    await connection.execution_options(**{WRITE_OPTION: True})
                elif not snapshot and self._url.get_backend_name() == "postgresql":
                    await connection.execution_options(isolation_level="AUTOCOMMIT")
                    return await connection.run_sync(work)
                async with connection.begin():
                    return await connection.run_sync(work)
        except SQLAlchemyError as exc:
            raise storage_error(exc) from exc
        except OSError as exc:
            raise connection_error(self._url, exc) from exc

    async def run_alone(self, work: Callable[[Connection], _T]) -> _T:
        """PostgreSQL: run `work`, which sends at most one statement, outside a transaction block.

        The statement is then a transaction of its own, committed by the server as it
        ends: one round trip, where `run` adds a `BEGIN` and a `COMMIT` of their own. Only
        for work whose one statement is the whole write (or writes nothing).
        """
        try:
            async with self.engine.connect() as connection:
                await connection.execution_options(
                    isolation_level="AUTOCOMMIT", **{WRITE_OPTION: True}
                )
                return await connection.run_sync(work)
        except SQLAlchemyError as exc:
            raise storage_error(exc) from exc
        except OSError as exc:
            raise connection_error(self._url, exc) from exc

    async def run_on_driver(
        self, work: Callable[[Engine, PoolProxiedConnection], Awaitable[_T]]
    ) -> _T:
        """Run async `work` on a pooled DBAPI connection, errors translated as `run`'s are.

        For work that drives the connection's driver itself (`_pg_append.insert_on_driver`):
        no SQLAlchemy connection is made around it (about 0.03 ms a call) and no
        transaction is begun. `work` gets the sync engine (its dialect and listeners).
        """
        from sqlalchemy.util import greenlet_spawn

        engine = self.engine
        dbapi_error: Any = engine.dialect.loaded_dbapi.Error
        try:
            try:
                pooled = await engine.raw_connection()
            except dbapi_error as exc:  # the pool's connect is not wrapped by SQLAlchemy
                raise DBAPIError.instance(None, None, exc, dbapi_error) from exc
            try:
                return await work(engine.sync_engine, pooled)
            finally:
                await greenlet_spawn(pooled.close)  # an overflow connection is closed: IO
        except SQLAlchemyError as exc:
            raise storage_error(exc) from exc
        except OSError as exc:
            raise connection_error(self._url, exc) from exc

    def append_turn(self, session_id: str) -> asyncio.Lock:
        """The lock this store's appends to one session take turns on (by session id).

        Two tasks appending to one session through one store share its cached append
        state: when both send PostgreSQL's one-statement append on the same state, the
        one that loses finds it stale and falls back to a transaction, which needs two
        round trips before it even waits for the session's row lock, while the winner's
        next one-statement append takes that lock in one; under load the winner could
        append a dozen times in a row. Appends to one session queue on its row lock
        anyway; taking turns here first (asyncio's lock wakes its waiters in order) costs
        no throughput and spends no attempt on a state another task is about to change.
        On Citus, whose appends are transactions, the turns keep two writers of a session
        alternating as on PostgreSQL, where the row lock alone would let the one whose
        connection is ready append again first. Kept while some call holds or awaits it.
        """
        turn = self._append_turns.get(session_id)
        if turn is None:
            turn = self._append_turns[session_id] = asyncio.Lock()
        return turn

    @property
    def engine(self) -> AsyncEngine:
        """The async engine (made now, for a SQLite file store that had not made it yet)."""
        return self._engine.get() if isinstance(self._engine, SqliteFile) else self._engine

    @property
    def made_engine(self) -> AsyncEngine | None:
        """The async engine if it was made (always, for a store built on an engine)."""
        return self._engine.engine if isinstance(self._engine, SqliteFile) else self._engine

    def _try_inline(
        self, work: Callable[[Connection], _T], write: bool = True
    ) -> tuple[bool, _T | None]:
        """Run `work` on this thread if SQLite lets it start now; `(False, None)` if not.

        A write needs the write lock at once (`BEGIN IMMEDIATE` with no busy wait); a
        read (a small one: it runs on the event loop) starts a snapshot, and if SQLite
        answers busy at any point (a WAL recovery or a truncating checkpoint of another
        process) it is rolled back and left to the worker threads: it wrote nothing.
        """
        if self._inline_engine is None or not self._inline_lock.acquire(blocking=False):
            return False, None
        try:
            if self._inline is None:
                try:
                    self._inline = self._inline_engine.connect().execution_options(
                        **{WRITE_OPTION: True}
                    )
                except OperationalError as exc:
                    if is_busy(exc):  # opening it needs a lock another process holds
                        return False, None
                    raise
            connection = self._inline
            # BEGIN and COMMIT straight on the stdlib connection, without SQLAlchemy's
            # transaction bookkeeping; a Core statement in `work` autobegins SQLAlchemy's
            # side of it (the "begin" listener sees the open transaction and sends nothing).
            raw: Any = connection.connection.driver_connection
            begin = "BEGIN IMMEDIATE" if write else "BEGIN"
            try:
                raw.execute(begin)
            except sqlite3.OperationalError as exc:
                if is_sqlite_busy(exc):
                    return False, None
                raise OperationalError(begin, None, exc) from exc
            try:
                result = work(connection)
            except BaseException as exc:
                if connection.in_transaction():
                    connection.rollback()
                else:
                    raw.rollback()
                if not write and is_busy(exc):
                    return False, None
                raise
            if connection.in_transaction():
                connection.commit()
            else:
                try:
                    raw.commit()
                except sqlite3.Error as exc:
                    raw.rollback()
                    raise DBAPIError.instance("COMMIT", None, exc, sqlite3.Error) from exc
            return True, result
        finally:
            self._inline_lock.release()

    def _run_sync(self, work: Callable[[Connection], _T], write: bool) -> _T:
        assert self._sync_engine is not None  # set together with the executor
        with self._sync_engine.connect() as connection:
            if write:
                connection.execution_options(**{WRITE_OPTION: True})
            with connection.begin():
                return work(connection)

    async def dispose(self) -> None:
        """Stop the worker threads and close their connections."""
        if self._executor is not None:
            await asyncio.to_thread(self._executor.shutdown)
            self._executor = None
        with self._inline_lock:
            if self._inline is not None:
                self._inline.close()
                self._inline = None
            if self._inline_engine is not None:
                self._inline_engine.dispose()
        if self._sync_engine is not None:
            self._sync_engine.dispose()
