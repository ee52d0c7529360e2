"""Messages as readable text, for the kinds provider formats have no role for, and for people."""

from __future__ import annotations

import json
import re

from sessionstore.formats._messages import Rendered
from sessionstore.models import BashExecutionMessage, BranchSummaryMessage, CompactionSummaryMessage

__all__ = ["render_as_text"]


def render_as_text(message: Rendered) -> str | None:
    """Render a message of a kind provider formats have no role for as readable text.

    Shell commands show the command, the output in a code fence and the exit code;
    summaries get a prefix that says what they stand for; custom messages show their
    type and data. Returns None for a custom message with `display=False`, which a
    provider should not see.
    """
    if isinstance(message, BashExecutionMessage):
        return _render_bash(message)
    if isinstance(message, CompactionSummaryMessage):
        return f"[Summary of earlier conversation]\n{message.summary}"
    if isinstance(message, BranchSummaryMessage):
        return f"[Summary of another branch of this conversation]\n{message.summary}"
    if not message.display:
        return None
    if message.data is None:
        return f"[{message.custom_type}]"
    data = (
        message.data
        if isinstance(message.data, str)
        else json.dumps(message.data, ensure_ascii=False, indent=2)
    )
    return f"[{message.custom_type}]\n{data}"


def _render_bash(message: BashExecutionMessage) -> str:
    command = message.command
    if "\n" in command or "`" in command:
        fence = _fence(command)
        lines = [f"Ran\n{fence}\n{command}\n{fence}"]
    else:
        lines = [f"Ran `{command}`"]
    if message.output:
        fence = _fence(message.output)
        lines.append(f"{fence}\n{message.output}\n{fence}")
    else:
        lines.append("(no output)")
    if message.truncated:
        lines.append("(output truncated)")
    if message.cancelled:
        lines.append("(cancelled by the user)")
    if message.exit_code is not None:
        lines.append(f"Exit code: {message.exit_code}")
    return "\n".join(lines)


def _fence(text: str) -> str:
    """Return a code fence longer than any run of backticks in `text`."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)
