"""A Google ADK session service backed by a `SessionStore`: `SessionStoreSessionService`.

Install with `pip install "sessionstore[adk]"`, then hand it to ADK's `Runner` like
ADK's own session services:

    store = SessionStore.from_url("sqlite+aiosqlite:///sessionstore.db")
    runner = Runner(agent=agent, app_name="my-agent",
                    session_service=SessionStoreSessionService(store))

Each ADK session is a sessionstore session of the tenant `(app_name, user_id)`; its
events are stored as messages through `sessionstore.formats.adk` (an exact round trip),
so compaction overlays, the audit, search, the recall tools and the CLI apply to them.
A user event (author `"user"`) starts a new loop (one agent run); the events that
follow join it.

State follows ADK's scopes. Nothing is ever updated in place:

- session state is data: the state given to `create_session` is kept with the session,
  and every event keeps its own `state_delta`; the state is their fold. A user event
  (which opens a loop) also records the state before it, so a read folds only the active
  loop's deltas onto that record, not the whole history;
- `app:` and `user:` keys change state shared by every session of the app, or of the
  user: each change is a new message (`{"delta", "state"}`) in a hidden session of its
  own, so reading it is one indexed read of the newest message, and the history of
  every change stays for the audit;
- `temp:` keys live in the in-memory session of the running invocation only, and are
  taken out of the event before it is stored, as ADK's own services do.

ADK session ids are per user; sessionstore's are unique in the database, so the
sessionstore id of an ADK session is derived from `(app_name, user_id, session_id)`
(`store_session_id` gives it) and the ADK id is the session's title.

A session that this service returns carries the store's version of it, so appending to
a copy that another writer has since moved past raises ADK's `StaleSessionError`,
exactly as ADK's `DatabaseSessionService` does.

`get_session` reads only what it returns: with `GetSessionConfig(num_recent_events=...)`
or `after_timestamp`, the tail of the history that holds those events (and the active
loop, for the state). The service keeps each session's folded state by its version
(`_adk_state.SessionStates`), so `list_sessions` reads a session's active loop only the
first time it sees the session at that version, and a user event does not read the run
before it.

Limits: a change of `app:` or `user:` state is written in its own transaction, after
the event that carries it (the event, with its whole delta, is always written first).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import uuid
from collections.abc import Mapping
from typing import Any, cast

from pydantic import JsonValue

from sessionstore.errors import (
    ClientIdConflictError,
    ConflictError,
    MissingDependencyError,
    SessionExistsError,
    SessionNotFoundError,
    StaleWriteError,
)
from sessionstore.formats.adk import ADK_FORMAT, from_adk_events, to_adk_events
from sessionstore.models import (
    CLIENT_ID_MAX_LENGTH,
    TITLE_MAX_LENGTH,
    CustomMessage,
    Message,
    Session,
    StoredMessage,
)
from sessionstore.store import SessionStore, TenantStore

try:
    from google.adk.errors._stale_session_error import StaleSessionError
    from google.adk.errors.already_exists_error import AlreadyExistsError
    from google.adk.errors.session_not_found_error import (
        SessionNotFoundError as AdkSessionNotFoundError,
    )
    from google.adk.events.event import Event
    from google.adk.sessions.base_session_service import (
        BaseSessionService,
        GetSessionConfig,
        ListSessionsResponse,
    )
    from google.adk.sessions.session import Session as AdkSession
    from google.adk.sessions.state import State
    from pydantic_core import to_jsonable_python
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingDependencyError(
        'SessionStoreSessionService needs google-adk: pip install "sessionstore[adk]"'
    ) from exc

from sessionstore.integrations._adk_state import Folded, SessionStates, record, split

__all__ = ["APP_STATE_USER", "STATE_TYPE", "SessionStoreSessionService"]

STATE_TYPE = "adk_state"
"""The `custom_type` of the messages that record a change of app or user state."""
APP_STATE_USER = "adk:app-state"
"""The `user_id` of the tenant that holds an app's shared state (one hidden session)."""

_KIND_SESSION, _KIND_USER, _KIND_APP = "session", "user_state", "app_state"
_STALE = (
    "The session has been modified in storage since it was loaded. "
    "Please reload the session before appending more events."
)
_STATE_ATTEMPTS = 20


