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

from sessionstore.errors import ContextOverflowError
from sessionstore.formats import from_openai, to_openai

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
        "========== 1 failed, 4 passed in 0.12s ==========",
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
        "========== 1 failed, 4 passed in 0.12s ==========",
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
            name = draw(st.sampled_from(["bash", "editor", "get_order"]))
            key = draw(st.sampled_from(["command", "path", "order_id"]))
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
    assert counts["command"] <= _probes.MAX_COMMANDS


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
    assert done.stderr.count("] ") >= len(results["conversations"])
