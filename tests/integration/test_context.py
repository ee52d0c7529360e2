"""Building the context on SQLite and PostgreSQL: scope, overlays, raw tail, trimming."""

from __future__ import annotations

from typing import Any

import pytest

import sessionstore
from sessionstore import (
    AssistantMessage,
    BuiltContext,
    CompactionConfig,
    FixedCount,
    Message,
    SessionDigest,
    SessionStore,
    TextContent,
    TokenBudget,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    build_context,
    compact_session_loops,
    message_tokens,
)
from sessionstore.errors import (
    ConfigurationError,
    ContextOverflowError,
    OverlayNotFoundError,
)
from tests.factories import conversation
from tests.integration._helpers import SMALL, check_valid, session_with_loops


async def test_context_loads_overlays_for_the_scope_and_raw_tail(store: SessionStore) -> None:
    session_id = await session_with_loops(store)
    raw_context = await build_context(store, session_id, max_context_tokens=1_000_000)
    await compact_session_loops(store, session_id, config=SMALL)
    context = await build_context(store, session_id, max_context_tokens=1_000_000, config=SMALL)
    check_valid(context)
    chain = await store.active_chain(session_id)
    assert context.loop_ids == [loop.id for loop in chain[-4:]]
    assert context.tokens < raw_context.tokens
    sources = {item.source for item in context.items}
    assert {"raw", "compacted", "recent"} <= sources
    first_raw = await store.get_messages(session_id, chain[-1].id)
    assert context.messages[-1] == first_raw[-1].message  # recent copies are verbatim here
    # Messages appended after the compaction show raw, after the block's sections.
    extra: list[Message] = [UserMessage(content="one more thing"), AssistantMessage(content="done")]
    await store.append_messages(session_id, extra)
    later = await build_context(store, session_id, max_context_tokens=1_000_000, config=SMALL)
    assert later.messages[-2:] == extra
    assert [item.source for item in later.items[-2:]] == ["raw", "raw"]
    check_valid(later)


async def test_token_budget_scope_walks_back_within_the_budget(store: SessionStore) -> None:
    session_id = await session_with_loops(store, loops=6, turns=3)
    chain = await store.active_chain(session_id)
    per_loop = chain[-1].token_total
    budget_for_three = per_loop * 3 + per_loop // 2
    config = CompactionConfig(compaction_scope=TokenBudget())
    context = await build_context(
        store, session_id, max_context_tokens=budget_for_three, config=config
    )
    # The newest loops that fit, and the chain's first loop (the session's task): no
    # session digest stands for the loops left out, so the task's loop stays.
    assert context.loop_ids == [chain[0].id, *[loop.id for loop in chain[-3:]]]
    check_valid(context)
    everything = await build_context(
        store,
        session_id,
        max_context_tokens=10**7,
        config=CompactionConfig(compaction_scope=TokenBudget()),
    )
    assert everything.loop_ids == [loop.id for loop in chain]
    fixed = await build_context(
        store,
        session_id,
        max_context_tokens=10**7,
        config=CompactionConfig(compaction_scope=FixedCount(0)),
    )
    assert fixed.loop_ids == [chain[-1].id]


async def test_trimming_keeps_the_latest_user_request_and_says_so(store: SessionStore) -> None:
    session_id = await session_with_loops(store, loops=2, turns=10)
    request = UserMessage(content="Now please summarise what you changed.")
    await store.append_messages(session_id, [request, *conversation(turns=6)[1:]])
    context = await build_context(store, session_id, max_context_tokens=900)
    check_valid(context)
    assert request in context.messages
    assert context.trimmed_messages > 0
    # Said once: in a trim marker, or in the digest built for the turns left out.
    markers = [item for item in context.items if item.source in ("marker", "built")]
    assert markers
    marker = markers[0].message
    assert isinstance(marker, UserMessage | AssistantMessage)
    assert f"{context.trimmed_messages} messages removed" in marker.text
    with pytest.raises(ContextOverflowError) as caught:
        await build_context(store, session_id, max_context_tokens=10)
    assert caught.value.available == 10
    assert caught.value.needed > 10


