"""Synthetic coding-agent sessions: long, realistic, and the same every time for a seed.

A session is a list of loops; a loop is the work for one user request on a fictional
Python project (`ledgerline`, a small bookkeeping service): the request, then assistant
turns that read, search, edit and test the code, then a final answer. The demo, the
benchmarks and the tests use it to get histories of any length without a model.

The shape follows real coding-agent transcripts (sizes are in heuristic tokens,
UTF-8 bytes / 4):

- **Turns per loop:** log-uniform over `turns_per_loop` (default 6 to 40 tool-using
  assistant turns), plus the final answer.
- **Assistant turns:** thinking first in 45%, a short text in 70%, then 1 tool call (72%),
  2 (20%) or 3 (8%). Early turns explore (`read_file`, `grep`, `list_dir`), middle
  turns edit, late turns run tests and `bash` checks.
- **Tool results:** one per call, right after the call. File reads return a whole file
  of 40 to 450 numbered lines or a window of 30 to 120, edits a short snippet, greps up
  to 60 hits, test runs a summary or tracebacks, and now and then a log tail of several
  thousand tokens: a median near 250 tokens, a tenth above 2,000. About 10% are errors
  (`is_error=True`), mostly failing tests.
- **Users:** requests of 30 to 200 tokens, a quarter with a pasted traceback or log;
  a follow-up message ("also ...", "that broke ...") after 4% of turns, and a shell
  command of their own (`BashExecutionMessage`) after 2%.

Every loop is drawn from its own generator, seeded from `(seed, loop index)`, so the
first loops of a session do not depend on how many follow.
"""

from __future__ import annotations

import base64
import json
import math
import random
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TypeVar

from sessionstore.models import (
    AssistantMessage,
    BashExecutionMessage,
    Message,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)

__all__ = ["generate_session", "iter_session_messages"]

_T = TypeVar("_T")

_MODEL = "synthetic-coder-1"
_SYSTEM_TOKENS = 5_200
"""What a coding agent's system prompt and tool schemas cost, counted into `Usage`."""

# ── the fictional project ─────────────────────────────────────────────────────

_PACKAGE = "ledgerline"
_MODULES = (
    "api/routes.py",
    "api/schemas.py",
    "api/auth.py",
    "cli.py",
    "config.py",
    "db/models.py",
    "db/queries.py",
    "db/engine.py",
    "importers/csv_rows.py",
    "importers/bank_feed.py",
    "reports/monthly.py",
    "reports/export.py",
    "services/invoices.py",
    "services/payments.py",
    "services/currency.py",
    "cache.py",
    "scheduler.py",
    "notifications.py",
    "money.py",
    "audit.py",
)
_DOCS = (
    "README.md",
    "CHANGELOG.md",
    "docs/index.md",
    "docs/cli.md",
    "docs/api.md",
    "docs/configuration.md",
    "docs/reports.md",
)
_NOUNS = (
    "invoice",
    "payment",
    "account",
    "posting",
    "customer",
    "vendor",
    "report",
    "rate",
    "period",
    "payout",
    "statement",
    "receipt",
    "budget",
    "tax_rule",
    "schedule",
    "webhook",
    "export_job",
    "line_item",
    "refund",
    "transfer",
)
_VERBS = (
    "load",
    "parse",
    "validate",
    "compute",
    "format",
    "fetch",
    "build",
    "apply",
    "merge",
    "normalize",
    "export",
    "reconcile",
    "summarize",
    "resolve",
    "refresh",
    "render",
    "save",
    "find",
    "group",
    "convert",
)
_CONDITIONS = (
    "rounds_to_cents",
    "rejects_negative_amount",
    "handles_empty_batch",
    "keeps_input_order",
    "uses_account_currency",
    "skips_cancelled",
    "is_idempotent",
    "accepts_naive_datetime",
    "returns_none_when_missing",
    "raises_on_unknown_currency",
    "splits_by_month",
    "ignores_deleted",
    "paginates",
    "retries_once",
    "escapes_csv_fields",
    "respects_timezone",
)
_STATUSES = ("draft", "open", "paid", "cancelled", "overdue", "pending", "failed")
_IMPORTS = (
    "import json",
    "import logging",
    "import os",
    "from collections import defaultdict",
    "from dataclasses import dataclass, field",
    "from datetime import UTC, date, datetime, timedelta",
    "from decimal import ROUND_HALF_UP, Decimal",
    "from typing import Any",
    "from collections.abc import Iterable, Iterator, Sequence",
    "from sqlalchemy import func, select",
    "from sqlalchemy.orm import Session",
)
_STATEMENTS = (
    "{n}s = repository.list_{n}s(account_id=account_id)",
    "if not {n}s:\n    return []",
    "total = sum(({n}.amount for {n} in {n}s), Decimal(0))",
    'logger.info("{v} %d {n}s for %s", len({n}s), account_id)',
    'for {n} in {n}s:\n    if {n}.status == "{s}":\n        continue\n    result.append({f}({n}))',
    'if {n} is None:\n    raise {N}Error(f"{n} {{{n}_id}} not found")',
    "query = select({N}).where({N}.account_id == account_id).order_by({N}.created_at)",
    "rows = db.execute(query).scalars().all()",
    "amount = (amount * rate).quantize(CENTS, rounding=ROUND_HALF_UP)",
    'key = f"{n}:{{account_id}}:{{period}}"',
    "cached = cache.get(key)\nif cached is not None:\n    return cached",
    "try:\n    payload = json.loads(raw)\nexcept ValueError as exc:\n"
    '    raise {N}Error("invalid {n} payload") from exc',
    "# Amounts are stored in cents; convert once, at the edge.",
    "result: dict[str, Any] = {{}}",
    'result["{n}_count"] = len({n}s)',
    "with db.begin():\n    db.add({n})",
    "by_month: dict[date, list[{N}]] = defaultdict(list)",
    "for {n} in {n}s:\n    by_month[{n}.created_at.date().replace(day=1)].append({n})",
    "if settings.strict and {n}.currency != account.currency:\n"
    '    raise {N}Error("currency mismatch", {n}_id={n}.id)',
    "since = datetime.now(UTC) - timedelta(days=settings.retention_days)",
    "{n}s = [{n} for {n} in {n}s if {n}.updated_at >= since]",
    "{n} = {f}({n}, rate=rates.get({n}.currency, Decimal(1)))",
    "# The provider sends local times without an offset; treat them as UTC.",
    "if {n}.created_at.tzinfo is None:\n    {n}.created_at = {n}.created_at.replace(tzinfo=UTC)",
    'logger.warning("skipping {n} %s: %s", {n}.id, reason)',
    "batch = {n}s[offset : offset + MAX_BATCH]",
    "while batch:\n    yield from batch\n    offset += MAX_BATCH\n"
    "    batch = {n}s[offset : offset + MAX_BATCH]",
)
_RETURNS = (
    "return result",
    "return total",
    "return {n}s",
    "return {n}",
    "return sorted(result, key=lambda item: item.created_at)",
    "return {N}Summary(count=len({n}s), total=total)",
    "return dict(by_month)",
)
_SENTENCES = (
    "Amounts are stored as integer cents and converted to `Decimal` only for display.",
    "Every {n} belongs to exactly one account and carries the account's currency.",
    "The scheduler runs the job every night at 02:00 UTC and retries once on failure.",
    "Exports are written as UTF-8 CSV with a header row and `;` as the separator.",
    "Set `LEDGERLINE_DATABASE_URL` to point the service at PostgreSQL instead of SQLite.",
    "Cancelled {n}s are kept for auditing but never counted in totals.",
    "Exchange rates are cached for an hour; pass `--no-cache` to fetch fresh ones.",
    "The API returns `404` for unknown ids and `409` when a {n} was changed concurrently.",
    "Reports group {n}s by calendar month in the account's time zone.",
    "Bank feeds are imported idempotently: importing the same file twice adds nothing.",
)

