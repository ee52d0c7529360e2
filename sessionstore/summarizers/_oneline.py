r"""Summarizers: the injectable call a strategy makes to turn history into short text.

`OneLineSummarizer`, the default `TurnSummarizer`, runs offline and is deterministic:
the same turn always gives the same line. As a `Summarizer` it joins the lines of the
turns it is given, newest kept when they do not all fit the budget.

>>> from sessionstore.models import UserMessage
>>> OneLineSummarizer().summarize_turn([UserMessage(content="Fix the   failing\ntest")])
'User: Fix the failing test'
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from sessionstore._tokens import estimate_tokens
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
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from sessionstore.summarizers._actions import call_detail
from sessionstore.summarizers._protocol import Summary, SummaryRequest
from sessionstore.summarizers._said import HARNESS_COMPLAINT, OUTPUT_LIKE
from sessionstore.summarizers._scan import collapse

__all__ = ["OneLineSummarizer"]

SHORT_TEXT_CHARS = 200
"""An assistant text of at most this many characters is kept in its turn's summary."""

ELLIPSIS = "…"
HARNESS_OPENING_CHARS = 120
"""How far into a user message a harness's output or complaint announces itself."""


class OneLineSummarizer:
    """The default summarizer: one deterministic line per turn, no model call.

    | turn | summary |
    |---|---|
    | user | `User: <text>`, whitespace collapsed |
    | assistant, texts and calls | `<short texts> [used N tool(s): a(x.py), b(make)]` |
    | assistant, calls only | `[Assistant used N tool(s): a(x.py), b(make)]` |
    | assistant, texts only | its short texts |
    | assistant, neither | `[Assistant response]` |
    | a call whose result failed | `b(make) failed` |
    | failed results of calls not in the turn | `(1 error)`, `(2 errors)` in the bracket |
    | bash execution | ``Ran `cmd` (exit N)`` |
    | custom | `[custom: <custom_type>]` |
    | branch or compaction summary | the summary |
    | system | `System: <text>` |
    | tool result with no call | `[Tool result: <name>]` |

    "Short" texts are those of at most 200 characters, as in the legacy level 2; each
    call is named with what it acts on (its command, paths or scalar arguments, at most
    60 characters), in the order of the calls, a call named alike once. Every line is at
    most `max_chars` characters, but a user's request, the point of its turn, may take
    `max_request_chars` (a harness's command output or format complaint sent as a user
    message may not): the variable part (text, command, names) is cut with `…` so that
    the fixed part stays readable.

    Args:
        max_chars: the longest line returned.
        max_request_chars: the longest line of a user's request (at least `max_chars`).

    Raises:
        ValueError: `max_chars` or `max_request_chars` is less than 1.
    """

    def __init__(self, max_chars: int = 200, max_request_chars: int = 600) -> None:
        if max_chars < 1:
            raise ValueError(f"max_chars must be at least 1, got {max_chars}")
        if max_request_chars < 1:
            raise ValueError(f"max_request_chars must be at least 1, got {max_request_chars}")
        self.max_chars = max_chars
        self.max_request_chars = max_request_chars

    def __repr__(self) -> str:
        return (
            f"OneLineSummarizer(max_chars={self.max_chars}, "
            f"max_request_chars={self.max_request_chars})"
        )

    def summarize_turn(self, messages: Sequence[Message]) -> str:
        """Return the one-line summary of a turn.

        Raises:
            ValueError: `messages` is empty.
        """
        if not messages:
            raise ValueError("a turn has at least one message")
        lead = messages[0]
        if isinstance(lead, AssistantMessage):
            return self._assistant(lead, messages[1:])
        if isinstance(lead, UserMessage):
            # A request is the turn's point: it keeps more than other lines. A harness's
            # command output or complaint about the format, sent as a user message, does not.
            harness = _is_harness_text(lead.text)
            room = self.max_chars if harness else max(self.max_chars, self.max_request_chars)
            text = self._collapse(lead.text, room)
            images = sum(isinstance(block, ImageContent) for block in lead.content)
            note = f"[{images} image(s)]" if images else ""
            if text and note:
                note = " " + note
            return self._fit("User: ", text, note, room=room).rstrip()
        if isinstance(lead, ToolResultMessage):
            name = self._collapse(lead.tool_name or lead.tool_call_id)
            return self._fit("[Tool result: ", name, " (error)]" if lead.is_error else "]")
        if isinstance(lead, BashExecutionMessage):
            if lead.exit_code is not None:
                status = f"exit {lead.exit_code}"
            else:
                status = "cancelled" if lead.cancelled else "did not finish"
            return self._fit("Ran `", self._collapse(lead.command), f"` ({status})")
        if isinstance(lead, CustomMessage):
            return self._fit("[custom: ", self._collapse(lead.custom_type), "]")
        if isinstance(lead, BranchSummaryMessage | CompactionSummaryMessage):
            return self._fit("", self._collapse(lead.summary), "")
        if isinstance(lead, SystemMessage):
            return self._fit("System: ", self._collapse(lead.text), "")
        raise TypeError(f"not a message: {type(lead).__name__}")

    async def summarize(self, request: SummaryRequest) -> Summary:
        """Return one line per turn of `request.messages`, within the budget.

        When the lines do not all fit `request.budget_tokens`, the oldest are left out
        and a first line says how many; a prior digest is kept as the first line if it fits.
        """
        clock = time.perf_counter()
        lines = [self.summarize_turn(turn) for turn in _turns(request.messages)]
        if request.prior_digest:
            lines.insert(0, self._collapse(request.prior_digest))
        kept: list[str] = []
        used = 0
        for line in reversed(lines):
            cost = estimate_tokens(line) + 1
            if used + cost > request.budget_tokens:
                break
            kept.append(line)
            used += cost
        kept.reverse()
        if len(kept) < len(lines):
            kept.insert(0, f"[{len(lines) - len(kept)} earlier turn(s) left out]")
        return Summary(
            text="\n".join(kept),
            model="one-line",
            prompt_version="1",
            duration_ms=(time.perf_counter() - clock) * 1000,
        )

    def _assistant(self, message: AssistantMessage, results: Sequence[Message]) -> str:
        texts = [
            line
            for block in message.content
            if isinstance(block, TextContent) and len(block.text) <= SHORT_TEXT_CHARS
            if (line := " ".join(block.text.split()))
        ]
        calls = message.tool_calls
        if not calls:
            return self._fit("", " ".join(texts) if texts else "[Assistant response]", "")
        failed = {
            r.tool_call_id for r in results if isinstance(r, ToolResultMessage) and r.is_error
        }
        names = ", ".join(
            dict.fromkeys(
                _shown_call(call) + (" failed" if call.id in failed else "") for call in calls
            )
        )
        errors = len(failed - {call.id for call in calls})
        error_note = f" ({errors} error{'s' if errors > 1 else ''})" if errors else ""
        if texts:
            return self._fit(
                "", " ".join(texts), f" [used {len(calls)} tool(s): {names}{error_note}]"
            )
        return self._fit(f"[Assistant used {len(calls)} tool(s): ", names, f"{error_note}]")

    def _collapse(self, text: str, room: int | None = None) -> str:
        """Return `text` on one line, single spaces, and no longer than needed for a cut."""
        # Splitting at most `room` + 1 times keeps a huge text cheap; the words kept are
        # already longer than the line may be, so the cut below still shows.
        most = self.max_chars if room is None else room
        words = text.split(None, most + 1)
        if len(words) > most + 1:
            words.pop()
        return " ".join(words)

    def _fit(self, prefix: str, body: str, suffix: str, room: int | None = None) -> str:
        """Return `prefix + body + suffix`, cutting `body` (or, failing that, all) to fit."""
        most = self.max_chars if room is None else room
        line = f"{prefix}{body}{suffix}"
        if len(line) <= most:
            return line
        left = most - len(prefix) - len(suffix)
        if left >= 1:
            return f"{prefix}{_cut(body, left)}{suffix}"
        return _cut(line, most)


