"""What an agent's tool call was and how it went: verbs from tools, outcomes (pure).

`describe_call` reads a tool call (its name and arguments; a shell command in a
`command`-like argument goes to `describe_command`) into a verb, a target and the files
it touched;
`describe_outcome` reads the result into a short outcome, whether it failed, and its
error lines.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from sessionstore._tool_calls import SHELL_TOOLS
from sessionstore.summarizers._commands import (
    BRIEF_CHARS,
    CHANGE_NOTES,
    TARGET_CHARS,
    Call,
    describe_command,
)
from sessionstore.summarizers._patch import BEGIN_PATCH, Patch, read_patch
from sessionstore.summarizers._run_output import (
    MAX_ERROR_LINE_CHARS,
    error_lines,
    exit_code,
    test_summary,
)
from sessionstore.summarizers._scan import (
    collapse,
    cut,
    find_paths,
    is_id_key,
    json_values,
    parse_json,
)

__all__ = [
    "MUTATING_VERBS",
    "READ_VERBS",
    "Outcome",
    "body_of",
    "call_detail",
    "describe_call",
    "describe_outcome",
    "looks_broken",
    "outcome_values",
]

OUTCOME_CHARS = 160
PRINTED_LINES = 3
"""A run that printed at most this many lines shows them in its outcome."""
PRINTED_CHARS = 100
LISTED_IDS = 6
"""Ids of a JSON list result named in its outcome (`3 results: HAT069, HAT083, HAT100`)."""

COMMAND_KEYS = ("command", "cmd", "commands", "script", "shell_command")
PATH_KEYS = frozenset(
    [
        "path",
        "file",
        "file_path",
        "filepath",
        "filename",
        "target_file",
        "target_path",
        "source_path",
        "dest_path",
        "notebook_path",
        "dir",
        "directory",
        "paths",
        "files",
    ]
)
_SKIPPED_ARGS = frozenset(
    ["content", "contents", "new_str", "old_str", "new_string", "old_string", "text", "code"]
)

# Past tenses for the first word of a tool name (`get_user_details` -> GOT user details).
_TOOL_VERBS = {
    "get": "GOT",
    "read": "READ",
    "view": "READ",
    "open": "READ",
    "cat": "READ",
    "show": "READ",
    "fetch": "FETCHED",
    "search": "SEARCHED",
    "find": "SEARCHED",
    "grep": "SEARCHED",
    "glob": "SEARCHED",
    "query": "SEARCHED",
    "lookup": "SEARCHED",
    "list": "LISTED",
    "ls": "LISTED",
    "write": "WROTE",
    "create": "CREATED",
    "add": "ADDED",
    "insert": "EDITED",
    "edit": "EDITED",
    "str": "EDITED",
    "replace": "EDITED",
    "patch": "EDITED",
    "apply": "EDITED",
    "multiedit": "EDITED",
    "update": "UPDATED",
    "modify": "UPDATED",
    "set": "UPDATED",
    "delete": "DELETED",
    "remove": "DELETED",
    "cancel": "CANCELLED",
    "book": "BOOKED",
    "send": "SENT",
    "post": "SENT",
    "run": "RAN",
    "execute": "RAN",
    "exec": "RAN",
    "test": "TESTED",
    "calculate": "CALCULATED",
    "compute": "CALCULATED",
    "transfer": "TRANSFERRED",
    "navigate": "NAVIGATED",
    "click": "CLICKED",
    "type": "TYPED",
    "install": "INSTALLED",
    "submit": "SUBMITTED",
}
_FILE_TOOL_KEYS = PATH_KEYS | {"command", "view_range"}
_EDITOR_VERBS = {
    "view": "READ",
    "read": "READ",
    "create": "CREATED",
    "write": "WROTE",
    "str_replace": "EDITED",
    "insert": "EDITED",
    "undo_edit": "EDITED",
    "edit": "EDITED",
    "append": "EDITED",
    "delete": "DELETED",
}
READ_VERBS = frozenset({"READ", "SEARCHED", "LISTED", "GOT", "FETCHED", "CHECKED"})
MUTATING_VERBS = frozenset(
    {
        "EDITED",
        "WROTE",
        "CREATED",
        "DELETED",
        "UPDATED",
        "ADDED",
        "CANCELLED",
        "BOOKED",
        "SENT",
        "SUBMITTED",
        "TRANSFERRED",
        "INSTALLED",
    }
)
"""Verbs of calls that change something: their lines are the last to be folded."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """How a call went."""

    text: str
    failed: bool
    errors: list[str]
    """Its error lines: of a failure, or printed by a call that is not a read."""
    exit_code: int | None = None
    tests: str | None = None


def describe_call(name: str, arguments: str) -> Call:
    """Return the verb, target and files of a tool call.

    A shell tool, or any tool with a command-like argument, is read as that command
    (`describe_command`); a tool with a path argument targets that path; any other tool
    gets its verb from the first word of its name (`search_flights` -> SEARCHED) and its
    scalar arguments, ids first, as the target.
    """
    args = _decode(arguments)
    words = _words(name)
    shell = name.lower() in SHELL_TOOLS or any(w in ("bash", "shell", "terminal") for w in words)
    patch = None if shell else _patch_of(args)
    if patch is not None:
        # `apply_patch` with the envelope as its whole input (Codex's tool).
        return Call(
            verb=patch.verb,
            target=cut(patch.paths, TARGET_CHARS),
            tool=name,
            brief=cut(patch.paths, BRIEF_CHARS),
            files=patch.files,
            patch=patch.diff,
        )
    command = _command_of(args)
    if command is None and shell and not isinstance(args, dict):
        command = arguments
    has_path = isinstance(args, dict) and any(str(k).lower() in PATH_KEYS for k in args)
    if command is not None and (shell or not has_path):
        return describe_command(command, tool=name)
    verb = None
    if isinstance(args, dict) and isinstance(args.get("command"), str):
        # Editor tools name their operation in `command` (`view`, `str_replace`, ...).
        verb = _EDITOR_VERBS.get(args["command"])
    if verb is None:
        verb = next((v for w in words[:2] if (v := _TOOL_VERBS.get(w))), None)
    rest = " ".join(words[1:] if verb and words and words[0] in _TOOL_VERBS else words)
    note = CHANGE_NOTES.get(verb or "", "")
    files: list[tuple[str, str]] = []
    if isinstance(args, dict):
        for key, value in args.items():
            if str(key).lower() in PATH_KEYS:
                for path in value if isinstance(value, list) else [value]:
                    if isinstance(path, str) and path and "\n" not in path and len(path) < 300:
                        files.append((path, note))
            elif isinstance(value, str) and key not in _SKIPPED_ARGS and len(value) < 300:
                files.extend((path, "") for path in find_paths(value))
    elif isinstance(args, str):
        # Arguments that are not JSON: an action line such as SWE-agent's `open x.py 10`.
        first_line = args.strip().split("\n", 1)[0]
        files.extend((path, note) for path in find_paths(first_line, lenient=True))
    values = list(json_values(args)) if isinstance(args, dict | list) else []
    if files:
        target = brief = ", ".join(path for path, _ in files)
        lines = args.get("view_range") if isinstance(args, dict) else None
        if isinstance(lines, list) and len(lines) == 2 and len(files) == 1:
            target += f":{lines[0]}-{lines[1]}"
        shown = _shown_arguments(args, skip=_FILE_TOOL_KEYS) if isinstance(args, dict) else ""
        if shown:
            target += f" ({shown})"
    else:
        shown = _shown_arguments(args)
        target = f"{rest} ({shown})" if shown and rest else rest or shown
        brief = rest or shown
    return Call(
        verb=verb or "CALLED",
        target=cut(collapse(target), TARGET_CHARS) or name,
        tool=name,
        brief=cut(collapse(brief), BRIEF_CHARS),
        files=files,
        values=values,
        replacement=_replacement(args) if note else "",
        original=_original(args) if note else "",
    )


DETAIL_CHARS = 60
"""The longest `call_detail`."""


def call_detail(name: str, arguments: str) -> str:
    """Return what a call acts on, short: its command, its paths, or its scalar arguments.

    >>> call_detail("read_file", '{"path": "src/app.py", "offset": 40}')
    'src/app.py (offset=40)'
    >>> call_detail("get_reservation_details", '{"reservation_id": "8WMF4C"}')
    'reservation_id=8WMF4C'
    """
    call = describe_call(name, arguments)
    if call.command:
        detail = call.command
    elif call.files:
        detail = call.target  # the paths, then the other arguments (`pattern=...`)
    else:
        detail = _shown_arguments(_decode(arguments))
    return cut(collapse(detail), DETAIL_CHARS)


_NEW_TEXT_KEYS = ("new_str", "new_string", "file_text", "content", "contents", "text", "code")
_OLD_TEXT_KEYS = ("old_str", "old_string")


def _replacement(args: Any) -> str:
    """Return the new lines an editor call writes (those of `new_str` not in `old_str`)."""
    if not isinstance(args, dict):
        return ""
    new = next((v for k in _NEW_TEXT_KEYS if isinstance(v := args.get(k), str)), "")
    old = next((v for k in _OLD_TEXT_KEYS if isinstance(v := args.get(k), str)), "")
    if isinstance(args.get("edits"), list) and not new:
        # MultiEdit-style: a list of {old_string, new_string}.
        for edit in args["edits"]:
            if isinstance(edit, dict):
                return _replacement(edit)
    old_lines = {line.strip() for line in old.split("\n")}
    return "\n".join(line for line in new.split("\n") if line.strip() not in old_lines)


def _original(args: Any) -> str:
    """Return the text an editor call replaces (its first edit's, for a list of edits)."""
    if not isinstance(args, dict):
        return ""
    old = next((v for k in _OLD_TEXT_KEYS if isinstance(v := args.get(k), str)), "")
    if not old and isinstance(args.get("edits"), list):
        first = next((edit for edit in args["edits"] if isinstance(edit, dict)), None)
        return _original(first) if first is not None else ""
    return old


def _decode(arguments: str) -> Any:
    try:
        return json.loads(arguments)
    except (ValueError, RecursionError):  # deeply nested JSON is not worth reading
        return arguments


_SHELLS = frozenset({"bash", "sh", "zsh", "dash"})
_SCRIPT = frozenset({"-c", "-lc"})


def _patch_of(args: Any) -> Patch | None:
    """Return the `apply_patch` envelope a tool's input is (or holds as an argument)."""
    texts = (
        [args] if isinstance(args, str) else list(args.values()) if isinstance(args, dict) else []
    )
    for text in texts:
        if isinstance(text, str) and BEGIN_PATCH in text[:200]:
            return read_patch(text)
    return None


def _command_of(args: Any) -> str | None:
    if not isinstance(args, dict):
        return None
    for key in COMMAND_KEYS:
        value = args.get(key)
        if isinstance(value, str) and value.strip():
            return value
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            words: list[str] = value
            if len(words) == 3 and words[0].rsplit("/", 1)[-1] in _SHELLS and words[1] in _SCRIPT:
                return words[2]  # `["bash", "-lc", "pytest -q"]` (Codex): the script run
            return " ".join(value)
    return None


def _words(name: str) -> list[str]:
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name)
    return [w for w in re.split(r"[^A-Za-z0-9]+", spaced.lower()) if w]