_TOOLS = ("read_file", "grep", "list_dir", "edit_file", "run_tests", "bash")
# Tool weights per phase of a loop, in the order of _TOOLS: explore, change, verify.
_PHASE_WEIGHTS = (
    (0.42, 0.24, 0.1, 0.0, 0.14, 0.1),
    (0.3, 0.08, 0.0, 0.4, 0.15, 0.07),
    (0.15, 0.05, 0.0, 0.2, 0.4, 0.2),
)
_CUMULATIVE = tuple(
    tuple(sum(weights[: i + 1]) for i in range(len(weights))) for weights in _PHASE_WEIGHTS
)


@dataclass(frozen=True, slots=True)
class _File:
    path: str
    lines: tuple[str, ...]
    numbered: tuple[str, ...]
    """`lines` as `cat -n` prints them, made once so that reads only join."""
    defs: dict[str, tuple[int, int]]
    """Function or test name → its `[start, end)` line indices."""
    names: tuple[str, ...]
    """The keys of `defs`, for `random.choice`."""
    text: str
    """`numbered` joined: what reading the whole file returns."""


@dataclass(frozen=True, slots=True)
class _Project:
    modules: tuple[_File, ...]
    tests: tuple[_File, ...]
    """The test file of each module, at the same index."""
    docs: tuple[_File, ...]
    files: dict[str, _File]
    listing: dict[str, tuple[str, ...]]
    """Directory → its entries, subdirectories with a trailing slash."""
    hits: dict[str, tuple[str, ...]]
    """Identifier → its grep hits, `path:line:text`."""
    words: tuple[str, ...]
    """The keys of `hits`, for `random.choice`."""
    directories: tuple[str, ...]
    """The keys of `listing`, for `random.choice`."""
    log: tuple[str, ...]
    """The service's log; log tails are windows of it, made once because they are long."""
    sizes: str
    """`wc -l` of the modules."""


def _choice(rng: random.Random, seq: Sequence[_T]) -> _T:
    # `Random.choice` and `randint` draw bits until they fit the range, several times
    # slower than one float: it matters at a million messages.
    return seq[int(rng.random() * len(seq))]


def _int(rng: random.Random, low: int, high: int) -> int:
    return low + int(rng.random() * (high - low + 1))


def _below(rng: random.Random, stop: int) -> int:
    return int(rng.random() * stop)


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


def _numbered(lines: Sequence[str], first: int = 1) -> tuple[str, ...]:
    return tuple(f"{i:>6}\t{line}" for i, line in enumerate(lines, first))


def _file(path: str, lines: Sequence[str], defs: dict[str, tuple[int, int]]) -> _File:
    numbered = _numbered(lines)
    return _File(path, tuple(lines), numbered, defs, tuple(defs), "\n".join(numbered))


def _statement_lines(rng: random.Random, noun: str, indent: str) -> list[str]:
    text = _choice(rng, _STATEMENTS).format(
        n=noun,
        N=_camel(noun),
        v=_choice(rng, _VERBS).capitalize(),
        f=f"{_choice(rng, _VERBS)}_{noun}",
        s=_choice(rng, _STATUSES),
    )
    return [indent + line for line in text.split("\n")]


def _python_module(rng: random.Random, path: str) -> tuple[list[str], dict[str, tuple[int, int]]]:
    nouns = rng.sample(_NOUNS, 3)
    target = int(rng.triangular(40, 450, 150))
    module = path.removesuffix(".py").replace("/", ".")
    verbs = ", ".join(_choice(rng, _VERBS) for _ in range(3))
    lines = [
        f'"""{_camel(nouns[0])} handling for {_PACKAGE}.{module}: {verbs} {nouns[0]}s."""',
        "",
        "from __future__ import annotations",
        "",
        *sorted(rng.sample(_IMPORTS, _int(rng, 3, 7))),
        "",
        f"from {_PACKAGE}.db.models import {', '.join(sorted(_camel(n) for n in nouns))}",
        f"from {_PACKAGE}.money import CENTS",
        "",
        "logger = logging.getLogger(__name__)",
        "",
        f"MAX_BATCH = {_choice(rng, (100, 250, 500, 1000))}",
        "",
        "",
        f"class {_camel(nouns[0])}Error(Exception):",
        f'    """Raised when a {nouns[0]} cannot be processed."""',
    ]
    defs: dict[str, tuple[int, int]] = {}
    while len(lines) < target:
        noun = _choice(rng, nouns)
        verb = _choice(rng, _VERBS)
        name = f"{verb}_{noun}s" if rng.random() < 0.4 else f"{verb}_{noun}"
        if name in defs:
            name = f"{name}_{len(defs)}"
        lines += ["", ""]
        start = len(lines)
        lines += [
            f"def {name}(account_id: int, *, db: Session, strict: bool = False) -> Any:",
            f'    """{verb.capitalize()} the {noun.replace("_", " ")}s of one account."""',
        ]
        for _ in range(_int(rng, 2, 9)):
            lines += _statement_lines(rng, noun, "    ")
        lines.append("    " + _choice(rng, _RETURNS).format(n=noun, N=_camel(noun)))
        defs[name] = (start, len(lines))
    return lines, defs


