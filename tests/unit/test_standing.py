"""A request's standing instructions: found by rule, cut by whole sentences, never its task."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sessionstore._items import ContextItem
from sessionstore._standing import STANDING_LEFT_OUT, split_request
from sessionstore._tokens import message_tokens
from sessionstore._trim import fit_context
from sessionstore.errors import ContextOverflowError
from sessionstore.models import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)

ISSUE = (
    "We're currently solving the following issue within our repository. Here's the issue text:\n"
    "ISSUE:\nTimeDelta serialization precision\nOutput of `td_field.serialize` is `344`, but "
    "`345` is correct.\n\n```python\n# NOTE: the rounding\nprint(td_field.serialize('x', obj))\n"
    "```\n"
)
INSTRUCTIONS = (
    "INSTRUCTIONS:\nNow, you're going to solve this issue on your own. Remember, YOU CAN ONLY "
    "ENTER ONE COMMAND AT A TIME. You should always wait for feedback after every command.\n\n"
    "NOTE ABOUT THE EDIT COMMAND: Indentation really matters! Insert indentation.\n\n"
    "IMPORTANT TIPS:\n1. Always start by trying to replicate the bug.\n   If the issue includes "
    "code, run it.\n\n2. If you run a command and it doesn't work, try a different one.\n"
)
PROMPT = "\n(Open file: n/a)\n(Current directory: /marshmallow)\nbash-$"
SWE_AGENT = f"{ISSUE}\n\n{INSTRUCTIONS}{PROMPT}"
MINI = (
    "<pr_description>\nConsider the following PR description:\nnumberformat renders small "
    "decimals in exponential notation.\n## Notes\nIt is a regression.\n</pr_description>\n\n"
    "<instructions>\n# Task Instructions\n\n## Overview\nYou're a software engineer. Make "
    "changes to non-test files.\n\n## Useful Command Examples\n```bash\n# Replace all\n"
    "sed -i 's/old_string/new_string/g' filename.py\n```\n</instructions>"
)


def _standing(text: str, shared: tuple[str, ...] = ()) -> list[str]:
    request = split_request(text, shared=shared)
    return [text[s.start : s.end] for s in request.spans if s.standing]


def test_a_harness_template_is_split_into_its_task_and_its_standing_instructions() -> None:
    request = split_request(SWE_AGENT)
    assert _standing(SWE_AGENT) == [INSTRUCTIONS.rstrip()]
    # The issue (a '# NOTE:' inside its code included) and the shell prompt are the task.
    assert "".join(request.task_parts).split() == f"{ISSUE}{PROMPT}".split()
    # Tags stay; what they hold is one section, Markdown headings inside it included.
    (instructions,) = _standing(MINI)
    assert instructions.startswith("# Task Instructions")
    assert "new_string" in instructions
    assert "## Notes" in "".join(split_request(MINI).task_parts)  # inside the task's tags


def test_a_paragraph_the_system_prompt_holds_too_is_standing() -> None:
    rule = "You must answer with exactly one shell command in a fenced block, and nothing else."
    text = f"Fix the crash in src/parser.py when the input is empty.\n\n{rule}"
    assert _standing(text) == []
    assert _standing(text, shared=(f"You are a coding agent.\n{rule}",)) == [rule]


@pytest.mark.parametrize(
    "text",
    [
        "Fix the crash in src/parser.py when the input is empty, please.",
        "INSTRUCTIONS:\nFix the crash in src/parser.py when the input is empty.",
        "## Notes\nThe parser crashes on empty input; fix it and add a test for it.",
    ],
)
def test_a_request_with_no_task_outside_instructions_is_all_task(text: str) -> None:
    request = split_request(text)
    assert not request.has_standing
    assert request.keeping(0) == text


def test_shortening_keeps_the_task_and_leading_whole_sentences_and_says_what_it_left_out() -> None:
    request = split_request(SWE_AGENT)
    assert request.keeping(request.sentences) == SWE_AGENT
    least = request.keeping(0)
    marker = STANDING_LEFT_OUT.format(count=request.sentences)
    assert least.startswith(ISSUE)
    assert least.endswith(PROMPT)
    assert least[len(ISSUE) : -len(PROMPT)].strip() == marker
    two = request.keeping(2)
    assert "INSTRUCTIONS:\nNow, you're going to solve this issue on your own.\n[…" in two
    assert STANDING_LEFT_OUT.format(count=request.sentences - 2) in two
    # The most that fits, and None when not even the task fits.
    cost = len
    assert request.shorten(lambda text: cost(text) <= cost(two)) == two
    assert request.shorten(lambda text: cost(text) < cost(least)) is None


words = st.sampled_from(["fix", "src/app.py", "TypeError", "NOTE:", "## Tips", "<example>", "`"])
sentences = st.lists(words, min_size=1, max_size=8).map(lambda w: " ".join(w) + ".")
sections = st.tuples(
    st.sampled_from(["INSTRUCTIONS:", "IMPORTANT TIPS:", "## Notes", "NOTE:"]),
    st.lists(sentences, max_size=12),
)


@given(
    task=st.lists(sentences, min_size=1, max_size=12),
    standing=st.lists(sections, max_size=3),
    tail=st.lists(sentences, max_size=3),
    keep=st.integers(0, 40),
)
def test_shortening_never_cuts_the_task_text_nor_inside_a_sentence(
    task: list[str], standing: list[tuple[str, list[str]]], tail: list[str], keep: int
) -> None:
    parts = ["\n".join(task)]
    parts += [f"{heading}\n" + "\n".join(body) for heading, body in standing]
    parts += ["\n".join(tail)]
    text = "\n\n".join(parts)
    request = split_request(text)
    short = request.keeping(keep)
    for task_part in request.task_parts:
        if task_part.strip():
            assert task_part.strip() in short
    pieces = short.split("\n[…")
    assert text.startswith(pieces[0])
    if short != text:
        assert "standing instructions left out to fit the budget]" in short
    # Each kept piece ends where a sentence of the original ends.
    at = 0
    for piece in [pieces[0], *(p.split("]", 1)[1] for p in pieces[1:])]:
        piece = piece.strip("\n")
        if piece:
            at = text.index(piece, at) + len(piece)
            assert at == len(text) or text[at].isspace()


# ── in the fitting order ───────────────────────────────────────────────────────


def _run(request: str) -> list[ContextItem]:
    """A system prompt, the request, then 12 test runs; the request is the latest."""
    messages: list[Message] = [
        SystemMessage(content="You are a coding agent. " * 40),
        UserMessage(content=request),
    ]
    for i in range(12):
        call = ToolCall(id=f"c{i}", name="bash", arguments={"command": f"pytest tests/t{i}.py"})
        output = f"tests/t{i}.py::case_{i}\nE   ValueError: bad token {i}\n1 failed in 0.{i}s"
        messages += [
            AssistantMessage(content=[call]),
            ToolResultMessage(tool_call_id=f"c{i}", content=output),
        ]
    return [
        ContextItem(m, message_tokens(m), "raw", 1, i, covers=(i,), pinned=i == 2)
        for i, m in enumerate(messages, start=1)
    ]


def test_a_tight_budget_shortens_the_latest_requests_instructions_not_its_task() -> None:
    request = SWE_AGENT + "\n" + "\n".join(f"{i}. Tip number {i} of many." for i in range(80))
    items = _run(request)
    size = items[1].tokens
    fitted = fit_context(items, size + 40, task_loop_id=None)
    assert sum(item.tokens for item in fitted.items) <= size + 40
    (pinned,) = [item for item in fitted.items if item.pinned]
    text = pinned.message.text  # type: ignore[union-attr]
    assert pinned.source == "shortened"
    assert ISSUE in text
    assert PROMPT.strip() in text
    assert "standing instructions left out to fit the budget]" in text
    # The room it gave holds what the dropped turns did.
    (built,) = [item for item in fitted.items if item.source == "built"]
    assert "ValueError: bad token" in built.message.text  # type: ignore[union-attr]


def test_a_request_whose_task_alone_cannot_fit_overflows() -> None:
    items = _run(SWE_AGENT)
    least = message_tokens(UserMessage(content=split_request(SWE_AGENT).keeping(0)))
    with pytest.raises(ContextOverflowError) as raised:
        fit_context(items, least - 1, task_loop_id=None)
    assert raised.value.needed >= least
    fitted = fit_context(items, least + 30, task_loop_id=None)
    assert any(item.pinned for item in fitted.items)
