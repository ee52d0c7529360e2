"""Property tests of the built context's guarantees, and what they share.

The generators draw agent histories with the awkward parts real agents produce
(interrupted tool calls, orphan and duplicated results, huge multi-line outputs), the
compaction configs and budgets to build them with, and a second block strategy that
writes valid but unusual blocks. `check_guarantees` asserts what every built context
holds, whatever the strategy and config: it fits, tool calls and results pair up, the
latest user request is there (verbatim, or its standing instructions shortened by whole
sentences), and provenance names each raw message once.
"""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from hypothesis import strategies as st

from sessionstore import (
    AssistantMessage,
    BashExecutionMessage,
    BuiltContext,
    CompactedSection,
    CompactionConfig,
    CompactionSummaryMessage,
    CustomMessage,
    DefaultBlockCompaction,
    FixedCount,
    InterruptedCall,
    LoopView,
    Message,
    ReplacementMessage,
    SectionedBlockStrategy,
    StoredMessage,
    SystemMessage,
    TextContent,
    ThinkingContent,
    TokenBudget,
    ToolCall,
    ToolResultMessage,
    TurnMap,
    TurnRange,
    UserMessage,
)
from sessionstore._items import ContextItem
from sessionstore._standing import STANDING_LEFT_OUT
from sessionstore._tokens import message_tokens
from sessionstore.strategies._block import section_layout

# ── histories ──────────────────────────────────────────────────────────────────

_WORDS = ["ok", "src/app.py", "Traceback (most recent call last):", "naïve", "数据", "🙂", "{}"]
# NUL included: the store encodes it on PostgreSQL, whose JSON text cannot hold it.
_SHORT_TEXT = st.text(st.characters(codec="utf-8"), max_size=30)


@st.composite
def texts(draw: st.DrawFn, *, max_words: int = 400) -> str:
    """Text of any size: a few random characters, or many repeated words."""
    if draw(st.booleans()):
        return draw(_SHORT_TEXT)
    word = draw(st.sampled_from(_WORDS))
    return " ".join([word] * draw(st.integers(0, max_words)))


@st.composite
def requests(draw: st.DrawFn) -> str:
    """A user request: any text, or a task inside a harness's standing instructions."""
    if draw(st.integers(0, 3)) > 0:
        return draw(texts())
    word = draw(st.sampled_from(_WORDS))
    sections = [draw(texts(max_words=80))]
    for heading in draw(st.lists(st.sampled_from(_STANDING_HEADINGS), max_size=3)):
        count = draw(st.integers(0, 40))
        body = "\n".join(f"{i}. Always {word} {word}. Never {word}." for i in range(count))
        if heading.startswith("<"):
            body = f"{body}\n</{heading[1:]}"
        sections.append(f"{heading}\n{body}")
    if draw(st.booleans()):
        sections.append("(Open file: n/a)\nbash-$")
    return "\n\n".join(sections)


_STANDING_HEADINGS = ["INSTRUCTIONS:", "IMPORTANT TIPS:", "## Notes", "<instructions>"]


@st.composite
def multiline(draw: st.DrawFn) -> str:
    """A tool output of 0 to 300 lines."""
    lines = draw(st.integers(0, 300))
    word = draw(st.sampled_from(_WORDS))
    width = draw(st.integers(0, 12))
    return "\n".join(f"{i}: {' '.join([word] * width)}" for i in range(lines))


_CALL_IDS = st.sampled_from([f"call_{i}" for i in range(6)])
"""Call ids repeat inside a session, as providers' ids may."""