def _test_module(
    rng: random.Random, module: str, functions: Sequence[str]
) -> tuple[list[str], dict[str, tuple[int, int]]]:
    imported = sorted(rng.sample(list(functions), min(len(functions), 4)))
    lines = [
        f'"""Tests for {_PACKAGE}.{module}."""',
        "",
        "from decimal import Decimal",
        "",
        "import pytest",
        "",
        f"from {_PACKAGE}.{module} import {', '.join(imported)}",
        "from tests.factories import make_account, make_entry",
    ]
    defs: dict[str, tuple[int, int]] = {}
    for _ in range(_int(rng, 6, 40)):
        function = _choice(rng, imported)
        name = f"test_{function}_{_choice(rng, _CONDITIONS)}"
        if name in defs:
            name = f"{name}_{len(defs)}"
        amount = f"{_int(rng, 1, 9999)}.{_int(rng, 0, 99):02d}"
        status = _choice(rng, _STATUSES)
        lines += ["", ""]
        start = len(lines)
        if rng.random() < 0.3:
            third = _choice(rng, ("GBP", "CHF", "JPY"))
            lines.append(f'@pytest.mark.parametrize("currency", ["EUR", "USD", "{third}"])')
        lines += [
            f"def {name}(db, currency):",
            f'    account = make_account(db, currency=currency, balance=Decimal("{amount}"))',
            f'    make_entry(db, account=account, amount=Decimal("-{amount}"), status="{status}")',
            "",
            f"    result = {function}(account.id, db=db, strict={_choice(rng, ('True', 'False'))})",
            "",
        ]
        for _ in range(_int(rng, 1, 4)):
            lines += (
                _choice(
                    rng,
                    (
                        f'    assert result.total == Decimal("{amount}")',
                        "    assert result.count == 1",
                        "    assert result == []",
                        f'    assert [e.status for e in result] == ["{_choice(rng, _STATUSES)}"]',
                        "    with pytest.raises(ValueError):\n"
                        f"        {function}(account.id, db=db, strict=True)",
                    ),
                )
            ).split("\n")
        defs[name] = (start, len(lines))
    return lines, defs


def _document(rng: random.Random, path: str) -> list[str]:
    title = path.rsplit("/", 1)[-1].removesuffix(".md").replace("_", " ").capitalize()
    lines = [f"# {title}", ""]
    for _ in range(_int(rng, 3, 12)):
        noun = _choice(rng, _NOUNS)
        lines += [f"## {_choice(rng, _VERBS).capitalize()} {noun.replace('_', ' ')}s", ""]
        sentences = [_choice(rng, _SENTENCES).format(n=noun) for _ in range(_int(rng, 2, 6))]
        lines += [" ".join(sentences), ""]
        if rng.random() < 0.5:
            lines += [
                "```console",
                f"$ {_PACKAGE} {_choice(rng, _VERBS)} {noun}s --account {_int(rng, 1000, 9999)}",
                f"{_int(rng, 1, 400)} {noun}s, total {_int(rng, 10, 99999)} EUR",
                "```",
                "",
            ]
    return lines


def _log(rng: random.Random, count: int) -> list[str]:
    millisecond = _below(rng, 86_400_000)
    lines = []
    for _ in range(count):
        millisecond += _int(rng, 0, 12_000)
        second = millisecond // 1000
        module = _choice(rng, _MODULES).removesuffix(".py").replace("/", ".")
        noun = _choice(rng, _NOUNS)
        level, event = _choice(
            rng,
            (
                ("INFO", f"{_choice(rng, _VERBS)} {_int(rng, 1, 500)} {noun}s"),
                ("INFO", f"request finished status=200 duration_ms={_int(rng, 3, 900)}"),
                ("DEBUG", f"cache miss key={noun}:{_int(rng, 1000, 99999)}"),
                ("WARNING", f"slow query duration_ms={_int(rng, 1000, 40000)} on {noun}s"),
                ("ERROR", f"failed to {_choice(rng, _VERBS)} {noun} id={_int(rng, 1, 10**6)}"),
            ),
        )
        day, clock = divmod(second, 86_400)
        hh, mm, ss = clock // 3600, clock // 60 % 60, clock % 60
        lines.append(
            f"2025-03-{14 + day:02d}T{hh:02d}:{mm:02d}:{ss:02d}.{millisecond % 1000:03d}Z "
            f"{level:<7} {_PACKAGE}.{module} {event}"
        )
    return lines


@lru_cache(maxsize=4)
def _project(seed: int) -> _Project:
    """Return the fictional project of a seed: its files, listings, grep index and log."""
    rng = random.Random(f"sessionstore._demo:{seed}:project")
    modules: list[_File] = []
    tests: list[_File] = []
    for path in _MODULES:
        lines, defs = _python_module(rng, path)
        full = f"src/{_PACKAGE}/{path}"
        modules.append(_file(full, lines, defs))
        module = path.removesuffix(".py").replace("/", ".")
        stem = path.rsplit("/", 1)[-1].removesuffix(".py")
        lines, defs = _test_module(rng, module, list(defs))
        tests.append(_file(f"tests/test_{stem}.py", lines, defs))
    docs = [_file(path, _document(rng, path), {}) for path in _DOCS]
    files = {file.path: file for file in (*modules, *tests, *docs)}
    children: dict[str, set[str]] = {}
    for path in [*files, "pyproject.toml", "tests/conftest.py", "tests/factories.py"]:
        parts = path.split("/")
        for depth in range(len(parts)):
            parent = "/".join(parts[:depth]) or "."
            is_dir = depth < len(parts) - 1
            children.setdefault(parent, set()).add(parts[depth] + ("/" if is_dir else ""))
    for directory in list(children):
        if directory.startswith(f"src/{_PACKAGE}"):
            children[directory].add("__init__.py")
    listing = {directory: tuple(sorted(entries)) for directory, entries in children.items()}
    found: dict[str, list[str]] = {}
    wanted = {name for file in files.values() for name in file.defs}
    wanted.update(_camel(noun) for noun in _NOUNS)
    wanted.update(("MAX_BATCH", "CENTS", "strict", "currency"))
    for file in files.values():
        for number, line in enumerate(file.lines, 1):
            for word in set(re.findall(r"\w+", line)) & wanted:
                found.setdefault(word, []).append(f"{file.path}:{number}:{line}")
    # Sorted, because set order changes with PYTHONHASHSEED and `words` is drawn from.
    hits = {word: tuple(found[word]) for word in sorted(found)}
    total = sum(len(file.lines) for file in modules)
    return _Project(
        tuple(modules),
        tuple(tests),
        tuple(docs),
        files,
        listing,
        hits,
        tuple(hits),
        tuple(listing),
        tuple(_log(rng, 4_000)),
        "\n".join([*(f"{len(f.lines):>6} {f.path}" for f in modules), f"{total:>6} total"]),
    )


# ── what people and the model say ───────────────────────────────────────────

