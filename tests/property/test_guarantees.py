"""The built context's guarantees, on random sessions, configs and budgets, on every backend.

Hypothesis drives these async tests through pytest-asyncio, which runs each example on
the test's event loop, where the `store` fixture's engine lives. The fixture is shared
by the examples of one test (hence the suppressed `function_scoped_fixture` health
check): every example writes a session of its own, with a fresh random id, so examples
never see each other's data. Examples are derandomized, so CI runs the same ones every
time, and a failing one is reported as drawn, without shrinking: shrinking costs
minutes of database round trips. `test_overlay_pure.py` runs and shrinks many more
examples of the loader alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, assume, example, given, settings
from hypothesis import strategies as st

from sessionstore import (
    AssistantMessage,
    BlockCompactionStrategy,
    BuiltContext,
    CompactionConfig,
    DefaultBlockCompaction,
    Message,
    SessionStore,
    StoredMessage,
    TokenBudget,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    build_context,
    compact_session_loops,
)
from sessionstore.errors import ContextOverflowError
from tests.integration._helpers import late_orphans
from tests.property import (
    History,
    block_strategies,
    check_guarantees,
    configs,
    describe,
    loop_batches,
    max_context_tokens,
    system_prompt_tokens,
    texts,
    whole_block_strategies,
)

DB_SETTINGS = settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    database=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


class LoopPlan:
    """A loop to write: where it starts, and its messages in the batches they are appended in."""

    def __init__(self, parent: int | None, batches: list[list[Message]]) -> None:
        self.parent = parent
        """The index of an earlier loop to branch from, or None to continue the active loop."""
        self.batches = batches

    def __repr__(self) -> str:
        batches = " | ".join(" ".join(map(describe, batch)) for batch in self.batches)
        return f"LoopPlan(parent={self.parent}: {batches})"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(repr(self))


class SessionPlan:
    """A session to write: its loops in order of creation, and the loop active at the end."""

    def __init__(self, loops: list[LoopPlan], switch_to: int | None) -> None:
        self.loops = loops
        self.switch_to = switch_to
        """The loop to switch to at the end (None: the last one started stays active)."""

    def __repr__(self) -> str:
        loops = "".join(f"\n  {index}: {loop!r}" for index, loop in enumerate(self.loops))
        return f"SessionPlan(switch_to={self.switch_to}{loops})"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(repr(self))


@st.composite
def session_plans(draw: st.DrawFn) -> SessionPlan:
    """One to six loops; sometimes a branch from an earlier loop, and a switch at the end."""
    count = draw(st.integers(1, 6))
    loops = []
    for index in range(count):
        parent = None
        if index >= 2 and draw(st.integers(0, 3)) == 0:
            parent = draw(st.integers(0, index - 2))
        loops.append(LoopPlan(parent, draw(loop_batches())))
    switch_to = draw(st.none() | st.integers(0, count - 1)) if count > 1 else None
    return SessionPlan(loops, switch_to)


windows = st.one_of(
    max_context_tokens,
    st.integers(10, 90).map(lambda tokens: -tokens),
)
"""A `max_context_tokens`, or (negative) a window this many tokens above the latest
request's own size plus the system prompt: where trimming has the least room."""


@dataclass
class Written:
    """A session as written, and what the test knows of it without reading it back."""

    session_id: str
    loop_ids: list[int]
    parent_of: dict[int, int | None]
    head: int
    raw: dict[int, list[StoredMessage]] = field(default_factory=dict)

    def history(self) -> History:
        chain = []
        loop_id: int | None = self.head
        while loop_id is not None:
            chain.append(loop_id)
            loop_id = self.parent_of[loop_id]
        return History(chain=chain[::-1], raw=self.raw)

    def window(self, drawn: int, system: int) -> int:
        """Resolve a drawn window (see `windows`)."""
        if drawn > 0:
            return drawn
        latest = self.history().latest_user
        return (latest.token_count if latest else 0) + system - drawn


