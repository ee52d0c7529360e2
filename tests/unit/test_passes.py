"""The cheap passes: microcompact, prune_tool_results, head+tail truncation, reading tool calls."""

from __future__ import annotations

import doctest
import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sessionstore import _tool_calls
from sessionstore._tokens import HeuristicTokenCounter, estimate_tokens, message_tokens
from sessionstore._tool_calls import (
    file_read,
    is_read_command,
    shell_command,
    shell_exit_code,
    written_paths,
)
from sessionstore.models import (
    AssistantMessage,
    ImageContent,
    Message,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from sessionstore.strategies import _passes
from sessionstore.strategies._passes import (
    CLEARED_TOOL_RESULT,
    DUPLICATE_TOOL_RESULT,
    IMAGE_REMOVED,
    PassResult,
    is_pass_stub,
    microcompact,
    prune_tool_results,
    tool_result_stub,
    truncate_head_tail_tokens,
)
from tests.unit._histories import (
    DATASETS,
    PNG,
    ask,
    bash,
    call,
    check_pairs,
    lines,
    load_conversations,
    result,
    valid_histories,
)

PROPERTY = settings(derandomize=True, max_examples=120, deadline=None)


BODY = "file content " * 10


def reads(count: int, *, name: str = "read_file", body: str = BODY) -> list[Message]:
    """`count` read units, each reading its own file, oldest first."""
    messages: list[Message] = [UserMessage(content="look around")]
    for i in range(count):
        messages += [ask(call(f"c{i}", name, path=f"f{i}.py")), result(f"c{i}", f"{body} {i}")]
    return messages


def same_shape(before: list[Message], after: list[Message]) -> None:
    """The pass kept every message in its place, with its kind, call ids and result ids."""
    assert len(before) == len(after)
    for old, new in zip(before, after, strict=True):
        assert type(old) is type(new)
        if isinstance(old, ToolResultMessage):
            assert isinstance(new, ToolResultMessage)
            assert (new.tool_call_id, new.tool_name, new.is_error) == (
                old.tool_call_id,
                old.tool_name,
                old.is_error,
            )
        if isinstance(old, AssistantMessage):
            assert isinstance(new, AssistantMessage)
            assert [(c.id, c.name) for c in new.tool_calls] == [
                (c.id, c.name) for c in old.tool_calls
            ]


def untouched_except(before: list[Message], outcome: PassResult) -> None:
    for index, (old, new) in enumerate(zip(before, outcome.messages, strict=True)):
        if index in outcome.changed:
            assert new != old
        else:
            assert new is old


# ── microcompact ───────────────────────────────────────────────────────────────


def test_microcompact_clears_read_results_beyond_the_newest_six() -> None:
    history = reads(9)
    snapshot = [m.model_copy(deep=True) for m in history]
    outcome = microcompact(history)
    assert history == snapshot  # the input is not changed
    assert outcome.cleared == 3
    texts = [m.text for m in outcome.messages if isinstance(m, ToolResultMessage)]
    assert texts == [CLEARED_TOOL_RESULT] * 3 + [f"{BODY} {i}" for i in range(3, 9)]
    assert outcome.changed == (2, 4, 6)
    untouched_except(history, outcome)
    saved = sum(message_tokens(history[i]) - message_tokens(outcome.messages[i]) for i in (2, 4, 6))
    assert outcome.tokens_saved == saved


def test_microcompact_keeps_at_least_one_result() -> None:
    outcome = microcompact(reads(3), keep_recent=0)
    texts = [m.text for m in outcome.messages if isinstance(m, ToolResultMessage)]
    assert texts == [CLEARED_TOOL_RESULT, CLEARED_TOOL_RESULT, f"{BODY} 2"]


@pytest.mark.parametrize(
    ("command", "compactable"),
    [
        ("cat src/app.py", True),
        ("sed -n '10,20p' src/app.py", True),
        ("head -n 30 src/app.py", True),
        ("grep -rn 'def main' src", True),
        ("ls -la && find . -name '*.py'", True),
        ("cd /repo && nl -ba src/app.py | sed -n '1,80p'", True),
        ("git diff", True),
        ("pytest -x", False),
        ("sed -i 's/a/b/' src/app.py", False),
        ("cat src/app.py > copy.py", False),
        ("cat <<'EOF' > new.py\nprint(1)\nEOF", False),
        ("find . -name '*.pyc' -delete", False),
        ("echo $(rm -rf /)", False),
        ("git commit -am wip", False),
        ("echo done", False),
    ],
)
def test_microcompact_judges_shell_calls_by_their_command(command: str, compactable: bool) -> None:
    history: list[Message] = [UserMessage(content="go")]
    for i in range(2):
        history += [ask(bash(f"c{i}", command)), result(f"c{i}", f"{BODY} {i}", name="bash")]
    outcome = microcompact(history, keep_recent=1)
    assert outcome.cleared == (1 if compactable else 0)


def test_microcompact_leaves_other_tools_orphans_and_cleared_results_alone() -> None:
    history: list[Message] = [
        UserMessage(content="go"),
        ask(call("a", "get_user_details", user_id="u1")),
        result("a", BODY),
        result("ghost", BODY),  # answers no call
        ask(call("b", "read_file", path="x.py")),
        result("b", CLEARED_TOOL_RESULT),
        *reads(2)[1:],
    ]
    outcome = microcompact(history, keep_recent=1)
    assert outcome.changed == (7,)  # only the older of the two fresh reads
    assert outcome.messages[2] is history[2]
    assert outcome.messages[3] is history[3]
    # An already cleared result does not take one of the `keep_recent` places.
    assert microcompact(history, keep_recent=2).cleared == 0


def test_microcompact_names_are_compared_without_case_or_namespace() -> None:
    for name in ("Read", "mcp__fs__read_file", "functions.Grep", "WebFetch"):
        history = reads(2, name=name)
        assert microcompact(history, keep_recent=1).cleared == 1, name
    assert microcompact(reads(2, name="deploy"), keep_recent=1).cleared == 0
    custom = microcompact(reads(2, name="deploy"), keep_recent=1, tools={"Deploy"})
    assert custom.cleared == 1


def test_microcompact_replaces_images_in_a_cleared_result() -> None:
    history = [*reads(2)]
    history[2] = ToolResultMessage(tool_call_id="c0", content=[TextContent(text="a"), PNG])
    outcome = microcompact(history, keep_recent=1)
    cleared = outcome.messages[2]
    assert isinstance(cleared, ToolResultMessage)
    assert cleared.content == [TextContent(text=CLEARED_TOOL_RESULT)]
    assert outcome.tokens_saved == message_tokens(history[2]) - message_tokens(cleared) > 70


def test_microcompact_leaves_results_no_larger_than_the_marker() -> None:
    history = reads(3)
    history[2] = result("c0", "")
    outcome = microcompact(history, keep_recent=1)
    assert outcome.changed == (4,)
    assert outcome.messages[2] is history[2]


def test_microcompact_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="keep_recent"):
        microcompact([], keep_recent=-1)
    with pytest.raises(TypeError, match="keep_recent"):
        microcompact([], keep_recent=2.5)  # type: ignore[arg-type]