_REQUESTS = {
    "fix_test": (
        "`{test}` in {test_path} has been failing on CI since yesterday's merge. Can you find "
        "out why and fix it? Only change the test if the test itself is wrong.",
        "CI is red: {test_path}::{test} fails with an assertion about {noun_h} totals. "
        "Please fix it.",
        "pytest {test_path} fails for me locally. Could you take a look?",
    ),
    "add_flag": (
        "Add a `--{flag}` option to `ledgerline {command}`. When it is set, {effect}. Add a "
        "test and mention it in docs/cli.md.",
        "I need `ledgerline {command}` to accept `--{flag}` so that {effect}. "
        "Keep the default behaviour as it is.",
    ),
    "refactor": (
        "{path} is getting hard to follow. Can you pull the {noun_h} handling out of "
        "`{symbol}` into smaller functions? No behaviour changes, please.",
        "Refactor `{symbol}` in {path}: it does the query, the rounding and the formatting "
        "in one place. Split it up and keep the tests green.",
    ),
    "slow_query": (
        "The monthly report for account {account} takes about {secs} seconds to render. I "
        "suspect the query in {path}. Can you investigate and speed it up?",
        "`ledgerline report monthly` got really slow on the big staging database "
        "({secs}s). Can you profile it and fix the worst part?",
    ),
    "docs": (
        "{doc} is out of date: it still describes the old `{symbol}` behaviour. Please "
        "update it and check that the examples still work.",
        "Please write a section in {doc} about {noun_h}s: what they are, and how the CLI "
        "and the API expose them.",
    ),
    "typing": (
        "mypy --strict reports {count} errors in {path}. Please fix them and avoid "
        "`type: ignore` unless there is no other way.",
    ),
    "bug": (
        "A user reports that {symptom}. Can you reproduce it and fix it? I think the "
        "problem is somewhere around `{symbol}`.",
        "Bug: {symptom}. It started after we upgraded last week. Please investigate.",
    ),
    "tests": (
        "Coverage for {path} is only {pct}%. Please add tests for the untested branches "
        "in `{symbol}`.",
    ),
    "dependency": (
        "Bump {dep} to {version} in pyproject.toml and fix whatever breaks.",
        "Dependabot opened a PR moving {dep} to {version}; the tests fail on it. Can you "
        "make the code work with the new version?",
    ),
    "review": (
        "I changed `{symbol}` in {path} this morning. Could you review it for edge cases "
        "before I open a PR? Fix anything obvious.",
    ),
}
_TASK_KINDS = tuple(_REQUESTS)
_CONTEXT = (
    "The relevant code should be in {path}.",
    "Run the tests with `pytest -q`; the PostgreSQL ones need `LEDGERLINE_TEST_DB` set.",
    "Please keep the change small, we want to release on Friday.",
    "Don't change the public API of `{symbol}`; the billing team calls it directly.",
    "{test_path} has most of the relevant tests.",
    "I tried bumping the timeout, it didn't help.",
    "There's an old ticket about this, but nobody got to it.",
    "Ask me if something is unclear before doing anything drastic.",
    "We support Python 3.10 to 3.13.",
    "Commit nothing, I'll review the diff myself.",
)
_SYMPTOMS = (
    "exported CSV files show amounts with three decimals",
    "reminder emails go out twice for invoices due on the last day of the month",
    "importing a bank feed with an empty memo field crashes",
    "currency conversion uses yesterday's rate after midnight UTC",
    "the API returns 500 instead of 404 for a deleted customer",
    "monthly totals differ by a cent from the bank statement",
    "the scheduler skips jobs after a daylight saving change",
    "refunds are counted twice in the vendor report",
)
_FLAGS = (
    ("dry-run", "export", "nothing is written and the summary is printed instead"),
    ("since", "report monthly", "only entries after the given date are included"),
    ("format", "export", "the output can be `csv` or `json`"),
    ("no-cache", "rates refresh", "exchange rates are fetched even when cached"),
    ("limit", "invoices list", "at most that many invoices are shown"),
    ("quiet", "import", "only errors are printed"),
)
_BUGS = (
    ("rounds before converting the currency", "round once, after the conversion"),
    ("compares naive and aware datetimes", "make both datetimes aware (UTC)"),
    ("drops the last partial batch", "yield the final partial batch too"),
    ("uses the default currency instead of the account's", "read the account's currency"),
    ("sorts the cached list in place", "sort a copy, not the cached list"),
    ("treats an empty string as missing", "check for `None` explicitly"),
    ("filters in Python after loading every row", "filter and aggregate in SQL"),
)
_DEPENDENCIES = (("sqlalchemy", "2.1"), ("pydantic", "2.10"), ("click", "8.2"), ("httpx", "0.28"))
_FOLLOW_UPS = (
    "Also, please keep `{symbol}` importable from its old place for now.",
    "That broke `{test}` on my machine, can you check?",
    "Actually, don't touch {doc}; someone else is rewriting it this week.",
    "Can you also run the whole test suite before you finish?",
    "While you're there, the error message in `{symbol}` is confusing. Make it say what to do.",
    "Make sure this still works on Python 3.10.",
    "One more thing: add a CHANGELOG entry.",
    "Hmm, I'd rather not add a new dependency for this.",
)
_WRAP_UP = "Let's stop here. Summarise what you changed and what is left, please."
_PREAMBLES = {
    "read_file": (
        "Let me look at {file}.",
        "I'll read {file} to see how `{symbol}` handles {noun_h}s.",
        "Reading {file} to see what it expects.",
        "Let me check the rest of {file}.",
        "Let me read {file} before changing anything.",
    ),
    "grep": (
        "Let me find where `{pattern}` is used.",
        "Searching for other uses of `{pattern}`.",
        "Let me check whether anything else depends on `{pattern}`.",
    ),
    "list_dir": ("Let me get an overview of the project layout.", "Let me see what's in {file}."),
    "edit_file": (
        "Now I'll fix it in {file}.",
        "Updating the call site in {file}.",
        "I'll make the change in {file}.",
        "That edit didn't apply cleanly; let me retry with the current text of {file}.",
    ),
    "run_tests": (
        "Running the tests to reproduce the failure.",
        "Let me run the tests again.",
        "Now the whole suite, to make sure nothing else broke.",
    ),
    "bash": (
        "Let me check the state of the working tree.",
        "Let me run the linters on the changed files.",
        "Let me measure how long it takes now.",
    ),
}
_OBSERVATIONS = (
    "The failure comes from `{symbol}`: it {bug}.",
    "Found it. `{symbol}` {bug}.",
    "The tests pass now.",
    "Still one failure, in `{test}`.",
    "That's used in {hits} places.",
    "Good, the fix works.",
)
_THOUGHTS = (
    "The test expects {noun_h} totals rounded to cents, but `{symbol}` rounds after summing.",
    "If I change the signature of `{symbol}`, the callers in {other} need updating too.",
    "The traceback points at line {line} of {path}, inside `{symbol}`.",
    "There are two code paths: one for {noun_h}s that already exist and one for new ones.",
    "I should check whether anything else depends on this behaviour before changing it.",
    "Maybe the fixture creates the {noun_h} with a naive datetime.",
    "Running only {test_path} first is faster than the whole suite.",
    "The query loads every {noun_h} and filters in Python; that explains the time.",
    "An index on (account_id, created_at) would let the database do the filtering.",
    "The simplest fix is to normalise the value at the boundary, in `{symbol}`.",
    "Hmm, that's not it. The value is already wrong before it reaches `{symbol}`.",
    "I'll keep the old name as an alias so existing imports keep working.",
    "The user asked not to change the test, so the fix has to be in {path}.",
    "Wait, `strict` defaults to False here, so the check never runs in production.",
    "Let me think about the edge cases: an empty batch, a single {noun_h}, a cancelled one.",
    "The docs example uses an option that was renamed; I'll update it to the current name.",
    "The grep found {hits} matches; most of them are in tests.",
    "Before editing, I want to see how {file} is laid out.",
    "If the rate is missing the code silently falls back to 1, which hides the real problem.",
    "This changes the output format, so the CLI docs need an update as well.",
    "A cheaper check would be to compare the counts before building the whole report.",
    "I need to be careful: `{symbol}` is also called by the scheduler, not just the CLI.",
    "The error only shows up for {noun_h}s created near midnight, so it's a time zone issue.",
    "Let me not over-engineer this: one helper and a test are enough.",
)
_FIX_FINALS = (
    "Done. `{symbol}` in {path} {bug}; I changed it to {fix}.\n\n{changes}\n\n{tests_line}",
    "Here's what I changed:\n\n{changes}\n\nThe cause was that `{symbol}` {bug}. {tests_line}",
    "Fixed.\n\n{changes}\n\n{tests_line} One thing I did not change: {other} still calls "
    "`{symbol}` the old way; it works, but you may want to update it later.",
)
_OTHER_FINALS = (
    "Done.\n\n{changes}\n\n{tests_line}",
    "Here's what I changed:\n\n{changes}\n\n{tests_line} Let me know if you want the same "
    "treatment for {other}.",
    "Finished. Summary:\n\n{changes}\n\n{tests_line}",
)
_REPEATABLE = frozenset(("read_file", "grep"))
_FIX_KINDS = frozenset(("fix_test", "bug", "slow_query", "review"))
_CHANGE_NOTES = (
    "{fix}",
    "split `{symbol}` into smaller functions",
    "added a regression test for the {noun_h} case",
    "documented the `--{flag}` option",
    "removed an unused import",
    "renamed a local variable for clarity",
    "handle an empty batch explicitly",
    "updated the examples to the current option names",
)
_LINT_ISSUES = (
    "F401 `os` imported but unused",
    "E501 Line too long (104 > 100)",
    "B006 Do not use mutable data structures for argument defaults",
    "SIM108 Use ternary operator instead of `if`-`else`-block",
)
_TYPE_ISSUES = (
    'Incompatible return value type (got "Decimal | None", expected "Decimal")  [return-value]',
    'Missing type parameters for generic type "dict"  [type-arg]',
    'Item "None" of "Account | None" has no attribute "currency"  [union-attr]',
    "Function is missing a return type annotation  [no-untyped-def]",
)
_PYTEST_HEADER = (
    "============================= test session starts ==============================",
    "platform linux -- Python 3.12.4, pytest-8.3.3, pluggy-1.5.0",
    "rootdir: /home/dev/ledgerline",
    "configfile: pyproject.toml",
    "plugins: cov-5.0.0, anyio-4.4.0",
)
_SHELL_KINDS = ("status", "diff", "lint", "types", "log", "time", "sizes", "plan")


