"""The audit as tables: one row per turn of the loops in scope, one row per loop, the totals.

A turn's row shows its raw messages (kinds and first words), the action the overlay
took, and what the model sees instead (`raw`, or the replacement messages by id). The
previews are one line each, cut to fit the terminal.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from rich.console import Console
from rich.table import Column, Table
from rich.text import Text

from sessionstore import (
    AssistantMessage,
    BashExecutionMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    Message,
    SessionAudit,
    SystemMessage,
    ThinkingContent,
    ToolResultMessage,
    UserMessage,
)
from sessionstore._audit import AuditedTurn, LoopAudit
from sessionstore._framing import digest_tokens
from sessionstore.cli._render._loops import LoopNumbers
from sessionstore.cli._render._output import cells, one_line, share, stdout, turn_span

__all__ = ["audit_json", "print_audit", "print_audit_summary", "turn_table"]

_SUMMARY_PREFIX = re.compile(r"^\[Summary\] turn \d+: ")
"""The default strategy's one-liners repeat the turn number, which the tables already show."""


def _gist(message: Message) -> str:
    """Return the first words of a message: its text, what it called, or what it ran."""
    if isinstance(message, AssistantMessage):
        calls = ", ".join(call.name for call in message.tool_calls)
        text = message.text or " ".join(
            block.thinking for block in message.content if isinstance(block, ThinkingContent)
        )
        if calls:
            return f"→ {calls}: {text}" if text else f"→ {calls}"
        return text
    if isinstance(message, ToolResultMessage):
        return (
            f"{message.tool_name or 'tool'}{' (error)' if message.is_error else ''}: {message.text}"
        )
    if isinstance(message, UserMessage | SystemMessage):
        return message.text
    if isinstance(message, BashExecutionMessage):
        return f"$ {message.command}"
    if isinstance(message, CompactionSummaryMessage | BranchSummaryMessage):
        return _SUMMARY_PREFIX.sub("", message.summary)
    return f"[{message.custom_type}]"


_KIND_LABELS = {
    "user": "user",
    "assistant": "asst",
    "tool_result": "tool",
    "bash_execution": "bash",
    "system": "system",
    "custom": "custom",
    "branch_summary": "branch",
    "compaction_summary": "summary",
}


def _kinds(messages: Iterable[Message]) -> str:
    """Return e.g. `asst+2 tool` for an assistant message and two tool results."""
    counts = Counter(_KIND_LABELS.get(message.kind, message.kind) for message in messages)
    return "+".join(label if n == 1 else f"{n} {label}" for label, n in counts.items())


_ACTION_STYLES = {
    "kept": "green",
    "truncated": "yellow",
    "summarised": "cyan",
    "omitted": "magenta",
    "dropped": "bold red",
}


def _action_cell(turn: AuditedTurn) -> Text:
    actions = {m.action for m in turn.messages}
    if actions == {"kept", "truncated"}:
        # A recent turn whose tool output was cut: its other messages are verbatim copies.
        actions = {"truncated"}
    if len(actions) == 1:
        (action,) = actions
        return Text(action, style=_ACTION_STYLES[action])
    return Text("+".join(sorted(actions)) or "-", style="yellow")


def _id_spans(ids: Iterable[int | None]) -> str:
    """Return `#3-5 #9` for the ids 3, 4, 5 and 9."""
    spans: list[list[int]] = []
    for value in sorted(i for i in ids if i is not None):
        if spans and value == spans[-1][-1] + 1:
            spans[-1].append(value)
        else:
            spans.append([value])
    return " ".join(f"#{s[0]}" if len(s) == 1 else f"#{s[0]}-{s[-1]}" for s in spans)


def _line(label: str, text: str = "", *, style: str = "dim") -> Text:
    """Return a one-line cell: `label` styled, then `text`, cut with an ellipsis to fit."""
    cell = Text(label, style=style, no_wrap=True, overflow="ellipsis")
    if text:
        cell.append(" " + one_line(text))
    return cell


def _raw_cell(turn: AuditedTurn) -> Text:
    messages = [m.message.message for m in turn.messages]
    if not messages:
        return _line("-")
    return _line(_kinds(messages), _gist(messages[0]))


def _shown_cell(turn: AuditedTurn) -> Text:
    actions = {m.action for m in turn.messages}
    if turn.replacements:
        ids = _id_spans(r.id for r in turn.replacements)
        if actions <= {"kept", "truncated"}:
            cut = sum(1 for m in turn.messages if m.action == "truncated")
            copies = "copies" if len(turn.replacements) > 1 else "copy"
            return _line(ids, f"{copies}, {cut} cut" if cut else f"verbatim {copies}")
        return _line(ids, _gist(turn.replacements[0].message))
    if all(m.action == "kept" and m.replacement_id is None for m in turn.messages):
        return _line("raw")
    above = _id_spans({m.replacement_id for m in turn.messages})
    if above:
        return _line(f"in {above} (above)")
    return _line("nothing: no replacement covers it", style="red")


