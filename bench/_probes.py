"""Probe facts of a raw agent transcript, and whether a rendered context still holds them.

`bench/quality.py` compacts real conversations and asks which facts an agent would need
to carry on survive. The facts are pulled out of the raw transcript (OpenAI chat
messages, as plain dicts) by shape alone, so the same rules serve any agent, code base
or tool set, not only the transcripts of the development set. Two families:

The key facts (`KEY_KINDS`), what the work is about:

- `first_request`: the task statement (`task_statement`: the last user request before
  the agent's first reply), its first `REQUEST_CHARS` characters, when the latest
  request differs from it;
- `request`: the latest user request (its first `REQUEST_CHARS` characters);
- `path`: every file path touched, from tool-call arguments and shell commands (the
  `MAX_PATHS` most recently touched);
- `error`: the error lines of the last tool outputs that had any (a traceback's last
  line, `Error: ...`, `FAILED ...`, `N failed`, or the last line of an output whose
  command exited non-zero), without the rules a test runner draws around a line
  (`==== 1 failed in 0.1s ====` is `1 failed in 0.1s`);
- `command`: the last `MAX_COMMANDS` distinct shell commands run;
- `identifier`: code identifiers of the task statement: CamelCase, snake_case, dotted
  names, names called with `(`, issue numbers;
- `record_id`: record ids (reservation, order, user, payment ids...) of user messages,
  tool-call arguments and tool results: values under id-like JSON keys, and tokens
  shaped like ids (`ZFA04Y`, `mia_li_3668`, `#W2378156`, UUIDs).

The working state (`WORKING_KINDS`), what an agent resuming needs to go on, each with
its function below: `edited_symbol` (`edited_symbols`), `test_command` and
`test_result` (`last_test`), `last_value` (`last_values`), `diff_line`
(`final_diff_lines`), `constraint` (`user_constraints`), `mutation` (`mutations`) and
`error_type` (`unresolved_error_types`). Every kind is capped (the `MAX_*` constants).

A fact is kept when its text (a mutation: each of its parts) appears in the context as
sent, compared case-sensitively after collapsing every run of whitespace to one space
(`normalize`). Long facts (requests, commands, error lines) are cut to a prefix first,
so a context that keeps their start keeps them. This module is pure: no I/O, no
sessionstore imports.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

FactKind = Literal[
    "first_request",
    "request",
    "path",
    "error",
    "command",
    "identifier",
    "record_id",
    "edited_symbol",
    "test_command",
    "test_result",
    "last_value",
    "diff_line",
    "constraint",
    "mutation",
    "error_type",
]
Family = Literal["key", "working"]
KEY_KINDS: tuple[FactKind, ...] = (
    "first_request",
    "request",
    "path",
    "error",
    "command",
    "identifier",
    "record_id",
)
"""The key facts: first and latest request, files, errors, commands, ids."""
WORKING_KINDS: tuple[FactKind, ...] = (
    "edited_symbol",
    "test_command",
    "test_result",
    "last_value",
    "diff_line",
    "constraint",
    "mutation",
    "error_type",
)
"""The working state: what was changed, tested, used, asked for and left failing."""
FACT_KINDS: tuple[FactKind, ...] = KEY_KINDS + WORKING_KINDS
FAMILIES: dict[Family, tuple[FactKind, ...]] = {"key": KEY_KINDS, "working": WORKING_KINDS}

REQUEST_CHARS = 200
"""A request is kept when its first this many characters (whitespace collapsed) are."""
LINE_CHARS = 120
"""Commands and error lines are kept when their first this many characters are."""
MAX_PATHS = 30
MAX_ERROR_OUTPUTS = 2
"""Error lines come from this many tool outputs, the newest that have any."""
MAX_ERRORS_PER_OUTPUT = 3
MAX_COMMANDS = 3
MAX_IDENTIFIERS = 25
MAX_RECORD_IDS = 20
MIN_ERROR_CHARS = 8

Msg = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Fact:
    """One probe fact: its class and the text a context must hold.

    A fact with `parts` (a mutating action: its name and its key argument) is kept when
    every part is; `text` is then the parts joined, for reading.
    """

    kind: FactKind
    text: str
    parts: tuple[str, ...] = ()

    @property
    def family(self) -> Family:
        return "key" if self.kind in KEY_KINDS else "working"


def normalize(text: str) -> str:
    """Collapse every run of whitespace to one space and strip the ends."""
    return " ".join(text.split())


# ── reading OpenAI messages ────────────────────────────────────────────────────


def message_text(message: Msg) -> str:
    """Return the text of a message's content (string, or the text of its parts)."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [
            part["text"]
            for part in content
            if isinstance(part, Mapping) and isinstance(part.get("text"), str)
        ]
        return "\n".join(texts)
    return ""


def tool_calls(message: Msg) -> list[tuple[str, str]]:
    """Return the (name, arguments text) of each tool call of an assistant message."""
    calls = _call_list(message)
    result: list[tuple[str, str]] = []
    for call in calls:
        if not isinstance(call, Mapping):
            continue
        function = call.get("function") or {}
        name = function.get("name") if isinstance(function, Mapping) else None
        arguments = function.get("arguments") if isinstance(function, Mapping) else None
        result.append((name if isinstance(name, str) else "", _arguments_text(arguments)))
    return result


def _call_list(message: Msg) -> list[object]:
    calls = message.get("tool_calls")
    return calls if isinstance(calls, list) else []


def _arguments_text(arguments: object) -> str:
    if isinstance(arguments, str):
        return arguments
    if arguments is None:
        return ""
    return json.dumps(arguments, ensure_ascii=False)


