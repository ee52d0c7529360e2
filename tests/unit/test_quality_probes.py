"""The probe facts of bench/_probes.py, and bench/quality.py end to end on the dataset."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sessionstore._tokens import message_tokens
from sessionstore.errors import ContextOverflowError
from sessionstore.formats import from_openai, to_openai
from sessionstore.formats._jsonl import parse_conversation_line

ROOT = Path(__file__).resolve().parents[2]
# The bench scripts run as `python bench/<script>.py` and import their siblings by
# module name; the tests import them the same way.
sys.path.insert(0, str(ROOT / "bench"))

import _probes  # noqa: E402 - importable once bench/ is on the path
import quality  # noqa: E402 - importable once bench/ is on the path
from _probes import Fact, extract_facts, is_kept, rendered_text  # noqa: E402 - as above

SWE = "mini_swe_agent_gemini3pro_swebench_verified.jsonl"

# ── building conversations ─────────────────────────────────────────────────────

_ids: Iterator[int] = iter(range(1, 10**9))


def system(text: str) -> dict[str, Any]:
    return {"role": "system", "content": text}


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def assistant(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def call(name: str, arguments: object, text: str | None = None) -> dict[str, Any]:
    """An assistant message with one tool call; its id is `call_<n>`."""
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {
        "role": "assistant",
        "content": text,
        "tool_calls": [
            {
                "id": f"call_{next(_ids)}",
                "type": "function",
                "function": {"name": name, "arguments": args},
            }
        ],
    }


def result(asked: dict[str, Any], text: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": asked["tool_calls"][0]["id"], "content": text}


def bash(command: str, output: str) -> list[dict[str, Any]]:
    asked = call("bash", {"command": command})
    return [asked, result(asked, output)]


def facts_of(messages: list[dict[str, Any]], kind: str) -> list[str]:
    return [fact.text for fact in extract_facts(messages) if fact.kind == kind]


# ── requests ───────────────────────────────────────────────────────────────────


def test_the_request_is_the_latest_user_message_cut_to_200_characters() -> None:
    long = "Now   please\n\tbook " + "the flight " * 40
    messages = [system("You help."), user("First question"), assistant("ok"), user(long)]
    (request,) = facts_of(messages, "request")
    assert request == _probes.normalize(long)[:200]
    assert request.startswith("Now please book the flight")
    assert facts_of([system("You help.")], "request") == []


def test_the_output_of_a_fenced_command_is_not_a_request() -> None:
    """mini-swe-agent's own format: the harness runs the one ```bash block, answers as user."""
    messages = [
        user("Fix the parser in src/parse.py"),
        assistant("THOUGHT: look first.\n\n```bash\ncat src/parse.py\n```"),
        user("<returncode>1</returncode>\n<output>\ncat: src/parse.py: No such file\n</output>"),
    ]
    assert facts_of(messages, "request") == ["Fix the parser in src/parse.py"]
    assert facts_of(messages, "command") == ["cat src/parse.py"]
    assert facts_of(messages, "error") == ["cat: src/parse.py: No such file"]


def test_a_text_with_several_shell_blocks_ran_nothing() -> None:
    messages = [
        user("task"),
        assistant("```bash\nls\n```\nor\n```bash\npwd\n```"),
        user("Please always provide EXACTLY ONE action."),
    ]
    assert facts_of(messages, "command") == []
    assert facts_of(messages, "request") == ["Please always provide EXACTLY ONE action."]


# ── paths ──────────────────────────────────────────────────────────────────────


def test_paths_come_from_commands_and_path_arguments() -> None:
    script = "cat <<'EOF' > check.py\nfrom django.db import models\nprint(open('data/in.csv'))\nEOF"
    editor = call("str_replace_editor", {"command": "view", "path": "/repo/src/mod.py"})
    messages = [
        user("task"),
        *bash("ls -R src/pkg && cat ./setup.cfg", "..."),
        *bash("sed -i 's/old/new/g' src/pkg/core.py > /dev/null", ""),
        *bash(script, ""),
        *bash("curl -s https://example.org/api/x.json --config=conf/app.toml", ""),
        editor,
        result(editor, "1\timport os"),
        *bash("cat setup.cfg", ""),
    ]
    assert facts_of(messages, "path") == [
        "src/pkg",
        "src/pkg/core.py",
        "check.py",
        "data/in.csv",
        "conf/app.toml",
        "/repo/src/mod.py",
        "setup.cfg",  # touched again last
    ]


def test_paths_are_capped_to_the_most_recently_touched() -> None:
    messages = [user("task")]
    for n in range(40):
        messages += bash(f"touch file_{n}.py", "")
    paths = facts_of(messages, "path")
    assert len(paths) == _probes.MAX_PATHS
    assert paths[0] == "file_10.py"
    assert paths[-1] == "file_39.py"


def test_paths_in_command_skips_noise() -> None:
    noise = (
        "grep -rn 's/a/b/' . 2>/dev/null | head; git diff origin/1 ~ / ; python -c 'import os.path'"
    )
    assert _probes.paths_in_command(noise) == []
    assert _probes.paths_in_command("pytest tests/test_x.py::test_y -q") == ["tests/test_x.py"]


# ── errors ─────────────────────────────────────────────────────────────────────


TRACEBACK = """<returncode>1</returncode>
<output>
Traceback (most recent call last):
  File "/repo/x.py", line 3, in <module>
    raise ValueError("listed in code, not an error line")
ValueError: bad value 3
</output>"""
PYTEST = """....F
    def test_y():
>       assert f() == 2
E       assert 1 == 2
tests/test_x.py:4: AssertionError
FAILED tests/test_x.py::test_y - assert 1 == 2
========== 1 failed, 4 passed in 0.12s ==========
"""


