"""`compress_messages`: the stateless path over a plain message list, no store.

It fits the budget, pairs every tool call with its result, keeps the latest request
verbatim, folds the middle into one digest, honours `in_memory_strategy`, and does all
of it on the real transcripts too.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sessionstore import (
    AssistantMessage,
    CompactionConfig,
    ContextOverflowError,
    Message,
    SystemMessage,
    ToolResultMessage,
    UserMessage,
    compress_messages,
    message_tokens,
)
from sessionstore.strategies import (
    CompressedMessages,
    SummarizingCompaction,
    get_compaction_strategy,
    register_compaction_strategy,
)
from sessionstore.strategies._compress import COMPRESSION_NOTE
from sessionstore.summarizers import Summary, SummaryRequest
from tests.unit._histories import (
    DATASETS,
    ask,
    bash,
    check_pairs,
    lines,
    load_conversations,
    result,
    valid_histories,
)


def tokens(messages: Sequence[Message]) -> int:
    return sum(message_tokens(m) for m in messages)


def text(message: Message) -> str:
    return str(getattr(message, "text", ""))


def latest_user(messages: Sequence[Message]) -> Message:
    return next(m for m in reversed(messages) if isinstance(m, UserMessage))


def session(turns: int = 30) -> list[Message]:
    history: list[Message] = [
        SystemMessage(content="You are a coding agent. Fix the bug."),
        UserMessage(content="The test test_login fails with KeyError: 'user'. Fix it."),
    ]
    for n in range(turns):
        history += [
            ask(bash(f"c{n}", f"grep -n user src/auth_{n}.py"), text=f"Looking at file {n}."),
            result(f"c{n}", lines(80, f"src/auth_{n}.py: user"), name="bash"),
        ]
    history += [
        AssistantMessage(content="Fixed in src/auth_3.py."),
        UserMessage(content="Thanks. Now run the tests."),
    ]
    return history


def run(coroutine: object) -> CompressedMessages:
    return asyncio.run(coroutine)  # type: ignore[arg-type]


def test_a_history_that_fits_comes_back_unchanged() -> None:
    history = session(2)
    out = run(compress_messages(history, tokens(history)))
    assert out.messages == history
    assert all(a is b for a, b in zip(out.messages, history, strict=True))
    assert not out.changed
    assert out.summary is None


@pytest.mark.parametrize("budget", [600, 1_000, 2_000, 4_000])
def test_it_fits_the_budget_pairs_and_keeps_the_latest_request(budget: int) -> None:
    history = session()
    assert tokens(history) > 3 * budget
    out = run(compress_messages(history, budget))
    assert out.tokens_after == tokens(out.messages) <= budget
    check_pairs(out.messages)
    assert latest_user(out.messages) == latest_user(history)
    assert out.messages[-1] == history[-1]
    assert out.tokens_before == tokens(history)


def test_the_middle_becomes_one_framed_digest_after_a_noted_system_prompt() -> None:
    history = session()
    out = run(compress_messages(history, 700, config={"keep_first_turns": 1}))
    assert out.summary
    digests = [m for m in out.messages if "REFERENCE ONLY" in text(m)]
    assert len(digests) == 1
    assert out.summary in text(digests[0])
    assert out.folded > 0
    system = out.messages[0]
    assert isinstance(system, SystemMessage)
    assert system.text.startswith("You are a coding agent.")
    assert system.text.endswith(COMPRESSION_NOTE)
    assert out.messages[1] == history[1]  # the task, in the protected head
    # The digest's role keeps turns alternating with the head before it.
    index = out.messages.index(digests[0])
    assert isinstance(out.messages[index - 1], UserMessage) != isinstance(
        out.messages[index], UserMessage
    )
    assert "src/auth_" in out.summary  # the files the folded turns searched


def test_compressing_again_updates_the_digest_instead_of_stacking_another() -> None:
    first = run(compress_messages(session(), 2_000))
    more: list[Message] = [
        *first.messages,
        ask(bash("d1", "pytest -q"), text="Running."),
        result("d1", lines(200, "PASSED")),
        UserMessage(content="And the linter?"),
    ]
    second = run(compress_messages(more, 2_000))
    assert tokens(second.messages) <= 2_000
    assert sum("REFERENCE ONLY" in text(m) for m in second.messages) == 1
    system = second.messages[0]
    assert text(system).count(COMPRESSION_NOTE) == 1
    assert text(latest_user(second.messages)) == "And the linter?"


class RecordingSummarizer:
    def __init__(self) -> None:
        self.requests: list[SummaryRequest] = []

    async def summarize(self, request: SummaryRequest) -> Summary:
        self.requests.append(request)
        return Summary(text="## Active Task\nFix test_login.", model="fake", prompt_version="t")


def test_the_summarizer_is_injectable_and_gets_the_focus_and_a_budget() -> None:
    fake = RecordingSummarizer()
    out = run(compress_messages(session(), 1_500, summarizer=fake, focus_topic="auth"))
    assert out.summary == "## Active Task\nFix test_login."
    (request,) = fake.requests
    assert request.focus_topic == "auth"
    assert 0 < request.budget_tokens <= 1_500
    assert not any(isinstance(m, SystemMessage) for m in request.messages)


def test_in_memory_strategy_is_honoured() -> None:
    history = session()
    legacy = run(compress_messages(history, 2_000, config={"in_memory_strategy": "default"}))
    assert legacy.strategy == "default"
    assert any("[Summary]" in text(m) for m in legacy.messages)  # the seed's level 2
    assert CompactionConfig().in_memory_strategy == "summarize"
    assert isinstance(get_compaction_strategy("summarize"), SummarizingCompaction)

    class KeepLast:
        def compact(self, messages: Sequence[Message], config: object) -> list[Message]:
            return list(messages[-1:])

    register_compaction_strategy("keep-last", KeepLast, replace=True)
    out = run(compress_messages(history, 2_000, config={"in_memory_strategy": "keep-last"}))
    assert out.messages == history[-1:]
    assert out.strategy == "keep-last"


def test_the_strategy_object_runs_through_the_protocol() -> None:
    from sessionstore import ContextConfig

    history = session()
    config = ContextConfig(max_context_tokens=3_000, system_prompt_tokens=1_000)
    compacted = asyncio.run(SummarizingCompaction().compact(history, config))
    assert tokens(compacted) <= 2_000
    check_pairs(compacted)


def test_a_tail_too_big_for_the_budget_is_narrowed_then_cut() -> None:
    history: list[Message] = [
        UserMessage(content="Summarise the logs."),
        ask(bash("c1", "cat big.log"), text="Reading."),
        result("c1", lines(3_000, "log")),
        UserMessage(content="What failed?"),
        ask(bash("c2", "cat other.log")),
        result("c2", lines(3_000, "err")),
    ]
    out = run(compress_messages(history, 800))
    assert tokens(out.messages) <= 800
    check_pairs(out.messages)
    assert text(latest_user(out.messages)) == "What failed?"


def test_bad_input_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="budget"):
        run(compress_messages(session(1), 0))
    with pytest.raises(ValueError, match="budget"):
        run(compress_messages(session(1), True))
    with pytest.raises(ContextOverflowError) as caught:
        run(compress_messages([UserMessage(content="word " * 500)], 10))
    assert caught.value.available == 10


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(history=valid_histories(), budget=st.integers(min_value=200, max_value=3_000))
def test_any_valid_history_comes_back_valid_and_within_the_budget(
    history: list[Message], budget: int
) -> None:
    history = [UserMessage(content="the task"), *history]
    try:
        out = run(compress_messages(history, budget))
    except ContextOverflowError as error:
        overflow: ContextOverflowError | None = error
    else:
        overflow = None
    if overflow is not None:
        assert overflow.needed > budget
        return
    assert tokens(out.messages) <= budget
    check_pairs(out.messages)
    assert latest_user(out.messages) == latest_user(history)


@pytest.mark.parametrize("name", DATASETS)
@pytest.mark.parametrize("fraction", [0.25, 0.10])
def test_real_transcripts_fit_pair_and_keep_the_request(
    dataset_dir: Path, name: str, fraction: float
) -> None:
    for history in load_conversations(dataset_dir, name, 6):
        budget = max(200, int(tokens(history) * fraction))
        try:
            out = run(compress_messages(history, budget))
        except ContextOverflowError as error:
            overflow: ContextOverflowError | None = error
        else:
            overflow = None
        if overflow is not None:
            assert overflow.needed > budget  # the latest request alone is too big
            continue
        assert tokens(out.messages) <= budget
        check_pairs(out.messages)
        assert latest_user(out.messages) == latest_user(history)
        assert not any(isinstance(m, ToolResultMessage) for m in out.messages[:1])
        if out.summary is not None:
            assert out.folded > 0


def test_one_task_then_a_long_run_keeps_the_task_and_folds_the_run() -> None:
    """The latest request is the first: the work after it is folded, the request kept."""
    history: list[Message] = [
        SystemMessage(content="You are a coding agent."),
        UserMessage(content="Fix test_login. " + "Details. " * 300),
    ]
    for n in range(30):
        history += [
            ask(bash(f"c{n}", f"sed -n 1,80p src/auth_{n}.py"), text=f"Step {n}."),
            result(f"c{n}", lines(80, f"auth_{n}")),
        ]
    budget = 2_000
    for first_turns in (2, 0):  # the task in the protected head, or only the system prompt
        out = run(compress_messages(history, budget, config={"keep_first_turns": first_turns}))
        assert tokens(out.messages) <= budget
        check_pairs(out.messages)
        assert out.messages[1] == history[1]  # the task, verbatim
        (digest,) = [m for m in out.messages if "REFERENCE ONLY" in text(m)]
        assert isinstance(digest, AssistantMessage)  # no user message may follow the task
        assert out.messages[-1] == history[-1]  # the newest turn, as it was
        assert latest_user(out.messages) == history[1]
    assert out.messages[2] is digest  # with no head, the digest follows the task
    assert "turns after the latest request were folded too" in out.notes


def test_a_long_request_leaves_room_only_for_a_digest_and_a_cut_newest_turn() -> None:
    task = UserMessage(content="Fix it. " + "Context. " * 1_000)
    history: list[Message] = [SystemMessage(content="Be brief."), task]
    for n in range(4):
        history += [ask(bash(f"c{n}", f"cat log_{n}")), result(f"c{n}", lines(400, f"log{n}"))]
    budget = tokens(history[:2]) + 300
    out = run(compress_messages(history, budget))
    assert tokens(out.messages) <= budget
    check_pairs(out.messages)
    assert out.messages[1] == task
    newest = out.messages[-1]
    assert isinstance(newest, ToolResultMessage)
    assert newest.tool_call_id == "c3"
    assert "truncated" in text(newest)


KEY = "sk-proj-" + "Z9y8X7w6V5u4T3s2R1q0" * 2


def test_no_secret_reaches_the_summarizer_or_the_digest() -> None:
    """hermes-agent PR #9200 / #13228: a key folded into a digest is sent again and again."""
    history = session()
    history[4:4] = [
        ask(bash("k1", f"curl -H 'Authorization: Bearer {KEY}' api/x"), text="Calling."),
        result("k1", f"token={KEY}\nExit code: 1", name="bash"),
    ]
    fake = RecordingSummarizer()
    run(compress_messages(history, 1_500, summarizer=fake))
    (request,) = fake.requests
    assert any("Authorization" in str(m.model_dump()) for m in request.messages)
    assert not any(KEY in str(m.model_dump()) for m in request.messages)
    # The offline summarizer copies commands word for word: its digest is redacted.
    out = run(compress_messages(history, 1_500))
    assert out.summary
    assert "curl" in out.summary
    assert KEY not in out.summary
    assert not any(KEY in text(m) for m in out.messages if "REFERENCE ONLY" in text(m))


class EchoingSummarizer:
    """A summarizer that repeats a key it was given in its answer's text."""

    def __init__(self) -> None:
        self.priors: list[str | None] = []

    async def summarize(self, request: SummaryRequest) -> Summary:
        self.priors.append(request.prior_digest)
        return Summary(text=f"## Active Task\nUse {KEY}.", model="fake", prompt_version="t")


def test_a_digest_and_a_prior_digest_are_redacted() -> None:
    echo = EchoingSummarizer()
    first = run(compress_messages(session(), 2_000, summarizer=echo))
    assert first.summary is not None
    assert KEY not in first.summary
    more = [*first.messages, *session(20)[2:]]
    run(compress_messages(more, 2_000, summarizer=echo))
    assert len(echo.priors) == 2
    assert echo.priors[1] is not None
    assert KEY not in echo.priors[1]


def test_redaction_can_be_turned_off() -> None:
    echo = EchoingSummarizer()
    strategy = SummarizingCompaction(echo, redact_secrets=False)
    out = run(strategy.compress(session(), 2_000, CompactionConfig()))
    assert out.summary is not None
    assert KEY in out.summary
