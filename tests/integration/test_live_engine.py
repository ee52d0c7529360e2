"""The live engine on SQLite and PostgreSQL: gates, cooldowns, fallback, /compact, branches."""

from __future__ import annotations

import math

import pytest

from sessionstore import (
    AssistantMessage,
    BranchSummaryMessage,
    CompactionConfig,
    Message,
    SessionStore,
    SummarizingBlockCompaction,
    TurnRange,
    UserMessage,
    build_context,
)
from sessionstore._engine import ContextEngine, GatePolicy, StoreContextEngine
from sessionstore.errors import (
    SummarizerAuthError,
    SummarizerError,
    SummarizerTimeoutError,
    SummarizerUnavailableError,
)
from sessionstore.summarizers import Summary, SummaryRequest
from tests.factories import conversation

CONFIG = CompactionConfig(keep_first_turns=1, keep_recent_tokens=300, max_summary_tokens=300)
WINDOW = 100_000


class FakeClock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


class TextSummarizer:
    def __init__(self, text: str = "## Active Task\nKeep going.") -> None:
        self.text = text
        self.requests: list[SummaryRequest] = []

    async def summarize(self, request: SummaryRequest) -> Summary:
        self.requests.append(request)
        return Summary(text=self.text, model="fake", prompt_version="t1")


class FailingSummarizer:
    def __init__(self, error: Exception) -> None:
        self.error = error
        self.calls = 0

    async def summarize(self, request: SummaryRequest) -> Summary:
        self.calls += 1
        raise self.error


def unavailable() -> FailingSummarizer:
    return FailingSummarizer(SummarizerUnavailableError("connection refused", url="http://x"))


async def long_session(store: SessionStore, loops: int = 1, turns: int = 12) -> str:
    session = await store.create_session(app_name="app", user_id="u")
    for index in range(loops):
        if index:
            await store.start_loop(session.id)
        follow_up: list[Message] = [
            UserMessage(content="And add a test."),
            AssistantMessage(content="Done."),
        ]
        await store.append_messages(session.id, [*conversation(turns=turns), *follow_up])
    return session.id


def engine_for(
    store: SessionStore,
    session_id: str,
    summarizer: object | None = None,
    *,
    policy: GatePolicy | None = None,
    clock: FakeClock | None = None,
    window: int = WINDOW,
) -> StoreContextEngine:
    strategy = SummarizingBlockCompaction(summarizer or TextSummarizer())  # type: ignore[arg-type]
    return StoreContextEngine(
        store,
        session_id,
        context_length=window,
        config=CONFIG,
        strategy=strategy,
        policy=policy,
        clock=clock or FakeClock(),
    )


async def raw_messages(store: SessionStore, session_id: str) -> list[tuple[int, str]]:
    found = []
    for loop in await store.list_loops(session_id):
        found += [(m.id, m.content_hash) for m in await store.get_messages(session_id, loop.id)]
    return found


# ── the gate ───────────────────────────────────────────────────────────────────


async def test_the_engine_satisfies_the_contract(store: SessionStore) -> None:
    session_id = await long_session(store)
    assert isinstance(engine_for(store, session_id), ContextEngine)


async def test_gate_fires_at_window_budget_line_anchored_on_usage(store: SessionStore) -> None:
    engine = engine_for(store, await long_session(store))
    line = int((WINDOW - 2048) * 0.75)
    assert engine.threshold_tokens == line
    engine.update_from_response({"prompt_tokens": line - 1, "completion_tokens": 0})
    assert not engine.should_compress()
    engine.update_from_response({"prompt_tokens": line, "completion_tokens": 0})
    assert engine.should_compress()
    assert engine.get_status().anchored
    # An explicit figure wins over the tracked one.
    assert not engine.should_compress(prompt_tokens=10)


async def test_gate_follows_hermes_percent_floor_and_model_switch(store: SessionStore) -> None:
    session_id = await long_session(store)
    engine = engine_for(store, session_id, policy=GatePolicy(threshold_percent=0.5))
    assert engine.threshold_tokens == WINDOW // 2
    floored = engine_for(
        store, session_id, policy=GatePolicy(threshold_percent=0.5, min_context_tokens=64_000)
    )
    assert floored.threshold_tokens == 64_000
    assert not floored.should_compress(prompt_tokens=60_000)
    assert floored.should_compress(prompt_tokens=64_000)
    floored.update_model(32_000)  # a floor above the window is capped to the window
    assert floored.threshold_tokens == 32_000
    engine.update_from_response({"input_tokens": 30_000, "cache_read_input_tokens": 5_000})
    assert engine.get_status().tokens == 35_000
    engine.update_model(60_000)
    assert engine.should_compress()  # 35,000 of a 60,000 window is past 50%
    assert engine.get_status().tokens == 35_000


