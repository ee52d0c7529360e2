"""ExtractiveSummarizer: the working state a digest records, harness by harness.

The task (never a demonstration, never a harness's format complaint), the files and
symbols changed with what changed, the last test command with its result line, the
error lines still unresolved, the values the latest turns use, the final diff, the
mutating actions; and no facts that are not facts (self-questions of an autonomous
agent, placeholders of the instructions' examples, questions as decisions).
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sessionstore._tokens import estimate_tokens
from sessionstore.formats import from_openai
from sessionstore.formats._jsonl import parse_conversation_line
from sessionstore.models import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from sessionstore.strategies import truncate_head_tail
from sessionstore.summarizers import ExtractiveSummarizer, SummaryRequest, _run_output
from sessionstore.summarizers._code import diff_hunks
from sessionstore.summarizers._fit import fit_handoff
from sessionstore.summarizers._handoff import CONTINUED, NO_TASK, parse_handoff
from sessionstore.summarizers._patch import read_patch
from sessionstore.summarizers._task_cut import _cut_lines, cut_task

BUDGET = 3_000


def digest(messages: list[Message], **options: Any) -> str:
    options.setdefault("budget_tokens", BUDGET)
    request = SummaryRequest(messages=messages, **options)
    return asyncio.run(ExtractiveSummarizer().summarize(request)).text


def section(text: str, heading: str) -> str:
    match = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    return match.group(1).strip() if match else ""


def call(call_id: str, name: str, **arguments: Any) -> AssistantMessage:
    return AssistantMessage(content=[ToolCall(id=call_id, name=name, arguments=arguments)])


def said_and_called(text: str, call_id: str, name: str, **arguments: Any) -> AssistantMessage:
    return AssistantMessage(
        content=[
            {"type": "text", "text": text},
            ToolCall(id=call_id, name=name, arguments=arguments),
        ]
    )


def result(call_id: str, text: str, *, name: str = "bash") -> ToolResultMessage:
    return ToolResultMessage(tool_call_id=call_id, tool_name=name, content=text)


def swe(call_id: str, command: str) -> AssistantMessage:
    """A SWE-agent turn: the tool is named after the command's first word."""
    return call(call_id, command.split()[0], command=command + "\n")


def observation(text: str, open_file: str = "n/a") -> str:
    return f"{text}\n(Open file: {open_file})\n(Current directory: /repo)\nbash-$"


FIELDS = "/repo/src/marshmallow/fields.py"
RELATIVE_FIELDS = "src/marshmallow/fields.py"
"""How a digest names the open file: relative to the harness's directory (`/repo`)."""
WINDOW = observation(
    f"[File: {FIELDS} (1997 lines total)]\n(1460 more lines above)\n"
    "1461:class TimeDelta(Field):\n"
    '1462:    """A field that (de)serializes a timedelta."""\n'
    "1463:\n"
    "1464:    def _serialize(self, value, attr, obj, **kwargs):\n"
    "1465:        if value is None:\n"
    "1466:            return None\n"
    "1467:        base_unit = dt.timedelta(**{self.precision: 1})\n"
    "1468:        return int(value.total_seconds() / base_unit.total_seconds())\n"
    "(529 more lines below)",
    FIELDS,
)


def swe_agent_run() -> list[Message]:
    return [
        SystemMessage(content="SETTING: You are an autonomous programmer."),
        UserMessage(
            content="Here is a demonstration of how to correctly accomplish this task.\n"
            "--- DEMONSTRATION ---\nWe're currently solving the following issue: "
            "`ExampleWidget` breaks in demo_module.py\n--- END OF DEMONSTRATION ---\n"
        ),
        UserMessage(
            content="We're currently solving the following issue within our repository. "
            "Here's the issue text:\nISSUE:\nTimeDelta serialization precision is off by one "
            "in `TimeDelta._serialize`.\n\nINSTRUCTIONS:\nNow, you're going to solve this "
            "issue on your own. Example: `export MY_ENV_VAR=1` in /path/to/working/dir."
        ),
        said_and_called(
            "Let's open the field. Why does it round down?",
            "c1",
            "open",
            command=f"open {FIELDS} 1468\n",
        ),
        result("c1", WINDOW, name="open"),
        swe(
            "c2",
            "edit 1468:1468\n"
            "        return int(round(value.total_seconds() / base_unit.total_seconds()))\n"
            "end_of_edit",
        ),
        result("c2", WINDOW.replace("return int(value", "return int(round(value"), name="edit"),
        swe("c3", "javac Reproduce.java"),
        result("c3", observation("/bin/bash: line 1: javac: command not found", FIELDS)),
        swe("c4", "python reproduce.py"),
        result("c4", observation("345", FIELDS)),
    ]


# ── the task ───────────────────────────────────────────────────────────────────


def test_a_demonstration_is_not_the_task_nor_a_source_of_facts() -> None:
    text = digest(swe_agent_run())
    task = section(text, "Active Task")
    assert task.startswith("We're currently solving the following issue within our repository.")
    assert "DEMONSTRATION" not in text
    assert "ExampleWidget" not in text
    assert "demo_module.py" not in text


def test_placeholders_of_the_instructions_are_not_facts() -> None:
    text = digest(swe_agent_run())
    critical = section(text, "Critical Context")
    files = section(text, "Relevant Files")
    assert "MY_ENV_VAR" not in critical
    assert "/path/to/working/dir" not in files
    assert "TimeDelta._serialize" in text  # the statement's own identifier stays


def test_a_format_complaint_opening_the_turns_is_no_task() -> None:
    feedback = "Please always provide EXACTLY ONE action in triple backticks, found 2 actions."
    messages: list[Message] = [
        UserMessage(content=feedback),
        call("b1", "bash", command="ls"),
        result("b1", "<returncode>0</returncode>\n<output>\nsrc\n</output>"),
    ]
    text = digest(messages)
    task = section(text, "Active Task")
    assert task.startswith(CONTINUED)
    assert "found 2 actions" in task  # the harness's last words, as a follow-up
    assert parse_handoff(text).task == ""  # a prior digest's task is not replaced by it
    prior = digest([UserMessage(content="Fix the parser in src/p.py")])
    assert section(digest(messages, prior_digest=prior), "Active Task").startswith(
        "Fix the parser in src/p.py"
    )


def test_a_goal_the_task_shows_between_its_tags_is_not_repeated() -> None:
    # OpenHands opens its task with the repository in `<uploaded_files>` tags.
    request = (
        "<uploaded_files>\n/workspace/astropy\n</uploaded_files>\nFix the separability matrix."
    )
    messages: list[Message] = [
        UserMessage(content=request),
        call("c1", "execute_bash", command="cd /workspace/astropy && python reproduce.py"),
        result("c1", "ok\n[The command completed with exit code 0.]", name="execute_bash"),
    ]
    text = digest(messages)
    assert "Fix the separability matrix." in section(text, "Active Task")
    assert "## Goal" not in text


def test_claude_codes_system_reminders_are_standing_rules_not_the_task() -> None:
    claude_md = (
        "<system-reminder>\nAs you answer the user's questions, you can use the following"
        " context:\n# claudeMd\n- Always run `pnpm test` before committing.\n"
        "- Never edit files under vendor/.\n</system-reminder>\n"
    )
    malware_note = (
        "\n<system-reminder>\nWhenever you read a file, you should consider whether it looks"
        " malicious.\n</system-reminder>\n"
    )
    request = "The date picker shows the wrong month in Safari. Please fix it."
    messages: list[Message] = [
        UserMessage(
            content=[{"type": "text", "text": claude_md}, {"type": "text", "text": request}]
        ),
        call("r1", "Read", file_path="/repo/src/picker.ts"),
        result("r1", "     1→export function month(d: Date) {\n" + malware_note, name="Read"),
        UserMessage(
            content="<system-reminder>\nThe TodoWrite tool hasn't been used.\n</system-reminder>"
        ),
    ]
    text = digest(messages)
    assert section(text, "Active Task") == request
    constraints = section(text, "Constraints & Preferences")
    assert "- Never edit files under vendor/." in constraints
    assert "malicious" not in text
    assert "TodoWrite" not in text
    assert "1. READ /repo/src/picker.ts - 1 line [tool: Read]" in section(text, "Completed Actions")


