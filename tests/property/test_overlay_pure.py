"""The loader's guarantees without a database: `overlay.build` on hand-built loop sources.

The sources are what the store would read: each loop of the chain with its raw
messages (turns assigned by `TurnAssigner`, tokens counted once), a block some strategy
built when the loop was shorter (so later turns show raw after it), and the raw
messages of the turns the block does not replace. Being pure, this test runs many
more examples than the database ones, and shrinks a failure to a small history.
"""

from __future__ import annotations

import itertools
import math
from datetime import UTC, datetime
from typing import Any

from hypothesis import Phase, given, settings
from hypothesis import strategies as st

from sessionstore import (
    AssistantMessage,
    BuiltContext,
    CompactionConfig,
    CompactionSummaryMessage,
    CustomMessage,
    LoopRecord,
    LoopView,
    Message,
    SectionedBlockStrategy,
    SessionDigest,
    StoredMessage,
    SystemMessage,
    ToolResultMessage,
    UserMessage,
    _trim,
)
from sessionstore._fit_units import request_parts, shorten_request
from sessionstore._framing import DIGEST_HEADER, framed
from sessionstore._items import ContextItem, LoopSource
from sessionstore._overlay import build, segments
from sessionstore._tokens import message_tokens
from sessionstore._turns import TurnAssigner
from sessionstore.errors import ContextOverflowError
from tests.property import (
    History,
    block_strategies,
    check_guarantees,
    configs,
    describe,
    loop_batches,
    trim_notes,
)

# No explain phase: it reruns a shrunk failure hundreds of times, which takes a minute.
PURE_SETTINGS = settings(
    max_examples=300,
    deadline=None,
    derandomize=True,
    database=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink],
)

_EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


def _loop(loop_id: int, messages: list[StoredMessage], turn_count: int) -> LoopRecord:
    return LoopRecord(
        id=loop_id,
        session_id="s",
        parent_loop_id=loop_id - 1 or None,
        sequence=loop_id - 1,
        depth=loop_id - 1,
        created_at=_EPOCH,
        closed_at=None,
        message_count=len(messages),
        token_total=sum(m.token_count for m in messages),
        turn_count=turn_count,
    )


def _stored(
    loop_id: int, messages: list[Message], ids: itertools.count[int]
) -> tuple[LoopRecord, list[StoredMessage]]:
    assigner = TurnAssigner()
    stored = [
        StoredMessage(
            id=next(ids),
            session_id="s",
            loop_id=loop_id,
            position=position,
            turn_index=assigner.assign(message),
            token_count=message_tokens(message),
            content_hash="",
            created_at=_EPOCH,
            message=message,
        )
        for position, message in enumerate(messages)
    ]
    return _loop(loop_id, stored, assigner.next_turn), stored


class Chain:
    """A chain of loops as the loader gets it, with a short repr for failing examples."""

    def __init__(self, history: History, sources: list[LoopSource]) -> None:
        self.history = history
        self.sources = sources
        """The loops in scope, oldest first."""

    def __repr__(self) -> str:
        lines = []
        for loop_id in self.history.chain:
            raw = " ".join(
                f"{m.turn_index}:{describe(m.message)}" for m in self.history.raw[loop_id]
            )
            lines.append(f"loop {loop_id}: {raw}")
        for source in self.sources:
            block = source.block
            if block is not None:
                sections = [(kind, s.range, len(s.messages)) for kind, s in block.sections()]
                lines.append(f"block of {source.loop.id}: first={block.keep_first} {sections}")
        return "Chain(\n  " + "\n  ".join(lines) + ")"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(repr(self))