async def test_without_usage_the_gate_measures_the_built_context(store: SessionStore) -> None:
    session_id = await long_session(store, loops=2)
    engine = engine_for(store, session_id, window=8_000)
    await engine.on_session_start()
    context = await build_context(store, session_id, max_context_tokens=8_000, config=CONFIG)
    status = engine.get_status()
    assert status.tokens == context.loaded_tokens
    assert not status.anchored
    assert engine.should_compress() == (context.loaded_tokens >= engine.threshold_tokens)


# ── anti-thrashing ────────────────────────────────────────────────────────────


async def test_two_poor_compactions_stop_auto_until_a_forced_one(store: SessionStore) -> None:
    session = await store.create_session(app_name="app", user_id="u")
    await store.append_messages(session.id, [UserMessage(content="hi")])
    await store.append_messages(session.id, [AssistantMessage(content="hello")])
    engine = engine_for(store, session.id)
    engine.update_from_response({"prompt_tokens": 90_000})
    assert engine.should_compress()
    first = await engine.compress()
    assert first.status == "noop"
    engine.update_from_response({"prompt_tokens": 90_000})
    assert (await engine.compress()).status == "noop"
    engine.update_from_response({"prompt_tokens": 90_000})
    status = engine.get_status()
    assert status.thrashing
    assert status.ineffective_count == 2
    assert not engine.should_compress()
    skipped = await engine.compress()
    assert skipped.status == "skipped"
    assert skipped.reason is not None
    assert "saved under 10%" in skipped.reason
    await engine.compress(force=True)
    engine.update_from_response({"prompt_tokens": 90_000})
    assert not engine.get_status().thrashing
    assert engine.should_compress()


async def test_an_effective_compaction_does_not_count_as_thrashing(store: SessionStore) -> None:
    session_id = await long_session(store)
    engine = engine_for(store, session_id)
    outcome = await engine.compress()
    assert outcome.status == "compacted"
    assert outcome.saved >= 0.10
    assert engine.get_status().ineffective_count == 0


# ── failure cooldown ──────────────────────────────────────────────────────────


async def test_unreachable_summarizer_cools_down_600s(store: SessionStore) -> None:
    session_id = await long_session(store)
    clock = FakeClock()
    failing = unavailable()
    engine = engine_for(store, session_id, failing, clock=clock)
    engine.update_from_response({"prompt_tokens": 90_000})
    outcome = await engine.compress()
    assert outcome.status == "failed"
    assert outcome.failure_kind == "unavailable"
    assert engine.get_status().cooldown_remaining == 600
    assert not engine.should_compress()
    clock.now += 599
    assert (await engine.compress()).status == "skipped"
    assert failing.calls == 1  # no call during the cooldown
    clock.now += 1
    assert engine.should_compress()


async def test_timeouts_climb_the_ladder(store: SessionStore) -> None:
    session_id = await long_session(store)
    clock = FakeClock()
    engine = engine_for(
        store, session_id, FailingSummarizer(SummarizerTimeoutError("slow")), clock=clock
    )
    waits = []
    for _ in range(5):
        outcome = await engine.compress()
        assert outcome.failure_kind == "timeout"
        waits.append(engine.get_status().cooldown_remaining)
        clock.now += waits[-1]
    assert waits == [60, 120, 300, 600, 600]


async def test_refused_credentials_stop_until_forced(store: SessionStore) -> None:
    session_id = await long_session(store)
    clock = FakeClock()
    engine = engine_for(
        store, session_id, FailingSummarizer(SummarizerAuthError("401")), clock=clock
    )
    assert (await engine.compress()).failure_kind == "auth"
    clock.now += 100_000
    status = engine.get_status()
    assert status.stopped
    assert math.isinf(status.cooldown_remaining)
    assert status.to_dict()["cooldown_remaining"] is None
    assert (await engine.compress()).status == "skipped"
    engine.strategy = SummarizingBlockCompaction(TextSummarizer())  # the key was fixed
    forced = await engine.compress(force=True)
    assert forced.status == "compacted"
    assert not engine.get_status().stopped
    assert engine.get_status().cooldown_remaining == 0