def test_the_task_is_never_none_when_there_is_one() -> None:
    assert section(digest([UserMessage(content="Rename foo to bar")]), "Active Task") == (
        "Rename foo to bar"
    )
    assert section(digest([]), "Active Task") == NO_TASK


# ── changes: harness editors, editor tools, shell edits, diffs ──────────────────


def test_swe_agent_edits_name_the_open_file_the_symbol_and_the_new_line() -> None:
    text = digest(swe_agent_run())
    state = section(text, "Active State")
    assert (
        f"- Changed {RELATIVE_FIELDS} in TimeDelta._serialize at line 1468: "
        "return int(round(value.total_seconds() / base_unit.total_seconds()))"
    ) in state
    actions = section(text, "Completed Actions")
    assert (
        f"EDITED {RELATIVE_FIELDS} edit 1468:1468 return int(round(value.total_seconds() / "
        "base_unit.total_seconds())) end_of_edit - ok [tool: edit]"
    ) in actions
    assert f"- {FIELDS} (edited)" in section(text, "Relevant Files")


def test_swe_agent_create_opens_the_file_for_the_next_edit() -> None:
    header = "[File: /repo/reproduce.py (1 lines total)]"
    messages: list[Message] = [
        UserMessage(content="Reproduce the bug."),
        swe("c1", "create reproduce.py"),
        result("c1", observation(f"{header}\n1:", "/repo/reproduce.py")),
        swe("c2", "edit 1:1\nprint(parse('x'))\nend_of_edit"),
        result("c2", observation(f"{header}\n1:print(parse('x'))", "/repo/reproduce.py")),
    ]
    state = section(digest(messages), "Active State")
    # Named relative to the harness's current directory (`/repo`), as the agent names it.
    assert "- Changed reproduce.py at line 1: print(parse('x'))" in state


def test_swe_agent_edits_between_cursors_name_the_open_file_and_the_new_line() -> None:
    """The interface variant with `set_cursors N M`, then `edit` and the new text."""
    messages: list[Message] = [
        UserMessage(content="Fix the rounding of TimeDelta."),
        swe("c1", f"open {FIELDS} 1468"),
        result("c1", WINDOW, name="open"),
        swe("c2", "set_cursors 1468 1468"),
        result("c2", WINDOW, name="set_cursors"),
        swe("c3", "edit\n        return int(round(value.total_seconds()))\nend_of_edit"),
        result("c3", observation("File updated.", FIELDS), name="edit"),
    ]
    text = digest(messages)
    state = section(text, "Active State")
    assert f"- Changed {RELATIVE_FIELDS}: return int(round(value.total_seconds()))" in state
    assert f"EDITED {RELATIVE_FIELDS} edit" in section(text, "Completed Actions")
    assert "RAN set_cursors" not in text
    assert "RAN edit" not in text


def test_editor_tool_edits_find_their_symbol_in_the_snippet() -> None:
    snippet = (
        "The file /repo/app/io.py has been edited. Here's the result of running `cat -n` on "
        "a snippet of /repo/app/io.py:\n"
        "    10\tclass Reader:\n"
        "    11\t    def parse_header(self, raw):\n"
        "    12\t        if not raw:\n"
        "    13\t            return None\n"
        "Review the changes and make sure they are as expected."
    )
    messages: list[Message] = [
        UserMessage(content="Handle empty headers in app/io.py"),
        call(
            "e1",
            "str_replace_editor",
            command="str_replace",
            path="/repo/app/io.py",
            old_str="        return raw.split()",
            new_str="        if not raw:\n            return None\n        return raw.split()",
        ),
        result("e1", snippet, name="str_replace_editor"),
    ]
    state = section(digest(messages), "Active State")
    assert "- Changed /repo/app/io.py in Reader.parse_header at line 12: if not raw:" in state


def test_an_editor_tools_old_text_locates_its_edit_in_the_lines_read_before() -> None:
    # Claude Code's tools: `Read` numbers its lines with an arrow, `Edit` names the old
    # text it replaces and answers with no snippet.
    path = "/repo/src/exporter/csv_out.py"
    listing = "    42→def export_csv(rows, path):\n    43→    with open(path, 'w') as f:\n"
    old, new = "    with open(path, 'w') as f:", "    with open(path, 'w', newline='') as f:"
    messages: list[Message] = [
        UserMessage(content="The CSV exporter drops rows with unicode names"),
        call("r1", "Read", file_path=path),
        result("r1", listing, name="Read"),
        call("e1", "Edit", file_path=path, old_string=old, new_string=new),
        result("e1", f"The file {path} has been updated.", name="Edit"),
    ]
    assert (
        f"- Changed {path} in export_csv at line 43: with open(path, 'w', newline='') as f:"
        in section(digest(messages), "Active State")
    )


def test_sed_edits_locate_their_line_in_a_numbered_view() -> None:
    listing = (
        "<returncode>0</returncode>\n<output>\n"
        + "\n".join(
            [
                "    40\tdef cull(self, cursor):",
                "    41\t    cursor.execute(sql)",
                "    42\t    row = cursor.fetchone()[0]",
            ]
        )
        + "\n</output>"
    )
    messages: list[Message] = [
        UserMessage(content="Fix the crash in cache/db.py"),
        call("s1", "bash", command="nl -ba cache/db.py | sed -n '40,42p'"),
        result("s1", listing),
        call(
            "s2",
            "bash",
            command="sed -i 's/row = cursor.fetchone()\\[0\\]/row = cursor.fetchone()/' "
            "cache/db.py",
        ),
        result("s2", "<returncode>0</returncode>\n<output>\n</output>"),
    ]
    state = section(digest(messages), "Active State")
    assert "- Changed cache/db.py in cull at line 42: row = cursor.fetchone()" in state


def test_scripts_that_write_files_and_applied_patches_are_changes() -> None:
    script = (
        "python3 - <<'EOF'\nfile_path = 'pkg/core.py'\nwith open(file_path) as f:\n"
        "    text = f.read()\nwith open(file_path, 'w') as f:\n    f.write(text)\nEOF"
    )
    patch = (
        "git apply <<'EOF'\ndiff --git a/pkg/util.py b/pkg/util.py\n--- a/pkg/util.py\n"
        "+++ b/pkg/util.py\n@@ -10,3 +10,4 @@ def normalize(value):\n     x = 1\n"
        "+    value = value.strip()\n     return value\nEOF"
    )
    messages: list[Message] = [
        UserMessage(content="Fix it"),
        call("p1", "bash", command=script),
        result("p1", "<returncode>0</returncode>\n<output>\n</output>"),
        call("p2", "bash", command=patch),
        result("p2", "<returncode>0</returncode>\n<output>\n</output>"),
    ]
    text = digest(messages)
    assert "- pkg/core.py (written)" in section(text, "Relevant Files")
    assert "- Changed pkg/util.py in normalize at line 10: value = value.strip()" in section(
        text, "Active State"
    )


def submitted(task: str, diff: str) -> str:
    """The Active State of a run that submits with mini-swe-agent's command, which prints `diff`."""
    submit = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git add -A && git diff --cached"
    messages: list[Message] = [
        UserMessage(content=task),
        call("d1", "bash", command=submit),
        result("d1", diff),
    ]
    return section(digest(messages), "Active State")


def test_the_final_diff_gives_changed_lines_and_symbols() -> None:
    diff = (
        "diff --git a/django/utils/numberformat.py b/django/utils/numberformat.py\n"
        "index 88b35fc435..08f8e0310a 100644\n"
        "--- a/django/utils/numberformat.py\n+++ b/django/utils/numberformat.py\n"
        "@@ -30,6 +30,8 @@ def format(number, decimal_sep, decimal_pos=None):\n"
        "         _, digits, exponent = number.as_tuple()\n"
        "-        if abs(exponent) > 200:\n"
        "+        if decimal_pos is not None and abs(exponent) > 200:\n"
        "+            number = Decimal('0')\n"
    )
    state = submitted("Fix small decimals in numberformat", diff)
    assert (
        "- Changed django/utils/numberformat.py in format at line 30: "
        "if decimal_pos is not None and abs(exponent) > 200:"
    ) in state
    assert "- Diff django/utils/numberformat.py: -if abs(exponent) > 200:" in state
    assert "- Diff django/utils/numberformat.py: +number = Decimal('0')" in state


