"""An openai-agents `Session` backed by a `SessionStore`: `SessionStoreSession`.

Install with `pip install "sessionstore[openai-agents]"`, then hand it to the SDK's
`Runner` like any of the SDK's own sessions:

    store = SessionStore.from_url("sqlite+aiosqlite:///sessionstore.db")
    session = SessionStoreSession("chat-42", store.for_tenant("my-agent", "user-42"))
    result = await Runner.run(agent, "Fix the failing test", session=session)

The SDK's Responses-API items are stored as sessionstore messages through
`sessionstore.formats.from_openai_responses` (exact round trip), so everything
sessionstore does applies to them: compaction overlays, `build_context`, the audit, the
CLI. Each message also keeps the JSON text of the items it stands for (in
`extra["openai_responses"]["json"]`): in raw mode `get_items` has the database hand back
that text alone and decodes it in one `json.loads`, with no model built; a session object
remembers the texts it read (by message id and content hash: rows never change), so its
next read has only the ids and hashes read and the new messages' texts extracted. Beyond
the SDK's own stores:

- with `max_context_tokens`, `get_items` returns the context built from the overlays
  within that budget: every item while the whole history fits, and, once it does not, a
  compacted history that always fits and never holds a tool call without its output. A
  live `ContextEngine` (`StoreContextEngine` by default: the seeds' threshold,
  anti-thrashing and cooldowns) compacts on its own when its gate says so. Without
  `max_context_tokens`, the raw items, as the SDK's own sessions do;
- `get_items(limit)` never cuts between a call and its output: the window starts at a
  turn (a user request or a model call, never a tool output), and a call left without its
  output is left out together with the reasoning item before it;
- `pop_item`, `clear_session` and `replace_items` never delete anything: they start a
  branch or a new loop chain in one transaction, and the items they took out stay in
  the store for the audit (`sessionstore audit`, `list_loops`, `get_history(loop_id=...)`).

A user message that opens an `add_items` batch starts a new loop (one run of the agent);
the items that follow it in later batches join that loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
from collections.abc import Mapping, Sequence
from itertools import chain
from typing import Any, cast

from sessionstore._engine import ContextEngine, EngineChoice, make_context_engine
from sessionstore._engine._preflight import build_with_engine
from sessionstore._items import BuiltContext
from sessionstore.config import CompactionConfig, validated_config
from sessionstore.errors import (
    MissingDependencyError,
    SessionExistsError,
    SessionNotFoundError,
    StaleWriteError,
)
from sessionstore.formats import to_openai_responses
from sessionstore.formats._responses import (
    CALL_OUTPUT_TYPES,
    JSON_KEY,
    RESPONSES_FORMAT,
    from_openai_responses_json,
    item_type,
)
from sessionstore.formats._responses_dump import items_from_dump
from sessionstore.formats._responses_export import export_each
from sessionstore.integrations._item_json import decoded, item_lists, json_items
from sessionstore.integrations._responses_window import (
    OUTPUT_TYPES,
    context_window,
    dump_is_output,
    is_output,
    window,
)
from sessionstore.models import Message, RecordCache, ToolCall
from sessionstore.models._batch import paused_gc
from sessionstore.models._limits import STORED
from sessionstore.models._messages import MESSAGE_ADAPTER
from sessionstore.store import SessionStore, TenantStore
from sessionstore.store._payload_reads import ChainStrings

try:
    from agents.items import TResponseInputItem
    from agents.memory.session_settings import (
        SessionSettings,
        coerce_session_settings,
        resolve_session_limit,
    )
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingDependencyError(
        'SessionStoreSession needs openai-agents: pip install "sessionstore[openai-agents]"'
    ) from exc

__all__ = ["SessionStoreSession"]

_POP_ATTEMPTS = 12
"""How many times `pop_item` reads and tries again when another writer came first."""
_POP_BACKOFF = 0.005
_POP_BACKOFF_MAX = 0.25
"""The longest wait between two tries (seconds): the whole of them stays under 2 s."""
_JSON_PATH = ("extra", RESPONSES_FORMAT, JSON_KEY)
"""Where a stored message keeps the JSON text of the SDK items it stands for."""
_KEPT_MAX = 100_000
"""How many messages' kept texts a session object remembers from its reads (see `_keep`)."""
_CALL_NAMES_MAX = 1024
"""How many call names (by call id) a session object remembers from its own writes."""
_NAMED_OUTPUT_TYPES = frozenset({"function_call_output", "custom_tool_call_output"})
"""The outputs whose message names the tool of the call they answer."""