def test_error_lines_of_a_traceback_and_of_a_test_run() -> None:
    assert _probes.error_lines(TRACEBACK) == ["ValueError: bad value 3"]
    assert _probes.error_lines(PYTEST) == [
        "E assert 1 == 2",
        "tests/test_x.py:4: AssertionError",
        "FAILED tests/test_x.py::test_y - assert 1 == 2",
        "1 failed, 4 passed in 0.12s",  # the runner's rules are decoration
    ]
    assert _probes.error_lines("!!!!! Interrupted: 1 error during collection !!!!!") == [
        "Interrupted: 1 error during collection"
    ]
    listing = "   12\t        raise KeyError(key)\nclass Error(Exception):\n"
    assert _probes.error_lines(listing) == []


def test_a_non_zero_exit_without_error_lines_gives_its_last_line() -> None:
    output = "<returncode>2</returncode>\n<output>\nbuilding...\nmake: *** [all] Stop.\n</output>"
    assert _probes.error_lines(output) == ["make: *** [all] Stop."]
    assert _probes.error_lines("<returncode>0</returncode>\n<output>\nall good\n</output>") == []
    assert _probes.error_lines("<returncode>1</returncode>\n<output>\n</output>") == []
    assert _probes.exit_code("done\nProcess exited with code 3") == 3


def test_final_errors_come_from_the_newest_two_outputs_that_have_any() -> None:
    messages = [
        user("task"),
        *bash("python a.py", "Error: first failure here"),
        *bash("python b.py", TRACEBACK),
        *bash("ls", "a.py b.py"),
        *bash("pytest", PYTEST),
        *bash("echo ok", "ok"),
    ]
    # The newest output first, each with its last three error lines.
    assert facts_of(messages, "error") == [
        "tests/test_x.py:4: AssertionError",
        "FAILED tests/test_x.py::test_y - assert 1 == 2",
        "1 failed, 4 passed in 0.12s",
        "ValueError: bad value 3",
    ]


def test_tool_errors_of_an_api_agent() -> None:
    asked = call("book_reservation", {"user_id": "mia_li_3668"})
    messages = [
        user("book it"),
        asked,
        result(asked, "Error: payment method gift_card_1 not found"),
    ]
    assert facts_of(messages, "error") == ["Error: payment method gift_card_1 not found"]


# ── commands ───────────────────────────────────────────────────────────────────


def test_the_last_three_distinct_commands_normalised_and_cut() -> None:
    long = "python - <<'EOF'\n" + "x = 1\n" * 50 + "EOF"
    messages = [user("task")]
    for command in ("ls", "git status", "pytest  -x\n  tests", "git status", long):
        messages += bash(command, "")
    commands = facts_of(messages, "command")
    assert commands == ["pytest -x tests", "git status", _probes.normalize(long)[:120]]
    assert len(commands[-1]) == _probes.LINE_CHARS


def test_which_tool_calls_are_commands() -> None:
    assert _probes.call_command("str_replace_editor", '{"command": "view"}') is None
    assert _probes.call_command("editor", '{"command": "undo edit"}') == "undo edit"
    assert _probes.call_command("bash", '{"command": "ls"}') == "ls"
    assert _probes.call_command("shell", '{"command": ["bash", "-lc", "make test"]}') == "make test"
    assert _probes.call_command("exec", '{"cmd": ["git", "log"]}') == "git log"
    assert _probes.call_command("run_shell", "ls -la") == "ls -la"
    assert _probes.call_command("get_user_details", '{"user_id": "a_b_123"}') is None


# ── identifiers and record ids ─────────────────────────────────────────────────


def test_identifiers_of_the_task_statement() -> None:
    statement = (
        "<pr_description>\nQuerySet.bulk_update() breaks on F('name') with decimal_pos; "
        "see #31456 and https://docs.djangoproject.com/x. Also getElementById, "
        "MAX_LENGTH and utils.numberformat.format in setup.py (e.g. it).\n</pr_description>"
    )
    messages = [system("Be careful."), user(statement), assistant("ok"), user("go on")]
    assert facts_of(messages, "identifier") == [
        "QuerySet.bulk_update",
        "QuerySet",
        "decimal_pos",
        "#31456",
        "getElementById",
        "MAX_LENGTH",
        "utils.numberformat.format",
    ]


def test_record_ids_referenced_first_then_those_of_json_results() -> None:
    details = call("get_user_details", {"user_id": "mia_li_3668"})
    search = call("search_direct_flight", {"origin": "JFK", "destination": "SEA"})
    listing = call("bash", {"command": "cat CHANGES"})
    messages = [
        user("I am mia_li_3668 and want to change reservation ZFA04Y."),
        details,
        result(details, json.dumps({"reservations": [{"reservation_id": "HATHAT"}], "no": 4471})),
        search,
        result(search, json.dumps([{"flight_number": "HAT136"}, {"flight_number": "HAT039"}])),
        listing,
        result(listing, "Fixed #13973 and IBM855 in release R2D2X9."),
    ]
    assert facts_of(messages, "record_id") == [
        "mia_li_3668",  # in a call's arguments, the most recent reference
        "ZFA04Y",
        "HAT039",
        "HAT136",
        "4471",  # after HATHAT in its result, so newer
        "HATHAT",
    ]


def test_id_keys_and_lists_of_ids_but_not_words_that_end_in_id() -> None:
    order = call("get_order_details", {"orderId": "#W2378156"})
    payload = {"item_ids": ["1008292230", 6086499569], "paid": "cash_only", "void": "yes"}
    edit = call("bash", {"command": "echo HTTP2 > notes.txt"})
    messages = [user("my order"), order, result(order, json.dumps(payload)), edit]
    assert facts_of(messages, "record_id") == ["#W2378156", "6086499569", "1008292230"]


# ── the first request ──────────────────────────────────────────────────────────


def test_the_task_statement_is_the_last_request_before_the_first_reply() -> None:
    demo = "Here is a demonstration: fix QuerySet.count(). You must never skip tests."
    task = "We're solving this issue: DataElement.to_json() fails on bytes."
    messages = [system("s"), user(demo), user(task), assistant("ok"), user("go on")]
    assert facts_of(messages, "first_request") == [task]
    assert "QuerySet.count" not in facts_of(messages, "identifier")
    assert "DataElement.to_json" in facts_of(messages, "identifier")
    assert facts_of(messages, "constraint") == []  # the demonstration's are not the session's
    assert _probes.task_statement([assistant("Hello, how can I help?"), user("Book it.")]) == (
        "Book it."
    )


