"""The OneLineSummarizer and the summary request it answers."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sessionstore import (
    AssistantMessage,
    BashExecutionMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    CustomMessage,
    ImageContent,
    Message,
    OneLineSummarizer,
    Summarizer,
    SummaryRequest,
    SystemMessage,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    TurnSummarizer,
    UserMessage,
    estimate_tokens,
)
from tests.unit._loops import tool_turn, user


def test_one_line_summaries_of_each_kind() -> None:
    s = OneLineSummarizer()
    assert isinstance(s, TurnSummarizer)
    assert s.summarize_turn([UserMessage(content="  fix\n\tthe   bug ")]) == "User: fix the bug"
    image = ImageContent(url="https://example.org/x.png")
    assert s.summarize_turn([UserMessage(content=[image])]) == "User: [1 image(s)]"
    both = UserMessage(content=[TextContent(text="see"), image, image])
    assert s.summarize_turn([both]) == "User: see [2 image(s)]"
    assert s.summarize_turn([UserMessage(content="")]) == "User:"
    assert s.summarize_turn([SystemMessage(content="be\nbrief")]) == "System: be brief"
    assert s.summarize_turn([BashExecutionMessage(command="make  test", exit_code=2)]) == (
        "Ran `make test` (exit 2)"
    )
    cancelled = BashExecutionMessage(command="sleep 9", cancelled=True)
    assert s.summarize_turn([cancelled]) == "Ran `sleep 9` (cancelled)"
    assert s.summarize_turn([BashExecutionMessage(command="x")]) == "Ran `x` (did not finish)"
    assert s.summarize_turn([CustomMessage(custom_type="note", data=1)]) == "[custom: note]"
    assert s.summarize_turn([BranchSummaryMessage(summary="left\nbranch")]) == "left branch"
    assert s.summarize_turn([CompactionSummaryMessage(summary="earlier")]) == "earlier"
    orphan = ToolResultMessage(tool_call_id="c9", tool_name="", content="x", is_error=True)
    assert s.summarize_turn([orphan]) == "[Tool result: c9 (error)]"


def test_one_line_summaries_of_assistant_turns() -> None:
    s = OneLineSummarizer()
    turn = tool_turn(1, text="Let me look.", names=["read", "bash", "read"])
    failed = turn[2].model_copy(update={"is_error": True})
    assert s.summarize_turn(turn) == "Let me look. [used 3 tool(s): read, bash]"
    assert s.summarize_turn([*turn[:2], failed, turn[3]]) == (
        "Let me look. [used 3 tool(s): read, bash failed]"
    )
    quiet = tool_turn(2, names=["bash"])
    assert s.summarize_turn(quiet) == "[Assistant used 1 tool(s): bash]"
    both_failed = [quiet[0], *[r.model_copy(update={"is_error": True}) for r in quiet[1:]] * 2]
    assert s.summarize_turn(both_failed) == "[Assistant used 1 tool(s): bash failed]"
    long_text = AssistantMessage(content=[TextContent(text="y" * 201), TextContent(text="ok")])
    assert s.summarize_turn([long_text]) == "ok"
    thinking = AssistantMessage(content=[ThinkingContent(thinking="hm"), TextContent(text=" ")])
    assert s.summarize_turn([thinking]) == "[Assistant response]"


def test_one_line_summaries_name_what_each_call_acts_on() -> None:
    """A turn's line says which file, command or record each call touched, and which failed."""
    calls = [
        ToolCall(id="a", name="read_file", arguments='{"path": "src/app.py"}'),
        ToolCall(id="b", name="bash", arguments='{"command": "pytest tests/test_app.py -q"}'),
        ToolCall(id="c", name="get_reservation_details", arguments='{"reservation_id": "8WMF4C"}'),
        ToolCall(id="d", name="grep", arguments='{"pattern": "parse_date", "path": "src/"}'),
    ]
    results = [
        ToolResultMessage(tool_call_id="a", tool_name="read_file", content="x = 1"),
        ToolResultMessage(tool_call_id="b", tool_name="bash", content="1 failed", is_error=True),
        ToolResultMessage(tool_call_id="c", tool_name="get_reservation_details", content="{}"),
        ToolResultMessage(tool_call_id="d", tool_name="grep", content="src/a.py:3"),
        ToolResultMessage(tool_call_id="zz", tool_name="bash", content="lost", is_error=True),
    ]
    line = OneLineSummarizer(max_chars=400).summarize_turn(
        [AssistantMessage(content=calls), *results]
    )
    assert line == (
        "[Assistant used 4 tool(s): read_file(src/app.py), "
        "bash(pytest tests/test_app.py -q) failed, "
        "get_reservation_details(reservation_id=8WMF4C), "
        "grep(src/ (pattern=parse_date)) (1 error)]"
    )
    # The same call twice is named once; a long line is cut in the names, not the bracket.
    twice = OneLineSummarizer(max_chars=60).summarize_turn(
        [AssistantMessage(content=[calls[0], calls[0].model_copy()])]
    )
    assert twice == "[Assistant used 2 tool(s): read_file(src/app.py)]"
    cut = OneLineSummarizer(max_chars=50).summarize_turn([AssistantMessage(content=calls)])
    assert len(cut) == 50
    assert cut.startswith("[Assistant used 4 tool(s): read_file(")
    assert cut.endswith("…]")