def test_microcompact_is_idempotent_and_counts_with_the_given_counter() -> None:
    class Doubling(HeuristicTokenCounter):
        def count_message(self, message: Message) -> int:
            return 2 * message_tokens(message)

    history = reads(8, body="x" * 400)
    once = microcompact(history, counter=Doubling())
    assert once.tokens_saved == 2 * microcompact(history).tokens_saved
    assert microcompact(once.messages).changed == ()


# ── stubs ──────────────────────────────────────────────────────────────────────


def test_bash_stub_names_the_command_the_exit_code_and_the_last_line() -> None:
    output = (
        "<returncode>1</returncode>\n<output>\n" + lines(43) + "\nE   AssertionError\n</output>"
    )
    stub = tool_result_stub(bash("c", "pytest -x"), result("c", output, name="bash"))
    assert stub == "[bash] ran `pytest -x` -> exit 1, 47 lines output; last line: E AssertionError"
    ok = tool_result_stub(bash("c", "pytest -x"), result("c", '{"exit_code": 0}\n1\n2'))
    assert ok == "[bash] ran `pytest -x` -> exit 0, 3 lines output"


def test_stub_of_a_failed_call_without_an_exit_code_says_error() -> None:
    stub = tool_result_stub(bash("c", "make"), result("c", "a\nb\nmake: *** Error 2", error=True))
    assert stub == "[bash] ran `make` -> error, 3 lines output; last line: make: *** Error 2"


