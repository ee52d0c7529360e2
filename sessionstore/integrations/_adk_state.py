"""The session-scoped state of an ADK session: folded from its events, kept between calls.

An ADK session's state is the fold of its events' `state_delta`s onto the state it was
created with; a loop opened by a user event records the state before it, so a read folds
only the active loop (`current_state`). Reading that loop on every call made
`list_sessions` read every listed session's whole active loop, and a user event read the
previous run's before it could be written.

`SessionStates` keeps each session's fold by the session's identity and version: a
session's version moves on every write (raw messages are never changed, so the events at
a version never change either), and a session deleted and created again has another
creation time. An entry is used only when the session read from the store has the same
creation time, version and active loop; anything else reads the loop again. After this
service's own append, the entry moves to the version the append wrote, folded with the
event's messages, but only when the messages it got back are the ones it wrote (a retry
that wrote nothing leaves the entry behind, and the next read folds again).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from google.adk.sessions.state import State  # imported by the adapter, after its check
from pydantic import JsonValue
from pydantic_core import from_json, to_json

from sessionstore.formats.adk import ADK_FORMAT
from sessionstore.models import Message, Session, StoredMessage
from sessionstore.store import TenantStore
from sessionstore.store._engine import StateCache

__all__ = ["Folded", "SessionStates", "record", "split"]


@dataclass(frozen=True, slots=True)
class Folded:
    """A session's state at one version, with what its active loop holds."""

    state: dict[str, Any]
    """The session-scoped state (no `app:`, `user:` or `temp:` keys)."""
    newest: float | None
    """The newest event's timestamp in the active loop (None: no event there)."""
    count: int
    """How many messages the active loop holds."""


@dataclass(frozen=True, slots=True)
class _Known:
    created_at: datetime
    version: int
    loop_id: int | None
    state: bytes
    """The state as JSON: each read parses its own copy, which its caller may change."""
    newest: float | None
    count: int

    def folded(self) -> Folded:
        return Folded(from_json(self.state), self.newest, self.count)


KEPT_SESSIONS = 1_024
"""How many sessions' states a service keeps (the least recently kept go first)."""
KEPT_STATE_BYTES = 64 * 1024
"""A state larger than this as JSON is not kept (each read folds it again): at most
`KEPT_SESSIONS` times this much is held, 64 MiB."""


class SessionStates:
    """Each session's `Folded` state, by version, for one service (bounded, oldest out)."""

    def __init__(self, size: int = KEPT_SESSIONS) -> None:
        self._known: StateCache[tuple[str, str, str], _Known] = StateCache(size)

    def _keep(
        self,
        key: tuple[str, str, str],
        created_at: datetime,
        version: int,
        loop_id: int | None,
        folded: Folded,
    ) -> None:
        try:
            state = to_json(folded.state)
        except ValueError:  # not JSON (a state is JSON data; never kept otherwise)
            return
        if len(state) <= KEPT_STATE_BYTES:
            self._known.put(
                key, _Known(created_at, version, loop_id, state, folded.newest, folded.count)
            )

    async def read(self, tenant: TenantStore, sid: str, stored: Session) -> Folded:
        """Return the session's state at `stored`'s version: kept, or folded from the store.

        Raises:
            SessionNotFoundError: the session is gone.
        """
        key = (stored.app_name, stored.user_id, sid)
        known = self._known.get(key)
        if (
            known is not None
            and known.version == stored.version
            and known.loop_id == stored.active_loop_id
            and known.created_at == stored.created_at
        ):
            return known.folded()
        folded = await current_state(tenant, sid, stored)
        self._keep(key, stored.created_at, stored.version, stored.active_loop_id, folded)
        return folded

    def wrote(
        self,
        key: tuple[str, str, str],
        version: int,
        written: Sequence[Message],
        got: Sequence[StoredMessage],
        *,
        new_loop: bool,
    ) -> None:
        """Move a session's entry past this service's append of `written` at `version`.

        `key` is the session's `(app_name, user_id, store session id)`; its entry must be
        at `version`, and `got` (what the append returned) must be the messages it wrote:
        a whole new loop, or the messages right after the ones the entry counts.
        Otherwise nothing changes.
        """
        known = self._known.get(key)
        if not got or known is None or known.version != version:
            return
        last = got[-1]
        before = known.folded()
        if new_loop:
            fresh = last.loop_id != known.loop_id and last.position + 1 == len(got)
            count = len(got)
        else:
            fresh = last.loop_id == known.loop_id and last.position + 1 == before.count + len(got)
            count = before.count + len(got)
        if not fresh or len(got) != len(written):
            return
        state, newest = fold(before.state, written)
        folded = Folded(state, before.newest if newest is None and not new_loop else newest, count)
        self._keep(key, known.created_at, version + 1, last.loop_id, folded)


async def current_state(tenant: TenantStore, sid: str, stored: Session) -> Folded:
    """Fold the session's state from the store (the active loop, else the whole chain).

    A loop opened by a user event records the state before it, so only the active loop's
    deltas are folded onto that record; a loop without the record (the first one, opened
    by another event) starts from the state given at creation.
    """
    active = [m.message for m in await tenant.get_messages(sid)] if stored.active_loop_id else []
    count = len(active)
    base = record(active[0]).get("session_state") if active else None
    if isinstance(base, dict):
        state: dict[str, Any] = dict(base)
    elif not active or (await tenant.get_loop(sid, stored.active_loop_id or 0)).depth == 0:
        state = initial_state(stored)
    else:  # not a loop this service opened: fold the whole chain
        active = [m.message for m in await tenant.get_history(sid)]
        state = initial_state(stored)
    state, newest = fold(state, active)
    return Folded(state, newest, count)


def fold(state: dict[str, Any], messages: Sequence[Message]) -> tuple[dict[str, Any], float | None]:
    """Apply the messages' session-scoped deltas to `state`; return it and the newest time."""
    newest: float | None = None
    for message in messages:
        event = record(message).get("event")
        if not isinstance(event, dict):
            continue
        actions = event.get("actions")
        delta = actions.get("state_delta") if isinstance(actions, dict) else None
        if isinstance(delta, dict) and delta:
            state.update(split(delta)["session"])
        stamp = event.get("timestamp")
        if isinstance(stamp, int | float):
            newest = float(stamp)
    return state, newest


def split(state: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Split a state or delta into the app, user and session scopes (temp keys dropped)."""
    scoped: dict[str, dict[str, Any]] = {"app": {}, "user": {}, "session": {}}
    for key, value in state.items():
        if key.startswith(State.APP_PREFIX):
            scoped["app"][key.removeprefix(State.APP_PREFIX)] = value
        elif key.startswith(State.USER_PREFIX):
            scoped["user"][key.removeprefix(State.USER_PREFIX)] = value
        elif not key.startswith(State.TEMP_PREFIX):
            scoped["session"][key] = value
    return scoped


def initial_state(stored: Session) -> dict[str, Any]:
    """The session-scoped state given at creation (kept in the session's metadata)."""
    found = stored.metadata.get("adk")
    initial = found.get("state") if isinstance(found, dict) else None
    return dict(initial) if isinstance(initial, dict) else {}


def record(message: Message) -> dict[str, JsonValue]:
    """The ADK record a message keeps (`{}` when it has none)."""
    found = message.extra.get(ADK_FORMAT)
    return found if isinstance(found, dict) else {}