def test_the_first_request_is_the_task_statement_when_a_later_request_differs() -> None:
    task = "Fix the parser  in src/parse.py " + "please " * 50
    fenced = assistant("```bash\nls\n```")
    messages = [system("s"), user(task), fenced, user("<output>a</output>"), user("go on")]
    assert facts_of(messages, "first_request") == [_probes.normalize(task)[:200]]
    assert facts_of(messages, "request") == ["go on"]
    # One request is the latest one: it is not counted twice.
    assert facts_of([user("only this")], "first_request") == []


# ── working state: edited files and symbols ────────────────────────────────────


def test_edited_symbols_of_an_editor_tool_and_a_heredoc_and_sed() -> None:
    replace = call(
        "str_replace_editor",
        {
            "command": "str_replace",
            "path": "/repo/src/pkg/core.py",
            "old_str": "def parse(text):\n    return text",
            "new_str": "def parse(text):\n    return text.strip()",
        },
    )
    view = call("str_replace_editor", {"command": "view", "path": "/repo/src/pkg/other.py"})
    heredoc = "cat <<'EOF' > tests/test_new.py\nclass TestParse:\n    def test_strip(self):\n" + (
        "        pass\nEOF"
    )
    messages = [
        user("task"),
        replace,
        result(replace, "edited"),
        view,
        result(view, "1\tdef untouched(): pass"),
        *bash(heredoc, ""),
        *bash("sed -i 's/a>/x/b>/' src/pkg/util.py && cat src/pkg/util.py", "b"),
        *bash("grep -n 'def nope' src/pkg/else.py > /dev/null", ""),
        *bash('python -c "def f() -> None:\\n    print(1 > 0)"', ""),
    ]
    assert facts_of(messages, "edited_symbol") == [
        "pkg/core.py",
        "parse",
        "tests/test_new.py",
        "TestParse",
        "test_strip",
        "pkg/util.py",
    ]


def test_edits_of_other_agents_tools_nested_edits_and_shell_patches() -> None:
    multi = call(
        "MultiEdit",
        {
            "file_path": "/srv/app/models.py",
            "edits": [{"old_string": "x = 1", "new_string": "class Order:\n    total = 0"}],
        },
    )
    write = call("Write", {"file_path": "/srv/app/views.ts", "content": "function show() {}"})
    patch = (
        "apply_patch <<'EOF'\n*** Begin Patch\n*** Update File: src/lib.rs\n"
        "@@ pub fn parse(input: &str) {\n-    todo!()\n+    input.len()\n*** End Patch\nEOF"
    )
    shell = call("shell", {"command": ["bash", "-lc", patch]})
    messages = [user("task")]
    for asked in (multi, write, shell):
        messages += [asked, result(asked, "ok")]
    assert facts_of(messages, "edited_symbol") == [
        "app/models.py",
        "Order",
        "app/views.ts",
        "show",
        "src/lib.rs",
        "parse",
    ]
    assert facts_of(messages, "mutation") == [
        "Write /srv/app/views.ts",
        "MultiEdit /srv/app/models.py",
    ]


def test_files_a_shell_command_writes() -> None:
    written = _probes._written_files
    assert written("echo 'a > b' > 'out/x.txt' && sed -i 's/x>/y>/' lib/m.py") == [
        "out/x.txt",
        "lib/m.py",
    ]
    assert written("python -c 'print(1 > 0)' 2>&1 | tee -a logs/run.log") == ["logs/run.log"]
    assert written("grep -n x a.py > /dev/null") == []
    script = "python - <<'EOF'\nwith open('pkg/mod.py', 'w') as f:\n    f.write(s)\nEOF"
    assert written(script) == ["pkg/mod.py"]
    patcher = (
        "cat <<'EOF' > fix.py\nfile_path = 'django/utils/numberformat.py'\n"
        "with open(file_path, 'r') as f:\n    text = f.read()\n"
        "with open(file_path, 'w') as f:\n    f.write(text)\nEOF"
    )
    assert written(patcher) == ["fix.py", "django/utils/numberformat.py"]
    assert written("sed -i 's/a = 1; b/a = 2; b/' repro.py") == ["repro.py"]


def test_a_file_deleted_later_leaves_the_working_state_with_its_symbols() -> None:
    script = "cat > repro.py <<'EOF'\ndef check_bug():\n    pass\nEOF"
    fix = "cat > src/fix.py <<'EOF'\ndef fixed():\n    pass\nEOF"
    remove = call("delete_file", {"path": "notes/todo.md"})
    messages = [
        user("task"),
        *bash(script, ""),
        *bash(fix, ""),
        *bash("echo 'x' >'notes/todo.md'", ""),
        *bash("python repro.py && rm -f repro.py", ""),
        remove,
        result(remove, "deleted"),
    ]
    assert facts_of(messages, "edited_symbol") == ["src/fix.py", "fixed"]


def test_a_swe_agent_line_edit_names_the_open_file_and_the_enclosing_function() -> None:
    opened = call("open", {"command": "open src/marshmallow/fields.py 1100\n"})
    view = (
        "[File: /repo/src/marshmallow/fields.py (1997 lines total)]\n"
        "(1090 more lines above)\n"
        "1091:    def _serialize(self, value, attr, obj, **kwargs):\n"
        "1092:        if value is None:\n"
        "1093:            return None\n"
        "1094:        base_unit = dt.timedelta(**{self.precision: 1})\n"
    )
    edit = call("edit", {"command": "edit 1094:1094\n        return int(round(x))\nend_of_edit\n"})
    messages = [
        user("fix rounding"),
        opened,
        result(opened, view),
        edit,
        result(edit, "[File: /repo/src/marshmallow/fields.py (1997 lines total)]\n1094: ..."),
    ]
    assert facts_of(messages, "edited_symbol") == ["marshmallow/fields.py", "_serialize"]
    assert facts_of(messages, "mutation") == ["edit marshmallow/fields.py"]


