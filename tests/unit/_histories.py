"""Builders and Hypothesis generators of tool-using histories, for the pass and plan tests.

`valid_histories()` draws histories whose tool calls and results pair up (every call
answered once, results in any order right after their call), with the awkward parts
real agents produce: repeated call ids, reads and writes through a shell, identical
outputs, long arguments, images and very long outputs. `check_pairs` asserts the
pairing rule the loader uses.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from sessionstore.formats import from_openai
from sessionstore.models import (
    AssistantMessage,
    BashExecutionMessage,
    ImageContent,
    Message,
    SystemMessage,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)

PNG = ImageContent(data=base64.b64encode(b"\x89PNG").decode(), mime_type="image/png")
"""A tiny inline image (85 tokens by the heuristic's floor)."""

DATASETS = ["mini_swe_agent_gemini3pro_swebench_verified.jsonl", "tau_bench_gpt4o_airline.jsonl"]


def call(call_id: str, name: str, **arguments: Any) -> ToolCall:
    return ToolCall(id=call_id, name=name, arguments=json.dumps(arguments))


def bash(call_id: str, command: str) -> ToolCall:
    return call(call_id, "bash", command=command)


def ask(*calls: ToolCall, text: str = "") -> AssistantMessage:
    content: list[Any] = [TextContent(text=text)] if text else []
    return AssistantMessage(content=[*content, *calls])


def result(call_id: str, text: str, *, name: str = "", error: bool = False) -> ToolResultMessage:
    return ToolResultMessage(tool_call_id=call_id, tool_name=name, content=text, is_error=error)


def lines(count: int, word: str = "line") -> str:
    return "\n".join(f"{word} {i}" for i in range(count))


def load_conversations(dataset_dir: Path, name: str, count: int) -> list[list[Message]]:
    """The first `count` conversations of one dataset file, as sessionstore messages."""
    path = dataset_dir / name
    conversations = []
    with path.open(encoding="utf-8") as handle:
        for _, line in zip(range(count), handle, strict=False):
            conversations.append(from_openai(json.loads(line)["messages"]))
    return conversations


def check_pairs(messages: Sequence[Message]) -> None:
    """Assert every tool result answers an open call right before it, and every call is answered."""
    open_calls: set[str] = set()
    for index, message in enumerate(messages):
        if isinstance(message, ToolResultMessage):
            assert message.tool_call_id in open_calls, f"orphan result at {index}"
            open_calls.discard(message.tool_call_id)
            continue
        assert not open_calls, f"unanswered calls {open_calls} before {index}"
        if isinstance(message, AssistantMessage):
            open_calls = {c.id for c in message.tool_calls}
            assert len(open_calls) == len(message.tool_calls)
    assert not open_calls, f"unanswered calls {open_calls} at the end"


# ── Hypothesis ─────────────────────────────────────────────────────────────────

_IDS = st.sampled_from([f"call_{i}" for i in range(5)])
"""Few ids, so that they repeat across turns, as providers' ids may."""
_PATHS = st.sampled_from(["src/app.py", "./src/app.py", "tests/test_app.py", "README.md"])
_OUTPUTS = st.one_of(
    st.sampled_from(["", "ok", "<returncode>1</returncode>\nTraceback\nValueError: boom"]),
    st.integers(0, 400).map(lines),
    st.sampled_from(["{}", json.dumps({"reservation_id": "HAT123", "status": "ok", "n": 2})]),
    st.text(max_size=300),
)


@st.composite
def tool_calls(draw: st.DrawFn, call_id: str) -> ToolCall:
    kind = draw(st.sampled_from(["read", "cat", "sed", "write", "run", "grep", "other", "long"]))
    path = draw(_PATHS)
    if kind == "read":
        return call(call_id, draw(st.sampled_from(["read_file", "Read", "view"])), path=path)
    if kind == "cat":
        return bash(call_id, f"cat {path}")
    if kind == "sed":
        return bash(call_id, f"nl -ba {path} | sed -n '1,40p'")
    if kind == "write":
        return bash(call_id, draw(st.sampled_from([f"sed -i 's/a/b/' {path}", f"echo x > {path}"])))
    if kind == "run":
        return bash(call_id, "pytest -x")
    if kind == "grep":
        return call(call_id, "grep", pattern="def ", path=path)
    if kind == "long":
        return call(call_id, "write_file", path=path, content=lines(draw(st.integers(0, 200))))
    return call(call_id, "get_user_details", user_id="mia_li_3668")


@st.composite
def tool_unit(draw: st.DrawFn) -> list[Message]:
    ids = draw(st.lists(_IDS, min_size=1, max_size=3, unique=True))
    calls = [draw(tool_calls(call_id)) for call_id in ids]
    text = draw(st.sampled_from(["", "THOUGHT: look", "x" * 300]))
    images = [PNG] if draw(st.integers(0, 9)) == 0 else []
    assistant = AssistantMessage(
        content=[*([TextContent(text=text)] if text else []), *images, *calls]
    )
    results: list[Message] = []
    for c in calls:
        content: list[Any] = [TextContent(text=draw(_OUTPUTS))]
        if draw(st.integers(0, 9)) == 0:
            content.append(PNG)
        results.append(
            ToolResultMessage(
                tool_call_id=c.id, tool_name=c.name, content=content, is_error=draw(st.booleans())
            )
        )
    return [assistant, *draw(st.permutations(results))]


@st.composite
def valid_histories(draw: st.DrawFn, *, max_units: int = 25) -> list[Message]:
    """A history whose tool calls and results pair up."""
    messages: list[Message] = []
    if draw(st.booleans()):
        messages.append(SystemMessage(content="You are an agent."))
    for _ in range(draw(st.integers(0, max_units))):
        kind = draw(st.sampled_from(["user", "tool", "tool", "tool", "text", "bash"]))
        if kind == "user":
            images = [PNG] if draw(st.integers(0, 5)) == 0 else []
            messages.append(UserMessage(content=[TextContent(text=draw(_OUTPUTS)), *images]))
        elif kind == "tool":
            messages.extend(draw(tool_unit()))
        elif kind == "text":
            messages.append(AssistantMessage(content=draw(_OUTPUTS) or "done"))
        else:
            path = draw(_PATHS)
            messages.append(
                BashExecutionMessage(command=f"cat {path}", output=lines(5), exit_code=0)
            )
    return messages
