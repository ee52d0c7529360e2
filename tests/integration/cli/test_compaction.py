"""The compaction commands (`compact`, `context`, `audit`), end to end through click.

Sessions are synthetic coding-agent sessions (`sessionstore._demo`), seeded.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any

import pytest

from sessionstore import (
    AssistantMessage,
    BashExecutionMessage,
    BranchSummaryMessage,
    CompactionBlock,
    CustomMessage,
    ImageContent,
    Message,
    SessionStore,
    SystemMessage,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    audit_session,
    build_context,
    from_openai,
    to_openai,
)
from sessionstore._demo import generate_session
from sessionstore._tokens import message_tokens
from tests.integration.cli.runner import fails, json_out, ok, with_store

SEED = 11
LOOPS = 5
TURNS = 16
"""Tool-using turns per loop: enough for the current loop to have all three sections."""
THREE_LEVELS = ("--strategy", "default")
"""The seed's strategy, which the tests of sections and generations read (not the default)."""


def make_session(url: str, *, interrupted: bool = False) -> str:
    history = generate_session(
        seed=SEED, loops=LOOPS, turns_per_loop=TURNS, interrupted_last_call=interrupted
    )

    async def write(store: SessionStore) -> str:
        session = await store.import_session(history, app_name="cli-test", user_id="u")
        return session.id

    return with_store(url, write)


async def _chain_ids(store: SessionStore, session_id: str) -> list[int]:
    return [loop.id for loop in await store.active_chain(session_id)]


async def _chain_numbers(store: SessionStore, session_id: str) -> list[int]:
    """The active chain's loops by their number in the session, as the CLI names them."""
    return [loop.number for loop in await store.active_chain(session_id)]


async def _all_blocks(store: SessionStore, session_id: str) -> list[CompactionBlock]:
    blocks = []
    for loop in await store.list_loops(session_id):
        blocks += await store.block_history(session_id, loop.id)
    return blocks


async def _events(store: SessionStore, session_id: str) -> list[Any]:
    return await store.list_compaction_events(session_id)


# ── compact ────────────────────────────────────────────────────────────────────


def test_compact_writes_a_block_per_loop_in_scope(db_url):
    session_id = make_session(db_url)
    chain = with_store(db_url, _chain_ids, session_id)
    loops = {loop.id: loop for loop in with_store(db_url, lambda s: s.list_loops(session_id))}

    data = json_out(ok(db_url, "compact", session_id, *THREE_LEVELS, "--json"))

    assert data["session_id"] == session_id
    assert data["loop_ids"] == chain[-4:]  # the current loop and 3 before it
    assert data["skipped_loop_ids"] == []
    blocks = data["blocks"]
    assert [b["loop_id"] for b in blocks] == chain[-4:][::-1]
    current = blocks[0]
    assert current["generation"] == 1
    assert current["overlay"] == "default"
    assert current["strategy"] == "default"
    assert current["keep_first"] == {"start_turn": 0, "end_turn": 1}
    assert current["keep_compacted"]["start_turn"] == 2
    last_turn = loops[chain[-1]].turn_count - 1
    assert current["keep_recent"] == {
        "start_turn": last_turn - 9,
        "end_turn": last_turn,
        "messages": current["keep_recent"]["messages"],
    }
    for block in blocks[1:]:
        assert block["keep_first"] is None
        assert block["keep_recent"] is None
        assert block["keep_compacted"]["start_turn"] == 0
        assert block["keep_compacted"]["end_turn"] == loops[block["loop_id"]].turn_count - 1
    assert 0 < data["tokens_after"] < data["tokens_before"]
    stored = with_store(db_url, _all_blocks, session_id)
    ids = [b.id for b in stored]
    assert None not in ids
    assert sorted(i for i in ids if i is not None) == sorted(b["id"] for b in blocks)


def test_compact_summarizes_by_default(db_url):
    """With no --strategy, the command folds each loop into a structured digest."""
    session_id = make_session(db_url)
    chain = with_store(db_url, _chain_ids, session_id)

    data = json_out(ok(db_url, "compact", session_id, "--json"))

    blocks = data["blocks"]
    assert {b["strategy"] for b in blocks} == {"summarize"}
    assert blocks[0]["loop_id"] == chain[-1]
    (block,) = with_store(db_url, lambda s: s.block_history(session_id, chain[-1]))
    assert block.keep_compacted is not None
    digest = block.keep_compacted.messages[0].message.summary
    assert "## Active Task" in digest
    assert "## Completed Actions" in digest
    text = ok(db_url, "compact", "--help").stdout
    assert re.search(r"--strategy NAME.*\[default:\s+summarize\]", text, re.DOTALL)