def test_the_final_diff_shows_every_file_before_one_files_many_hunks() -> None:
    # A sorted AUTHORS file reorders many lines: its hunks came first and filled the
    # diff's lines before the source change the diff also holds.
    authors = "".join(
        f"@@ -{10 * i},2 +{10 * i},2 @@\n-Name {i}\n+Name {i + 1}\n" for i in range(1, 12)
    )
    diff = (
        "diff --git a/AUTHORS b/AUTHORS\n--- a/AUTHORS\n+++ b/AUTHORS\n"
        f"{authors}"
        "diff --git a/src/marks.py b/src/marks.py\n--- a/src/marks.py\n+++ b/src/marks.py\n"
        "@@ -358,3 +358,4 @@ def get_unpacked_marks(obj):\n"
        "-    mark_list = getattr(obj, 'pytestmark', [])\n"
        "+    mark_list = [m for cls in obj.__mro__ for m in getattr(cls, '_marks', [])]\n"
    )
    state = submitted("Consider the MRO when obtaining marks", diff)
    diff_lines = [line for line in state.split("\n") if line.startswith("- Diff ")]
    assert "- Diff src/marks.py: -mark_list = getattr(obj, 'pytestmark', [])" in diff_lines
    assert any(
        line.startswith("- Diff src/marks.py: +mark_list = [m for cls") for line in diff_lines
    )
    assert "- Diff AUTHORS: -Name 1" in diff_lines
    assert len(diff_lines) == 16  # MAX_DIFF_LINES: the rest of AUTHORS fills what is left


PATCH = (
    "*** Begin Patch\n*** Update File: src/app/io.py\n@@ def read_config(path):\n"
    "-    return json.load(open(path))\n+    with open(path) as handle:\n"
    "+        return json.load(handle)\n*** Add File: tests/test_io.py\n"
    "+def test_read_config(tmp_path):\n+    assert True\n*** Delete File: scratch.py\n"
    "*** End Patch"
)


def test_read_patch_gives_the_files_and_a_diff_of_an_apply_patch_envelope() -> None:
    moved = "*** Begin Patch\n*** Update File: a.py\n*** Move to: b.py\n x = 1\n-y = 2\n+y = 3\n"
    patch = read_patch(moved)
    assert patch is not None
    assert patch.files == [("a.py", "edited"), ("b.py", "written")]
    (hunk,) = diff_hunks(patch.diff)
    assert (hunk.path, hunk.added, hunk.removed) == ("b.py", ["y = 3"], ["y = 2"])
    patch = read_patch(PATCH)
    assert patch is not None
    assert patch.verb == "EDITED"
    assert patch.files == [
        ("src/app/io.py", "edited"),
        ("tests/test_io.py", "created"),
        ("scratch.py", "deleted"),
    ]
    hunks = diff_hunks(patch.diff)
    assert [(h.path, h.context) for h in hunks] == [
        ("src/app/io.py", "def read_config(path):"),
        ("tests/test_io.py", ""),
    ]
    assert read_patch("no envelope here") is None


@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        ("apply_patch", {"input": PATCH}),  # the tool's whole input
        ("shell", {"command": ["bash", "-lc", f"apply_patch <<'EOF'\n{PATCH}\nEOF"]}),
    ],
)
def test_an_apply_patch_edit_names_its_files_symbols_and_changed_lines(
    name: str, arguments: dict[str, Any]
) -> None:
    messages: list[Message] = [
        UserMessage(content="Close the file read_config leaks"),
        call("p1", name, **arguments),
        result("p1", "Success. Updated the following files:\nM src/app/io.py", name=name),
        call("t1", "shell", command=["bash", "-lc", "pytest -q tests/test_io.py"]),
        result("t1", "1 passed in 0.01s", name="shell"),
    ]
    text = digest(messages)
    state = section(text, "Active State")
    assert "- Changed src/app/io.py in read_config: with open(path) as handle:" in state
    assert "- Changed tests/test_io.py: def test_read_config(tmp_path):" in state
    assert "- Diff src/app/io.py: -return json.load(open(path))" in state
    # A shell's `bash -lc SCRIPT` is the script it runs.
    assert "- Last test run: pytest -q tests/test_io.py -> 1 passed in 0.01s" in state
    files = section(text, "Relevant Files")
    assert "- src/app/io.py (edited)" in files
    assert "- tests/test_io.py (created)" in files
    assert "- scratch.py (deleted)" in files
    assert "1. EDITED src/app/io.py, tests/test_io.py, scratch.py" in section(
        text, "Completed Actions"
    ) or "1. EDITED apply_patch src/app/io.py, tests/test_io.py, scratch.py" in section(
        text, "Completed Actions"
    )


# ── runs: statuses, tests, errors ──────────────────────────────────────────────


def test_statuses_come_from_the_output() -> None:
    text = digest(swe_agent_run())
    actions = section(text, "Completed Actions")
    assert "TESTED javac Reproduce.java - /bin/bash: line 1: javac: command not found" in actions
    assert "javac Reproduce.java - ok" not in actions
    assert "javac: command not found" in section(text, "Blocked")
    assert "RAN python reproduce.py - printed: 345" in actions


def test_the_last_test_command_keeps_its_result_line() -> None:
    output = (
        "<returncode>1</returncode>\n<output>\nFAILED tests/test_x.py::test_a - KeyError: 1\n"
        "========= 1 failed, 3 passed in 0.42s =========\n</output>"
    )
    messages: list[Message] = [
        UserMessage(content="Make tests/test_x.py pass"),
        call("t1", "bash", command="python -m pytest tests/test_y.py"),
        result("t1", "<returncode>0</returncode>\n<output>\n2 passed in 0.1s\n</output>"),
        call("t2", "bash", command="python -m pytest tests/test_x.py"),
        result("t2", output),
    ]
    state = section(digest(messages), "Active State")
    assert "- Last test run: python -m pytest tests/test_x.py -> 1 failed, 3 passed in 0.42s" in (
        state
    )
    # The run of another test command before it stays, below it, as the earlier one.
    assert "- Earlier test run: python -m pytest tests/test_y.py -> 2 passed in 0.1s" in state
    # Running the first command again makes it the last, the other one the earlier.
    again = [*messages, call("t3", "bash", command="python -m pytest tests/test_y.py")]
    again.append(result("t3", "<returncode>0</returncode>\n<output>\n2 passed in 0.2s\n</output>"))
    state = section(digest(again), "Active State")
    assert "- Last test run: python -m pytest tests/test_y.py -> 2 passed in 0.2s" in state
    assert "- Earlier test run: python -m pytest tests/test_x.py -> 1 failed, 3 passed" in state
    assert state.count("test run:") == 2


def test_an_update_keeps_the_older_last_test_run_of_another_command_as_the_earlier() -> None:
    def run(call_id: str, command: str, printed: str) -> list[Message]:
        output = f"<returncode>0</returncode>\n<output>\n{printed}\n</output>"
        return [call(call_id, "bash", command=command), result(call_id, output)]

    first = digest(
        [UserMessage(content="Fix the cycles"), *run("r1", "python test_repro.py", "list: [1, 0]")]
    )
    assert section(first, "Active State") == "- Last test run: python test_repro.py -> list: [1, 0]"
    suite = "python bin/test sympy/combinatorics"
    later = digest(
        run("r2", suite, "== tests finished: 9 passed, in 0.17 seconds =="), prior_digest=first
    )
    state = section(later, "Active State")
    assert f"- Last test run: {suite} -> tests finished: 9 passed, in 0.17 seconds" in state
    assert "- Earlier test run: python test_repro.py -> list: [1, 0]" in state
    # The same command again replaces the last run and keeps the earlier one.
    again = digest(run("r3", suite, "tests finished: 8 passed, 1 failed"), prior_digest=later)
    state = section(again, "Active State")
    assert f"- Last test run: {suite} -> tests finished: 8 passed, 1 failed" in state
    assert "- Earlier test run: python test_repro.py -> list: [1, 0]" in state
    assert state.count("test run:") == 2
    # The earlier command run again is the last, and the other one the earlier.
    back = digest(run("r4", "python test_repro.py", "list: [0, 1]"), prior_digest=again)
    state = section(back, "Active State")
    assert "- Last test run: python test_repro.py -> list: [0, 1]" in state
    assert f"- Earlier test run: {suite} -> tests finished: 8 passed, 1 failed" in state
    assert state.count("test run:") == 2


