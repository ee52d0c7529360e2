"""Tenant isolation, by enumeration: every public call has a case, and a new one fails here.

`ENUMERATED` lists every public name of `SessionStore` and `TenantStore`, every function of
`sessionstore.__all__` that takes a store, and every coroutine method of the classes there
that take one (the store is async only, so only a coroutine can reach it). `CASES` holds,
for each, what tenant A's handle tries against tenant B's data: read it, write it, learn
that it exists, or delete it. Another tenant's session, loop, block, message or
replacement id must be answered exactly like an id that does not exist (same error type,
same words), and B's rows must be byte-for-byte the same after every case.

Session ids are per tenant: creating (or importing) a session under an id another tenant
uses succeeds, as a session of one's own, and tells nothing (issue 17, item 9); see
docs/concepts/tenancy.md.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import pytest
from sqlalchemy import select

import sessionstore
from sessionstore import (
    CompactedSection,
    CompactionBlock,
    CompactionConfig,
    CompactionStarted,
    FixedCount,
    ReplacementMessage,
    SessionStore,
    StoreContextEngine,
    TenantStore,
    TurnRange,
    Usage,
    UserMessage,
    audit_session,
    build_context,
    compact_session_loops,
    expand,
    export_conversation,
    import_jsonl,
    maybe_compact,
    stream_conversation,
)
from sessionstore.errors import SessionExistsError, SessionStoreError
from sessionstore.store._tables import metadata
from tests.factories import conversation

T = TypeVar("T")

MISSING_SESSION = "no-such-session"
MISSING_ID = 2**40
"""An id no test database reaches."""


# ── what is enumerated ─────────────────────────────────────────────────────────

# `HistoryReader` and `AuditReader`: what the exports and the audit take, protocols both
# store classes satisfy.
_STORE_TYPES = re.compile(r"\b(SessionStore|TenantStore|HistoryReader|AuditReader)\b")


def _public(cls: type) -> set[str]:
    return {name for name in dir(cls) if not name.startswith("_")}


def _takes_a_store(target: Callable[..., Any]) -> bool:
    try:
        parameters = inspect.signature(target).parameters.values()
    except (TypeError, ValueError):  # a builtin without a signature
        return False
    return any(_STORE_TYPES.search(str(p.annotation)) for p in parameters)


def enumerate_public_calls() -> set[str]:
    names = {f"SessionStore.{name}" for name in _public(SessionStore)}
    names |= {f"TenantStore.{name}" for name in _public(TenantStore)}
    for name in sessionstore.__all__:
        obj = getattr(sessionstore, name)
        if inspect.isclass(obj) and obj not in (SessionStore, TenantStore):
            if _takes_a_store(obj.__init__):
                names |= {
                    f"{name}.{method}"
                    for method in _public(obj)
                    if inspect.iscoroutinefunction(getattr(obj, method))
                }
        elif inspect.isfunction(obj) and _takes_a_store(obj):
            names.add(name)
    return names


ENUMERATED = enumerate_public_calls()


# ── the two tenants ────────────────────────────────────────────────────────────


@dataclass
class World:
    """Tenant A (ada) attacks tenant B (bob); `store` is the operator's unscoped handle."""

    store: SessionStore
    ada: TenantStore
    bob: TenantStore
    ada_sid: str
    ada_loop: int
    bob_sid: str
    bob_loop: int
    bob_block: int
    bob_replacement: int
    bob_message_ids: list[int]


async def _compacted_session(handle: TenantStore) -> tuple[str, int]:
    """A session of 3 loops, compacted (blocks, replacements, events, a digest)."""
    session = await handle.create_session(title="private")
    for i in range(3):
        await handle.start_loop(session.id)
        messages = conversation(turns=3)
        if i == 0:  # the same client id in both tenants' sessions
            messages[0] = messages[0].model_copy(update={"client_id": "shared-client-id"})
        await handle.append_messages(session.id, messages)
    await compact_session_loops(
        handle, session.id, config=CompactionConfig(compaction_scope=FixedCount(1))
    )
    loop_id = (await handle.get_session(session.id)).active_loop_id
    assert loop_id is not None
    return session.id, loop_id


