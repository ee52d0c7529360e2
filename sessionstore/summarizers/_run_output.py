"""What a run's output says of the run: its exit code, test result and error lines (pure).

Read from the text a command or a tool printed, as the agent saw it: a harness's tags
(`<returncode>1</returncode>`), a JSON envelope (Codex's shell tool), a test runner's
summary line, exception and failure lines. Like `_scan`'s scanners they never raise and
read a bounded window of a huge output.
"""

from __future__ import annotations

import json
import re

from sessionstore.summarizers._scan import SCAN_WINDOW, collapse, cut, head_tail

__all__ = [
    "MAX_ERROR_LINE_CHARS",
    "error_lines",
    "exec_output",
    "exit_code",
    "is_error_line",
    "resolved_note",
    "telling_line",
    "test_result_line",
    "test_summary",
]


def exec_output(text: str) -> tuple[str, int | None]:
    """Return what a command printed and its exit code, from a JSON envelope or as is.

    Codex's shell tool answers `{"output": "...", "metadata": {"exit_code": 1, ...}}`:
    its text is escaped inside the JSON string, so no line of it (an error, a test
    summary) is found until it is taken out. Any other text comes back unchanged.
    """
    if not text.startswith("{") or '"exit_code"' not in text:
        return text, None
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return text, None
    if not isinstance(data, dict) or not isinstance(data.get("output"), str):
        return text, None
    metadata = data.get("metadata")
    code = metadata.get("exit_code") if isinstance(metadata, dict) else data.get("exit_code")
    return data["output"], code if isinstance(code, int) and not isinstance(code, bool) else None


_RETURN_CODE_TAG = re.compile(r"<returncode>\s*(-?\d+)\s*</returncode>")
_EXIT_CODE_LINE = re.compile(
    r"^\W*(?:error:\s*)?(?:exit code|exit status|exited with code|return code|returncode|exit)"
    r"[:= ]+(-?\d+)\W*$",
    re.IGNORECASE | re.MULTILINE,
)
_EXIT_NOTE_LINE = re.compile(
    r"^(?:Process|Command) (?:exited|finished|completed) with (?:exit )?code (-?\d+)\.?\s*$",
    re.MULTILINE,
)
"""A header line of its own (`Process exited with code 1`, Codex's `exec_command`)."""
_EXIT_CODE_NOTE = re.compile(
    r"\b(?:finished|completed|exited|failed) with (?:exit )?code (-?\d+)", re.IGNORECASE
)


def exit_code(output: str) -> int | None:
    """Return the exit code an output reports.

    Read from a `<returncode>1</returncode>` tag (mini-swe-agent), a line of its own at
    either end (`Exit code: 1`, `[exit 1]`, `Error: Exit code 1`), a header line (`Process
    exited with code 1`), or a closing note (`[Command finished with exit code 1]`).
    """
    head, tail = output[:2_000], output[-2_000:]
    match = _RETURN_CODE_TAG.search(head) or _EXIT_CODE_LINE.search(head)
    match = match or _EXIT_NOTE_LINE.search(head)
    match = match or _EXIT_CODE_LINE.search(tail) or _EXIT_CODE_NOTE.search(output[-500:])
    return None if match is None else int(match.group(1))


_COUNTS = (
    r"(?:tests finished: )?(?:\d+ (?:failed|passed|errors?|skipped|xfailed|xpassed"
    r"|deselected|warnings?|exceptions?|expected to fail(?: but passed)?)(?:, )?)+"
)
"""pytest's counts (`2 failed, 3 passed`), and sympy's `bin/test` (`tests finished: 2
passed, 1 expected to fail, 1 exceptions`)."""
_DURATION = r",? in [\d.]+ ?(?:s|seconds?)\b"
"""A run's duration after its counts: `in 0.12s`, and before pytest 5.1 `in 1.83 seconds`."""

_TEST_SUMMARIES = [
    # pytest: "==== 2 failed, 3 passed in 0.12s ====" (also without the rules)
    re.compile(rf"^=*\s*({_COUNTS})(?:{_DURATION})?", re.MULTILINE),
    # unittest / django: "Ran 5 tests in 0.1s" ... "FAILED (failures=2)" or "OK"
    re.compile(r"^(Ran \d+ tests?) in [\d.]+s\s*\n\s*\n?((?:FAILED|OK)\b.*)$", re.MULTILINE),
    # jest, cargo, go
    re.compile(r"^(Tests?:\s+.*(?:failed|passed).*)$", re.MULTILINE),
    re.compile(r"^(test result: \w+\. \d+ passed; \d+ failed.*)$", re.MULTILINE),
]