def test_compact_again_on_an_unchanged_session_writes_nothing_and_says_so(db_url):
    session_id = make_session(db_url)
    chain = with_store(db_url, _chain_ids, session_id)
    numbers = with_store(db_url, _chain_numbers, session_id)
    first = json_out(ok(db_url, "compact", session_id, *THREE_LEVELS, "--json"))
    assert first["noop"] is False
    assert first["feedback"]["headline"].startswith("Compressed: ")
    events = with_store(db_url, lambda s: s.list_compaction_events(session_id))

    text = ok(db_url, "compact", session_id, *THREE_LEVELS, env={"COLUMNS": "120"}).stdout

    assert f"Compacted session {session_id!r} (strategy 'default', overlay 'default'" in text
    assert f"Skipped loop(s) {', '.join(map(str, numbers[-4:-1]))}" in text
    assert f"Unchanged loop(s) {numbers[-1]}" in text
    assert "No changes from compression: " in text
    assert f"Loops in scope {', '.join(map(str, numbers[-4:]))}: " in text
    data = json_out(ok(db_url, "compact", session_id, *THREE_LEVELS, "--json"))
    assert data["blocks"] == []
    assert data["noop"] is True
    assert data["unchanged_loop_ids"] == [chain[-1]]
    assert data["loop_numbers"] == numbers[-4:]
    assert data["skipped_loop_ids"] == chain[-4:-1][::-1]
    # Nothing was written: one generation, and no new events.
    history = with_store(db_url, lambda s: s.block_history(session_id, chain[-1]))
    assert [b.generation for b in history] == [1]
    assert with_store(db_url, lambda s: s.list_compaction_events(session_id)) == events


def test_compact_after_new_messages_supersedes_the_current_block(db_url):
    session_id = make_session(db_url)
    chain = with_store(db_url, _chain_ids, session_id)
    ok(db_url, "compact", session_id, *THREE_LEVELS)

    async def more(store: SessionStore) -> None:
        await store.append_messages(
            session_id,
            [UserMessage(content="One more thing: also update the changelog.")]
            + [AssistantMessage(content=f"Step {i} of the changelog update.") for i in range(6)],
        )

    with_store(db_url, more)
    data = json_out(ok(db_url, "compact", session_id, *THREE_LEVELS, "--json"))
    assert [(b["loop_id"], b["generation"]) for b in data["blocks"]] == [(chain[-1], 2)]
    # Every generation stays, for audit and time travel.
    history = with_store(db_url, lambda s: s.block_history(session_id, chain[-1]))
    assert [b.generation for b in history] == [1, 2]


def test_compact_options_reach_the_blocks(db_url):
    session_id = make_session(db_url)
    chain = with_store(db_url, _chain_ids, session_id)

    data = json_out(
        ok(
            db_url,
            "compact",
            session_id,
            *THREE_LEVELS,
            "--scope",
            "1",
            "--keep-first",
            "1",
            "--keep-recent",
            "2",
            "--max-summary-tokens",
            "300",
            "--tool-output-max-lines",
            "5",
            "--overlay",
            "short",
            "--json",
        )
    )

    assert data["loop_ids"] == chain[-2:]
    current = data["blocks"][0]
    assert current["overlay"] == "short"
    assert current["keep_first"] == {"start_turn": 0, "end_turn": 0}
    assert current["keep_recent"]["end_turn"] - current["keep_recent"]["start_turn"] == 1
    block = with_store(db_url, lambda s: s.get_block(session_id, chain[-1], overlay="short"))
    assert block is not None
    assert block.config["compaction_scope"] == {"kind": "fixed_count", "count": 1}
    assert (
        block.config["keep_first_turns"],
        block.config["keep_recent_turns"],
        block.config["max_summary_tokens"],
        block.config["tool_output_max_lines"],
    ) == (1, 2, 300, 5)
    assert with_store(db_url, lambda s: s.get_block(session_id, chain[-1])) is None