def _pop_backoff(attempt: int) -> float:
    """Return a jittered wait before try `attempt` (full jitter, exponential, capped)."""
    return random.uniform(0, min(_POP_BACKOFF_MAX, _POP_BACKOFF * 2**attempt))


class SessionStoreSession:
    """An openai-agents `Session` on a store, a tenant and a session id.

    The sessionstore session is created on the first `add_items`; reading a session that
    does not exist yet returns no items.

    Args:
        session_id: The session's id (1 to 128 characters).
        store: The store; scoped to a tenant (`store.for_tenant(app, user)`), or give
            `app_name` and `user_id`.
        app_name: The owning application, when `store` is not scoped.
        user_id: The owning user, when `store` is not scoped.
        max_context_tokens: None (the default): `get_items` returns the raw items of the
            active chain. A number: it returns the context `build_context` builds within
            that window (less `system_prompt_tokens`): every item while the whole history
            fits (scoped by the budget), compacted by the engine once it does not.
        compaction: The compaction policy the engine compacts with (`CompactionConfig()`
            by default); its `context_engine` names the engine when `engine` is None.
        system_prompt_tokens: Tokens of the window kept for the agent's instructions.
        overlay: The named overlay to build from and compact into.
        session_settings: The SDK's settings (its `limit` is the default of `get_items`).
        engine: With `max_context_tokens`, the live `ContextEngine` that decides when to
            compact: a registered name (`"store"`), a factory (see
            `register_context_engine`) or an engine bound to this session. None: the
            config's `context_engine`. Before `get_items` returns a context it measures
            it (seed 001's pre-flight check: loaded tokens, the system prompt, and any loop
            the budget had to leave out) and compacts when the engine's gate says so.
        auto_compact: False: never compact here (the built context is still trimmed to
            fit; `session.engine.compress(force=True)` is a user's `/compact`).
        keep_records: In context mode, keep the raw messages the last `get_items`
            decoded (a `RecordCache`), so the next one decodes only what was written
            since. About 4-6 KB a raw message of the context (about 10 MB for a 128,000
            token window of small items) for as long as the object lives; False for a
            process that keeps many session objects alive.

    Raises:
        ValueError: no tenant, a window that is not positive, or an engine without one.
        ConfigurationError: a bad `compaction`, or an unknown engine name.
    """

    session_settings: SessionSettings | None = None

    def __init__(
        self,
        session_id: str,
        store: SessionStore | TenantStore,
        *,
        app_name: str | None = None,
        user_id: str | None = None,
        max_context_tokens: int | None = None,
        compaction: CompactionConfig | Mapping[str, Any] | None = None,
        system_prompt_tokens: int = 0,
        overlay: str = "default",
        session_settings: SessionSettings | dict[str, Any] | None = None,
        engine: EngineChoice | None = None,
        auto_compact: bool = True,
        keep_records: bool = True,
    ) -> None:
        scoped: TenantStore
        if app_name is not None or user_id is not None:
            if app_name is None or user_id is None:
                raise ValueError("give both app_name and user_id, or a store scoped to a tenant")
            if not isinstance(store, SessionStore):
                raise ValueError("app_name and user_id scope an unscoped SessionStore only")
            scoped = store.for_tenant(app_name, user_id)
        elif isinstance(store, TenantStore):
            scoped = store
        else:
            raise ValueError(
                "a session belongs to a tenant: pass store.for_tenant(app_name, user_id)"
            )
        if max_context_tokens is not None and max_context_tokens <= 0:
            raise ValueError(f"max_context_tokens must be positive, got {max_context_tokens}")
        if max_context_tokens is None and engine is not None:
            raise ValueError("an engine compacts a built context: give max_context_tokens too")
        self.session_id = session_id
        self.session_settings = (
            coerce_session_settings(session_settings)
            if session_settings is not None
            else SessionSettings()
        )
        self._store = scoped
        self._max_context_tokens = max_context_tokens
        self._compaction = (
            None
            if compaction is None
            else validated_config(
                dict(compaction) if isinstance(compaction, Mapping) else compaction,
                CompactionConfig,
            )
        )
        self._system_prompt_tokens = system_prompt_tokens
        self._overlay = overlay
        self._closed = False
        # The kept JSON texts of the items this object read last, by message id with the
        # message's hash (rows never change): a read parses only the messages not in it.
        # A whole read leaves its columns (`_unkept`), made into the mapping when a later
        # read needs it: an object that reads once (a fresh one each agent run) never does.
        self._kept: dict[int, tuple[Any, str | None]] = {}
        self._unkept: ChainStrings | None = None
        # Context mode: the raw messages the last build decoded, which the next build of
        # this session takes again instead of decoding them (raw messages never change).
        self._records = RecordCache() if keep_records else None
        # The names of the calls this object wrote, for outputs added in a later call.
        self._call_names: dict[str, str] = {}
        self._auto_compact = auto_compact
        self._engine = (
            None
            if max_context_tokens is None
            else make_context_engine(
                engine,
                scoped,
                session_id,
                context_length=max_context_tokens,
                system_prompt_tokens=system_prompt_tokens,
                overlay=overlay,
                config=self._compaction,
            )
        )

    @property
    def store(self) -> TenantStore:
        """The tenant-scoped store the items live in."""
        return self._store

    @property
    def engine(self) -> ContextEngine | None:
        """The live engine that compacts the built context (None in raw mode).

        For a user's `/compact`: `await session.engine.compress(force=True)`; for display:
        `session.engine.get_status()`.
        """
        return self._engine

    # ── the SDK's protocol ──────────────────────────────────────────────────────

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """Return the session's items, oldest first: raw, or the built context.

        Args:
            limit: At most this many of the newest items (default: the settings'
                `limit`, else all). The window never starts inside a turn, so it never
                holds a tool output without its call, and a call without its output is
                left out.
        """
        self._check_open()
        return await self._items(resolve_session_limit(limit, self.session_settings))

    async def _read_compaction_items(
        self, limit: int | None
    ) -> tuple[list[TResponseInputItem], bool]:
        """The SDK's compaction session's read: every item, whatever the settings' `limit`.

        `OpenAIResponsesCompactionSession` reads the history it compacts through this
        hook when the session has it, else through `get_items()`, which the settings'
        `limit` cuts to a window: the SDK would then summarise the window alone and
        replace the whole history with that summary, the older items gone from every
        later turn (PEERS: openai-agents #5010; the SDK's own stores do it). Returns the
        items and whether they are the whole history: all of them for `limit=None`,
        else all of them when they are at most `limit`, and none (not complete) when
        there are more, as the SDK's own wrappers answer.
        """
        self._check_open()
        items = await self._items(None)
        if limit is None or len(items) <= limit:
            return items, True
        return [], False

    async def _items(self, limit: int | None) -> list[TResponseInputItem]:
        """`get_items` with `limit` resolved against the settings already."""
        if self._max_context_tokens is None:
            return cast(list[TResponseInputItem], await self._raw_items(limit))
        try:
            context = await self._context()
        except SessionNotFoundError:
            return []
        if context is None:
            return []
        messages = context.messages
        # A raw item not redacted is the stored message itself, whose kept text the export
        # takes as raw mode does.
        verbatim = [item.source == "raw" and not item.redacted for item in context.items]
        return cast(list[TResponseInputItem], context_window(messages, verbatim, limit))

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Append items; a batch that opens with a user message starts a new loop.

        Raises:
            TypeError: an item is not JSON, as the SDK's own sessions say (nothing is
                written).
            FormatError: an item is malformed (nothing is written).
        """
        self._check_open()
        if not items:
            return
        raw, texts, copies = json_items(items)
        names = await self._tool_names(raw)
        with paused_gc():  # the messages all survive the call (see paused_gc)
            messages = from_openai_responses_json(raw, texts, tool_names=names, copies=copies)
        self._remember_calls(messages)
        loop: int | str | None = "new" if _is_user_message(raw[0]) else None
        try:
            await self._store.append_messages(self.session_id, messages, loop_id=loop)  # type: ignore[arg-type]  # "new" or None
        except SessionNotFoundError:
            await self._create()
            await self._store.append_messages(self.session_id, messages)

    async def pop_item(self) -> TResponseInputItem | None:
        """Take the newest item out of the history and return it (None when empty).

        Nothing is deleted: the history continues on a branch without the item, in one
        transaction, and the item stays in the store for the audit. When another writer
        changes the session between the read of the newest item and the pop, it reads
        again after a short jittered backoff (exponential, capped at 0.25 s).

        Raises:
            StaleWriteError: other writers came first 12 times in a row (under 2 s of
                backoff in all); nothing was removed.
        """
        self._check_open()
        stale = 0
        while True:
            try:
                version = (await self._store.get_session(self.session_id)).version
                history = await self._store.get_messages(self.session_id, last=1)
                if not history:
                    history = await self._store.get_history(self.session_id)
            except SessionNotFoundError:
                return None
            if not history:
                return None
            # A message the SDK never saw as an item (a hidden custom message) goes too.
            items = to_openai_responses([history[-1].message])
            popped = items.pop() if items else None
            (replacement,) = (
                from_openai_responses_json(
                    items, [json.dumps(i, separators=(",", ":")) for i in items]
                )
                if items
                else (None,)
            )
            try:
                await self._store.pop_message(
                    self.session_id, replacement=replacement, expected_version=version
                )
            except StaleWriteError as error:
                stale += 1
                if stale == _POP_ATTEMPTS:
                    error.add_note(
                        f"pop_item read and tried {_POP_ATTEMPTS} times, backing off; "
                        "nothing was removed"
                    )
                    raise
                # Another writer came first: wait a jittered, growing while, and read again.
                await asyncio.sleep(_pop_backoff(stale))
                continue
            if popped is not None:
                return cast(TResponseInputItem, popped)

    async def clear_session(self) -> None:
        """Start the history over, empty; the old items stay in the store for the audit."""
        self._check_open()
        try:
            await self._store.start_loop(self.session_id, is_root=True)
        except SessionNotFoundError:
            return

    # ── beyond the protocol ─────────────────────────────────────────────────────

    async def replace_items(self, items: list[TResponseInputItem]) -> None:
        """Replace the whole history by `items`, in one transaction.

        A clear and an add that cannot come apart; the old items stay for the audit.

        Raises:
            TypeError: an item is not JSON (nothing is written).
            FormatError: an item is malformed (nothing is written).
        """
        self._check_open()
        raw, texts, copies = json_items(items)
        messages = from_openai_responses_json(raw, texts, copies=copies)
        try:
            await self._store.start_loop(self.session_id, is_root=True, messages=messages)
        except SessionNotFoundError:
            await self._create()
            await self._store.append_messages(self.session_id, messages)

    async def _atomic_replace_items(self, items: list[TResponseInputItem]) -> bool:
        # The hook the SDK's OpenAIResponsesCompactionSession looks for on the session it
        # wraps, so its compaction replaces the history in one transaction (their #3116).
        await self.replace_items(items)
        return True

    async def close(self) -> None:
        """End this session object: later calls raise `RuntimeError`. Safe to call twice.

        The store is the caller's and stays open (close it with `store.close()`); the
        items stay in it, for another `SessionStoreSession` on the same id.
        """
        self._closed = True

    # ── internals ───────────────────────────────────────────────────────────────

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(f"SessionStoreSession {self.session_id!r} is closed")

    async def _raw_items(self, limit: int | None) -> list[dict[str, Any]]:
        """The raw items of the active chain, straight from the stored JSON.

        Every message holds at least one item (but a hidden one), so the newest `limit`
        items are among the newest `limit` messages. A message written by `add_items`
        keeps the JSON text of its items, which the database hands back alone: all of
        them are decoded in one `json.loads`. Any other message (written through the
        store, or by an older version) is exported from its own JSON. A kept text that
        is not a list of items (written by hand) sends the whole read through the models.
        """
        if limit is not None and limit <= 0:
            return []
        known = self._known()
        try:
            chained = await self._store._chain_strings(
                self.session_id, _JSON_PATH, last=limit, known=known or None
            )
        except SessionNotFoundError:
            return []
        found = chained.found
        self._keep(chained, known, whole=limit is None)
        whole = None not in found
        try:
            texts = cast(list[str], found) if whole else [text or "null" for text in found]
            units: list[Any] = decoded(texts)
        except ValueError:
            return await self._model_items(limit)
        missing = [] if whole else [index for index, text in enumerate(found) if text is None]
        kept = units
        if missing:
            kept = [unit for unit, text in zip(units, found, strict=True) if text is not None]
        items = item_lists(kept)
        if items is None:
            return await self._model_items(limit)
        if not missing and limit is None:
            return items
        starts = None if limit is None else [True] * len(units)
        for index in missing:
            units[index], start = _items_of_payload(chained.payloads[chained.ids[index]])
            if starts is not None:
                starts[index] = start
        if starts is None:
            return list(chain.from_iterable(units))
        for index, unit in enumerate(units):
            if found[index] is not None and unit:
                starts[index] = item_type(unit[0]) not in OUTPUT_TYPES
        return window(starts, units, limit)

    def _keep(
        self, chained: ChainStrings, known: dict[int, tuple[Any, str | None]], *, whole: bool
    ) -> None:
        """Remember the kept texts a read returned, by message id and hash, for the next read.

        A whole read replaces what was remembered (the messages of other chains go); a
        read of the newest few adds to it, up to `_KEPT_MAX` messages. A new mapping each
        time: a read still running in a worker thread keeps looking at the one it was given.
        A whole read keeps its columns only: the mapping is made from them when the next
        read needs it (`_known`).
        """
        if whole:
            self._kept, self._unkept = {}, chained if len(chained.ids) <= _KEPT_MAX else None
            return
        fresh = dict(
            zip(chained.ids, zip(chained.digests, chained.found, strict=True), strict=True)
        )
        if len(known) + len(fresh) <= _KEPT_MAX:
            if fresh.keys() <= known.keys():
                return
            fresh = {**known, **fresh}
        self._kept = fresh if len(fresh) <= _KEPT_MAX else {}

    def _known(self) -> dict[int, tuple[Any, str | None]]:
        """The kept texts remembered from the reads before, by message id with the hash."""
        unkept = self._unkept
        if unkept is not None:
            self._unkept = None
            self._kept = dict(
                zip(unkept.ids, zip(unkept.digests, unkept.found, strict=True), strict=True)
            )
        return self._kept

    async def _model_items(self, limit: int | None) -> list[dict[str, Any]]:
        """The raw items of the active chain, each message built as a model and exported."""
        try:
            history = await self._store.get_history(self.session_id, last=limit)
        except SessionNotFoundError:
            return []
        messages = [stored.message for stored in history]
        units = export_each(messages)
        if limit is None:
            return [item for unit in units for item in unit]
        return window([not is_output(message) for message in messages], units, limit)

    async def _context(self) -> BuiltContext | None:
        """The context built within the window (context mode); None before any loop."""
        assert self._engine is not None  # context mode always has one
        assert self._max_context_tokens is not None
        session = await self._store.get_session(self.session_id)
        if session.active_loop_id is None:
            return None
        return await build_with_engine(
            self._store,
            self.session_id,
            self._engine if self._auto_compact else None,
            max_context_tokens=self._max_context_tokens,
            system_prompt_tokens=self._system_prompt_tokens,
            overlay=self._overlay,
            config=self._compaction,
            records=self._records,
        )

    async def _create(self) -> None:
        # A concurrent first write may have created it (or another tenant owns the id:
        # the append that follows says so).
        with contextlib.suppress(SessionExistsError):
            await self._store.create_session(session_id=self.session_id)

    async def _tool_names(self, items: Sequence[Mapping[str, Any]]) -> dict[str, str]:
        """Return the names of the calls answered in `items` but made in an earlier batch.

        The calls this object wrote are remembered; others are looked for among the 50
        newest messages of the active chain.
        """
        made = set()
        wanted = set()
        for item in items:  # one pass, the type read once: it runs on every item added
            kind = item.get("type")
            if type(kind) is not str:
                continue
            if kind in CALL_OUTPUT_TYPES:
                made.add(item.get("call_id"))
            elif kind in _NAMED_OUTPUT_TYPES:
                wanted.add(item.get("call_id"))
        wanted -= made
        known = {
            call_id: self._call_names[call_id] for call_id in wanted if call_id in self._call_names
        }
        if not wanted or len(known) == len(wanted):
            return known
        try:
            recent = await self._store.get_history(self.session_id, last=50)
        except SessionNotFoundError:
            return known
        for stored in recent:
            for call in getattr(stored.message, "tool_calls", []):
                if call.id in wanted:
                    known[call.id] = call.name
        return known

    def _remember_calls(self, messages: Sequence[Message]) -> None:
        """Remember the names of the calls in `messages` (the newest `_CALL_NAMES_MAX`)."""
        names = self._call_names
        for message in messages:
            for block in getattr(message, "content", ()):
                if isinstance(block, ToolCall):
                    names.pop(block.id, None)
                    names[block.id] = block.name
        while len(names) > _CALL_NAMES_MAX:
            del names[next(iter(names))]


def _items_of_payload(payload: str) -> tuple[list[dict[str, Any]], bool]:
    """The items of a stored message without its items' JSON, and whether it may start a turn."""
    dump = json.loads(payload)
    start = not dump_is_output(dump)
    items = items_from_dump(dump)
    if items is None:
        items = to_openai_responses([MESSAGE_ADAPTER.validate_json(payload, context=STORED)])
    return items, start


def _is_user_message(item: Mapping[str, Any]) -> bool:
    return item.get("type", "message") == "message" and item.get("role") == "user"