class SessionStoreSessionService(BaseSessionService):
    """An ADK `BaseSessionService` on a sessionstore `SessionStore`.

    Args:
        store: The unscoped store (`SessionStore.from_url(...)`); the service scopes
            each call to the tenant `(app_name, user_id)` it names. The caller keeps
            and closes it.
    """

    def __init__(self, store: SessionStore) -> None:
        if not isinstance(store, SessionStore):
            raise TypeError(
                "SessionStoreSessionService needs an unscoped SessionStore: ADK names the "
                f"tenant in each call (got {type(store).__name__})"
            )
        self._store = store
        self._states = SessionStates()

    @property
    def store(self) -> SessionStore:
        """The store the sessions live in."""
        return self._store

    @staticmethod
    def store_session_id(*, app_name: str, user_id: str, session_id: str) -> str:
        """Return the sessionstore session id of an ADK session (for the CLI, audit, search)."""
        return _derived_id(_KIND_SESSION, app_name, user_id, session_id.strip())

    # ── sessions ────────────────────────────────────────────────────────────────

    async def create_session(
        self,
        *,
        app_name: str,
        user_id: str,
        state: dict[str, Any] | None = None,
        session_id: str | None = None,
    ) -> AdkSession:
        """Create a session; `app:` and `user:` keys of `state` go to the shared scopes.

        Raises:
            AlreadyExistsError: the user already has a session with this id.
        """
        adk_id = (session_id.strip() if session_id else "") or str(uuid.uuid4())
        scoped = split(_json_state(state or {}))
        tenant = self._store.for_tenant(app_name, user_id)
        try:
            created = await tenant.create_session(
                session_id=_derived_id(_KIND_SESSION, app_name, user_id, adk_id),
                title=adk_id[:TITLE_MAX_LENGTH],
                metadata={
                    "adk": {"kind": _KIND_SESSION, "session_id": adk_id, "state": scoped["session"]}
                },
            )
        except SessionExistsError:
            raise AlreadyExistsError(f"Session with id {adk_id} already exists.") from None
        app_state = await self._shared_state(app_name, user_id, _KIND_APP, scoped["app"])
        user_state = await self._shared_state(app_name, user_id, _KIND_USER, scoped["user"])
        return _adk_session(
            created,
            adk_id=adk_id,
            state=_merged(app_state, user_state, scoped["session"]),
            events=[],
        )

    async def get_session(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        config: GetSessionConfig | None = None,
    ) -> AdkSession | None:
        """Return a session with its merged state and (filtered) events; None if it is not there."""
        adk_id = session_id.strip()
        tenant = self._store.for_tenant(app_name, user_id)
        sid = _derived_id(_KIND_SESSION, app_name, user_id, adk_id)
        # The session (its version) before its messages: a write in between makes the
        # session look stale to the next append, never the other way round.
        try:
            stored = await tenant.get_session(sid)
            folded = await self._states.read(tenant, sid, stored)
            events = await _events(tenant, sid, config)
        except SessionNotFoundError:
            return None
        app_state = await self._shared_state(app_name, user_id, _KIND_APP)
        user_state = await self._shared_state(app_name, user_id, _KIND_USER)
        return _adk_session(
            stored,
            adk_id=adk_id,
            state=_merged(app_state, user_state, folded.state),
            events=events,
            folded=folded,
        )

    async def list_sessions(
        self, *, app_name: str, user_id: str | None = None
    ) -> ListSessionsResponse:
        """List the sessions of a user (or of every user of the app), without events.

        Sessions come oldest update first, as ADK's base class documents; each carries
        its merged state.
        """
        handle: SessionStore | TenantStore = (
            self._store if user_id is None else self._store.for_tenant(app_name, user_id)
        )
        found: list[Session] = []
        cursor: str | None = None
        while True:
            page = await (
                handle.list_sessions(limit=1000, cursor=cursor, app_name=app_name)
                if user_id is None
                else handle.list_sessions(limit=1000, cursor=cursor)
            )
            found.extend(s for s in page.items if _kind(s) == _KIND_SESSION)
            cursor = page.next_cursor
            if cursor is None:
                break
        app_state = await self._shared_state(app_name, "", _KIND_APP)
        user_states: dict[str, dict[str, Any]] = {}
        sessions = []
        for stored in found:
            if stored.user_id not in user_states:
                user_states[stored.user_id] = await self._shared_state(
                    app_name, stored.user_id, _KIND_USER
                )
            tenant = self._store.for_tenant(app_name, stored.user_id)
            try:
                folded = await self._states.read(tenant, stored.id, stored)
            except SessionNotFoundError:
                continue  # deleted meanwhile
            sessions.append(
                _adk_session(
                    stored,
                    adk_id=str(stored.metadata["adk"]["session_id"]),  # type: ignore[call-overload,index]  # checked by _kind
                    state=_merged(app_state, user_states[stored.user_id], folded.state),
                    events=[],
                    folded=folded,
                )
            )
        sessions.sort(key=lambda s: (s.last_update_time, s.user_id, s.id))
        return ListSessionsResponse(sessions=sessions)

    async def delete_session(self, *, app_name: str, user_id: str, session_id: str) -> None:
        """Delete a session with its whole history (the shared app and user state stay)."""
        tenant = self._store.for_tenant(app_name, user_id)
        with contextlib.suppress(SessionNotFoundError):
            await tenant.delete_session(
                _derived_id(_KIND_SESSION, app_name, user_id, session_id.strip())
            )

    async def get_user_state(self, *, app_name: str, user_id: str) -> dict[str, Any]:
        """Return the user's shared state, keys without the `user:` prefix."""
        return await self._shared_state(app_name, user_id, _KIND_USER)

    # ── events ──────────────────────────────────────────────────────────────────

    async def append_event(self, session: AdkSession, event: Event) -> Event:
        """Store an event and apply its state delta (partial events are not stored).

        Raises:
            StaleSessionError: `session` is a copy another writer has since moved past.
            SessionNotFoundError: ADK's: the session is not in the store.
        """
        if event.partial:
            return event
        if any(e == event for e in session.events if e.id == event.id):
            return event  # an equal re-delivery: stored already
        self._apply_temp_state(session, event)
        event = self._trim_temp_delta_state(event)
        messages = _with_client_ids(from_adk_events([event]), event)
        expected, seen = _parse_marker(session._storage_update_marker)
        tenant = self._store.for_tenant(session.app_name, session.user_id)
        sid = _derived_id(_KIND_SESSION, session.app_name, session.user_id, session.id)
        is_new_loop = event.author == "user"
        stored_messages: list[StoredMessage] = []
        for attempt in range(_STATE_ATTEMPTS):
            written = expected
            try:
                if is_new_loop:
                    # A user event starts a loop, and records the session state before it,
                    # so a read folds only the active loop's deltas onto it.
                    stored = await tenant.get_session(sid)
                    if expected is not None and stored.version != expected:
                        raise _VersionMoved  # noqa: TRY301  # handled with a stale write below
                    written = stored.version
                    state = (await self._states.read(tenant, sid, stored)).state
                    messages[0] = _with_state(messages[0], state)
                stored_messages = await tenant.append_messages(
                    sid,
                    messages,
                    loop_id="new" if is_new_loop else None,
                    expected_version=written,
                )
            except (StaleWriteError, _VersionMoved):
                if expected is None:
                    if attempt == _STATE_ATTEMPTS - 1:
                        raise StaleSessionError(_STALE) from None
                    continue  # no version to keep: another writer came first, read again
                # A compaction moves the version without touching the events: the
                # session this object holds is not stale then (PEERS: ADK #5194, a
                # compaction racing the next request).
                moved = None
                if seen is not None and attempt < _STATE_ATTEMPTS - 1:
                    moved = await _version_if_events_unchanged(tenant, sid, seen)
                if moved is None:
                    raise StaleSessionError(_STALE) from None
                expected = moved
                continue
            except SessionNotFoundError:
                raise AdkSessionNotFoundError(f"Session {session.id} not found.") from None
            except ClientIdConflictError as error:
                # The event's client ids name its id and content: only the state its first
                # message records can differ, because the event's own delta is applied
                # since it was stored (a retry after an answer that never came back).
                if not (is_new_loop and _keyed_by_event(messages, error.client_id)):
                    raise
                written = None  # stored already: nothing written, nothing kept moved
            break
        if written is not None and expected is not None and stored_messages:
            last = stored_messages[-1]
            session._storage_update_marker = _marker(written + 1, last.loop_id, last.position + 1)
        if written is not None:
            self._states.wrote(
                (session.app_name, session.user_id, sid),
                written,
                messages,
                stored_messages,
                new_loop=is_new_loop,
            )
        delta = split(_json_state(event.actions.state_delta))
        for kind, scope in ((_KIND_APP, "app"), (_KIND_USER, "user")):
            if delta[scope]:
                await self._shared_state(session.app_name, session.user_id, kind, delta[scope])
        self._commit_event_to_session(session, event)
        session.last_update_time = event.timestamp
        return event

    # ── shared state ────────────────────────────────────────────────────────────

    async def _shared_state(
        self, app_name: str, user_id: str, kind: str, delta: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """Return the app's or the user's state, after applying `delta` when one is given."""
        owner = APP_STATE_USER if kind == _KIND_APP else user_id
        tenant = self._store.for_tenant(app_name, owner)
        sid = _derived_id(kind, app_name, owner, "")
        if not delta:  # a read: the newest change holds the state
            try:
                newest = await tenant.get_messages(sid, last=1)
            except SessionNotFoundError:
                return {}
            return _recorded_state(newest[0].message) if newest else {}
        for _ in range(_STATE_ATTEMPTS):
            try:
                version = (await tenant.get_session(sid)).version
                newest = await tenant.get_messages(sid, last=1)
            except SessionNotFoundError:
                with contextlib.suppress(SessionExistsError):  # a concurrent first write
                    await tenant.create_session(
                        session_id=sid,
                        title=f"ADK {kind.replace('_', ' ')}",
                        metadata={"adk": {"kind": kind}},
                    )
                continue
            state = {**(_recorded_state(newest[0].message) if newest else {}), **delta}
            change = CustomMessage(
                custom_type=STATE_TYPE,
                data={"delta": dict(delta), "state": state},
                display=False,
            )
            try:
                await tenant.append_messages(sid, [change], expected_version=version)
            except StaleWriteError:
                continue  # another writer changed it first: apply the delta to theirs
            return state
        raise ConflictError(
            f"the {kind.replace('_', ' ')} of app {app_name!r} kept changing while this "
            f"write retried {_STATE_ATTEMPTS} times; try again"
        )


# ── helpers ─────────────────────────────────────────────────────────────────────


def _derived_id(kind: str, app_name: str, user_id: str, session_id: str) -> str:
    key = json.dumps([kind, app_name, user_id, session_id], ensure_ascii=False)
    return "adk-" + hashlib.sha256(key.encode()).hexdigest()[:40]


def _kind(session: Session) -> str | None:
    record = session.metadata.get("adk")
    return record.get("kind") if isinstance(record, dict) else None  # type: ignore[return-value]  # a str when ours


def _json_state(state: Mapping[str, Any]) -> dict[str, Any]:
    """Return the state as JSON data, as ADK's database service stores it."""
    return cast(dict[str, Any], to_jsonable_python(dict(state), fallback=repr))


def _merged(
    app_state: Mapping[str, Any], user_state: Mapping[str, Any], session_state: Mapping[str, Any]
) -> dict[str, Any]:
    merged = dict(session_state)
    merged.update({State.APP_PREFIX + key: value for key, value in app_state.items()})
    merged.update({State.USER_PREFIX + key: value for key, value in user_state.items()})
    return merged


def _with_state(message: Message, state: dict[str, Any]) -> Message:
    kept = {**record(message), "session_state": state}
    return message.model_copy(update={"extra": {**message.extra, ADK_FORMAT: kept}})


async def _events(tenant: TenantStore, sid: str, config: GetSessionConfig | None) -> list[Event]:
    """Return the events `config` asks for, reading only as much of the history as they need."""
    if config is None or (config.num_recent_events is None and config.after_timestamp is None):
        return to_adk_events([m.message for m in await tenant.get_history(sid)])
    if config.num_recent_events == 0:
        return []
    wanted = config.num_recent_events
    last = max(wanted or 0, 16) * 2
    while True:
        tail = [m.message for m in await tenant.get_history(sid, last=last)]
        is_whole = len(tail) < last
        if not is_whole:
            # Cut at an event's first message: the older part of an event read in half goes.
            while tail and "event" not in record(tail[0]):
                tail.pop(0)
        events = to_adk_events(tail)
        if is_whole or (
            len(events) >= wanted
            if wanted is not None
            else bool(events) and events[0].timestamp < (config.after_timestamp or 0)
        ):
            return _filtered(events, config)
        last *= 4


def _recorded_state(message: Message) -> dict[str, Any]:
    data: JsonValue = message.data if isinstance(message, CustomMessage) else None
    state = data.get("state") if isinstance(data, dict) else None
    return dict(state) if isinstance(state, dict) else {}


def _filtered(events: list[Event], config: GetSessionConfig | None) -> list[Event]:
    """Apply `GetSessionConfig` exactly as ADK's in-memory service does."""
    if config is None:
        return events
    if config.num_recent_events is not None:
        events = [] if config.num_recent_events == 0 else events[-config.num_recent_events :]
    if config.after_timestamp is not None:
        index = len(events) - 1
        while index >= 0 and events[index].timestamp >= config.after_timestamp:
            index -= 1
        events = events[index + 1 :]
    return events


def _keyed_by_event(messages: list[Message], client_id: str) -> bool:
    """Whether `client_id` is one `_with_client_ids` gave these messages."""
    return any(message.client_id == client_id for message in messages)


def _with_client_ids(messages: list[Message], event: Event) -> list[Message]:
    """Key the event's messages by its id and content, so a retried append writes nothing."""
    digest = hashlib.sha256(event.model_dump_json(exclude_none=True).encode()).hexdigest()[:16]
    base = f"adk:{event.id}:{digest}"
    if len(base) + 4 > CLIENT_ID_MAX_LENGTH:
        return messages
    return [
        message.model_copy(update={"client_id": f"{base}:{index}"})
        for index, message in enumerate(messages)
    ]


def _adk_session(
    stored: Session,
    *,
    adk_id: str,
    state: dict[str, Any],
    events: list[Event],
    folded: Folded | None = None,
) -> AdkSession:
    """ADK's session of a stored one; `folded`: its state read at `stored`'s version."""
    newest = None if folded is None else folded.newest
    session = AdkSession(
        id=adk_id,
        app_name=stored.app_name,
        user_id=stored.user_id,
        state=state,
        events=events,
        last_update_time=stored.created_at.timestamp() if newest is None else newest,
    )
    count = 0 if folded is None else folded.count
    session._storage_update_marker = _marker(stored.version, stored.active_loop_id, count)
    return session


class _VersionMoved(Exception):
    """The session's version is not the one this session object was read at."""


def _marker(version: int, loop_id: int | None, count: int) -> str:
    """An ADK session's storage marker: the version it was read or written at, and its events.

    The events are named by the active loop and how many messages it held: a compaction or
    a metadata write moves the version and leaves them as they were.
    """
    return f"{version}:{loop_id or 0}:{count}"


def _parse_marker(marker: str | None) -> tuple[int | None, tuple[int, int] | None]:
    """Return the version and the events (`(loop id, message count)`) a marker names."""
    if marker is None:
        return None, None
    version, _, events = marker.partition(":")
    if not version.isdigit():
        return None, None
    loop, _, count = events.partition(":")
    seen = (int(loop), int(count)) if loop.isdigit() and count.isdigit() else None
    return int(version), seen


async def _version_if_events_unchanged(
    tenant: TenantStore, sid: str, seen: tuple[int, int]
) -> int | None:
    """Return the session's version if its events are still `seen`, else None.

    The version is read first: an event appended after it moves it again, and the append
    that takes it fails as stale.
    """
    stored = await tenant.get_session(sid)
    loop_id = stored.active_loop_id
    count = 0 if loop_id is None else (await tenant.get_loop(sid, loop_id)).message_count
    return stored.version if (loop_id or 0, count) == seen else None