@st.composite
def tool_turn(draw: st.DrawFn) -> list[Message]:
    """An assistant message with 0 to 3 tool calls and what answers it.

    Each call's result may be missing (an interrupted call) or duplicated, results may
    come in any order, and an orphan result (an unknown call id) may slip in.
    """
    ids = draw(st.lists(_CALL_IDS, max_size=3, unique=True))
    calls = [
        ToolCall(id=call_id, name=draw(st.sampled_from(["bash", "read_file", "search"])))
        for call_id in ids
    ]
    content: list[TextContent | ThinkingContent | ToolCall] = []
    if draw(st.booleans()):
        content.append(ThinkingContent(thinking=draw(texts(max_words=40))))
    if draw(st.booleans()) or not calls:
        content.append(TextContent(text=draw(texts())))
    content.extend(calls)
    results: list[Message] = []
    for call in calls:
        copies = draw(st.sampled_from([1, 1, 1, 0, 2]))
        results += [
            ToolResultMessage(
                tool_call_id=call.id,
                tool_name=call.name,
                content=draw(multiline()),
                is_error=draw(st.booleans()),
            )
        ] * copies
    results = draw(st.permutations(results))
    if draw(st.integers(0, 9)) == 0:
        ghost = ToolResultMessage(tool_call_id=f"ghost_{draw(st.integers(0, 3))}", content="?")
        results.insert(draw(st.integers(0, len(results))), ghost)
    stop = "tool_calls" if calls else "stop"
    return [AssistantMessage(content=content, stop_reason=stop), *results]


@st.composite
def turn(draw: st.DrawFn) -> list[Message]:
    """One turn of a loop, of any kind the store takes."""
    kind = draw(st.sampled_from(["user", "tool", "tool", "tool", "bash", "custom", "orphan"]))
    if kind == "user":
        return [UserMessage(content=draw(texts()))]
    if kind == "tool":
        return draw(tool_turn())
    if kind == "bash":
        exit_code = draw(st.none() | st.integers(0, 2))
        return [
            BashExecutionMessage(command="make test", output=draw(multiline()), exit_code=exit_code)
        ]
    if kind == "custom":
        return [CustomMessage(custom_type="note", data={"text": draw(texts(max_words=30))})]
    return [ToolResultMessage(tool_call_id=draw(_CALL_IDS | st.just("ghost")), content="late")]


@st.composite
def loop_batches(draw: st.DrawFn, *, max_turns: int = 10) -> list[list[Message]]:
    """A loop's messages, split into the batches they are appended in.

    Most loops open with a user request; a few hold nothing at all.
    """
    # The smallest draws (where Hypothesis starts and shrinks to) are a loop opened by a
    # user request.
    if draw(st.integers(0, 19)) == 19:
        return []
    messages: list[Message] = []
    if draw(st.integers(0, 4)) < 4:
        messages.append(UserMessage(content=draw(requests())))
    for part in draw(st.lists(turn(), max_size=max_turns)):
        messages += part
    if not messages:
        messages.append(UserMessage(content=draw(texts())))
    cuts = sorted(draw(st.sets(st.integers(1, max(1, len(messages) - 1)), max_size=2)))
    bounds = [0, *[c for c in cuts if c < len(messages)], len(messages)]
    return [messages[a:b] for a, b in itertools.pairwise(bounds) if a < b]


def describe(message: Message) -> str:
    """A short description of a message, for readable failing examples."""
    tokens = message_tokens(message)
    if isinstance(message, AssistantMessage):
        calls = ",".join(call.id for call in message.tool_calls)
        return f"assistant[{calls}]({tokens})"
    if isinstance(message, ToolResultMessage):
        return f"result[{message.tool_call_id}]({tokens})"
    return f"{message.kind}({tokens})"


# ── configs, budgets, strategies ───────────────────────────────────────────────

scopes = st.one_of(st.builds(FixedCount, st.integers(0, 4)), st.builds(TokenBudget))

configs = st.builds(
    CompactionConfig,
    keep_first_turns=st.integers(0, 4),
    keep_recent_turns=st.integers(0, 12),
    max_summary_tokens=st.integers(1, 3000),
    tool_output_max_lines=st.integers(1, 80),
    compaction_scope=scopes,
)