async def test_a_forced_compaction_ignores_and_clears_the_cooldown(store: SessionStore) -> None:
    session_id = await long_session(store)
    engine = engine_for(store, session_id, unavailable())
    await engine.compress()
    assert engine.get_status().cooldown_remaining > 0
    engine.strategy = SummarizingBlockCompaction(TextSummarizer())
    assert (await engine.compress(force=True)).status == "compacted"
    assert engine.get_status().cooldown_remaining == 0


# ── abort or fallback: never drop history ──────────────────────────────────────


async def test_abort_keeps_everything_and_records_the_reason(store: SessionStore) -> None:
    session_id = await long_session(store)
    before = await raw_messages(store, session_id)
    engine = engine_for(store, session_id, unavailable())
    outcome = await engine.compress()
    assert outcome.status == "failed"
    assert outcome.error is not None
    assert outcome.error.startswith("SummarizerUnavailableError")
    assert outcome.block_ids == ()
    assert await raw_messages(store, session_id) == before
    loop = (await store.list_loops(session_id))[-1]
    assert await store.get_block(session_id, loop.id) is None
    ended = [e for e in await store.list_compaction_events(session_id) if e.event == "ended"]
    assert ended[-1].details["status"] == "failed"
    assert "SummarizerUnavailableError" in str(ended[-1].details["error"])
    assert engine.get_status().last_error == outcome.error


async def test_raise_policy_raises_and_writes_nothing(store: SessionStore) -> None:
    session_id = await long_session(store)
    engine = engine_for(store, session_id, unavailable(), policy=GatePolicy(on_failure="raise"))
    with pytest.raises(SummarizerUnavailableError):
        await engine.compress()
    loop = (await store.list_loops(session_id))[-1]
    assert await store.get_block(session_id, loop.id) is None


async def test_extractive_fallback_compacts_and_says_so(store: SessionStore) -> None:
    session_id = await long_session(store)
    before = await raw_messages(store, session_id)
    engine = engine_for(
        store, session_id, unavailable(), policy=GatePolicy(on_failure="extractive")
    )
    outcome = await engine.compress()
    assert outcome.status == "compacted"
    assert outcome.fallback == "extractive"
    assert outcome.block_ids
    assert await raw_messages(store, session_id) == before
    ended = [e for e in await store.list_compaction_events(session_id) if e.event == "ended"]
    assert [e.details["status"] for e in ended] == ["failed", "ok"]
    engine_details = ended[-1].details["engine"]
    assert isinstance(engine_details, dict)
    assert engine_details["fallback"] == "extractive"
    assert "SummarizerUnavailableError" in str(engine_details["fallback_reason"])
    status = engine.get_status()
    assert status.fallback_count == 1
    assert status.compression_count == 1
    assert status.cooldown_remaining == 600  # the configured summarizer still cools down


async def test_an_empty_digest_is_a_failure_not_an_empty_summary(store: SessionStore) -> None:
    session_id = await long_session(store)
    engine = engine_for(store, session_id, TextSummarizer(text="  "))
    outcome = await engine.compress()
    assert outcome.status == "failed"
    assert outcome.failure_kind == "response"


# ── forced /compact ─────────────────────────────────────────────────────────────


async def test_forced_compaction_keeps_only_the_last_user_turn(store: SessionStore) -> None:
    session = await store.create_session(app_name="app", user_id="u")
    last = UserMessage(content="Now rename the module to auth_jwt.")
    await store.append_messages(
        session.id, [*conversation(turns=3), last, AssistantMessage(content="On it.")]
    )
    summarizer = TextSummarizer()
    engine = engine_for(store, session.id, summarizer)
    assert not await engine.has_content_to_compress()  # all of it fits the protected tail
    assert await engine.has_content_to_compress(force=True)
    outcome = await engine.compress(force=True, focus_topic="auth\x00\x1b[31m module")
    assert outcome.status == "compacted"
    assert summarizer.requests[0].focus_topic == "auth [31m module"
    stored = await store.get_messages(session.id)
    cut = next(m for m in stored if m.message == last)
    block = await store.get_block(session.id, stored[0].loop_id)
    assert block is not None
    assert block.keep_first is None
    assert block.keep_compacted is not None
    assert block.keep_compacted.range == TurnRange(start_turn=0, end_turn=cut.turn_index - 1)
    assert block.keep_recent is not None
    assert block.keep_recent.range.start_turn == cut.turn_index
    context = await build_context(store, session.id, max_context_tokens=WINDOW)
    assert last in context.messages
    assert not await engine.has_content_to_compress(force=True)