def test_compact_scope_budget_takes_the_loops_whose_summaries_fit(db_url):
    session_id = make_session(db_url)
    chain = with_store(db_url, _chain_ids, session_id)

    # Each loop is estimated at most --max-summary-tokens: three of 1,000 fit in 3,000.
    data = json_out(
        ok(
            db_url,
            "compact",
            session_id,
            "--scope",
            "budget",
            "--budget",
            "3000",
            "--max-summary-tokens",
            "1000",
            "--json",
        )
    )

    assert data["loop_ids"] == chain[-3:]
    assert len(data["blocks"]) == 3


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["compact", "nope"], 1, "session 'nope' not found"),
        (["compact", "SESSION", "--budget", "0"], 2, "--budget"),
        (["compact", "SESSION", "--strategy", "nope"], 1, "unknown block strategy 'nope'"),
        (["compact", "SESSION", "--scope", "all"], 2, "neither a number of earlier loops"),
        (["compact", "SESSION", "--keep-first", "-1"], 2, "--keep-first"),
        (["compact", "SESSION", "--loop", "999999"], 1, "loop 999999 not found"),
    ],
)
def test_a_refused_compaction_writes_nothing(db_url, args, code, message):
    session_id = make_session(db_url)

    result = fails(db_url, *[session_id if arg == "SESSION" else arg for arg in args])

    assert result.exit_code == code
    assert message in result.stderr
    assert result.stdout == ""
    assert with_store(db_url, _all_blocks, session_id) == []
    assert with_store(db_url, _events, session_id) == []


def test_compact_context_and_audit_of_an_empty_session(db_url):
    session_id = with_store(db_url, lambda s: s.create_session(app_name="a", user_id="u")).id

    assert "Nothing to compact" in ok(db_url, "compact", session_id).stdout
    assert json_out(ok(db_url, "compact", session_id, "--json"))["blocks"] == []
    text = ok(db_url, "context", session_id, "--budget", "1000").stdout
    assert "the context is empty" in text
    assert "tokens: 0 of 1,000" in text
    assert json_out(ok(db_url, "context", session_id, "--budget", "1000", "--json"))["items"] == []
    assert "has no loops" in ok(db_url, "audit", session_id).stdout
    # A loop without messages has no turns to compact.
    loop = with_store(db_url, lambda s: s.start_loop(session_id))
    data = json_out(ok(db_url, "compact", session_id, "--json"))
    assert (data["loop_ids"], data["blocks"]) == ([loop.id], [])
    assert "No block was written" in ok(db_url, "compact", session_id).stdout


# ── context ────────────────────────────────────────────────────────────────────


def test_context_formats(db_url):
    session_id = make_session(db_url)
    ok(db_url, "compact", session_id)
    expected = with_store(db_url, lambda s: build_context(s, session_id, max_context_tokens=20_000))
    budget = ["--budget", "20000"]

    openai = ok(db_url, "context", session_id, *budget, "--format", "openai")
    assert json.loads(openai.stdout) == to_openai(expected.messages)
    assert f"tokens: {expected.tokens:,} of 20,000" in openai.stderr
    numbers = with_store(db_url, _chain_numbers, session_id)
    ids_to_numbers = dict(zip(with_store(db_url, _chain_ids, session_id), numbers, strict=True))
    in_scope = ", ".join(str(ids_to_numbers[loop_id]) for loop_id in expected.loop_ids)
    assert f"loops in scope: {in_scope}" in openai.stderr

    data = json_out(ok(db_url, "context", session_id, *budget, "--format", "json"))
    assert data["session_id"] == session_id
    assert (data["tokens"], data["budget"], data["max_context_tokens"]) == (
        expected.tokens,
        20_000,
        20_000,
    )
    assert data["loop_ids"] == expected.loop_ids
    assert data["trimmed_messages"] == 0
    assert data["messages"] == len(data["items"]) == len(expected.items)
    assert [item["source"] for item in data["items"]] == [i.source for i in expected.items]
    assert {"raw", "compacted", "recent"} <= set(data["sources"])
    for item, built in zip(data["items"], expected.items, strict=True):
        assert item["tokens"] == built.tokens
        assert item["covers"] == list(built.covers)
        assert item["message"]["kind"] == built.message.kind
        if item["source"] == "raw":
            assert item["covers"] == [item["message_id"]]
        elif item["source"] == "digest":
            # The session digest stands for whole loops before the scope.
            assert item["replacement_id"] is None
            assert item is data["items"][0]
        else:
            assert item["replacement_id"] is not None
            assert item["covers"]
    assert json_out(ok(db_url, "context", session_id, *budget, "--json")) == data

    text = ok(db_url, "context", session_id, *budget)
    assert text.stderr == ""
    headers = [line for line in text.stdout.splitlines() if re.match(r"── \d+\. ", line)]
    assert len(headers) == len(expected.items)
    assert headers[0].startswith(f"── 1. {expected.items[0].message.kind} · ")
    assert all(line.endswith(" tokens") for line in headers)
    assert any(" · compacted · loop " in line for line in headers)
    assert f"tokens: {expected.tokens:,} of 20,000" in text.stdout
    assert f"loops in scope: {in_scope}" in text.stdout
    assert "interrupted calls: 0" in text.stdout