max_context_tokens = st.one_of(st.integers(1, 400), st.integers(400, 5_000), st.integers(1, 50_000))
"""Windows from tiny (overflow, trimming) to roomy, skewed towards the tight ones."""

system_prompt_tokens = st.one_of(st.just(0), st.integers(0, 300), st.integers(0, 2_000))


class RegroupingBlockCompaction(SectionedBlockStrategy):
    """A valid but unusual block strategy, to check guarantees that hold for any strategy.

    Its summaries cover `group` turns each and are written as `summary_as` messages
    (a summary, an assistant message, an assistant message making a tool call that no
    result answers, or a user message); its `keep_recent` copies the raw messages and,
    with `drop_results`, leaves the tool results out (uncovered), so the calls there have
    no result. Each raw message is covered at most once, as the store's contract asks.
    """

    name = "regrouping"

    def __init__(self, group: int, summary_as: str, drop_results: bool) -> None:
        self.group = group
        self.summary_as = summary_as
        self.drop_results = drop_results

    def __repr__(self) -> str:
        return f"RegroupingBlockCompaction({self.group}, {self.summary_as!r}, {self.drop_results})"

    def keep_first(
        self, view: LoopView, turn_map: TurnMap, config: CompactionConfig
    ) -> TurnRange | None:
        return section_layout(turn_map.turn_count(), config, is_most_recent=True).keep_first

    def keep_recent(
        self, view: LoopView, turn_map: TurnMap, config: CompactionConfig
    ) -> CompactedSection | None:
        turns = section_layout(turn_map.turn_count(), config, is_most_recent=True).keep_recent
        if turns is None:
            return None
        replacements = [
            ReplacementMessage(message=m.message, covers=[m.id], token_count=m.token_count)
            for m in view.turn_messages(turns)
            if not (self.drop_results and isinstance(m.message, ToolResultMessage))
        ]
        return CompactedSection(range=turns, messages=replacements)

    def keep_compacted(
        self, view: LoopView, turn_map: TurnMap, config: CompactionConfig, is_most_recent: bool
    ) -> CompactedSection | None:
        layout = section_layout(turn_map.turn_count(), config, is_most_recent=is_most_recent)
        turns = layout.keep_compacted
        if turns is None:
            return None
        replacements = []
        for start in range(turns.start_turn, turns.end_turn + 1, self.group):
            end = min(start + self.group - 1, turns.end_turn)
            covered = view.turn_messages(TurnRange(start_turn=start, end_turn=end))
            message = self._summary(f"turns {start}..{end}: {len(covered)} messages", start)
            replacements.append(
                ReplacementMessage(
                    message=message,
                    covers=[m.id for m in covered],
                    token_count=message_tokens(message),
                )
            )
        return CompactedSection(range=turns, messages=replacements)

    def _summary(self, text: str, turn: int) -> Message:
        if self.summary_as == "user":
            return UserMessage(content=text)
        if self.summary_as == "assistant":
            return AssistantMessage(content=text)
        if self.summary_as == "assistant_call":
            call = ToolCall(id=f"recall_{turn}", name="recall")
            return AssistantMessage(content=[TextContent(text=text), call])
        return CompactionSummaryMessage(summary=text)


def _block_strategies(
    drop_results: st.SearchStrategy[bool],
) -> st.SearchStrategy[SectionedBlockStrategy]:
    return st.one_of(
        st.builds(DefaultBlockCompaction),
        st.builds(
            RegroupingBlockCompaction,
            st.integers(1, 3),
            st.sampled_from(["summary", "assistant", "assistant_call", "user"]),
            drop_results,
        ),
    )


block_strategies = _block_strategies(st.booleans())
whole_block_strategies = _block_strategies(st.just(False))
"""Strategies whose sections stand for every raw message of their turns."""


# ── the guarantees ─────────────────────────────────────────────────────────────