async def test_an_interrupted_call_is_reported_and_answered(store: SessionStore) -> None:
    session = await store.create_session(app_name="app", user_id="u")
    call = ToolCall(id="call_x", name="bash", arguments='{"command": "make"}')
    await store.append_messages(
        session.id,
        [UserMessage(content="build it"), AssistantMessage(content=[TextContent(text="ok"), call])],
    )
    context = await build_context(store, session.id, max_context_tokens=10_000)
    check_valid(context)
    (interrupted,) = context.interrupted_calls
    assert (interrupted.call_id, interrupted.tool_name, interrupted.at_end) == (
        "call_x",
        "bash",
        True,
    )
    last = context.messages[-1]
    assert isinstance(last, ToolResultMessage)
    assert last.is_error
    assert context.items[-1].source == "synthetic"


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"max_context_tokens": 0}, ValueError),
        ({"max_context_tokens": -5}, ValueError),
        ({"max_context_tokens": 100, "system_prompt_tokens": 100}, ValueError),
        ({"max_context_tokens": 100, "config": {"keep_recent_turns": -1}}, ConfigurationError),
        ({"max_context_tokens": 100, "config": {"max_summary_tokens": 0}}, ConfigurationError),
    ],
)
async def test_bad_budgets_and_configs_are_refused(
    store: SessionStore, kwargs: dict[str, Any], error: type[Exception]
) -> None:
    """A bad argument is a ValueError, a bad configuration a ConfigurationError."""
    session_id = await session_with_loops(store, loops=1)
    with pytest.raises(error):
        await build_context(store, session_id, **kwargs)
    if "system_prompt_tokens" not in kwargs:
        with pytest.raises(error):
            await compact_session_loops(store, session_id, **kwargs)
    assert await store.list_compaction_events(session_id) == []


async def test_an_empty_session_builds_an_empty_context(store: SessionStore) -> None:
    session = await store.create_session(app_name="app", user_id="u")
    context = await build_context(store, session.id, max_context_tokens=1000)
    assert context.messages == []
    assert context.tokens == 0
    result = await compact_session_loops(store, session.id)
    assert result.blocks == []


def _messages(context: BuiltContext) -> list[Message]:
    return context.messages


async def test_an_unknown_overlay_is_a_typed_error(store: SessionStore) -> None:
    """`--overlay nosuch` used to build from raw messages in silence."""
    session_id = await session_with_loops(store, loops=2)
    with pytest.raises(OverlayNotFoundError, match="no overlay 'nosuch'") as caught:
        await build_context(store, session_id, max_context_tokens=10_000, overlay="nosuch")
    assert caught.value.overlay == "nosuch"
    with pytest.raises(OverlayNotFoundError):
        await sessionstore.audit_session(store, session_id, overlay="nosuch")
    # `default` needs no compaction; a named overlay exists once a compaction wrote it.
    await build_context(store, session_id, max_context_tokens=10_000)
    await compact_session_loops(store, session_id, overlay="short")
    built = await build_context(store, session_id, max_context_tokens=10_000, overlay="short")
    assert built.overlay == "short"


async def test_the_loops_before_the_scope_live_on_in_the_session_digest(
    store: SessionStore,
) -> None:
    """The original task survives any number of loops: the digest carries it forward."""
    session = await store.create_session(app_name="a", user_id="u")
    task = "Migrate the billing service to the v2 invoices API; keep invoice INV-20931 intact."
    await store.append_messages(session.id, [UserMessage(content=task)])
    digests: dict[int, SessionDigest] = {}
    for i in range(8):
        await store.start_loop(session.id)
        await store.append_messages(
            session.id,
            [
                UserMessage(content=f"Error: wrong format, try again ({i})"),
                *conversation(turns=3)[1:],
            ],
        )
        await compact_session_loops(store, session.id, config=SMALL)
        digest = await store.get_digest(session.id)
        if digest is not None and digest.id is not None:
            digests[digest.id] = digest
    context = await build_context(store, session.id, max_context_tokens=20_000, config=SMALL)
    check_valid(context)
    first = context.items[0]
    assert first.source == "digest"
    assert isinstance(first.message, UserMessage | AssistantMessage)
    assert "INV-20931" in first.message.text
    digest = await store.get_digest(session.id)
    assert digest is not None
    # Each digest names the loops it folded and the digest it extends: together, the
    # chain's loops from the root, and the context shows the loops after them.
    assert len(digests) > 1
    folded: list[int] = []
    link: SessionDigest | None = digest
    while link is not None:
        folded[:0] = [loop_id for loop_id, _ in link.folded]
        link = digests[link.extends_id] if link.extends_id is not None else None
    chain = await store.active_chain(session.id)
    assert folded == [loop.id for loop in chain[: len(folded)]]
    assert folded[-1] == digest.through_loop_id
    assert context.loop_ids == [loop.id for loop in chain[len(folded) :]]
    audit = await sessionstore.audit_session(store, session.id)
    assert audit.digested_loop_ids == folded


