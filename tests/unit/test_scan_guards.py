"""The digest's scans skip a text that cannot match: the same answers as a scan of every text."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sessionstore.summarizers import _actions, _run_output, _scan

# Texts made of the characters the patterns and their guards turn on.
PIECES = st.sampled_from(
    [
        "a",
        "Z",
        "7",
        "_",
        "-",
        "@",
        "#",
        ".",
        " ",
        "\n",
        ")",
        "(",
        "$",
        ":",
        "&",
        "\t",
        "\u00a0",
        "bash-$",
        "bash-$ ",
        "(Open file: /tmp/x.py)",
        "(Current directory: /w)",
        "user_4421",
        "mia@example.org",
        "#W2378",
        "#12",
        "HAT136",
        "123e4567-e89b-12d3-a456-426614174000",
        "2024-05-01",
        "2024-05-01T17:18:03",
        " 09:12",
        "```",
        "v1.2.3",
        "<output>",
        "</output>",
        "<returncode>0</returncode>",
        "Your command ran successfully",
    ]
)
TEXTS = st.lists(PIECES, max_size=40).map("".join)


def _every_pattern(text: str, *, from_user: bool) -> list[str]:
    """`record_values` as it was: every pattern scans the window."""
    window = _scan.head_tail(text)
    hits: list[tuple[int, str]] = []
    for pattern in _scan._VALUE_PATTERNS:
        hits.extend((m.start(), m.group().strip()) for m in pattern.finditer(window))
    if from_user:
        prose = _scan.FENCE.sub(lambda m: " " * len(m.group()), window)
        found = [
            (m.start(), m.group().strip())
            for pattern in _scan._USER_VALUE_PATTERNS
            for m in pattern.finditer(prose)
        ]
        stamps = {v for _, v in found if _scan._CLOCK_TIME.search(v)}
        if len(stamps) > _scan.MAX_TIME_STAMPS:
            found = [(at, v) for at, v in found if v not in stamps]
        hits.extend(found)
    values = list(dict.fromkeys(value for _, value in sorted(hits) if value))[: _scan.MAX_VALUES]
    return [v for v in values if not any(v in o and _scan._inside(v, o) for o in values if o != v)]


@given(TEXTS, st.booleans())
def test_record_values_finds_what_every_pattern_finds(text: str, from_user: bool) -> None:
    assert _scan.record_values(text, from_user=from_user) == _every_pattern(
        text, from_user=from_user
    )


@given(TEXTS)
def test_a_text_without_a_patterns_guard_holds_no_match_of_it(text: str) -> None:
    for pattern, needed in _scan._NEEDS.items():
        if isinstance(needed, str):
            assert pattern.search(text.replace(needed, "")) is None, (pattern.pattern, needed)
        elif needed.search(text) is None:
            assert pattern.search(text) is None, (pattern.pattern, needed.pattern)


@given(TEXTS)
def test_a_ticket_number_is_found_as_the_lookbehind_first_pattern_found_it(text: str) -> None:
    before = re.compile(r"(?<![\w&])#[A-Z]?\d{3,}\b|(?<![\w&])#\d{2}\b")
    found = [(m.start(), m.group()) for m in _scan._VALUE_PATTERNS[2].finditer(text)]
    assert found == [(m.start(), m.group()) for m in before.finditer(text)]


@given(TEXTS)
def test_an_output_without_a_trailer_keeps_its_body(text: str) -> None:
    # The harness trailer is looked for only when the output ends as one does.
    body = _actions._OUTPUT_TAGS.sub("", _actions._RETURN_CODE.sub("", text, count=1))
    body = _actions._HARNESS_TRAILER.sub("", body).strip("\n")
    expected = "" if _actions._NO_OUTPUT.match(body.strip()) else body
    assert _actions._body(text) == expected


# The one alternation `looks_broken` replaced (it tried every branch at every position).
BROKEN_BEFORE = re.compile(
    r": command not found$|: No such file(?: or directory)?$|: cannot open\b"
    r"|^Traceback \(most recent call last\):"
    r"|^Your proposed edit has introduced new syntax error|^(?:bash|sh|zsh): .*: not found$"
    r"|^(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception): |^Segmentation fault"
    r"|^Exception in thread |^\S+\.java:\d+: error: |^BUILD FAILURE|^\[ERROR\] ",
    re.MULTILINE,
)


@given(TEXTS)
def test_a_broken_output_is_told_as_the_one_alternation_told_it(text: str) -> None:
    assert _actions.looks_broken(text) == (BROKEN_BEFORE.search(text) is not None)


def test_broken_outputs_by_example() -> None:
    broken = [
        "x\nTraceback (most recent call last):\n  File",
        "run: command not found\nnext",
        "cat: a.txt: No such file or directory",
        "ok\npkg.mod.KeyError: 'a'",
        "bash: foo: not found",
        "[ERROR] compile",
    ]
    fine = ["ok", "a ValueError: not at a line start", "status: command found", ""]
    for text in broken + fine:
        assert _actions.looks_broken(text) == (text in broken) == bool(BROKEN_BEFORE.search(text))


ERROR_PIECES = st.sampled_from(
    [
        "Error", "ERROR", "error", "Exception", "Failure", "Fault", "Exit", "Interrupt",
        "E", "F", "FAILED", "FAIL", "fatal", "panic", "npm ERR!", ": command not found",
        ": No such file or directory", ": Permission denied", "Segmentation fault", "Killed",
        "Caused by: ", "BUILD FAILED", "BUILD FAILURE", "E123", "F4012", "tests/x.py",
        ":12: ", "[rule-x]", "pkg.", "Value", "Key", " ", "\t", ":", "-", "*", "a", "Z", "_",
    ]
)  # fmt: skip


@settings(max_examples=500)
@given(st.lists(ERROR_PIECES, max_size=12).map("".join))
def test_every_error_line_passes_the_quick_look_first(line: str) -> None:
    stripped = line.strip()
    if _run_output._ERROR_LINE.search(stripped):
        assert _run_output._MAYBE_ERROR.search(stripped), stripped


@pytest.mark.parametrize(
    "line",
    [  # one line for each alternative of `_ERROR_LINE`, and each name it ends with
        "ValueError: bad",
        "pkg.mod.CustomException",
        "AssertionFailure",
        "SegFault at 0x0",
        "SystemExit",
        "KeyboardInterrupt",
        "E   assert 1 == 2",
        "FAILED tests/x.py::test_a",
        "FAIL: test_b (x.Tests)",
        "fatal: not a git repository",
        "panic: runtime error",
        "npm ERR! code E404",
        "Error occurred while reading",
        "src/a.c:3: error: expected ';'",
        "sh: foo: command not found",
        "cat: x: No such file or directory",
        "rm: x: Permission denied",
        "Segmentation fault (core dumped)",
        "Killed",
        "Exception in thread main",
        "Caused by: java.io.IOException",
        "java.lang.NullPointerException",
        "BUILD FAILED",
        "BUILD FAILURE",
        "E501 line too long",
        "- F401 unused import of os",
        "tests/test_x.py:12: AssertionError",
    ],
)
def test_each_kind_of_error_line_passes_the_quick_look(line: str) -> None:
    assert _run_output._ERROR_LINE.search(line)
    assert _run_output._MAYBE_ERROR.search(line)
    assert _run_output.is_error_line(line)