def turn_table(
    loops: Sequence[LoopAudit], *, max_turns: int | None = None, show_loop: bool = True
) -> Table:
    """Return a table with one row per turn of the loops in scope, one per loop out of scope.

    With `max_turns`, a loop with more turns shows its first and last ones and one row
    that counts the turns in between. Without `show_loop`, the loop column is left out
    (for one loop, named elsewhere), leaving the previews more room.
    """
    # The two preview columns are the ones that shrink to fit the terminal (the others
    # are no_wrap); their cells are one line each, cut with an ellipsis (`_line`).
    columns = [
        Column("Loop", justify="right", no_wrap=True),
        Column("Turn", justify="right", no_wrap=True),
        Column("Raw messages", max_width=56),
        Column("Raw tok", justify="right", no_wrap=True),
        Column("Action", no_wrap=True),
        Column("What the model sees", max_width=56),
        Column("Ctx tok", justify="right", no_wrap=True),
    ]
    table = Table(*columns[0 if show_loop else 1 :])

    def add(number: int | None, *cells: Text, end_section: bool) -> None:
        first = [Text("" if number is None else str(number))] if show_loop else []
        table.add_row(*first, *cells, end_section=end_section)

    for position, loop in enumerate(loops):
        if not loop.in_scope:
            # Loops out of scope share a section: they are one row each.
            is_next_out = position + 1 < len(loops) and not loops[position + 1].in_scope
            messages = sum(len(turn.messages) for turn in loop.turns)
            add(
                loop.loop.number,
                Text(turn_span(0, len(loop.turns) - 1) if loop.turns else "-"),
                _line(f"{len(loop.turns)} turns, {messages} messages"),
                Text(f"{loop.raw_tokens:,}"),
                Text("out of scope", style="dim"),
                _line("nothing: the loop is outside the context's scope"),
                Text("0"),
                end_section=not is_next_out,
            )
            continue
        turns: list[AuditedTurn | list[AuditedTurn]] = list(loop.turns)
        if max_turns is not None and len(loop.turns) > max_turns:
            head = max(1, max_turns // 3)
            tail = max_turns - head
            turns = [*loop.turns[:head], loop.turns[head:-tail], *loop.turns[-tail:]]
        for index, turn in enumerate(turns):
            last = index == len(turns) - 1
            if isinstance(turn, list):
                actions = Counter(t.action for t in turn)
                add(
                    None,
                    Text("…"),
                    _line(f"{len(turn)} more turns"),
                    Text(f"{sum(t.raw_tokens for t in turn):,}"),
                    Text(", ".join(str(a) for a in actions), style="dim"),
                    _line(""),
                    Text(f"{sum(t.context_tokens for t in turn):,}"),
                    end_section=last,
                )
                continue
            add(
                loop.loop.number,
                Text(str(turn.turn_index)),
                _raw_cell(turn),
                Text(f"{turn.raw_tokens:,}"),
                _action_cell(turn),
                _shown_cell(turn),
                Text(f"{turn.context_tokens:,}"),
                end_section=last,
            )
    return table


def _loop_table(audit: SessionAudit) -> Table:
    table = Table(
        *(
            Column(name, justify="right", no_wrap=True)
            for name in ("Loop", "Turns", "Messages", "Raw tok")
        ),
        Column("Block", no_wrap=True),
        Column("Scope", no_wrap=True),
        Column("Ctx tok", justify="right", no_wrap=True),
        Column("Ctx/raw", justify="right", no_wrap=True),
    )
    current = audit.loops[-1].loop.id if audit.loops else None
    digested = set(audit.digested_loop_ids)
    for loop in audit.loops:
        block = loop.block
        table.add_row(
            *cells(
                f"{loop.loop.number}*" if loop.loop.id == current else loop.loop.number,
                len(loop.turns),
                sum(len(turn.messages) for turn in loop.turns),
                f"{loop.raw_tokens:,}",
                "none" if block is None else f"gen {block.generation}",
                "in" if loop.in_scope else "digest" if loop.loop.id in digested else "out",
                f"{loop.context_tokens:,}",
                share(loop.context_tokens, loop.raw_tokens) if loop.in_scope else "-",
            )
        )
    return table


def _totals(audit: SessionAudit) -> str:
    in_scope = sum(1 for loop in audit.loops if loop.in_scope)
    total = (
        f"Total: {audit.raw_tokens:,} raw tokens → {audit.context_tokens:,} in context "
        f"(ratio {audit.ratio:.1%}); {in_scope} of {len(audit.loops)} loop(s) in scope."
    )
    if audit.digest is None:
        return total
    return (
        f"{total}\nThe session digest ({digest_tokens(audit.digest):,} tokens) stands for "
        f"the {len(audit.digested_loop_ids)} loop(s) marked `digest`."
    )


def print_audit_summary(console: Console, audit: SessionAudit) -> None:
    """Print one row per loop of the audit, then the totals."""
    console.print(_loop_table(audit))
    console.print("* the current loop", style="dim")
    console.print(_totals(audit), markup=False, soft_wrap=True)


def audit_json(audit: SessionAudit, numbers: LoopNumbers) -> dict[str, Any]:
    """Return the audit as JSON data: `SessionAudit.to_dict`, each loop with its number too.

    Loops keep their ids (the store API's) and gain `loop_number`, their number in the
    session as the tables show it; the digest gains the numbers of the loops it folds.
    """
    data = audit.to_dict()
    for loop in data["loops"]:
        loop["loop_number"] = numbers(loop["loop_id"])
    if (digest := data["digest"]) is not None:
        digest["through_loop_number"] = numbers.optional(digest["through_loop_id"])
        digest["folded_loop_numbers"] = numbers.all(digest["folded_loop_ids"])
    return data


def print_audit(session_id: str, overlay: str, audit: SessionAudit) -> None:
    """Print the audit of a session: the turn table, the loop table and the totals.

    Loops are named by their number in the session (`LoopRecord.number`), not by id.
    """
    console = stdout()
    if not audit.loops:
        console.print(f"Session {session_id!r} has no loops.", markup=False, soft_wrap=True)
        return
    console.print(
        f"Audit of session {session_id!r} (overlay {overlay!r})",
        markup=False,
        soft_wrap=True,
    )
    console.print(turn_table(audit.loops))
    print_audit_summary(console, audit)
