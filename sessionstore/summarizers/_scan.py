"""Text scanners for the extractive summarizer: paths, identifiers, values, prose (pure).

Each scanner reads text an agent produced or received (a command, a tool output, a
request) and returns what the handoff keeps verbatim. They never raise, and they look
at most at a bounded window of huge texts, so that a megabyte of output costs
milliseconds. What a run's output says of the run (its exit code, test result and error
lines) is read by `_run_output`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from typing import Any

__all__ = [
    "FENCE",
    "clean_text",
    "code_identifiers",
    "collapse",
    "cut",
    "find_paths",
    "head_tail",
    "is_id_key",
    "is_noise_path",
    "json_values",
    "parse_json",
    "record_values",
    "sentences",
    "without_fences",
]

ELLIPSIS = "…"
SCAN_WINDOW = 40_000
"""Characters read from each end of a huge text; the middle of a long output rarely matters."""

_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[@-_]")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def clean_text(text: str) -> str:
    r"""Return `text` as it would show on a terminal, and safe to encode as UTF-8.

    ANSI escapes and control characters other than tab and newline are removed, `\r\n`
    becomes `\n`, a line rewritten with `\r` (a progress bar) keeps its last state, and
    lone surrogates become `?`.
    """
    if "\r" in text:
        text = text.replace("\r\n", "\n")
        text = "\n".join(line.rsplit("\r", 1)[-1] for line in text.split("\n"))
    text = _CONTROL.sub("", _ANSI.sub("", text))
    return text.encode("utf-8", "replace").decode("utf-8")


_REMINDER = re.compile(r"<system-reminder>(.*?)</system-reminder>\s*", re.DOTALL)


def split_reminders(text: str) -> tuple[str, list[str]]:
    """Return `text` without its `<system-reminder>` blocks, and their contents.

    Claude Code puts what the harness tells the model into the user's turns and the
    tools' results in such blocks (the project's `CLAUDE.md`, a nudge to use a tool): they
    are standing instructions, not the user's words nor what a tool printed.
    """
    if "<system-reminder>" not in text:
        return text, []
    reminders = [match.strip() for match in _REMINDER.findall(text)]
    return _REMINDER.sub("", text).strip("\n"), reminders


def head_tail(text: str, window: int = SCAN_WINDOW) -> str:
    """Return `text`, or its first and last `window` characters joined by a newline."""
    if len(text) <= 2 * window:
        return text
    return f"{text[:window]}\n{text[-window:]}"


def collapse(text: str) -> str:
    """Return `text` on one line with single spaces."""
    return " ".join(text.split())


def cut(text: str, max_chars: int) -> str:
    """Return `text` cut to `max_chars` characters, the last one `…` when it was cut."""
    if len(text) <= max_chars:
        return text
    if max_chars < 1:
        return ""
    return text[: max_chars - 1].rstrip() + ELLIPSIS


# ── file paths ─────────────────────────────────────────────────────────────────

_CLEAR_EXTENSIONS = [
    "py",
    "pyi",
    "pyx",
    "pxd",
    "ipynb",
    "js",
    "mjs",
    "cjs",
    "jsx",
    "ts",
    "tsx",
    "json",
    "jsonl",
    "yaml",
    "yml",
    "toml",
    "cfg",
    "ini",
    "conf",
    "txt",
    "md",
    "rst",
    "html",
    "htm",
    "css",
    "scss",
    "sass",
    "less",
    "cpp",
    "hpp",
    "cxx",
    "hh",
    "java",
    "kt",
    "kts",
    "scala",
    "rb",
    "php",
    "bash",
    "zsh",
    "fish",
    "sql",
    "xml",
    "csv",
    "tsv",
    "lock",
    "gradle",
    "swift",
    "vue",
    "svelte",
    "diff",
    "patch",
    "tex",
    "lua",
    "dart",
    "exs",
    "erl",
    "hs",
    "clj",
    "proto",
    "graphql",
    "tf",
    "cmake",
    "mak",
    "po",
    "jinja",
    "j2",
    "tmpl",
    "tpl",
    "properties",
    "pem",
    "crt",
    "parquet",
]
_AMBIGUOUS_EXTENSIONS = [
    "db",
    "sqlite",
    "c",
    "h",
    "m",
    "r",
    "R",
    "cc",
    "in",
    "log",
    "env",
    "mo",
    "ml",
    "cs",
    "pl",
    "ex",
    "go",
    "rs",
    "sh",
    "d",
    "mk",
    "out",
    "err",
]
_PATH = re.compile(
    r"(?<![\w@:/.\\$<-])"
    r"(?:(?:~|\.{1,2})?/)?(?:[\w.+-]+/)*[\w.+-]*[\w+-]/?"
)
_PATH_EXT = re.compile(r"\.([A-Za-z][A-Za-z0-9]{0,9})$")
_NOT_PATHS = frozenset({"and/or", "i/o", "n/a", "w/o", "tcp/ip", "input/output", "read/write"})
_NOISE_PARTS = ("site-packages/", "dist-packages/", "/usr/lib/", "/usr/local/lib/", "/.venv/")
_TRAILING = ".,:;'\")]}>"
_SED_SCRIPT = re.compile(r"^(?:\d+(?:,\d+)?)?[sy]/")


def find_paths(text: str, *, lenient: bool = False) -> list[str]:
    """Return the file paths in `text`, in order, each once.

    A path has a slash and looks like one (`src/io.py`, `/testbed`, `./run.sh`, `tests/`),
    or is a file name with a known extension (`setup.cfg`). URLs, dates and prose such as
    `and/or` are not paths. `lenient` (for commands and tool arguments, where a name is
    far more likely a file than in prose) also accepts extensions that are common words
    or code (`main.go`, `app.log`, `x.c`).
    """
    found: dict[str, None] = {}
    for match in _PATH.finditer(head_tail(text)):
        candidate = match.group().rstrip(_TRAILING)
        if _is_path(candidate, lenient=lenient):
            found.setdefault(candidate, None)
    return list(found)


def _is_path(candidate: str, *, lenient: bool) -> bool:
    if len(candidate) < 3 or len(candidate) > 300 or not any(c.isalpha() for c in candidate):
        return False
    if candidate.lower() in _NOT_PATHS or _SED_SCRIPT.match(candidate):
        return False
    extension = _PATH_EXT.search(candidate.rstrip("/"))
    has_extension = extension is not None and (
        extension.group(1).lower() in _CLEAR_EXTENSIONS
        or (lenient and extension.group(1) in _AMBIGUOUS_EXTENSIONS)
    )
    if "/" not in candidate:
        stem = candidate.rsplit(".", 1)[0]
        return has_extension and any(c.isalpha() for c in stem) and not stem[0].isdigit()
    parts = candidate.strip("/").split("/")
    if any(not part or part.isdigit() for part in parts) or all(len(p) <= 1 for p in parts):
        return False
    if has_extension or candidate.endswith("/") or len(parts) >= 3:
        return True
    return candidate.startswith(("/", "./", "../", "~/"))


def is_noise_path(path: str) -> bool:
    """Return True for paths inside installed packages or the interpreter."""
    return path.startswith("<") or any(part in path for part in _NOISE_PARTS)


# ── identifiers and record values ──────────────────────────────────────────────

_VALUE_PATTERNS = [
    re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"),
    re.compile(r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)*\.[A-Za-z]{2,}\b"),
    # `#` first (the character before it checked after), so the scan looks for the `#`s.
    re.compile(r"#(?<![\w&]#)(?:[A-Z]?\d{3,}\b|\d{2}\b)"),
    # Record codes: upper-case letters and digits, both present (ZFA04Y, HAT136); not the
    # day and hour of an ISO timestamp (`14T17` of 2025-03-14T17:18:03).
    re.compile(r"\b(?!\d\dT\d\d\b)(?=[A-Z0-9]*\d)(?=[A-Z0-9]*[A-Z])[A-Z0-9]{5,12}\b"),
    # Ids written as words and a number (mia_li_3668, credit_card_4421486).
    re.compile(r"\b[A-Za-z]+(?:_[A-Za-z]+)*_\d{3,}\b"),
]
_USER_VALUE_PATTERNS = [
    re.compile(r"\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2})?)?\b"),
    re.compile(
        r"\b(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)[a-z]*\.? "
        r"\d{1,2}(?:st|nd|rd|th)?(?:,? \d{4})?\b"
    ),
    re.compile(r"[$€£]\s?\d[\d,]*(?:\.\d+)?|\b\d[\d,]*(?:\.\d+)? ?(?:USD|EUR|GBP|dollars)\b"),
    re.compile(
        r"\b\d+(?:\.\d+)? ?(?:ms|seconds?|minutes?|hours?|days?|weeks?|KB|MB|GB|TB|KiB|MiB|GiB|"
        r"kg|km|%|px|tokens|lbs?|miles)(?!\w)"
    ),
    re.compile(r"\bv?\d+\.\d+(?:\.\d+)+(?:[-.]?[a-z]+\d*)?\b|\bv\d+\.\d+\b"),
]
MAX_VALUES = 100
MAX_TIME_STAMPS = 3
"""A user's text with more dates that carry a time of day than this is a log, not a request."""
_CLOCK_TIME = re.compile(r"[T ]\d{2}:\d{2}")
_ID_KEY = re.compile(
    r"(?:^|_)(?:id|ids|number|no|code|confirmation|reference|ref|reservations?|orders?|tickets?)$",
    re.IGNORECASE,
)