def _loads(text: str) -> object:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _strings(value: object) -> Iterator[str]:
    """Yield every string inside a JSON value, and the space-joined form of string lists."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        if value and all(isinstance(item, str) for item in value):
            yield " ".join(value)
        for item in value:
            yield from _strings(item)


def rendered_text(messages: Sequence[Msg]) -> str:
    """Return everything a model reads of `messages`, whitespace collapsed.

    Contents and tool-call names and arguments. JSON (arguments, and contents such as
    a tool's JSON result) is there both as written and decoded (every string value),
    so a command, path or id in it matches as typed, whatever its escapes.
    """
    pieces: list[str] = []
    for message in messages:
        if not isinstance(message, Mapping):
            continue
        text = message_text(message)
        pieces.append(text)
        if text.lstrip()[:1] in ("{", "["):
            pieces.extend(_strings(_loads(text)))
        for name, arguments in tool_calls(message):
            pieces.append(name)
            pieces.append(arguments)
            pieces.extend(_strings(_loads(arguments)))
    return normalize("\n".join(pieces))


def is_kept(fact: Fact, haystack: str) -> bool:
    """Whether `fact` appears in `haystack` (a `rendered_text`): its text, or every part."""
    if fact.parts:
        return all(part in haystack for part in fact.parts)
    return fact.text in haystack


# ── shell commands ─────────────────────────────────────────────────────────────

_COMMAND_KEYS = ("command", "cmd", "script", "shell_command", "bash_command")
_SHELL_TOOL = re.compile(
    r"bash|shell|terminal|exec|run|command|cmd|console|powershell|\bsh\b", re.I
)
_SHELL_FENCE = re.compile(r"```(?:bash|sh|shell|zsh|console)[^\n]*\n(.*?)\n?```", re.S)
_SHELL_FLAGS = frozenset({"-c", "-lc", "-ic", "-cl", "/c"})


def _command_from_value(value: object) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and value and all(isinstance(item, str) for item in value):
        # ["bash", "-lc", "cd x && make"]: the script is what was typed.
        if len(value) >= 3 and value[-2] in _SHELL_FLAGS:
            return str(value[-1])
        return " ".join(value)
    return None


def call_command(name: str, arguments: str) -> str | None:
    """Return the shell command a tool call runs, or None when it runs none."""
    parsed = _loads(arguments)
    if isinstance(parsed, Mapping):
        for key in _COMMAND_KEYS:
            command = _command_from_value(parsed.get(key))
            # An editor's `{"command": "view"}` is a sub-command, not a shell line.
            if command and command.strip() and (_SHELL_TOOL.search(name) or " " in command.strip()):
                return command
        return None
    if _SHELL_TOOL.search(name) and arguments.strip() and parsed is None:
        return arguments
    return None


def fenced_command(message: Msg) -> str | None:
    """Return the one shell block of an assistant text that made no tool call, if any.

    Agents that run what they write in a ```bash block (mini-swe-agent) run it only
    when there is exactly one.
    """
    if message.get("role") != "assistant" or message.get("tool_calls"):
        return None
    blocks = _SHELL_FENCE.findall(message_text(message))
    return blocks[0] if len(blocks) == 1 and blocks[0].strip() else None


def commands_run(messages: Sequence[Msg]) -> list[str]:
    """Return every shell command run, oldest first."""
    found: list[str] = []
    for message in messages:
        if message.get("role") != "assistant":
            continue
        for name, arguments in tool_calls(message):
            command = call_command(name, arguments)
            if command is not None:
                found.append(command)
        fenced = fenced_command(message)
        if fenced is not None:
            found.append(fenced)
    return found


# ── file paths ─────────────────────────────────────────────────────────────────

_EXTENSION_WORDS = """
py pyi pyx pxd ipynb c h cc cpp cxx hpp hh cu m mm java kt kts scala groovy gradle go
rs rb php cs fs swift dart lua pl pm r jl ex exs erl hrl hs ml mli clj cljs el vim
js mjs cjs jsx ts tsx vue svelte css scss sass less html htm xml xsd svg json jsonl
yaml yml toml ini cfg conf env properties lock txt md rst adoc tex csv tsv sql db
sqlite log out patch diff sh bash zsh fish ps1 bat cmd mk cmake make proto graphql
tf hcl dockerfile j2 jinja tmpl tpl po mo pem crt
"""
FILE_EXTENSIONS = frozenset(_EXTENSION_WORDS.split())
"""File name extensions that make a `name.ext` word a file path."""
_EXT_PATH = re.compile(
    r"(?<![\w./~@+-])"
    r"((?:~|\.{1,2})?/?(?:[\w@+-][\w.@+-]*/)*[\w@+-][\w.@+-]*\.([A-Za-z0-9]{1,10}))"
    r"(?![\w/@+-])"
)
_PATH_TOKEN = re.compile(r"[\w.@+~/-]+")
_SED_SCRIPT = re.compile(r"^[sy]/.*/.*/[\w]*$")
_PATH_KEYS = frozenset(
    {
        "path",
        "paths",
        "file",
        "files",
        "file_path",
        "filepath",
        "filename",
        "file_name",
        "target_file",
        "notebook_path",
        "dir",
        "dir_path",
        "directory",
        "folder",
    }
)
_NOISE_PREFIXES = ("/dev/", "/proc/", "/sys/")
_NOISE_PATHS = frozenset({"/", ".", "..", "~", "/dev", "/proc", "/sys", "/tmp"})
_HEREDOC = re.compile(r"<<-?\s*(['\"]?)(\w+)\1")


def _clean_path(candidate: str) -> str | None:
    path = candidate.strip().rstrip("/")
    while path.startswith("./"):
        path = path[2:]
    if (
        not path
        or path in _NOISE_PATHS
        or path.startswith(_NOISE_PREFIXES)
        or "://" in path
        or path.startswith("-")
        or not re.search(r"[A-Za-z]", path)
    ):
        return None
    return path


def _has_file_extension(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    return "." in name.strip(".") and name.rsplit(".", 1)[1].lower() in FILE_EXTENSIONS


def _is_directory_token(token: str) -> bool:
    """Whether a whole shell word is a path without a known extension (a directory...)."""
    if "/" not in token or not _PATH_TOKEN.fullmatch(token) or _SED_SCRIPT.match(token):
        return False
    parts = [part for part in token.split("/") if part not in ("", ".", "..", "~")]
    return bool(parts) and all(
        re.search(r"[A-Za-z]", part) and not part.startswith("-") for part in parts
    )


def _shell_words(command: str) -> Iterator[str]:
    """Yield the words of a command's lines, outside heredoc bodies."""
    lines = command.split("\n")
    index = 0
    while index < len(lines):
        line = lines[index]
        index += 1
        try:
            words = shlex.split(line, comments=True)
        except ValueError:
            words = line.split()
        yield from words
        for match in _HEREDOC.finditer(line):
            end = match.group(2)
            while index < len(lines) and lines[index].strip() != end:
                index += 1
            index += 1


def paths_in_command(command: str) -> list[str]:
    """Return the file and directory paths a shell command names, in order of appearance."""
    found: list[tuple[int, str]] = []
    words = set()
    for word in _shell_words(command):
        for token in (word, word.split("=", 1)[1] if word.startswith("-") and "=" in word else ""):
            words.add(token)
            if token and _is_directory_token(token) and not _has_file_extension(token):
                position = command.find(token)
                found.append((position if position >= 0 else len(command), token))
    for match in _EXT_PATH.finditer(command):
        candidate = match.group(1)
        if match.group(2).lower() not in FILE_EXTENSIONS:
            continue
        # A bare `name.ext` inside a script is as likely a module (`django.db`) as a
        # file: it counts as a shell word or as a quoted string, never as code.
        quoted = command[match.start(1) - 1 : match.start(1)] in ("'", '"') and command[
            match.end(1) : match.end(1) + 1
        ] in ("'", '"')
        if "/" in candidate or candidate in words or quoted:
            found.append((match.start(1), candidate))
    found.sort(key=lambda item: item[0])
    result: list[str] = []
    for _, candidate in found:
        path = _clean_path(candidate)
        if path is not None and path not in result:
            result.append(path)
    return result


def _argument_paths(arguments: object) -> Iterator[str]:
    """Yield the values of path-like keys of a tool call's arguments that look like paths."""
    if isinstance(arguments, Mapping):
        for key, value in arguments.items():
            if isinstance(key, str) and key.lower() in _PATH_KEYS:
                values = value if isinstance(value, list) else [value]
                for item in values:
                    if (
                        isinstance(item, str)
                        and "\n" not in item
                        and len(item) < 300
                        and ("/" in item or _has_file_extension(item))
                    ):
                        yield item
            elif isinstance(value, Mapping | list):
                yield from _argument_paths(value)
    elif isinstance(arguments, list):
        for item in arguments:
            yield from _argument_paths(item)


def paths_touched(messages: Sequence[Msg]) -> list[str]:
    """Return every path touched, ordered by last touch (most recent last)."""
    touched: dict[str, None] = {}

    def touch(paths: Iterable[str]) -> None:
        for path in paths:
            touched.pop(path, None)
            touched[path] = None

    for message in messages:
        if message.get("role") != "assistant":
            continue
        for name, arguments in tool_calls(message):
            touch(
                path
                for path in (_clean_path(raw) for raw in _argument_paths(_loads(arguments)))
                if path is not None
            )
            command = call_command(name, arguments)
            if command is not None:
                touch(paths_in_command(command))
        fenced = fenced_command(message)
        if fenced is not None:
            touch(paths_in_command(fenced))
    return list(touched)


# ── errors ─────────────────────────────────────────────────────────────────────

_EXCEPTION_LINE = re.compile(
    r"^(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Failure)(?::|$)"
)
_ERROR_LINE = re.compile(
    r"^(?:Error|ERROR|error|Fatal|FATAL|fatal|FAILED|FAIL|Failed|panic)\b\S*[:\s]"
    r"|^\S+:\d+:(?:\d+:)?\s*(?:error\b|fatal\b|[A-Z]\w*(?:Error|Exception)\b)"
    r"|^E {2,}\S"
    r"|\b[1-9]\d* (?:failed|errors?)\b"
    r"|No such file or directory|command not found|Permission denied|No module named"
    r"|^Exception in thread \"[^\"]*\" |^Caused by: "
)
_EXIT_CODE = re.compile(
    r"<returncode>\s*(-?\d+)\s*</returncode>"
    r"|\bexit(?:ed with)? (?:code|status)[:=]?\s*(-?\d+)"
    r"|\bExit code:?\s*(-?\d+)",
    re.I,
)
_TAG_LINE = re.compile(r"^\s*</?[\w-]+>\s*$|^\s*<returncode>")
_RULE_ENDS = re.compile(r"^[=!_*~#-]{3,} *| *[=!_*~#-]{3,}$")
"""The rules a test runner draws around a summary line (`==== 1 failed in 0.1s ====`):
decoration, not the error; a context that keeps the line without them keeps it."""


def exit_code(output: str) -> int | None:
    """Return the exit code an output reports (the last one), or None."""
    codes = [
        next(g for g in match.groups() if g is not None) for match in _EXIT_CODE.finditer(output)
    ]
    return int(codes[-1]) if codes else None


def error_lines(output: str) -> list[str]:
    """Return the error lines of one tool output, in order, whitespace collapsed.

    A traceback contributes its exception line; other lines count when they look like
    an error report. When there is none but the command exited non-zero, the output's
    last line stands for the failure.
    """
    lines = output.splitlines()
    found: list[str] = []
    in_traceback = False
    for line in lines:
        if line.startswith("Traceback (most recent call last)"):
            in_traceback = True
            continue
        if in_traceback:
            if not line.strip() or line[:1].isspace() or line.startswith("During handling"):
                continue
            in_traceback = False
            found.append(line)
            continue
        if line[:1].isspace() or _TAG_LINE.match(line):
            continue
        if _EXCEPTION_LINE.match(line) or _ERROR_LINE.search(line):
            found.append(line)
    if not found:
        code = exit_code(output)
        if code not in (None, 0):
            rest = [line for line in lines if line.strip() and not _TAG_LINE.match(line)]
            if rest and not rest[-1][:1].isspace():
                found.append(rest[-1])
    result: list[str] = []
    for line in found:
        text = _RULE_ENDS.sub("", normalize(line))
        if len(text) >= MIN_ERROR_CHARS and text not in result:
            result.append(text)
    return result


def tool_outputs(messages: Sequence[Msg]) -> list[str]:
    """Return the text of every tool output, oldest first.

    Tool messages, or, for an agent whose harness answers a fenced command with a user
    message, the user message right after such an assistant message.
    """
    return [message_text(message) for message in _tool_output_messages(messages)]


def final_errors(messages: Sequence[Msg]) -> list[str]:
    """Return the error lines of the newest tool outputs that have any."""
    result: list[str] = []
    outputs_used = 0
    for output in reversed(tool_outputs(messages)):
        lines = error_lines(output)
        if not lines:
            continue
        for line in lines[-MAX_ERRORS_PER_OUTPUT:]:
            if line not in result:
                result.append(line)
        outputs_used += 1
        if outputs_used == MAX_ERROR_OUTPUTS:
            break
    return result


# ── requests and the task statement ────────────────────────────────────────────


def user_requests(messages: Sequence[Msg]) -> list[str]:
    """Return the text of every user message that is not a command's output, oldest first."""
    requests: list[str] = []
    previous: Msg | None = None
    for message in messages:
        if message.get("role") == "user" and (previous is None or fenced_command(previous) is None):
            text = message_text(message)
            if text.strip():
                requests.append(text)
        previous = message
    return requests


def task_statement(messages: Sequence[Msg]) -> str | None:
    """Return the task statement: the last user request before the agent's first reply.

    A harness may send framing first, such as a worked demonstration in a user message
    right before the task (SWE-agent); the request the agent answers is the last one.
    """
    statement: str | None = None
    previous: Msg | None = None
    for message in messages:
        role = message.get("role")
        if role == "assistant" and statement is not None:
            break
        if role == "user" and (previous is None or fenced_command(previous) is None):
            text = message_text(message)
            if text.strip():
                statement = text
        previous = message
    return statement


_IDENTIFIER_PATTERNS = (
    re.compile(r"\b([A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)*)\("),  # called names
    re.compile(r"\b([A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+)\b"),  # CamelCase
    re.compile(r"\b([a-z][a-z0-9]*(?:[A-Z][a-z0-9]*)+)\b"),  # camelCase
    re.compile(r"(?<![\w.])(_*[a-z][a-z0-9]*(?:_[a-z0-9]+)+_*)(?![\w])"),  # snake_case
    re.compile(r"\b([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)\b"),  # UPPER_SNAKE
    re.compile(r"(?<![\w./])([A-Za-z_]\w+(?:\.[A-Za-z_]\w+)+)(?![\w/])"),  # dotted.names
    re.compile(r"(?<![\w&])(#\d{2,})\b"),  # issue numbers
)
_DOMAIN_ENDINGS = frozenset({"com", "org", "net", "io", "dev", "edu", "gov", "html", "htm"})


def _is_identifier(name: str) -> bool:
    if len(name) < 3:
        return False
    if "." in name:
        last = name.rsplit(".", 1)[1].lower()
        return last not in FILE_EXTENSIONS and last not in _DOMAIN_ENDINGS
    return True


_MARKUP_TAG = re.compile(r"</?[A-Za-z][\w-]*>")


def task_identifiers(statement: str) -> list[str]:
    """Return the code identifiers and issue numbers of a task statement, in order.

    Markup tags (`<pr_description>`) are a harness's framing, not part of the task.
    """
    statement = _MARKUP_TAG.sub(" ", statement)
    found: list[tuple[int, str]] = []
    for pattern in _IDENTIFIER_PATTERNS:
        for match in pattern.finditer(statement):
            found.append((match.start(1), match.group(1)))
    found.sort(key=lambda item: item[0])
    result: list[str] = []
    for _, name in found:
        if _is_identifier(name) and name not in result:
            result.append(name)
    return result


# ── record ids ─────────────────────────────────────────────────────────────────

_ID_SHAPES = (
    # Upper-case codes with letters and digits: ZFA04Y, HAT136, 4WQ150.
    re.compile(r"(?<![\w-])(?=[A-Z0-9]*\d)(?=(?:[A-Z0-9]*[A-Z]){2})[A-Z0-9]{5,12}(?![\w-])"),
    # Words and a number: mia_li_3668, credit_card_4421486.
    re.compile(r"(?<![\w.-])[a-z]+(?:_[a-z]+)*_\d{3,}(?![\w-])"),
    # Hash-prefixed numbers: #W2378156, #123456.
    re.compile(r"(?<![\w&])#[A-Z]{0,3}\d{4,}\b"),
    # UUIDs.
    re.compile(r"\b[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}\b"),
)
_ID_KEY = re.compile(r"(?i:(?:^|_)(?:ids?|numbers?|no))$|[a-z](?:Ids?|IDs?|Numbers?)$")
"""Keys whose values are record ids: `id`, `user_id`, `item_ids`, `flight_number`, `orderId`."""


def _shaped_ids(text: str) -> list[str]:
    found: list[tuple[int, str]] = []
    for pattern in _ID_SHAPES:
        found.extend((match.start(), match.group(0)) for match in pattern.finditer(text))
    found.sort(key=lambda item: item[0])
    return [value for _, value in found]


def _id_value(value: object) -> str | None:
    if isinstance(value, str) and 3 <= len(value) <= 64 and value.split() == [value]:
        return value
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 1000:
        return str(value)
    return None


def _keyed_ids(value: object) -> Iterator[str]:
    """Yield the values under id-like keys of a JSON value (or in lists under them)."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            if isinstance(key, str) and _ID_KEY.search(key):
                for candidate in item if isinstance(item, list) else [item]:
                    found = _id_value(candidate)
                    if found is not None:
                        yield found
            if isinstance(item, Mapping | list):
                yield from _keyed_ids(item)
    elif isinstance(value, list):
        for item in value:
            yield from _keyed_ids(item)


def record_ids(messages: Sequence[Msg]) -> list[str]:
    """Return record ids, those a user or a tool call referred to first, newest first.

    Ids a user named or the agent passed to a tool are what the work is about; ids that
    only appear in (JSON) tool results, such as a search's twenty flights, come after.
    """
    referenced: dict[str, None] = {}
    listed: dict[str, None] = {}

    def add(target: dict[str, None], ids: Iterable[str]) -> None:
        for value in ids:
            target.pop(value, None)
            target[value] = None

    outputs = set(map(id, _tool_output_messages(messages)))
    for message in messages:
        role = message.get("role")
        if id(message) in outputs:
            # Only structured results hold records; in logs, listings and diffs an
            # id-shaped token (`#13973`, `IBM855`) is incidental.
            parsed = _loads(message_text(message))
            if isinstance(parsed, Mapping | list):
                add(
                    listed,
                    [*_keyed_ids(parsed), *(i for s in _strings(parsed) for i in _shaped_ids(s))],
                )
        elif role == "user":
            add(referenced, _shaped_ids(message_text(message)))
        elif role == "assistant":
            for _, arguments in tool_calls(message):
                # Commands and code passed to a tool are not records: only argument
                # values that are one word each are read for id shapes.
                parsed = _loads(arguments)
                words = [s for s in _strings(parsed) if s.split() == [s]]
                add(referenced, [*_keyed_ids(parsed), *(i for s in words for i in _shaped_ids(s))])
    ordered = list(reversed(referenced))
    ordered += [value for value in reversed(listed) if value not in referenced]
    return ordered


def _tool_output_messages(messages: Sequence[Msg]) -> list[Msg]:
    result: list[Msg] = []
    previous: Msg | None = None
    for message in messages:
        role = message.get("role")
        if role == "tool" or (
            role == "user" and previous is not None and fenced_command(previous) is not None
        ):
            result.append(message)
        previous = message
    return result


# ── actions: each tool call with its output ────────────────────────────────────


@dataclass(frozen=True, slots=True)
class Action:
    """One thing the agent ran: a tool call (or a fenced shell block) and its output."""

    name: str
    arguments: str
    parsed: object
    """The arguments decoded from JSON, or None."""
    command: str | None
    """The shell (or harness) command line it ran, if any (`call_command`)."""
    output: str | None
    """The text of its result, None when there is none."""
    position: int
    """The index of the assistant message that made it."""


def actions(messages: Sequence[Msg]) -> list[Action]:
    """Return every tool call and fenced command with its output, oldest first.

    A call's output is the first tool message after it with its id (or, without ids, the
    next tool message); a fenced command's output is the user message right after it.
    """
    found: list[Action] = []
    for index, message in enumerate(messages):
        if message.get("role") != "assistant":
            continue
        calls = _call_list(message)
        ids = [call.get("id") for call in calls if isinstance(call, Mapping)]
        for position, (name, arguments) in enumerate(tool_calls(message)):
            call_id = ids[position]
            found.append(
                Action(
                    name,
                    arguments,
                    _loads(arguments),
                    call_command(name, arguments),
                    _call_output(messages, index, call_id, position),
                    index,
                )
            )
        fenced = fenced_command(message)
        if fenced is not None:
            following = messages[index + 1] if index + 1 < len(messages) else None
            output = (
                message_text(following)
                if following is not None and following.get("role") == "user"
                else None
            )
            found.append(Action("bash", fenced, None, fenced, output, index))
    return found


def _call_output(messages: Sequence[Msg], index: int, call_id: object, position: int) -> str | None:
    results: list[Msg] = []
    for message in messages[index + 1 :]:
        if message.get("role") != "tool":
            break
        results.append(message)
    for message in results:
        if call_id is not None and message.get("tool_call_id") == call_id:
            return message_text(message)
    if position < len(results) and results[position].get("tool_call_id") in (None, ""):
        return message_text(results[position])
    return None


# ── edited files and symbols ───────────────────────────────────────────────────

MAX_EDITED = 12
"""Edited files and symbols: this many, the most recently edited."""

_DEFINITION = re.compile(
    r"^[ \t]*(?:"
    r"(?:async[ \t]+)?def[ \t]+(?P<py>[A-Za-z_]\w*)"
    r"|(?:export[ \t]+)?(?:default[ \t]+)?(?:abstract[ \t]+)?class[ \t]+(?P<cls>[A-Za-z_]\w*)"
    r"|(?:export[ \t]+)?(?:async[ \t]+)?function\*?[ \t]+(?P<js>[A-Za-z_$][\w$]*)"
    r"|func[ \t]+(?:\([^)]*\)[ \t]*)?(?P<go>[A-Za-z_]\w*)"
    r"|(?:pub(?:\([^)]*\))?[ \t]+)?(?:async[ \t]+)?fn[ \t]+(?P<rs>[A-Za-z_]\w*)"
    r"|(?:(?:public|private|protected|internal)[ \t]+)?(?:interface|struct|enum|trait|record)"
    r"[ \t]+(?P<type>[A-Za-z_]\w*)"
    r"|(?:(?:public|private|protected|static|final|abstract|synchronized|native|override"
    r"|virtual|internal)[ \t]+){1,6}(?:[\w<>\[\],.?]+[ \t]+){0,3}?(?P<java>[A-Za-z_]\w*)[ \t]*\("
    r")"
)
"""A line that defines a function, method, class or type, in the common languages."""
MAX_DEFINITION_LINE_CHARS = 300
"""A longer line is data, not a definition (and is not searched)."""
_NOT_NAMES = frozenset({"if", "for", "while", "switch", "catch", "return", "new", "class"})
_EDIT_KEYS = (
    "new_str",
    "new_string",
    "old_str",
    "old_string",
    "file_text",
    "content",
    "contents",
    "text",
    "code",
    "insert_text",
    "new_content",
    "replacement",
    "patch",
    "input",
    "diff",
)
"""Argument keys whose values are the text an editing tool writes (or replaces)."""
_EDIT_VERBS = frozenset(
    {"create", "write", "edit", "replace", "insert", "append", "patch", "overwrite", "save"}
)
_NUMBERED_LINE = re.compile(r"^\s*(\d+)(?::|\t| {2})(.*)$")
_OPEN_HEADER = re.compile(r"^\[File: (.+?) \(\d+ lines total\)\]$", re.M)
_SWE_EDIT = re.compile(r"^edit\s+(\d+)(?::(\d+))?\s*$")
_REDIRECT = re.compile(r"(?:^|[^\d&<>=-])>>?[ \t]*(['\"]?)([^\s'\"<>|;&()]+)\1")
_TEE = re.compile(r"\btee[ \t]+(?:-a[ \t]+)?(['\"]?)([^\s'\"<>|;&()]+)\1")
_SED_INPLACE = re.compile(r"(?:^|[;&|(]\s*|\s)sed\s+(?:-[a-zA-Z]*\s+)*-[a-zA-Z]*i")
_OPEN_FOR_WRITE = re.compile(r"open\(\s*(?:r|f)?(['\"])([^'\"\n]+)\1\s*,\s*(['\"])[^'\"]*[wax]")
_OPEN_VARIABLE_FOR_WRITE = re.compile(r"open\(\s*([A-Za-z_]\w*)\s*,\s*(['\"])[^'\"]*[wax]")
_WRITE_TEXT = re.compile(r"Path\(\s*(['\"])([^'\"\n]+)\1\s*\)\s*\.write_(?:text|bytes)\(")
_DIFF_FILE = re.compile(r"^(?:\+\+\+ (?:b/)?|\*\*\* (?:Update|Add) File: )(\S+)", re.M)
_HUNK = re.compile(r"^@@(?:\s*-[\d,]+\s+\+[\d,]+\s*@@)?(.*)$", re.M)
"""A hunk header, with the code line it names (`@@ -1,2 +1,3 @@ def run():`, `@@ def run():`)."""


def definitions(text: str) -> list[str]:
    """Return the names a piece of code defines (functions, methods, classes, types)."""
    names: list[str] = []
    for line in text.splitlines():
        match = _DEFINITION.match(line) if len(line) <= MAX_DEFINITION_LINE_CHARS else None
        if match is None:
            continue
        name = next((value for value in match.groupdict().values() if value), None)
        if name and name not in _NOT_NAMES and name not in names:
            names.append(name)
    return names


def short_path(path: str) -> str:
    """A file as a context would name it: its last two path components."""
    parts = [part for part in path.strip().strip("'\"").split("/") if part not in ("", ".")]
    return "/".join(parts[-2:])


def _heredoc_bodies(command: str) -> list[str]:
    bodies: list[str] = []
    lines = command.split("\n")
    index = 0
    while index < len(lines):
        match = _HEREDOC.search(lines[index])
        index += 1
        if match is None:
            continue
        body: list[str] = []
        while index < len(lines) and lines[index].strip() != match.group(2):
            body.append(lines[index])
            index += 1
        index += 1
        bodies.append("\n".join(body))
    return bodies


def _outside_heredocs(command: str) -> str:
    lines = command.split("\n")
    kept: list[str] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        kept.append(line)
        index += 1
        match = _HEREDOC.search(line)
        if match is None:
            continue
        while index < len(lines) and lines[index].strip() != match.group(2):
            index += 1
        index += 1
    return "\n".join(kept)


_QUOTED = re.compile(r"'[^']*'|\"(?:\\.|[^\"\\])*\"")


_REDIRECT_BEFORE = re.compile(r"(?:>|\btee(?:\s+-a)?)$")


def _mask_quoted(text: str) -> str:
    """Blank the quoted strings of a shell line, but a quoted redirect or `tee` target."""

    def blank(match: re.Match[str]) -> str:
        before = text[max(0, match.start() - 32) : match.start()].rstrip()
        if before.endswith((">", "tee", "-a")) and _REDIRECT_BEFORE.search(before):
            return match.group(0)
        return " " * len(match.group(0))

    return _QUOTED.sub(blank, text)


def _written_files(command: str) -> list[str]:
    """Return the files a shell command writes: redirects, `tee`, `sed -i`, scripts' `open`."""
    head = _outside_heredocs(command)
    files: list[str] = []
    unquoted = _mask_quoted(head)
    for pattern in (_REDIRECT, _TEE):
        # A `>` in quotes (a sed script) or in inline code (`a > b`, `-> None:`) is no
        # redirect: the target is outside quotes, and a path.
        files += [
            match.group(2)
            for match in pattern.finditer(unquoted)
            if "/" in match.group(2) or _has_file_extension(match.group(2))
        ]
    for segment in _segments(head):
        if _SED_INPLACE.search(" " + segment):
            files += [p for p in paths_in_command(segment) if _has_file_extension(p)]
    for pattern in (_OPEN_FOR_WRITE, _WRITE_TEXT):
        files += [match.group(2) for match in pattern.finditer(command)]
    for variable in dict.fromkeys(m.group(1) for m in _OPEN_VARIABLE_FOR_WRITE.finditer(command)):
        # `path = "pkg/mod.py"` ... `open(path, "w")`: the script's own variable.
        assigned = re.findall(
            rf"^[ \t]*{variable}[ \t]*=[ \t]*[rf]?(['\"])([^'\"\n]+)\1[ \t]*$", command, re.M
        )
        files += [value for _, value in assigned[-1:]]
    files += _DIFF_FILE.findall(command)
    return [
        path
        for path in files
        if _clean_path(path) is not None
        and not path.startswith(("&", "/dev/"))
        and re.search(r"[A-Za-z]", path)
    ]


def _view_lines(output: str) -> dict[int, str]:
    """The numbered lines a file view shows (`open`, `goto`, `cat -n`)."""
    lines: dict[int, str] = {}
    for line in output.splitlines():
        match = _NUMBERED_LINE.match(line)
        if match:
            lines[int(match.group(1))] = match.group(2)
    return lines


def _enclosing(view: Mapping[int, str], line: int) -> str | None:
    """The name defined on the nearest viewed line at or above `line`, if any."""
    for number in sorted((n for n in view if n <= line), reverse=True):
        names = definitions(view[number])
        if names:
            return names[0]
    return None


def _edit_texts(value: object) -> Iterator[str]:
    """Yield the texts an editing call writes or replaces, at any depth (`edits: [...]`)."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            if key in _EDIT_KEYS and isinstance(item, str):
                yield item
            elif isinstance(item, Mapping | list):
                yield from _edit_texts(item)
    elif isinstance(value, list):
        for item in value:
            yield from _edit_texts(item)


def _editor_subcommand(parsed: object) -> str | None:
    if isinstance(parsed, Mapping):
        for key in ("command", "action", "operation", "mode"):
            value = parsed.get(key)
            if isinstance(value, str) and value.strip() and value.split() == [value]:
                return value
    return None


def _name_words(name: str) -> set[str]:
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name)
    return {word.lower() for word in re.split(r"[^A-Za-z0-9]+", spaced) if word}


class _Edits:
    """Edited files and the symbols edited in each, ordered by last edit (newest last)."""

    def __init__(self) -> None:
        self.order: dict[str, None] = {}
        self.owner: dict[str, str] = {}
        """The file each symbol was last edited in."""

    def edit(self, path: str, symbols: Iterable[str]) -> None:
        file = short_path(path)
        if not file:
            return
        for name in [file, *symbols]:
            if len(name) < MIN_SYMBOL_CHARS:
                continue
            self.order.pop(name, None)
            self.order[name] = None
            if name != file:
                self.owner[name] = file

    def remove(self, path: str) -> None:
        """A file deleted is no longer part of the working state, nor what was edited in it."""
        file = short_path(path)
        for name in [file, *(s for s, owner in self.owner.items() if owner == file)]:
            self.order.pop(name, None)
            self.owner.pop(name, None)


MIN_SYMBOL_CHARS = 3
_REMOVE_COMMAND = re.compile(r"^(?:rm|unlink|git\s+rm)\b")


def _segments(command: str) -> list[str]:
    """The simple commands of a shell line (split at `&&`, `||`, `;`, `|`, line breaks).

    Heredoc bodies are left out, and a separator inside quotes (a sed script's `;`)
    does not split.
    """
    text = _outside_heredocs(command)
    parts: list[str] = []
    start = 0
    for match in re.finditer(r"&&|\|\||[;|\n]", _mask_quoted(text)):
        parts.append(text[start : match.start()])
        start = match.end()
    parts.append(text[start:])
    return [part.strip() for part in parts if part.strip()]


def _removed_files(command: str) -> list[str]:
    """The files a shell command deletes (`rm`, `unlink`, `git rm`)."""
    return [
        path
        for segment in _segments(command)
        if _REMOVE_COMMAND.match(segment)
        for path in paths_in_command(segment)
    ]


def edited_symbols(messages: Sequence[Msg]) -> list[str]:
    """Return the files and symbols changed by edits, ordered by last edit (newest last).

    An edit is an editing tool's call (a name or sub-command such as `create`, `write`,
    `str_replace`, `edit`, `insert`, `apply_patch`, with a path argument), a SWE-agent
    `edit N:M` (on the file last opened with `open`/`create`), or a shell command that
    writes a file (`>`/`>>`, `tee`, `sed -i`, `cat > FILE <<EOF`, a script's
    `open(FILE, "w")`, a patch's `+++ b/FILE`). Each edit contributes its file (its last
    two path components) and the names of 3 characters or more its text defines; a
    SWE-agent line edit also the name defined nearest above its first line in the views
    of that file. A file deleted later (`rm`, `git rm`, a tool such as `delete_file`)
    leaves, with the symbols last edited in it: it is not part of the final state.
    """
    edits = _Edits()
    open_file: str | None = None
    views: dict[str, dict[int, str]] = {}

    for action in actions(messages):
        command = action.command
        words = command.split() if command else []
        first_line = command.strip().split("\n", 1)[0].strip() if command else ""
        if words and words[0] in ("open", "goto", "scroll_down", "scroll_up", "create"):
            if words[0] in ("open", "create") and len(words) > 1:
                open_file = words[1].strip("'\"")
            if open_file is not None and action.output:
                views.setdefault(open_file, {}).update(_view_lines(action.output))
            if words[0] == "create" and open_file is not None:
                edits.edit(open_file, [])
            continue
        swe_edit = _SWE_EDIT.match(first_line) if command else None
        if swe_edit and command is not None:
            target = open_file
            if target is None and action.output:
                header = _OPEN_HEADER.search(action.output)
                target = header.group(1) if header else None
            if target is None:
                continue
            body = command.split("\n", 1)[1] if "\n" in command else ""
            enclosing = _enclosing(views.get(target, {}), int(swe_edit.group(1)))
            edits.edit(target, [*([enclosing] if enclosing else []), *definitions(body)])
            if action.output:
                views.setdefault(target, {}).update(_view_lines(action.output))
            continue
        if command is not None:
            for path in _removed_files(command):
                edits.remove(path)
            files = _written_files(command)
            if files:
                texts = [*_heredoc_bodies(command), command]
                symbols = [name for text in texts for name in definitions(text)]
                symbols += [name for hunk in _HUNK.findall(command) for name in definitions(hunk)]
                for path in files:
                    # Which file of a multi-file command holds a symbol is not known: the
                    # symbols go with the last file.
                    edits.edit(path, symbols if path == files[-1] else [])
            continue
        parsed = action.parsed
        verb = _editor_subcommand(parsed) or action.name
        verbs = _name_words(verb)
        paths = [p for p in _argument_paths(parsed) if _clean_path(p) is not None]
        if verbs & {"delete", "remove", "unlink"} and not verbs & _EDIT_VERBS:
            for path in paths:
                edits.remove(path)
            continue
        if not (verbs & _EDIT_VERBS) and "apply_patch" not in action.name:
            continue
        texts = list(_edit_texts(parsed))
        if not paths and isinstance(parsed, Mapping | type(None)):
            raw = action.arguments if parsed is None else "\n".join(texts)
            paths = _DIFF_FILE.findall(raw)
            texts.append(raw)
        symbols = [name for text in texts for name in definitions(text)]
        symbols += [
            name for text in texts for hunk in _HUNK.findall(text) for name in definitions(hunk)
        ]
        for path in paths:
            edits.edit(path, symbols if path == paths[-1] else [])
    return list(edits.order)


# ── the last test run ──────────────────────────────────────────────────────────

_TEST_RUNNER = re.compile(
    r"^(?:\S*/)?(?:pytest|py\.test|tox|nox|nosetests|trial|jest|mocha|vitest|ava|karma|mvn|mvnw"
    r"|gradle|gradlew|javac|ant|sbt|ctest|rspec|phpunit|runtests(?:\.py)?|bats)(?:\s|$)"
    r"|^bin/test\b"
    r"|^(?:go|cargo|dotnet|swift|mix|deno|bun|lein|stack|cabal)\s+test\b"
    r"|^(?:npm|yarn|pnpm)\s+(?:run\s+)?test\b"
    r"|^make\s+(?:test|check)\w*\b"
    r"|^python[\d.]*\s+(?:-[A-Za-z]\S*\s+)*(?:-m\s+(?:pytest|unittest|nose|tox)\b"
    r"|\S*(?:runtests\.py|manage\.py\s+test\b|(?:^|/)test_\w*\.py|_tests?\.py|/tests?\.py)"
    r"|(?:\S*/)?(?:test_\w*|\w+_tests?|tests?)\.py\b)"
)
"""A simple command that runs tests or a compiler, by its program (and script)."""
_COMMAND_PREFIX = re.compile(
    r"^(?:\w+=\S*\s+|(?:timeout|time|sudo|nice|env|xvfb-run|exec)\s+(?:-\S+\s+)*(?:\d+\S*\s+)?"
    r"|(?:uv|poetry|pipenv|hatch|pdm|rye)\s+run\s+|(?:npx|bunx|(?:npm|pnpm)\s+exec)\s+|\./)*"
)
"""What may come before the program of a command: variables, `timeout 60`, `poetry run`."""


_PYTEST_SUMMARY = re.compile(r"^=+ (.*\b(?:passed|failed|errors?|skipped|no tests ran)\b.*?) =+$")
_COUNTS = re.compile(
    r"\b\d+ (?:passed|failed|errors?|skipped|xfailed|xpassed|deselected|warnings?|passing"
    r"|failing|pending|examples?|failures?)\b"
)
_RESULT_LINES = (
    re.compile(r"^Ran \d+ tests?\b"),
    re.compile(r"^(?:OK|FAILED)(?: \([\w=, ]*\))?$"),
    re.compile(r"^Tests?:?\s+.*\d+ (?:passed|failed|total).*"),
    re.compile(r"^Tests run: \d+.*"),
    re.compile(r"^BUILD (?:SUCCESS|FAILURE|SUCCESSFUL|FAILED)\b.*"),
    re.compile(r"^test result: .*"),
    re.compile(r"^(?:ok|FAIL|--- FAIL:?)\s+\S+.*"),
    re.compile(r"^\d+ (?:errors?|warnings?)$"),
    re.compile(r"^Tests: \d+, Assertions: .*"),
    re.compile(r"^(?:Passed|Failed)! .*"),
    re.compile(r"^\d+% tests passed.*"),
    re.compile(r".*\bcommand not found\b.*"),
)
_LOG_LEVEL = re.compile(r"^\[(?:INFO|ERROR|WARNING|WARN|DEBUG)\]\s*")
"""A build tool's level tag before a line (`[INFO] BUILD FAILURE`): not part of the result."""
_DURATION = re.compile(
    r"(?:,?\s+in\s+[\d.]+\s*(?:m?s|sec(?:ond)?s?)(?:\s*\([^)]*\))?|,?\s+[\d.]+s"
    r"|\s+\([\d.]+\s*m?s\))$"
)
MIN_RESULT_CHARS = 4
MAX_RESULT_LINE_CHARS = 400
MAX_TEST_RESULTS = 2


_TRAILING_REDIRECTS = re.compile(r"(?:\s+\d*(?:>>?|<)&?\s*\S*)+$")
"""Redirections at the end of a simple command (`2>&1`, `> log.txt`): not what it runs."""


def test_segment(command: str) -> str | None:
    """Return the first simple command of a shell line that runs tests or a compiler.

    By the program (pytest, tox, `go test`, `npm test`, mvn, gradle, javac, `make test`,
    a `runtests.py`, ...) or, for `python`, by `-m pytest|unittest` or a script named
    like a test (`test_x.py`, `x_test.py`, `tests.py`, `runtests.py`, `manage.py test`);
    after variables and wrappers such as `timeout 60` or `poetry run`. The simple command
    is returned as typed, without trailing redirections (`cd /repo && pytest -x 2>&1 |
    tail` gives `pytest -x`).
    """
    for segment in _segments(command):
        if _TEST_RUNNER.search(_COMMAND_PREFIX.sub("", segment)):
            return _TRAILING_REDIRECTS.sub("", segment)
    return None


def is_test_command(command: str) -> bool:
    """Whether one of a shell line's simple commands runs tests or a compiler."""
    return test_segment(command) is not None


def result_lines(output: str) -> list[str]:
    """Return the summary lines of a test run's output, at most `MAX_TEST_RESULTS`.

    A pytest summary without its `=` rule, the counts of other runners (`Ran 5 tests`,
    `FAILED (errors=1)`, `Tests run: 3, Failures: 1`, `BUILD FAILURE`, `test result:`,
    `ok pkg`, `3 passing`, `10 examples, 1 failure`), each without its duration and a
    build tool's `[INFO]` tag; else the output's last error line, else its last line.
    """
    found: list[str] = []
    for raw in output.splitlines():
        if len(raw) > MAX_RESULT_LINE_CHARS:
            continue  # a summary line is short; a long one is data
        line = _LOG_LEVEL.sub("", raw.strip())
        summary = _PYTEST_SUMMARY.match(line)
        if summary:
            line = summary.group(1)
        elif not (_COUNTS.search(line) and len(line) < LINE_CHARS) and not any(
            pattern.match(line) for pattern in _RESULT_LINES
        ):
            continue
        text = normalize(_DURATION.sub("", line))
        if len(text) >= MIN_RESULT_CHARS and text not in found:
            found.append(text)
    if not found:
        errors = error_lines(output)
        rest = [
            line.strip()
            for line in output.splitlines()
            if line.strip() and not _TAG_LINE.match(line)
        ]
        found = errors[-1:] or rest[-1:]
    return [normalize(line)[:LINE_CHARS] for line in found[-MAX_TEST_RESULTS:]]


def last_test(messages: Sequence[Msg]) -> tuple[str, list[str]] | None:
    """Return the last test command run (its simple command) and its result lines, or None."""
    for action in reversed(actions(messages)):
        segment = test_segment(action.command) if action.command is not None else None
        if segment is not None:
            return segment, result_lines(action.output or "")
    return None


# ── values of the last turns ───────────────────────────────────────────────────

LAST_CALLS = 3
"""Values come from the arguments of this many newest calls."""
MAX_VALUES = 8
_VALUE_TOKEN = re.compile(r"[A-Za-z0-9_#$@][\w.#$@:+-]*[\w#]|[A-Za-z0-9]")


def _is_value(token: str) -> bool:
    """Whether a word is a value worth carrying: a number, an id, a code name, a date."""
    if not 3 <= len(token) <= 64:
        return False
    if any(char.isdigit() for char in token):
        return True
    if "_" in token.strip("_") or re.search(r"[a-z][A-Z]", token):
        return True
    return "." in token and _is_identifier(token) and not _has_file_extension(token)


def _argument_values(parsed: object, arguments: str) -> list[str]:
    """The values of a call's arguments: one-word strings and numbers, and value words.

    A command (under a `command`-like key, or arguments that are not JSON) is read for
    value words, leaving out the program each of its simple commands runs.
    """
    values: list[str] = []
    texts: list[str] = []
    if parsed is None:
        texts.append(arguments)

    def walk(value: object, key: object = None) -> None:
        if isinstance(value, str):
            if key in _COMMAND_KEYS:
                texts.append(value)
            elif value.split() == [value] and 3 <= len(value) <= 64 and "/" not in value:
                values.append(value)
            else:
                texts.append(value)
        elif isinstance(value, int | float) and not isinstance(value, bool):
            if len(str(value)) >= 3:
                values.append(str(value))
        elif isinstance(value, Mapping):
            for name, item in value.items():
                walk(item, name)
        elif isinstance(value, list):
            for item in value:
                walk(item, key)

    if parsed is not None:
        walk(parsed)
    for text in texts:
        programs = {
            words[0]
            for segment in _segments(text)
            if (words := _COMMAND_PREFIX.sub("", segment).split())
        }
        values += [
            token
            for token in _VALUE_TOKEN.findall(_outside_heredocs(text))
            if _is_value(token) and token not in programs
        ]
    return values


def last_values(messages: Sequence[Msg]) -> list[str]:
    """Return the values the last turns use, newest call first.

    A value is an argument of one of the `LAST_CALLS` newest calls (a one-word string
    or a number, or a number, id, code name or date inside a longer argument) that also
    appears in another message from the first of those calls on: a result, a reply or
    a later call. That is, a value the last turns pass along, not one typed once.
    """
    runs = actions(messages)[-LAST_CALLS:]
    if not runs:
        return []
    start = runs[0].position
    found: list[str] = []
    for action in reversed(runs):
        others = [
            normalize(message_text(message))
            for index, message in enumerate(messages)
            if index >= start and index != action.position
        ]
        others += [
            normalize(other.arguments) for other in runs if other.position != action.position
        ]
        for value in _argument_values(action.parsed, action.arguments):
            text = normalize(value)
            if text and text not in found and any(text in other for other in others):
                found.append(text)
    return found[:MAX_VALUES]


# ── the final diff ─────────────────────────────────────────────────────────────

MAX_DIFF_LINES = 6
MAX_DIFF_LINES_PER_HUNK = 2
MIN_DIFF_CHARS = 8
_DIFF_START = re.compile(r"^(?:diff --git |@@ -\d+(?:,\d+)? \+\d+(?:,\d+)? @@)", re.M)


_COMMENT_LINE = re.compile(r"^(?:#(?!\w)|#!|//|/\*|\*|<!--|--\s|;)")


def changed_lines(diff: str) -> list[str]:
    """Return a few changed lines of a unified diff: up to 2 of each hunk, round robin.

    A line counts without its `+`/`-` mark, whitespace collapsed, when it has at least
    `MIN_DIFF_CHARS` characters and a letter or digit; file headers do not count. In a
    hunk, code lines come before comment lines.
    """
    hunks: list[list[str]] = []
    for line in diff.splitlines():
        if line.startswith(("@@", "diff --git")):
            hunks.append([])
            continue
        if line.startswith(("+++", "---")) or not line.startswith(("+", "-")):
            continue
        text = normalize(line[1:])[:LINE_CHARS]
        if len(text) >= MIN_DIFF_CHARS and re.search(r"[A-Za-z0-9]", text):
            if not hunks:
                hunks.append([])
            hunks[-1].append(text)
    # Code first: a hunk's comment lines (`# ...`, `// ...`, a shebang) come after its code.
    hunks = [sorted(hunk, key=lambda text: bool(_COMMENT_LINE.match(text))) for hunk in hunks]
    picked: list[str] = []
    for round_ in range(MAX_DIFF_LINES_PER_HUNK):
        for hunk in hunks:
            if round_ < len(hunk) and hunk[round_] not in picked:
                picked.append(hunk[round_])
    return picked[:MAX_DIFF_LINES]


def final_diff_lines(messages: Sequence[Msg]) -> list[str]:
    """Return changed lines of the last diff: a tool output or a patch the agent sent."""
    for action in reversed(actions(messages)):
        for text in (action.output or "", action.arguments):
            if _DIFF_START.search(text):
                diff = text
                if text is action.arguments and isinstance(action.parsed, Mapping):
                    diff = "\n".join(s for s in _strings(action.parsed) if _DIFF_START.search(s))
                lines = changed_lines(diff)
                if lines:
                    return lines
    return []


# ── the user's constraints ─────────────────────────────────────────────────────

MAX_CONSTRAINTS = 6
MAX_CONSTRAINTS_PER_MESSAGE = 3
MIN_CONSTRAINT_CHARS = 12
_CONSTRAINT = re.compile(
    r"\b(?:must|mustn't|never|only|should|shouldn't|without|prefer|preferably|avoid"
    r"|make sure|ensure|cannot|can't|don't|do not|does not want|doesn't want|not allowed"
    r"|required?|instead of)\b",
    re.I,
)
_FENCE_BLOCK = re.compile(r"```.*?(?:```|\Z)", re.S)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=\S)|\n+")