def _shown_arguments(args: Any, *, skip: frozenset[str] = frozenset()) -> str:
    """Return the scalar arguments as `key=value`, id-like keys first."""
    if not isinstance(args, dict):
        return collapse(str(args)) if args not in (None, "", {}) else ""
    pairs = []
    for key, value in args.items():
        if key in _SKIPPED_ARGS or str(key).lower() in skip:
            continue
        if isinstance(value, str | int | float) and not isinstance(value, bool):
            text = collapse(str(value))
            if text and len(text) <= 80:
                pairs.append((not re.search(r"(?:^|_)(?:id|number|code)$", key), f"{key}={text}"))
    return ", ".join(text for _, text in sorted(pairs, key=lambda pair: pair[0]))


def describe_outcome(
    verb: str,
    output: str,
    *,
    is_error: bool = False,
    code: int | None = None,
    target: str = "",
) -> Outcome:
    """Return how a call went, from its output.

    The outcome names the exit code (as reported by the tool or in the output), a test
    summary, the last error line of a failure, or else the size of the output (`120
    lines`, `3 results`, or `ok` with a JSON record's status and ids, those the call's
    `target` already names left out: a record read by its id is told by the others). A
    call failed when its result is an error, its exit code is not zero, a test summary
    counts failures, the output starts with `Error`, or a call that is not a read and
    reports no exit code printed an exception.
    """
    if code is None:
        code = exit_code(output)
    timed_out = _TIMED_OUT.match(output)
    if timed_out is not None:
        # mini-swe-agent's notice of a command it killed: a failure, whatever it printed.
        output = output[timed_out.end() :]
        is_error = True
    body = _body(output)
    tests = test_summary(body)
    reading = verb in READ_VERBS
    errors = error_lines(body) if (is_error or code or not reading) else []
    no_match = verb == "SEARCHED" and code == 1 and not errors
    if code is None and not is_error and looks_broken(body[-SCAN_TAIL:]):
        # No exit code, but the output says the command could not run or crashed.
        errors = errors or error_lines(body)
        is_error = True
    failed = (
        is_error
        or (bool(code) and not no_match)
        or (tests is not None and _FAILED_TESTS.search(tests) is not None)
        or _STARTS_WITH_ERROR.match(body) is not None
        or (code is None and not reading and any(_EXCEPTION.match(e) for e in errors))
    )
    parts = [f"exit {code}"] if code is not None else []
    if tests:
        parts.append(tests)
    if failed:
        lines = [line.strip() for line in body.split("\n") if line.strip()]
        if timed_out is not None:
            errors = [*errors, TIMED_OUT]
        elif not errors and lines:
            # No known error line: the last line a failing command printed is the likeliest.
            errors = [cut(lines[-1], MAX_ERROR_LINE_CHARS)]
        if not tests and errors:
            parts.append(errors[-1])
        return Outcome(_outcome(parts or ["error"]), True, errors, code, tests)
    if no_match and not body.strip():
        parts.append("no match")
    elif not tests:
        parts.append(
            _size(
                body, reading=reading, has_code=code is not None, ran=verb == "RAN", target=target
            )
        )
    return Outcome(_outcome([p for p in parts if p]), False, errors, code, tests)