def test_a_patch_names_its_files_and_the_functions_of_its_hunks() -> None:
    patch = (
        "*** Begin Patch\n*** Update File: lib/app/server.go\n"
        "@@ func (s *Server) Start() error {\n-\treturn nil\n+\treturn s.listen()\n*** End Patch"
    )
    applied = call("apply_patch", {"input": patch})
    git_apply = (
        "git apply <<'EOF'\n--- a/x/y.rs\n+++ b/x/y.rs\n@@ -1 +1 @@ fn main() {\n-a\n+b\nEOF"
    )
    messages = [user("task"), applied, result(applied, "Done"), *bash(git_apply, "")]
    assert facts_of(messages, "edited_symbol") == ["app/server.go", "Start", "x/y.rs", "main"]


def test_definitions_in_several_languages() -> None:
    code = (
        "async def fetch(x):\n"
        "export default class Widget extends Base {\n"
        "function render() {}\n"
        "func (s *Server) Handle(w http.ResponseWriter) {\n"
        "pub fn parse_args() -> Args {\n"
        "    public static List<String> splitAll(String s) {\n"
        "    if (x) {\n"
        "interface Shape {}\n"
    )
    assert _probes.definitions(code) == [
        "fetch",
        "Widget",
        "render",
        "Handle",
        "parse_args",
        "splitAll",
        "Shape",
    ]


# ── working state: the last test run ──────────────────────────────────────────


def test_the_last_test_command_and_its_summary_line() -> None:
    unittest_out = (
        "......\n----------------------------------\nRan 6 tests in 0.003s\n\nFAILED (errors=1)"
    )
    messages = [
        user("task"),
        *bash("cd /repo && python -m pytest tests/test_x.py -q", PYTEST),
        *bash("cd /repo && python tests/runtests.py  cache.tests 2>&1 | tail -5", unittest_out),
        *bash("rm tests/test_tmp.py", ""),
    ]
    # The simple command that ran the tests, as typed (whitespace collapsed).
    assert facts_of(messages, "test_command") == ["python tests/runtests.py cache.tests"]
    assert facts_of(messages, "test_result") == ["Ran 6 tests", "FAILED (errors=1)"]
    assert _probes.result_lines(PYTEST) == ["1 failed, 4 passed"]


@pytest.mark.parametrize(
    ("command", "output", "expected"),
    [
        ("go test ./...", "ok  \texample.com/pkg\t0.012s\nFAIL\texample.com/other", None),
        ("npm test", "Tests:       1 failed, 9 passed, 10 total\nTime: 2 s", None),
        ("mvn -q test", "Tests run: 4, Failures: 1, Errors: 0, Skipped: 0\nBUILD FAILURE", None),
        (
            "javac Reproduce.java",
            "bash: javac: command not found",
            ["bash: javac: command not found"],
        ),
        ("cargo test", "test result: ok. 3 passed; 0 failed; finished in 0.01s", None),
        (
            "mvn test",
            "[ERROR] Tests run: 2, Failures: 1\n[INFO] BUILD FAILURE",
            ["Tests run: 2, Failures: 1", "BUILD FAILURE"],
        ),
        ("npx mocha", "  3 passing (12ms)\n  1 failing", ["3 passing", "1 failing"]),
        ("rspec", "Finished in 0.1 seconds\n10 examples, 1 failure", ["10 examples, 1 failure"]),
        ("pytest -x", "<returncode>4</returncode>\nERROR: file or directory not found: t", None),
    ],
)
def test_test_runners_of_other_languages(
    command: str, output: str, expected: list[str] | None
) -> None:
    messages = [user("task"), *bash(command, output)]
    assert facts_of(messages, "test_command") == [command]
    results = facts_of(messages, "test_result")
    assert results, command
    if expected is not None:
        assert results == expected
    assert all(line in _probes.rendered_text(messages) for line in results)


def test_reading_or_removing_test_files_is_not_a_test_run() -> None:
    messages = [user("t"), *bash("cat tests/test_x.py", "x"), *bash("rm test_x.py", "")]
    assert facts_of(messages, "test_command") == []


@pytest.mark.parametrize(
    ("command", "runs_tests"),
    [
        ("python3 -m unittest discover", True),
        ("timeout 60 python test_issue.py", True),
        ("cd /repo && PYTHONPATH=. python -m pytest -x 2>&1 | tail -5", True),
        ("./tests/runtests.py cache.tests", True),
        ("bin/test sympy/core", True),
        ("poetry run pytest", True),
        ("python manage.py test app", True),
        ("make check", True),
        ("python reproduce.py", False),
        ("rm -f test_x.py reproduce.py", False),
        ("test -f setup.py && echo yes", False),
        ("grep -rn pytest setup.cfg", False),
        ("python -c 'import pytest'", False),
    ],
)
def test_which_commands_run_tests(command: str, runs_tests: bool) -> None:
    assert _probes.is_test_command(command) is runs_tests


def test_result_lines_leave_out_durations_and_test_discovery() -> None:
    sympy = "============ tests finished: 9 passed, in 0.17 seconds ============"
    assert _probes.result_lines(sympy) == ["tests finished: 9 passed"]
    django = "Found 10 test(s).\nSystem check identified no issues.\n..\nRan 10 tests in 0.1s\n\nOK"
    assert _probes.result_lines(django) == ["Ran 10 tests"]
    assert _probes.result_lines("no summary here\nlast line") == ["last line"]


# ── working state: values of the last turns ───────────────────────────────────


def test_last_values_are_arguments_of_the_last_calls_that_the_last_turns_repeat() -> None:
    early = call("get_reservation_details", {"reservation_id": "OLD123"})
    details = call("get_reservation_details", {"reservation_id": "ZFA04Y"})
    update = call(
        "update_reservation_flights",
        {"reservation_id": "ZFA04Y", "cabin": "economy", "payment_id": "credit_card_4421486"},
    )
    search = call("search_direct_flight", {"origin": "JFK", "date": "2024-05-20"})
    messages = [
        user("change ZFA04Y to economy"),
        early,
        result(early, '{"reservation_id": "OLD123"}'),
        search,
        result(search, "[]"),
        details,
        result(details, '{"reservation_id": "ZFA04Y", "payment_history": ["credit_card_4421486"]}'),
        assistant("I will move ZFA04Y to economy and charge credit_card_4421486."),
        update,
        result(update, '{"reservation_id": "ZFA04Y", "cabin": "economy"}'),
    ]
    assert facts_of(messages, "last_value") == ["ZFA04Y", "economy", "credit_card_4421486"]