def constraint_sentences(text: str) -> list[str]:
    """Return the sentences of a message that state a constraint, in order.

    A sentence (split at `.`, `!`, `?` and line breaks, code blocks left out) states a
    constraint when it holds must, never, only, should, without, prefer, avoid, make
    sure, cannot, don't / do not...
    """
    prose = _MARKUP_TAG.sub("\n", _FENCE_BLOCK.sub("\n", text))
    found: list[str] = []
    for sentence in _SENTENCE_END.split(prose):
        clean = normalize(sentence)
        if len(clean) >= MIN_CONSTRAINT_CHARS and _CONSTRAINT.search(clean):
            cut = clean[:LINE_CHARS]
            if cut not in found:
                found.append(cut)
    return found


def user_constraints(messages: Sequence[Msg]) -> list[str]:
    """Return the first constraint sentences of each user request, newest request first.

    The requests are the task statement and those after it; framing a harness sends
    before the task (a demonstration) states no constraint of this session.
    """
    requests = user_requests(messages)
    statement = task_statement(messages)
    if statement is not None and statement in requests:
        requests = requests[requests.index(statement) :]
    found: list[str] = []
    for request in reversed(requests):
        for sentence in constraint_sentences(request)[:MAX_CONSTRAINTS_PER_MESSAGE]:
            if sentence not in found:
                found.append(sentence)
    return found[:MAX_CONSTRAINTS]