def test_one_line_summaries_are_cut_to_max_chars() -> None:
    s = OneLineSummarizer(max_chars=20, max_request_chars=20)
    assert s.summarize_turn([user("one two three four five six")]) == "User: one two three…"
    turn = tool_turn(1, text="a rather long explanation", names=["bash"])
    assert s.summarize_turn(turn) == "a rather long expla…"  # no room to keep the bracket
    assert OneLineSummarizer(max_chars=40).summarize_turn(turn) == (
        "a rather long ex… [used 1 tool(s): bash]"
    )
    huge = user("word " * 100_000)
    assert len(OneLineSummarizer(max_chars=50).summarize_turn([huge])) in (599, 600)
    assert len(OneLineSummarizer(50, max_request_chars=50).summarize_turn([huge])) == 50
    assert OneLineSummarizer(max_chars=1, max_request_chars=1).summarize_turn([user()]) == "…"


def test_a_request_keeps_more_than_other_lines_and_a_harness_output_does_not() -> None:
    """A user's request is the point of its turn; a harness's command output is not."""
    s = OneLineSummarizer()
    request = "Fix the rounding of " + "monthly_totals" * 60
    line = s.summarize_turn([user(request)])
    assert len(line) == 600
    assert line.startswith("User: Fix the rounding")
    output = "<returncode>1</returncode>\n<output>\n" + "Traceback line\n" * 100 + "</output>"
    assert len(s.summarize_turn([user(output)])) == 200
    complaint = "Please always provide EXACTLY ONE action in triple backticks, found 2. " * 20
    assert len(s.summarize_turn([user(complaint)])) <= 200
    # A task that quotes the harness's format rules further down is still a request.
    task = "<pr_description>Fix the rounding.</pr_description> " + "details " * 80
    quoting = task + "<response_example>```bash\nls\n```</response_example>"
    assert len(s.summarize_turn([user(quoting)])) > 500
    # Never less than max_chars, and a bad value is refused.
    assert len(OneLineSummarizer(700, max_request_chars=10).summarize_turn([user(request)])) == 700
    with pytest.raises(ValueError, match="max_request_chars"):
        OneLineSummarizer(max_request_chars=0)


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=80),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner),
    max_leaves=12,
)
ARGUMENTS = st.one_of(
    st.dictionaries(
        st.sampled_from(["path", "command", "file_path", "pattern", "order_id", "x", "args"]),
        JSON_VALUES,
        max_size=4,
    ).map(json.dumps),
    st.text(max_size=200),  # not JSON: an action line, or garbage
)


@settings(max_examples=200, deadline=None)
@given(
    text=st.text(max_size=300),
    name=st.text(min_size=1, max_size=40),
    calls=st.integers(0, 4),
    arguments=ARGUMENTS,
    max_chars=st.integers(1, 120),
    max_request_chars=st.integers(1, 400),
)
def test_one_liners_are_one_line_within_max_chars(
    text: str, name: str, calls: int, arguments: str, max_chars: int, max_request_chars: int
) -> None:
    s = OneLineSummarizer(max_chars=max_chars, max_request_chars=max_request_chars)
    call_ids = [f"c{i}" for i in range(calls)]
    assistant = AssistantMessage(
        content=[
            TextContent(text=text),
            *[ToolCall(id=c, name=name, arguments=arguments) for c in call_ids],
        ]
    )
    results = [ToolResultMessage(tool_call_id=c, tool_name=name, is_error=True) for c in call_ids]
    turns: list[list[Message]] = [
        [UserMessage(content=text)],
        [assistant, *results],
        [BashExecutionMessage(command=text, exit_code=1)],
        [CustomMessage(custom_type=name)],
        [CompactionSummaryMessage(summary=text)],
        [SystemMessage(content=text)],
    ]
    for turn in turns:
        line = s.summarize_turn(turn)
        request = isinstance(turn[0], UserMessage)
        assert len(line) <= (max(max_chars, max_request_chars) if request else max_chars)
        assert len(line.splitlines()) <= 1
        assert line == s.summarize_turn(turn)


def test_one_line_summarizer_refuses_bad_arguments() -> None:
    with pytest.raises(ValueError, match="max_chars"):
        OneLineSummarizer(max_chars=0)
    with pytest.raises(ValueError, match="at least one message"):
        OneLineSummarizer().summarize_turn([])


async def test_one_line_summarizer_is_a_summarizer_within_its_budget() -> None:
    s = OneLineSummarizer()
    assert isinstance(s, Summarizer)
    turns = [UserMessage(content=f"step {i} of the plan") for i in range(40)]
    whole = await s.summarize(SummaryRequest(messages=turns, budget_tokens=10_000))
    assert whole.text.splitlines() == [f"User: step {i} of the plan" for i in range(40)]
    assert whole.model == "one-line"
    small = await s.summarize(SummaryRequest(messages=turns, budget_tokens=40, prior_digest="x"))
    lines = small.text.splitlines()
    assert lines[0].endswith("earlier turn(s) left out]")
    assert lines[-1] == "User: step 39 of the plan"
    assert sum(estimate_tokens(line) + 1 for line in lines[1:]) <= 40


def test_summary_request_refuses_a_bad_budget_or_scope() -> None:
    with pytest.raises(ValueError, match="budget_tokens"):
        SummaryRequest(messages=[], budget_tokens=0)
    with pytest.raises(ValueError, match="scope"):
        SummaryRequest(messages=[], scope="world")  # type: ignore[arg-type]  # an unknown scope is the point
