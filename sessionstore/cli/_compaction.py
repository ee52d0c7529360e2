"""`sessionstore compact`, `context` and `audit`: write overlays, read them, compare them."""

# Click keeps the line breaks of a paragraph that follows a line holding only "\b" (a
# backspace character), which is how every help text shows its example; a raw docstring
# would hold a backslash and a "b" instead.
# ruff: noqa: D301

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from sessionstore import CompactionConfig, FixedCount
from sessionstore.cli._loops import session_loops
from sessionstore.cli._options import (
    AS_OF,
    COUNT,
    TOKENS,
    Scope,
    Settings,
    budget_option,
    json_option,
    loop_option,
    overlay_option,
    read_only_file_uri,
    run_read,
    run_with_store,
    scope_option,
    summarizer_options,
    user_errors,
)
from sessionstore.cli._progress import progress, progress_option
from sessionstore.cli._render import print_json

# The commands import what only they use when they run (the strategies and summarizers,
# the audit, the renderers), so `context` does not load what `compact` or `audit` need.
if TYPE_CHECKING:
    from sessionstore import BuiltContext, CompactionResult, SessionAudit, SessionStore
    from sessionstore._audit import AuditSnapshot
    from sessionstore._file_history import FileHistory
    from sessionstore.cli._render import ContextFormat
    from sessionstore.cli._render._loops import LoopNumbers
    from sessionstore.models import LoopRecord

__all__ = ["audit", "compact", "context"]

_DEFAULTS = CompactionConfig()
"""The library's defaults, which the options show."""

_DEFAULT_SCOPE = (
    str(_DEFAULTS.compaction_scope.count)
    if isinstance(_DEFAULTS.compaction_scope, FixedCount)
    else "budget"
)

_F = TypeVar("_F", bound=Callable[..., Any])


def _setting_option(
    name: str, field: str, kind: click.ParamType[int], metavar: str, help_text: str
) -> Callable[[_F], _F]:
    """Return an option for a `CompactionConfig` field that shows the library's default."""
    return click.option(
        name,
        type=kind,
        default=getattr(_DEFAULTS, field),
        show_default=True,
        metavar=metavar,
        help=help_text,
    )


# ── compact ────────────────────────────────────────────────────────────────────


