"""The `get_items(limit)` window of `SessionStoreSession`, as a property over random histories."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

pytest.importorskip("agents")

from sessionstore import from_openai_responses, to_openai_responses
from sessionstore.integrations import _responses_window

Item = dict[str, Any]


@st.composite
def histories(draw: st.DrawFn) -> list[list[Item]]:
    """Batches as the SDK adds them: a user message, then model calls and their outputs."""
    batches: list[list[Item]] = []
    counter = 0
    for _ in range(draw(st.integers(1, 4))):
        batches.append([{"role": "user", "content": "go"}])
        for _ in range(draw(st.integers(0, 3))):
            counter += 1
            calls = [f"c{counter}-{i}" for i in range(draw(st.integers(0, 3)))]
            model: list[Item] = [{"type": "reasoning", "id": f"rs{counter}", "summary": []}]
            model += [
                {"type": "function_call", "call_id": c, "name": "f", "arguments": "{}"}
                for c in calls
            ]
            if not calls:
                model.append({"role": "assistant", "content": "done"})
            answered = draw(st.lists(st.sampled_from(calls), unique=True)) if calls else []
            outputs = [
                {"type": "function_call_output", "call_id": c, "output": "x"} for c in answered
            ]
            if draw(st.booleans()):
                batches.append(model + outputs)
            else:
                batches += [model, outputs] if outputs else [model]
    return batches


@given(histories(), st.integers(1, 30))
def test_a_window_is_a_paired_suffix_within_the_limit(
    batches: list[list[Item]], limit: int
) -> None:
    messages = [m for batch in batches for m in from_openai_responses(batch)]
    units = [to_openai_responses([m]) for m in messages]
    everything = [item for unit in units for item in unit]
    window = _responses_window.window(
        [not _responses_window.is_output(m) for m in messages], units, limit
    )
    assert len(window) <= limit
    tail = everything[-limit:]
    position = 0
    for item in window:  # a subsequence of the newest `limit` items, in order
        position = tail.index(item, position) + 1
    calls: set[str] = set()
    for item in window:
        if item.get("type") == "function_call":
            calls.add(item["call_id"])
        elif item.get("type") == "function_call_output":
            assert item["call_id"] in calls
    outputs = {i["call_id"] for i in window if i.get("type") == "function_call_output"}
    assert calls == outputs
    if window:
        assert window[0].get("type") != "function_call_output"
    answered = {i["call_id"] for i in everything if i.get("type") == "function_call_output"}
    made = {i["call_id"] for i in everything if i.get("type") == "function_call"}
    if limit >= len(everything) and made == answered:
        assert window == everything  # nothing is left out without a reason


@given(histories(), st.one_of(st.none(), st.integers(-1, 30)), st.data())
def test_the_window_of_a_context_exports_only_the_newest_messages_it_needs(
    batches: list[list[Item]], limit: int | None, data: st.DataObject
) -> None:
    messages = [m for batch in batches for m in from_openai_responses(batch)]
    verbatim = data.draw(st.lists(st.booleans(), min_size=len(messages), max_size=len(messages)))
    units = [to_openai_responses([m]) for m in messages]
    whole = _responses_window.window(
        [not _responses_window.is_output(m) for m in messages], units, limit
    )
    assert _responses_window.context_window(messages, verbatim, limit) == whole