def test_context_reserves_the_system_prompt(db_url):
    session_id = make_session(db_url)

    result = ok(
        db_url,
        "context",
        session_id,
        "--budget",
        "20000",
        "--system-prompt-tokens",
        "4000",
        "--json",
    )

    data = json_out(result)
    assert (data["budget"], data["max_context_tokens"]) == (16_000, 20_000)
    assert data["tokens"] <= 16_000
    assert "of 16,000 (20,000 minus 4,000 for the system prompt)" in result.stderr


def test_a_harness_that_sends_its_own_system_prompt_gets_none_stored(db_url):
    history = generate_session(seed=SEED, loops=2, turns_per_loop=TURNS)
    history[0].insert(0, SystemMessage(content="You are the stored system prompt."))

    async def write(store: SessionStore) -> str:
        session = await store.import_session(history, app_name="cli-test", user_id="u")
        return session.id

    session_id = with_store(db_url, write)
    stored = json.loads(
        ok(db_url, "context", session_id, "--budget", "20000", "--format", "openai").stdout
    )
    assert stored[0] == {"role": "system", "content": "You are the stored system prompt."}
    ok(db_url, "compact", session_id, "--budget", "20000", "--system-prompt-tokens", "4000")
    own = ok(
        db_url,
        "context",
        session_id,
        "--budget",
        "20000",
        "--system-prompt-tokens",
        "4000",
        "--format",
        "openai",
    ).stdout
    messages = json.loads(own)
    assert not [m for m in messages if m["role"] == "system"]
    assert sum(message_tokens(m) for m in from_openai(messages)) <= 16_000


def test_context_trims_to_the_budget_and_answers_interrupted_calls(db_url):
    session_id = make_session(db_url, interrupted=True)

    result = ok(db_url, "context", session_id, "--budget", "3000", "--json")

    data = json_out(result)
    assert data["tokens"] <= 3000
    assert data["trimmed_messages"] > 0
    # Said in a trim marker, or in the digest built for the turns left out.
    assert data["sources"].get("marker", 0) + data["sources"].get("built", 0) >= 1
    (call,) = data["interrupted_calls"]
    assert call["at_end"] is True
    assert f"trimmed to fit the budget: {data['trimmed_messages']} message(s)" in result.stderr
    assert f"interrupted calls: 1 ({call['tool_name']} {call['call_id']}" in result.stderr
    # The latest user request is always there.
    assert any(item["pinned"] for item in data["items"])


def test_context_as_of_rebuilds_what_the_model_saw(db_url):
    session_id = make_session(db_url)
    ok(db_url, "compact", session_id, *THREE_LEVELS)
    budget = ["--budget", "50000", "--json"]
    before = json_out(ok(db_url, "context", session_id, *budget))
    then = datetime.now(UTC)
    more = [UserMessage(content="One more thing: rename it."), AssistantMessage(content="Done.")]
    with_store(db_url, lambda s: s.append_messages(session_id, more))
    ok(db_url, "compact", session_id, *THREE_LEVELS)
    after = json_out(ok(db_url, "context", session_id, *budget))
    assert after["items"] != before["items"]

    by_generation = json_out(ok(db_url, "context", session_id, *budget, "--as-of", "1"))
    assert by_generation["items"] == before["items"]
    assert by_generation["as_of"] == 1
    aware = json_out(ok(db_url, "context", session_id, *budget, "--as-of", then.isoformat()))
    assert aware["items"] == before["items"]
    # A time without an offset is read as UTC.
    naive = then.replace(tzinfo=None).isoformat()
    assert json_out(ok(db_url, "context", session_id, *budget, "--as-of", naive)) == aware
    zulu = then.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    assert json_out(ok(db_url, "context", session_id, *budget, "--as-of", zulu)) == aware
    latest = json_out(ok(db_url, "context", session_id, *budget, "--as-of", "2"))
    assert latest["items"] == after["items"]


