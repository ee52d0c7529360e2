"""ExtractiveSummarizer: the structured handoff, iterative updates, focus, scope and budget."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sessionstore._tokens import estimate_tokens
from sessionstore.formats import from_openai
from sessionstore.models import (
    AssistantMessage,
    BashExecutionMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    CustomMessage,
    ImageContent,
    Message,
    SystemMessage,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from sessionstore.summarizers import (
    HANDOFF_SECTIONS,
    ExtractiveSummarizer,
    Summarizer,
    SummaryRequest,
    _scan,
)
from sessionstore.summarizers._extractive import EXTRACTIVE_PROMPT_VERSION
from sessionstore.summarizers._fit import fit_handoff
from sessionstore.summarizers._handoff import (
    BRANCH_HEADER,
    Item,
    parse_handoff,
    render_handoff,
)
from sessionstore.summarizers._handoff_merge import merge_handoffs
from sessionstore.summarizers._said import asks_the_user

BUDGET = 2_000


def digest(messages: list[Message], **options: Any) -> str:
    options.setdefault("budget_tokens", BUDGET)
    request = SummaryRequest(messages=messages, **options)
    return asyncio.run(ExtractiveSummarizer().summarize(request)).text


def section(text: str, heading: str) -> str:
    """Return the body of one `## heading` section ("" when absent)."""
    match = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    return match.group(1).strip() if match else ""


def call(call_id: str, name: str, **arguments: Any) -> AssistantMessage:
    return AssistantMessage(content=[ToolCall(id=call_id, name=name, arguments=arguments)])


def result(
    call_id: str, text: str, *, name: str = "bash", is_error: bool = False
) -> ToolResultMessage:
    return ToolResultMessage(tool_call_id=call_id, tool_name=name, content=text, is_error=is_error)


TRACEBACK = """<returncode>1</returncode>
<output>
Traceback (most recent call last):
  File "/repo/src/io.py", line 12, in <module>
    main()
  File "/repo/src/io.py", line 9, in main
    raise ValueError("bad header")
ValueError: bad header
</output>"""

PYTEST_FAILED = """============ FAILURES ============
>       assert read(path) == 4
E       AssertionError: assert 3 == 4