@click.command("compact")
@click.argument("session_id", metavar="SESSION")
@loop_option("Compact this loop (and the loops before it in scope) instead of the active loop.")
@budget_option(
    "The model's window (max_context_tokens), which `--scope budget` walks back against.",
    default=100_000,
)
@click.option(
    "--strategy",
    default="summarize",
    show_default=True,
    metavar="NAME",
    help="The block strategy, by its registered name.",
)
@scope_option(
    "How many earlier loops of the chain are summarised with the current one, or "
    "`budget` for as many as fit --budget.",
    default=_DEFAULT_SCOPE,
)
@click.option(
    "--system-prompt-tokens",
    type=COUNT,
    default=0,
    show_default=True,
    metavar="TOKENS",
    help="Tokens of the window taken by a system prompt you send yourself: the messages are "
    "compacted for the rest.",
)
@_setting_option(
    "--keep-first",
    "keep_first_turns",
    COUNT,
    "TURNS",
    "Turns kept verbatim from the start of the current loop.",
)
@_setting_option(
    "--keep-recent",
    "keep_recent_turns",
    COUNT,
    "TURNS",
    "Turns kept from the end of the current loop, with tool output truncated.",
)
@_setting_option(
    "--max-summary-tokens",
    "max_summary_tokens",
    TOKENS,
    "TOKENS",
    "The token budget of one loop's summary.",
)
@_setting_option(
    "--tool-output-max-lines",
    "tool_output_max_lines",
    TOKENS,
    "LINES",
    "The most lines a tool output keeps in the recent turns (head and tail).",
)
@summarizer_options("the digests")
@click.option("--focus", metavar="TOPIC", help="A topic the digests keep in most detail.")
@overlay_option("The named overlay to write; other overlays are left alone.")
@json_option()
@progress_option()
@click.pass_obj
def compact(
    settings: Settings,
    session_id: str,
    loop_number: int | None,
    max_context_tokens: int,
    strategy: str,
    scope: Scope,
    system_prompt_tokens: int,
    keep_first: int,
    keep_recent: int,
    max_summary_tokens: int,
    tool_output_max_lines: int,
    summarizer_url: str | None,
    summarizer_model: str | None,
    summarizer_key_env: str,
    focus: str | None,
    overlay: str,
    as_json: bool,
    show_progress: bool | None,
) -> None:
    """Compact a session's current loop and the earlier loops in scope.

    Writes one compaction block per loop, in one transaction: the current loop keeps
    its first turns raw, has its middle turns summarised and its recent turns kept with
    tool output truncated; each earlier loop in scope is summarised whole (unless its
    block already is such a summary). Raw messages never change: a newer block
    supersedes the loop's previous one, which stays for audit and `context --as-of`.

    \b
    Examples:
        sessionstore compact 3f2a9c...
        sessionstore compact 3f2a9c... --strategy summarize
        sessionstore compact 3f2a9c... --summarizer-url http://127.0.0.1:8000 --summarizer-model m
        sessionstore compact 3f2a9c... --scope budget --budget 32000 --keep-recent 6 --json
    """
    if summarizer_url is not None:
        if strategy != "summarize":
            raise click.UsageError(f"--summarizer-url needs --strategy summarize, not {strategy!r}")
        if not summarizer_model:
            raise click.UsageError("--summarizer-url needs --summarizer-model")
    elif focus is not None and strategy != "summarize":
        raise click.UsageError("--focus needs --strategy summarize")
    config = CompactionConfig(
        compaction_scope=scope,
        keep_first_turns=keep_first,
        keep_recent_turns=keep_recent,
        max_summary_tokens=max_summary_tokens,
        tool_output_max_lines=tool_output_max_lines,
        block_strategy=strategy,
    )

    from sessionstore import (
        OpenAICompatibleSummarizer,
        SummarizingBlockCompaction,
        compact_session_loops,
    )
    from sessionstore.cli._render import compaction_json, print_compaction

    async def work(store: SessionStore) -> tuple[CompactionResult, LoopNumbers]:
        # Compaction adds no loop: the numbers read first name the loops it compacted.
        numbers, loop_id = await session_loops(store, session_id, loop_number)
        return await compact_with(store, loop_id), numbers

    async def compact_with(store: SessionStore, loop_id: int | None) -> CompactionResult:
        async def run(chosen: str | SummarizingBlockCompaction) -> CompactionResult:
            return await compact_session_loops(
                store,
                session_id,
                loop_id,
                chosen,
                config,
                max_context_tokens,
                overlay=overlay,
                system_prompt_tokens=system_prompt_tokens,
            )

        if strategy != "summarize":
            return await run(strategy)
        if summarizer_url is None:
            return await run(SummarizingBlockCompaction(focus_topic=focus))
        async with OpenAICompatibleSummarizer(
            summarizer_url, summarizer_model or "", api_key_env=summarizer_key_env or None
        ) as model:
            return await run(
                SummarizingBlockCompaction(model, cheap_passes=True, focus_topic=focus)
            )

    with progress(f"Compacting session {session_id}", show_progress, as_json=as_json):
        result, numbers = run_with_store(settings.url, work)
    if as_json:
        print_json(compaction_json(session_id, result, numbers))
    else:
        print_compaction(session_id, result, numbers, strategy=strategy, overlay=overlay)


# ── context ────────────────────────────────────────────────────────────────────


@click.command("context")
@click.argument("session_id", metavar="SESSION")
@budget_option(
    "The model's window (max_context_tokens): the context fits it, or the command fails."
)
@click.option(
    "--system-prompt-tokens",
    type=COUNT,
    default=0,
    show_default=True,
    metavar="TOKENS",
    help="Tokens of the window reserved for a system prompt you send yourself; the stored "
    "system messages are then left out of the context.",
)
@loop_option("Rebuild the context of this loop instead of the active loop.")
@click.option(
    "--as-of",
    type=AS_OF,
    metavar="GENERATION|TIME",
    help="Rebuild what the model saw then: a generation of the loop's block (1, 2, ...) "
    "or an ISO 8601 time; a time without an offset is read as UTC.",
)
@overlay_option("The named overlay to load.")
@scope_option()
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["text", "openai", "json"]),
    help="text: readable, one header line per message, summary at the end; openai: the "
    "messages as an OpenAI chat-completions list; json: every message with where it comes "
    "from.  [default: text]",
)
@json_option("The same as --format json.")
@click.option(
    "--redact-secrets",
    is_flag=True,
    help="Redact credentials (API keys, bearer tokens, passwords in URLs, private keys) from "
    "every message, as build_context(redact_secrets=True) does before a model call. Without "
    "it, messages are shown as stored, secrets included, as the model would get them.",
)
@click.pass_obj
def context(
    settings: Settings,
    session_id: str,
    max_context_tokens: int,
    system_prompt_tokens: int,
    loop_number: int | None,
    as_of: int | datetime | None,
    overlay: str,
    scope: Scope | None,
    output_format: ContextFormat | None,
    as_json: bool,
    redact_secrets: bool,
) -> None:
    """Print the context the model sees, rebuilt within a budget.

    Loads the loops in scope oldest first (from their compaction blocks where they have
    one, raw otherwise), pairs every tool call with its result, and trims the oldest
    messages if it must to fit, always keeping the latest user request. With --format
    openai or json the summary (tokens, loops in scope, trimmed messages, interrupted
    calls) goes to stderr, so stdout can be piped.

    \b
    Examples:
        sessionstore context 3f2a9c... --budget 8000
        sessionstore context 3f2a9c... --budget 128000 --system-prompt-tokens 4000 --format openai
        sessionstore context 3f2a9c... --budget 32000 --as-of 1 --json
        sessionstore context 3f2a9c... --budget 8000 --redact-secrets
    """
    if as_json and output_format not in (None, "json"):
        raise click.UsageError(f"--json contradicts --format {output_format}")
    chosen: ContextFormat = "json" if as_json else output_format or "text"

    from sessionstore.cli._render import print_context

    found = _file_context(
        settings,
        session_id,
        max_context_tokens=max_context_tokens,
        loop_number=loop_number,
        scope=scope,
        system_prompt_tokens=system_prompt_tokens,
        overlay=overlay,
        as_of=as_of,
        redact_secrets=redact_secrets,
    )
    if found is not None:
        built, numbers = found
        print_context(session_id, built, max_context_tokens, chosen, numbers)
        return

    from sessionstore import build_context

    async def work(store: SessionStore) -> tuple[BuiltContext, LoopNumbers]:
        numbers, loop_id = await session_loops(store, session_id, loop_number)
        built = await build_context(
            store,
            session_id,
            max_context_tokens=max_context_tokens,
            loop_id=loop_id,
            scope=scope,
            system_prompt_tokens=system_prompt_tokens,
            overlay=overlay,
            as_of=as_of,
            redact_secrets=redact_secrets,
        )
        return built, numbers

    built, numbers = run_with_store(settings.url, work, read_only=True)
    print_context(session_id, built, max_context_tokens, chosen, numbers)