def test_values_inside_shell_commands_are_numbers_ids_and_code_names() -> None:
    messages = [
        user("task"),
        *bash("grep -n '_eval_is_zero' sympy/core/add.py", "530:    def _eval_is_zero(self):"),
        *bash("sed -n '525,540p' sympy/core/add.py", "def _eval_is_zero(self):\n ..."),
    ]
    values = facts_of(messages, "last_value")
    assert "_eval_is_zero" in values
    submit = call("submit", {"command": "submit"})
    run = call("bash", {"command": "python3 check_v2.py"})
    tail = [run, result(run, "python3 check_v2.py: ok"), submit, result(submit, "submit done")]
    assert facts_of([user("t"), *tail], "last_value") == ["check_v2.py"]
    assert "grep" not in values
    assert "sympy" not in values


# ── working state: the final diff ──────────────────────────────────────────────

DIFF = """diff --git a/src/app.py b/src/app.py
--- a/src/app.py
+++ b/src/app.py
@@ -10,3 +10,4 @@ def run():
-    return x
+    return x + 1
+    # fixed
+    log.info("done")
@@ -40,2 +41,2 @@ def stop():
-    pass
+    cleanup(resources)
"""


def test_final_diff_lines_from_the_last_diff_output_two_a_hunk() -> None:
    messages = [
        user("task"),
        *bash(
            "git diff", "diff --git a/old.py b/old.py\n@@ -1 +1 @@\n-old line one\n+new line one"
        ),
        *bash("echo SUBMIT && git add -A && git diff --cached", DIFF),
        *bash("echo done", "done"),
    ]
    # Round robin over the hunks: the first qualifying line of each, then the second.
    assert facts_of(messages, "diff_line") == ["return x", "cleanup(resources)", "return x + 1"]


def test_a_hunk_gives_its_code_lines_before_its_comments() -> None:
    diff = (
        "@@ -1 +1,3 @@\n+#!/usr/bin/env python\n+# -*- coding: utf-8 -*-\n"
        "+#include <stdio.h>\n+x = compute()"
    )
    assert _probes.changed_lines(diff) == ["#include <stdio.h>", "x = compute()"]


def test_a_diff_line_is_kept_without_its_mark_and_indentation() -> None:
    fact = _probes.Fact("diff_line", "return x + 1")
    assert is_kept(fact, _probes.normalize("+        return x + 1"))
    assert _probes.changed_lines("+++ b/a.py\n+ok\n+}\n+    value = compute()") == [
        "value = compute()"
    ]


# ── working state: constraints, mutations, error types ─────────────────────────


def test_user_constraints_are_sentences_with_must_never_only_and_the_like() -> None:
    messages = [
        user("Hi. I want to fly to Boston. I do not want travel insurance! Pay only by card."),
        assistant("ok"),
        user("Also, you must keep the same dates.\nThanks"),
        assistant("```python\n# never run this\n```"),
    ]
    assert facts_of(messages, "constraint") == [
        "Also, you must keep the same dates.",
        "I do not want travel insurance!",
        "Pay only by card.",
    ]


def test_constraints_are_capped_per_message_and_in_all() -> None:
    text = " ".join(f"Rule {n} must hold." for n in range(10))
    messages = [user(text), assistant("a"), user(text.replace("Rule", "Law"))]
    found = facts_of(messages, "constraint")
    assert found[:3] == ["Law 0 must hold.", "Law 1 must hold.", "Law 2 must hold."]
    assert len(found) == _probes.MAX_CONSTRAINTS


def test_mutations_are_state_changing_calls_with_their_key_argument() -> None:
    calls = [
        call("get_user_details", {"user_id": "mia_li_3668"}),
        call("book_reservation", {"user_id": "mia_li_3668", "origin": "JFK"}),
        call("cancel_reservation", {"reservation_id": "ZFA04Y"}),
        call("get_return_policy", {"order_id": "#W1"}),
        call("str_replace_editor", {"command": "view", "path": "a.py"}),
        call("str_replace_editor", {"command": "create", "path": "b.py", "file_text": "x"}),
        call("bash", {"command": "rm -rf build"}),
        call("think", {"thought": "update later"}),
        call("submit", {"command": "submit"}),
    ]
    messages: list[dict[str, Any]] = [user("go")]
    for asked in calls:
        messages += [asked, result(asked, "ok")]
    mutation_facts = [f for f in extract_facts(messages) if f.kind == "mutation"]
    assert [f.parts for f in mutation_facts] == [
        ("submit",),
        ("create", "b.py"),
        ("cancel_reservation", "ZFA04Y"),
        ("book_reservation", "mia_li_3668"),
    ]
    fact = mutation_facts[2]
    assert is_kept(fact, "called cancel_reservation on ZFA04Y")
    assert not is_kept(fact, "called cancel_reservation on another")


def test_an_action_the_system_prompt_names_needs_a_key_argument() -> None:
    submit = call("submit", {"command": "submit"})
    transfer = call("transfer_to_human_agents", {})
    messages = [
        system("Commands: open FILE, edit N:M, submit."),
        user("go"),
        submit,
        result(submit, "done"),
        transfer,
        result(transfer, "ok"),
    ]
    assert facts_of(messages, "mutation") == ["transfer_to_human_agents"]