def test_a_shell_result_in_codexs_json_envelope_gives_its_exit_code_and_lines() -> None:
    printed = (
        "F\nE   AssertionError: assert 1 == 2\n"
        "FAILED tests/test_x.py::test_a - AssertionError\n1 failed in 0.05s\n"
    )
    envelope = json.dumps(
        {"output": printed, "metadata": {"exit_code": 1, "duration_seconds": 0.4}}
    )
    messages: list[Message] = [
        UserMessage(content="Make tests/test_x.py pass"),
        call("t1", "shell", command=["bash", "-lc", "pytest -q tests/test_x.py"], workdir="/repo"),
        result("t1", envelope, name="shell"),
    ]
    text = digest(messages)
    assert "1. TESTED pytest -q tests/test_x.py - exit 1, 1 failed [tool: shell]" in section(
        text, "Completed Actions"
    )
    assert "- Last test run: pytest -q tests/test_x.py -> 1 failed in 0.05s" in section(
        text, "Active State"
    )
    blocked = section(text, "Blocked")
    assert "- E   AssertionError: assert 1 == 2" in blocked
    assert "- FAILED tests/test_x.py::test_a - AssertionError" in blocked


def test_an_exit_code_in_a_header_line_is_read_before_a_long_output() -> None:
    # Codex's `exec_command` heads its result with the exit code, then the output.
    printed = "".join(f"collecting item {i}\n" for i in range(300))
    output = (
        "Chunk ID: 3f2a\nWall time: 0.51 seconds\nProcess exited with code 2\n"
        f"Output:\n{printed}ERROR: file or directory not found: tests/test_y.py\n"
    )
    messages: list[Message] = [
        UserMessage(content="Make tests/test_y.py pass"),
        call("t1", "exec_command", cmd="pytest -q tests/test_y.py"),
        result("t1", output, name="exec_command"),
    ]
    text = digest(messages)
    assert "1. TESTED pytest -q tests/test_y.py - exit 2" in section(text, "Completed Actions")
    assert "ERROR: file or directory not found: tests/test_y.py" in section(text, "Blocked")


def test_a_failure_a_later_clean_run_resolved_is_no_longer_open() -> None:
    failing = "<returncode>1</returncode>\n<output>\nTraceback (most recent call last):\n" + (
        "  File \"run.py\", line 3, in <module>\nNameError: name 'x' is not defined\n</output>"
    )
    messages: list[Message] = [
        UserMessage(content="Fix run.py"),
        call("r1", "bash", command="python run.py"),
        result("r1", failing),
        call("r2", "bash", command="sed -i 's/x/1/' run.py"),
        result("r2", "<returncode>0</returncode>\n<output>\n</output>"),
        call("r3", "bash", command="python run.py"),
        result("r3", "<returncode>0</returncode>\n<output>\nok\n</output>"),
    ]
    blocked = section(digest(messages), "Blocked").splitlines()
    assert blocked == [
        "- resolved by action 3: action 1 failed (exit 1): "
        "File \"run.py\", line 3, in <module> | NameError: name 'x' is not defined"
    ]
    # Trimming takes resolved failures before anything else of the working state.
    tight = digest(messages, budget_tokens=60)
    assert "NameError" not in tight


def test_errors_still_open_keep_their_exact_lines_and_types() -> None:
    failing = "<returncode>1</returncode>\n<output>\nTraceback (most recent call last):\n" + (
        "  File \"/repo/m.py\", line 9, in load\nKeyError: 'name'\n</output>"
    )
    messages: list[Message] = [
        UserMessage(content="Fix m.py"),
        call("k1", "bash", command="python m.py"),
        result("k1", failing),
    ]
    blocked = section(digest(messages), "Blocked")
    assert "KeyError: 'name'" in blocked
    assert 'File "/repo/m.py", line 9, in load' in blocked


def test_a_traceback_cut_in_its_middle_still_ends_at_its_exception() -> None:
    frames = "".join(f'  File "/repo/f{i}.py", line {i}, in f\n    g()\n' for i in range(30))
    output = f"Traceback (most recent call last):\n{frames}ZeroDivisionError: division by zero"
    cut = truncate_head_tail(f"<returncode>1</returncode>\n<output>\n{output}\n</output>", 20)
    assert "lines truncated ...]" in cut
    messages: list[Message] = [
        UserMessage(content="Fix f.py"),
        call("z1", "bash", command="python f.py"),
        result("z1", cut),
    ]
    blocked = section(digest(messages), "Blocked")
    # The marker a cut left in the traceback is not its exception line.
    assert "truncated" not in blocked
    assert 'File "/repo/f29.py", line 29, in f' in blocked
    assert "ZeroDivisionError: division by zero" in blocked


# ── values, mutating actions ───────────────────────────────────────────────────


def flights(*numbers: str) -> str:
    return json.dumps([{"flight_number": n, "price": 100} for n in numbers])


def airline_run() -> list[Message]:
    return [
        UserMessage(content="Change my reservation ZFA04Y to a later flight. I'm mia_li_3668."),
        call("a1", "get_user_details", user_id="mia_li_3668"),
        result(
            "a1",
            json.dumps({"user_id": "mia_li_3668", "payment_methods": {"credit_card_4421486": {}}}),
            name="get_user_details",
        ),
        call("a2", "search_direct_flight", origin="JFK", destination="SEA", date="2024-05-20"),
        result("a2", flights("HAT001", "HAT002", "HAT003"), name="search_direct_flight"),
        call("a3", "search_direct_flight", origin="JFK", destination="SEA", date="2024-05-21"),
        result("a3", flights("HAT104", "HAT105"), name="search_direct_flight"),
        call(
            "a4",
            "update_reservation_flights",
            reservation_id="ZFA04Y",
            flight_number="HAT105",
            payment_id="credit_card_4421486",
        ),
        result("a4", json.dumps({"reservation_id": "ZFA04Y", "status": "ok"})),
        AssistantMessage(content="Your reservation ZFA04Y is now on HAT105. Anything else?"),
    ]


def test_values_are_those_the_latest_turns_use() -> None:
    text = digest(airline_run())
    for value in ("ZFA04Y", "mia_li_3668", "credit_card_4421486", "HAT105", "HAT104"):
        assert value in text
    critical = section(text, "Critical Context")
    for value in ("HAT001", "HAT002", "HAT003"):  # an earlier search's results
        assert value not in critical
    # Once the actions fold, the values the latest turns used are still there.
    tight = digest(airline_run(), budget_tokens=120)
    for value in ("ZFA04Y", "HAT105"):
        assert value in tight


def test_mutating_actions_keep_their_arguments_and_outcome_when_others_fold() -> None:
    messages = airline_run()
    for index in range(12):
        messages += [
            call(f"g{index}", "get_flight_status", flight_number=f"HAT{200 + index}"),
            result(f"g{index}", json.dumps({"status": "on time"})),
        ]
    text = digest(messages, budget_tokens=260)
    actions = section(text, "Completed Actions")
    assert "UPDATED reservation flights (reservation_id=ZFA04Y, flight_number=HAT105" in actions
    assert "(earlier: " in actions


# ── facts that are not facts ───────────────────────────────────────────────────


def test_an_autonomous_agents_self_questions_are_not_waiting_for_a_user() -> None:
    text = digest(swe_agent_run())
    assert "Waiting for the user's answer" not in text
    assert "Why does it round down?" not in section(text, "Key Decisions")


def test_a_question_to_a_real_user_is_pending() -> None:
    text = digest(airline_run())
    assert "Waiting for the user's answer: Anything else?" in section(text, "In Progress")


def test_key_decisions_hold_no_questions() -> None:
    messages: list[Message] = [
        UserMessage(content="Speed up the loader"),
        AssistantMessage(
            content="Should I cache because it is slow? I decided to cache the index."
        ),
    ]
    decisions = section(digest(messages), "Key Decisions")
    assert decisions == "- I decided to cache the index."


# ── trimming keeps the working state last ──────────────────────────────────────