SCAN_TAIL = 20_000
# What says a command could not run or crashed, in two patterns: after a `: ` (which the
# scan searches for), and at a line's start. As one alternation, every position of the
# output's tail was tried against every branch: a tenth of a session digest's walk.
_BROKEN_AFTER_COLON = re.compile(
    r": (?:command not found$|No such file(?: or directory)?$|cannot open\b)", re.MULTILINE
)
_BROKEN_LINE = re.compile(
    r"^(?:Traceback \(most recent call last\):"
    r"|Your proposed edit has introduced new syntax error|(?:bash|sh|zsh): .*: not found$"
    r"|(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception): |Segmentation fault"
    r"|Exception in thread |\S+\.java:\d+: error: |BUILD FAILURE|\[ERROR\] )",
    re.MULTILINE,
)


def looks_broken(text: str) -> bool:
    """Whether the output says the command could not run or crashed (a line of it does)."""
    return _BROKEN_AFTER_COLON.search(text) is not None or _BROKEN_LINE.search(text) is not None


_HARNESS_TRAILER = re.compile(
    r"(?:\n?^\((?:Open file|Current directory|Interactive session): [^\n]*\)$"
    r"|\n?^bash-\$ ?$)+\s*\Z",
    re.MULTILINE,
)
_NO_OUTPUT = re.compile(r"^Your command ran successfully and did not produce any output\.?$")
_FAILED_TESTS = re.compile(r"\b[1-9]\d* (?:failed|errors?)\b|FAILED")
_STARTS_WITH_ERROR = re.compile(r"\s*(?:error|Error|ERROR)\b")
_EXCEPTION = re.compile(r"^(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception)\b")
TIMED_OUT = "timed out (killed)"
_TIMED_OUT = re.compile(
    r"\AThe last command <command>.*?</command> timed out and has been killed\.\s*"
    r"(?:The output of the command was:\s*)?",
    re.DOTALL,
)
_OUTPUT_TAGS = re.compile(r"</?(?:output|output_head|output_tail|stdout|stderr)>")
# mini-swe-agent's form of a long output: its warning to the agent (not the command's
# words) first, then the output's head and tail around a count of what it left out.
_LONG_OUTPUT_WARNING = re.compile(r"\A\s*<warning>.*?</warning>", re.DOTALL)
_ELIDED = re.compile(r"<elided_chars>\s*(\d+) characters elided\s*</elided_chars>")
_RETURN_CODE = re.compile(r"<returncode>\s*-?\d+\s*</returncode>")


