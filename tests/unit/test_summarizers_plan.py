"""An agent's own plan (its todo or plan tool's list) survives into the digest.

OpenHands #10508 and codex #34095 (PEERS): after a compaction the agent no longer knew what
it had left to do. The list is read by the shape of the call's arguments, for the tools
agents use (Claude Code's `TodoWrite`, Codex's `update_plan`, OpenHands' `task_tracker`,
Cursor's `todo_write` with `merge`), and nothing else is taken for a plan.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from sessionstore.models import AssistantMessage, Message, ToolResultMessage, UserMessage
from sessionstore.summarizers._plan_calls import MAX_PLAN_ENTRIES, PlanEntry, plan_of
from tests.unit.test_summarizers_working_state import call, digest, section

TODOS = {
    "todos": [
        {"content": "Reproduce the crash", "status": "completed", "activeForm": "Reproducing"},
        {"content": "Fix empty input handling", "status": "in_progress", "activeForm": "Fixing"},
        {"content": "Add test_empty_input", "status": "pending", "activeForm": "Adding"},
    ]
}


def run(plan_call: AssistantMessage, *more: Message) -> list[Message]:
    """A task, the plan's call and its result, then reads that push it out of view."""
    messages: list[Message] = [UserMessage(content="Fix the parser crash on empty input.")]
    call_id = plan_call.tool_calls[0].id
    messages += [plan_call, ToolResultMessage(tool_call_id=call_id, content="ok")]
    for n in range(12):
        messages += [
            call(f"r{n}", "bash", command=f"sed -n {n * 20},+20p src/parser.py"),
            ToolResultMessage(tool_call_id=f"r{n}", content=f"line {n}\n" * 20),
        ]
    return [*messages, *more]


@pytest.mark.parametrize(
    ("name", "arguments", "expected"),
    [
        (
            "TodoWrite",
            TODOS,
            [
                "done: Reproduce the crash",
                "in progress: Fix empty input handling",
                "to do: Add test_empty_input",
            ],
        ),
        (
            "update_plan",
            {
                "explanation": "narrowed down",
                "plan": [
                    {"step": "Read parser.py", "status": "completed"},
                    {"step": "Patch tokenize()", "status": "in_progress"},
                ],
            },
            ["done: Read parser.py", "in progress: Patch tokenize()"],
        ),
        (
            "task_tracker",
            {
                "command": "plan",
                "task_list": [
                    {"id": "1", "title": "Write the fix", "status": "todo", "notes": ""},
                    {"id": "2", "title": "Old idea", "status": "cancelled"},
                ],
            },
            ["to do: Write the fix", "dropped: Old idea"],
        ),
    ],
)
def test_the_latest_plan_is_in_remaining_work(
    name: str, arguments: dict[str, Any], expected: list[str]
) -> None:
    text = section(digest(run(call("p1", name, **arguments))), "Remaining Work")
    assert [line.removeprefix(f"- Plan ({name}), ") for line in text.splitlines()] == expected


def test_a_newer_plan_replaces_the_older_and_a_merge_updates_it_by_id() -> None:
    first = {
        "todos": [
            {"id": "a", "content": "Fix it", "status": "in_progress"},
            {"id": "b", "content": "Test it", "status": "pending"},
        ]
    }
    merge = {
        "merge": True,
        "todos": [
            {"id": "a", "content": "Fix it", "status": "completed"},
            {"id": "c", "content": "Ship it", "status": "pending"},
        ],
    }
    later = run(call("p1", "todo_write", **first), call("p2", "todo_write", **merge))
    later.append(ToolResultMessage(tool_call_id="p2", content="ok"))
    text = section(digest(later), "Remaining Work")
    assert "done: Fix it" in text
    assert "to do: Test it" in text
    assert "to do: Ship it" in text
    assert "in progress: Fix it" not in text
    replace = {"todos": [{"content": "Only this now", "status": "pending"}]}
    newest = run(call("p1", "TodoWrite", **TODOS), call("p2", "TodoWrite", **replace))
    newest.append(ToolResultMessage(tool_call_id="p2", content="ok"))
    text = section(digest(newest), "Remaining Work")
    assert "Only this now" in text
    assert "Fix empty input handling" not in text


def test_the_plan_carries_over_an_iterative_update() -> None:
    first = digest(run(call("p1", "TodoWrite", **TODOS)))
    later: list[Message] = [
        call("x", "bash", command="pytest -q"),
        ToolResultMessage(tool_call_id="x", content="1 failed"),
    ]
    text = section(digest(later, prior_digest=first), "Remaining Work")
    assert "in progress: Fix empty input handling" in text


def test_a_long_plan_keeps_its_unfinished_entries_first() -> None:
    entries = [{"content": f"done {n}", "status": "completed"} for n in range(30)]
    entries += [{"content": f"open {n}", "status": "pending"} for n in range(5)]
    text = section(digest(run(call("p1", "TodoWrite", todos=entries))), "Remaining Work")
    lines = text.splitlines()
    assert len(lines) == MAX_PLAN_ENTRIES
    assert all(f"to do: open {n}" in text for n in range(5))


@pytest.mark.parametrize(
    "arguments",
    [
        {"tickets": [{"title": "Bug", "status": "open"}]},  # a list of records, not a plan
        {"todos": [{"content": "no status"}]},
        {"todos": [{"status": "pending"}]},  # no text
        {"todos": [{"content": "ok", "status": "pending"}, "a string"]},
        {"todos": []},
        {"command": "ls -la"},
    ],
)
def test_other_arguments_are_no_plan(arguments: dict[str, Any]) -> None:
    assert plan_of(json.dumps(arguments)) is None
    assert plan_of("not json") is None
    assert plan_of("[1, 2]") is None


def test_statuses_and_ids_are_read_as_agents_write_them() -> None:
    found = plan_of(
        json.dumps(
            {
                "steps": [
                    {"text": "a", "done": True, "id": 7},
                    {"text": "b", "done": False},
                    {"text": "c", "state": "In Progress"},
                    {"text": "  spaced \n text ", "status": "skipped"},
                ]
            }
        )
    )
    assert found == (
        [
            PlanEntry("a", "done", "7"),
            PlanEntry("b", "pending"),
            PlanEntry("c", "active"),
            PlanEntry("spaced text", "dropped"),
        ],
        False,
    )


def test_without_a_plan_remaining_work_is_as_before() -> None:
    messages: list[Message] = [
        UserMessage(content="Fix it."),
        AssistantMessage(content="I looked at it. It is the tokenizer. Next I need to patch it."),
    ]
    assert "Next I need to patch it" in section(digest(messages), "Remaining Work")
