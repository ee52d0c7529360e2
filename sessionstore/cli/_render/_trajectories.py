"""How `trajectories compress` prints its total report."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from sessionstore._trajectories import TrajectoryReport
from sessionstore.cli._render._output import cells, share, stdout
from sessionstore.cli._render._printable import printable

__all__ = ["print_trajectory_report", "trajectory_report_json"]


def trajectory_report_json(report: TrajectoryReport, *, target: int, output: str) -> dict[str, Any]:
    """Return the report as the `--json` document."""
    return {"output": output, "target_max_tokens": target, **report.to_dict()}


def print_trajectory_report(report: TrajectoryReport, *, target: int, output: str) -> None:
    """Print the totals as a two-column table."""
    table = Table(
        title=f"Trajectories -> {printable(output)} (target {target:,} tokens)", show_header=False
    )
    table.add_column("what")
    table.add_column("value", justify="right")
    rows: list[tuple[str, object]] = [
        ("trajectories", report.trajectories),
        ("compressed", report.compressed),
        ("unchanged", report.unchanged),
        ("still over target", report.still_over_target),
        ("tokens before", f"{report.tokens_before:,}"),
        (
            "tokens after",
            f"{report.tokens_after:,} ({share(report.tokens_after, report.tokens_before)})",
        ),
        ("turns folded", report.turns_folded),
        ("summarizer time", f"{report.summarizer_ms / 1000:.2f} s"),
        ("wall time", f"{report.seconds:.2f} s"),
    ]
    for name, value in rows:
        table.add_row(*cells(name, value))
    console = stdout()
    console.print(table)
    if report.over_target_lines:
        lines = ", ".join(str(n) for n in report.over_target_lines[:20])
        more = " ..." if len(report.over_target_lines) > 20 else ""
        console.print(f"Still over the target (lines): {lines}{more}")
