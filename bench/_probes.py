"""Probe facts of a raw agent transcript, and whether a rendered context still holds them.

`bench/quality.py` compacts real conversations and asks which facts an agent would need
to carry on survive. The facts are pulled out of the raw transcript (OpenAI chat
messages, as plain dicts) by shape alone, so the same rules serve any agent, code base
or tool set, not only the transcripts of the development set:

- `request`: the latest user request (its first `REQUEST_CHARS` characters);
- `path`: every file path touched, from tool-call arguments and shell commands (the
  `MAX_PATHS` most recently touched);
- `error`: the error lines of the last tool outputs that had any (a traceback's last
  line, `Error: ...`, `FAILED ...`, `N failed`, or the last line of an output whose
  command exited non-zero);
- `command`: the last `MAX_COMMANDS` distinct shell commands run;
- `identifier`: code identifiers of the task statement (the first user request):
  CamelCase, snake_case, dotted names, names called with `(`, issue numbers;
- `record_id`: record ids (reservation, order, user, payment ids...) of user messages,
  tool-call arguments and tool results: values under id-like JSON keys, and tokens
  shaped like ids (`ZFA04Y`, `mia_li_3668`, `#W2378156`, UUIDs).

A fact is kept when its text appears in the context as sent, compared case-sensitively
after collapsing every run of whitespace to one space (`normalize`). Long facts
(requests, commands, error lines) are cut to a prefix first, so a context that keeps
their start keeps them. This module is pure: no I/O, no sessionstore imports.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

FactKind = Literal["request", "path", "error", "command", "identifier", "record_id"]
FACT_KINDS: tuple[FactKind, ...] = (
    "request",
    "path",
    "error",
    "command",
    "identifier",
    "record_id",
)

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
    """One probe fact: its class and the text a context must hold."""

    kind: FactKind
    text: str


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
    calls = message.get("tool_calls") or []
    result: list[tuple[str, str]] = []
    for call in calls:
        if not isinstance(call, Mapping):
            continue
        function = call.get("function") or {}
        name = function.get("name") if isinstance(function, Mapping) else None
        arguments = function.get("arguments") if isinstance(function, Mapping) else None
        result.append((name if isinstance(name, str) else "", _arguments_text(arguments)))
    return result


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
    """Whether `fact` appears in `haystack` (a `rendered_text`)."""
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
)
_EXIT_CODE = re.compile(
    r"<returncode>\s*(-?\d+)\s*</returncode>"
    r"|\bexit(?:ed with)? (?:code|status)[:=]?\s*(-?\d+)"
    r"|\bExit code:?\s*(-?\d+)",
    re.I,
)
_TAG_LINE = re.compile(r"^\s*</?[\w-]+>\s*$|^\s*<returncode>")


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
        text = normalize(line)
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
    facts: list[Fact] = []
    requests = user_requests(messages)
    if requests:
        facts += _unique("request", [normalize(requests[-1])[:REQUEST_CHARS]])
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
    if requests:
        facts += _unique("identifier", task_identifiers(requests[0])[:MAX_IDENTIFIERS])
    facts += _unique("record_id", record_ids(messages)[:MAX_RECORD_IDS])
    return facts