# ── mutating actions ───────────────────────────────────────────────────────────

MAX_MUTATIONS = 6
KEY_ARGUMENT_CHARS = 64
_MUTATING_VERBS = frozenset(
    {
        "write", "edit", "create", "update", "modify", "delete", "remove", "cancel", "book",
        "submit", "send", "post", "put", "patch", "apply", "insert", "replace", "set", "add",
        "move", "rename", "transfer", "refund", "pay", "exchange", "commit", "upload", "save",
        "append", "assign", "approve", "reject", "undo", "reset", "overwrite", "purchase",
        "order", "schedule", "reserve", "register", "enable", "disable", "close", "return",
    }
)  # fmt: skip
_READING_VERBS = frozenset(
    {"get", "list", "search", "find", "read", "view", "show", "check", "calculate", "lookup",
     "fetch", "query", "describe", "think", "open", "goto", "scroll", "count", "validate"}
)  # fmt: skip


def mutating_action(action: Action, open_file: str | None) -> tuple[str, ...] | None:
    """Return (name, key argument) of a call that changes state, or None.

    A call changes state when its name (or, for a tool with a one-word `command`/`action`
    argument, that sub-command) holds a mutating verb (write, edit, create, update,
    delete, cancel, book, submit, ...) and does not start with a reading one (get, list,
    search, ...). Shell tools do not count here: their edits are edited files. The key
    argument is the first value under an id-like key, else under a path-like key, else
    the first one-word string; for a harness command line (`edit 5:7`, `create f.py`)
    the file it edits or the first word after the command.
    """
    parsed = action.parsed
    sub = _editor_subcommand(parsed)
    verb = sub or action.name
    words = _name_words(verb)
    first = re.split(r"[^A-Za-z0-9]+", re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", verb))[0].lower()
    if not words & _MUTATING_VERBS or first in _READING_VERBS or _SHELL_TOOL.search(action.name):
        return None
    key: str | None = None
    line = action.command.strip() if action.command else ""
    if line and line.split()[0] == action.name and not sub:
        first_words = line.split("\n", 1)[0].split()
        if _SWE_EDIT.match(line.split("\n", 1)[0].strip()) and open_file:
            key = short_path(open_file)
        elif len(first_words) > 1:
            key = first_words[1].strip("'\"")
    elif isinstance(parsed, Mapping):
        ids = list(_keyed_ids(parsed))
        paths = list(_argument_paths(parsed))
        words_ = [s for s in _strings(parsed) if s.split() == [s] and s != sub and len(s) >= 3]
        key = next(iter(ids or paths or words_), None)
    parts = [verb] + ([key[:KEY_ARGUMENT_CHARS]] if key else [])
    return tuple(normalize(part) for part in parts if normalize(part))


def mutations(messages: Sequence[Msg]) -> list[tuple[str, ...]]:
    """Return the mutating actions (name and key argument), newest first, once each.

    An action without a key argument whose name the system prompt already holds (a
    harness's `submit`) is left out: a context that keeps the prompt would keep it
    whatever happened in the session.
    """
    framing = normalize(
        "\n".join(message_text(m) for m in messages if m.get("role") in ("system", "developer"))
    )
    found: list[tuple[str, ...]] = []
    open_file: str | None = None
    for action in actions(messages):
        words = action.command.split() if action.command else []
        if words and words[0] in ("open", "create") and len(words) > 1:
            open_file = words[1].strip("'\"")
        mutation = mutating_action(action, open_file)
        if mutation is not None and len(mutation) == 1 and mutation[0] in framing:
            continue
        if mutation is not None:
            if mutation in found:
                found.remove(mutation)
            found.append(mutation)
    return list(reversed(found))[:MAX_MUTATIONS]


# ── unresolved error types ─────────────────────────────────────────────────────

MAX_ERROR_TYPES = 5
_ERROR_TYPE = re.compile(
    r"\b([A-Z][A-Za-z0-9]*(?:Error|Exception|Exit|Interrupt|Failure|Fault))\b"
    r"|\b(command not found|No such file or directory|Permission denied|Segmentation fault"
    r"|No module named|Killed|timed out)\b"
)


def error_types(output: str) -> list[str]:
    """Return the error types an output reports: exception class names and shell errors.

    Only its error lines (`error_lines`) are read, so source code that merely names an
    exception (a `grep` hit on `raise ValueError`) does not count.
    """
    found: list[str] = []
    for line in error_lines(output):
        for match in _ERROR_TYPE.finditer(line):
            name = match.group(1) or match.group(2)
            if name not in found:
                found.append(name)
    return found


def unresolved_error_types(messages: Sequence[Msg]) -> list[str]:
    """Return the error types still unresolved at the end, newest first.

    Each output's error types are pending until a later output of the same command (the
    same shell line; for other tools, the same tool name) no longer reports them.
    """
    pending: dict[str, str] = {}
    for action in actions(messages):
        if action.output is None:
            continue
        key = normalize(action.command) if action.command is not None else action.name
        if action.command is not None and not _SHELL_TOOL.search(action.name):
            key = action.name  # a harness command (`edit 5:7`): the tool, not its text
        types = error_types(action.output)
        for name, where in list(pending.items()):
            if where == key and name not in types:
                del pending[name]
        for name in reversed(types):  # read back newest first: in the output's order
            pending.pop(name, None)
            pending[name] = key
    return list(reversed(pending))[:MAX_ERROR_TYPES]


# ── all together ───────────────────────────────────────────────────────────────


def _unique(kind: FactKind, texts: Iterable[str]) -> list[Fact]:
    facts: list[Fact] = []
    seen: set[str] = set()
    for text in map(normalize, texts):
        if text and text not in seen:
            seen.add(text)
            facts.append(Fact(kind, text))
    return facts


def extract_facts(messages: Sequence[Msg]) -> list[Fact]:
    """Return the probe facts of a raw transcript (OpenAI chat messages), by class.

    Every class is capped (see the module constants), so no class can dominate.
    """
    messages = [message for message in messages if isinstance(message, Mapping)]
    facts: list[Fact] = []
    requests = user_requests(messages)
    statement = task_statement(messages)
    if requests and statement is not None:
        first = normalize(statement)[:REQUEST_CHARS]
        latest = normalize(requests[-1])[:REQUEST_CHARS]
        if first != latest:
            facts += _unique("first_request", [first])
        facts += _unique("request", [latest])
    facts += _unique("path", paths_touched(messages)[-MAX_PATHS:])
    facts += _unique("error", (line[:LINE_CHARS] for line in final_errors(messages)))
    commands: list[str] = []
    for command in reversed(commands_run(messages)):
        text = normalize(command)[:LINE_CHARS]
        if text and text not in commands:
            commands.append(text)
        if len(commands) == MAX_COMMANDS:
            break
    facts += _unique("command", reversed(commands))
    if statement is not None:
        facts += _unique("identifier", task_identifiers(statement)[:MAX_IDENTIFIERS])
    facts += _unique("record_id", record_ids(messages)[:MAX_RECORD_IDS])
    facts += _unique("edited_symbol", edited_symbols(messages)[-MAX_EDITED:])
    test = last_test(messages)
    if test is not None:
        facts += _unique("test_command", [normalize(test[0])[:LINE_CHARS]])
        facts += _unique("test_result", test[1])
    facts += _unique("last_value", last_values(messages))
    facts += _unique("diff_line", final_diff_lines(messages))
    facts += _unique("constraint", user_constraints(messages))
    for parts in mutations(messages):
        facts.append(Fact("mutation", " ".join(parts), parts))
    facts += _unique("error_type", unresolved_error_types(messages))
    return facts
