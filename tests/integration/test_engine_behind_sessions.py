"""The live engine behind the SDK adapters: gated compaction, chosen by name, on any overlay.

On SQLite and PostgreSQL. The openai-agents session and the pydantic-ai helpers compact
through a `ContextEngine` (the store engine by default) when its gate fires, never through
an ungated `maybe_compact`; an engine is chosen by a registered name in the config; a named
overlay nothing was compacted into yet starts cleanly.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any, cast

import pytest

pytest.importorskip("agents")

from agents.items import TResponseInputItem

from sessionstore import (
    AssistantMessage,
    CompactionConfig,
    ConfigurationError,
    SessionStore,
    StoreContextEngine,
    SummarizingBlockCompaction,
    TenantStore,
    UserMessage,
    register_context_engine,
)
from sessionstore._engine import CompressionOutcome, ContextEngine, EngineStatus, GatePolicy
from sessionstore._engine._registry import _ENGINES
from sessionstore.integrations.openai_agents import SessionStoreSession
from tests.integration.test_live_engine import FailingSummarizer

Item = dict[str, Any]


def tenant(store: SessionStore) -> TenantStore:
    return store.for_tenant("engines", "user-1")


def run(n: int, words: int = 150) -> list[TResponseInputItem]:
    text = " ".join(f"w{n}x{k}" for k in range(words))
    items: list[Item] = [
        {"role": "user", "content": f"Task {n}: {text}"},
        {
            "type": "function_call",
            "id": f"fc_{n}",
            "call_id": f"call_{n}",
            "name": "grep",
            "arguments": json.dumps({"pattern": f"p{n}"}),
            "status": "completed",
        },
        {"type": "function_call_output", "call_id": f"call_{n}", "output": text},
        {
            "id": f"msg_{n}",
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": f"Done {n}. {text}", "annotations": []}],
        },
    ]
    return cast(list[TResponseInputItem], items)


class RecordingEngine:
    """A `ContextEngine` that fires at a fixed line and records what it was asked."""

    name = "recording"

    def __init__(self, line: int) -> None:
        self.line = line
        self.measured: list[int] = []
        self.compressions = 0

    def update_from_response(self, usage: Mapping[str, Any] | object) -> None:
        pass

    def should_compress(self, prompt_tokens: int | None = None) -> bool:
        self.measured.append(prompt_tokens or 0)
        return (prompt_tokens or 0) >= self.line

    async def compress(
        self, *, focus_topic: str | None = None, force: bool = False
    ) -> CompressionOutcome:
        self.compressions += 1
        return CompressionOutcome("noop", forced=force)

    async def has_content_to_compress(self, *, force: bool = False) -> bool:
        return True

    async def on_session_start(self) -> None:
        pass

    async def on_session_end(self) -> None:
        pass

    def on_session_reset(self) -> None:
        pass

    def get_status(self) -> EngineStatus:
        raise NotImplementedError

    def update_model(self, context_length: int, *, system_prompt_tokens: int | None = None) -> None:
        pass


@pytest.fixture
def recording() -> Iterator[list[RecordingEngine]]:
    made: list[RecordingEngine] = []

    def factory(store: Any, session_id: str, **options: Any) -> ContextEngine:
        engine = RecordingEngine(line=options["context_length"] // 2)
        made.append(engine)
        return engine

    register_context_engine("recording", factory)
    yield made
    del _ENGINES["recording"]


# ── the openai-agents session ──────────────────────────────────────────────────


async def test_the_session_compacts_through_its_engine_when_the_gate_fires(
    store: SessionStore,
) -> None:
    window = 6_000
    session = SessionStoreSession("chat", tenant(store), max_context_tokens=window)
    assert isinstance(session.engine, StoreContextEngine)
    threshold = session.engine.threshold_tokens
    for n in range(12):
        await session.add_items(run(n))
        await session.get_items()  # what the Runner does before each model call

    events = await tenant(store).list_compaction_events("chat")
    assert events, "the gate never fired"
    assert session.engine.compression_count >= 1
    # The context fits the window and still holds the latest run, verbatim.
    items = [dict(i) for i in await session.get_items()]
    assert items[-4:] == [dict(i) for i in run(11)]
    total = sum(m.token_count for m in await tenant(store).get_history("chat"))
    assert total > threshold  # the chain outgrew the gate's line


async def test_a_session_object_per_turn_keeps_the_engines_cooldown(store: SessionStore) -> None:
    """The README's pattern makes a session object for each reply: the summarizer that
    failed is not called again on every turn (the gates start from the session's
    compaction events), and the config's explicit strategy is the engine's."""
    failing = FailingSummarizer(RuntimeError("Connection error."))  # its own client's
    config = CompactionConfig(block_strategy=SummarizingBlockCompaction(failing))
    for n in range(12):
        session = SessionStoreSession(
            "chat", tenant(store), max_context_tokens=6_000, compaction=config
        )
        await session.add_items(run(n))
        items = [dict(i) for i in await session.get_items()]
        assert items[-4:] == [dict(i) for i in run(n)]  # still built, trimmed to fit
    assert failing.calls == 1
    events = await tenant(store).list_compaction_events("chat")
    assert [e.details.get("status") for e in events if e.event == "ended"] == ["failed"]
    assert "Connection error." in str(events[-1].details["error"])


async def test_auto_compact_false_never_compacts(store: SessionStore) -> None:
    session = SessionStoreSession(
        "chat", tenant(store), max_context_tokens=6_000, auto_compact=False
    )
    for n in range(12):
        await session.add_items(run(n))
        await session.get_items()
    assert await tenant(store).list_compaction_events("chat") == []
    assert [dict(i) for i in await session.get_items()][-4:] == [dict(i) for i in run(11)]


async def test_every_item_is_kept_while_the_chain_fits_and_nothing_is_compacted(
    store: SessionStore,
) -> None:
    session = SessionStoreSession("chat", tenant(store), max_context_tokens=128_000)
    for n in range(8):
        await session.add_items(run(n, words=20))
    assert len(await session.get_items()) == 32
    assert await tenant(store).list_compaction_events("chat") == []


async def test_the_engine_is_chosen_by_name_in_the_config(
    store: SessionStore, recording: list[RecordingEngine]
) -> None:
    session = SessionStoreSession(
        "chat",
        tenant(store),
        max_context_tokens=4_000,
        compaction=CompactionConfig(context_engine="recording"),
    )
    assert session.engine is recording[0]
    for n in range(6):
        await session.add_items(run(n))
        await session.get_items()
    engine = recording[0]
    # It was asked with the measured context (loaded tokens and the loops left out), and
    # compacted once the context reached its line.
    assert engine.measured == sorted(engine.measured)
    assert engine.measured[0] < engine.line <= engine.measured[-1]
    assert engine.compressions == sum(m >= engine.line for m in engine.measured)
    # By name too, and an engine object bound to the session.
    by_name = SessionStoreSession("c2", tenant(store), max_context_tokens=4_000, engine="recording")
    assert by_name.engine is recording[1]
    own = RecordingEngine(line=1)
    assert SessionStoreSession("c3", tenant(store), max_context_tokens=10, engine=own).engine is own


async def test_an_unknown_engine_is_a_configuration_error(store: SessionStore) -> None:
    with pytest.raises(ConfigurationError, match=r"unknown context engine 'nope'.*'store'"):
        SessionStoreSession("c", tenant(store), max_context_tokens=1_000, engine="nope")
    with pytest.raises(ConfigurationError, match="context_engine"):
        CompactionConfig(context_engine="")
    with pytest.raises(ValueError, match="max_context_tokens"):
        SessionStoreSession("c", tenant(store), engine="store")
    with pytest.raises(TypeError, match="registered name, a factory"):
        SessionStoreSession("c", tenant(store), max_context_tokens=10, engine=42)  # type: ignore[arg-type]


def test_a_name_is_registered_once_unless_replaced(recording: list[RecordingEngine]) -> None:
    with pytest.raises(ValueError, match="already registered"):
        register_context_engine("recording", lambda *a, **k: RecordingEngine(1))
    with pytest.raises(ValueError, match="non-empty"):
        register_context_engine("", lambda *a, **k: RecordingEngine(1))


async def test_the_engine_name_is_not_recorded_on_blocks() -> None:
    assert "context_engine" not in CompactionConfig(context_engine="x").snapshot()


# ── a named overlay ────────────────────────────────────────────────────────────


async def test_a_named_overlay_without_blocks_starts_cleanly(store: SessionStore) -> None:
    """Defect 7: on_session_start() and compress(force=True) raised OverlayNotFoundError."""
    sid = (await store.create_session(app_name="a", user_id="u")).id
    for n in range(4):
        await store.start_loop(sid)
        await store.append_messages(
            sid,
            [
                UserMessage(content=f"task {n} " + "x " * 200),
                AssistantMessage(content="done " * 200),
                UserMessage(content=f"and {n}?"),
                AssistantMessage(content="yes " * 200),
            ],
        )
    engine = StoreContextEngine(store, sid, context_length=100_000, overlay="experiment")
    await engine.on_session_start()
    assert engine.tokens > 0
    outcome = await engine.compress(force=True)
    assert outcome.status == "compacted"
    assert outcome.tokens_after < outcome.tokens_before
    chain = await store.chain_blocks(sid, overlay="experiment")
    assert any(block is not None for _, block in chain)
    assert all(block is None for _, block in await store.chain_blocks(sid))


async def test_a_session_on_a_new_overlay_reads_and_compacts(store: SessionStore) -> None:
    session = SessionStoreSession("chat", tenant(store), max_context_tokens=6_000, overlay="mine")
    for n in range(12):
        await session.add_items(run(n))
        assert len(await session.get_items()) >= 4
    events = await tenant(store).list_compaction_events("chat")
    assert events
    assert {event.details.get("overlay") for event in events} == {"mine"}


# ── the pre-flight check ───────────────────────────────────────────────────────


async def test_the_preflight_check_estimates_the_request_before_the_call(
    store: SessionStore,
) -> None:
    sid = (await store.create_session(app_name="a", user_id="u")).id
    engine = StoreContextEngine(
        store, sid, context_length=10_000, system_prompt_tokens=1_000, policy=GatePolicy()
    )
    small = [UserMessage(content="hello")]
    big = [UserMessage(content="word " * 8_000)]  # about 10,000 tokens
    assert not engine.should_compress_preflight(small)
    assert engine.should_compress_preflight(small, extra_tokens=5_000)  # past the line
    assert engine.should_compress_preflight(big)
    with pytest.raises(ValueError, match="extra_tokens"):
        engine.should_compress_preflight(small, extra_tokens=-1)