def test_error_types_are_unresolved_until_the_same_command_runs_clean() -> None:
    messages = [
        user("task"),
        *bash("python repro.py", TRACEBACK),
        *bash("grep -n ValueError x.py", "3:    raise ValueError('x')"),
        *bash("python other.py", "<returncode>127</returncode>\nbash: javac: command not found"),
        *bash("pytest", "E   ModuleNotFoundError: No module named 'yaml'"),
        *bash("python repro.py", "all fine"),
    ]
    assert facts_of(messages, "error_type") == [
        "ModuleNotFoundError",
        "No module named",
        "command not found",
    ]
    assert _probes.error_types("KeyError: 'k'\n") == ["KeyError"]
    java = (
        'Exception in thread "main" java.lang.IllegalStateException: closed\n'
        "\tat Main.run(Main.java:5)\n"
        "Caused by: java.io.IOException: gone\n"
    )
    assert _probes.error_types(java) == ["IllegalStateException", "IOException"]


def test_every_fact_has_a_family() -> None:
    assert set(_probes.KEY_KINDS) | set(_probes.WORKING_KINDS) == set(_probes.FACT_KINDS)
    assert not set(_probes.KEY_KINDS) & set(_probes.WORKING_KINDS)
    assert _probes.Fact("diff_line", "x").family == "working"
    assert _probes.Fact("first_request", "x").family == "key"


# ── matching ───────────────────────────────────────────────────────────────────


def test_a_fact_is_kept_as_typed_case_sensitively_whatever_the_whitespace() -> None:
    asked = call("bash", {"command": 'grep -n "def run" src/app.py'})
    messages = [
        user("Please fix\n\n   the   bug"),
        asked,
        result(asked, '{"note": "quoted \\"HAT136\\" here"}'),
    ]
    haystack = rendered_text(messages)
    assert is_kept(Fact("request", "Please fix the bug"), haystack)
    assert is_kept(Fact("command", 'grep -n "def run" src/app.py'), haystack)
    assert is_kept(Fact("record_id", 'quoted "HAT136" here'), haystack)
    assert not is_kept(Fact("request", "please fix the bug"), haystack)
    assert not is_kept(Fact("path", "src/other.py"), haystack)


_fragments = st.sampled_from(
    [
        "ls src/a.py",
        "cat ./b/c.txt",
        "Traceback (most recent call last):\n  File x\nKeyError: 'k'\n",
        "Error: no seat",
        "<returncode>1</returncode>\n",
        "```bash\nrm -rf build/\n```",
        '{"user_id": "ab_cd_123", "id": 12345}',
        "QuerySet.filter() #123 snake_case",
        "ZFA04Y",
        "edit 3:4\n    def run(self):\nend_of_edit\n",
        "open src/x.py\n",
        "cat > t.py <<'EOF'\nclass A:\n  pass\nEOF",
        "diff --git a/x b/x\n@@ -1 +1 @@ def f():\n-    old value\n+    new value\n",
        "python -m pytest -q\n",
        "=== 1 failed, 2 passed in 0.1s ===",
        "Ran 3 tests in 0.01s\n\nFAILED (errors=1)",
        "You must not book. I don't want it! Only cash.",
        "E   ModuleNotFoundError: No module named 'x'",
        "sed -i 's/a/b/' f.py",
        "1091:    def _serialize(self):",
        "\\",
        '"',
        "'",
        "\n",
        " ",
        "é",
    ]
)
_texts = st.lists(st.one_of(_fragments, st.text(max_size=8)), max_size=6).map("".join)


@st.composite
def _conversations(draw: st.DrawFn) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    for kind in draw(st.lists(st.sampled_from(["user", "assistant", "call"]), max_size=8)):
        if kind == "call":
            name = draw(
                st.sampled_from(["bash", "editor", "get_order", "edit", "cancel_order", "submit"])
            )
            key = draw(st.sampled_from(["command", "path", "order_id", "new_str", "input"]))
            asked = call(name, {key: draw(_texts)}, draw(st.none() | _texts))
            messages += [asked, result(asked, draw(_texts))]
        else:
            messages.append({"role": kind, "content": draw(_texts)})
    return messages


@settings(derandomize=True, max_examples=100, deadline=None)
@given(_conversations())
def test_every_fact_is_kept_by_the_whole_transcript(messages: list[dict[str, Any]]) -> None:
    haystack = rendered_text(messages)
    for fact in extract_facts(messages):
        assert is_kept(fact, haystack), fact
    counts = dict.fromkeys(_probes.FACT_KINDS, 0)
    for fact in extract_facts(messages):
        counts[fact.kind] += 1
    assert counts["request"] <= 1
    assert counts["first_request"] <= 1
    assert counts["command"] <= _probes.MAX_COMMANDS
    assert counts["edited_symbol"] <= _probes.MAX_EDITED
    assert counts["test_command"] <= 1
    assert counts["test_result"] <= _probes.MAX_TEST_RESULTS
    assert counts["last_value"] <= _probes.MAX_VALUES
    assert counts["diff_line"] <= _probes.MAX_DIFF_LINES
    assert counts["constraint"] <= _probes.MAX_CONSTRAINTS
    assert counts["mutation"] <= _probes.MAX_MUTATIONS
    assert counts["error_type"] <= _probes.MAX_ERROR_TYPES


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | _texts,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_texts, inner, max_size=3),
    max_leaves=8,
)


@st.composite
def _odd_messages(draw: st.DrawFn) -> list[Any]:
    """Messages as a careless converter might write them: any shape, any value."""
    messages: list[Any] = []
    for _ in range(draw(st.integers(0, 6))):
        message: dict[str, Any] = {
            "role": draw(st.sampled_from(["user", "assistant", "tool", "system", "other"])),
            "content": draw(
                st.none()
                | _texts
                | st.lists(st.fixed_dictionaries({"type": st.just("text"), "text": _texts}))
                | st.integers()
            ),
        }
        if draw(st.booleans()):
            arguments = draw(_texts | _json_values.map(json.dumps) | _json_values)
            function = draw(
                st.fixed_dictionaries(
                    {"name": st.none() | _texts | st.integers(), "arguments": st.just(arguments)}
                )
                | st.none()
                | _texts
            )
            message["tool_calls"] = draw(
                st.lists(
                    st.fixed_dictionaries({"id": st.none() | _texts, "function": st.just(function)})
                    | _texts,
                    max_size=2,
                )
                | st.none()
                | _texts
                | st.integers()
            )
        if draw(st.booleans()):
            message["tool_call_id"] = draw(st.none() | _texts)
        messages.append(message)
    if draw(st.booleans()):
        odd: Any = draw(st.one_of(st.none(), _texts, st.integers()))
        messages.append(odd)  # not a message at all
    return messages