def test_summary(output: str) -> str | None:
    """Return the last test-run summary line of an output (`2 failed, 3 passed`)."""
    window = output[-SCAN_WINDOW:]
    for pattern in _TEST_SUMMARIES:
        matches = list(pattern.finditer(window))
        if matches:
            groups = [g for g in matches[-1].groups() if g]
            return collapse(": ".join(groups)).rstrip(" =,")
    return None


_RESULT_LINES = [
    re.compile(rf"^[=\s]*({_COUNTS}(?:{_DURATION})?(?: \([^)]*\))?)[=\s]*$", re.MULTILINE),
    re.compile(r"^\s*((?:FAILED|OK)\b.*?)\s*$", re.MULTILINE),
    re.compile(r"^\s*(Tests?:\s+.*(?:failed|passed).*?)\s*$", re.MULTILINE),
    re.compile(r"^\s*(test result: \w+\. \d+ passed; \d+ failed.*?)\s*$", re.MULTILINE),
    re.compile(r"^\s*(?:\[\w+\]\s*)?(Tests run: \d+, Failures: \d+.*?)\s*$", re.MULTILINE),
    re.compile(r"^\s*(?:\[\w+\]\s*)?(BUILD (?:SUCCESS|FAILURE|SUCCESSFUL|FAILED)\b.*?)\s*$", re.M),
    re.compile(r"^\s*(OK \(\d+ tests?\)|Tests run: \d+,\s+Failures: \d+)\s*$", re.MULTILINE),
]


def test_result_line(output: str) -> str | None:
    """Return the last result line of a test run as printed (`1 failed, 3 passed in 0.1s`).

    The rules around a pytest or sympy summary are left out; a unittest run gives its
    `Ran N tests in Xs` line and its verdict (`FAILED (failures=1)`, `OK`) joined by ` / `;
    else the last short line that counts passed or failed tests.
    """
    window = output[-SCAN_WINDOW:]
    ran = list(re.finditer(r"^(Ran \d+ tests? in [\d.]+s)\s*$", window, re.MULTILINE))
    for pattern in _RESULT_LINES:
        matches = list(pattern.finditer(window))
        if not matches:
            continue
        line = collapse(matches[-1].group(1))
        if ran and line.startswith(("FAILED", "OK")):
            return f"{ran[-1].group(1)} / {line}"
        return line
    if ran:
        return ran[-1].group(1)
    counted = [
        collapse(line).strip(" =")
        for line in window.split("\n")
        if _COUNTED.search(line) and len(line.strip()) <= MAX_RESULT_CHARS
    ]
    return counted[-1] if counted else None


MAX_RESULT_CHARS = 160
_COUNTED = re.compile(r"\b\d+ (?:passed|failed|errors?|failures?|tests? (?:passed|failed))\b")


_ERROR_LINE = re.compile(
    r"^(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception|Failure|Fault|Exit|Interrupt)\b"
    r"|^E\s+\S"
    r"|^(?:FAILED|ERROR|FAIL)\b[: ]"
    r"|^(?:fatal|panic|Error|ERROR)\b|^npm ERR!"
    r"|\b(?:error|Error|ERROR)(?:\[[\w-]+\])?: *\S"
    r"|: (?:command not found|No such file or directory|Permission denied)$"
    r"|^Segmentation fault|^Killed$|^Exception in thread |^Caused by: "
    r"|^(?:[a-z_]\w*\.)+[A-Z]\w*(?:Exception|Error)\b|^BUILD FAILED|^BUILD FAILURE"
    r"|^[-*]?\s*[EF]\d{3,4} \w"
    # pytest's location of a failure, under its traceback: `tests/test_x.py:131: AssertionError`
    r"|^\S+:\d+: (?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception|Failure|Exit|Interrupt)$",
)
_MAYBE_ERROR = re.compile(
    r"rror|ERR|xception|ail|FAIL|ault|xit|nterrupt|atal|anic|not found|No such|denied"
    r"|Killed|Caused|[EF]\d{3}|^E\s"
)
"""What every line `_ERROR_LINE` finds holds: a quick look that passes over most lines."""
_EXPECTED = re.compile(
    r"\bexpected (?:an? )?[\w.]*(?:error|exception)\b"
    r"|\b[\w.]*(?:error|exception)\b.{0,60}\bas expected\b",
    re.IGNORECASE,
)
"""A script's report of an error it meant to provoke (`Caught expected error: ...`)."""
_REPORTED = re.compile(
    r"^(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception|Failure)(?::|$)|^E\s|^(?:FAILED|ERROR|FAIL)\b"
)
"""A line that is an error report itself, whatever it says (`AssertionError: expected ...`)."""
_TRACEBACK = "Traceback (most recent call last):"
_CUT_MARKER = re.compile(
    r"^\[(?:\.\.\.|…) .+ (?:\.\.\.|…)\]$|^\[the line above repeated \d+ more times\]$"
)
"""What a cut or a squeeze of the output put where lines were (`[... 3 lines truncated ...]`):
it says nothing of the error, and a traceback goes on after it."""
_FRAME = re.compile(r'^\s*File "[^"]+", line \d+')
MAX_ERROR_LINES = 10
MAX_ERROR_LINE_CHARS = 300