def _file_context(
    settings: Settings,
    session_id: str,
    *,
    max_context_tokens: int,
    loop_number: int | None,
    scope: Scope | None,
    system_prompt_tokens: int,
    overlay: str,
    as_of: int | datetime | None,
    redact_secrets: bool,
) -> tuple[BuiltContext, LoopNumbers] | None:
    """`context` on a SQLite file read without SQLAlchemy, or None (see `_sqlite_context`).

    The same read (`_context_read.read_context`) and the same build (`built_from`) as
    through the store, with the same checks in the same order, so the same output and
    errors; None for any other URL or a file the store must read.
    """
    uri = read_only_file_uri(settings.url)
    if uri is None:
        return None
    from sessionstore._context import built_from, context_budget
    from sessionstore._scope import context_scope
    from sessionstore._sqlite_context import read_file_context
    from sessionstore.cli._loops import numbered
    from sessionstore.cli._render._loops import LoopNumbers

    def loop_id_of(loops: list[LoopRecord]) -> int | None:
        return numbered(loops, session_id, loop_number)[1]

    def budget() -> int:
        return context_budget(max_context_tokens, system_prompt_tokens)

    with user_errors():
        found = read_file_context(
            uri,
            timeout=settings.lock_timeout,
            session_id=session_id,
            loop_id_of=loop_id_of,
            scope=context_scope(scope, None),
            budget=budget,
            overlay=overlay,
            as_of=as_of,
        )
        if found is None:
            return None
        loops, sources = found
        built = built_from(
            sources,
            budget=budget(),
            overlay=overlay,
            as_of=as_of,
            redact_secrets=redact_secrets,
            system_prompt_tokens=system_prompt_tokens,
        )
    return built, LoopNumbers(loops)


# ── audit ──────────────────────────────────────────────────────────────────────


