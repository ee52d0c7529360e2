"""Fitting a context on SQLite and PostgreSQL: what goes first, the system prompt, re-runs.

Issue 16's defects 2, 5 and 6, as a user meets them: a small budget must shorten the
digest rather than leave only the latest request; the system prompt is kept or
reserved; a summarize re-run on an unchanged session writes nothing; and no compaction,
in any order, grows the context.
"""

from __future__ import annotations

import itertools

import pytest

from sessionstore import (
    AssistantMessage,
    BuiltContext,
    CompactionConfig,
    FixedCount,
    Message,
    SessionStore,
    SummarizingBlockCompaction,
    SystemMessage,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    build_context,
    compact_session_loops,
    maybe_compact,
    to_openai,
)
from sessionstore._demo import generate_session
from sessionstore._framing import SUMMARY_OPEN
from tests.integration._helpers import check_valid

SYSTEM = (
    "You are a careful coding agent. Run the tests after every change. Never push to main. "
    "Answer in English. Keep every change small and explain it."
)
TASK = "Fix the crash in src/app/parser.py: parse() raises IndexError on an empty file."
PROGRESS = "." * 600 + "F" + "." * 300
PYTEST = f"{'collected 900 items'}\n\n{PROGRESS}\n\nFAILED tests/test_parser.py::test_empty"


def _call(index: int, command: str) -> ToolCall:
    return ToolCall(id=f"call_{index}", name="bash", arguments={"command": command})


def coding_loops(loops: int = 3, turns: int = 12) -> list[list[Message]]:
    """A coding-agent session: a system prompt, the task, then test runs full of dots."""
    history: list[list[Message]] = []
    counter = itertools.count()
    for number in range(loops):
        request = TASK if number == 0 else f"Format error: answer with one command ({number})."
        loop: list[Message] = [UserMessage(content=request)]
        if number == 0:
            loop.insert(0, SystemMessage(content=SYSTEM))
        for turn in range(turns):
            index = next(counter)
            command = "pytest -q tests" if turn % 2 else f"sed -n '1,80p' src/app/mod{index}.py"
            output = (
                PYTEST if turn % 2 else "\n".join(f"{n}: value_{index} = {n}" for n in range(80))
            )
            loop.append(
                AssistantMessage(content=[TextContent(text="Next."), _call(index, command)])
            )
            loop.append(
                ToolResultMessage(tool_call_id=f"call_{index}", tool_name="bash", content=output)
            )
        loop.append(AssistantMessage(content=f"Loop {number} done."))
        history.append(loop)
    return history


async def _import(store: SessionStore, history: list[list[Message]]) -> str:
    session = await store.import_session(history, app_name="app", user_id="u")
    return session.id


async def _loaded(store: SessionStore, session_id: str) -> int:
    """What the whole context costs, untrimmed."""
    built = await build_context(store, session_id, max_context_tokens=10**7)
    return built.tokens


def _texts(context: BuiltContext) -> list[str]:
    return [str(message.get("content")) for message in to_openai(context.messages)]


def _roles_alternate(context: BuiltContext) -> bool:
    roles = [m["role"] for m in to_openai(context.messages) if m["role"] in ("user", "assistant")]
    # A tool result sits between an assistant and the next; only user/user and an
    # assistant after an assistant with no call in between break alternation.
    rendered = [m for m in to_openai(context.messages) if m["role"] != "system"]
    for first, second in itertools.pairwise(rendered):
        if first["role"] == second["role"] == "user":
            return False
    return bool(roles) or not rendered


# ── trimming ───────────────────────────────────────────────────────────────────