# ── branch digests ─────────────────────────────────────────────────────────────


async def test_branch_digest_is_appended_to_the_new_branch(store: SessionStore) -> None:
    session = await store.create_session(app_name="app", user_id="u")
    await store.append_messages(session.id, conversation(turns=2))
    root = (await store.list_loops(session.id))[0]
    abandoned = await store.start_loop(session.id)
    await store.append_messages(
        session.id, [UserMessage(content="try approach A"), *conversation(2)]
    )
    taken = await store.start_loop(session.id, parent_loop_id=root.id)
    summarizer = TextSummarizer(text="Approach A failed: import cycle.")
    engine = engine_for(store, session.id, summarizer)
    stored = await engine.summarize_branch(abandoned.id)
    assert stored.loop_id == taken.id
    assert isinstance(stored.message, BranchSummaryMessage)
    assert stored.message.from_loop_id == abandoned.id
    assert stored.message.summary == "Approach A failed: import cycle."
    (request,) = summarizer.requests
    assert request.scope == "branch"
    abandoned_count = (await store.get_loop(session.id, abandoned.id)).message_count
    assert len(request.messages) == abandoned_count  # the branch only, not the shared root
    assert (await store.get_messages(session.id, taken.id))[-1].id == stored.id
    with pytest.raises(ValueError, match="no abandoned branch"):
        await engine.summarize_branch(root.id)


async def test_branch_digest_falls_back_or_raises(store: SessionStore) -> None:
    session = await store.create_session(app_name="app", user_id="u")
    await store.append_messages(session.id, conversation(turns=2))
    root = (await store.list_loops(session.id))[0]
    abandoned = await store.start_loop(session.id)
    await store.append_messages(session.id, conversation(turns=2))
    taken = await store.start_loop(session.id, parent_loop_id=root.id)
    failing = unavailable()
    aborting = engine_for(store, session.id, failing)
    with pytest.raises(SummarizerUnavailableError):
        await aborting.summarize_branch(abandoned.id)
    assert await store.get_messages(session.id, taken.id) == []
    # The cooldown it started holds for the compactions after it (no compaction event
    # records it, so the gates read back from the events must not open it).
    await store.append_messages(session.id, conversation(turns=12))
    skipped = await aborting.compress()
    assert skipped.status == "skipped"
    assert skipped.reason is not None
    assert "cooldown" in skipped.reason
    assert failing.calls == 1
    falling = engine_for(
        store, session.id, unavailable(), policy=GatePolicy(on_failure="extractive")
    )
    stored = await falling.summarize_branch(abandoned.id)
    assert isinstance(stored.message, BranchSummaryMessage)
    marker = stored.message.extra["sessionstore"]
    assert isinstance(marker, dict)
    assert marker["branch_digest"]["fallback"] == "extractive"  # type: ignore[index,call-overload]


# ── status ─────────────────────────────────────────────────────────────────────


async def test_status_counts_compactions_savings_and_reset(store: SessionStore) -> None:
    session_id = await long_session(store, loops=2)
    engine = engine_for(store, session_id)
    await engine.on_session_start()
    before = engine.get_status()
    assert before.compression_count == 0
    assert before.last_savings is None
    assert before.threshold_tokens == engine.threshold_tokens
    outcome = await engine.compress(force=True)
    after = engine.get_status()
    assert after.compression_count == 1
    assert after.last_savings == pytest.approx(outcome.saved)
    assert after.tokens == outcome.tokens_after < before.tokens
    assert 0 < after.usage_percent < 100
    assert outcome.feedback
    engine.on_session_reset()
    reset = engine.get_status()
    assert (reset.compression_count, reset.tokens, reset.last_savings) == (0, 0, None)
    await engine.on_session_end()


# ── a custom summarizer's own errors (PEERS: hermes-agent #29559, claude-code #24315) ──