def test_context_text_renders_every_kind_of_message(db_url):
    pixel = "iVBORw0KGgo="
    messages: list[Message] = [
        SystemMessage(content="Be brief."),
        UserMessage(
            content=[TextContent(text="What is in this picture?"), ImageContent(data=pixel)]
        ),
        AssistantMessage(
            content=[
                ThinkingContent(thinking="The user wants a description."),
                ThinkingContent(thinking="", signature="sig", redacted=True),
                TextContent(text="Let me look."),
                ToolCall(id="c1", name="describe", arguments={"detail": "high"}),
            ]
        ),
        ToolResultMessage(
            tool_call_id="c1", tool_name="describe", content="model offline", is_error=True
        ),
        BashExecutionMessage(command="ls images", output="cat.png", exit_code=0),
        CustomMessage(custom_type="note", data={"pinned": True}),
        CustomMessage(custom_type="secret", data="hidden", display=False),
        BranchSummaryMessage(summary="On the other branch we tried OCR."),
        AssistantMessage(content="A cat."),
    ]

    async def write(store: SessionStore) -> str:
        return (await store.import_session([messages], app_name="a", user_id="u")).id

    session_id = with_store(db_url, write)

    text = ok(db_url, "context", session_id, "--budget", "10000").stdout

    for expected in (
        "── 1. system · raw · loop ",
        "Be brief.",
        "What is in this picture?\n[image]",
        "(thinking) The user wants a description.\n(thinking, redacted)\nLet me look.",
        '→ describe({"detail": "high"})',
        "[describe error for c1]\nmodel offline",
        "Ran `ls images`",
        "[note]",
        "(a custom message that is not shown to the model)",
        "[Summary of another branch of this conversation]",
        "· latest user request",
        "A cat.",
    ):
        assert expected in text, expected
    audit = ok(db_url, "audit", session_id, env={"COLUMNS": "200"}).stdout
    assert "user What is in this picture?" in audit
    assert "$ ls images" in audit
    assert "→ describe: Let me look." in audit
    assert "[note]" in audit


def test_context_falls_back_to_the_budget_scope_for_a_block_without_one(db_url):
    session_id = make_session(db_url)
    chain = with_store(db_url, _chain_ids, session_id)
    # A block written through the store by hand records no compaction scope.
    block = CompactionBlock(keep_first={"start_turn": 0, "end_turn": 0})
    with_store(db_url, lambda s: s.write_block(session_id, chain[-1], block))

    data = json_out(ok(db_url, "context", session_id, "--budget", "100000", "--json"))

    # The whole chain fits the budget, so every loop is in the context.
    assert len(chain) > 4
    assert data["loop_ids"] == chain


def test_context_uses_the_scope_the_loop_was_compacted_with(db_url):
    session_id = make_session(db_url)
    chain = with_store(db_url, _chain_ids, session_id)
    budget = ["--budget", "100000", "--json"]

    # Never compacted: every loop while the chain fits the budget.
    assert json_out(ok(db_url, "context", session_id, *budget))["loop_ids"] == chain
    ok(db_url, "compact", session_id, "--scope", "1")

    assert json_out(ok(db_url, "context", session_id, *budget))["loop_ids"] == chain[-2:]
    wider = json_out(ok(db_url, "context", session_id, *budget, "--scope", "3"))
    assert wider["loop_ids"] == chain[-4:]
    # As of a generation, the scope that generation was compacted with.
    first = json_out(ok(db_url, "context", session_id, *budget, "--as-of", "1"))
    assert first["loop_ids"] == chain[-2:]


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["context", "nope", "--budget", "1000"], 1, "session 'nope' not found"),
        (["context", "SESSION"], 2, "Missing option '--budget'"),
        (["context", "SESSION", "--budget", "0"], 2, "--budget"),
        (["context", "SESSION", "--budget", "10", "--as-of", "yesterday"], 2, "ISO 8601"),
        (["context", "SESSION", "--budget", "10", "--as-of", "0"], 2, "generations start at 1"),
        (["context", "SESSION", "--budget", "9000", "--as-of", "9"], 1, "has no generation 9"),
        (
            ["context", "SESSION", "--budget", "100", "--system-prompt-tokens", "100"],
            1,
            "leaves no room",
        ),
        (
            ["context", "SESSION", "--budget", "5"],
            1,
            "the smallest valid context (the latest user request",
        ),
        (["context", "SESSION", "--budget", "9000", "--json", "--format", "openai"], 2, "--json"),
        (["context", "SESSION", "--budget", "9000", "--loop", "999999"], 1, "loop 999999"),
    ],
)
def test_context_bad_input_is_a_clean_error(db_url, args, code, message):
    session_id = make_session(db_url)
    ok(db_url, "compact", session_id)

    result = fails(db_url, *[session_id if arg == "SESSION" else arg for arg in args])

    assert result.exit_code == code
    assert message in result.stderr
    assert result.stdout == ""