@dataclass(frozen=True)
class History:
    """What a test knows of the raw history it wrote, independently of the store's reads."""

    chain: list[int]
    """The loop ids of the active chain, root first."""
    raw: Mapping[int, Sequence[StoredMessage]]
    """Each loop's raw messages, in order."""

    @property
    def latest_user(self) -> StoredMessage | None:
        """The newest raw user message of the chain."""
        for loop_id in reversed(self.chain):
            users = [m for m in self.raw.get(loop_id, ()) if isinstance(m.message, UserMessage)]
            if users:
                return users[-1]
        return None


def _check_fits(context: BuiltContext, budget: int, token_scale: float) -> None:
    assert context.budget == budget
    assert context.tokens == math.ceil(sum(item.tokens for item in context.items) * token_scale)
    assert context.tokens <= context.budget, "the context is over its budget"


def _check_pairs(context: BuiltContext, history: History) -> None:
    """Results follow their call's assistant; every call has its result; synthetics are told."""
    reported = set(context.interrupted_calls)
    reported_ids = {(c.loop_id, c.message_id, c.call_id) for c in reported}
    open_calls: set[str] = set()
    owner = None
    for item in context.items:
        message = item.message
        if isinstance(message, ToolResultMessage):
            assert owner is not None, f"a tool result with no call before it: {message}"
            assert message.tool_call_id in open_calls, (
                f"an unanswered or repeated result: {message}"
            )
            open_calls.discard(message.tool_call_id)
            if item.source == "synthetic":
                key = (owner.loop_id, owner.message_id, message.tool_call_id)
                assert key in reported_ids, f"a synthetic result not reported: {key}"
            continue
        assert not open_calls, f"tool calls {open_calls} without a result"
        calls = message.tool_calls if isinstance(message, AssistantMessage) else []
        owner = item if calls else None
        open_calls = {call.id for call in calls}
    assert not open_calls, f"tool calls {open_calls} without a result at the end"
    # An interrupted run (the loop ends on calls with no result) is reported, not dropped.
    for loop_id in context.loop_ids:
        for assistant, call in _unanswered_at_end(history.raw.get(loop_id, ())):
            shown = [
                item
                for item in context.items
                if item.message == assistant.message and item.covers == (assistant.id,)
            ]
            for item in shown:
                expected = InterruptedCall(loop_id, item.message_id, call.id, call.name, True)
                assert expected in reported, f"{expected} not in {context.interrupted_calls}"


def _unanswered_at_end(raw: Sequence[StoredMessage]) -> list[tuple[StoredMessage, ToolCall]]:
    """The calls of the loop's last turn when it is an assistant turn left without results."""
    if not raw:
        return []
    last = [m for m in raw if m.turn_index == raw[-1].turn_index]
    first = last[0].message
    if not isinstance(first, AssistantMessage):
        return []
    answered = {m.message.tool_call_id for m in last if isinstance(m.message, ToolResultMessage)}
    return [(last[0], call) for call in first.tool_calls if call.id not in answered]


def _check_latest_user(context: BuiltContext, history: History) -> None:
    latest = history.latest_user
    if latest is None:
        return
    pinned = [item for item in context.items if item.pinned]
    assert len(pinned) == 1, "the latest user request is missing"
    assert latest.id in pinned[0].covers
    if pinned[0].message != latest.message:
        check_shortened_request(pinned[0], latest.message)