def test_read_stub_names_the_path_and_the_line_count() -> None:
    stub = tool_result_stub(
        call("c", "read_file", path="src/app.py"), result("c", lines(120), name="read_file")
    )
    assert stub == "[read_file] read src/app.py (120 lines)"
    offset = tool_result_stub(
        call("c", "read_file", path="src/app.py", offset=40), result("c", lines(10))
    )
    assert offset == "[read_file] read src/app.py from line 40 (10 lines)"
    failed = tool_result_stub(
        call("c", "Read", file_path="x.py"), result("c", "no such", error=True)
    )
    assert failed == "[Read] read x.py -> error; last line: no such"


def test_generic_stub_shows_the_first_arguments_and_json_fields() -> None:
    stub = tool_result_stub(
        call("c", "search", query="needle " * 20, path="src", depth=3), result("c", lines(30))
    )
    assert (
        stub
        == "[search] query=needle needle needle needle needle ne... path=src -> 30 lines output"
    )
    booked = json.dumps({"reservation_id": "HATHAT", "user_id": "mia", "flights": [1, 2]})
    json_stub = tool_result_stub(
        call("c", "book_reservation", user_id="mia"), result("c", booked, name="book_reservation")
    )
    assert json_stub == (
        f"[book_reservation] user_id=mia -> {len(booked)} chars output: "
        "reservation_id=HATHAT, user_id=mia"
    )
    assert tool_result_stub(None, result("c", "a\nb")) == "[tool] -> 2 lines output"


def test_stubs_are_recognised_as_pass_output() -> None:
    assert is_pass_stub("[bash] ran `ls` -> exit 0, 3 lines output")
    assert is_pass_stub(CLEARED_TOOL_RESULT)
    assert is_pass_stub(DUPLICATE_TOOL_RESULT)
    assert not is_pass_stub('[{"id": 1}]')
    assert not is_pass_stub("[bash] ran\nsecond line")


# ── prune_tool_results ─────────────────────────────────────────────────────────


def long_run(count: int) -> list[Message]:
    messages: list[Message] = [UserMessage(content="fix the tests")]
    for i in range(count):
        output = f"<returncode>{i % 2}</returncode>\n" + lines(60, word=f"out{i}")
        messages += [ask(bash(f"c{i}", f"pytest -k t{i}")), result(f"c{i}", output, name="bash")]
    return messages


def test_prune_stubs_long_results_outside_the_protected_tail() -> None:
    history = long_run(6)  # 13 messages; the last 6 (3 units) are protected
    outcome = prune_tool_results(history)
    assert outcome.stubbed == 3
    assert outcome.changed == (2, 4, 6)
    first = outcome.messages[2]
    assert isinstance(first, ToolResultMessage)
    assert first.text == "[bash] ran `pytest -k t0` -> exit 0, 61 lines output"
    untouched_except(history, outcome)
    assert outcome.tokens_saved == sum(
        message_tokens(history[i]) - message_tokens(outcome.messages[i]) for i in (2, 4, 6)
    )
    check_pairs(outcome.messages)


def test_prune_protected_tail_widens_to_the_start_of_its_unit() -> None:
    history = long_run(4)  # protect_last_n=1 would start at the result at 8
    assert prune_tool_results(history, protect_last_n=1).changed == (2, 4, 6)
    assert prune_tool_results(history, protect_last_n=0).changed == (2, 4, 6, 8)


