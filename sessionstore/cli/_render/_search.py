"""Search hits as text: where each one is, its score, and its snippet."""

from __future__ import annotations

import click
from rich.padding import Padding

from sessionstore import SearchHit
from sessionstore.cli._render._output import stdout
from sessionstore.cli._render._printable import text

__all__ = ["print_search_hits"]


def print_search_hits(hits: list[SearchHit]) -> None:
    """Print the hits best first: a line saying where each is, then its snippet, indented."""
    if not hits:
        click.echo("No matches.")
        return
    console = stdout()
    for hit in hits:
        where = "summary" if hit.is_summary else f"turn {hit.turn_index}"
        head = text(
            f"{hit.session_id}  loop {hit.loop_number}  {where}  message {hit.message_id}  "
            f"{hit.kind}  score {hit.score:.3g}",
            style="bold",
        )
        console.print(head)
        # Text, not str: a snippet of code must not be read as rich markup.
        console.print(Padding(text(hit.snippet), (0, 0, 0, 4)))