@settings(derandomize=True, max_examples=200, deadline=None)
@given(_odd_messages())
def test_the_probes_never_fail_on_odd_input(messages: list[Any]) -> None:
    facts = extract_facts(messages)
    haystack = rendered_text(messages)
    for fact in facts:
        assert fact.text
        assert is_kept(fact, haystack), fact


# ── the real transcripts ───────────────────────────────────────────────────────


def test_real_transcripts_yield_facts_their_own_text_keeps(dataset_dir: Path) -> None:
    files = sorted(dataset_dir.glob("*.jsonl"))
    assert files
    seen = 0
    for path in files:
        for line in path.read_text(encoding="utf-8").splitlines():
            conversation = json.loads(line)
            messages = conversation["messages"]
            facts = extract_facts(messages)
            kinds = {fact.kind for fact in facts}
            assert "request" in kinds, conversation["id"]
            if path.name == SWE:
                assert {"path", "command", "identifier"} <= kinds, conversation["id"]
            haystack = rendered_text(messages)
            assert all(is_kept(fact, haystack) for fact in facts), conversation["id"]
            seen += 1
    assert seen >= 2


def test_the_transcript_read_as_sessionstore_imports_it_keeps_its_facts(dataset_dir: Path) -> None:
    """What the strategies start from (the parsed line, rendered back) loses no fact."""
    for path in sorted(dataset_dir.glob("*.jsonl")):
        for line in path.read_bytes().splitlines():
            conversation = parse_conversation_line(line)
            messages = [message for loop in conversation.loops for message in loop]
            haystack = rendered_text(to_openai(messages))
            for fact in extract_facts(json.loads(line)["messages"]):
                assert is_kept(fact, haystack), (conversation.session_id, fact)


# ── the strategies' floor and the guarantee check ──────────────────────────────


def test_pairing_problems_finds_orphans_and_unanswered_calls() -> None:
    first = call("bash", {"command": "ls"})
    second = call("bash", {"command": "pwd"})
    good = [user("go"), first, result(first, "a"), second, result(second, "b")]
    assert quality.pairing_problems(good) == []
    assert quality.pairing_problems([user("go"), result(first, "a")]) != []
    assert quality.pairing_problems([user("go"), first, user("again")]) != []
    assert quality.pairing_problems([first]) != []
    assert quality.pairing_problems([first, result(first, "a"), result(first, "a")]) != []


def test_keep_newest_keeps_system_and_latest_request_and_whole_units() -> None:
    first = call("bash", {"command": "ls " + "x" * 400})
    second = call("bash", {"command": "pwd"})
    raw = [
        system("Be brief."),
        user("the task " * 20),
        first,
        result(first, "out " * 200),
        user("and now this"),
        second,
        result(second, "/repo"),
    ]
    messages = from_openai(raw)
    kept = quality.keep_newest(messages, 80)
    assert [m.kind for m in kept] == ["system", "user", "assistant", "tool_result"]
    assert to_openai(kept)[1]["content"] == "and now this"
    assert quality.pairing_problems(to_openai(kept)) == []
    everything = quality.keep_newest(messages, 10_000)
    assert everything == messages
    # Without room for the system message, the latest request still goes first.
    assert [m.kind for m in quality.keep_newest(messages, 8)] == ["user"]
    with pytest.raises(ContextOverflowError):
        quality.keep_newest(messages, 3)


def _outcome(by_kind: dict[str, list[int]] | None) -> dict[str, Any]:
    if by_kind is None:
        return {"outcome": "no_context", "seconds": 0.0}
    return {
        "outcome": "context",
        "ratio": 0.5,
        "kept": sum(k for k, _ in by_kind.values()),
        "facts": sum(n for _, n in by_kind.values()),
        "by_kind": by_kind,
        "violations": {},
        "seconds": 0.0,
    }


def test_families_and_goals_are_means_over_conversations_with_facts_of_the_family() -> None:
    tau = {
        "id": "a",
        "harness": "tau",
        "fact_counts": {"request": 1, "mutation": 2},
        "budgets": {
            "10": {
                "newest": _outcome({"request": [1, 1], "mutation": [0, 2]}),
                "legacy": _outcome({"request": [0, 1], "mutation": [1, 2]}),
                "summarize": _outcome({"request": [1, 1], "mutation": [2, 2]}),
            }
        },
    }
    swe = {
        "id": "b",
        "harness": "swe",
        "fact_counts": {"request": 1, "path": 3},
        "budgets": {
            "10": {
                "newest": _outcome({"request": [1, 1], "path": [3, 3]}),
                "legacy": _outcome({"request": [1, 1], "path": [0, 3]}),
                "summarize": _outcome(None),  # refused: keeps nothing
            }
        },
    }
    names = ["newest", "legacy", "summarize"]
    summary = quality.aggregate([tau, swe], names, 10)
    summarize = summary["strategies"]["summarize"]
    assert summarize["families"]["key"] == pytest.approx((1.0 + 0.0) / 2)
    assert summarize["families"]["working"] == pytest.approx(1.0)  # only tau has any
    assert summarize["by_kind"]["path"] == 0.0
    assert summarize["by_kind"]["diff_line"] is None
    assert summarize["no_context"] == 1
    harnesses = quality.aggregate_harnesses([tau, swe], names, 10)
    assert sorted(harnesses) == ["swe", "tau"]
    assert harnesses["tau"]["strategies"]["newest"]["families"]["working"] == 0.0
    checked = quality.goals(summary, harnesses)
    assert sorted(checked) == ["summarize"]  # the baselines are not judged
    entry = checked["summarize"]
    assert entry["valid"] == 1
    assert not entry["all_valid"]
    assert entry["families"]["working"]["meets_target"]
    assert entry["families"]["working"]["beats_baselines"]
    assert not entry["families"]["key"]["beats_baselines"]
    assert entry["harness_floor"]["below"] == {"swe": 0.0}
    lines = quality.render_goals(checked)
    assert "valid 1/2: MISSED" in lines[0]
    assert "every harness >= 80% of key facts: MISSED (swe 0.0%)" in lines[0]


