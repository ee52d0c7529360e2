"""`cut_output`: a tool's output cut to a number of lines, keeping what a diff changed."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sessionstore._tokens import HeuristicTokenCounter
from sessionstore.models import StoredMessage, ToolResultMessage
from sessionstore.strategies import truncate_head_tail
from sessionstore.strategies._default import truncated_copy
from sessionstore.strategies._diff_cut import ERROR_SCAN_LINES, _read, cut_output
from sessionstore.strategies._shorten import _largest, shorten_output


def file_diff(name: str, changes: int, context: int = 4) -> list[str]:
    lines = [
        f"diff --git a/{name} b/{name}",
        f"index 1111111..2222222 100644 {name}",
        f"--- a/{name}",
        f"+++ b/{name}",
        f"@@ -10,{2 * context + changes} +10,{2 * context + changes} @@ def f_{name}():",
    ]
    lines += [f"     unchanged {name} before {i}" for i in range(context)]
    for i in range(changes):
        lines += [f"-    old {name} {i}", f"+    new {name} {i}"]
    lines += [f"     unchanged {name} after {i}" for i in range(context)]
    return lines


def submission(files: int, changes: int = 1, context: int = 4) -> str:
    lines = ["<returncode>0</returncode>", "<output>"]
    for index in range(files):
        lines += file_diff(f"pkg/module_{index}.py", changes, context)
    return "\n".join([*lines, "</output>"])


def changed(text: str) -> list[str]:
    return [line for line in text.split("\n") if line.startswith(("-    ", "+    "))]


def test_a_diff_keeps_every_change_and_loses_its_unchanged_lines_farthest_first() -> None:
    text = submission(files=6)
    assert len(text.split("\n")) == 6 * 15 + 3
    cut = cut_output(text, 60)
    lines = cut.split("\n")
    assert len(lines) == 60
    assert changed(cut) == changed(text)
    assert [line for line in lines if line.startswith(("diff --git", "@@", "--- ", "+++ "))] == [
        line for line in text.split("\n") if line.startswith(("diff --git", "@@", "--- ", "+++ "))
    ]
    assert lines[:2] == ["<returncode>0</returncode>", "<output>"]
    assert lines[-2:] == ["</output>", "[... 34 unchanged lines of the diff cut ...]"]
    # The context next to each change stays; the lines farthest from it go.
    assert "     unchanged pkg/module_3.py before 3" in lines
    assert "     unchanged pkg/module_3.py after 0" in lines
    assert "     unchanged pkg/module_3.py before 0" not in lines
    # The head-and-tail cut loses the middle files' changes.
    assert len(changed(truncate_head_tail(text, 60))) < len(changed(text))


def test_changes_over_the_limit_keep_every_file_and_a_few_changes_of_each() -> None:
    text = submission(files=4, changes=10)
    cut = cut_output(text, 30)
    lines = cut.split("\n")
    assert "unchanged" not in cut.replace("lines of the diff cut", "")
    total = len(text.split("\n"))
    assert len(lines) <= 30
    assert lines[-1] == f"[... {total - len(lines) + 1} lines of the diff cut ...]"
    assert lines[:3] == [
        "<returncode>0</returncode>",
        "<output>",
        "diff --git a/pkg/module_0.py b/pkg/module_0.py",
    ]
    assert "</output>" in lines
    for index in range(4):  # every file, with its hunk's header and its first changes
        name = f"pkg/module_{index}.py"
        assert f"diff --git a/{name} b/{name}" in lines
        assert any(line.startswith("@@") and line.endswith(f"f_{name}():") for line in lines)
        assert f"-    old {name} 0" in lines
        assert f"+    new {name} 1" in lines
    # In the diff's order; the head-and-tail cut loses the middle files.
    order = {line: index for index, line in enumerate(text.split("\n"))}
    positions = [order[line] for line in lines[:-1]]
    assert positions == sorted(positions)
    assert "diff --git a/pkg/module_2.py" not in truncate_head_tail(text, 30)


def test_a_plain_diff_u_is_cut_file_by_file_too() -> None:
    lines = ["$ diff -u old new"]
    for index in range(3):
        lines += [f"--- a/f{index}.c", f"+++ b/f{index}.c", "@@ -1,20 +1,20 @@"]
        lines += [f"--- removed comment {index} {i}" for i in range(20)]  # SQL-like `-- x` lines
        lines += [f"+new {index} {i}" for i in range(20)]
    cut = cut_output("\n".join(lines), 20)
    shown = cut.split("\n")
    assert len(shown) <= 20
    for index in range(3):
        assert f"--- a/f{index}.c" in shown
        assert f"+new {index} 0" in shown


def test_more_files_than_lines_are_cut_in_their_middle() -> None:
    text = submission(files=40, changes=2)
    cut = cut_output(text, 30)
    head, marker, tail = cut.partition("\n\n[... ")
    assert marker
    total = len(text.split("\n"))
    assert tail.startswith(f"{total - 30} lines truncated ...]\n\n")
    assert len(head.split("\n")) + len(tail.split("\n")) - 2 == 30


@pytest.mark.parametrize(
    "text",
    [
        "\n".join(f"line {i}" for i in range(120)),
        "\n".join(["@@ not a hunk header", *[f"+ not a diff {i}" for i in range(80)]]),
        "",
    ],
)
def test_any_other_output_is_cut_as_the_seed_cuts_it(text: str) -> None:
    assert cut_output(text, 50) == truncate_head_tail(text, 50)


def is_subsequence(part: list[str], whole: list[str]) -> bool:
    rest = iter(whole)
    return all(line in rest for line in part)


def chained_traceback(frames: int) -> str:
    """A run whose first exception (the cause) is in the middle of a long traceback."""
    lines = ["<returncode>1</returncode>", "<output>", "Traceback (most recent call last):"]
    for i in range(frames):
        lines += [f'  File "/app/db/utils_{i}.py", line {i + 10}, in run', "    execute()"]
    lines += ["sqlite3.OperationalError: no such table: product", ""]
    lines += ["The above exception was the direct cause of the following exception:", ""]
    lines += ["Traceback (most recent call last):"]
    for i in range(frames):
        lines += [f'  File "/app/models/base_{i}.py", line {i + 20}, in save', "    insert()"]
    return "\n".join([*lines, "django.db.utils.OperationalError: no such table: product"])


def test_an_error_in_the_middle_of_a_long_output_stays_in_its_place() -> None:
    text = chained_traceback(frames=40)
    cut = cut_output(text, 50)
    assert "sqlite3.OperationalError: no such table: product" not in truncate_head_tail(text, 50)
    shown = [line for line in cut.split("\n") if line and not line.startswith("[... ")]
    assert len(shown) <= 50
    assert "sqlite3.OperationalError: no such table: product" in shown
    assert shown[:3] == text.split("\n")[:3]
    assert shown[-1] == "django.db.utils.OperationalError: no such table: product"
    # In their order, and every gap said with the seed's marker, counting what went.
    assert is_subsequence(shown, [line for line in text.split("\n") if line])
    omitted = [int(n) for n in re.findall(r"\[\.\.\. (\d+) lines truncated \.\.\.\]", cut)]
    assert len(omitted) == 2
    assert sum(omitted) == len(text.split("\n")) - len(shown)


def test_errors_of_the_middle_take_at_most_a_fifth_of_the_lines() -> None:
    lines = ["$ pytest", *[f"E   AssertionError: case {i} differs" for i in range(60)], "4 failed"]
    around = [f"setup {i}" for i in range(30)], [f"tail {i}" for i in range(30)]
    text = "\n".join([*around[0], *lines, *around[1]])
    shown = [line for line in cut_output(text, 50).split("\n") if line and line[0] != "["]
    errors = [line for line in shown if line.startswith("E ")]
    assert len(shown) == 50
    assert len(errors) == 10
    # The first and the last of them.
    assert "E   AssertionError: case 0 differs" in errors
    assert "E   AssertionError: case 59 differs" in errors
    # Too few lines to spare one: the seed's cut.
    assert cut_output(text, 4) == truncate_head_tail(text, 4)


def test_a_huge_output_is_read_for_errors_only_near_the_ends_of_its_middle() -> None:
    lines = [f"INFO worker {i} done" for i in range(20_000)]
    lines[30] = "KeyError: 'early'"
    lines[10_000] = "KeyError: 'deep in the middle'"
    lines[19_960] = "KeyError: 'late'"
    text = "\n".join(lines)
    cut = cut_output(text, 50)
    assert "KeyError: 'early'" in cut
    assert "KeyError: 'late'" in cut
    # A bounded read: only the first and last lines of a long output are looked at.
    assert "deep in the middle" not in cut
    assert _read(text).errors == (30, 19_960)
    assert ERROR_SCAN_LINES < 10_000


@given(
    st.lists(
        st.sampled_from(["ok", "ValueError: bad", "E   assert 1 == 2", "", "  File x", "x" * 30]),
        max_size=120,
    ),
    st.integers(min_value=0, max_value=60),
)
def test_a_cut_output_keeps_its_lines_in_order_within_the_limit(
    lines: list[str], max_lines: int
) -> None:
    text = "\n".join(f"{i}: {line}" for i, line in enumerate(lines))
    cut = cut_output(text, max_lines)
    if len(lines) <= max_lines:
        assert cut is text
        return
    shown = [line for line in cut.split("\n") if line and not line.startswith("[... ")]
    assert len(shown) <= max_lines
    numbers = [int(line.split(":", 1)[0]) for line in shown]
    assert numbers == sorted(set(numbers))


def test_a_short_output_is_itself() -> None:
    text = submission(files=1)
    assert cut_output(text, 50) is text
    with pytest.raises(ValueError, match="negative"):
        cut_output(text, -1)


def test_recent_turns_and_the_built_context_keep_the_changes_of_a_long_diff() -> None:
    text = submission(files=5)
    result = ToolResultMessage(tool_call_id="call_1", tool_name="bash", content=text)
    counter = HeuristicTokenCounter()
    raw = StoredMessage(
        id=1,
        session_id="s",
        loop_id=1,
        position=3,
        turn_index=1,
        token_count=counter.count_message(result),
        content_hash="0" * 64,
        created_at="2026-11-30T00:00:00Z",
        message=result,
    )
    kept = truncated_copy(raw, 40, counter).message
    assert isinstance(kept, ToolResultMessage)
    assert changed(kept.text) == changed(text)
    shortened = shorten_output(result, 400)
    assert isinstance(shortened, ToolResultMessage)
    assert counter.count_message(shortened) <= 400
    assert changed(shortened.text) == changed(text)


@given(
    files=st.integers(min_value=1, max_value=8),
    changes=st.integers(min_value=1, max_value=6),
    context=st.integers(min_value=0, max_value=8),
    max_lines=st.integers(min_value=0, max_value=150),
)
def test_what_a_cut_diff_keeps(files: int, changes: int, context: int, max_lines: int) -> None:
    text = submission(files, changes, context)
    lines = text.split("\n")
    cut = cut_output(text, max_lines)
    if len(lines) <= max_lines:
        assert cut is text
        return
    kept = [line for line in lines if not line.startswith("     unchanged")]
    if len(kept) + 1 <= max_lines:
        shown = cut.split("\n")
        assert len(shown) == max_lines
        assert [line for line in shown if not line.startswith("     unchanged")][:-1] == kept
        # What is kept is in its order in the diff.
        order = {line: index for index, line in enumerate(lines)}
        positions = [order[line] for line in shown[:-1]]
        assert positions == sorted(positions)
    elif files + 1 <= max_lines:  # every file's header, then changes of each in turn
        shown = cut.split("\n")
        assert len(shown) <= max_lines
        assert shown[-1] == f"[... {len(lines) - len(shown) + 1} lines of the diff cut ...]"
        assert [line for line in shown if line.startswith("diff --git")] == [
            line for line in lines if line.startswith("diff --git")
        ]
        assert not any(line.startswith("     unchanged") for line in shown)
        order = {line: index for index, line in enumerate(lines)}
        positions = [order[line] for line in shown[:-1]]
        assert positions == sorted(positions)
        # A line more keeps what a line less kept.
        assert set(shown[:-1]) <= set(cut_output(text, max_lines + 1).split("\n"))
    else:
        assert f"[... {len(lines) - max_lines} lines truncated ...]" in cut


@given(
    st.lists(
        st.sampled_from(["....F....", "." * 40, "=" * 60, "same line", "E   boom", "ok", ""]),
        max_size=80,
    ),
    st.integers(min_value=0, max_value=300),
)
def test_a_cut_of_a_squeezed_output_is_the_cut_of_the_output(lines: list[str], cap: int) -> None:
    """A build squeezes an output once and cuts that for each size it tries."""
    result = ToolResultMessage(tool_call_id="c", tool_name="bash", content="\n".join(lines))
    squeezed = shorten_output(result, None)
    assert isinstance(squeezed, ToolResultMessage)
    once = shorten_output(squeezed, cap, squeezed=True)
    assert isinstance(once, ToolResultMessage)
    whole = shorten_output(result, cap)
    assert isinstance(whole, ToolResultMessage)
    assert once.text == whole.text


@given(
    st.integers(min_value=0, max_value=200),
    st.integers(min_value=-1, max_value=200),
    st.one_of(st.none(), st.integers(min_value=-5, max_value=205)),
)
def test_a_search_from_a_guess_finds_what_halving_finds(
    high: int, answer: int, guess: int | None
) -> None:
    """A token cut gallops from its guess of the line count; the answer is the same."""
    answer = min(answer, high)
    tried: list[int] = []

    def fits(k: int) -> bool:
        tried.append(k)
        return k <= answer

    assert _largest(fits, high, guess) == answer
    assert all(0 <= k <= high for k in tried)
    if guess is not None and 0 <= guess <= high and answer >= 0:
        # Near the guess, near the answer: tries grow with the distance's logarithm.
        assert len(tried) <= 2 * max(1, abs(answer - guess)).bit_length() + 3
