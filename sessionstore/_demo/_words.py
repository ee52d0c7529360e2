"""The words of synthetic sessions: the project's vocabulary, and what people and the model say.

Data only: names, sentences and templates, read by `_codebase` (the project's files) and
`_loop` (the messages). Templates are `str.format` strings; their slots (`{symbol}`,
`{path}`, `{noun_h}`, ...) are those `_Loop.slots` fills. The order of the entries is part
of a seed's session: a draw picks by position, so reordering, adding or removing one
changes what a seed gives.
"""

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