def _is_harness_text(text: str) -> bool:
    """Return True for a harness's output or format complaint sent as a user message.

    Both say so at their start (`<returncode>`, `Please always provide EXACTLY ONE
    action`); a task statement may quote the harness's format rules further down.
    """
    opening = text.lstrip()[:HARNESS_OPENING_CHARS]
    return OUTPUT_LIKE.match(opening) is not None or HARNESS_COMPLAINT.search(opening) is not None


def _shown_call(call: ToolCall) -> str:
    """Return a call as its tool's name and what it acts on: `read_file(src/app.py)`."""
    name = collapse(call.name)
    detail = call_detail(call.name, call.arguments)
    return f"{name}({detail})" if detail else name


def _turns(messages: Sequence[Message]) -> list[list[Message]]:
    """Group messages into turns: an assistant message with the tool results after it."""
    turns: list[list[Message]] = []
    for message in messages:
        if (
            isinstance(message, ToolResultMessage)
            and turns
            and isinstance(turns[-1][0], AssistantMessage)
        ):
            turns[-1].append(message)
        else:
            turns.append([message])
    return turns


def _cut(text: str, max_chars: int) -> str:
    """Return `text` cut to `max_chars` characters, the last one `…` when it was cut."""
    if len(text) <= max_chars:
        return text
    return text[: max_chars - 1].rstrip() + ELLIPSIS