tests/test_io.py:17: AssertionError
tests/test_io.py:17: in test_read
FAILED tests/test_io.py::test_read - AssertionError: assert 3 == 4
======== 1 failed, 4 passed in 0.12s ========
Exit code: 1"""


def coding_session() -> list[Message]:
    return [
        SystemMessage(content="You are a coding agent. You must never push to main."),
        UserMessage(content="Fix `parse_header` in src/io.py: ticket #4821 says it crashes."),
        AssistantMessage(content="I'll look at the file first."),
        call("c1", "bash", command="cat src/io.py"),
        result("c1", "<returncode>0</returncode>\n<output>\n" + "line\n" * 120 + "</output>"),
        call("c2", "bash", command="python src/io.py"),
        result("c2", TRACEBACK),
        call("c3", "str_replace_editor", command="str_replace", path="src/io.py", old_str="a"),
        result("c3", "The file src/io.py has been edited.", name="str_replace_editor"),
        call("c4", "bash", command="cd /repo && python -m pytest tests/test_io.py"),
        result("c4", PYTEST_FAILED),
        AssistantMessage(content="The header check is still off by one. Next I will fix the loop."),
        UserMessage(content="The public API must not change. Make the tests pass."),
    ]


# ── the protocol and the document ──────────────────────────────────────────────


def test_is_a_summarizer_with_provenance() -> None:
    summarizer = ExtractiveSummarizer()
    assert isinstance(summarizer, Summarizer)
    request = SummaryRequest(messages=[UserMessage(content="hello")])
    summary = asyncio.run(summarizer.summarize(request))
    assert summary.model == "extractive"
    assert summary.prompt_version == EXTRACTIVE_PROMPT_VERSION
    assert summary.duration_ms >= 0
    assert repr(summarizer) == "ExtractiveSummarizer()"


def test_sections_use_the_seed_headings_in_order() -> None:
    text = digest(coding_session())
    headings = re.findall(r"^## (.+)$", text, re.M)
    assert set(headings) <= set(HANDOFF_SECTIONS)
    assert headings == sorted(headings, key=HANDOFF_SECTIONS.index)
    assert headings[0] == "Active Task"
    for expected in ("Goal", "Constraints & Preferences", "Completed Actions", "Blocked"):
        assert expected in headings


def test_empty_input_says_there_is_no_task() -> None:
    assert digest([]) == "## Active Task\nNone."


def test_task_snapshot_is_the_latest_request_verbatim() -> None:
    request = "Now  refactor the auth module\n\nto use JWT instead of sessions."
    messages: list[Message] = [
        UserMessage(content="Set up the project."),
        AssistantMessage(content="Done."),
        UserMessage(content=request),
    ]
    text = digest(messages)
    assert section(text, "Active Task") == request
    assert section(text, "Goal") == "Set up the project."


def test_short_replies_and_answers_follow_the_request() -> None:
    messages: list[Message] = [
        UserMessage(content="Book a flight to Seattle on May 20th."),
        AssistantMessage(content="Could you give me your user id?"),
        UserMessage(content="It is mia_li_3668."),
        AssistantMessage(content="Shall I book HAT136 for $255?"),
        UserMessage(content="Yes, go ahead."),
    ]
    task = section(digest(messages), "Active Task")
    assert task.startswith("Book a flight to Seattle on May 20th.")
    assert 'Later the user said: "It is mia_li_3668."' in task
    assert task.endswith('Later the user said: "Yes, go ahead."')


def test_an_answer_to_an_assistant_asking_without_a_question_mark_follows_the_request() -> None:
    """ "Please provide your user ID" waits for the user as a question does (tau-bench)."""
    request = (
        "Could you help me change my most recent reservation to the cheapest business "
        "round trip without changing the dates?"
    )
    messages: list[Message] = [
        UserMessage(content="Hi, what are my gift card balances?"),
        AssistantMessage(content="Your gift card holds $120."),
        UserMessage(content=request),
        AssistantMessage(content="Please provide your user ID, and I'll look up the booking."),
        UserMessage(content="Sure, my user ID is mohamed_silva_9265. Can you assist with that?"),
        AssistantMessage(content="Let me know which of the two reservations you mean."),
        UserMessage(content="The one to Seattle. How much will it cost?"),
    ]
    task = section(digest(messages), "Active Task")
    assert task.startswith(request)
    assert 'Later the user said: "Sure, my user ID is mohamed_silva_9265.' in task
    assert task.endswith('Later the user said: "The one to Seattle. How much will it cost?"')


@pytest.mark.parametrize(
    ("sentence", "asks"),
    [
        ("Please provide your user ID, and I'll retrieve your reservations.", True),
        ("Let me know if you want the refund to the original card.", True),
        ("Could you share the full traceback.", True),
        ("Kindly confirm the passenger names.", True),
        ("Would you like to proceed?", True),
        ("Please note that basic economy cannot be changed.", False),
        ("I have cancelled reservation K1NW8N.", False),
        ("The payment will be split across your certificates.", False),
    ],
)
def test_what_asks_the_user_for_an_answer(sentence: str, asks: bool) -> None:
    assert asks_the_user(sentence) is asks


def test_harness_format_feedback_is_not_a_request() -> None:
    feedback = (
        "Please always provide EXACTLY ONE action in triple backticks, found 2 actions.\n"
        "Please format your action in triple backticks as shown in <response_example>."
    )
    messages: list[Message] = [
        UserMessage(content="Fix the bug in utils/numberformat.py"),
        AssistantMessage(content="```bash\nls\n```\n```bash\npwd\n```"),
        UserMessage(content=feedback),
    ]
    task = section(digest(messages), "Active Task")
    assert task.startswith("Fix the bug in utils/numberformat.py")
    assert "found 2 actions" in task  # kept short, as the last thing the user side said


def test_completed_actions_name_action_target_outcome_and_tool() -> None:
    actions = section(digest(coding_session()), "Completed Actions").splitlines()
    assert actions == [
        "1. READ cat src/io.py - exit 0, 120 lines [tool: bash]",
        "2. RAN python src/io.py - exit 1, ValueError: bad header [tool: bash]",
        "3. EDITED src/io.py - ok [tool: str_replace_editor]",
        "4. TESTED cd /repo && python -m pytest tests/test_io.py - exit 1, 1 failed, 4 passed"
        " [tool: bash]",
    ]


def test_domain_tools_read_as_verbs_with_their_ids() -> None:
    record = {"reservation_id": "ZFA04Y", "user_id": "mia_li_3668", "status": "ok"}
    messages: list[Message] = [
        UserMessage(content="Please cancel my reservation ZFA04Y."),
        call("t1", "cancel_reservation", reservation_id="ZFA04Y"),
        result("t1", json.dumps(record), name="cancel_reservation"),
        call("t2", "search_direct_flight", origin="JFK", destination="SEA"),
        result("t2", json.dumps([{"flight_number": "HAT069"}, {"flight_number": "HAT083"}])),
        call("t3", "book_reservation", user_id="mia_li_3668"),
        result("t3", "Error: payment method certificate_7504069 not found"),
    ]
    text = digest(messages)
    actions = section(text, "Completed Actions").splitlines()
    assert actions[0].startswith("1. CANCELLED reservation (reservation_id=ZFA04Y) - ok:")
    assert actions[1] == (
        "2. SEARCHED direct flight (origin=JFK, destination=SEA) - 2 results: HAT069, HAT083"
        " [tool: search_direct_flight]"
    )
    assert "Error: payment method certificate_7504069 not found" in section(text, "Blocked")


def test_mini_swe_agent_commands_in_fenced_blocks_are_actions() -> None:
    messages: list[Message] = [
        UserMessage(content="Fix the crash in pkg/core.py"),
        AssistantMessage(
            content="THOUGHT: run the tests.\n\n```bash\npytest tests/test_core.py\n```"
        ),
        UserMessage(content="<returncode>1</returncode>\n<output>\n" + PYTEST_FAILED + "</output>"),
        AssistantMessage(content="Let me suggest:\n```bash\nrm -rf /\n```"),
        UserMessage(content="No, do not run that. Just explain the failure."),
    ]
    text = digest(messages)
    actions = section(text, "Completed Actions").splitlines()
    # The second block was only shown to the user, never run: it is no action.
    assert actions == [
        "1. TESTED pytest tests/test_core.py - exit 1, 1 failed, 4 passed [tool: bash]"
    ]
    assert section(text, "Active Task").endswith(
        'Later the user said: "No, do not run that. Just explain the failure."'
    )
    assert "tests/test_core.py" in section(text, "Relevant Files")


def test_blocked_keeps_the_exact_error_lines_of_the_latest_failures() -> None:
    blocked = section(digest(coding_session()), "Blocked").splitlines()
    assert blocked == [
        "- action 2 failed (exit 1); 2 action(s) since:",
        '- File "/repo/src/io.py", line 9, in main',
        "- ValueError: bad header",
        "- action 4 failed (exit 1):",
        "- E       AssertionError: assert 3 == 4",
        "- tests/test_io.py:17: AssertionError",  # where it failed (pytest's location line)
        "- FAILED tests/test_io.py::test_read - AssertionError: assert 3 == 4",
    ]


def unittest_failure(test: str, assertion: str) -> str:
    return (
        f"<returncode>1</returncode>\n<output>\nFAIL: {test} (app.tests.Case)\n"
        f'Traceback (most recent call last):\n  File "/repo/app/tests.py", line 9, in {test}\n'
        f"{assertion}\n\nRan 12 tests in 0.1s\n\nFAILED (failures=1)\n</output>"
    )


def test_an_older_resolved_failure_keeps_its_assertion_not_the_tally() -> None:
    run = "python tests/runtests.py app"
    messages: list[Message] = [
        UserMessage(content="Fix the totals in app/report.py."),
        call("c1", "bash", command=run),
        result("c1", unittest_failure("test_sum", "AssertionError: 4003 != 300")),
        call("c2", "bash", command=run),
        result("c2", unittest_failure("test_avg", "AssertionError: 1.5 != 2.0")),
        call("c3", "bash", command=run),
        result("c3", "<returncode>0</returncode>\n<output>\nRan 12 tests in 0.1s\n\nOK\n</output>"),
    ]
    blocked = section(digest(messages), "Blocked").splitlines()
    assert blocked[0].startswith("- resolved by action 3: action 1 failed (exit 1):")
    assert blocked[0].endswith(": AssertionError: 4003 != 300")
    assert "FAILED (failures=1)" in blocked[1]  # the newest keeps its last lines, tally too
    assert "AssertionError: 1.5 != 2.0" in blocked[1]


def test_a_script_reporting_the_error_it_expected_printed_no_error() -> None:
    run = "python test_fix.py"
    output = (
        "<returncode>0</returncode>\n<output>\nTest 1 passed\n"
        "Test 2 passed: Caught expected error: Dimension of t1 is Dimension(time)\n"
        "ValueError raised as expected\n</output>"
    )
    messages: list[Message] = [
        UserMessage(content="Make the dimension check accept equivalent dimensions."),
        call("c1", "bash", command=run),
        result("c1", "<returncode>1</returncode>\n<output>\nAttributeError: no 'dim'\n</output>"),
        call("c2", "bash", command=run),
        result("c2", output),
    ]
    blocked = section(digest(messages), "Blocked")
    assert "printed errors" not in blocked
    # The clean run resolves the crash before it.
    assert blocked == "- resolved by action 2: action 1 failed (exit 1): AttributeError: no 'dim'"
    # An error report that mentions what was expected is still one.
    failing = "<returncode>1</returncode>\n<output>\nAssertionError: expected error not raised\n"
    blocked = section(
        digest([*messages, call("c3", "bash", command=run), result("c3", failing)]), "Blocked"
    )
    assert "- AssertionError: expected error not raised" in blocked.splitlines()


def test_relevant_files_are_every_path_touched_once_in_order_of_last_touch() -> None:
    files = section(digest(coding_session()), "Relevant Files").splitlines()
    # src/io.py is also /repo/src/io.py (a traceback); the longer spelling stands for both.
    # /repo, listed as the working directory, is named by the file under it.
    assert files == ["- /repo/src/io.py (edited)", "- tests/test_io.py"]


def test_a_directory_is_listed_once_and_only_when_no_file_under_it_is() -> None:
    messages: list[Message] = [
        UserMessage(content="Tidy the docs."),
        call("l1", "list_dir", path="docs/"),
        result("l1", "index.md\napi.md", name="list_dir"),
        call("l2", "list_dir", path="docs"),
        result("l2", "index.md\napi.md", name="list_dir"),
        call("l3", "list_dir", path="src/"),
        result("l3", "app.py", name="list_dir"),
        call("r1", "read_file", path="src/app.py"),
        result("r1", "x = 1", name="read_file"),
    ]
    files = section(digest(messages), "Relevant Files").splitlines()
    assert files == ["- docs", "- src/app.py"]


def test_a_log_pasted_in_the_request_gives_no_time_stamps_to_keep() -> None:
    stamps = "\n".join(f"2025-03-14T17:18:{s:02} WARNING slow query on payouts" for s in range(9))
    for pasted in (f"```\n{stamps}\n```", stamps):
        request = (
            f"Monthly totals are off since 2025-03-01; ticket #4821. Here's the log:\n{pasted}"
        )
        text = digest([UserMessage(content=request), AssistantMessage(content="Looking.")])
        kept = text.replace(section(text, "Goal"), "").replace(section(text, "Active Task"), "")
        assert not re.search(r"\b\d\dT\d\d\b|T17:18", kept), kept
    # The dates of the user's own words are still facts; a time stamp or two as well.
    assert _scan.record_values("Since 2025-03-01 at 2025-03-01T09:15?", from_user=True) == [
        "2025-03-01",
        "2025-03-01T09:15",
    ]
    assert _scan.record_values("see 14T17 and HAT136") == ["HAT136"]


def test_constraints_come_from_user_and_system_messages() -> None:
    constraints = section(digest(coding_session()), "Constraints & Preferences")
    assert constraints == "- You must never push to main."
    # The user's "must not change" is in the task snapshot, so it is not repeated.
    assert "The public API must not change." in section(digest(coding_session()), "Active Task")


def test_critical_context_keeps_identifiers_not_shown_elsewhere() -> None:
    order = {
        "order_id": "ORD-77",
        "items": [{"sku": "ZFA04Y"}],
        "uuid": "0" * 8 + "-1111-2222-3333-" + "4" * 12,
    }
    messages: list[Message] = [
        UserMessage(content="Hi, where is my order #98765 placed on 2024-05-15? It was $305."),
        call("o1", "get_order", email="mia.li@example.com"),
        result("o1", json.dumps(order), name="get_order"),
        UserMessage(content="And what about the other one?"),
    ]
    text = digest(messages)
    critical = section(text, "Critical Context")
    for value in ("#98765", "2024-05-15", "$305"):
        assert value in section(text, "Goal")  # shown there, so not repeated
        assert value not in critical
    # The action line names the first ids of the result; the rest is listed by key.
    action = section(text, "Completed Actions")
    assert "email=mia.li@example.com" in action
    assert "order_id=ORD-77" in action
    assert "00000000-1111-2222-3333-444444444444" in action
    assert critical == "- sku: ZFA04Y"


def test_questions_resolved_and_pending() -> None:
    messages: list[Message] = [
        UserMessage(content="Which Python version does CI use? Also add a changelog entry."),
        AssistantMessage(content="CI uses Python 3.11."),
        UserMessage(content="Thanks. Can you also bump the version?"),
    ]
    text = digest(messages)
    assert "Which Python version does CI use? -> CI uses Python 3.11." in text
    assert section(text, "Resolved Questions")
    # The pending ask is the active task itself, so it is not repeated.
    assert "Can you also bump the version?" in section(text, "Active Task")


def test_remaining_work_is_what_is_left_to_do_not_a_time_of_the_next_day() -> None:
    messages: list[Message] = [
        UserMessage(content="Find me a flight from SFO to JFK on May 17."),
        AssistantMessage(
            content="Here are the options from SFO to JFK on May 17. Option 1:\n"
            "- Departure: 20:00 PST\n- Arrival: 03:00 EST (next day)\n"
            "Next, I will book the option you choose."
        ),
    ]
    remaining = section(digest(messages), "Remaining Work")
    assert "Next, I will book the option you choose." in remaining
    assert "next day" not in remaining


def test_in_progress_lists_calls_still_waiting() -> None:
    messages: list[Message] = [
        UserMessage(content="Run it."),
        call("w1", "bash", command="make build"),
    ]
    assert "Waiting for the result of 1. RAN make build" in digest(messages)


def test_other_message_kinds_are_read_or_skipped_safely() -> None:
    messages: list[Message] = [
        UserMessage(content=[TextContent(text="Look at this screenshot of app/main.go"), image()]),
        AssistantMessage(content=[ThinkingContent(thinking="hmm"), TextContent(text="OK.")]),
        BashExecutionMessage(
            command="go test ./...", output="FAIL\texample.com/app\n", exit_code=1
        ),
        CustomMessage(custom_type="note", data={"x": 1}),
        call("k1", "think", thought="The root cause is the nil map because it is never made."),
        result("k1", "", name="think"),
    ]
    text = digest(messages)
    assert "1. TESTED go test ./... - exit 1" in text
    assert "[tool: user shell]" in text
    assert "The root cause is the nil map" in section(text, "Key Decisions")
    assert "2." not in section(text, "Completed Actions")


def image() -> ImageContent:
    return ImageContent(url="https://example.org/x.png")


# ── iterative updates ──────────────────────────────────────────────────────────


def test_prior_digest_is_updated_not_restarted() -> None:
    first = digest(coding_session())
    later: list[Message] = [
        call("c5", "bash", command="sed -i 's/<=/</' src/io.py"),
        result("c5", "<returncode>0</returncode>\n<output>\n</output>"),
        UserMessage(content="Also update docs/io.md."),
    ]
    text = digest(later, prior_digest=first)
    assert section(text, "Active Task") == "Also update docs/io.md."
    assert section(text, "Goal") == section(first, "Goal")
    assert "You must never push to main." in text
    actions = section(text, "Completed Actions").splitlines()
    assert actions[:4] == section(first, "Completed Actions").splitlines()
    assert actions[4] == "5. EDITED sed -i 's/<=/</' src/io.py - exit 0 [tool: bash]"
    files = section(text, "Relevant Files")
    assert files.index("/repo/src/io.py") > files.index("tests/test_io.py")
    assert "docs/io.md" in files
    assert "ValueError: bad header" in section(text, "Blocked")  # no newer failure


def test_facts_survive_many_compactions() -> None:
    messages = coding_session()
    text = None
    for _ in range(12):
        text = digest(messages[:6], prior_digest=text, budget_tokens=600)
        text = digest(messages[6:], prior_digest=text, budget_tokens=600)
    assert text is not None
    assert estimate_tokens(text) <= 600
    assert "parse_header" in text
    assert "#4821" in text
    assert "/repo/src/io.py" in text
    assert "FAILED tests/test_io.py::test_read - AssertionError: assert 3 == 4" in text
    numbers = [int(n) for n in re.findall(r"^(?:\d+-)?(\d+)\. ", text, re.M)]
    assert max(numbers) == 12 * 4  # numbering continued across every update


def test_digests_among_the_messages_are_merged_like_a_prior() -> None:
    prior = digest(coding_session())
    messages: list[Message] = [
        CompactionSummaryMessage(summary=prior),
        UserMessage(content="Now release it."),
    ]
    text = digest(messages)
    assert section(text, "Active Task") == "Now release it."
    assert "/repo/src/io.py" in section(text, "Relevant Files")
    as_user = digest([UserMessage(content=prior), UserMessage(content="Go on.")])
    assert "4. TESTED" in as_user


def test_a_model_written_digest_and_the_seed_003_headings_parse() -> None:
    written = """[CONTEXT COMPACTION — REFERENCE ONLY] earlier turns below