_NEEDS: dict[re.Pattern[str], str | re.Pattern[str]] = {
    _VALUE_PATTERNS[0]: re.compile(r"-[0-9a-fA-F]{4}-"),  # a UUID's middle
    _VALUE_PATTERNS[1]: "@",  # an email's at sign
    _VALUE_PATTERNS[2]: "#",  # a ticket number's hash
    _VALUE_PATTERNS[4]: re.compile(r"_\d{3}"),  # an id's number
    _USER_VALUE_PATTERNS[0]: "-",  # a date's dashes
    _USER_VALUE_PATTERNS[4]: ".",  # a version's dots
}
"""What every match of the pattern holds (a character, or a short pattern that starts with
one): a text without it is not scanned for the pattern.

Each pattern scans the whole window, position by position, in Python's `re`: most of a
session digest's time over tool output (issue 20); most texts hold no `@` or `#`. A guard
that starts with a character is found by a fast search for that character.
"""


def _may_hold(window: str, pattern: re.Pattern[str]) -> bool:
    """Whether `window` holds what every match of `pattern` holds (see `_NEEDS`)."""
    needed = _NEEDS.get(pattern)
    if needed is None:
        return True
    return needed in window if isinstance(needed, str) else needed.search(window) is not None


def is_id_key(key: str) -> bool:
    """Return True for a JSON key whose values are record ids (`id`, `user_id`, `reservations`)."""
    return _ID_KEY.search(key) is not None