async def make_world(store: SessionStore) -> World:
    ada, bob = store.for_tenant("app", "ada"), store.for_tenant("app", "bob")
    ada_sid, ada_loop = await _compacted_session(ada)
    bob_sid, bob_loop = await _compacted_session(bob)
    blocks = [block for _, block in await bob.chain_blocks(bob_sid) if block is not None]
    replacements = [
        item.id
        for block in blocks
        for section in (block.keep_compacted, block.keep_recent)
        if section is not None
        for item in section.messages
    ]
    assert blocks[-1].id is not None
    assert replacements[0] is not None
    history = await bob.get_history(bob_sid)
    return World(
        store=store,
        ada=ada,
        bob=bob,
        ada_sid=ada_sid,
        ada_loop=ada_loop,
        bob_sid=bob_sid,
        bob_loop=bob_loop,
        bob_block=blocks[-1].id,
        bob_replacement=replacements[0],
        bob_message_ids=[m.id for m in history],
    )


async def snapshot(
    store: SessionStore, session_id: str, tenant: tuple[str, str] = ("app", "bob")
) -> list[tuple[str, list[Any]]]:
    """Every row of one session (of `tenant`), in every table, in a stable order."""
    rows = []
    async with store.engine.connect() as conn:
        for table in metadata.sorted_tables:
            if table.name == "sessionstore_sessions":
                key = table.c.id
            elif "session_id" in table.c:
                key = table.c.session_id
            else:
                continue
            mine = (table.c.app_name == tenant[0], table.c.user_id == tenant[1])
            found = await conn.execute(select(table).where(key == session_id, *mine))
            rows.append((table.name, sorted(map(tuple, found.all()), key=repr)))
    return rows


# ── how a refusal must look ────────────────────────────────────────────────────


async def _raised(call: Awaitable[Any]) -> BaseException:
    try:
        await call
    except (SessionStoreError, ValueError) as exc:
        return exc
    raise AssertionError("the call went through")


async def like_missing(make: Callable[[T], Awaitable[Any]], foreign: T, missing: T) -> None:
    """`make(foreign)` fails exactly as `make(missing)`: same type, same words."""
    seen, expected = await _raised(make(foreign)), await _raised(make(missing))
    assert type(seen) is type(expected)
    assert str(seen) == str(expected).replace(repr(missing), repr(foreign)).replace(
        str(missing), str(foreign)
    )


def _block_covering(message_ids: list[int]) -> CompactionBlock:
    return CompactionBlock(
        keep_compacted=CompactedSection(
            range=TurnRange(start_turn=0, end_turn=0),
            messages=[
                ReplacementMessage(message=UserMessage(content="stolen"), covers=message_ids)
            ],
        ),
        strategy="test",
    )


def _started(loop_id: int, session_id: str) -> CompactionStarted:
    return CompactionStarted(
        session_id=session_id,
        current_loop_id=loop_id,
        loop_ids=[loop_id],
        tokens_before=1,
        strategy="test",
        overlay="default",
    )


# ── the cases ──────────────────────────────────────────────────────────────────

Case = Callable[[World], Awaitable[None]]
CASES: dict[str, Case] = {}


def case(*names: str) -> Callable[[Case], Case]:
    def register(fn: Case) -> Case:
        for name in names:
            assert name not in CASES, name
            CASES[name] = fn
        return fn

    return register


def both(method: str) -> tuple[str, str]:
    """A data call: the same method on both handles; the tenant handle is the one tested."""
    return (f"SessionStore.{method}", f"TenantStore.{method}")


def session_and_loop(method: str, **extra: Any) -> Case:
    """A call taking `(session_id, ...)` and `loop_id=`: refuse B's session, and B's loop."""

    async def check(w: World) -> None:
        call = getattr(w.ada, method)
        await like_missing(lambda sid: call(sid, **extra), w.bob_sid, MISSING_SESSION)
        await like_missing(
            lambda loop: call(w.ada_sid, loop_id=loop, **extra), w.bob_loop, MISSING_ID
        )

    return check


def session_and_positional_loop(method: str, *extra: Any) -> Case:
    """A call taking `(session_id, loop_id, ...)`: refuse B's session, and B's loop."""

    async def check(w: World) -> None:
        call = getattr(w.ada, method)
        await like_missing(lambda sid: call(sid, w.bob_loop, *extra), w.bob_sid, MISSING_SESSION)
        await like_missing(lambda loop: call(w.ada_sid, loop, *extra), w.bob_loop, MISSING_ID)

    return check


