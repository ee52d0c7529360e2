"""ExtractiveSummarizer at small budgets: the most facts per token, the least useful cut first.

An error line retried is listed once; the values an action line shows come back as
values when the line is folded; a folded change keeps its tool and key; the file an
editor harness has open is named relative to the harness's directory; a short command
stays as typed when its line is collapsed.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

from sessionstore._tokens import estimate_tokens
from sessionstore.models import AssistantMessage, Message, ToolCall, ToolResultMessage, UserMessage
from sessionstore.summarizers import ExtractiveSummarizer, SummaryRequest
from sessionstore.summarizers._fit import CUT_MARKER, _collapse, fit_handoff, shown_tokens
from sessionstore.summarizers._handoff import Action, Handoff, Item, parse_handoff


def digest(messages: list[Message], budget: int = 3_000) -> str:
    request = SummaryRequest(messages=messages, budget_tokens=budget)
    return asyncio.run(ExtractiveSummarizer().summarize(request)).text


def section(text: str, heading: str) -> str:
    match = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    return match.group(1).strip() if match else ""


def call(call_id: str, name: str, **arguments: Any) -> AssistantMessage:
    return AssistantMessage(content=[ToolCall(id=call_id, name=name, arguments=arguments)])


def result(call_id: str, text: str, name: str = "bash") -> ToolResultMessage:
    return ToolResultMessage(tool_call_id=call_id, tool_name=name, content=text)


def test_a_retried_failure_lists_its_error_lines_once() -> None:
    error = "Error: payment amount does not add up, total price is 4875, but paid 1625"
    messages: list[Message] = [UserMessage(content="Book the business fare for me.")]
    for index in range(3):
        messages += [
            call(f"b{index}", "book_reservation", user_id="mia_li_3668", amount=1625),
            result(f"b{index}", error, name="book_reservation"),
        ]
    blocked = section(digest(messages), "Blocked")
    assert blocked.count(error) == 1
    assert "action 3 failed (as did action 2)" in blocked


def test_values_of_folded_action_lines_come_back_as_values() -> None:
    doc = Handoff(
        task="Change my flight.",
        actions=[
            Action(1, 1, "GOT", "user details (user_id=mia_li_3668)", "ok", "get_user_details"),
            Action(
                2,
                2,
                "SEARCHED",
                "direct flight (origin=JFK, destination=SEA)",
                "2 results: HAT104, HAT105",
                "search_direct_flight",
            ),
        ],
    )
    whole = fit_handoff(doc, 1_000)
    assert "## Critical Context" not in whole  # the action lines show the values
    # Re-fitted smaller (as a built context does), the lines fold and the values stay.
    small = fit_handoff(parse_handoff(whole), 45)
    assert estimate_tokens(small) <= 45
    assert "GOT user details" not in small
    for value in ("HAT105", "mia_li_3668"):
        assert value in small


def test_a_folded_state_change_stays_named_by_its_tool_and_key() -> None:
    messages: list[Message] = [UserMessage(content="Cancel reservation K1NW8N, then check.")]
    messages += [
        call("c0", "cancel_reservation", reservation_id="K1NW8N"),
        result("c0", json.dumps({"reservation_id": "K1NW8N", "status": "cancelled"})),
    ]
    for index in range(1, 9):
        messages += [
            call(f"c{index}", "get_flight_status", flight_number=f"HAT{200 + index}"),
            result(f"c{index}", json.dumps({"status": "on time"})),
        ]
    actions = section(digest(messages, budget=75), "Completed Actions")
    assert "CANCELLED reservation" not in actions  # its line is folded
    assert "done: cancel_reservation K1NW8N" in actions


def test_the_open_file_is_named_relative_to_the_harness_directory() -> None:
    window = (
        "[File: /repo/src/pkg/fields.py (20 lines total)]\n"
        "1:def serialize(value):\n2:    return int(value)\n"
        "(Open file: /repo/src/pkg/fields.py)\n(Current directory: /repo)\nbash-$"
    )
    messages: list[Message] = [
        UserMessage(content="Fix the rounding in serialize."),
        call("o", "open", command="open src/pkg/fields.py\n"),
        result("o", window, name="open"),
        call("e", "edit", command="edit 2:2\n    return round(value)\nend_of_edit\n"),
        result("e", window.replace("int(value)", "round(value)"), name="edit"),
    ]
    text = digest(messages)
    assert "EDITED src/pkg/fields.py edit 2:2" in section(text, "Completed Actions")
    assert "Changed src/pkg/fields.py in serialize at line 2" in section(text, "Active State")
    assert "/repo/src/pkg/fields.py" not in text


def test_a_short_command_stays_as_typed_when_its_line_is_collapsed() -> None:
    long_read = "sed -n '1,400p' src/pkg/module_with_a_long_name.py | grep -n 'def '"
    run = [
        Action(1, 1, "RAN", "python run.py", "exit 1", "bash", brief="run.py"),
        Action(2, 2, "RAN", "python run.py", "exit 0", "bash", brief="run.py"),
        Action(3, 3, "READ", long_read, "40 lines", "bash", brief="module_with_a_long_name.py"),
    ]
    collapsed = _collapse(run[:2])
    assert (collapsed.first, collapsed.last, collapsed.target) == (1, 2, "python run.py")
    assert _collapse(run[2:]).target == "module_with_a_long_name.py"


def test_the_last_action_is_the_last_to_go_and_folded_changes_stay_named() -> None:
    reads = [
        Action(n, n, "READ", f"cat src/module_{n}.py", "120 lines", "bash", brief=f"m{n}.py")
        for n in range(1, 7)
    ]
    cancel = Action(
        7, 7, "CANCELLED", "reservation (reservation_id=K1NW8N)", "ok", "cancel_reservation"
    )
    newest = [
        Action(n, n, "RAN", f"python check_{n}.py", "printed: ok", "bash") for n in (8, 9, 10)
    ]
    doc = Handoff(task="Check the modules.", actions=[*reads, cancel, *newest])
    shown_alone = False
    for budget in range(20, 400, 3):
        actions = section(fit_handoff(doc, budget), "Completed Actions")
        lines = [line for line in actions.split("\n") if line and "(earlier" not in line]
        if lines:
            # Whatever else went, the newest action (the last command) is still there.
            assert "python check_10.py" in actions
        if lines == ["10. RAN python check_10.py - printed: ok [tool: bash]"]:
            shown_alone = True
            assert "done: cancel_reservation K1NW8N" in actions
            assert "READ x" not in actions  # the tallies went first
    assert shown_alone


def test_a_value_counts_as_shown_as_a_token_or_a_run_of_its_pieces() -> None:
    tokens = shown_tokens("3. EDITED src/pkg/io.py:12 (reservation_id=K1NW8N) - paid $234.")
    for shown in ("src/pkg/io.py:12", "io.py", "pkg/io.py", "K1NW8N", "$234", "234"):
        assert shown in tokens
    for partial in ("K1NW8", "io.p", "NW8N"):
        assert partial not in tokens
    # A value only part of a longer one is not shown by it, so fitting keeps it listed.
    doc = Handoff(
        task="Check HAT082.",
        critical=[Item("flight_number=HAT08", rank=2, key="HAT08"), Item("HAT082", rank=3)],
    )
    text = fit_handoff(doc, 200)
    assert "- flight_number: HAT08" in text
    assert "- HAT082" not in text  # the task shows it


def test_values_surfaced_from_actions_are_dropped_in_order_not_cut() -> None:
    update = Action(
        1,
        1,
        "UPDATED",
        "reservation flights (reservation_id=OWZ4XL, payment_id=gift_card_9823297)",
        "ok: user_id=ivan_rossi_8555",
        "update_reservation_flights",
    )
    doc = Handoff(task="Yes, go ahead with the gift card.", actions=[update])
    for budget in range(12, 80):
        text = fit_handoff(doc, budget)
        assert estimate_tokens(text) <= budget
        if "Yes, go ahead with the gift card." in text:
            # Fitted by its stages (values and lines dropped), not by the last-resort cut.
            assert CUT_MARKER.strip() not in text
    # Once the line goes, what it changed is still named.
    small = fit_handoff(doc, 40)
    assert "UPDATED reservation flights" not in small
    assert "done: update_reservation_flights OWZ4XL" in small


def test_a_refitted_digest_of_continued_turns_still_says_they_continue() -> None:
    # Turns with no request of their own: the digest says they continue an earlier task,
    # and a re-fit (parse, then render) keeps saying so instead of "None.".
    turns: list[Message] = [
        AssistantMessage(
            content=[ToolCall(id="c1", name="bash", arguments={"command": "pytest -q"})]
        ),
        ToolResultMessage(tool_call_id="c1", tool_name="bash", content="3 passed"),
    ]
    text = ExtractiveSummarizer().digest(SummaryRequest(messages=turns, budget_tokens=400))
    parsed = parse_handoff(text)
    assert parsed.continued
    assert not parsed.task
    refitted = fit_handoff(parsed, 400)
    assert "## Active Task\nContinue the task stated before these turns." in refitted
    assert "None." not in refitted
    assert parse_handoff(refitted).continued


def test_a_record_read_by_its_id_is_told_by_its_other_ids_not_the_echo() -> None:
    record = {
        "reservation_id": "OWZ4XL",
        "email": "ivan.rossi2633@example.com",
        "user_id": "ivan_rossi_8555",
        "flights": [{"flight_number": "HAT202", "date": "2024-05-21"}],
    }
    turns: list[Message] = [
        UserMessage(content="What is on reservation OWZ4XL?"),
        AssistantMessage(
            content=[
                ToolCall(
                    id="c1", name="get_reservation_details", arguments={"reservation_id": "OWZ4XL"}
                )
            ]
        ),
        ToolResultMessage(
            tool_call_id="c1", tool_name="get_reservation_details", content=json.dumps(record)
        ),
    ]
    text = ExtractiveSummarizer().digest(SummaryRequest(messages=turns, budget_tokens=400))
    (line,) = [line for line in text.split("\n") if "get_reservation_details" in line]
    # The argument is not echoed; ids under id keys come before an email.
    assert "- ok: user_id=ivan_rossi_8555, flight_number=HAT202" in line