def test_tight_budgets_keep_task_open_errors_last_test_and_changes_last() -> None:
    messages = [*swe_agent_run()]
    messages += [
        call("t9", "bash", command="python -m pytest tests/test_fields.py"),
        result(
            "t9",
            "<returncode>1</returncode>\n<output>\nE   AssertionError: 344 != 345\n"
            "1 failed in 0.2s\n</output>",
        ),
    ]
    for index in range(15):
        messages += [
            call(f"r{index}", "bash", command=f"grep -rn helper{index} src/"),
            result(f"r{index}", f"<returncode>0</returncode>\n<output>\nsrc/m{index}.py:1:x\n"),
        ]
    full = digest(messages)
    assert "src/m3.py" not in full  # only the newest paths an output named are kept
    doc = parse_handoff(full)
    for budget in (300, 200):
        text = fit_handoff(doc, budget)
        assert estimate_tokens(text) <= budget
        assert section(text, "Active Task").startswith("We're currently solving")
        assert "AssertionError: 344 != 345" in text
        assert "Last test run: python -m pytest tests/test_fields.py -> 1 failed in 0.2s" in text
        assert f"Changed {RELATIVE_FIELDS} in TimeDelta._serialize" in text
        assert "grep -rn helper3" not in text  # the reads folded first


def test_the_working_state_survives_an_iterative_update() -> None:
    first = digest(swe_agent_run())
    later: list[Message] = [
        call("n1", "bash", command="python -m pytest tests/"),
        result("n1", "<returncode>0</returncode>\n<output>\n5 passed in 0.3s\n</output>"),
    ]
    state = section(digest(later, prior_digest=first), "Active State")
    assert f"Changed {RELATIVE_FIELDS} in TimeDelta._serialize" in state
    assert "- Last test run: python -m pytest tests/ -> 5 passed in 0.3s" in state
    assert state.count("Last test run") == 1


def test_the_last_test_run_of_a_script_written_first_is_the_command_that_runs_it() -> None:
    command = (
        "cat <<'EOF' > test_decimal_pos_0.py\nfrom decimal import Decimal\n"
        "print(Decimal('1e-200'))\nEOF\npython3 test_decimal_pos_0.py | tail -5"
    )
    messages: list[Message] = [
        UserMessage(content="Fix small decimals in numberformat"),
        call("t1", "bash", command=command),
        result("t1", "<returncode>0</returncode>\n<output>\n1 passed in 0.1s\n</output>"),
    ]
    text = digest(messages)
    assert "- Last test run: python3 test_decimal_pos_0.py | tail -5 -> 1 passed in 0.1s" in (
        section(text, "Active State")
    )
    # The action keeps the command as typed: what the heredoc wrote is said there.
    assert "cat <<'EOF' > test_decimal_pos_0.py" in section(text, "Completed Actions")


def test_an_update_drops_the_changes_of_files_removed_since() -> None:
    first = digest(
        [
            UserMessage(content="Fix the marks"),
            call("w1", "bash", command="cat <<'EOF' > reproduce.py\nclass Base: pass\nEOF"),
            result("w1", "<returncode>0</returncode>\n<output>\n</output>"),
        ]
    )
    assert "Changed reproduce.py" in section(first, "Active State")
    later: list[Message] = [
        call("r1", "bash", command="rm reproduce.py"),
        result("r1", "<returncode>0</returncode>\n<output>\n</output>"),
    ]
    text = digest(later, prior_digest=first)
    assert "reproduce.py" not in section(text, "Active State")
    assert "- reproduce.py (deleted)" in section(text, "Relevant Files")


def test_an_update_drops_the_questions_the_user_has_answered_since() -> None:
    first = digest(
        [
            UserMessage(content="I want to book a flight to Chicago."),
            AssistantMessage(content="Which card would you like to use for the remaining $60?"),
        ]
    )
    assert "Waiting for the user's answer: Which card" in section(first, "In Progress")
    answered = digest(
        [
            UserMessage(content="I'll use the Visa ending in 6437."),
            AssistantMessage(content="Booked."),
        ],
        prior_digest=first,
    )
    assert "Which card" not in section(answered, "In Progress")
    # Turns where the user said nothing leave the question open.
    unanswered = digest(
        [call("s1", "search_flights", origin="EWR"), result("s1", "HAT056", name="search_flights")],
        prior_digest=first,
    )
    assert "Waiting for the user's answer: Which card" in section(unanswered, "In Progress")


def test_an_update_resolving_failed_test_runs_keeps_what_one_digest_would() -> None:
    """The newest resolved failure keeps its last error lines, an older one its assertion."""
    lint, run = "python tests/lint.py", "python tests/runtests.py app"
    lint_failed = (
        "<returncode>1</returncode>\n<output>\nFAIL: test_style (lint.Case)\n"
        "AssertionError: line too long\n\nFAILED (failures=1)\n</output>"
    )
    failed = (
        "<returncode>1</returncode>\n<output>\nFAIL: test_sum (app.tests.Case)\n"
        "AssertionError: 4003 != 300\n\nRan 12 tests in 0.1s\n\nFAILED (failures=1)\n</output>"
    )
    clean = "<returncode>0</returncode>\n<output>\nRan 12 tests\n\nOK\n</output>"
    failing: list[Message] = [
        UserMessage(content="Fix the totals in app/report.py."),
        call("t0", "bash", command=lint),
        result("t0", lint_failed),
        call("t1", "bash", command=run),
        result("t1", failed),
    ]
    first = digest(failing)
    assert "FAILED (failures=1)" in section(first, "Blocked")
    fixing: list[Message] = [
        call("t2", "bash", command=lint),
        result("t2", clean),
        call("t3", "bash", command=run),
        result("t3", clean),
    ]
    later = digest(fixing, prior_digest=first)
    expected = (
        "- resolved by action 3: action 1 failed (exit 1): AssertionError: line too long\n"
        "- resolved by action 4: action 2 failed (exit 1): FAIL: test_sum (app.tests.Case) | "
        "AssertionError: 4003 != 300 | FAILED (failures=1)"
    )
    assert section(later, "Blocked") == expected
    # One digest of all the turns says the same.
    assert section(digest([*failing, *fixing]), "Blocked") == expected


def test_an_update_marks_an_older_failure_a_newer_clean_run_resolved() -> None:
    book = {"user_id": "omar_rossi_1241", "origin": "EWR", "destination": "ORD"}
    failed = "Error: not enough balance in payment method gift_card_8190333"
    first = digest(
        [
            UserMessage(content="Book me EWR to ORD on the 25th."),
            call("b1", "book_reservation", **book),
            result("b1", failed, name="book_reservation"),
        ]
    )
    assert section(first, "Blocked") == f"- action 1 failed:\n- {failed}"
    booked = json.dumps({"reservation_id": "HATHAT", "status": "confirmed"})
    later = digest(
        [
            UserMessage(content="Use my Visa for the rest."),
            call("b2", "book_reservation", **book),
            result("b2", booked, name="book_reservation"),
        ],
        prior_digest=first,
    )
    assert section(later, "Blocked") == f"- resolved by action 2: action 1 failed: {failed}"
    # Another call in the newer turns resolves nothing.
    other = digest(
        [
            call("g1", "get_user_details", user_id="omar_rossi_1241"),
            result("g1", json.dumps({"user_id": "omar_rossi_1241"}), name="get_user_details"),
        ],
        prior_digest=first,
    )
    assert section(other, "Blocked") == f"- action 1 failed:\n- {failed}"


# ── the real transcripts ───────────────────────────────────────────────────────

DATASETS = sorted(
    [
        "mini_swe_agent_gemini3pro_swebench_verified.jsonl",
        "swe_agent_demonstrations.jsonl",
        "tau_bench_gpt4o_airline.jsonl",
    ]
)


def _first_request(messages: list[dict[str, Any]]) -> str | None:
    for message in messages:
        content = message.get("content") or ""
        if message["role"] == "user" and content.strip() and "DEMONSTRATION" not in content:
            return " ".join(content.split())
    return None