_LOOP_CALLS: dict[str, dict[str, Any]] = {
    "active_chain": {},
    "chain_blocks": {},
    "get_digest": {},
    "get_history": {},
    "get_turn_map": {},
    "read_context": {"budget": 10_000},
    "chain_in_scope": {"scope": FixedCount(3), "max_context_tokens": 10_000},
    "digest_inputs": {"first_in_scope": 0},
}
for _method, _extra in _LOOP_CALLS.items():
    case(*both(_method))(session_and_loop(_method, **_extra))

for _method, _args in {
    "get_loop": (),
    "close_loop": (),
    "switch_loop": (),
    "get_block": (),
    "block_history": (),
    "get_turns": (TurnRange(start_turn=0, end_turn=0),),
}.items():
    case(*both(_method))(session_and_positional_loop(_method, *_args))


@case(*both("get_session"), *both("delete_session"), *both("list_loops"))
async def _session_only(w: World) -> None:
    for method in ("get_session", "delete_session", "list_loops"):
        await like_missing(getattr(w.ada, method), w.bob_sid, MISSING_SESSION)


@case(*both("list_compaction_events"))
async def _events_listed(w: World) -> None:
    await like_missing(w.ada.list_compaction_events, w.bob_sid, MISSING_SESSION)
    events = await w.ada.list_compaction_events(w.ada_sid)
    assert events
    assert {e.session_id for e in events} == {w.ada_sid}


@case(*both("create_session"), *both("import_session"))
async def _create(w: World) -> None:
    # Ids are per tenant (issue 17, item 9): B's id is free for A, and A's session under
    # it is A's own; A's refusals tell nothing about B (the same as for an unused id).
    await like_missing(w.ada.get_session, w.bob_sid, MISSING_SESSION)
    mine = await w.ada.create_session(session_id=w.bob_sid)
    assert (mine.app_name, mine.user_id, mine.loop_count) == ("app", "ada", 0)
    with pytest.raises(SessionExistsError):  # A's own id, now taken for A
        await w.ada.import_session([[UserMessage(content="x")]], session_id=w.bob_sid)
    assert await w.ada.get_messages(w.bob_sid) == []
    await w.ada.delete_session(w.bob_sid)
    imported = await w.ada.import_session([[UserMessage(content="x")]], session_id=w.bob_sid)
    assert imported.loop_count == 1
    assert [m.message for m in await w.ada.get_history(w.bob_sid)] == [UserMessage(content="x")]
    await w.ada.delete_session(w.bob_sid)
    await like_missing(w.ada.get_session, w.bob_sid, MISSING_SESSION)
    for create in (w.ada.create_session, lambda **kw: w.ada.import_session([], **kw)):
        with pytest.raises(ValueError, match="own tenant"):
            await create(user_id="bob")
        with pytest.raises(ValueError, match="own tenant"):
            await create(app_name="other")


@case(*both("list_sessions"))
async def _list(w: World) -> None:
    page = await w.ada.list_sessions()
    assert [s.id for s in page.items] == [w.ada_sid]
    for app_name, user_id in (("app", "bob"), ("other", None), ("x", "y")):
        with pytest.raises(ValueError, match="own tenant"):
            await w.ada.list_sessions(app_name=app_name, user_id=user_id)
    # B's cursor (a valid one) still lists only A's sessions.
    await w.bob.create_session()
    cursor = (await w.bob.list_sessions(limit=1)).next_cursor
    assert cursor is not None
    assert {s.user_id for s in (await w.ada.list_sessions(cursor=cursor)).items} <= {"ada"}


@case(*both("start_loop"))
async def _start_loop(w: World) -> None:
    await like_missing(w.ada.start_loop, w.bob_sid, MISSING_SESSION)
    await like_missing(
        lambda loop: w.ada.start_loop(w.ada_sid, parent_loop_id=loop), w.bob_loop, MISSING_ID
    )


@case(*both("append_messages"), *both("append_message"))
async def _append(w: World) -> None:
    message = UserMessage(content="x")
    await like_missing(lambda sid: w.ada.append_message(sid, message), w.bob_sid, MISSING_SESSION)
    await like_missing(
        lambda sid: w.ada.append_messages(sid, [message]), w.bob_sid, MISSING_SESSION
    )
    await like_missing(
        lambda loop: w.ada.append_message(w.ada_sid, message, loop_id=loop), w.bob_loop, MISSING_ID
    )
    await like_missing(
        lambda loop: w.ada.append_messages(w.ada_sid, [message], loop_id=loop),
        w.bob_loop,
        MISSING_ID,
    )
    # Client ids are per session: B's does not collide with A's, nor reveal B's message.
    mine = UserMessage(content="another text", client_id="shared-client-id-2")
    (stored,) = await w.ada.append_messages(w.ada_sid, [mine])
    assert stored.session_id == w.ada_sid