async def test_a_small_budget_shortens_the_digest_instead_of_leaving_only_the_request(
    store: SessionStore,
) -> None:
    session_id = await _import(store, coding_loops(loops=4))
    config = CompactionConfig(compaction_scope=FixedCount(count=0))
    await compact_session_loops(
        store, session_id, strategy=SummarizingBlockCompaction(), config=config
    )
    full = await _loaded(store, session_id)
    for budget in (full // 4, full // 10, 400):
        context = await build_context(store, session_id, max_context_tokens=budget)
        check_valid(context)
        texts = "\n".join(_texts(context))
        assert "Format error: answer with one command (3)." in texts  # the latest request
        # Alone, or with the raw turns the budget dropped folded into it.
        digest = [item for item in context.items if item.source in ("digest", "built")]
        assert digest, f"at {budget} tokens the digest was dropped whole"
        assert "## Active Task" in digest[0].message.text  # type: ignore[union-attr]
        assert sum(1 for item in context.items if item.source == "marker") <= 1
        assert _roles_alternate(context)


async def test_bulky_tool_output_goes_before_any_turn(store: SessionStore) -> None:
    session_id = await _import(store, coding_loops(loops=1, turns=6))
    full = await _loaded(store, session_id)
    context = await build_context(store, session_id, max_context_tokens=full * 3 // 5)
    check_valid(context)
    assert context.trimmed_messages == 0, "a turn was dropped while output could be cut"
    shortened = [item for item in context.items if item.source == "shortened"]
    assert shortened
    text = "\n".join(_texts(context))
    assert "[progress marks: passed 900, failed 1]" in text  # the dots, tallied
    assert "FAILED tests/test_parser.py::test_empty" in text  # the tail of each run kept
    assert SYSTEM in text
    assert TASK in text


async def test_the_system_prompt_is_kept_verbatim_with_the_compression_note(
    store: SessionStore,
) -> None:
    session_id = await _import(store, coding_loops(loops=2))
    full = await _loaded(store, session_id)
    context = await build_context(store, session_id, max_context_tokens=full // 12)
    check_valid(context)
    assert context.trimmed_messages > 0
    assert context.messages[0] == SystemMessage(content=SYSTEM)
    note = context.messages[1]
    assert isinstance(note, SystemMessage)
    assert note.text.startswith("[Note:")
    # The count is said once: in the note, or in the one marker that keeps the task and
    # the latest request (two user messages) from sitting side by side.
    said = f"{context.trimmed_messages} messages removed"
    texts = _texts(context)
    assert sum(said in text for text in texts) == 1
    markers = [item for item in context.items if item.source == "marker"]
    assert len(markers) <= 1
    assert _roles_alternate(context)


async def test_a_caller_that_sends_its_own_system_prompt_reserves_room_for_it(
    store: SessionStore,
) -> None:
    session_id = await _import(store, coding_loops(loops=2))
    full = await _loaded(store, session_id)
    window, own = full // 2, 1_500
    context = await build_context(
        store, session_id, max_context_tokens=window, system_prompt_tokens=own
    )
    check_valid(context)
    assert context.budget == window - own
    assert not [m for m in context.messages if isinstance(m, SystemMessage)]
    # What the harness sends, its own prompt included, fits the window.
    assert context.tokens + own <= window


async def test_the_system_prompt_is_cut_by_whole_sentences_only_when_nothing_else_is_left(
    store: SessionStore,
) -> None:
    session_id = await _import(store, coding_loops(loops=1, turns=2))
    context = await build_context(store, session_id, max_context_tokens=90)
    check_valid(context)
    systems = [item for item in context.items if isinstance(item.message, SystemMessage)]
    shortened = [item for item in systems if item.source == "shortened"]
    assert shortened, "the budget is too small for the whole system prompt"
    text = shortened[0].message.text  # type: ignore[union-attr]
    kept = text.split("\n[…")[0]
    assert SYSTEM.startswith(kept)
    assert kept.endswith(".")
    raw = [item for item in context.items if item.source == "raw" and not item.pinned]
    assert not [item for item in raw if not isinstance(item.message, UserMessage)]


# ── compaction never grows the context; re-runs write nothing ──────────────────


async def test_a_summarize_rerun_on_an_unchanged_session_writes_nothing(
    store: SessionStore,
) -> None:
    session_id = await _import(store, coding_loops(loops=3))
    first = await compact_session_loops(
        store, session_id, strategy="summarize", max_context_tokens=4_000
    )
    assert first.blocks
    for _ in range(2):
        again = await compact_session_loops(
            store, session_id, strategy="summarize", max_context_tokens=4_000
        )
        assert again.noop, again.feedback.lines() if again.feedback else again
        assert again.feedback is not None
        assert again.feedback.noop


@pytest.mark.parametrize(
    "order",
    [
        ("default", "summarize"),
        ("summarize", "default"),
        ("summarize", "summarize"),
        ("default", "default"),
        ("forced", "automatic"),
    ],
)
async def test_no_compaction_grows_the_context(store: SessionStore, order: tuple[str, str]) -> None:
    session_id = await _import(store, coding_loops(loops=3))
    window = 6_000
    before = await _loaded(store, session_id)
    for step in order:
        if step == "automatic":
            result = await maybe_compact(
                store, session_id, max_context_tokens=window, config=CompactionConfig()
            )
        else:
            strategy = "summarize" if step == "forced" else step
            result = await compact_session_loops(
                store, session_id, strategy=strategy, max_context_tokens=window
            )
        after = await _loaded(store, session_id)
        assert after <= before, f"{step} grew the context: {before} -> {after}"
        if result is not None and result.blocks:
            assert after < before, f"{step} wrote blocks that did not shrink the context"
        if result is not None and result.oversized_loop_ids:
            assert result.feedback is not None
            assert any("left as it was" in line for line in result.feedback.lines())
        before = after


async def test_a_block_larger_than_the_one_it_replaces_is_not_written(
    store: SessionStore,
) -> None:
    history = generate_session(seed=3, loops=2, turns_per_loop=30)
    session_id = await _import(store, history)
    tight = CompactionConfig(max_summary_tokens=200, keep_recent_turns=2)
    loose = CompactionConfig(max_summary_tokens=4_000, keep_recent_turns=12)
    first = await compact_session_loops(store, session_id, config=tight)
    assert first.blocks
    before = await _loaded(store, session_id)
    second = await compact_session_loops(store, session_id, config=loose)
    assert second.noop
    assert second.oversized_loop_ids
    assert second.feedback is not None
    assert any("not fewer than the" in line for line in second.feedback.lines())
    assert await _loaded(store, session_id) == before
    # The futile attempt (its summaries were made) is recorded, without a block, so the
    # engine's gates in another process count it (anti-thrashing).
    ended = [e for e in await store.list_compaction_events(session_id) if e.event == "ended"]
    assert len(ended) == 2
    assert ended[-1].block_id is None
    assert ended[-1].tokens_after == ended[-1].tokens_before
    assert ended[-1].details["oversized_loop_ids"] == second.oversized_loop_ids


async def test_the_framing_opens_each_summary_once_per_context(store: SessionStore) -> None:
    session_id = await _import(store, coding_loops(loops=3))
    await compact_session_loops(
        store, session_id, strategy=SummarizingBlockCompaction(), max_context_tokens=4_000
    )
    context = await build_context(store, session_id, max_context_tokens=10**6)
    summaries = [text for text in _texts(context) if "CONTEXT SUMMARY" in text]
    assert summaries
    assert all(text.count(SUMMARY_OPEN) <= 1 for text in summaries)


async def test_the_task_loop_stays_when_the_newest_loop_alone_is_over_the_budget(
    store: SessionStore,
) -> None:
    """A harness's format error opens a second loop after the task's loop was summarised
    (compacted with a large window): at a budget the newest loop alone is over, the
    budget scope keeps the task's loop (its summary, shortened) instead of leaving only
    the newest loop's raw turns, since no session digest stands for it."""
    history = coding_loops(loops=2, turns=12)
    session_id = await _import(store, history)
    await compact_session_loops(
        store,
        session_id,
        strategy=SummarizingBlockCompaction(),
        config=CompactionConfig(),
        max_context_tokens=100_000,
    )
    newest = sum(m.token_count for m in await store.get_messages(session_id))
    budget = 1_500
    assert newest > budget
    context = await build_context(store, session_id, max_context_tokens=budget)
    check_valid(context)
    assert context.tokens <= budget
    loops = await store.list_loops(session_id)
    assert loops[0].id in context.loop_ids
    shown = "\n".join(m.text for m in context.messages if hasattr(m, "text"))
    assert "parser.py" in shown
