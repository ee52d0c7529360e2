"""Trajectory compression: both forms, protected head and tail, the smallest fold that fits."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sessionstore import TrajectoryLineError
from sessionstore._tokens import message_tokens
from sessionstore._trajectories import (
    SUMMARY_PREFIX,
    TrajectoryReport,
    compress_trajectory,
    compress_trajectory_lines,
    sharegpt_to_messages,
)
from sessionstore.errors import FormatError
from sessionstore.formats import from_openai
from sessionstore.models import UserMessage
from sessionstore.summarizers import Summary, SummaryRequest, summary_budget


def sharegpt(middle_pairs: int, size: int = 400) -> dict[str, Any]:
    turns = [
        {"from": "system", "value": "You are an agent."},
        {"from": "human", "value": "Fix the bug in app.py"},
        {"from": "gpt", "value": "Looking."},
    ]
    for i in range(middle_pairs):
        call = json.dumps({"name": "bash", "arguments": {"command": f"cat f{i}.py"}})
        turns.append({"from": "gpt", "value": f"step {i} <tool_call>{call}</tool_call>"})
        turns.append({"from": "tool", "value": f"<tool_response>{'x' * size}</tool_response>"})
    turns.append({"from": "gpt", "value": "Done: fixed app.py"})
    return {"id": "t1", "score": 0.5, "conversations": turns}


def openai(middle_pairs: int, size: int = 400) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are an agent."},
        {"role": "user", "content": "Fix the bug in app.py"},
        {"role": "assistant", "content": "Looking."},
    ]
    for i in range(middle_pairs):
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"c{i}",
                        "type": "function",
                        "function": {"name": "bash", "arguments": json.dumps({"command": "ls"})},
                    }
                ],
            }
        )
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": "y" * size})
    messages.append({"role": "assistant", "content": "Done."})
    return {"id": "o1", "meta": {"k": [1, 2]}, "messages": messages}


FRAME = message_tokens(UserMessage(content=f"{SUMMARY_PREFIX}\nx\n[END OF CONTEXT SUMMARY]"))
"""The tokens of a summary turn around a one-token summary."""


def tokens_of(record: dict[str, Any]) -> int:
    if "conversations" in record:
        messages = sharegpt_to_messages(record["conversations"])
    else:
        messages = from_openai(record["messages"])
    return sum(message_tokens(m) for m in messages)


async def test_under_target_is_unchanged():
    record = sharegpt(3)
    result = await compress_trajectory(record, target_max_tokens=100_000)
    assert result.record == record
    assert not result.metrics.compressed
    assert result.metrics.tokens_before == result.metrics.tokens_after == tokens_of(record)
    assert "within the target" in result.metrics.note


@pytest.mark.parametrize("make", [sharegpt, openai])
async def test_fits_target_keeps_head_tail_and_other_keys(make):
    record = make(30)
    original = copy.deepcopy(record)
    key = "conversations" if "conversations" in record else "messages"
    before = tokens_of(record)
    target = before // 2
    result = await compress_trajectory(record, target_max_tokens=target, protect_last=3)

    assert record == original  # the input is not changed
    metrics = result.metrics
    out = result.record[key]
    assert metrics.compressed
    assert not metrics.still_over_target
    assert metrics.tokens_after == tokens_of(result.record) <= target
    assert metrics.tokens_before == before
    assert {k: v for k, v in result.record.items() if k != key} == {
        k: v for k, v in record.items() if k != key
    }
    # Head: system + first request + first answer, verbatim; then one summary turn.
    assert out[:3] == record[key][:3]
    summary = out[3]
    if key == "conversations":
        assert summary["from"] == "human"
        assert summary["value"].startswith(SUMMARY_PREFIX)
    else:
        assert summary["role"] == "user"
        assert summary["content"].startswith(SUMMARY_PREFIX)
    # Everything after the fold is the input's own turns, in order (the tail included).
    start, stop = metrics.folded or (0, 0)
    assert start == 3
    assert out[4:] == record[key][stop:]
    assert record[key][-3:] == out[-3:]
    assert metrics.turns_after == len(out) == len(record[key]) - metrics.turns_folded + 1
    assert result.format == ("sharegpt" if key == "conversations" else "openai")


async def test_fold_is_the_smallest_that_fits():
    record = sharegpt(30)
    before = tokens_of(record)
    target = before - 1_000
    result = await compress_trajectory(record, target_max_tokens=target)
    start, stop = result.metrics.folded or (0, 0)
    assert result.metrics.tokens_after <= target
    # Folding one unit (two turns) less does not fit with the summary budget rule.
    smaller = record["conversations"][start : stop - 2]
    saved = tokens_of({"conversations": smaller})
    assert before - saved + FRAME + summary_budget(saved, max_tokens=2_000) > target
    # And far from the whole middle was folded.
    assert stop < len(record["conversations"]) - 10


async def test_pairs_are_never_split():
    for target_share in (0.3, 0.5, 0.7, 0.9):
        record = openai(25, size=300)
        target = int(tokens_of(record) * target_share)
        result = await compress_trajectory(record, target_max_tokens=target, protect_last=2)
        out = result.record["messages"]
        calls = set()
        for message in out:
            for call in message.get("tool_calls") or []:
                calls.add(call["id"])
            if message["role"] == "tool":
                assert message["tool_call_id"] in calls
        # protect_last=2 lands on a tool result: the tail widened to its call.
        assert out[-3:] == record["messages"][-3:]


async def test_still_over_when_head_and_tail_do_not_fit():
    record = sharegpt(10)
    record["conversations"][1]["value"] = "q" * 20_000
    result = await compress_trajectory(record, target_max_tokens=3_000)
    assert result.metrics.still_over_target
    assert result.metrics.compressed  # best effort: the whole middle is folded
    assert result.metrics.tokens_after < result.metrics.tokens_before
    assert "no room" in result.metrics.note


async def test_nothing_between_head_and_tail_is_unchanged_and_over():
    record = {"conversations": [{"from": "human", "value": "z" * 4_000}]}
    result = await compress_trajectory(record, target_max_tokens=100)
    assert result.record == record
    assert result.metrics.still_over_target
    assert not result.metrics.compressed


class OverrunningSummarizer:
    """Returns far more than its budget the first time (as a model can)."""

    def __init__(self) -> None:
        self.budgets: list[int] = []

    async def summarize(self, request: SummaryRequest) -> Summary:
        self.budgets.append(request.budget_tokens)
        size = 3_000 if len(self.budgets) == 1 else request.budget_tokens
        return Summary(text="s" * size, model="fake", prompt_version="1")


async def test_a_summary_over_its_budget_makes_the_fold_grow():
    record = sharegpt(30)
    target = tokens_of(record) - 1_000
    summarizer = OverrunningSummarizer()
    result = await compress_trajectory(record, target_max_tokens=target, summarizer=summarizer)
    assert len(summarizer.budgets) == 2
    assert result.metrics.tokens_after <= target
    assert result.metrics.summary_model == "fake"


@pytest.mark.parametrize(
    ("record", "match"),
    [
        ({"id": 1}, "neither"),
        ({"conversations": [], "messages": []}, "both"),
        ({"conversations": {"a": 1}}, "must be a list"),
        ({"conversations": [{"from": "alien", "value": "x"}]}, "turn 0"),
        ({"conversations": [{"from": "human", "value": 3}]}, "turn 0"),
        ({"messages": [{"role": "nobody"}]}, "message 0"),
    ],
)
async def test_bad_records_are_format_errors(record, match):
    with pytest.raises(FormatError, match=match):
        await compress_trajectory(record, target_max_tokens=10)


async def test_bad_arguments():
    with pytest.raises(ValueError, match="target_max_tokens"):
        await compress_trajectory(sharegpt(1), target_max_tokens=0)
    with pytest.raises(TypeError, match="protect_last"):
        await compress_trajectory(sharegpt(1), protect_last=1.5)  # type: ignore[arg-type]


def test_sharegpt_mapping_pairs_hermes_tool_calls():
    messages = sharegpt_to_messages(sharegpt(1)["conversations"])
    call = messages[3].tool_calls[0]  # type: ignore[union-attr]
    assert (call.name, json.loads(call.arguments)) == ("bash", {"command": "cat f0.py"})
    assert messages[4].tool_call_id == call.id  # type: ignore[union-attr]


async def test_lines_keep_order_and_name_a_bad_line():
    lines = [json.dumps(sharegpt(n % 4 + 1)) for n in range(9)]

    async def compress(record):
        return await compress_trajectory(record, target_max_tokens=300)

    seen = [n async for n, _ in compress_trajectory_lines(lines, compress, workers=3)]
    assert seen == list(range(1, 10))

    report = TrajectoryReport()

    async def drain() -> None:
        bad = [lines[0], "", "{oops", lines[1]]
        async for number, result in compress_trajectory_lines(bad, compress, workers=2):
            report.add(result.metrics, number)

    with pytest.raises(TrajectoryLineError, match="line 3: not valid JSON") as error:
        await drain()
    assert error.value.line_number == 3
    assert report.trajectories == 1


turn_sizes = st.lists(
    st.tuples(st.sampled_from(["plain", "call"]), st.integers(1, 1_500)), min_size=0, max_size=25
)


@settings(derandomize=True, max_examples=60, deadline=None)
@given(sizes=turn_sizes, target=st.integers(50, 8_000), protect_last=st.integers(0, 5))
async def test_property_valid_and_within_target_when_a_fit_is_possible(sizes, target, protect_last):
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "task"},
        {"role": "assistant", "content": "ok"},
    ]
    for i, (kind, size) in enumerate(sizes):
        if kind == "call":
            messages.append(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": f"c{i}",
                            "type": "function",
                            "function": {"name": "f", "arguments": "{}"},
                        }
                    ],
                }
            )
            messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": "r" * size})
        else:
            messages.append({"role": "user" if i % 2 else "assistant", "content": "p" * size})
    record = {"messages": messages}
    result = await compress_trajectory(record, target_max_tokens=target, protect_last=protect_last)
    out = result.record["messages"]
    converted = from_openai(out)  # valid OpenAI messages
    assert result.metrics.tokens_after == sum(message_tokens(m) for m in converted)
    open_ids: set[str] = set()
    for message in out:
        open_ids |= {c["id"] for c in message.get("tool_calls") or []}
        if message["role"] == "tool":
            assert message["tool_call_id"] in open_ids
    if result.metrics.compressed:
        start, stop = result.metrics.folded or (0, 0)
        assert out[:start] == messages[:start]
        assert out[start + 1 :] == messages[stop:]
    # A fit is possible when the head and the protected tail plus an empty summary fit.
    if not result.metrics.still_over_target:
        assert result.metrics.tokens_after <= target
    else:
        head_tail = (
            tokens_of({"messages": out[:start] + out[start + 1 :]})
            if result.metrics.compressed
            else result.metrics.tokens_before
        )
        assert head_tail + FRAME > target