def is_error_line(line: str) -> bool:
    """Whether one line of output reports an error (`error_lines` keeps such lines).

    An exception line (`ValueError: ...`, `pkg.module.Error`), pytest's `E` and `FAILED`
    lines, `Error:`/`error:` lines, `fatal:` and shell errors; not a comment, a `raise`
    statement or a script's report of an error it expected (`Caught expected error:`).
    """
    stripped = line.strip()
    return bool(
        stripped
        and _MAYBE_ERROR.search(stripped)
        and _ERROR_LINE.search(stripped)
        and not stripped.startswith(("#", "//", "raise "))
        and (_REPORTED.match(stripped) or not _EXPECTED.search(stripped))
    )


def error_lines(output: str) -> list[str]:
    """Return the error lines of an output, verbatim, in order, at most ten.

    Error lines are exception lines (the last line of a traceback, with the frame just
    before it), pytest's `E` and `FAILED` lines, `Error:`/`error:` lines, `fatal:` and
    shell errors; not a script's report of an error it expected (`Caught expected error:
    ...`). Past ten, the first two and the last eight are kept.
    """
    lines = [line.rstrip() for line in head_tail(output, SCAN_WINDOW // 2).split("\n")]
    found: dict[str, None] = {}
    in_traceback = False
    last_frame = ""
    for line in lines:
        stripped = line.strip()
        if not stripped or _CUT_MARKER.match(stripped):
            continue
        if stripped.startswith(_TRACEBACK):
            in_traceback, last_frame = True, ""
            continue
        if in_traceback:
            if _FRAME.match(line):
                last_frame = stripped
                continue
            if line[:1].isspace():
                continue
            in_traceback = False
            if last_frame:
                found.setdefault(cut(last_frame, MAX_ERROR_LINE_CHARS), None)
            found.setdefault(cut(stripped, MAX_ERROR_LINE_CHARS), None)
            continue
        if is_error_line(stripped):
            found.setdefault(cut(stripped, MAX_ERROR_LINE_CHARS), None)
    errors = list(found)
    if len(errors) > MAX_ERROR_LINES:
        errors = errors[:2] + errors[-(MAX_ERROR_LINES - 2) :]
    return errors


_TALLY = re.compile(r"^FAILED \((?:failures|errors)=\d+(?:, (?:failures|errors)=\d+)*\)$")
"""unittest's closing tally, which says how many failed but not what."""


def telling_line(errors: list[str]) -> str | None:
    """Return the one error line that says most of a failure (None when there is none).

    The last line that is not a bare tally (`FAILED (failures=1)`): the assertion or the
    exception, else the tally itself.
    """
    return next((line for line in reversed(errors) if not _TALLY.match(line)), None) or (
        errors[-1] if errors else None
    )


RESOLVED_LINES = 3
"""The error lines the newest resolved failure of a digest keeps."""


def resolved_note(fixed: int, header: str, errors: list[str], *, newest: bool) -> str:
    """Return the Blocked line of a failure a later action resolved.

    `resolved by action 9: action 4 failed (exit 1): ...`: the newest resolved failure
    keeps its last `RESOLVED_LINES` error lines (the failing test's name, its assertion,
    the tally: what the fix was for), the others their telling one (the assertion, not
    unittest's `FAILED (failures=1)`).
    """
    telling = telling_line(errors)
    kept = errors[-RESOLVED_LINES:] if newest else [telling] if telling else []
    shown = f" {' | '.join(kept)}" if kept else ""
    return f"resolved by action {fixed}: {header}:{shown}"