@case(*both("get_messages"))
async def _get_messages(w: World) -> None:
    await like_missing(w.ada.get_messages, w.bob_sid, MISSING_SESSION)
    await like_missing(lambda loop: w.ada.get_messages(w.ada_sid, loop), w.bob_loop, MISSING_ID)


@case(*both("get_messages_by_id"))
async def _by_id(w: World) -> None:
    await like_missing(
        lambda sid: w.ada.get_messages_by_id(sid, w.bob_message_ids), w.bob_sid, MISSING_SESSION
    )
    assert await w.ada.get_messages_by_id(w.ada_sid, w.bob_message_ids) == []


@case(*both("write_block"), *both("write_blocks"))
async def _write_blocks(w: World) -> None:
    block = CompactionBlock(keep_first=TurnRange(start_turn=0, end_turn=0), strategy="test")
    await like_missing(
        lambda sid: w.ada.write_block(sid, w.bob_loop, block), w.bob_sid, MISSING_SESSION
    )
    await like_missing(
        lambda loop: w.ada.write_block(w.ada_sid, loop, block), w.bob_loop, MISSING_ID
    )
    await like_missing(
        lambda mid: w.ada.write_block(w.ada_sid, w.ada_loop, _block_covering([mid])),
        w.bob_message_ids[0],
        MISSING_ID,
    )
    await like_missing(
        lambda loop: w.ada.write_blocks(w.ada_sid, [], events=[_started(loop, w.ada_sid)]),
        w.bob_loop,
        MISSING_ID,
    )
    digest = await w.ada.get_digest(w.ada_sid)
    assert digest is not None
    for field in ("head_loop_id", "through_loop_id"):

        def with_loop(loop: int, field: str = field) -> Awaitable[Any]:
            return w.ada.write_blocks(w.ada_sid, [], digest=digest.model_copy(update={field: loop}))

        await like_missing(
            with_loop,
            w.bob_loop,
            MISSING_ID,
        )


@case(*both("get_replacement_message"))
async def _replacement(w: World) -> None:
    await like_missing(
        lambda sid: w.ada.get_replacement_message(sid, w.bob_replacement),
        w.bob_sid,
        MISSING_SESSION,
    )
    await like_missing(
        lambda rid: w.ada.get_replacement_message(w.ada_sid, rid), w.bob_replacement, MISSING_ID
    )


@case(*both("record_compaction_event"))
async def _record_event(w: World) -> None:
    def record(sid: str, loop_id: int | None = None, block_id: int | None = None) -> Awaitable[Any]:
        return w.ada.record_compaction_event(
            sid, event="started", tokens_before=1, loop_id=loop_id, block_id=block_id
        )

    await like_missing(record, w.bob_sid, MISSING_SESSION)
    await like_missing(lambda loop: record(w.ada_sid, loop_id=loop), w.bob_loop, MISSING_ID)
    await like_missing(lambda block: record(w.ada_sid, block_id=block), w.bob_block, MISSING_ID)


@case(*both("purge"))
async def _purge(w: World) -> None:
    report = await w.ada.purge(older_than=datetime.now(UTC) + timedelta(days=1))
    assert report.sessions == 1
    assert (await w.ada.list_sessions()).items == []


@case(*both("verify"))
async def _verify(w: World) -> None:
    report = await w.ada.verify()
    assert report.is_ok, report.problems
    assert report.sessions == len((await w.ada.list_sessions()).items)
    everyone = await w.store.verify()
    assert everyone.sessions > report.sessions  # bob's sessions are not ada's to check


@case(*both("pop_message"))
async def _pop(w: World) -> None:
    await like_missing(w.ada.pop_message, w.bob_sid, MISSING_SESSION)
    await like_missing(
        lambda sid: w.ada.pop_message(sid, replacement=UserMessage(content="mine")),
        w.bob_sid,
        MISSING_SESSION,
    )
    popped = await w.ada.pop_message(w.ada_sid)
    assert popped is not None
    assert popped.session_id == w.ada_sid