async def _write(store: SessionStore, plan: SessionPlan) -> Written:
    session = await store.create_session(app_name="property", user_id="u")
    loop_ids: list[int] = []
    parent_of: dict[int, int | None] = {}
    raw: dict[int, list[StoredMessage]] = {}
    for loop_plan in plan.loops:
        parent = None if loop_plan.parent is None else loop_ids[loop_plan.parent]
        loop = await store.start_loop(session.id, parent_loop_id=parent)
        # Without a parent, a loop continues the active loop: the last one started.
        parent_of[loop.id] = parent if parent is not None else (loop_ids[-1] if loop_ids else None)
        loop_ids.append(loop.id)
        raw[loop.id] = []
        for batch in loop_plan.batches:
            raw[loop.id] += await store.append_messages(session.id, batch)
    head = loop_ids[-1]
    if plan.switch_to is not None:
        head = loop_ids[plan.switch_to]
        await store.switch_loop(session.id, head)
    return Written(session.id, loop_ids, parent_of, head, raw)


async def _raw_snapshot(store: SessionStore, written: Written) -> dict[int, list[StoredMessage]]:
    """Every raw message of the session as the store reads it now, by loop."""
    loops = await store.list_loops(written.session_id)
    assert [loop.id for loop in loops] == written.loop_ids
    return {loop.id: await store.get_messages(written.session_id, loop.id) for loop in loops}


async def _build(
    store: SessionStore, session_id: str, window: int, system: int, **options: Any
) -> BuiltContext | ContextOverflowError:
    """Build the context, or return the `ContextOverflowError` it raised (checked)."""
    outcome: BuiltContext | ContextOverflowError
    try:
        outcome = await build_context(
            store, session_id, max_context_tokens=window, system_prompt_tokens=system, **options
        )
    except ContextOverflowError as error:
        outcome = error
    if isinstance(outcome, ContextOverflowError):
        assert outcome.available == window - system
        assert outcome.needed > outcome.available
    return outcome


@DB_SETTINGS
@given(
    plan=session_plans(),
    config=configs,
    strategy=block_strategies,
    drawn_window=windows,
    system=system_prompt_tokens,
)
async def test_every_built_context_keeps_the_guarantees(
    store: SessionStore,
    plan: SessionPlan,
    config: CompactionConfig,
    strategy: BlockCompactionStrategy,
    drawn_window: int,
    system: int,
) -> None:
    """Raw or compacted, a built context fits, pairs calls, holds the latest request.

    Its provenance names raw messages of the right loops, each at most once. A system
    prompt that fills the window is refused. Compacting and building never touch a
    raw message.
    """
    written = await _write(store, plan)
    session_id = written.session_id
    window = written.window(drawn_window, system)
    before = await _raw_snapshot(store, written)
    assert before == written.raw
    if system >= window:
        with pytest.raises(ValueError, match="leaves no room"):
            await build_context(
                store, session_id, max_context_tokens=window, system_prompt_tokens=system
            )
        window += system  # and go on with a window that leaves room
    for compact in (False, True):
        if compact:
            await compact_session_loops(
                store, session_id, strategy=strategy, config=config, max_context_tokens=window
            )
        outcome = await _build(store, session_id, window, system, config=config)
        if isinstance(outcome, BuiltContext):
            check_guarantees(outcome, written.history(), budget=window - system)
    assert await _raw_snapshot(store, written) == before


def _assert_same(past: BuiltContext | Exception, then: BuiltContext | Exception) -> None:
    if isinstance(then, ContextOverflowError):
        assert isinstance(past, ContextOverflowError), "time travel built what overflowed then"
        assert (past.needed, past.available) == (then.needed, then.available)
        return
    assert isinstance(past, BuiltContext), f"time travel failed: {past!r}"
    assert isinstance(then, BuiltContext)
    assert past.loop_ids == then.loop_ids
    assert past.messages == then.messages
    assert past.tokens == then.tokens


