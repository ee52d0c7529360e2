"""Rehydrate: restoring the freshest folded file reads, and the strict-shrink guard."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sessionstore._tokens import HeuristicTokenCounter, message_tokens
from sessionstore._tool_calls import file_read
from sessionstore.models import (
    AssistantMessage,
    BashExecutionMessage,
    Message,
    ToolResultMessage,
    UserMessage,
)
from sessionstore.strategies._passes import CLEARED_TOOL_RESULT, microcompact
from sessionstore.strategies._plan import Compress, split_history
from sessionstore.strategies._rehydrate import (
    RESTORED_FILE_PREFIX,
    RestoredFile,
    apply_rehydrate,
    rehydrate_recent_reads,
    restored_path,
)
from sessionstore.strategies._units import answered_calls
from tests.unit._histories import (
    DATASETS,
    ask,
    bash,
    call,
    lines,
    load_conversations,
    result,
    valid_histories,
)

PROPERTY = settings(derandomize=True, max_examples=100, deadline=None)


def read(call_id: str, path: str, body: str, *, error: bool = False) -> list[Message]:
    return [ask(call(call_id, "read_file", path=path)), result(call_id, body, error=error)]


def shell(call_id: str, command: str, body: str) -> list[Message]:
    return [ask(bash(call_id, command)), result(call_id, body, name="bash")]


def test_restores_the_freshest_reads_oldest_first() -> None:
    folded = [
        UserMessage(content="fix the parser"),
        *read("a", "src/a.py", "A v1"),
        *read("b", "src/b.py", "B"),
        *read("a2", "src/a.py", "A v2"),  # the same file read again: the fresher copy wins
        *shell("c", "sed -n '1,40p' src/c.py", "<returncode>0</returncode>\nC"),
    ]
    restored = rehydrate_recent_reads(folded, [UserMessage(content="go on")])
    assert [r.path for r in restored] == ["src/b.py", "src/a.py", "src/c.py"]
    assert [r.source for r in restored] == [4, 6, 8]
    first = restored[1].message
    assert first.text == f"{RESTORED_FILE_PREFIX} src/a.py\nA v2"
    assert restored_path(first) == "src/a.py"
    partial = restored[2].message.text
    assert partial.startswith(f"{RESTORED_FILE_PREFIX} src/c.py\nNote: this read showed only part")
    for item in restored:
        assert isinstance(item.message, UserMessage)
        assert item.tokens == message_tokens(item.message)
        assert not item.truncated


def test_never_restores_a_file_still_read_in_the_kept_messages() -> None:
    folded = [*read("a", "src/a.py", "A"), *read("b", "./src/b.py", "B")]
    kept: list[Message] = [
        ask(bash("k", "cat src/b.py")),  # the same file, written differently
        result("k", "B now"),
        UserMessage(content=f"{RESTORED_FILE_PREFIX} src/a.py\nA"),  # restored before
    ]
    assert rehydrate_recent_reads(folded, kept) == []
    assert [r.path for r in rehydrate_recent_reads(folded, kept[:2])] == ["src/a.py"]


def test_a_kept_read_that_a_pass_blanked_does_not_count_as_visible() -> None:
    folded = read("a", "src/a.py", "A")
    kept = [*read("k", "src/a.py", CLEARED_TOOL_RESULT), *read("e", "src/a.py", "", error=True)]
    assert [r.path for r in rehydrate_recent_reads(folded, kept)] == ["src/a.py"]


def test_skips_failed_empty_and_already_cleared_reads() -> None:
    folded = [
        *read("a", "a.py", "No such file", error=True),
        *shell("b", "cat b.py", "<returncode>1</returncode>\ncat: b.py: No such file"),
        *read("c", "c.py", "   "),
        *read("d", "d.py", CLEARED_TOOL_RESULT),
        *read("e", "e.py", "[read_file] read e.py (10 lines)"),
        *shell("f", "pytest", "passed"),  # not a file read
        result("ghost", "an orphan read"),
    ]
    assert rehydrate_recent_reads(folded, []) == []


def test_keeps_at_most_max_files_and_stops_at_the_budget() -> None:
    folded: list[Message] = []
    for i in range(8):
        folded += read(f"c{i}", f"f{i}.py", lines(100))  # about 200 tokens each
    five = rehydrate_recent_reads(folded, [])
    assert [r.path for r in five] == [f"f{i}.py" for i in range(3, 8)]
    two = rehydrate_recent_reads(folded, [], token_budget=500)
    assert [r.path for r in two] == ["f6.py", "f7.py"]
    assert sum(r.tokens for r in two) <= 500
    assert rehydrate_recent_reads(folded, [], max_files=0) == []


def test_always_restores_the_freshest_cut_to_fit() -> None:
    folded = [*read("a", "small.py", "tiny"), *read("b", "big.py", lines(5000))]
    restored = rehydrate_recent_reads(folded, [], token_budget=300)
    assert len(restored) == 1
    big = restored[0]
    assert (big.path, big.truncated) == ("big.py", True)
    assert big.tokens <= 300
    assert big.message.text.startswith(f"{RESTORED_FILE_PREFIX} big.py\nline 0\n")
    assert big.message.text.endswith("line 4999")
    assert "lines truncated ...]" in big.message.text


def test_counts_with_the_given_counter() -> None:
    class Doubling(HeuristicTokenCounter):
        def count_text(self, text: str) -> int:
            return 2 * super().count_text(text)

        def count_message(self, message: Message) -> int:
            return 2 * message_tokens(message)

    folded = read("b", "big.py", lines(5000))
    restored = rehydrate_recent_reads(folded, [], token_budget=300, counter=Doubling())
    assert restored[0].tokens <= 300
    assert restored[0].tokens == 2 * message_tokens(restored[0].message)


def test_notes_a_file_changed_after_it_was_read() -> None:
    folded = [
        *read("a", "a.py", "old a"),
        *shell("w", "sed -i 's/x/y/' a.py", "<returncode>0</returncode>"),
        *read("b", "b.py", "b"),
    ]
    kept: list[Message] = [ask(call("e", "edit_file", path="b.py")), result("e", "ok")]
    restored = {r.path: r for r in rehydrate_recent_reads(folded, kept)}
    assert restored["a.py"].edited_after
    assert restored["b.py"].edited_after
    assert "changed after this read" in restored["a.py"].message.text
    fresh = rehydrate_recent_reads(folded[2:], [])
    assert [(r.path, r.edited_after) for r in fresh] == [("b.py", False)]


def test_restores_a_file_the_user_printed_in_the_shell() -> None:
    folded: list[Message] = [
        BashExecutionMessage(command="cat notes.md", output="# Notes", exit_code=0),
        BashExecutionMessage(command="cat gone.md", output="missing", exit_code=1),
    ]
    restored = rehydrate_recent_reads(folded, [])
    assert [(r.path, r.source) for r in restored] == [("notes.md", 0)]
    kept = [BashExecutionMessage(command="cat notes.md", output="# Notes", exit_code=0)]
    assert rehydrate_recent_reads(folded, kept) == []


def test_restored_path_of_other_messages() -> None:
    assert restored_path(UserMessage(content="hello")) is None
    assert restored_path(UserMessage(content=RESTORED_FILE_PREFIX)) is None
    assert restored_path(AssistantMessage(content=f"{RESTORED_FILE_PREFIX} a.py")) is None


def test_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="max_files"):
        rehydrate_recent_reads([], [], max_files=-1)
    with pytest.raises(TypeError, match="token_budget"):
        rehydrate_recent_reads([], [], token_budget=1.5)  # type: ignore[arg-type]


# ── the strict-shrink guard ────────────────────────────────────────────────────


def restored_files(*tokens: int) -> list[RestoredFile]:
    return [
        RestoredFile(UserMessage(content=f"{RESTORED_FILE_PREFIX} f{i}"), i, f"f{i}", t)
        for i, t in enumerate(tokens)
    ]


def test_apply_rehydrate_keeps_the_freshest_that_still_shrink() -> None:
    files = restored_files(300, 200, 100)  # oldest first
    assert apply_rehydrate(1000, 2000, files) == files
    assert apply_rehydrate(1000, 1600, files) == files[1:]  # 1000+100+200 < 1600 <= +300
    assert apply_rehydrate(1000, 1300, files) == files[2:]  # 1000+100+200 = 1300 is not smaller
    assert apply_rehydrate(1000, 1100, files) == []
    assert apply_rehydrate(3000, 2000, files) == []
    assert apply_rehydrate(0, 10**6, []) == []


def test_apply_rehydrate_count_guard_of_the_seed() -> None:
    files = restored_files(1, 1, 1)
    # 4 compacted messages replacing 6: 4 + n < 6 allows one restored file.
    assert apply_rehydrate(10, 1000, files, compacted_count=4, original_count=6) == files[2:]
    assert apply_rehydrate(10, 1000, files, compacted_count=5, original_count=6) == []
    assert apply_rehydrate(10, 1000, files, compacted_count=1, original_count=60) == files


# ── properties ─────────────────────────────────────────────────────────────────


@PROPERTY
@given(
    history=valid_histories(),
    cut=st.floats(0, 1),
    max_files=st.integers(0, 6),
    budget=st.integers(0, 3000),
)
def test_restores_only_folded_reads_within_the_limits(
    history: list[Message], cut: float, max_files: int, budget: int
) -> None:
    split = int(len(history) * cut)
    folded, kept = history[:split], history[split:]
    restored = rehydrate_recent_reads(folded, kept, max_files=max_files, token_budget=budget)
    assert len(restored) <= max_files
    paths = [r.path for r in restored]
    assert len(set(paths)) == len(paths)
    assert [r.source for r in restored] == sorted(r.source for r in restored)
    if len(restored) > 1:
        assert sum(r.tokens for r in restored) <= budget
        assert not any(r.truncated for r in restored)
    # Reads in the kept messages that plainly show their file.
    kept_reads = {
        read.path
        for index, tool_call in answered_calls(kept).items()
        if (read := file_read(tool_call)) is not None
        and not (shown := kept[index]).is_error  # type: ignore[union-attr]
        and shown.text.strip()  # type: ignore[union-attr]
        and "<returncode>" not in shown.text  # type: ignore[union-attr]
    }
    for item in restored:
        assert item.path not in kept_reads
        assert restored_path(item.message) == item.path
        source = folded[item.source]
        assert isinstance(source, ToolResultMessage | BashExecutionMessage)
        if item.truncated:
            assert item.message.text.startswith(f"{RESTORED_FILE_PREFIX} {item.path}")
        else:
            body = source.text if isinstance(source, ToolResultMessage) else source.output
            assert item.message.text.endswith(body)


# ── real transcripts ───────────────────────────────────────────────────────────


@pytest.mark.parametrize("name", DATASETS)
def test_rehydrate_on_real_transcripts(dataset_dir: Path, name: str) -> None:
    restored_any = 0
    for history in load_conversations(dataset_dir, name, 5):
        total = sum(map(message_tokens, history))
        plan = split_history(history, tail_token_budget=total // 10)
        assert isinstance(plan, Compress)
        head, middle, tail = plan.split(history)
        restored = rehydrate_recent_reads(middle, tail)
        assert len(restored) <= 5
        assert sum(r.tokens for r in restored) <= 8000 or len(restored) == 1
        compacted = sum(map(message_tokens, head + tail)) + 500  # a 500-token summary
        guarded = apply_rehydrate(compacted, total, restored)
        assert compacted + sum(r.tokens for r in guarded) < total
        restored_any += len(guarded)
        # Reads blanked by microcompact have nothing left to restore.
        blanked = microcompact(history, keep_recent=1).messages
        again = rehydrate_recent_reads(blanked[plan.middle.start : plan.middle.stop], tail)
        assert len(again) <= len(restored)
    if name.startswith("mini_swe"):
        assert restored_any > 0