@case(*both("get_loop_view"))
async def _loop_view(w: World) -> None:
    bob_loop = next(loop for loop in await w.store.list_loops(w.bob_sid) if loop.id == w.bob_loop)
    await like_missing(lambda sid: w.ada.get_loop_view(sid, bob_loop), w.bob_sid, MISSING_SESSION)
    # Bob's loop, presented as one of ada's session, is answered like a loop that does not exist.
    await like_missing(
        lambda loop_id: w.ada.get_loop_view(
            w.ada_sid, bob_loop.model_copy(update={"id": loop_id, "session_id": w.ada_sid})
        ),
        w.bob_loop,
        MISSING_ID,
    )


@case(*both("iter_history"), "stream_conversation")
async def _streams(w: World) -> None:
    async def chunks(sid: str, loop_id: int | None = None) -> list[Any]:
        return [chunk async for chunk in w.ada.iter_history(sid, loop_id=loop_id)]

    async def text(sid: str) -> str:
        return "".join([piece async for piece in stream_conversation(w.ada, sid)])

    await like_missing(chunks, w.bob_sid, MISSING_SESSION)
    await like_missing(text, w.bob_sid, MISSING_SESSION)
    await like_missing(lambda loop: chunks(w.ada_sid, loop), w.bob_loop, MISSING_ID)
    assert await chunks(w.ada_sid)


@case(*both("search"))
async def _search(w: World) -> None:
    bob_messages = await w.store.get_messages(w.bob_sid)
    word = next(
        word
        for stored in bob_messages
        if isinstance(stored.message, UserMessage)
        for word in stored.message.text.split()
        if word.isalpha() and len(word) > 3
    )
    assert any(hit.session_id == w.bob_sid for hit in await w.store.search(word, limit=100))
    hits = await w.ada.search(word, limit=100, include_summaries=True)
    assert all(hit.session_id != w.bob_sid for hit in hits)
    await like_missing(lambda sid: w.ada.search(word, session_id=sid), w.bob_sid, MISSING_SESSION)
    with pytest.raises(ValueError, match="tenant"):
        await w.ada.search(word, app_name="app", user_id="bob")


@case(*both("usage"), *both("record_usage"))
async def _usage(w: World) -> None:
    await like_missing(w.ada.usage, w.bob_sid, MISSING_SESSION)
    spent = Usage(input_tokens=5, output_tokens=1)
    await like_missing(lambda sid: w.ada.record_usage(sid, spent), w.bob_sid, MISSING_SESSION)
    await like_missing(
        lambda loop: w.ada.record_usage(w.ada_sid, spent, loop_id=loop), w.bob_loop, MISSING_ID
    )
    await w.ada.record_usage(w.ada_sid, spent)
    assert (await w.ada.usage(w.ada_sid)).usage.input_tokens >= 5


@case("TenantStore.tenant")
async def _tenant(w: World) -> None:
    assert w.ada.tenant == ("app", "ada")


@case(
    "SessionStore.engine",
    "SessionStore.upgrade",
    "SessionStore.check_schema",
    "SessionStore.close",
    "SessionStore.for_tenant",
    "SessionStore.from_url",
)
async def _operator_only(w: World) -> None:
    # The operator's calls: a tenant handle has none of them, so it cannot open another
    # tenant's handle, reach the engine (raw SQL) or migrate the schema.
    for name in ("engine", "upgrade", "check_schema", "close", "for_tenant", "from_url"):
        assert not hasattr(w.ada, name), name
    assert w.store.for_tenant("app", "ada").tenant == w.ada.tenant


# ── orchestration ──────────────────────────────────────────────────────────────


@case("build_context")
async def _build_context(w: World) -> None:
    await like_missing(
        lambda sid: build_context(w.ada, sid, max_context_tokens=10_000), w.bob_sid, MISSING_SESSION
    )
    await like_missing(
        lambda loop: build_context(w.ada, w.ada_sid, max_context_tokens=10_000, loop_id=loop),
        w.bob_loop,
        MISSING_ID,
    )


@case("compact_session_loops")
async def _compact(w: World) -> None:
    await like_missing(lambda sid: compact_session_loops(w.ada, sid), w.bob_sid, MISSING_SESSION)
    await like_missing(
        lambda loop: compact_session_loops(w.ada, w.ada_sid, loop), w.bob_loop, MISSING_ID
    )


@case("maybe_compact")
async def _maybe_compact(w: World) -> None:
    await like_missing(
        lambda sid: maybe_compact(w.ada, sid, max_context_tokens=100), w.bob_sid, MISSING_SESSION
    )
    await like_missing(
        lambda loop: maybe_compact(w.ada, w.ada_sid, max_context_tokens=100, loop_id=loop),
        w.bob_loop,
        MISSING_ID,
    )