class APIConnectionError(Exception):
    """What a custom summarizer's client raises (openai's, httpx's): no library base class."""


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (APIConnectionError("Connection error."), "response"),
        (ConnectionRefusedError("refused"), "unavailable"),
        (TimeoutError(), "timeout"),
        (KeyError("choices"), "response"),
    ],
)
async def test_any_error_of_a_custom_summarizer_cools_down_and_keeps_everything(
    store: SessionStore, error: Exception, kind: str
) -> None:
    session_id = await long_session(store)
    before = await raw_messages(store, session_id)
    clock = FakeClock()
    failing = FailingSummarizer(error)
    engine = engine_for(store, session_id, failing, clock=clock)
    engine.update_from_response({"prompt_tokens": 90_000})
    outcome = await engine.compress()
    assert outcome.status == "failed"
    assert outcome.failure_kind == kind
    assert outcome.error is not None
    assert type(error).__name__ in outcome.error
    assert engine.get_status().cooldown_remaining > 0
    # The next turns do not call it again, and nothing was written or lost.
    assert (await engine.compress()).status == "skipped"
    assert failing.calls == 1
    assert await raw_messages(store, session_id) == before
    loop = (await store.list_loops(session_id))[-1]
    assert await store.get_block(session_id, loop.id) is None


async def test_a_custom_summarizers_error_falls_back_to_the_extractive_digest(
    store: SessionStore,
) -> None:
    session_id = await long_session(store)
    failing = FailingSummarizer(APIConnectionError("Connection error."))
    engine = engine_for(store, session_id, failing, policy=GatePolicy(on_failure="extractive"))
    outcome = await engine.compress()
    assert outcome.status == "compacted"
    assert outcome.fallback == "extractive"
    assert outcome.block_ids


async def test_the_raise_policy_raises_a_summarizer_error_chained_to_the_cause(
    store: SessionStore,
) -> None:
    session_id = await long_session(store)
    cause = APIConnectionError("Connection error.")
    engine = engine_for(
        store, session_id, FailingSummarizer(cause), policy=GatePolicy(on_failure="raise")
    )
    with pytest.raises(SummarizerError) as raised:
        await engine.compress()
    assert raised.value.__cause__ is cause


@pytest.mark.parametrize("answer", ["", "  \n ", None])
async def test_an_empty_answer_is_a_failure_not_an_empty_digest(
    store: SessionStore, answer: str | None
) -> None:
    session_id = await long_session(store)

    class Blank:
        async def summarize(self, request: SummaryRequest) -> object:
            return answer if answer is None else Summary(text=answer, model="m", prompt_version="1")

    engine = engine_for(store, session_id, Blank())
    outcome = await engine.compress()
    assert outcome.status == "failed"
    assert outcome.failure_kind == "response"
    loop = (await store.list_loops(session_id))[-1]
    assert await store.get_block(session_id, loop.id) is None


async def test_automatic_compactions_are_capped_per_hour(store: SessionStore) -> None:
    """claude-code #94580 (89 compactions in one session), openclaw #78367: a frequency cap."""
    session_id = await long_session(store, loops=1, turns=12)
    clock = FakeClock()
    summarizer = TextSummarizer()
    engine = engine_for(
        store, session_id, summarizer, clock=clock, policy=GatePolicy(max_auto_per_hour=2)
    )
    for round_ in range(2):
        await store.append_messages(session_id, conversation(turns=12))
        engine.update_from_response({"prompt_tokens": 90_000})
        assert (await engine.compress()).status == "compacted", round_
        clock.now += 60
    await store.append_messages(session_id, conversation(turns=12))
    engine.update_from_response({"prompt_tokens": 90_000})
    assert not engine.should_compress()
    skipped = await engine.compress()
    assert skipped.status == "skipped"
    assert skipped.reason is not None
    assert "max_auto_per_hour" in skipped.reason
    assert len(summarizer.requests) == 2
    # The build still fits the window (trimmed), and a forced compaction is never capped.
    assert (await engine.compress(force=True)).status == "compacted"
    clock.now += 3_600
    engine.update_from_response({"prompt_tokens": 90_000})
    assert engine.should_compress()


# ── the gates across engines (GatePolicy.durable) ───────────────────────────────