@DB_SETTINGS
@given(
    plan=session_plans(),
    config=configs,
    strategy=block_strategies,
    window=max_context_tokens,
    system=system_prompt_tokens,
    later=loop_batches().map(lambda batches: LoopPlan(None, batches)),
    follow_up=texts(max_words=20),
)
async def test_time_travel_rebuilds_the_context_of_the_first_compaction(
    store: SessionStore,
    plan: SessionPlan,
    config: CompactionConfig,
    strategy: BlockCompactionStrategy,
    window: int,
    system: int,
    later: LoopPlan,
    follow_up: str,
) -> None:
    """Compact, append, compact again: `as_of=1` still rebuilds what the first one gave.

    Raw messages written before stay as they were, and the new ones follow them.
    """
    system = min(system, window // 2)
    written = await _write(store, plan)
    session_id = written.session_id
    head = await store.get_loop(session_id, written.head)
    if not written.raw[written.head]:  # the head loop needs a block of generation 1
        assume(head.closed_at is None)
        written.raw[written.head] += await store.append_messages(
            session_id, [UserMessage(content=follow_up)], loop_id=written.head
        )
    first = await compact_session_loops(
        store, session_id, strategy=strategy, config=config, max_context_tokens=window
    )
    # A block no smaller than its loop is not written; then there is no generation 1.
    assume(any(block.loop_id == written.head for block in first.blocks))
    then = await _build(store, session_id, window, system, config=config)
    snapshot = await _raw_snapshot(store, written)
    if head.closed_at is None:
        for batch in later.batches:
            written.raw[written.head] += await store.append_messages(session_id, batch)
    await compact_session_loops(
        store, session_id, strategy=strategy, config=config, max_context_tokens=window
    )
    past = await _build(store, session_id, window, system, config=config, as_of=1)
    _assert_same(past, then)
    now = await _raw_snapshot(store, written)
    assert now == written.raw
    assert {loop_id: now[loop_id][: len(raw)] for loop_id, raw in snapshot.items()} == snapshot


async def test_time_travel_with_a_token_budget_scope_sees_the_loops_as_they_were(
    store: SessionStore,
) -> None:
    """`as_of` must size the loops as they were then, not with what was appended since.

    With a `TokenBudget` scope the first build takes both loops. After a long message
    is appended to the current loop, `as_of=1` leaves it out (the block is generation
    1, but the loop's `token_total` is today's), so the earlier loop no longer fits the
    scope and the past context loses it.
    """
    session = await store.create_session(app_name="property", user_id="u")
    await store.start_loop(session.id)
    await store.append_messages(
        session.id,
        [UserMessage(content="first request " * 20), AssistantMessage(content="done " * 20)],
    )
    await store.start_loop(session.id)
    await store.append_messages(
        session.id, [UserMessage(content="second request"), AssistantMessage(content="ok")]
    )
    config = CompactionConfig(compaction_scope=TokenBudget())
    await compact_session_loops(store, session.id, config=config, max_context_tokens=200)
    then = await build_context(store, session.id, max_context_tokens=200, config=config)
    assert len(then.loop_ids) == 2
    moment = datetime.now(UTC)
    await store.append_messages(session.id, [UserMessage(content="more " * 200)])
    await compact_session_loops(store, session.id, config=config, max_context_tokens=200)
    past = await build_context(
        store, session.id, max_context_tokens=200, config=config, as_of=moment
    )
    assert past.loop_ids == then.loop_ids
    assert past.messages == then.messages


async def test_a_tool_output_with_a_nul_character_is_stored_on_every_backend(
    store: SessionStore,
) -> None:
    """Raw is sacred on every backend: a NUL in a tool's output must round-trip.

    Shell and file tools do print NUL bytes. SQLite stores them; PostgreSQL's JSONB
    cannot, so the store encodes them there (issue 10, defect 3; was a strict xfail).
    """
    session = await store.create_session(app_name="property", user_id="u")
    call = ToolCall(id="call_0", name="bash")
    messages: list[Message] = [
        UserMessage(content="show me the file"),
        AssistantMessage(content=[call]),
        ToolResultMessage(tool_call_id="call_0", tool_name="bash", content="PK\x03\x04\x00\x00"),
    ]
    stored = await store.append_messages(session.id, messages)
    assert [m.message for m in await store.get_messages(session.id)] == messages
    assert [m.message for m in stored] == messages


late_kinds = st.lists(st.sampled_from(["result", "result", "orphan", "user"]), max_size=4)
"""What arrives after a compaction: results of the last calls, an orphan, a new request."""


def _late(kind: str, pending: list[str], n: int) -> Message:
    if kind == "result" and pending:
        return ToolResultMessage(tool_call_id=pending.pop(0), content=f"late output {n} " * 30)
    if kind == "user":
        return UserMessage(content=f"and then {n}")
    return ToolResultMessage(tool_call_id=f"ghost{n}", content="late")


_WAITING = LoopPlan(
    None,
    [
        [
            UserMessage(content="fix the failing test " * 20),
            AssistantMessage(
                content=[ToolCall(id="call_0", name="bash"), ToolCall(id="call_1", name="read")]
            ),
            ToolResultMessage(tool_call_id="call_0", content="FAILED test_parse " * 40),
        ]
    ],
)
"""A turn waiting for `call_1`'s result when the compaction runs (drawn rarely)."""


@DB_SETTINGS
@example(
    plan=_WAITING,
    late=["result"],
    config=CompactionConfig(keep_first_turns=0, keep_recent_turns=0),
    strategy=DefaultBlockCompaction(),
)
@given(
    plan=loop_batches().map(lambda batches: LoopPlan(None, batches)),
    late=late_kinds,
    config=configs,
    strategy=whole_block_strategies,
)
async def test_nothing_appended_after_a_compaction_is_hidden(
    store: SessionStore,
    plan: LoopPlan,
    late: list[str],
    config: CompactionConfig,
    strategy: BlockCompactionStrategy,
) -> None:
    """A result a block's turn was waiting for, appended after it, is never hidden.

    A tool result joins the loop's latest turn when an assistant message with tool calls
    began it: a block that covered that turn while a call was unanswered would stand for
    it without the result, and the context would never show the result. So a result
    appended after a compaction joins a raw turn when its call was waiting, and the
    context shows or lists every raw message but those of sections that dropped their
    turns, and late orphans that joined a covered turn (left out raw or not).
    """
    session = await store.create_session(app_name="property", user_id="u")
    written: list[StoredMessage] = []
    for batch in plan.batches:
        written += await store.append_messages(session.id, batch)
    assume(written)
    await compact_session_loops(
        store, session.id, strategy=strategy, config=config, max_context_tokens=100_000
    )
    calls = [i for i, m in enumerate(written) if isinstance(m.message, AssistantMessage)]
    pending: list[str] = []
    if calls:
        opener = written[calls[-1]].message
        assert isinstance(opener, AssistantMessage)
        after = {
            m.message.tool_call_id
            for m in written[calls[-1] :]
            if isinstance(m.message, ToolResultMessage)
        }
        pending = [call.id for call in opener.tool_calls if call.id not in after]
    awaited = set(pending)
    appended = [
        stored
        for n, kind in enumerate(late)
        for stored in await store.append_messages(session.id, [_late(kind, pending, n)])
    ]
    messages = await store.get_messages(session.id)
    blocks = await store.block_history(session.id, written[0].loop_id)
    for block in blocks:
        ranges = [section.range for _, section in block.sections()]
        ranges += [] if block.keep_first is None else [block.keep_first]
        for stored in appended:
            result = stored.message
            if isinstance(result, ToolResultMessage) and result.tool_call_id in awaited:
                assert all(stored.turn_index > r.end_turn for r in ranges)
    hidden: set[int] = set()
    if blocks:
        current = max(blocks, key=lambda block: block.generation or 0)
        hidden = late_orphans(current, messages)
        for _, section in current.sections():
            if not section.messages:
                hidden |= {m.id for m in messages if m.turn_index in section.range}
    context = await build_context(store, session.id, max_context_tokens=10_000_000)
    shown = {i.message_id for i in context.items if i.source == "raw"}
    shown |= {c for i in context.items if i.source != "raw" for c in i.covers}
    assert shown | set(context.orphan_results) | hidden >= {m.id for m in messages}