@pytest.mark.parametrize("name", DATASETS)
def test_every_digest_of_the_real_transcripts_holds_a_task(dataset_dir: Path, name: str) -> None:
    """Each loop's digest, updating the one before as the session digest does, has a task;
    the first one's is the first real request (never the demonstration, never None)."""
    path = dataset_dir / name
    if not path.exists():
        pytest.skip(f"{name} is not in the dataset")
    summarizer = ExtractiveSummarizer()
    problems: list[str] = []
    for line in path.read_bytes().splitlines():
        raw = json.loads(line)
        conversation = parse_conversation_line(line)
        request = _first_request(raw["messages"])
        prior: str | None = None
        for number, loop in enumerate(conversation.loops):
            for budget in (300, 1_500):
                text = asyncio.run(
                    summarizer.summarize(
                        SummaryRequest(messages=loop, prior_digest=prior, budget_tokens=budget)
                    )
                ).text
                task = section(text, "Active Task")
                if task == NO_TASK or not task:
                    problems.append(f"{raw['id']} loop {number} at {budget}: no task")
                if "DEMONSTRATION" in task:
                    problems.append(f"{raw['id']} loop {number}: the demonstration as task")
            prior = text
        assert prior is not None
        opening = " ".join(section(prior, "Active Task").split())[:60]
        goal = " ".join(section(prior, "Goal").split())
        if request is not None and not (
            request.startswith(opening.rstrip("…")) or request[:60] in " ".join(prior.split())
        ):
            problems.append(f"{raw['id']}: not the first request: {opening!r} {goal[:60]!r}")
    assert problems == []


def test_from_openai_keeps_what_the_dataset_test_reads() -> None:
    messages = from_openai([{"role": "user", "content": "hi"}])
    assert isinstance(messages[0], UserMessage)


def test_written_files_name_what_they_define() -> None:
    script = "cat <<'EOF' > test_cull.py\nimport os\n\ndef test_cull():\n    pass\nEOF"
    messages: list[Message] = [
        UserMessage(content="Fix culling"),
        call("w1", "bash", command=script),
        result("w1", "<returncode>0</returncode>\n<output>\n</output>"),
    ]
    state = section(digest(messages), "Active State")
    assert "- Changed test_cull.py (defines test_cull)" in state
    later: list[Message] = [
        call("w2", "bash", command="rm test_cull.py"),
        result("w2", "<returncode>0</returncode>\n<output>\n</output>"),
    ]
    assert "test_cull" not in section(digest([*messages, *later]), "Active State")


def test_java_edits_name_their_method() -> None:
    path = "/repo/src/main/java/org/demo/Parser.java"
    view = observation(
        f"[File: {path} (80 lines total)]\n"
        "10:public class Parser {\n"
        "11:    String parse(String raw) {\n"
        "12:        if (raw == null) {\n"
        "13:            return null;\n"
        "14:        }\n",
        path,
    )
    messages: list[Message] = [
        UserMessage(content="Parser.parse must accept empty input"),
        swe("j1", f"open {path} 12"),
        result("j1", view, name="open"),
        swe("j2", "edit 12:12\n        if (raw == null || raw.isEmpty()) {\nend_of_edit"),
        result("j2", view, name="edit"),
        swe("j3", "mvn -q test"),
        result(
            "j3",
            observation("[ERROR] Tests run: 4, Failures: 1, Errors: 0, Skipped: 0\nBUILD FAILURE"),
        ),
    ]
    text = digest(messages)
    state = section(text, "Active State")
    relative = path.removeprefix("/repo/")  # the harness's directory
    changed = f"- Changed {relative} in Parser.parse at line 12: if (raw == null || raw.isEmpty())"
    assert changed in state
    assert (
        "- Last test run: mvn -q test -> Tests run: 4, Failures: 1, Errors: 0, Skipped: 0" in state
    )
    assert "BUILD FAILURE" in section(text, "Blocked")


def test_a_user_asking_for_a_format_is_a_request() -> None:
    text = digest([UserMessage(content="Please format your response as a table of flights.")])
    assert section(text, "Active Task") == "Please format your response as a table of flights."


def test_a_cut_task_loses_the_instructions_examples_first_and_their_end_last() -> None:
    statement = (
        "<pr_description>\nThe parser drops the `Content-Length` header.\n</pr_description>\n"
    )
    instructions = (
        "<instructions>\n## Rules\nYou MUST include exactly one command.\n"
        + "## Examples\n"
        + "".join(f"export MY_ENV_VAR_{i}=value{i}\n" for i in range(120))
        + "## Submission\nRun `echo COMPLETE_TASK_AND_SUBMIT && git diff --cached` to submit.\n"
        "</instructions>"
    )
    messages: list[Message] = [UserMessage(content=statement + instructions)]
    for index in range(6):
        messages += [
            call(f"x{index}", "bash", command=f"cat src/m{index}.py"),
            result(f"x{index}", "<returncode>0</returncode>\n<output>\nx\n</output>"),
        ]
    task = parse_handoff(digest(messages, budget_tokens=300)).task
    assert "The parser drops the `Content-Length` header." in task
    assert "echo COMPLETE_TASK_AND_SUBMIT && git diff --cached" in task
    assert "MY_ENV_VAR_60" not in task
    assert "MY_ENV_VAR" not in section(digest(messages), "Critical Context")


STANDING = (
    "<instructions>\n# Task Instructions\n\n## Overview\n"
    "You're a software engineer interacting with a computer by submitting commands.\n"
    + "".join(f"Background sentence {i} about how the environment behaves.\n" for i in range(30))
    + "\n## Important Boundaries\n- MODIFY: source files in /testbed\n"
    "- DO NOT MODIFY: Tests, configuration files (pyproject.toml, setup.cfg, etc.)\n\n"
    "Format your responses like this:\n\n<format_example>\nTHOUGHT: why\n"
    "```bash\nyour_command_here\n```\n</format_example>\n\n"
    "## Useful Command Examples\n### Edit files with sed:\n```bash\n"
    + "".join(f"sed -i 's/old_string_{i}/new_string/' filename.py\n" for i in range(30))
    + "```\n\n"
    "## Submission\nWhen you are done, issue exactly the following command:\n"
    "```bash\necho COMPLETE_TASK_AND_SUBMIT && git add -A && git diff --cached\n```\n"
    "</instructions>"
)
STATEMENT = "<pr_description>\nThe parser drops the `Content-Length` header.\n</pr_description>\n"


def test_a_cut_task_keeps_the_rules_of_its_instructions_and_drops_their_examples_first() -> None:
    task = STATEMENT + STANDING
    shortened = cut_task(task, 1_500)
    assert len(task) - len(shortened) >= 1_500
    assert shortened.startswith(STATEMENT)
    rule = "- DO NOT MODIFY: Tests, configuration files (pyproject.toml, setup.cfg, etc.)"
    assert rule in shortened
    assert "## Important Boundaries" in shortened  # the heading over a rule stays with it
    assert "old_string_" not in shortened
    assert "your_command_here" not in shortened
    assert "echo COMPLETE_TASK_AND_SUBMIT && git add -A && git diff --cached" in shortened
    assert "[…]" in shortened
    # Cut harder, the prose goes before the rules.
    harder = cut_task(task, len(STANDING) - 600)
    assert "Background sentence 5 " not in harder
    assert "- DO NOT MODIFY: Tests" in harder


def test_instructions_cut_to_their_end_keep_their_prohibitions_but_not_over_the_task() -> None:
    rule = "- DO NOT MODIFY: Tests, configuration files (pyproject.toml, setup.cfg, etc.)"
    long_statement = STATEMENT.replace(
        "</pr_description>",
        "Steps to reproduce: " + "send a request; " * 80 + "\n</pr_description>",
    )
    task = long_statement + STANDING
    submit = "echo COMPLETE_TASK_AND_SUBMIT && git add -A && git diff --cached"
    # More than cutting every line but the first would give: only the end stays, and the
    # prohibition, while the statement's opening is not cut for it.
    for remove in (len(STANDING) - 250, len(STANDING) + 100):
        cut = cut_task(task, remove)
        # As much as asked, but for the marker of a cut statement's middle.
        assert len(task) - len(cut) >= remove - len("\n[… 9999 characters cut …]\n")
        assert "characters of the harness's standing instructions cut" in cut
        assert rule in cut
        assert submit in cut
        assert cut.startswith(long_statement[:300])
        assert "Background sentence" not in cut
    # A short statement is not cut into for the rule: the rule goes.
    short = cut_task(STATEMENT + STANDING, len(STANDING) + 20)
    assert rule not in short
    assert "The parser drops" in short