@case("audit_session")
async def _audit(w: World) -> None:
    await like_missing(lambda sid: audit_session(w.ada, sid), w.bob_sid, MISSING_SESSION)
    await like_missing(
        lambda loop: audit_session(w.ada, w.ada_sid, loop_id=loop), w.bob_loop, MISSING_ID
    )


@case("expand")
async def _expand(w: World) -> None:
    await like_missing(
        lambda sid: expand(w.ada, sid, w.bob_replacement), w.bob_sid, MISSING_SESSION
    )
    await like_missing(lambda rid: expand(w.ada, w.ada_sid, rid), w.bob_replacement, MISSING_ID)


@case("export_conversation")
async def _export(w: World) -> None:
    await like_missing(lambda sid: export_conversation(w.ada, sid), w.bob_sid, MISSING_SESSION)
    await like_missing(
        lambda loop: export_conversation(w.ada, w.ada_sid, loop_id=loop), w.bob_loop, MISSING_ID
    )


@case("import_jsonl")
async def _import(w: World) -> None:
    # Ids are per tenant: B's id imports as A's own session, and B's stays untouched.
    line = f'{{"id": "{w.bob_sid}", "messages": [{{"role": "user", "content": "x"}}]}}'
    report = await import_jsonl(w.ada, [line])
    assert (report.imported, report.skipped) == ([w.bob_sid], [])
    assert [m.message for m in await w.ada.get_history(w.bob_sid)] == [UserMessage(content="x")]
    report = await import_jsonl(w.ada, [line])  # A's own id now: skipped
    assert (report.imported, report.skipped) == ([], [w.bob_sid])
    await w.ada.delete_session(w.bob_sid)
    await like_missing(w.ada.get_session, w.bob_sid, MISSING_SESSION)
    fresh = '{"id": "fresh", "messages": [{"role": "user", "content": "x"}]}'
    with pytest.raises(SessionStoreError, match="own tenant"):
        await import_jsonl(w.ada, [fresh], user_id="bob")


def _engine_case(method: str, *args: Any) -> Case:
    async def check(w: World) -> None:
        def run(sid: str) -> Awaitable[Any]:
            engine = StoreContextEngine(w.ada, sid, context_length=2_000)
            called: Awaitable[Any] = getattr(engine, method)(*args)
            return called

        await like_missing(run, w.bob_sid, MISSING_SESSION)

    return check


for _method, _args in {
    "compress": (),
    "fold_left_out": (),
    "has_content_to_compress": (),
    "refresh": (),
    "on_session_start": (),
}.items():
    case(f"StoreContextEngine.{_method}")(_engine_case(_method, *_args))


@case("StoreContextEngine.on_session_end")
async def _session_end(w: World) -> None:
    # It reads nothing (every compaction is already stored): it ends quietly either way.
    for sid in (w.bob_sid, MISSING_SESSION):
        await StoreContextEngine(w.ada, sid, context_length=2_000).on_session_end()


@case("StoreContextEngine.summarize_branch")
async def _summarize_branch(w: World) -> None:
    engine = StoreContextEngine(w.ada, w.ada_sid, context_length=2_000)
    await like_missing(engine.summarize_branch, w.bob_loop, MISSING_ID)
    await like_missing(
        lambda loop: engine.summarize_branch(w.ada_loop, into_loop_id=loop), w.bob_loop, MISSING_ID
    )


# ── the tests ──────────────────────────────────────────────────────────────────


def test_every_public_call_has_an_isolation_case() -> None:
    """A new public method (or function taking a store) must come with a case here."""
    assert sorted(ENUMERATED - CASES.keys()) == [], "add an isolation case for these"
    assert sorted(CASES.keys() - ENUMERATED) == [], "these cases name no public call"


def _distinct_cases() -> list[Any]:
    """Each case function once (a data call's case serves both handles), named by its calls."""
    names: dict[Case, list[str]] = {}
    for name, fn in sorted(CASES.items()):
        names.setdefault(fn, []).append(name)
    return [pytest.param(fn, id=" ".join(called)) for fn, called in names.items()]


@pytest.mark.parametrize("check", _distinct_cases())
async def test_a_tenant_cannot_reach_another_tenants_data(store: SessionStore, check: Case) -> None:
    world = await make_world(store)
    before = await snapshot(store, world.bob_sid)

    await check(world)

    assert await snapshot(store, world.bob_sid) == before
    assert (await world.bob.get_session(world.bob_sid)).id == world.bob_sid