def record_values(text: str, *, from_user: bool = False) -> list[str]:
    """Return the identifiers in `text`: ids, codes, UUIDs, emails, ticket numbers.

    With `from_user`, also dates, amounts, versions and numbers with units, which in a
    user's words are facts but in tool output are mostly noise (timings, sizes).
    """
    window = head_tail(text)
    hits = _matches(_VALUE_PATTERNS, window)
    if from_user:
        # The user's prose, not a log or output pasted in a fence: its time stamps,
        # durations and versions are the tool's, not facts of the request.
        found = _matches(_USER_VALUE_PATTERNS, FENCE.sub(lambda m: " " * len(m.group()), window))
        stamps = {value for _, value in found if _CLOCK_TIME.search(value)}
        if len(stamps) > MAX_TIME_STAMPS:
            # Times of day by the handful are a log's lines pasted without a fence.
            found = [(at, value) for at, value in found if value not in stamps]
        hits.extend(found)
    values = list(dict.fromkeys(value for _, value in sorted(hits) if value))[:MAX_VALUES]
    # `W2378156` is already in `#W2378156` (but `#12` is not in `#1234`).
    return [v for v in values if not any(v in o and _inside(v, o) for o in values if o != v)]


def _matches(patterns: Sequence[re.Pattern[str]], window: str) -> list[tuple[int, str]]:
    """Return `(position, value)` for every match of `patterns` in `window` (see `_NEEDS`)."""
    return [
        (m.start(), m.group().strip())
        for pattern in patterns
        if _may_hold(window, pattern)
        for m in pattern.finditer(window)
    ]