def check_shortened_request(item: ContextItem, original: Message) -> None:
    """The request's text is its own parts in order, from its start, each cut after a whole
    sentence, with a marker where each cut was; everything else about it is unchanged."""
    shortened = item.message
    assert item.source == "shortened", "the latest user request was changed"
    assert isinstance(shortened, UserMessage)
    assert isinstance(original, UserMessage)
    assert [b for b in shortened.content if not isinstance(b, TextContent)] == [
        b for b in original.content if not isinstance(b, TextContent)
    ]
    text, whole = shortened.text, original.text
    marker = re.compile(re.escape(STANDING_LEFT_OUT).replace(r"\{count\}", r"\d+"))
    assert marker.search(text), "a shortened request says where it was cut"
    parts = marker.split(text)
    assert whole.startswith(parts[0].rstrip()), "a shortened request starts as it did"
    at = 0
    for part in parts:
        part = part.strip("\n")
        if not part:
            continue
        found = whole.find(part, at)
        assert found >= 0, f"{part!r} is not part of the request"
        at = found + len(part)
        assert at == len(whole) or whole[at].isspace(), "a request cut inside a sentence"


def _check_provenance(context: BuiltContext, history: History) -> None:
    """Covers name raw messages of the item's own loop; each raw message shows at most once."""
    shown = context.loop_ids
    if shown[:1] == history.chain[:1] and shown != history.chain[len(history.chain) - len(shown) :]:
        # The chain's first loop (the session's task) may stand before the newest loops the
        # budget took, when no session digest stands for the loops left out between.
        assert all(item.source != "digest" for item in context.items)
        shown = shown[1:]
    assert shown == history.chain[len(history.chain) - len(shown) :]
    ids_of = {loop_id: {m.id: m for m in history.raw.get(loop_id, ())} for loop_id in history.chain}
    seen: Counter[int] = Counter()
    for item in context.items:
        if item.source in ("synthetic", "marker"):
            assert not item.covers
            continue
        if item.source == "digest":
            # The session digest stands for whole loops before the ones shown: it comes
            # first, after the system prompt.
            before = context.items[: context.items.index(item)]
            assert all(isinstance(x.message, SystemMessage) for x in before)
            assert not item.covers
            continue
        if item.source == "built":
            # A digest the build wrote for the raw turns it dropped (merged into the summary
            # before them, if any): it names raw messages of the chain, of any loop.
            every = {raw_id for own in ids_of.values() for raw_id in own}
            assert item.covers, "a built digest that stands for nothing"
            assert set(item.covers) <= every, f"covers {item.covers} outside the chain"
            seen.update(item.covers)
            continue
        assert item.loop_id in ids_of, f"an item of loop {item.loop_id}, not of the chain"
        if item.loop_id not in context.loop_ids:
            # The latest request, and the system prompt of the chain's first loop.
            assert item.pinned or (
                isinstance(item.message, SystemMessage) and item.loop_id == history.chain[0]
            ), "only the pinned request and the system prompt may come from out of scope"
        own = ids_of[item.loop_id]
        assert set(item.covers) <= own.keys(), f"covers {item.covers} outside loop {item.loop_id}"
        if item.source == "raw":
            (raw_id,) = item.covers
            assert item.message_id == raw_id
            assert item.message == own[raw_id].message, "a raw item that is not verbatim"
            assert item.tokens == own[raw_id].token_count
        seen.update(item.covers)
    latest = history.latest_user
    for raw_id, count in seen.items():
        allowed = 2 if latest is not None and raw_id == latest.id else 1
        assert count <= allowed, f"raw message {raw_id} is shown {count} times"


def trim_notes(context: BuiltContext) -> list[str]:
    """The texts of the context that say how many messages trimming left out."""
    said = f"{context.trimmed_messages} messages removed to fit the token budget"
    texts = [
        item.message.text
        for item in context.items
        if isinstance(item.message, UserMessage | AssistantMessage | SystemMessage)
        and item.source in ("marker", "synthetic", "compacted", "digest", "built")
    ]
    return [text for text in texts if said in text]


def check_guarantees(
    context: BuiltContext, history: History, *, budget: int, token_scale: float = 1.0
) -> None:
    """Assert every guarantee a successfully built context holds."""
    _check_fits(context, budget, token_scale)
    _check_pairs(context, history)
    _check_latest_user(context, history)
    _check_provenance(context, history)
