"""What `compact` wrote, as a table or JSON: one row per block, then the tokens in scope."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Column, Table

from sessionstore import CompactedSection, CompactionBlock, CompactionResult
from sessionstore.cli._render._loops import LoopNumbers
from sessionstore.cli._render._output import cells, ids, share, stdout, turn_span

__all__ = ["compaction_json", "print_compaction", "print_compaction_blocks"]


def _section_json(section: CompactedSection | None) -> dict[str, int] | None:
    if section is None:
        return None
    return {
        "start_turn": section.range.start_turn,
        "end_turn": section.range.end_turn,
        "messages": len(section.messages),
    }


def _block_json(block: CompactionBlock, numbers: LoopNumbers) -> dict[str, Any]:
    first = block.keep_first
    return {
        "id": block.id,
        "loop_id": block.loop_id,
        "loop_number": numbers.optional(block.loop_id),
        "generation": block.generation,
        "overlay": block.overlay,
        "strategy": block.strategy,
        "keep_first": None if first is None else first.model_dump(mode="json"),
        "keep_compacted": _section_json(block.keep_compacted),
        "keep_recent": _section_json(block.keep_recent),
        "tokens_before": block.tokens_before,
        "tokens_after": block.tokens_after,
        "created_at": None if block.created_at is None else block.created_at.isoformat(),
    }


def compaction_json(
    session_id: str, result: CompactionResult, numbers: LoopNumbers
) -> dict[str, Any]:
    """Return what a compaction did as JSON data: the loops, the tokens and every block.

    Loops are named by id (the store API's) and by number in the session (`loop_numbers`,
    as the text output shows them).
    """
    return {
        "session_id": session_id,
        "loop_ids": result.loop_ids,
        "loop_numbers": numbers.all(result.loop_ids),
        "skipped_loop_ids": result.skipped_loop_ids,
        "tokens_before": result.tokens_before,
        "tokens_after": result.tokens_after,
        "duration_ms": round(result.duration_ms, 3),
        "noop": result.noop,
        "unchanged_loop_ids": result.unchanged_loop_ids,
        "oversized_loop_ids": result.oversized_loop_ids,
        "feedback": None if result.feedback is None else result.feedback.to_dict(),
        "blocks": [_block_json(block, numbers) for block in result.blocks],
    }


def _section_cell(section: CompactedSection | None) -> str:
    if section is None:
        return "-"
    turns = turn_span(section.range.start_turn, section.range.end_turn)
    return f"{turns} ({len(section.messages)} msg)"


def print_compaction_blocks(
    console: Console, session_id: str, result: CompactionResult, numbers: LoopNumbers
) -> None:
    """Print one row per block written, the loops skipped, and the tokens of the loops in scope.

    Loops are named by their number in the session (`numbers`), not by id.
    """
    if not result.loop_ids:
        console.print(
            f"Nothing to compact: session {session_id!r} has no loops.",
            markup=False,
            soft_wrap=True,
        )
        return
    current = numbers(result.loop_ids[-1])
    if result.blocks:
        table = Table(
            Column("Loop", justify="right", no_wrap=True),
            Column("Gen", justify="right", no_wrap=True),
            Column("Keep\nfirst", no_wrap=True),
            Column("Keep\ncompacted", no_wrap=True),
            Column("Keep\nrecent", no_wrap=True),
            Column("Tokens\nbefore", justify="right", no_wrap=True),
            Column("Tokens\nafter", justify="right", no_wrap=True),
        )
        for block in result.blocks:
            first = block.keep_first
            number = numbers.optional(block.loop_id)
            table.add_row(
                *cells(
                    f"{number}*" if number == current else number,
                    block.generation,
                    "-" if first is None else turn_span(first.start_turn, first.end_turn),
                    _section_cell(block.keep_compacted),
                    _section_cell(block.keep_recent),
                    f"{block.tokens_before:,}",
                    f"{block.tokens_after:,}",
                )
            )
        console.print(table)
        console.print("* the current loop", style="dim")
    elif not result.unchanged_loop_ids and not result.oversized_loop_ids:
        console.print("No block was written: no loop in scope has turns to compact.")
    if result.skipped_loop_ids:
        console.print(
            f"Skipped loop(s) {ids(sorted(numbers.all(result.skipped_loop_ids)))}: their current "
            "block already summarises them with the same strategy and settings.",
            markup=False,
            soft_wrap=True,
        )
    if result.unchanged_loop_ids:
        console.print(
            f"Unchanged loop(s) {ids(sorted(numbers.all(result.unchanged_loop_ids)))}: compacting "
            "them again gives the blocks they already have, so nothing was written.",
            markup=False,
            soft_wrap=True,
        )
    if result.feedback is not None:
        for line in result.feedback.lines():
            console.print(line, markup=False, soft_wrap=True)
    console.print(
        f"Loops in scope {ids(numbers.all(result.loop_ids))}: {result.tokens_before:,} → "
        f"{result.tokens_after:,} context tokens "
        f"({share(result.tokens_after, result.tokens_before)}).",
        markup=False,
        soft_wrap=True,
    )


def print_compaction(
    session_id: str,
    result: CompactionResult,
    numbers: LoopNumbers,
    *,
    strategy: str,
    overlay: str,
) -> None:
    """Print what `compact` did: a line naming the strategy and overlay, then the blocks."""
    console = stdout()
    if result.loop_ids:
        console.print(
            f"Compacted session {session_id!r} (strategy {strategy!r}, overlay {overlay!r}, "
            f"{result.duration_ms:.0f} ms):",
            markup=False,
            soft_wrap=True,
        )
    print_compaction_blocks(console, session_id, result, numbers)