# ── one loop ──────────────────────────────────────────────────────────────────


class _Loop:
    """Writes the messages of one loop, and keeps the running size for `Usage`."""

    def __init__(self, project: _Project, rng: random.Random) -> None:
        self.project = project
        self.rng = rng
        self.messages: list[Message] = []
        self.context_chars = 0
        self.edited: list[str] = []
        self.turn_paths: set[str] = set()
        self.kind = _choice(rng, _TASK_KINDS)
        index = _below(rng, len(project.modules))
        self.module = project.modules[index]
        self.test_file = project.tests[index]
        bug, fix = _choice(rng, _BUGS)
        flag, command, effect = _choice(rng, _FLAGS)
        dep, version = _choice(rng, _DEPENDENCIES)
        self.slots = {
            "path": self.module.path,
            "test_path": self.test_file.path,
            "symbol": _choice(rng, self.module.names),
            "test": _choice(rng, self.test_file.names),
            "noun_h": _choice(rng, _NOUNS).replace("_", " "),
            "doc": _choice(rng, project.docs).path,
            "flag": flag,
            "command": command,
            "effect": effect,
            "account": str(_int(rng, 1000, 99999)),
            "secs": str(_int(rng, 12, 95)),
            "count": str(_int(rng, 3, 60)),
            "pct": str(_int(rng, 31, 68)),
            "symptom": _choice(rng, _SYMPTOMS),
            "bug": bug,
            "fix": fix,
            "dep": dep,
            "version": version,
            "other": _choice(rng, project.modules).path,
            "line": "1",
            "hits": "3",
            "file": self.module.path,
            "pattern": "",
        }

    def say(self, templates: Sequence[str]) -> str:
        return _choice(self.rng, templates).format_map(self.slots)

    def add(self, message: Message, chars: int) -> None:
        self.messages.append(message)
        self.context_chars += chars

    # ── the user's messages

    def request(self) -> None:
        text = self.say(_REQUESTS[self.kind])
        if self.rng.random() < 0.5:
            extra = self.rng.sample(_CONTEXT, _int(self.rng, 1, 3))
            text += "\n\n" + " ".join(sentence.format_map(self.slots) for sentence in extra)
        if self.rng.random() < 0.25:
            text += "\n\nHere's what I see:\n\n```\n" + self.pasted_output() + "\n```"
        self.add(UserMessage(content=[TextContent(text=text)]), len(text))

    def pasted_output(self) -> str:
        if self.rng.random() < 0.5:
            return "\n".join(self.traceback(_int(self.rng, 1, 4)))
        return self.log_tail(_int(self.rng, 8, 60))

    def follow_up(self, text: str | None = None) -> None:
        text = text or self.say(_FOLLOW_UPS)
        self.add(UserMessage(content=[TextContent(text=text)]), len(text))

    def bash_execution(self) -> None:
        command, output, exit_code = self.shell(is_user=True)
        cancelled = self.rng.random() < 0.08
        self.add(
            BashExecutionMessage(
                command=command,
                output="" if cancelled else output,
                exit_code=None if cancelled else exit_code,
                cancelled=cancelled,
            ),
            len(command) + len(output),
        )

    # ── the assistant's messages

    def assistant_turn(self, phase: int, calls: int) -> None:
        rng = self.rng
        self.slots["symbol"] = _choice(rng, self.module.names)
        self.slots["line"] = str(_int(rng, 1, len(self.module.lines)))
        self.slots["hits"] = str(_int(rng, 2, 14))
        tools: list[str] = []
        for _ in range(calls):
            tool = self.pick_tool(phase)
            # Parallel calls read or search several things; they don't run the tests twice.
            tools.append("read_file" if tool in tools and tool not in _REPEATABLE else tool)
        self.turn_paths.clear()
        content: list[TextContent | ThinkingContent | ToolCall] = []
        calls_content: list[ToolCall] = []
        results: list[tuple[ToolResultMessage, int]] = []
        chars = 0
        text = ""
        for tool in tools:
            call_id = self.call_id()
            arguments, output, is_error = self.run_tool(tool, phase)
            if not calls_content and rng.random() < 0.7:
                # Said before the calls, but written now, while the slots name the first one.
                text = self.say(_PREAMBLES[tool])
                if rng.random() < 0.35:
                    text = self.say(_OBSERVATIONS) + " " + text
            chars += len(arguments)
            calls_content.append(ToolCall(id=call_id, name=tool, arguments=arguments))
            result = ToolResultMessage(
                tool_call_id=call_id,
                tool_name=tool,
                content=[TextContent(text=output)],
                is_error=is_error,
            )
            results.append((result, len(output)))
        if rng.random() < 0.45:
            thinking = self.thinking()
            chars += len(thinking)
            content.append(ThinkingContent(thinking=thinking, signature=self.signature()))
        if text:
            chars += len(text)
            content.append(TextContent(text=text))
        content += calls_content
        self.add(self.assistant(content, chars, "tool_use"), chars)
        for result, size in results:
            self.add(result, size)

    def interrupted_call(self) -> None:
        tool = self.pick_tool(2)
        arguments, _, _ = self.run_tool(tool, 2)
        call = ToolCall(id=self.call_id(), name=tool, arguments=arguments)
        self.add(self.assistant([call], len(arguments), "tool_use"), len(arguments))

    def final_answer(self) -> None:
        rng = self.rng
        edited = list(dict.fromkeys(self.edited))[:6] or [self.module.path]
        changes = "\n".join(f"- {path}: {self.say(_CHANGE_NOTES)}" for path in edited)
        passed = len(self.test_file.defs)
        tests_line = _choice(
            rng,
            (
                f"`pytest {self.test_file.path}` passes ({passed} tests).",
                f"The whole suite passes ({passed + _int(rng, 200, 900)} tests).",
                "I could not run the integration tests here (they need PostgreSQL).",
            ),
        )
        finals = _FIX_FINALS if self.kind in _FIX_KINDS else _OTHER_FINALS
        text = _choice(rng, finals).format_map(
            {**self.slots, "changes": changes, "tests_line": tests_line}
        )
        self.add(self.assistant([TextContent(text=text)], len(text), "end_turn"), len(text))

    def assistant(
        self,
        content: list[TextContent | ThinkingContent | ToolCall],
        chars: int,
        stop_reason: str,
    ) -> AssistantMessage:
        # The context the model was sent: the system prompt and this loop so far. Earlier
        # loops are left out, as if the agent had compacted them.
        usage = Usage(
            input_tokens=_SYSTEM_TOKENS + self.context_chars // 4,
            output_tokens=chars // 4 + 1,
            cache_read_tokens=_SYSTEM_TOKENS + self.context_chars // 5,
        )
        return AssistantMessage(content=content, model=_MODEL, stop_reason=stop_reason, usage=usage)

    def call_id(self) -> str:
        return f"call_{self.rng.getrandbits(96):024x}"

    def thinking(self) -> str:
        count = min(int(self.rng.expovariate(1 / 4)) + 1, len(_THOUGHTS))
        return " ".join(t.format_map(self.slots) for t in self.rng.sample(_THOUGHTS, count))

    def signature(self) -> str:
        return base64.b64encode(self.rng.randbytes(_int(self.rng, 160, 480))).decode()

    def pick_tool(self, phase: int) -> str:
        draw = self.rng.random()
        for tool, bound in zip(_TOOLS, _CUMULATIVE[phase], strict=True):
            if draw < bound:
                return tool
        return _TOOLS[-1]  # the cumulative weights may sum to a hair under 1.0

    def target(self) -> _File:
        """Return the file a call works on: mostly the task's module and its tests."""
        rng = self.rng
        draw = rng.random()
        if draw < 0.45:
            file = self.module
        elif draw < 0.7:
            file = self.test_file
        elif draw < 0.8:
            file = _choice(rng, self.project.docs)
        else:
            file = _choice(rng, self.project.modules)
        if file.path in self.turn_paths:
            file = _choice(rng, self.project.modules)
        self.turn_paths.add(file.path)
        self.slots["file"] = file.path
        return file

    # ── tools: each returns (JSON arguments, output, is_error)

    def run_tool(self, tool: str, phase: int) -> tuple[str, str, bool]:
        if tool == "read_file":
            return self.read_file()
        if tool == "grep":
            return self.grep()
        if tool == "list_dir":
            return self.list_dir()
        if tool == "edit_file":
            return self.edit_file()
        if tool == "run_tests":
            return self.run_tests(phase)
        command, output, exit_code = self.shell(is_user=False)
        return json.dumps({"command": command}), output, exit_code != 0

    def read_file(self) -> tuple[str, str, bool]:
        rng = self.rng
        file = self.target()
        if rng.random() < 0.03:
            path = file.path.replace(".py", "_utils.py").replace(".md", "_old.md")
            self.slots["file"] = path
            return json.dumps({"path": path}), f"Error: file not found: {path}", True
        size = len(file.lines)
        if size > 120 and rng.random() < 0.5:
            offset = _below(rng, size - 40)
            limit = _int(rng, 30, 120)
            arguments = json.dumps({"path": file.path, "offset": offset + 1, "limit": limit})
            return arguments, "\n".join(file.numbered[offset : offset + limit]), False
        return json.dumps({"path": file.path}), file.text, False

    def grep(self) -> tuple[str, str, bool]:
        rng = self.rng
        if rng.random() < 0.1:
            pattern = f"{_choice(rng, _VERBS)}_{_choice(rng, _NOUNS)}_legacy"
            self.slots["pattern"] = pattern
            return json.dumps({"pattern": pattern, "path": "."}), "No matches found.", False
        pattern = self.slots["symbol"] if rng.random() < 0.6 else _choice(rng, self.project.words)
        self.slots["pattern"] = pattern
        found = self.project.hits.get(pattern, ())
        scope = _choice(rng, (".", "src/", "tests/"))
        if scope != ".":
            found = tuple(hit for hit in found if hit.startswith(scope))
        arguments = json.dumps({"pattern": pattern, "path": scope})
        if not found:
            return arguments, "No matches found.", False
        output = "\n".join(found[:60])
        if len(found) > 60:
            output += f"\n[{len(found) - 60} more matches not shown]"
        return arguments, output, False

    def list_dir(self) -> tuple[str, str, bool]:
        directory = _choice(self.rng, self.project.directories)
        self.slots["file"] = directory
        return json.dumps({"path": directory}), "\n".join(self.project.listing[directory]), False

    def edit_file(self) -> tuple[str, str, bool]:
        rng = self.rng
        file = self.module if rng.random() < 0.6 else self.target()
        self.slots["file"] = file.path
        start = _below(rng, max(len(file.lines) - 12, 1))
        old = file.lines[start : start + _int(rng, 1, 10)]
        new = [*old[:-1], _mutated(rng, old[-1])]
        if rng.random() < 0.4:
            new[_below(rng, len(new) + 1) : 0] = _inserted(rng, new[0])
        arguments = json.dumps(
            {"path": file.path, "old_string": "\n".join(old), "new_string": "\n".join(new)}
        )
        if rng.random() < 0.07:
            return (
                arguments,
                f"Error: old_string was not found in {file.path}. The file may have changed "
                "since you read it; read it again and retry.",
                True,
            )
        self.edited.append(file.path)
        end = start + len(old)
        shift = len(new) - len(old)
        snippet = (
            *file.numbered[max(start - 4, 0) : start],
            *_numbered(new, start + 1),
            *_numbered(file.lines[end : end + 4], end + 1 + shift),
        )
        output = (
            f"The file {file.path} has been updated. Here is the result of running `cat -n` "
            "on a snippet of the edited file:\n" + "\n".join(snippet)
        )
        return arguments, output, False

    def run_tests(self, phase: int) -> tuple[str, str, bool]:
        rng = self.rng
        is_whole_suite = rng.random() < 0.2
        failing = 0
        if rng.random() < (0.65, 0.4, 0.15)[phase]:
            failing = min(int(rng.expovariate(1 / 1.5)) + 1, 6)
        if is_whole_suite:
            files, args = self.project.tests, "-q"
        else:
            files, args = (self.test_file,), f"{self.test_file.path} -q"
        return json.dumps({"args": args}), self.pytest_output(files, failing), failing > 0

    def pytest_output(self, files: Sequence[_File], failing: int) -> str:
        rng = self.rng
        total = sum(len(file.defs) for file in files)
        failing = min(failing, total)
        failed: dict[tuple[str, str], str] = {}
        while len(failed) < failing:
            file = _choice(rng, files)
            failed[file.path, _choice(rng, file.names)] = self.error_line()
        failed_paths = {path for path, _ in failed}
        lines = [*_PYTEST_HEADER, f"collected {total} items", ""]
        for file in files:
            if file.path in failed_paths:
                marks = "".join("F" if (file.path, n) in failed else "." for n in file.names)
            else:
                marks = "." * len(file.names)
            lines.append(f"{file.path} {marks}")
        if failed:
            lines += ["", "=" * 35 + " FAILURES " + "=" * 35]
        for (path, name), error in failed.items():
            file = self.project.files[path]
            start, end = file.defs[name]
            body = list(file.lines[start:end])
            body[-1] = ">" + body[-1][1:]
            symbol = _choice(rng, self.module.names)
            first, last = self.module.defs[symbol]
            where = _int(rng, first, last - 1)
            lines += [
                f"{'_' * 20} {name} {'_' * 20}",
                "",
                *body,
                "",
                f"{self.module.path}:{where + 1}: in {symbol}",
                "    " + self.module.lines[where].strip(),
                f"E   {error}",
                "",
                f"{path}:{end}: {error.split(':', 1)[0]}",
            ]
        if failed:
            lines.append("=" * 27 + " short test summary info " + "=" * 28)
            lines += [f"FAILED {path}::{name} - {error}" for (path, name), error in failed.items()]
        summary = f"{total - failing} passed in {rng.uniform(0.4, 3.0) * len(files):.2f}s"
        if failing:
            summary = f"{failing} failed, {summary}"
        lines.append(f"{'=' * 25} {summary} {'=' * 25}")
        return "\n".join(lines)

    def error_line(self) -> str:
        rng = self.rng
        a = f"{_int(rng, 1, 999)}.{_int(rng, 0, 99):02d}"
        b = f"{_int(rng, 1, 999)}.{_int(rng, 0, 99):02d}"
        return _choice(
            rng,
            (
                f"AssertionError: assert Decimal('{a}') == Decimal('{b}')",
                "TypeError: can't compare offset-naive and offset-aware datetimes",
                f"KeyError: '{_choice(rng, _NOUNS)}_id'",
                "AttributeError: 'NoneType' object has no attribute 'currency'",
                f"AssertionError: assert {_int(rng, 0, 9)} == {_int(rng, 10, 40)}",
            ),
        )

    def traceback(self, frames: int) -> list[str]:
        rng = self.rng
        lines = ["Traceback (most recent call last):"]
        for _ in range(frames):
            file = self.module if rng.random() < 0.6 else _choice(rng, self.project.modules)
            symbol = _choice(rng, file.names)
            first, last = file.defs[symbol]
            where = _int(rng, first, last - 1)
            lines += [
                f'  File "/srv/ledgerline/{file.path}", line {where + 1}, in {symbol}',
                "    " + file.lines[where].strip(),
            ]
        lines.append(self.error_line())
        return lines

    def log_tail(self, count: int) -> str:
        log = self.project.log
        start = int(self.rng.random() * (len(log) - count))
        return "\n".join(log[start : start + count])

    def shell(self, *, is_user: bool) -> tuple[str, str, int]:
        """Return a shell command, its output and its exit code."""
        rng = self.rng
        module = self.module
        path = module.path
        kind = _choice(rng, _SHELL_KINDS)
        if kind == "status":
            changed = list(dict.fromkeys([*self.edited, path]))[:8]
            output = "On branch main\nChanges not staged for commit:\n" + "\n".join(
                f"\tmodified:   {p}" for p in changed
            )
            return "git status", output, 0
        if kind == "diff":
            return f"git diff {path}", self.diff(module), 0
        if kind == "lint":
            if rng.random() < 0.6:
                return f"ruff check {path}", "All checks passed!", 0
            count = _int(rng, 1, 6)
            lines = [
                f"{path}:{_int(rng, 1, len(module.lines))}:{_int(rng, 1, 60)}: "
                + _choice(rng, _LINT_ISSUES)
                for _ in range(count)
            ]
            return f"ruff check {path}", "\n".join([*lines, f"Found {count} errors."]), 1
        if kind == "types":
            if rng.random() < 0.5:
                return f"mypy {path}", "Success: no issues found in 1 source file", 0
            count = _int(rng, 1, 12)
            lines = [
                f"{path}:{_int(rng, 1, len(module.lines))}: error: {_choice(rng, _TYPE_ISSUES)}"
                for _ in range(count)
            ]
            lines.append(f"Found {count} errors in 1 file (checked 1 source file)")
            return f"mypy {path}", "\n".join(lines), 1
        if kind == "log":
            count = 40 if is_user else _choice(rng, (50, 100, 200, 400))
            return f"tail -n {count} logs/ledgerline.log", self.log_tail(count), 0
        if kind == "time":
            real = rng.uniform(0.3, 40.0)
            output = (
                f"{_int(rng, 20, 4000)} entries, total {_int(rng, 100, 999999)} EUR\n\n"
                f"real\t0m{real:.3f}s\nuser\t0m{real * 0.7:.3f}s\nsys\t0m{real * 0.05:.3f}s"
            )
            return f"time ledgerline report monthly --account {self.slots['account']}", output, 0
        if kind == "sizes":
            return f"wc -l src/{_PACKAGE}/**/*.py", self.project.sizes, 0
        plan = (
            "QUERY PLAN",
            f"|--SCAN {_choice(rng, _NOUNS)}s",
            "|--SEARCH accounts USING INTEGER PRIMARY KEY (rowid=?)",
            "`--USE TEMP B-TREE FOR ORDER BY",
        )
        return "sqlite3 ledgerline.db < slow_query.sql", "\n".join(plan), 0

    def diff(self, file: _File) -> str:
        rng = self.rng
        lines = [
            f"diff --git a/{file.path} b/{file.path}",
            f"--- a/{file.path}",
            f"+++ b/{file.path}",
        ]
        for _ in range(_int(rng, 1, 4)):
            start = _below(rng, max(len(file.lines) - 10, 1))
            context = file.lines[start : start + 3]
            changed = file.lines[start + 3 : start + 3 + _int(rng, 1, 4)]
            added = [_mutated(rng, line) for line in changed]
            old_count, new_count = len(context) + len(changed), len(context) + len(added)
            lines.append(f"@@ -{start + 1},{old_count} +{start + 1},{new_count} @@")
            lines += [" " + line for line in context]
            lines += ["-" + line for line in changed]
            lines += ["+" + line for line in added]
        return "\n".join(lines)