def test_prune_token_tail_protects_more_than_the_count_floor() -> None:
    history = long_run(6)
    tokens = [message_tokens(m) for m in history]
    outcome = prune_tool_results(history, protect_last_n=2, protect_tail_tokens=sum(tokens[5:]))
    assert outcome.changed == (2, 4)
    # The count is a floor: a tiny token budget still protects protect_last_n messages.
    floor = prune_tool_results(history, protect_last_n=4, protect_tail_tokens=1)
    assert floor.changed == (2, 4, 6, 8)


def test_prune_leaves_short_results_alone() -> None:
    history: list[Message] = [UserMessage(content="go"), ask(bash("c", "ls")), result("c", "x")]
    assert prune_tool_results(history, protect_last_n=0).changed == ()


def test_prune_dedups_identical_outputs_keeping_the_newest() -> None:
    body = lines(50)
    history: list[Message] = [UserMessage(content="go")]
    for i in range(3):
        history += [ask(call(f"c{i}", "read_file", path="a.py")), result(f"c{i}", body)]
    history += [ask(call("s", "read_file", path="b.py")), result("s", "short")]
    history += [ask(call("t", "read_file", path="b.py")), result("t", "short")]
    outcome = prune_tool_results(history, protect_last_n=100)
    assert outcome.deduped == 2
    assert [outcome.messages[i].text for i in (2, 4)] == [DUPLICATE_TOOL_RESULT] * 2  # type: ignore[union-attr]
    assert outcome.messages[6] is history[6]
    assert outcome.messages[8] is history[8]  # too short to be worth it
    assert prune_tool_results(history, protect_last_n=100, dedup=False).changed == ()


def test_prune_shrinks_long_arguments_keeping_valid_json() -> None:
    """Hermes #13574: arguments cut mid-string broke every later request."""
    content = 'print("héllo \\" world")\n' * 100
    big = call(
        "w", "write_file", path="src/app.py", content=content, meta={"notes": ["n" * 300, 3]}
    )
    history: list[Message] = [UserMessage(content="go"), ask(big), result("w", "ok")]
    history += [UserMessage(content=str(i)) for i in range(6)]
    outcome = prune_tool_results(history)
    assert outcome.arguments_shrunk == 1
    assistant = outcome.messages[1]
    assert isinstance(assistant, AssistantMessage)
    shrunk = assistant.tool_calls[0]
    parsed = json.loads(shrunk.arguments)
    assert list(parsed) == ["path", "content", "meta"]
    assert parsed["path"] == "src/app.py"
    assert parsed["content"] == content[:200] + f"...[truncated {len(content) - 200} chars]"
    assert parsed["meta"]["notes"][0].startswith("n" * 200 + "...[truncated 100 chars]")
    assert parsed["meta"]["notes"][1] == 3
    assert (shrunk.id, shrunk.name) == ("w", "write_file")


def test_prune_leaves_invalid_or_protected_arguments_as_written() -> None:
    broken = ToolCall(id="w", name="write_file", arguments='{"content": "' + "x" * 900)
    history: list[Message] = [ask(broken), result("w", "ok")]
    assert prune_tool_results(history, protect_last_n=0).arguments_shrunk == 0
    fine = call("v", "write_file", content="x" * 900)
    assert prune_tool_results([ask(fine), result("v", "ok")]).arguments_shrunk == 0


def test_prune_drops_images_beyond_the_newest_n() -> None:
    history: list[Message] = [
        UserMessage(content=[TextContent(text="see"), PNG, PNG]),
        AssistantMessage(content=[PNG, TextContent(text="and this")]),
        UserMessage(content=[PNG]),
    ]
    outcome = prune_tool_results(history, keep_images=2)
    assert outcome.images_dropped == 2
    first = outcome.messages[0]
    assert isinstance(first, UserMessage)
    removed = TextContent(text=IMAGE_REMOVED)
    assert first.content == [TextContent(text="see"), removed, removed]
    assert outcome.messages[1] is history[1]
    assert outcome.messages[2] is history[2]
    every = prune_tool_results(history, keep_images=0)
    assert every.images_dropped == 4
    assert not any(
        isinstance(block, ImageContent)
        for message in every.messages
        for block in message.content  # type: ignore[union-attr]
    )