## Active Task
User asked: "migrate the billing tables"

## Goal
Move billing
to PostgreSQL.

## Relevant Files
* db/migrations/0042_billing.sql — created
- billing/models.py
"""
    handoff = parse_handoff(written)
    assert handoff.task == 'User asked: "migrate the billing tables"'
    assert handoff.goal == "Move billing to PostgreSQL."
    assert [f.text for f in handoff.files] == [
        "db/migrations/0042_billing.sql — created",
        "billing/models.py",
    ]
    assert "migrate the billing tables" in digest([], prior_digest=written)
    seed_003 = """[session digest — older turns condensed]
# Objective
Move billing to PostgreSQL.
# Guardrails
- never drop a table
# Status (Shipped / Active / Stuck)
- stuck on the enum type
# Carryover
- 14 messages elided
"""
    handoff = parse_handoff(seed_003)
    assert handoff.goal == "Move billing to PostgreSQL."
    assert [i.text for i in handoff.constraints] == ["never drop a table"]
    assert [i.text for i in handoff.state] == ["stuck on the enum type"]
    assert [i.text for i in handoff.critical] == ["14 messages elided"]
    unknown = "Some free text digest without headings."
    assert unknown in digest([], prior_digest=unknown)


def test_a_task_that_reads_like_a_heading_survives_a_round_trip() -> None:
    request = "Write the README with these sections:\n## Goal\n## Usage"
    text = digest([UserMessage(content=request)])
    assert parse_handoff(text).task == request


# ── focus topic, scope, budget ─────────────────────────────────────────────────


def many_files_session(count: int = 60) -> list[Message]:
    messages: list[Message] = [UserMessage(content="Tidy the repository.")]
    for i in range(count):
        area = "billing" if i == 3 else f"area{i}"
        messages += [
            call(f"f{i}", "bash", command=f"cat src/{area}/module_{i}.py"),
            result(f"f{i}", "<returncode>0</returncode>\n<output>\nx = 1\n</output>"),
        ]
    return messages


def test_focus_topic_items_are_kept_first_when_trimming() -> None:
    messages = many_files_session()
    plain = digest(messages, budget_tokens=250)
    focused = digest(messages, budget_tokens=250, focus_topic="billing")
    assert "src/billing/module_3.py" not in plain
    assert "src/billing/module_3.py" in focused
    assert estimate_tokens(focused) <= 250


def test_focus_topic_with_control_characters_is_safe() -> None:
    text = digest(many_files_session(), budget_tokens=300, focus_topic="bil\x00ling\x1b[31m\ud800")
    assert estimate_tokens(text) <= 300


def test_branch_scope_says_the_branch_was_abandoned() -> None:
    text = digest(coding_session(), scope="branch")
    assert text.splitlines()[0] == BRANCH_HEADER
    assert parse_handoff(text).task == section(text, "Active Task")
    assert not digest(coding_session()).startswith("[")


def test_older_actions_collapse_into_runs_when_over_budget() -> None:
    text = digest(many_files_session(), budget_tokens=700)
    actions = section(text, "Completed Actions").splitlines()
    assert estimate_tokens(text) <= 700
    assert any(re.match(r"^\d+-\d+\. ", line) for line in actions)
    assert actions[-1] == "60. READ cat src/area59/module_59.py - exit 0, 1 line [tool: bash]"


def test_a_task_too_long_for_the_budget_is_cut_in_the_middle() -> None:
    request = "START of the request. " + "filler words " * 2_000 + "the END."
    text = digest([UserMessage(content=request)], budget_tokens=300)
    task = section(text, "Active Task")
    assert task.startswith("START of the request.")
    assert task.endswith("the END.")
    assert re.search(r"\[… \d+ characters cut …\]", task)
    assert estimate_tokens(text) <= 300


def test_a_task_within_half_the_budget_is_never_cut() -> None:
    request = "Please do this exact thing: " + "step " * 110
    text = digest([*many_files_session(), UserMessage(content=request)], budget_tokens=300)
    assert section(text, "Active Task") == request.strip()
    longer = request + "step " * 80
    text = digest([*many_files_session(), UserMessage(content=longer)], budget_tokens=300)
    assert "characters cut" in section(text, "Active Task")  # past half: facts come first
    assert "src/area59/module_59.py" in text


def test_huge_outputs_and_odd_text_are_handled() -> None:
    huge = "x" * 2_000_000 + "\nValueError: at the end\n"
    # (a lone surrogate is refused by the models, so no message can hold one)
    odd = "ctrl \x00\x07 bytes \ufffd and \x1b[31mred\x1b[0m \r progress\r100%"
    messages: list[Message] = [
        UserMessage(content=odd),
        call("h1", "bash", command="python gen.py"),
        result("h1", huge, is_error=True),
        call("h2", "weird tool!", arguments="{not json"),
        result("h2", odd),
        ToolResultMessage(tool_call_id="orphan", tool_name="", content="ok"),
    ]
    text = digest(messages, budget_tokens=500)
    assert estimate_tokens(text) <= 500
    assert "ValueError: at the end" in text
    assert "\x00" not in text
    text.encode()  # no lone surrogates left


def test_tiny_budgets_are_never_exceeded() -> None:
    for budget in (1, 2, 5, 17, 60, 199):
        text = digest(coding_session(), budget_tokens=budget)
        assert estimate_tokens(text) <= budget


def test_the_same_request_gives_the_same_text() -> None:
    assert digest(coding_session(), budget_tokens=300) == digest(
        coding_session(), budget_tokens=300
    )


# ── property: any messages, any budget ─────────────────────────────────────────

ODD_TEXT = st.one_of(
    st.text(max_size=200),
    st.sampled_from(
        [
            "",
            "\ufffd\U0001f600",
            "## Active Task\n## Goal",
            "Traceback (most recent call last):\nValueError: x",
            "<returncode>1</returncode>",
            "Error: nope",
            "src/a.py ZFA04Y mia_li_3668 #12 2024-05-20 $5",
        ]
    ),
    st.text(alphabet="ab /._-\n#`:", max_size=3_000),
)
IDS = st.sampled_from(["c1", "c2", "c3"])
NAMES = st.sampled_from(["bash", "read_file", "book_reservation", "think", "x"])


def arguments() -> st.SearchStrategy[str]:
    return st.one_of(
        ODD_TEXT,
        st.builds(lambda c: json.dumps({"command": c}), ODD_TEXT),
        st.builds(lambda p: json.dumps({"path": p, "view_range": [1, 2]}), ODD_TEXT),
    )


MESSAGES = st.one_of(
    st.builds(lambda t: UserMessage(content=t), ODD_TEXT),
    st.builds(lambda t: SystemMessage(content=t), ODD_TEXT),
    st.builds(lambda t: AssistantMessage(content=t), ODD_TEXT),
    st.builds(
        lambda i, n, a: AssistantMessage(content=[ToolCall(id=i, name=n, arguments=a)]),
        IDS,
        NAMES,
        arguments(),
    ),
    st.builds(
        lambda i, t, e: ToolResultMessage(tool_call_id=i, content=t, is_error=e),
        IDS,
        ODD_TEXT,
        st.booleans(),
    ),
    st.builds(
        lambda c, o, x: BashExecutionMessage(command=c, output=o, exit_code=x),
        ODD_TEXT,
        ODD_TEXT,
        st.none() | st.integers(-2, 2),
    ),
    st.builds(lambda t: CompactionSummaryMessage(summary=t), ODD_TEXT),
    st.builds(lambda t: BranchSummaryMessage(summary=t), ODD_TEXT),
)


@settings(
    derandomize=True,
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.large_base_example],
)
@given(
    messages=st.lists(MESSAGES, max_size=25),
    budget=st.integers(200, 3_000),
    prior=st.none() | ODD_TEXT,
    focus=st.none() | ODD_TEXT,
    scope=st.sampled_from(["session", "branch"]),
)
def test_any_messages_fit_any_budget_without_raising(
    messages: list[Message], budget: int, prior: str | None, focus: str | None, scope: str
) -> None:
    text = digest(
        messages, budget_tokens=budget, prior_digest=prior, focus_topic=focus, scope=scope
    )
    assert estimate_tokens(text) <= budget
    assert text.startswith(BRANCH_HEADER if scope == "branch" else "## Active Task")
    again = digest(messages, budget_tokens=budget, prior_digest=text)
    assert estimate_tokens(again) <= budget


# ── the real transcripts ───────────────────────────────────────────────────────

DATASETS = ["mini_swe_agent_gemini3pro_swebench_verified.jsonl", "tau_bench_gpt4o_airline.jsonl"]
KEPT_RAW = 4
"""Messages left raw after the folded part, as a compaction keeps a tail."""
REAL_BUDGET = 800
_PATH = re.compile(r"(?<![\w/.-])(?:[\w.-]+/)*[\w-]+\.(?:py|txt|cfg|toml|json|md|rst|js|yml|ini)\b")


def collapsed(text: str) -> str:
    return " ".join(text.split())


def probes(folded: list[dict[str, Any]]) -> dict[str, list[str]]:
    """The facts a handoff must keep, found with plain regexes (not the summarizer's own).

    The latest request (not a harness's complaint about a reply's format); the files a
    command changed (`sed -i`, a `>` redirect) and did
    not remove later; the error line of the last failure, unless a later run of the same
    command succeeded.
    """
    # A harness's complaint about the format of a reply is not a request: a cut task
    # drops it first.
    users = [
        m
        for m in folded
        if m["role"] == "user"
        and m["content"]
        and not re.search(r"EXACTLY ONE action|triple backticks", m["content"])
    ]
    changed: list[str] = []
    errors: list[str] = []
    failed_command = ""
    commands: dict[str, str] = {}
    for message in folded:
        for tool_call in message.get("tool_calls") or []:
            command = json.loads(tool_call["function"]["arguments"]).get("command", "")
            commands[tool_call["id"]] = command
            line = command.split("<<")[0].split("\n")[0]
            if line.startswith("rm "):
                removed = set(_PATH.findall(line))
                changed = [path for path in changed if path not in removed]
            elif line.startswith("sed -i") or ">" in line:
                changed += [p for p in _PATH.findall(line.split(">")[-1]) if p not in changed]
        content = message["content"] or ""
        if message["role"] != "tool":
            continue
        command = commands.get(message.get("tool_call_id", ""), "")
        if re.search(r"<returncode>[1-9]|^Error", content):
            found = [
                line.strip()
                for line in content.splitlines()
                if re.match(r"^(?:[\w.]+(?:Error|Exception)|Error):", line.strip())
            ]
            errors, failed_command = found[-1:], command
        elif command == failed_command and "<returncode>0</returncode>" in content:
            errors = []  # the same command ran clean since: resolved
    return {
        "latest request": [collapsed(users[-1]["content"])[:200]] if users else [],
        "changed files": changed,
        "open error lines": errors,
    }


@pytest.mark.parametrize("name", DATASETS)
def test_real_transcripts_keep_request_changed_files_and_open_errors(
    dataset_dir: Path, name: str
) -> None:
    path = dataset_dir / name
    if not path.exists():
        pytest.skip(f"{name} is not in the dataset")
    summarizer = ExtractiveSummarizer()
    missing: list[str] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        conversation = json.loads(line)
        folded = conversation["messages"][:-KEPT_RAW]
        request = SummaryRequest(messages=from_openai(folded), budget_tokens=REAL_BUDGET)
        text = asyncio.run(summarizer.summarize(request)).text
        assert estimate_tokens(text) <= REAL_BUDGET
        shown = collapsed(text)
        for kind, facts in probes(folded).items():
            missing += [f"{conversation['id']}: {kind}: {f}" for f in facts if f not in shown]
    assert missing == []


@pytest.mark.parametrize(
    "module",
    [
        "_extractive",
        "_facts",
        "_actions",
        "_commands",
        "_handoff",
        "_handoff_merge",
        "_fit",
        "_scan",
        "_run_output",
        "_patch",
    ],
)
def test_modules_are_pure(module: str) -> None:
    import ast

    path = Path(__file__).resolve().parents[2] / "sessionstore" / "summarizers" / f"{module}.py"
    imported: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            imported.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module)
    io = (
        "sqlalchemy",
        "alembic",
        "click",
        "rich",
        "httpx",
        "asyncpg",
        "aiosqlite",
        "sessionstore.store",
    )
    assert not {name for name in imported if name.startswith(io)}


def test_the_docs_example_prints_what_the_page_shows() -> None:
    page = (
        Path(__file__).resolve().parents[2] / "docs" / "concepts" / "summarizers.md"
    ).read_text()
    code = re.search(r"```python\n(.*?)```", page, re.S)
    shown = re.search(r"```text\n(.*?)```", page, re.S)
    assert code is not None
    assert shown is not None
    printed: list[str] = []
    exec(code.group(1), {"print": printed.append})
    assert printed == [shown.group(1).rstrip("\n")]


def test_quoted_scripts_are_not_files_and_grep_without_match_is_no_failure() -> None:
    messages: list[Message] = [
        UserMessage(content="Clean up pkg/mod.py"),
        call("q1", "bash", command="sed -i '/name/d;s|django.db|x|' pkg/mod.py"),
        result("q1", "<returncode>0</returncode>\n<output>\n</output>"),
        call("q2", "bash", command='grep -rn "TODO" pkg/'),
        result("q2", "<returncode>1</returncode>\n<output>\n</output>"),
    ]
    text = digest(messages)
    assert section(text, "Relevant Files") == "- pkg/mod.py (edited)"  # pkg/ holds it
    assert section(text, "Completed Actions").endswith(
        '2. SEARCHED grep -rn "TODO" pkg/ - exit 1, no match [tool: bash]'
    )
    assert section(text, "Blocked") == ""


def test_other_agents_tool_shapes() -> None:
    messages: list[Message] = [
        UserMessage(content="Where is order #W2378156? Then fix app/views.py."),
        call("a1", "get_order_details", order_id="#W2378156"),
        result("a1", json.dumps({"order_id": "#W2378156", "status": "delivered"})),
        call("a2", "Read", file_path="/srv/app/views.py"),
        result("a2", "1\tdef index():\n2\t    return 1\n", name="Read"),
        call("a3", "Grep", pattern="def index", path="app"),
        result("a3", "app/views.py:1:def index():", name="Grep"),
        call("a4", "execute_bash", command="python manage.py test"),
        result(
            "a4", "Ran 3 tests in 0.2s\n\nFAILED (failures=1)\n[Command finished with exit code 1]"
        ),
        AssistantMessage(content=[ToolCall(id="a5", name="open", arguments="app/urls.py 20")]),
        result("a5", "[File: app/urls.py (40 lines total)]", name="open"),
    ]
    text = digest(messages)
    actions = section(text, "Completed Actions").splitlines()
    assert actions[0].startswith("1. GOT order details (order_id=#W2378156) - ok: status=delivered")
    assert actions[1] == "2. READ /srv/app/views.py - 2 lines [tool: Read]"
    assert actions[2] == "3. SEARCHED app (pattern=def index) - 1 line [tool: Grep]"
    assert actions[3] == (
        "4. TESTED python manage.py test - exit 1, Ran 3 tests: FAILED (failures=1)"
        " [tool: execute_bash]"
    )
    assert actions[4].startswith("5. READ app/urls.py - ")
    files = section(text, "Relevant Files")
    assert "/srv/app/views.py" in files
    assert "app/urls.py" in files


def test_a_request_with_markdown_headings_is_not_taken_for_a_digest() -> None:
    request = "Write the design doc.\n\n## Status\nDraft\n\n## Plan\nShip it"
    text = digest([UserMessage(content=request), AssistantMessage(content="On it.")])
    assert parse_handoff(text).task == request
    assert parse_handoff(digest([], prior_digest=text)).task == request


def test_deeply_nested_json_is_read_safely() -> None:
    nested = "[" * 100_000 + "]" * 100_000
    messages: list[Message] = [
        UserMessage(content="go"),
        # The model refuses arguments this deep (MAX_JSON_DEPTH); one stored before it did
        # is built here without validation, as a stored row is read.
        AssistantMessage(
            content=[ToolCall.model_construct(id="n1", name="lookup", arguments=nested)]
        ),
        result("n1", nested, name="lookup"),
    ]
    assert estimate_tokens(digest(messages, budget_tokens=300)) <= 300


def test_a_digest_refitted_smaller_lists_the_names_its_cut_task_no_longer_shows() -> None:
    """A digest read back and cut (as a build does) keeps the task's names as values.

    Not the placeholders of a harness's standing instructions: they are not facts.
    """
    request = (
        "Fix `SequentialFeatureSelector` when cv is an iterable of splits. "
        + "Some words of background here. " * 20
        + "It fails in `_aggregate_score_dicts` called from `cross_validate`. "
        + "Some more words of background. " * 20
        + "\n"
        + "<instructions>\nRun `MY_ENV_VAR=MY_VALUE your_command_here` to set a value. "
        + "Always run the tests. " * 30
        + "\n</instructions>"
    )
    text = digest([*many_files_session(), UserMessage(content=request)], budget_tokens=5_000)
    assert "_aggregate_score_dicts" in section(text, "Active Task")
    assert "_aggregate_score_dicts" not in section(text, "Critical Context")
    from sessionstore.summarizers._fit import fit_handoff

    smaller = fit_handoff(parse_handoff(text), 400)
    assert estimate_tokens(smaller) <= 400
    task = section(smaller, "Active Task")
    assert "_aggregate_score_dicts" not in task
    values = section(smaller, "Critical Context")
    assert "_aggregate_score_dicts" in values
    # Each name is shown once: in what the task keeps of its statement, or as a value.
    assert ("cross_validate" in values) != ("cross_validate" in task)
    assert "MY_ENV_VAR" not in values
    assert "your_command_here" not in values


def test_a_merged_handoff_numbers_the_newer_actions_after_the_older() -> None:
    older = parse_handoff("## Completed Actions\n1. READ a.py - ok\n2. EDITED a.py - ok\n")
    newer = parse_handoff("## Completed Actions\n1. TESTED pytest - 1 passed\n")
    merged = render_handoff(merge_handoffs(older, newer))
    assert "3. TESTED pytest - 1 passed" in merged
    assert "\n1. TESTED" not in merged
    # A newer handoff numbered after the older already keeps its numbers.
    continued = parse_handoff("## Completed Actions\n3. RAN make - ok\n")
    assert "3. RAN make - ok" in render_handoff(merge_handoffs(older, continued))


def _loop_digest(messages: list[Message]) -> str:
    """One loop's own digest, as a compaction of that loop alone writes it."""
    return digest(messages)


def test_a_loop_that_answers_the_one_before_follows_its_task_when_merged() -> None:
    """tau-bench opens a loop at every user message: an answer is not a new task."""
    request = (
        "Could you help me change my most recent reservation to the cheapest business "
        "round trip without changing the dates?"
    )
    asked = parse_handoff(
        _loop_digest(
            [
                UserMessage(content=request),
                AssistantMessage(content="Could you please provide your user ID?"),
            ]
        )
    )
    answer = parse_handoff(
        _loop_digest(
            [
                UserMessage(content="Sure, my user ID is mohamed_silva_9265."),
                AssistantMessage(content="I found reservation K1NW8N."),
            ]
        )
    )
    merged = merge_handoffs(asked, answer)
    assert merged.task.startswith(request)
    assert merged.task.endswith('Later the user said: "Sure, my user ID is mohamed_silva_9265."')
    # A request made when the assistant asked nothing replaces the task, as before.
    told = parse_handoff(
        _loop_digest(
            [
                UserMessage(content="My user ID is mohamed_silva_9265."),
                AssistantMessage(content="I found reservation K1NW8N."),
            ]
        )
    )
    new = parse_handoff(_loop_digest([UserMessage(content="Now cancel my flight to Boston.")]))
    replaced = merge_handoffs(told, new)
    assert replaced.task == "Now cancel my flight to Boston."
    assert replaced.goal == "My user ID is mohamed_silva_9265."


def test_a_short_reply_follows_the_task_when_merged_even_without_a_question() -> None:
    older = parse_handoff("## Active Task\nBook HAT136 to Seattle.\n\n## Goal\nFly to Seattle.")
    newer = parse_handoff("## Active Task\nYes, go ahead.")
    merged = merge_handoffs(older, newer)
    assert merged.task == 'Book HAT136 to Seattle.\nLater the user said: "Yes, go ahead."'


def test_constraints_of_replies_beyond_the_kept_ones_stay_as_constraints() -> None:
    doc = parse_handoff(
        "## Active Task\nBook a flight to New York for three passengers.\n\n"
        "## In Progress\n- Waiting for the user's answer: Which cabin?"
    )
    replies = [
        "I'd like economy class, and I don't need travel insurance.",
        "Use the Visa ending in 2076.",
        "Everything looks correct.",
        "Yes, please proceed with the booking.",
    ]
    for reply in replies:
        newer = parse_handoff(
            f"## Active Task\n{reply}\n\n## In Progress\n- Waiting for the user's answer: OK?"
        )
        doc = merge_handoffs(doc, newer)
    assert doc.task.startswith("Book a flight to New York for three passengers.")
    assert replies[0] not in doc.task  # beyond the last three replies
    texts = [item.text for item in doc.constraints]
    assert "I'd like economy class, and I don't need travel insurance." in texts
    # Shown once: a constraint of a reply the task still shows is not rendered twice.
    rendered = render_handoff(doc)
    assert rendered.count("Yes, please proceed with the booking.") == 1


def test_the_fitter_cuts_older_replies_before_the_constraints_they_state() -> None:
    replies = [
        "I'd like economy class, and I don't need travel insurance, thanks a lot for asking.",
        "Use the Visa ending in 2076 for this booking, the one on my profile please.",
        "Yes, I'm fine with that. Please go ahead with the updated total.",
    ]
    task = "Book a flight from San Francisco to New York for three passengers.\n" + "\n".join(
        f'Later the user said: "{reply}"' for reply in replies
    )
    doc = parse_handoff(f"## Active Task\n{task}")
    doc.constraints = [Item("I don't need travel insurance", rank=2)]
    # Values enough that the task is under half the budget (no early cut of its own).
    doc.critical = [Item(f"flight_number=HAT{n:03d}", rank=3, key=f"HAT{n:03d}") for n in range(60)]
    whole = fit_handoff(doc, 1_000)
    assert replies[0] in whole
    assert "Constraints" not in whole  # the task shows it
    small = fit_handoff(doc, estimate_tokens(whole) - 25)
    assert "Book a flight from San Francisco to New York for three passengers." in small
    assert replies[-1] in small
    assert replies[0] not in small
    assert "- I don't need travel insurance" in small
    assert "HAT059" in small


def test_turns_that_open_with_an_acknowledgement_continue_an_earlier_task() -> None:
    """A chat agent's loop that opens with `Yes, please proceed` is no new task."""
    text = digest(
        [
            UserMessage(content="Yes, please proceed with the cancellation."),
            AssistantMessage(content="Reservation HSR97W is cancelled."),
        ]
    )
    task = section(text, "Active Task")
    assert task.startswith("Continue the task stated before these turns.")
    assert task.endswith('Later the user said: "Yes, please proceed with the cancellation."')
    assert "## Goal" not in text
    # Merged after the loop it answers, the reply follows that loop's task.
    older = parse_handoff(digest([UserMessage(content="Cancel my trip to Boston, HSR97W.")]))
    merged = merge_handoffs(older, parse_handoff(text))
    assert merged.task == (
        "Cancel my trip to Boston, HSR97W.\n"
        'Later the user said: "Yes, please proceed with the cancellation."'
    )
    # A longer reply that opens with an acknowledgement and asks nothing is one too.
    reply = (
        "Yes, please try to use the larger certificate to cover as much as possible, "
        "then I'll cover any remaining amount with my 7447 card. Thank you."
    )
    longer = section(digest([UserMessage(content=reply)]), "Active Task")
    assert longer == f'Continue the task stated before these turns.\nLater the user said: "{reply}"'
    # A request that opens the turns is their task, as before, even after a `Great`.
    for request in (
        "Please cancel reservation HSR97W.",
        "Great, thank you! Could you also check my other flights around May 22?",
    ):
        assert section(digest([UserMessage(content=request)]), "Active Task") == request