def _mutated(rng: random.Random, line: str) -> str:
    """Return `line` changed the way a small fix changes a line."""
    stripped = line.rstrip()
    if not stripped:
        return "    # Keep the order stable: reports are compared line by line."
    changed = _choice(
        rng,
        (
            stripped.replace("amount", "converted_amount", 1),
            stripped.replace("strict", "strict_mode", 1),
            stripped.replace(" == ", " is ", 1) if "None" in stripped else stripped,
        ),
    )
    return changed if changed != stripped else stripped + "  # normalised above"


def _inserted(rng: random.Random, like: str) -> list[str]:
    indent = like[: len(like) - len(like.lstrip())]
    return [
        indent + line
        for line in _choice(
            rng,
            (
                ("if amount is None:", "    return Decimal(0)"),
                ("# Rates are per unit of the account currency.",),
                ("created_at = created_at.astimezone(UTC)",),
                ("rows = list(rows)",),
            ),
        )
    ]


def _loop_messages(
    project: _Project,
    rng: random.Random,
    turns: int,
    *,
    budget: int | None = None,
    is_interrupted: bool = False,
) -> list[Message]:
    """Return one loop; with a budget, at most `budget` messages and never exactly one less."""
    loop = _Loop(project, rng)
    loop.request()
    room = math.inf if budget is None else budget
    follow_ups = 0
    for turn in range(turns):
        # The final answer needs one message; the calls of this turn need one more than
        # their number.
        free = room - len(loop.messages) - 1
        if free < 2:
            break
        phase = 0 if turn < 0.3 * turns else 1 if turn < 0.75 * turns else 2
        draw = rng.random()
        calls = 1 if draw < 0.72 else 2 if draw < 0.92 else 3
        loop.assistant_turn(phase, int(min(calls, free - 1)))
        if turn + 1 < turns and free - calls - 1 >= 3:
            if follow_ups < 2 and rng.random() < 0.04:
                follow_ups += 1
                loop.follow_up()
            elif rng.random() < 0.02:
                loop.bash_execution()
    if is_interrupted:
        loop.interrupted_call()
        return loop.messages
    # A loop may not leave room for exactly one message: no loop is that short.
    if budget is not None and budget - len(loop.messages) - 1 == 1:
        loop.follow_up(_WRAP_UP)
    loop.final_answer()
    return loop.messages