def test_prune_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="keep_images"):
        prune_tool_results([], keep_images=-1)
    with pytest.raises(ValueError, match="protect_tail_tokens"):
        prune_tool_results([], protect_tail_tokens=-5)
    with pytest.raises(TypeError, match="protect_last_n"):
        prune_tool_results([], protect_last_n=True)


# ── truncation ─────────────────────────────────────────────────────────────────


def test_truncate_head_tail_tokens_keeps_first_and_last_lines() -> None:
    text = lines(1000)
    cut = truncate_head_tail_tokens(text, 200)
    assert estimate_tokens(cut) <= 200
    assert cut.startswith("line 0\nline 1\n")
    assert cut.endswith("line 998\nline 999")
    assert "lines truncated ...]" in cut
    assert truncate_head_tail_tokens(text, 10_000) is text


def test_truncate_head_tail_tokens_cuts_characters_of_one_huge_line() -> None:
    text = json.dumps({"rows": list(range(3000))})
    cut = truncate_head_tail_tokens(text, 100)
    assert estimate_tokens(cut) <= 100
    assert cut.startswith('{"rows": [0, 1')
    assert cut.endswith("2999]}")
    assert "characters truncated ...]" in cut
    assert truncate_head_tail_tokens(text, 3) == ""


@PROPERTY
@given(text=st.text(max_size=3000) | st.integers(0, 500).map(lines), budget=st.integers(0, 400))
def test_truncate_head_tail_tokens_always_fits(text: str, budget: int) -> None:
    counter = HeuristicTokenCounter()
    cut = truncate_head_tail_tokens(text, budget, counter=counter)
    assert counter.count_text(cut) <= budget
    if estimate_tokens(text) <= budget:
        assert cut is text


# ── reading tool calls ─────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    ("command", "path", "partial"),
    [
        ("cat src/app.py", "src/app.py", False),
        ("cat -n ./src/../src/app.py", "src/app.py", False),
        ("sed -n '10,20p' src/app.py", "src/app.py", True),
        ("nl -ba django/db.py | sed -n '1,80p'", "django/db.py", True),
        ("head -n 50 tests/t.py", "tests/t.py", True),
        ("cd /repo && cat setup.cfg 2>&1", "setup.cfg", False),
        ("tail -n 5 a.log | head -2", "a.log", True),
        ("cat a.py b.py", None, None),
        ("cat src/*.py", None, None),
        ("nl -ba a.py | grep foo", None, None),
        ("sed 's/a/b/' a.py", None, None),
        ("sed -n '/def/p' a.py", None, None),
        ("cat a.py > b.py", None, None),
        ("python a.py", None, None),
        ("cat 'unbalanced", None, None),
    ],
)
def test_file_read_of_shell_views(command: str, path: str | None, partial: bool | None) -> None:
    found = file_read(bash("c", command))
    if path is None:
        assert found is None
    else:
        assert found is not None
        assert (found.path, found.partial) == (path, partial)


def test_file_read_of_read_tools_and_editors() -> None:
    assert file_read(call("c", "Read", file_path="/a/b.py")) == _tool_calls.FileRead(
        "/a/b.py", False
    )
    ranged = file_read(call("c", "read_file", path="b.py", offset=10, limit=5))
    assert ranged == _tool_calls.FileRead("b.py", True)
    viewer = call("c", "str_replace_editor", command="view", path="/r/x.py")
    assert file_read(viewer) == _tool_calls.FileRead("/r/x.py", False)
    assert file_read(call("c", "str_replace_editor", command="create", path="/r/x.py")) is None
    assert file_read(call("c", "read_file")) is None
    assert file_read(ToolCall(id="c", name="read_file", arguments="not json")) is None