def _outcome(parts: list[str]) -> str:
    return cut(", ".join(parts), OUTCOME_CHARS) or "ok"


def _size(body: str, *, reading: bool, has_code: bool, ran: bool = False, target: str = "") -> str:
    data = parse_json(body)
    if isinstance(data, list):
        ids = list(dict.fromkeys(value for _, value in json_values(data)))
        shown = (
            f": {', '.join(ids[:LISTED_IDS])}{', …' if len(ids) > LISTED_IDS else ''}"
            if ids
            else ""
        )
        return f"{len(data)} result{'' if len(data) == 1 else 's'}{shown}"
    if isinstance(data, dict):
        named = set(_TARGET_WORD.findall(target))
        # Values under id keys first (the record's links: its user, flights, payments),
        # then values that only look like ids (an email); none the call already names.
        found = [(key, value) for key, value in json_values(data) if value not in named]
        found.sort(key=lambda pair: not is_id_key(pair[0]))
        ids = list(dict.fromkeys(f"{key}={value}" for key, value in found))[:2]
        # The record's own status (`delivered`, `cancelled`) says what became of it.
        statuses = [
            f"{key}={value}"
            for key, value in data.items()
            if _STATUS_KEY.search(str(key)) and isinstance(value, str) and 0 < len(value) <= 40
        ][:1]
        told = [*statuses, *ids]
        return "ok: " + ", ".join(told) if told else "ok"
    if not body.strip():
        return "" if has_code else "no output"
    count = body.count("\n") + 1
    if not reading:
        lines = [line.strip() for line in body.split("\n") if line.strip()] if ran else []
        if lines and len(lines) <= PRINTED_LINES:
            # What a short run printed is often the result the agent looked for.
            return "printed: " + cut(" | ".join(lines), PRINTED_CHARS)
        if lines:
            return f"{len(lines)} lines, last: {cut(lines[-1], PRINTED_CHARS)}"
        return "" if has_code else "ok"
    return "1 line" if count == 1 else f"{count} lines"