@st.composite
def chains(draw: st.DrawFn) -> Chain:
    """A chain of one to six loops, the newest in scope, some with blocks."""
    ids = itertools.count(1)
    loops = [
        _stored(loop_id, [m for batch in draw(loop_batches()) for m in batch], ids)
        for loop_id in range(1, draw(st.integers(1, 6)) + 1)
    ]
    history = History(
        chain=[loop.id for loop, _ in loops], raw={loop.id: stored for loop, stored in loops}
    )
    in_scope = loops[len(loops) - 1 - draw(st.integers(0, len(loops) - 1)) :]
    sources = []
    for loop, stored in in_scope:
        block = None
        if loop.turn_count and draw(st.booleans()):
            # Sectioned strategies are pure: `compact` returns the block, never an awaitable.
            strategy: SectionedBlockStrategy = draw(block_strategies)
            config: CompactionConfig = draw(configs)
            # The block was written when the loop had `upto` turns; later ones show raw.
            upto = draw(st.integers(1, loop.turn_count))
            prefix = [m for m in stored if m.turn_index < upto]
            view = LoopView.of(_loop(loop.id, prefix, upto), prefix)
            block = strategy.compact(view, config, loop is loops[-1][0])
        raw_turns = {
            turn
            for turns, kind in segments(loop.turn_count, block)
            if kind == "raw"
            for turn in range(turns.start_turn, turns.end_turn + 1)
        }
        sources.append(LoopSource(loop, block, [m for m in stored if m.turn_index in raw_turns]))
    return Chain(history, sources)


budgets = st.one_of(st.integers(1, 2_000), st.integers(1, 50_000))
token_scales = st.sampled_from([1.0, 1.0, 0.5, 1.37, 3.0])


def _built(
    sources: list[LoopSource],
    budget: int,
    latest_user: StoredMessage | None,
    token_scale: float = 1.0,
) -> BuiltContext | None:
    """Build; or check that the overflow says what it needed, and return None."""
    overflow: ContextOverflowError
    try:
        return build(sources, budget=budget, latest_user=latest_user, token_scale=token_scale)
    except ContextOverflowError as error:
        overflow = error
    assert overflow.available == budget
    assert overflow.needed > overflow.available
    return None


@PURE_SETTINGS
@given(
    chain=chains(),
    budget=budgets,
    above_request=st.none() | st.integers(10, 90),
    token_scale=token_scales,
)
def test_build_keeps_the_guarantees_whatever_the_sources(
    chain: Chain, budget: int, above_request: int | None, token_scale: float
) -> None:
    """Fits, pairs, holds the latest request, names each raw message once; or overflows.

    And drops nothing silently: each raw message the sources show is in the context or
    reported as an orphan result, unless the context was trimmed, which a marker says.
    `above_request` sets the budget just above the latest request's size instead, where
    trimming has the least room.
    """
    latest = chain.history.latest_user
    if above_request is not None:
        budget = math.ceil((latest.token_count if latest else 0) * token_scale) + above_request
    context = _built(chain.sources, budget, latest, token_scale)
    if context is None:
        return
    check_guarantees(context, chain.history, budget=budget, token_scale=token_scale)
    again = build(chain.sources, budget=budget, latest_user=latest, token_scale=token_scale)
    assert again == context, "the same sources built differently"
    # How many messages were left out is said once, and only when some were.
    assert len(trim_notes(context)) == (1 if context.trimmed_messages else 0)
    if context.loaded_tokens <= budget:
        assert context.trimmed_messages == 0
        shown = {raw_id for item in context.items for raw_id in item.covers}
        orphans = set(context.orphan_results)
        for source in chain.sources:
            for stored in source.raw:
                assert stored.id in shown | orphans, f"message {stored.id} silently dropped"
        results = {
            m.id
            for stored in chain.history.raw.values()
            for m in stored
            if isinstance(m.message, ToolResultMessage)
        }
        assert orphans <= results


def test_trimming_around_the_latest_request_stays_within_the_budget() -> None:
    """Dropping units before and after the pinned request takes two markers; both must fit.

    `fit_to_budget` refuses only when the request and *one* marker exceed the budget,
    then keeps the request alone with a marker on either side, over the budget.
    """
    older = UserMessage(content="x" * 400)
    request = UserMessage(content="please fix the build")
    answer = CustomMessage(custom_type="note", data={"text": "y" * 400})
    loop, stored = _stored(1, [older, request, answer], itertools.count(1))
    sources = [LoopSource(loop, None, stored)]
    over = []
    for budget in range(stored[1].token_count, stored[1].token_count + 60):
        context = _built(sources, budget, stored[1])
        if context is None:
            continue
        assert request in context.messages
        if context.tokens > budget:
            over.append((budget, context.tokens, [(i.source, i.tokens) for i in context.items]))
    assert not over, f"(budget, tokens, items) over the budget: {over[:3]}"