def test_bad_options_are_refused_with_a_message(dataset_dir: Path, tmp_path: Path) -> None:
    base = ["--dataset", str(dataset_dir)]
    with pytest.raises(SystemExit):
        quality.parse_args([*base, "--show-lost", "-1"])
    with pytest.raises(SystemExit):
        quality.parse_args([*base, "--compare", str(tmp_path / "missing.json")])
    args = quality.parse_args([*base, "--file", "no_such_harness"])
    with pytest.raises(SystemExit, match="no_such_harness"):
        quality.load_tasks(args)
    args = quality.parse_args([*base, "--file", "tau_bench", "--quick"])
    assert {task.file for task in quality.load_tasks(args)} == {"tau_bench_gpt4o_airline.jsonl"}


def test_a_comparison_gives_the_points_gained_per_family_and_kind() -> None:
    def run(key: float, path: float | None) -> dict[str, Any]:
        by_kind: dict[str, float | None] = dict.fromkeys(_probes.FACT_KINDS, None)
        by_kind["path"] = path
        strategy = {"families": {"key": key, "working": None}, "by_kind": by_kind}
        return {
            "command": "python bench/quality.py",
            "facts": {"path": 3},
            "budgets": [{"percent": 10, "strategies": {"summarize": strategy}}],
        }

    lines = quality.render_comparison(run(0.80, 0.5), run(0.75, None))
    (row,) = [line for line in lines if line.startswith("| summarize |")]
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    assert cells[:3] == ["summarize", "+5.0", "-"]
    assert cells[3 + _probes.FACT_KINDS.index("path")] == "-"  # nothing to compare with
    assert quality.render_comparison(run(0.8, 0.5), {"budgets": []})[-1].startswith("Earlier")


def test_quality_quick_run_has_no_violation_for_the_floor(
    dataset_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "quality.json"
    command = [
        sys.executable,
        str(ROOT / "bench" / "quality.py"),
        "--dataset",
        str(dataset_dir),
        "--quick",
        "--strategy",
        "newest",
        "--strategy",
        "legacy",
        "--jobs",
        "1",
        "--json",
        str(out),
    ]
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "| newest |" in done.stdout
    assert "| default |" not in done.stdout
    results = json.loads(out.read_text())
    assert results["config"]["strategies"] == ["newest", "legacy"]
    assert len(results["conversations"]) == 3 * len(results["config"]["files"])
    for summary in results["budgets"]:
        floor = summary["strategies"]["newest"]
        assert floor["violations"] == 0
        assert floor["ratio_max"] <= 1
        assert 0 < floor["facts_kept"] <= 1
        assert 0 < floor["families"]["key"] <= 1
        assert 0 < floor["families"]["working"] <= 1
        harnesses = results["harnesses"][str(summary["percent"])]
        assert sorted(harnesses) == [
            name.removesuffix(".jsonl") for name in results["config"]["files"]
        ]
        assert sum(h["conversations"] for h in harnesses.values()) == summary["conversations"]
    kinds = {fact["kind"] for c in results["conversations"] for fact in c["facts"]}
    assert {"first_request", "edited_symbol", "constraint", "mutation"} <= kinds
    assert done.stderr.count("] ") >= len(results["conversations"])
    assert "Per harness (dataset file)" in done.stdout
    assert "Working-state facts, by kind:" in done.stdout


def test_quality_runs_the_command_line_on_one_harness_and_shows_what_is_lost(
    dataset_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "quality.json"
    command = [
        sys.executable,
        str(ROOT / "bench" / "quality.py"),
        "--dataset",
        str(dataset_dir),
        "--quick",
        "--file",
        "tau_bench",
        "--strategy",
        "summarize-cli",
        "--strategy",
        "newest",
        "--budgets",
        "10",
        "--show-lost",
        "2",
        "--jobs",
        "1",
        "--json",
        str(out),
    ]
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    results = json.loads(out.read_text())
    assert results["config"]["files"] == ["tau_bench_gpt4o_airline.jsonl"]
    assert {c["harness"] for c in results["conversations"]} == {"tau_bench_gpt4o_airline"}
    (summary,) = results["budgets"]
    cli = summary["strategies"]["summarize-cli"]
    assert cli["violations"] == 0
    assert cli["ratio_max"] <= 1
    assert "- `summarize-cli`:" in done.stdout  # the goals, said for the strategy
    lost = [
        fact
        for c in results["conversations"]
        for fact in c["budgets"]["10"].get("newest", {}).get("lost", [])
    ]
    assert lost  # the floor loses something at 10%, and says what
    assert {"kind", "family", "text"} <= set(lost[0])
    assert "### Lost by `newest` at 10%" in done.stdout


def test_the_cli_strategy_builds_a_valid_context_within_the_budget() -> None:
    first = call("get_order", {"order_id": "#W2378156"})
    raw = [
        system("You are a shop assistant."),
        user("Where is my order #W2378156? " + "Please hurry. " * 30),
        first,
        result(first, json.dumps({"status": "shipped", "log": "x " * 400})),
        assistant("It has shipped."),
        user("Then cancel the other one, #W1111111."),
    ]
    line = json.dumps({"id": "conv-1", "messages": raw}).encode()
    messages = from_openai(raw)
    case = quality.Case("conv-1", messages, [messages], line)
    budget = sum(message_tokens(m) for m in messages) // 2
    context = quality.Cli().run(case, budget)
    rendered = to_openai(context)
    assert quality.sent_tokens(rendered) <= budget
    assert quality.pairing_problems(rendered) == []
    assert "Then cancel the other one, #W1111111." in rendered_text(rendered)
    with pytest.raises(ContextOverflowError):
        quality.Cli().run(case, 5)