# ── audit ──────────────────────────────────────────────────────────────────────


def test_audit_json_is_the_library_audit(db_url):
    session_id = make_session(db_url)
    ok(db_url, "compact", session_id, "--tool-output-max-lines", "5")

    data = json_out(ok(db_url, "audit", session_id, "--json"))

    expected = with_store(db_url, lambda s: audit_session(s, session_id))
    numbers = [loop.pop("loop_number") for loop in data["loops"]]
    assert numbers == [loop.loop.number for loop in expected.loops]
    if data["digest"] is not None:
        del data["digest"]["through_loop_number"], data["digest"]["folded_loop_numbers"]
    assert data == json.loads(json.dumps(expected.to_dict()))
    assert [loop["in_scope"] for loop in data["loops"]] == [False, True, True, True, True]
    actions = {turn["action"] for turn in data["loops"][-1]["turns"]}
    assert {"kept", "summarised"} <= actions


@pytest.mark.parametrize("width", [100, 120])
def test_audit_table_is_readable(db_url, width):
    session_id = make_session(db_url)
    ok(db_url, "compact", session_id, "--tool-output-max-lines", "5")
    audit = with_store(db_url, lambda s: audit_session(s, session_id))

    text = ok(db_url, "audit", session_id, env={"COLUMNS": str(width)}).stdout

    lines = text.splitlines()
    assert max(len(line) for line in lines) <= width
    for word in ("summarised", "truncated", "kept", "out of scope", "raw"):
        assert word in text
    assert (
        f"Total: {audit.raw_tokens:,} raw tokens → {audit.context_tokens:,} in context "
        f"(ratio {audit.ratio:.1%}); 4 of {LOOPS} loop(s) in scope." in text
    )
    # One row per turn of each loop in scope, one row per loop out of scope.
    rows = [line for line in lines if re.match(r"│\s+\d+\*?\s+│\s+[\d.]+\s+│", line)]
    in_scope = [loop for loop in audit.loops if loop.in_scope]
    per_loop_rows = len(audit.loops)  # the per-loop summary table
    assert len(rows) == sum(len(loop.turns) for loop in in_scope) + 1 + per_loop_rows
    # The replacements that stand for summarised turns are named by id.
    summarised = next(
        turn for turn in audit.loops[-1].turns if turn.action == "summarised"
    ).replacements[0]
    assert f"#{summarised.id} " in text


def test_audit_loop_and_errors(db_url):
    session_id = make_session(db_url)
    chain = with_store(db_url, _chain_ids, session_id)
    numbers = with_store(db_url, _chain_numbers, session_id)

    data = json_out(ok(db_url, "audit", session_id, "--loop", str(numbers[2]), "--json"))
    assert [loop["loop_id"] for loop in data["loops"]] == chain[:3]
    assert [loop["loop_number"] for loop in data["loops"]] == numbers[:3]
    assert data["loops"][-1]["generation"] is None  # never compacted: all kept
    assert {turn["action"] for turn in data["loops"][-1]["turns"]} == {"kept"}
    assert data["context_tokens"] == data["raw_tokens"]

    assert "session 'nope' not found" in fails(db_url, "audit", "nope").stderr
    assert "loop 999999" in fails(db_url, "audit", session_id, "--loop", "999999").stderr
    assert "--scope" in fails(db_url, "audit", session_id, "--scope", "-1").stderr


def test_context_text_says_what_a_built_digest_covers(db_url):
    session_id = make_session(db_url)
    ok(db_url, "compact", session_id, "--budget", "6000")
    built = json_out(ok(db_url, "context", session_id, "--budget", "3000", "--json"))
    assert built["sources"].get("built", 0) >= 1

    text = ok(db_url, "context", session_id, "--budget", "3000", "--format", "text").stdout

    headers = [line for line in text.splitlines() if "digest built for this context" in line]
    assert headers
    # Its messages were compacted before, or left out to fit now: not only the latter.
    assert all("compacted or left out to fit" in line for line in headers)