@click.command("audit")
@click.argument("session_id", metavar="SESSION")
@loop_option("Audit the chain of loops ending at this loop instead of the active chain.")
@overlay_option("The named overlay to audit (with --html: the one the page opens on).")
@scope_option()
@budget_option("The window a `budget` scope walks back against.", default=100_000)
@click.option(
    "--html",
    "html_path",
    type=click.Path(dir_okay=False, writable=True, allow_dash=True, path_type=Path),
    metavar="FILE",
    help="Write the audit as one self-contained web page to FILE (`-` for stdout): every "
    "overlay, after every compaction, with the raw messages beside what the model sees.",
)
@click.option(
    "--moments",
    type=click.IntRange(min=0),
    metavar="N",
    help="With --html: only the newest N compactions of each overlay as views, besides "
    "now (a long session compacted often makes a view per compaction, each with every "
    "loop of its chain).  [default: every compaction]",
)
@json_option()
@click.option(
    "--redact-secrets",
    is_flag=True,
    help="Redact credentials (API keys, bearer tokens, passwords in URLs, private keys) from "
    "the messages shown, for a report to share. Token counts stay those of the stored messages.",
)
@progress_option()
@click.pass_obj
def audit(
    settings: Settings,
    session_id: str,
    loop_number: int | None,
    overlay: str,
    scope: Scope | None,
    max_context_tokens: int,
    html_path: Path | None,
    moments: int | None,
    as_json: bool,
    redact_secrets: bool,
    show_progress: bool | None,
) -> None:
    """Compare raw turns with what the model sees, turn by turn.

    For each turn of the loops in scope: its raw messages and their tokens, what the
    overlay did with them (kept, truncated, summarised, omitted or dropped), the
    replacement messages that stand for them (`#id`) and their tokens. Loops outside the
    scope are one row each: the model sees none of them. Then one row per loop and the
    totals. Counts are before any trim to a budget (see `sessionstore context`).

    With --html, writes a page to open in a browser instead: the loop chain as a
    timeline with token bars, each turn's raw messages beside what the model sees,
    summaries that expand to the raw messages they stand for, and a switch between
    the session's overlays and their generations (time travel), side by side.

    \b
    Examples:
        sessionstore audit 3f2a9c...
        sessionstore audit 3f2a9c... --loop 12 --json
        sessionstore audit 3f2a9c... --html report.html --redact-secrets
        sessionstore audit 3f2a9c... --html report.html --moments 10
    """
    if html_path is None and moments is not None:
        raise click.UsageError("--moments chooses the views of --html; give --html FILE too")
    if html_path is not None:
        if as_json:
            raise click.UsageError("--json contradicts --html")
        _write_html_audit(
            settings,
            session_id,
            loop_number,
            overlay,
            scope,
            max_context_tokens,
            html_path,
            moments=moments,
            redact_secrets=redact_secrets,
            show_progress=show_progress,
        )
        return

    from sessionstore import audit_session
    from sessionstore.cli._render import audit_json, print_audit
    from sessionstore.cli._render._redacted import redacted_audit

    async def work(store: SessionStore | FileHistory) -> tuple[SessionAudit, LoopNumbers]:
        numbers, loop_id = await session_loops(store, session_id, loop_number)
        audited = await audit_session(
            store,
            session_id,
            loop_id=loop_id,
            overlay=overlay,
            scope=scope,
            max_context_tokens=max_context_tokens,
        )
        return audited, numbers

    # A SQLite file is read without SQLAlchemy, in one read transaction (`run_read`).
    result, numbers = run_read(settings, work)
    if redact_secrets:
        result = redacted_audit(result)
    if as_json:
        print_json(audit_json(result, numbers))
    else:
        print_audit(session_id, overlay, result)


def _write_html_audit(
    settings: Settings,
    session_id: str,
    loop_number: int | None,
    overlay: str,
    scope: Scope | None,
    max_context_tokens: int,
    path: Path,
    *,
    moments: int | None,
    redact_secrets: bool,
    show_progress: bool | None,
) -> None:
    # Imported here: the template engine is only needed by this option.
    from sessionstore._audit import audit_snapshots
    from sessionstore.cli._render._html import audit_page
    from sessionstore.cli._render._redacted import redacted_snapshots

    async def work(store: SessionStore | FileHistory) -> tuple[list[AuditSnapshot], LoopNumbers]:
        numbers, loop_id = await session_loops(store, session_id, loop_number)
        # The overlay asked for must exist, as for the other outputs.
        await store.chain_blocks(session_id, loop_id=loop_id, overlay=overlay, limit=1)
        snapshots = await audit_snapshots(
            store,
            session_id,
            loop_id=loop_id,
            scope=scope,
            max_context_tokens=max_context_tokens,
            moments=moments,
        )
        return snapshots, numbers

    with progress(f"Reading session {session_id}", show_progress) as shown:
        snapshots, numbers = run_read(settings, work)
        if redact_secrets:
            shown.step("Redacting secrets")
            snapshots = redacted_snapshots(snapshots)
        shown.step(f"Rendering {len(snapshots)} view(s)")
        now = datetime.now(UTC)
        page = audit_page(session_id, snapshots, overlay=overlay, generated_at=now, numbers=numbers)
        if str(path) != "-":
            shown.step(f"Writing {len(page.encode()) / 1e6:,.1f} MB to {path}")
            path.write_text(page, encoding="utf-8")
    if str(path) == "-":
        click.echo(page, nl=False)
        return
    views = len(snapshots)
    overlays = len({snapshot.overlay for snapshot in snapshots})
    which = (
        "after each compaction, and now"
        if moments is None
        else f"after its newest {moments} compaction(s), and now"
        if moments
        else "now"
    )
    click.echo(
        f"Wrote {path}: {overlays} overlay(s), {views} view(s) (each overlay {which}). "
        "Open it in a browser."
    )