def test_a_cut_task_shortens_its_long_rules_before_it_cuts_any_words() -> None:
    rule = "=" * 80
    run = f"{rule} test session starts {rule}\ncollected 1 item\n{rule} 1 xfailed in 0.07s {rule}"
    task = f"Skipping is broken:\n```\n{run}\n```\nExpected the test to fail.\n"
    cut = cut_task(task, 100)
    assert len(task) - len(cut) >= 100
    assert cut == task.replace(rule, "=" * 8)
    assert cut_task(task, 0) is task


def test_a_harness_complaint_goes_before_any_of_the_task() -> None:
    statement = "<pr_description>\nThe parser drops the `Content-Length` header.\n</pr_description>"
    complaint = (
        'Later the user said: "Please always provide EXACTLY ONE action in triple backticks, '
        'found 2 actions. Please format your action in triple backticks."'
    )
    reply = 'Later the user said: "Use the staging database."'
    task = f"{statement}\n{reply}\n{complaint}"
    cut = cut_task(task, 40)
    assert cut == f"{statement}\n{reply}"
    # Cut harder, the statement is cut before the user's own reply, never for the complaint.
    harder = cut_task(task, len(complaint) + 30)
    assert "EXACTLY ONE" not in harder
    assert harder.endswith(reply)
    assert harder.startswith("<pr_description>\nThe parser")


def test_a_cut_task_is_never_longer_than_the_task() -> None:
    """A cut of a few characters would add a marker longer than what it saves."""
    request = "Could you help me change my most recent reservation to the cheapest business fare?"
    task = f'{request}\nLater the user said: "My user id is mia_li_3668."'
    for remove in range(1, len(task) + 40):
        assert len(cut_task(task, remove)) <= len(task), remove
    assert len(cut_task(task, 4)) < len(task)


def test_a_task_cut_to_little_keeps_the_opening_of_the_latest_reply() -> None:
    request = "I wanted to use the larger certificate to cover part of the cost of my flight."
    replies = [
        'Later the user said: "Could you confirm the amount charged to my card, please?"',
        'Later the user said: "In that case, please go ahead and book it with my credit card."',
    ]
    task = "\n".join([request, *replies])
    for left in (40, 60):
        cut = cut_task(task, len(task) - left)
        assert len(cut) <= left + 8  # the count is close; the fitter measures what it sends
        # No count of what was cut, and no few words of each part around markers.
        assert "characters cut" not in cut
        assert cut.startswith("[…]\n")
        assert cut.endswith("…")
        assert replies[-1].startswith(cut.removeprefix("[…]\n").removesuffix("…"))
    # With more left, the user's latest words stay whole.
    roomy = cut_task(task, len(request) + 10)
    assert replies[-1] in roomy


def test_how_to_submit_goes_before_the_statement_is_cut_into_its_opening() -> None:
    opening = "<pr_description>\nThe parser drops the `Content-Length` header " + "x" * 300
    statement = opening + " when a request is chunked.\n</pr_description>\n"
    task = statement + STANDING
    submit = "echo COMPLETE_TASK_AND_SUBMIT && git add -A && git diff --cached"
    # Cut to the instructions' end, the statement keeps its opening and its end too.
    gentle = cut_task(task, len(STANDING) - 250)
    assert submit in gentle
    assert gentle.startswith(statement.rstrip("\n"))
    # Cut harder, the end of the instructions goes before the statement is cut: it is
    # not long enough to lose its middle and keep its opening.
    hard = cut_task(task, len(STANDING) - 100)
    assert submit not in hard
    assert "- DO NOT MODIFY: Tests" not in hard
    assert hard.startswith(statement.rstrip("\n"))
    assert f"[… {len(STANDING)} characters of the harness's standing instructions cut …]" in hard
    assert len(task) - len(hard) >= len(STANDING) - 100
    # Harder still, the statement loses its middle.
    hardest = cut_task(task, len(STANDING) + 20)
    assert hardest.startswith(opening[:200])
    assert "characters cut …]\nxxx" in hardest


_RULES = [f"- You must never touch file_{i}.cfg." for i in range(8)]
_PROSE = [f"Some background about step {i} of the workflow." for i in range(8)]
_LINES = st.sampled_from(
    [
        *_RULES,
        *_PROSE,
        "## A heading",
        "```bash\nls -la\n```",
        "<example_response>\nTHOUGHT: x\n</example_response>",
        "",
    ]
)


@given(st.lists(_LINES, min_size=1, max_size=40), st.integers(min_value=1, max_value=2_000))
def test_standing_instructions_lose_a_rule_only_once_their_prose_is_gone(
    lines: list[str], remove: int
) -> None:
    body = "<instructions>\n" + "\n".join(lines) + "\n"
    cut_body = _cut_lines(body, remove)
    if cut_body is None:  # not enough to cut but the first line: the caller cuts it all
        return
    assert len(body) - len(cut_body) >= remove
    assert cut_body.startswith("<instructions>\n")
    kept = cut_body.splitlines()
    if any(rule in lines and rule not in kept for rule in _RULES):
        assert not any(line in kept for line in _PROSE)
        assert "ls -la" not in cut_body
        assert "THOUGHT: x" not in cut_body


def test_a_statement_cut_after_its_instructions_leaves_their_marker_whole(
    dataset_dir: Path,
) -> None:
    """Every task of the dataset, cut by any amount: no marker is cut through.

    Once a SWE-bench task's instructions were down to their marker and tail, the rest was
    cut from the middle of the whole request, which ran through the marker (`[…` on a
    line of its own, then `[… 157 characters cut …]`); the statement's middle goes now.
    """
    path = dataset_dir / "mini_swe_agent_gemini3pro_swebench_verified.jsonl"
    if not path.exists():
        pytest.skip(f"{path.name} is not in the dataset")
    for line in path.read_text(encoding="utf-8").splitlines()[:12]:
        messages = json.loads(line)["messages"]
        task = next(m["content"] for m in messages if m["role"] == "user")
        for remove in range(0, len(task), 11):
            for shown in cut_task(task, remove).split("\n"):
                if shown.startswith("[…"):
                    assert shown.endswith("…]"), (remove, shown)


def test_a_cut_task_drops_older_replies_whole_before_cutting_a_short_request() -> None:
    request = "I'd like to make some changes to my upcoming travel reservations."
    replies = [
        'Later the user said: "My user id is aarav_ahmed_6699 and the booking is IFOYYZ."',
        'Later the user said: "Thank you! I would also like to cancel reservation NQNU5R."',
        'Later the user said: "Yes, please cancel this reservation as well."',
    ]
    task = "\n".join([request, *replies])
    cut = cut_task(task, 40)
    assert cut.startswith(request + "\n")
    assert replies[0] not in cut
    assert "[… 1 earlier reply of the user cut …]" in cut
    assert cut.endswith("\n".join(replies[1:]))
    assert len(task) - len(cut) >= 40
    harder = cut_task(task, 120)
    assert harder.startswith(request + "\n[… 2 earlier replies of the user cut …]\n")
    assert harder.endswith(replies[-1])
    # Then the request's middle; the latest reply stays whole the longest.
    hardest = cut_task(task, 200)
    assert request not in hardest
    assert "earlier replies" not in hardest
    assert hardest.endswith(replies[-1])
    assert len(task) - len(hardest) >= 200


PIP_LIST = "".join(f"package-{i:03d}    1.{i}.0\n" for i in range(300))
REPRO = "```python\nimport parser\nparser.parse('Content-Length: 3')\n```\n"
LISTED_STATEMENT = (
    "<pr_description>\nThe parser drops the `Content-Length` header.\n\n"
    f"<details>\n\n```\n$ pip list\n{PIP_LIST}```\n</details>\n\n{REPRO}</pr_description>\n"
)


def test_a_cut_task_cuts_a_pasted_listing_before_the_instructions_rules() -> None:
    task = LISTED_STATEMENT + STANDING
    shortened = cut_task(task, 4_000)
    assert len(task) - len(shortened) >= 4_000
    # The listing keeps its first and last lines around one marker; the rest stays whole.
    assert "$ pip list\npackage-000    1.0.0\n" in shortened
    assert "package-299    1.299.0\n```\n</details>" in shortened
    assert re.search(r"\n\[… \d+ lines cut …\]\n", shortened)
    assert REPRO in shortened
    assert STANDING in shortened
    # Cut further, the listing keeps only a few of its 300 lines (those in the statement's
    # first 300 characters, its last ones) before the instructions lose anything.
    harder = cut_task(task, 6_000)
    assert len(task) - len(harder) >= 6_000
    kept = re.findall(r"^package-(\d+) ", harder, re.M)
    assert kept[0] == "000"
    assert kept[-1] == "299"
    assert len(kept) <= 40
    assert STANDING in harder
    assert REPRO in harder


