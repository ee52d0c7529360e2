"""`sessionstore trajectories compress`: fit training trajectories under a token target."""

# Click keeps the line breaks of a paragraph that follows a line holding only "\b" (a
# backspace character), which is how every help text shows its example; a raw docstring
# would hold a backslash and a "b" instead.
# ruff: noqa: D301

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from pathlib import Path
from typing import IO, Any

import click
from rich.progress import DownloadColumn

from sessionstore._trajectories import (
    DEFAULT_PROTECT_LAST,
    DEFAULT_TARGET_MAX_TOKENS,
    TrajectoryReport,
    TrajectoryResult,
    compress_trajectory,
    compress_trajectory_lines,
    record_line,
)
from sessionstore.cli._options import COUNT, TOKENS, json_option, run, summarizer_options
from sessionstore.cli._render import print_json, progress_bar
from sessionstore.cli._render._trajectories import (
    print_trajectory_report,
    trajectory_report_json,
)
from sessionstore.cli._replaced_file import replaced_on_success
from sessionstore.summarizers import ExtractiveSummarizer, OpenAICompatibleSummarizer, Summarizer

__all__ = ["trajectories"]


@click.group("trajectories")
def trajectories() -> None:
    """Prepare agent trajectories (JSONL) as training data.

    \b
    Example:
        sessionstore trajectories compress runs.jsonl runs.15k.jsonl
    """


def _advancing(lines: IO[bytes], advance: Callable[[int], None]) -> Iterator[bytes]:
    for line in lines:
        advance(len(line))
        yield line


@contextlib.asynccontextmanager
async def _summarizer(
    url: str | None, model: str | None, key_env: str
) -> AsyncIterator[Summarizer]:
    if url is None:
        yield ExtractiveSummarizer()
        return
    async with OpenAICompatibleSummarizer(url, model or "", api_key_env=key_env or None) as chosen:
        yield chosen


async def _compress_file(
    lines: Iterable[bytes],
    sink: IO[str],
    *,
    target: int,
    workers: int,
    protect_last: int,
    max_summary_tokens: int,
    url: str | None,
    model: str | None,
    key_env: str,
) -> TrajectoryReport:
    report = TrajectoryReport()
    options: dict[str, Any] = {
        "target_max_tokens": target,
        "protect_last": protect_last,
        "max_summary_tokens": max_summary_tokens,
    }

    async def write(compress: Callable[[dict[str, Any]], Awaitable[TrajectoryResult]]) -> None:
        async for number, result in compress_trajectory_lines(lines, compress, workers=workers):
            sink.write(record_line(number, result.record))
            sink.write("\n")
            report.add(result.metrics, number)

    # One process, `workers` asyncio tasks. Measured on the real transcripts (50 runs,
    # 1.3M tokens): the extractive path takes 0.7 s in one process and 1.1 s with a pool
    # of 2 processes (start-up and pickling outweigh the work), so no pool.
    async with _summarizer(url, model, key_env) as summarizer:

        async def in_task(record: dict[str, Any]) -> TrajectoryResult:
            return await compress_trajectory(record, summarizer=summarizer, **options)

        await write(in_task)
    return report


@trajectories.command("compress")
@click.argument(
    "source", metavar="IN.jsonl", type=click.Path(exists=True, dir_okay=False, path_type=Path)
)
@click.argument("target_file", metavar="OUT.jsonl", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--target-max-tokens",
    type=TOKENS,
    default=DEFAULT_TARGET_MAX_TOKENS,
    show_default=True,
    metavar="TOKENS",
    help="The most tokens a trajectory may take after compression.",
)
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    default=4,
    show_default=True,
    metavar="N",
    help="Trajectories compressed at once (concurrent requests with --summarizer-url).",
)
@click.option(
    "--protect-last",
    type=COUNT,
    default=DEFAULT_PROTECT_LAST,
    show_default=True,
    metavar="N",
    help="The last turns of each trajectory kept verbatim.",
)
@click.option(
    "--max-summary-tokens",
    type=TOKENS,
    default=2_000,
    show_default=True,
    metavar="TOKENS",
    help="The most tokens a summary turn may take (20% of what it folds, at least 200).",
)
@summarizer_options("the summaries")
@json_option("Print the total report as JSON to stdout.")
def compress(
    source: Path,
    target_file: Path,
    target_max_tokens: int,
    workers: int,
    protect_last: int,
    max_summary_tokens: int,
    summarizer_url: str | None,
    summarizer_model: str | None,
    summarizer_key_env: str,
    as_json: bool,
) -> None:
    """Fold the middle of each trajectory that is over the target into one summary turn.

    Each line of IN.jsonl is one trajectory, ShareGPT (`conversations` of `from`/`value`
    turns) or OpenAI (`messages`). The system prompt, the first request and answer, and
    the last turns are kept verbatim; of the turns between, the oldest are folded, only
    as many as needed, into one `human` (`user`) summary turn. Other keys and the order
    of the lines are kept. A bad line stops the command and OUT.jsonl is not written.

    \b
    Examples:
        sessionstore trajectories compress runs.jsonl runs.15k.jsonl
        sessionstore trajectories compress runs.jsonl out.jsonl --target-max-tokens 8000 --json
        sessionstore trajectories compress runs.jsonl out.jsonl --workers 2 --protect-last 6
    """
    if summarizer_url is not None and not summarizer_model:
        raise click.UsageError("--summarizer-url needs --summarizer-model")
    clock = time.perf_counter()
    progress = progress_bar("Compressing", DownloadColumn())
    with (
        replaced_on_success(target_file, param_hint="OUT.jsonl") as sink,
        source.open("rb") as lines,
        progress,
    ):
        task = progress.add_task("compress", total=source.stat().st_size or None)
        advancing = _advancing(lines, lambda size: progress.advance(task, size))
        report = run(
            _compress_file(
                advancing,
                sink,
                target=target_max_tokens,
                workers=workers,
                protect_last=protect_last,
                max_summary_tokens=max_summary_tokens,
                url=summarizer_url,
                model=summarizer_model,
                key_env=summarizer_key_env,
            )
        )
    report.seconds = time.perf_counter() - clock
    output = str(target_file)
    if as_json:
        print_json(trajectory_report_json(report, target=target_max_tokens, output=output))
    else:
        print_trajectory_report(report, target=target_max_tokens, output=output)