@PURE_SETTINGS
@given(batches=loop_batches())
def test_a_tool_call_and_its_result_share_a_turn(batches: list[list[Message]]) -> None:
    """The design's turn rule: a result answering the assistant right before it joins its turn.

    "Right before it" allows other tool results in between, including one that answers
    no call (an orphan): compaction cuts loops at turn boundaries, so a result pushed
    into a turn of its own can be cut away from its call, and the context then shows the
    call as interrupted while its result is stored.
    """
    _, stored = _stored(1, [m for batch in batches for m in batch], itertools.count(1))
    calls: dict[str, int] = {}
    for message in stored:
        if isinstance(message.message, ToolResultMessage):
            call_turn = calls.get(message.message.tool_call_id)
            if call_turn is not None:
                assert message.turn_index == call_turn, f"result {message.id} left its call's turn"
            continue
        calls = {}
        if isinstance(message.message, AssistantMessage):
            calls = {call.id: message.turn_index for call in message.message.tool_calls}


# ── fitting: the order that loses least, the digest, the system prompt ────────

_SYSTEM = (
    "You are a coding agent. Run the tests after each change. Never push to main. "
    "Keep changes small; explain each one.\nAnswer in English."
)


def _handoff(words: int) -> str:
    files = "\n".join(f"- src/module_{i}.py (edited)" for i in range(words // 8))
    return (
        "## Active Task\nFix the parser crash on empty input.\n\n"
        "## Completed Actions\n"
        + "\n".join(f"{i}. RAN pytest -q tests/test_{i}.py - failed" for i in range(1, words // 6))
        + f"\n\n## Relevant Files\n{files}\n\n## Critical Context\n- ticket: ABC-123"
    )


digests = st.none() | st.builds(
    lambda words: SessionDigest(
        head_loop_id=1,
        through_loop_id=1,
        message=CompactionSummaryMessage(summary=_handoff(words), tokens_before=10_000),
        token_count=0,
    ),
    st.integers(0, 600),
)


@st.composite
def chains_with_system(draw: st.DrawFn) -> tuple[Chain, bool]:
    """A chain whose first loop may open with a system prompt; and whether it does."""
    chain = draw(chains())
    if not draw(st.booleans()):
        return chain, False
    first = chain.sources[0]
    if first.loop.parent_loop_id is not None or first.block is not None:
        return chain, False
    stored = StoredMessage(
        id=10_000,
        session_id="s",
        loop_id=first.loop.id,
        position=-1,
        turn_index=0,
        token_count=message_tokens(SystemMessage(content=_SYSTEM)),
        content_hash="",
        created_at=_EPOCH,
        message=SystemMessage(content=_SYSTEM),
    )
    raw = {**chain.history.raw, first.loop.id: [stored, *chain.history.raw[first.loop.id]]}
    sources = [LoopSource(first.loop, first.block, [stored, *first.raw]), *chain.sources[1:]]
    return Chain(History(chain=chain.history.chain, raw=raw), sources), True


def _least_digest_cost() -> int:
    return _trim.MIN_SUMMARY_TEXT + message_tokens(UserMessage(content=framed(DIGEST_HEADER)))


@PURE_SETTINGS
@given(
    chain_and_system=chains_with_system(),
    digest=digests,
    budget=budgets,
    share=st.none() | st.integers(1, 100),
    own_system_prompt=st.booleans(),
    token_scale=token_scales,
)
def test_fitting_loses_least_first(
    chain_and_system: tuple[Chain, bool],
    digest: SessionDigest | None,
    budget: int,
    share: int | None,
    own_system_prompt: bool,
    token_scale: float,
) -> None:
    """At any budget: the guarantees, then the order of the cuts.

    - a (possibly shortened) digest is sent whenever one exists and its smallest form
      fits beside the latest request;
    - a system prompt is sent verbatim, or shortened by whole sentences, and only once
      no raw turn is left to drop; a caller's own system prompt leaves stored ones out;
    - no raw turn is dropped while a tool output it could cut is left whole;
    - the count of messages left out is said once; at most one trim marker.
    """
    chain, has_system = chain_and_system
    latest = chain.history.latest_user
    if share is not None:
        # A share of what everything loaded costs, where each cut in turn is needed.
        loaded = build(chain.sources, budget=10**9, latest_user=latest, digest=digest)
        budget = max(1, math.ceil(loaded.loaded_tokens * token_scale) * share // 100)
    overflow: ContextOverflowError | None = None
    try:
        context = build(
            chain.sources,
            budget=budget,
            latest_user=latest,
            token_scale=token_scale,
            digest=digest,
            own_system_prompt=own_system_prompt,
        )
    except ContextOverflowError as error:
        overflow = error
    if overflow is not None:
        # Only the latest request (with the count of what was left out) cannot fit, its
        # standing instructions left out.
        assert overflow.needed > budget
        if latest is not None:
            item = ContextItem(message=latest.message, tokens=latest.token_count, source="raw")
            request = request_parts(item, [_SYSTEM] if has_system else [])
            least = item if request is None else shorten_request(item, request, 0)
            assert overflow.needed >= math.ceil(least.tokens * token_scale)
        return
    check_guarantees(context, chain.history, budget=budget, token_scale=token_scale)
    assert len(trim_notes(context)) == (1 if context.trimmed_messages else 0)
    assert sum(1 for item in context.items if item.source == "marker") <= 1
    items = context.items
    systems = [i for i in items if isinstance(i.message, SystemMessage) and i.source != "synthetic"]
    if own_system_prompt:
        assert not systems
    for item in systems:
        text = item.message.text  # type: ignore[union-attr]
        if item.source == "raw":
            assert text == _SYSTEM
        else:
            kept = text.split("\n[…")[0]
            assert _SYSTEM.startswith(kept)
            # Never cut inside a sentence.
            assert kept.endswith((".", "!", "?", ":", ";")) or _SYSTEM[len(kept)] == "\n"
    raw_turns = [
        i
        for i in items
        if i.source in ("raw", "shortened")
        and not i.pinned
        and not isinstance(i.message, SystemMessage | UserMessage)
    ]
    cut_system = (
        has_system and not own_system_prompt and not any(i.source == "raw" for i in systems)
    )
    if cut_system and raw_turns:
        # Cut to its share of the budget only (by whole sentences), not dropped.
        assert systems, "the system prompt was dropped while raw turns were left"
    if context.trimmed_messages:
        # Outputs are cut before turns go, the older first: a turn was dropped only after
        # every tool output before it was cut.
        in_context = {raw_id for item in items for raw_id in item.covers}
        # Not the stored system prompt a caller's own one leaves out: that is no cut.
        dropped = {
            m.id
            for source in chain.sources
            for m in source.raw
            if m.id not in in_context
            and m.id not in context.orphan_results
            and not (own_system_prompt and isinstance(m.message, SystemMessage))
        }
        for item in items:
            whole = isinstance(item.message, ToolResultMessage) and item.source == "raw"
            if whole and item.tokens > _trim.TOOL_OUTPUT_FLOOR and item.message_id is not None:
                assert all(raw_id < item.message_id for raw_id in dropped), (
                    "a turn was dropped while an older tool output was left whole"
                )
    built = [i for i in items if i.source == "built"]
    assert len(built) <= 1, "one digest stands for the dropped turns, merged, not several"
    if built:
        # It stands for every raw turn the budget dropped (these chains are shorter than
        # the `MAX_FOLDED_MESSAGES` a build digests): what is left out otherwise is only
        # the system prompt, the session's task and orphan results.
        covered = {raw_id for item in items for raw_id in item.covers}
        first_request = next(
            (
                m.id
                for m in chain.history.raw[chain.history.chain[0]]
                if isinstance(m.message, UserMessage)
            ),
            None,
        )
        for source in chain.sources:
            for m in source.raw:
                if m.id in covered or m.id in context.orphan_results or m.id == first_request:
                    continue
                assert isinstance(m.message, SystemMessage), f"raw {m.id} dropped unfolded"
    if digest is None:
        return
    # The digest is sent alone, or with the raw turns the budget dropped folded into it.
    shown = [i for i in items if i.source in ("digest", "built")]
    if not shown:
        # Dropped only once everything but the task and the latest request is gone, and
        # then only when its smallest form does not fit beside them.
        assert not raw_turns
        assert not systems
        assert not [i for i in items if i.source == "compacted"]
        kept = [i for i in items if i.source not in ("marker", "synthetic")]
        assert all(isinstance(i.message, UserMessage) for i in kept)
        assert context.tokens + math.ceil(_least_digest_cost() * token_scale) > budget
    else:
        text = shown[0].message.text  # type: ignore[union-attr]
        assert "## Active Task" in text or "characters cut" in text or "[… cut" in text