def test_a_short_block_of_the_statement_is_not_cut_as_a_listing() -> None:
    task = STATEMENT + REPRO + STANDING
    shortened = cut_task(task, 300)
    assert REPRO in shortened
    assert "lines cut" not in shortened


@given(st.integers(min_value=0, max_value=len(LISTED_STATEMENT) + len(STANDING) + 50))
def test_a_cut_task_with_a_listing_is_never_longer_for_more_cut(remove: int) -> None:
    task = LISTED_STATEMENT + STANDING
    shorter = cut_task(task, remove + 40)
    assert len(shorter) <= len(cut_task(task, remove)) + 80
    if remove and remove < len(PIP_LIST) - 1_000:
        assert len(task) - len(cut_task(task, remove)) >= remove


@given(st.integers(min_value=0, max_value=len(STATEMENT) + len(STANDING) + 50))
def test_a_cut_task_is_never_longer_for_more_cut(remove: int) -> None:
    task = STATEMENT + STANDING
    shorter = cut_task(task, remove + 40)
    # A unit cut may leave a gap marker in its place; the whole block, a longer one.
    assert len(shorter) <= len(cut_task(task, remove)) + 80
    if remove and remove < len(STANDING) - 400:
        assert len(task) - len(cut_task(task, remove)) >= remove


def test_a_digest_cut_to_a_tight_budget_keeps_the_instructions_rules() -> None:
    messages: list[Message] = [UserMessage(content=STATEMENT + STANDING)]
    for index in range(6):
        messages += [
            call(f"x{index}", "bash", command=f"cat src/m{index}.py"),
            result(f"x{index}", "<returncode>0</returncode>\n<output>\nx\n</output>"),
        ]
    text = digest(messages, budget_tokens=450)
    task = parse_handoff(text).task
    assert "The parser drops the `Content-Length` header." in task
    assert "DO NOT MODIFY: Tests, configuration files" in task
    assert "sed -i" not in task


@pytest.mark.parametrize("budget", [150, 600, 3_000])
def test_a_digest_updated_with_nothing_new_is_unchanged(budget: int) -> None:
    """A re-run of a compaction on an unchanged session must write nothing."""
    continued: list[Message] = [
        UserMessage(content="Format error: answer with one command."),
        call("f1", "bash", command="pytest -q tests"),
        result("f1", "<returncode>0</returncode>\n<output>\n3 passed in 0.1s\n</output>"),
    ]
    for messages in (swe_agent_run(), airline_run(), continued):
        text = digest(messages, budget_tokens=budget)
        assert digest([], prior_digest=text, budget_tokens=budget) == text


@pytest.mark.parametrize("name", DATASETS)
def test_real_digests_updated_with_nothing_new_are_unchanged(dataset_dir: Path, name: str) -> None:
    path = dataset_dir / name
    if not path.exists():
        pytest.skip(f"{name} is not in the dataset")
    changed: list[str] = []
    for line in path.read_bytes().splitlines():
        conversation = parse_conversation_line(line)
        for number, loop in enumerate(conversation.loops):
            text = digest(loop, budget_tokens=800)
            if digest([], prior_digest=text, budget_tokens=800) != text:
                changed.append(f"{conversation.session_id} loop {number}")
    assert changed == []


@pytest.mark.parametrize(
    ("printed", "line"),
    [
        ("===== 2 failed, 80 passed in 0.08s =====", "2 failed, 80 passed in 0.08s"),
        # pytest before 5.1 wrote the duration in words; its FAILED lines come before.
        (
            "FAILED t.py::test_a - Assert...\n=== 1 failed, 3 passed in 1.83 seconds ===",
            "1 failed, 3 passed in 1.83 seconds",
        ),
        # sympy's bin/test
        (
            "==== tests finished: 8 passed, 1 failed, in 0.09 seconds ====",
            "tests finished: 8 passed, 1 failed, in 0.09 seconds",
        ),
        ("=== 1 passed in 0.12s (0:00:01) ===", "1 passed in 0.12s (0:00:01)"),
        # An exception in a sympy test is no pass.
        (
            "= tests finished: 2 passed, 1 expected to fail, 1 exceptions, in 0.57 seconds =",
            "tests finished: 2 passed, 1 expected to fail, 1 exceptions, in 0.57 seconds",
        ),
    ],
)
def test_a_test_runs_result_is_its_summary_line(printed: str, line: str) -> None:
    assert _run_output.test_result_line(printed) == line
    messages: list[Message] = [
        UserMessage(content="Fix it"),
        call("t1", "bash", command="python bin/test sympy/core"),
        result("t1", f"<returncode>0</returncode>\n<output>\n{printed}\n</output>"),
    ]
    # A run that printed a summary is a test run, whatever its command's name.
    assert f"- Last test run: python bin/test sympy/core -> {line}" in section(
        digest(messages), "Active State"
    )


def test_a_short_request_stays_whole_over_the_middle_of_a_long_reply() -> None:
    request = "Hi! I need to make a change to my reservation, please."
    reply = (
        "It's just for me, and the details should be in my profile. I'd like to use my "
        "smaller gift card first, then the larger one for payment. No extra baggage needed "
        "since I'll use my free allowance, and no travel insurance, thanks."
    )
    task = f'{request}\nLater the user said: "{reply}"'
    cut = cut_task(task, 60)
    assert cut.startswith(request + "\n")
    assert "characters cut" in cut
    assert cut.endswith('no travel insurance, thanks."')
    assert len(cut) < len(task)
    # A cut that would leave less than 80 characters of the replies takes the request
    # first, as before: the latest words stay.
    harder = cut_task(task, len(reply) - 40)
    assert request not in harder
    assert "no travel insurance, thanks." in harder


def _one_run(request: str, command: str, output: str) -> str:
    """The digest of a request and one bash call that printed `output`."""
    return digest(
        [
            UserMessage(content=request),
            call("c1", "bash", command=command),
            ToolResultMessage(tool_call_id="c1", tool_name="bash", content=output),
        ]
    )


def test_a_long_outputs_tags_are_not_its_error_line() -> None:
    """mini-swe-agent wraps a long output's head and tail in tags: `</output_tail>` is no error."""
    tail = "\n".join(
        [
            "________ sympy/matrices/tests/test_matrices.py:test_getattr ________",
            "DeprecationWarning: Using or importing the ABCs from 'collections'",
            " tests finished: 216 passed, 3 skipped, 14 exceptions, in 7.55 seconds ",
            "DO *NOT* COMMIT!",
        ]
    )
    output = (
        "<returncode>1</returncode>\n<warning>\nThe output of your last command was too "
        "long.\nPlease try a different command that produces less output.\n</warning>"
        "<output_head>\ntest process starts\n</output_head>\n<elided_chars>\n5400 "
        f"characters elided\n</elided_chars>\n<output_tail>\n{tail}\n\n</output_tail>"
    )
    text = _one_run(
        "Fix the matrix column insert.", "bin/test sympy/matrices/tests/test_matrices.py", output
    )
    assert "output_tail" not in text
    assert "DO *NOT* COMMIT!" in section(text, "Blocked")
    assert "Please try a different command" not in text


def test_a_command_the_harness_killed_failed_and_says_it_timed_out() -> None:
    notice = (
        "The last command <command>python reproduce_issue.py</command> timed out and has "
        "been killed.\nThe output of the command was:\n<output>\nstarting the loop\n"
        "</output>\nPlease try another command and make sure to avoid those requiring "
        "interactive input."
    )
    text = _one_run("Fix the hang in the poly solver.", "python reproduce_issue.py", notice)
    assert "RAN python reproduce_issue.py - timed out (killed)" in text
    blocked = section(text, "Blocked")
    assert "failed" in blocked
    assert "timed out (killed)" in blocked
    assert "<command>" not in text