def test_written_paths_of_edits_and_shell_writes() -> None:
    assert written_paths(call("c", "edit_file", path="a.py")) == {"a.py"}
    assert written_paths(call("c", "str_replace_editor", command="str_replace", path="a.py")) == {
        "a.py"
    }
    assert written_paths(call("c", "str_replace_editor", command="view", path="a.py")) == set()
    assert written_paths(bash("c", "sed -i 's/a/b/' x.py y.py")) == {"x.py", "y.py"}
    assert written_paths(bash("c", "sed -i -e 's/a/b/' x.py")) == {"x.py"}
    assert written_paths(bash("c", "cat <<'EOF' > new.py\nx > y\nEOF")) == {"new.py"}
    assert written_paths(bash("c", "echo hi | tee -a log.txt >/dev/null")) == {"log.txt"}
    assert written_paths(bash("c", "cat a.py")) == set()
    assert written_paths(call("c", "search", query="x")) == set()


def test_shell_command_and_exit_code() -> None:
    assert shell_command(call("c", "exec_command", cmd=["bash", "-lc", "cat x"])) == "cat x"
    assert shell_command(call("c", "shell", command=["ls", "-la", "my dir"])) == "ls -la 'my dir'"
    assert shell_command(call("c", "read_file", command="cat x")) is None
    assert shell_command(ToolCall(id="c", name="bash", arguments="[1]")) is None
    assert shell_exit_code("Process exited with exit code 2") == 2
    assert shell_exit_code("no code here") is None
    assert is_read_command("") is False


def test_the_module_examples_run() -> None:
    for module in (_passes, _tool_calls):
        outcome = doctest.testmod(module)
        assert outcome.failed == 0
    assert doctest.testmod(_passes).attempted > 0


# ── properties ─────────────────────────────────────────────────────────────────


@PROPERTY
@given(history=valid_histories(), keep=st.integers(0, 8))
def test_microcompact_keeps_every_message_in_its_place(history: list[Message], keep: int) -> None:
    outcome = microcompact(history, keep_recent=keep)
    same_shape(history, outcome.messages)
    check_pairs(outcome.messages)
    untouched_except(history, outcome)
    assert outcome.cleared == len(outcome.changed)
    assert outcome.tokens_saved >= 0
    assert microcompact(outcome.messages, keep_recent=keep).changed == ()


@PROPERTY
@given(
    history=valid_histories(),
    protect=st.integers(0, 10),
    tail_tokens=st.none() | st.integers(0, 3000),
    keep_images=st.integers(0, 3),
)
def test_prune_keeps_every_message_in_its_place(
    history: list[Message], protect: int, tail_tokens: int | None, keep_images: int
) -> None:
    outcome = prune_tool_results(
        history, protect_last_n=protect, protect_tail_tokens=tail_tokens, keep_images=keep_images
    )
    same_shape(history, outcome.messages)
    check_pairs(outcome.messages)
    untouched_except(history, outcome)
    for index in outcome.changed:
        assert message_tokens(outcome.messages[index]) <= message_tokens(history[index])
    for message in outcome.messages:
        if isinstance(message, AssistantMessage):
            for tool_call in message.tool_calls:
                json.loads(tool_call.arguments)  # still valid JSON
    images = sum(
        isinstance(block, ImageContent)
        for message in outcome.messages
        for block in getattr(message, "content", [])
    )
    assert images <= keep_images
    again = prune_tool_results(
        outcome.messages,
        protect_last_n=protect,
        protect_tail_tokens=tail_tokens,
        keep_images=keep_images,
    )
    assert again.changed == ()


# ── real transcripts ───────────────────────────────────────────────────────────


@pytest.mark.parametrize("name", DATASETS)
def test_microcompact_shrinks_real_transcripts(dataset_dir: Path, name: str) -> None:
    conversations = load_conversations(dataset_dir, name, 4)
    saved = 0
    for history in conversations:
        outcome = microcompact(history)
        same_shape(history, outcome.messages)
        check_pairs(outcome.messages)
        saved += outcome.tokens_saved
    if name.startswith("mini_swe"):
        assert saved > 0  # a shell agent's reads are judged by their commands