def _turn_count(rng: random.Random, turns_per_loop: int | tuple[int, int]) -> int:
    if isinstance(turns_per_loop, int):
        return turns_per_loop
    low, high = turns_per_loop
    # Log-uniform: most loops are short, a few are very long, as in real sessions.
    return min(int(math.exp(rng.uniform(math.log(low), math.log(high + 1)))), high)


def _check_turns(turns_per_loop: int | tuple[int, int]) -> None:
    if isinstance(turns_per_loop, int):
        if turns_per_loop < 0:
            raise ValueError(f"turns_per_loop must be at least 0, got {turns_per_loop}")
        return
    low, high = turns_per_loop
    if not 1 <= low <= high:
        raise ValueError(
            f"turns_per_loop must be (low, high) with 1 <= low <= high, got {turns_per_loop}"
        )


def _loop_rng(seed: int, index: int) -> random.Random:
    return random.Random(f"sessionstore._demo:{seed}:loop:{index}")


def generate_session(
    *,
    seed: int = 0,
    loops: int = 12,
    turns_per_loop: int | tuple[int, int] = (6, 40),
    interrupted_last_call: bool = False,
) -> list[list[Message]]:
    """Return a synthetic coding-agent session: one list of messages per loop.

    Each loop starts with a user request and ends with an assistant answer that makes no
    tool call; every tool call in between is answered by one tool result in the same
    turn. The same arguments always give the same messages.

    Args:
        seed: Chooses the session; the project's files depend on it too.
        loops: How many loops (user requests).
        turns_per_loop: Tool-using assistant turns per loop: a fixed number, or a
            `(low, high)` range drawn log-uniformly per loop.
        interrupted_last_call: End the last loop with an assistant tool call that has
            no result, as when a run is killed mid-call, instead of a final answer.

    Example:
        >>> session = generate_session(seed=7, loops=3)
        >>> [loop[0].kind for loop in session]
        ['user', 'user', 'user']
    """
    _check_turns(turns_per_loop)
    if loops < 0:
        raise ValueError(f"loops must be at least 0, got {loops}")
    if interrupted_last_call and loops == 0:
        raise ValueError("interrupted_last_call needs at least one loop")
    project = _project(seed)
    session = []
    for index in range(loops):
        rng = _loop_rng(seed, index)
        turns = _turn_count(rng, turns_per_loop)
        is_last = index == loops - 1
        session.append(
            _loop_messages(project, rng, turns, is_interrupted=interrupted_last_call and is_last)
        )
    return session


def iter_session_messages(
    *,
    seed: int = 0,
    total_messages: int,
    turns_per_loop: int | tuple[int, int] = (6, 40),
) -> Iterator[list[Message]]:
    """Yield the loops of a synthetic session until it holds `total_messages` messages.

    The loops are those of `generate_session` with the same seed, except the last, which
    is cut short to end exactly at `total_messages` (it still ends with a final answer,
    and no call is left without a result). Loops are made one at a time, so a session of
    a million messages never sits in memory whole.

    Raises:
        ValueError: `total_messages` is 1 (the shortest loop has two messages) or negative.
    """
    _check_turns(turns_per_loop)
    if total_messages < 0 or total_messages == 1:
        raise ValueError(
            f"total_messages must be 0 or at least 2 (a request and an answer): {total_messages}"
        )
    project = _project(seed)
    left = total_messages
    index = 0
    while left > 0:
        rng = _loop_rng(seed, index)
        loop = _loop_messages(project, rng, _turn_count(rng, turns_per_loop), budget=left)
        left -= len(loop)
        index += 1
        yield loop