_TARGET_WORD = re.compile(r"[\w.@#:+/$-]+")
_STATUS_KEY = re.compile(r"(?:^|_)(?:status|state)$", re.IGNORECASE)


def _body(output: str) -> str:
    """Return the output without harness framing.

    The tags of `<returncode>`/`<output>` (and of a long output's head and tail, its
    warning to the agent left out and its count of what was elided made a marker), and
    the status lines an editor harness appends (`(Open file: ...)`, `(Current directory:
    ...)`, the prompt, a no-output notice).
    """
    body = _RETURN_CODE.sub("", output, count=1)
    if "<output_head>" in body:
        body = _LONG_OUTPUT_WARNING.sub("", body, count=1)
        body = _ELIDED.sub(r"[… \1 characters elided …]", body, count=1)
    body = _OUTPUT_TAGS.sub("", body)
    # The trailer's last line ends with `)` or the prompt: only then is it looked for (the
    # pattern, anchored at the end, is tried at every line of the output).
    if body.rstrip().endswith((")", "bash-$")):
        body = _HARNESS_TRAILER.sub("", body)
    body = body.strip("\n")
    return "" if _NO_OUTPUT.match(body.strip()) else body


def body_of(output: str) -> str:
    """Return what a tool printed, without the harness's framing (see `_body`)."""
    return _body(output)


def outcome_values(output: str) -> list[tuple[str, str]]:
    """Return the id-like `(key, value)` pairs of a JSON output (`reservation_id`, ...)."""
    data = parse_json(_body(output))
    return list(json_values(data)) if data is not None else []