def _inside(value: str, other: str) -> bool:
    """Return True when `value` is a whole token of `other`."""
    return re.search(rf"(?<![\w]){re.escape(value)}(?![\w])", other) is not None


_CODE_IDENTIFIERS = [
    re.compile(r"`([^`\n]{2,60})`"),
    re.compile(r"\b[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+(?:\(\))?"),
    re.compile(r"\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b"),
    re.compile(r"\b[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+\b"),
    re.compile(r"\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b"),
    re.compile(r"\b[A-Za-z_]\w*\(\)"),
]
_DOTTED_PROSE = frozenset({"e.g", "i.e", "etc.", "vs.", "a.k.a"})


def code_identifiers(text: str) -> list[str]:
    """Return the code-like names in a task statement: backticked spans, dotted names, ..."""
    window = head_tail(text)
    hits: list[tuple[int, str]] = []
    for index, pattern in enumerate(_CODE_IDENTIFIERS):
        for match in pattern.finditer(window):
            value = match.group(1) if index == 0 else match.group()
            value = value.strip()
            if value and value.lower() not in _DOTTED_PROSE and not value.endswith("."):
                hits.append((match.start(), value))
    return list(dict.fromkeys(value for _, value in sorted(hits)))


def json_values(data: Any) -> Iterator[tuple[str, str]]:
    """Yield `(key, value)` for the id-like scalars of decoded JSON (`reservation_id`, ...).

    A scalar counts when its key looks like an id (`id`, `*_id`, `*_number`, `code`,
    `reservations`, ...) or, anywhere, when it matches a record-code pattern.
    """
    stack: list[tuple[str, Any]] = [("", data)]
    seen = 0
    while stack and seen < 5_000:
        seen += 1
        key, value = stack.pop(0)
        if isinstance(value, dict):
            stack.extend((str(k), v) for k, v in value.items())
        elif isinstance(value, list):
            stack.extend((key, v) for v in value)
        elif isinstance(value, str | int) and not isinstance(value, bool):
            text = str(value)
            if not text or len(text) > 80 or "\n" in text:
                continue
            if _ID_KEY.search(key) or any(p.fullmatch(text) for p in _VALUE_PATTERNS):
                yield key, text


def parse_json(text: str) -> Any:
    """Return `text` decoded from JSON, or None when it is not a JSON object or array."""
    stripped = text.strip()
    if not stripped or stripped[0] not in "[{" or len(stripped) > 2 * SCAN_WINDOW:
        return None
    try:
        return json.loads(stripped)
    except (ValueError, RecursionError):  # deeply nested JSON is not worth reading
        return None


# ── prose ──────────────────────────────────────────────────────────────────────

FENCE = re.compile(r"```.*?(?:```|$)", re.DOTALL)
"""A fenced code block (to the end of the text when it is not closed)."""
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[A-Z0-9`*_-])|\n+")


def without_fences(text: str) -> str:
    """Return `text` without its fenced code blocks."""
    return FENCE.sub("\n", text)


def sentences(text: str) -> list[str]:
    """Return the sentences of prose, fenced code left out, each on one line."""
    prose = FENCE.sub("\n", head_tail(text, SCAN_WINDOW // 4))
    return [s for part in _SENTENCE_END.split(prose) if (s := collapse(part))]