async def test_secrets_can_be_redacted_from_the_whole_context(store: SessionStore) -> None:
    """Optional: even the protected head and tail, raw messages included, are redacted."""
    secret = "sk-proj-" + "Zq9Xw8Vu7" * 5
    session = await store.create_session(app_name="a", user_id="u")
    request = UserMessage(content=f"Deploy with OPENAI_API_KEY={secret} please.")
    await store.append_messages(session.id, [request])
    plain = await build_context(store, session.id, max_context_tokens=10_000)
    assert secret in plain.messages[0].text  # type: ignore[union-attr]  # a user message
    redacted = await build_context(
        store, session.id, max_context_tokens=10_000, redact_secrets=True
    )
    (message,) = redacted.messages
    assert isinstance(message, UserMessage)
    assert secret not in message.text
    assert "[REDACTED]" in message.text
    assert redacted.tokens == message_tokens(message)
    # Still a raw item (fitting treats it as one), but not the stored message any more.
    assert [(i.source, i.redacted) for i in redacted.items] == [("raw", True)]
    assert [(i.source, i.redacted) for i in plain.items] == [("raw", False)]
    # A message without a secret is left as stored.
    await store.append_messages(session.id, [AssistantMessage(content="on it")])
    both = await build_context(store, session.id, max_context_tokens=10_000, redact_secrets=True)
    assert [i.redacted for i in both.items] == [True, False]
    # Raw is sacred: the stored message is unchanged.
    stored = await store.get_messages(session.id)
    assert stored[0].message == request


async def _chat(store: SessionStore, loops: int) -> str:
    """A session of short loops, never compacted: a chat, each request a loop."""
    session = await store.create_session(app_name="app", user_id="chat")
    for index in range(loops):
        turn: list[Message] = [
            UserMessage(content=f"question {index}"),
            AssistantMessage(content=[TextContent(text=f"answer {index}")]),
        ]
        await store.append_messages(session.id, turn, loop_id="new")
    return session.id


async def test_a_resume_of_many_short_loops_sends_as_many_statements_as_of_few(
    store: SessionStore,
) -> None:
    """The raw turns of the loops without a block are read together, not one loop a statement.

    The chain is read in windows that grow (`WINDOW_GROWTH`) until the scope is known, so a longer
    chain takes a statement or two more; a statement a loop would be 36 more.
    """
    from sqlalchemy import event

    if store.engine.dialect.name == "sqlite":
        pytest.skip("SQLite's reads go straight to the driver, past SQLAlchemy's events")

    sent: list[str] = []

    def log(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        sent.append(statement)

    counts = {}
    for loops in (4, 40):
        session_id = await _chat(store, loops)
        event.listen(store.engine.sync_engine, "before_cursor_execute", log)
        try:
            context = await build_context(store, session_id, max_context_tokens=1_000_000)
        finally:
            event.remove(store.engine.sync_engine, "before_cursor_execute", log)
        # Every loop is in the context (nothing was compacted, and all of it fits).
        assert len(context.messages) == 2 * loops
        assert context.messages[-1] == AssistantMessage(
            content=[TextContent(text=f"answer {loops - 1}")]
        )
        counts[loops] = len(sent)
        sent.clear()
    assert counts[4] > 0
    assert counts[40] <= counts[4] + 4


async def test_the_context_read_returns_the_stored_messages_the_history_read_returns(
    store: SessionStore,
) -> None:
    """What a build loads is each loop's stored messages, as `get_messages` gives them.

    On SQLite the context read takes the driver's rows straight (no SQLAlchemy result):
    the times, hashes, client ids and payloads must come out as the store's own reads
    give them, at a moment too (its time bound as the store binds one).
    """
    session_id = await _chat(store, 3)
    first = await store.get_history(session_id)
    moment = first[-1].created_at
    extra: list[Message] = [
        UserMessage(content="naïve café — ✓ \U0001f600", client_id="c-1"),
        AssistantMessage(content=[TextContent(text='ok \\u0000 "quoted"')]),
    ]
    await store.append_messages(session_id, extra, loop_id="new")
    for as_of in (None, moment):
        sources = await store.read_context(session_id, budget=10**9, as_of=as_of)
        assert sources.loops
        for source in sources.loops:
            stored = await store.get_messages(session_id, source.loop.id)
            if as_of is not None:
                stored = [s for s in stored if s.created_at <= as_of]
            assert list(source.raw) == stored
            assert [s.message for s in source.raw] == [s.message for s in stored]
        loaded = [s for source in sources.loops for s in source.raw]
        assert len(loaded) == (len(first) if as_of is not None else len(first) + 2)