async def test_a_new_engine_keeps_the_cooldown_a_failed_compaction_started(
    store: SessionStore,
) -> None:
    """A session object made per request (a web server's) must not call a failing
    summarizer on every turn: the gates start from the session's compaction events."""
    session_id = await long_session(store)
    failing = unavailable()
    first = engine_for(store, session_id, failing)
    assert (await first.compress()).status == "failed"
    working = TextSummarizer()
    second = engine_for(store, session_id, working)
    skipped = await second.compress()
    assert skipped.status == "skipped"
    assert skipped.reason is not None
    assert "cooldown" in skipped.reason
    assert 590 < second.get_status().cooldown_remaining <= 600
    assert second.get_status().last_error is not None
    assert not working.requests
    # Without durable gates a new engine starts open; a forced compaction clears them.
    fresh = engine_for(store, session_id, working, policy=GatePolicy(durable=False))
    assert (await fresh.compress()).status == "compacted"
    await store.append_messages(session_id, conversation(turns=12))
    assert (await engine_for(store, session_id, working).compress(force=True)).status == (
        "compacted"
    )
    await store.append_messages(session_id, conversation(turns=12))
    assert (await engine_for(store, session_id, working).compress()).status == "compacted"


async def test_a_new_engine_keeps_the_hourly_cap(store: SessionStore) -> None:
    session_id = await long_session(store)
    policy = GatePolicy(max_auto_per_hour=2)
    for _ in range(2):
        await store.append_messages(session_id, conversation(turns=12))
        engine = engine_for(store, session_id, policy=policy)
        assert (await engine.compress()).status == "compacted"
    await store.append_messages(session_id, conversation(turns=12))
    skipped = await engine_for(store, session_id, policy=policy).compress()
    assert skipped.status == "skipped"
    assert skipped.reason is not None
    assert "max_auto_per_hour" in skipped.reason
    # Another overlay's compactions are its own.
    other = StoreContextEngine(
        store,
        session_id,
        context_length=WINDOW,
        config=CONFIG,
        strategy=SummarizingBlockCompaction(TextSummarizer()),
        overlay="other",
        policy=policy,
    )
    assert (await other.compress()).status == "compacted"


class Scripted:
    """A summarizer that answers, or raises, as each call's entry of its script says."""

    def __init__(self, script: list[Exception | None]) -> None:
        self.script = script

    async def summarize(self, request: SummaryRequest) -> Summary:
        outcome = self.script.pop(0)
        if outcome is not None:
            raise outcome
        return Summary(text="## Active Task\nKeep going.", model="fake", prompt_version="t1")


def gate_state(engine: StoreContextEngine, now: float) -> tuple[object, ...]:
    """The gates' state; the cooldown left to 10 s (replayed times carry the wall time the
    replay itself took, which a loaded machine makes longer than a second)."""
    failures = engine._gates.failures
    remaining = failures.remaining(now)
    return (
        -(-remaining // 10) if math.isfinite(remaining) else remaining,
        failures.stopped,
        failures.timeouts,
        failures.kind,
        engine._gates.rate.wait(now, engine.policy) > 0,
        len(engine._gates.rate.times),
    )


async def test_a_restored_engine_has_the_gates_the_live_one_has(store: SessionStore) -> None:
    """Step by step, an engine made anew (its gates replayed from the session's events) is
    in the state of the engine that lived through the steps: cooldowns and their ladder, a
    stop, a forced compaction's clearing, the hourly count."""
    session_id = await long_session(store)
    clock = FakeClock()
    policy = GatePolicy(max_auto_per_hour=3)
    steps: list[tuple[Exception | None, bool, float]] = [  # (answer, forced, then wait)
        (SummarizerTimeoutError("slow"), False, 60),
        (SummarizerTimeoutError("slow"), False, 120),
        (None, False, 10),
        (SummarizerUnavailableError("down"), False, 600),
        (None, False, 10),
        (SummarizerAuthError("401"), False, 10),
        (None, True, 10),
        (None, False, 10),
        (None, False, 10),
        (None, False, 10),
    ]
    live = engine_for(
        store, session_id, Scripted([answer for answer, _, _ in steps]), policy=policy, clock=clock
    )
    for index, (_, forced, wait) in enumerate(steps):
        await store.append_messages(session_id, conversation(turns=12))
        outcome = await live.compress(force=forced)
        assert outcome.status in ("compacted", "failed"), (index, outcome)
        restored = engine_for(store, session_id, TextSummarizer(), policy=policy, clock=clock)
        await restored._restore_gates()
        assert gate_state(restored, clock.now) == gate_state(live, clock.now), index
        clock.now += wait
    assert gate_state(live, clock.now)[4]  # three automatic compactions since the forced one