@pytest.mark.parametrize("name", DATASETS)
def test_prune_shrinks_real_transcripts(dataset_dir: Path, name: str) -> None:
    for history in load_conversations(dataset_dir, name, 4):
        before = sum(map(message_tokens, history))
        outcome = prune_tool_results(microcompact(history).messages)
        same_shape(history, outcome.messages)
        check_pairs(outcome.messages)
        after = sum(map(message_tokens, outcome.messages))
        assert after < before
        assert outcome.stubbed > 0
        stubs = [
            m.text
            for i, m in enumerate(outcome.messages)
            if i in outcome.changed and isinstance(m, ToolResultMessage)
        ]
        assert all(is_pass_stub(text) for text in stubs)


def test_the_docs_example_runs() -> None:
    page = Path(__file__).resolve().parents[2] / "docs" / "concepts" / "passes.md"
    (code,) = re.findall(r"```python\n(.*?)```", page.read_text(), flags=re.DOTALL)
    exec(compile(code, str(page), "exec"), {})


# ── squeezing tool output ──────────────────────────────────────────────────────


def test_squeeze_output_tallies_progress_marks_and_folds_repeats() -> None:
    from sessionstore.strategies._passes import squeeze_output

    dots = "." * 300 + "F" + "s" * 20
    cloning = ["Cloning test database for alias 'other'..."] * 6
    tail = ["-" * 70, "FAILED tests/test_a.py::test_b", "1 failed, 300 passed"]
    text = "\n".join(["collected 321 items", dots, *cloning, *tail])
    squeezed = squeeze_output(text)
    assert "[progress marks: passed 300, skipped 20, failed 1]" in squeezed
    assert squeezed.count("Cloning test database") == 1
    assert "[the line above repeated 5 more times]" in squeezed
    assert "-" * 9 not in squeezed
    assert squeezed.endswith("FAILED tests/test_a.py::test_b\n1 failed, 300 passed")
    plain = "\n".join(f"line {i}" for i in range(100))
    assert squeeze_output(plain) is plain


LONG_OUTPUT_WARNING = (
    "<warning>\nThe output of your last command was too long.\n"
    "Please try a different command that produces less output.\n"
    "If you're looking at a file you can try use head, tail or sed to view a smaller "
    "number of lines selectively.\n</warning>"
)


def test_squeeze_output_keeps_the_first_line_of_a_long_outputs_warning() -> None:
    from sessionstore.strategies._passes import squeeze_output

    head = "\n".join(f"collected line {i}" for i in range(20))
    text = (
        f"<returncode>1</returncode>\n{LONG_OUTPUT_WARNING}<output_head>\n{head}\n"
        "</output_head>\n<elided_chars>\n5400 characters elided\n</elided_chars>\n"
        "<output_tail>\nValueError: bad\n</output_tail>"
    )
    squeezed = squeeze_output(text)
    assert "<warning>\nThe output of your last command was too long.</warning>" in squeezed
    assert "Please try a different command" not in squeezed
    assert head in squeezed
    assert squeezed.endswith("ValueError: bad\n</output_tail>")
    # A warning tag in an ordinary output is the command's own words.
    own = "<warning>\nkeep\nthese lines\n</warning>\n" + "\n".join(f"l{i}" for i in range(60))
    assert squeeze_output(own) is own


def test_shorten_output_keeps_head_and_tail_within_the_budget() -> None:
    from sessionstore.strategies._passes import shorten_output

    lines = "\n".join(f"{i}: output line" for i in range(400))
    result = ToolResultMessage(tool_call_id="c1", tool_name="bash", content=lines)
    short = shorten_output(result, 120)
    assert isinstance(short, ToolResultMessage)
    assert message_tokens(short) <= 120
    assert short.text.startswith("0: output line")
    assert short.text.endswith("399: output line")
    assert "lines truncated" in short.text
    assert shorten_output(result, None) is result  # nothing to squeeze
    user = UserMessage(content=lines)
    assert shorten_output(user, 10) is user
