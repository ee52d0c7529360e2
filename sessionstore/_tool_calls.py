"""What a tool call did, read from its name and arguments: a read, a file view, a write.

Agents name their tools differently (`read_file`, `Read`, `view`, `bash`, `shell`, ...),
so the names are compared case-insensitively, without a namespace prefix
(`functions.read_file`, `mcp__fs__read_file`). A shell call is judged by its command:
`cat`, `sed -n`, `head`, `grep`, `ls`, `find` only read, `sed -i` or a `>` redirect
write. Whatever cannot be parsed with confidence counts as neither a read nor a write.
"""

from __future__ import annotations

import json
import posixpath
import re
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sessionstore.models import ToolCall

__all__ = [
    "FILE_READ_TOOLS",
    "FILE_WRITE_TOOLS",
    "READ_TOOLS",
    "SHELL_TOOLS",
    "FileRead",
    "call_arguments",
    "file_read",
    "is_read_command",
    "normalize_tool_name",
    "shell_command",
    "shell_exit_code",
    "shell_file_read",
    "written_paths",
]

READ_TOOLS: frozenset[str] = frozenset(
    {
        # Seed 003's compactable set: read-style and edit tools whose output can be redone.
        "read",
        "grep",
        "find",
        "ls",
        "glob",
        "websearch",
        "webfetch",
        "edit",
        "write",
        # The same tools under the names other agents give them.
        "read_file",
        "read_many_files",
        "view",
        "view_file",
        "open_file",
        "cat",
        "list_dir",
        "list_directory",
        "list_files",
        "search_files",
        "grep_search",
        "file_search",
        "find_file",
        "search_dir",
        "search_file",
        "web_search",
        "web_fetch",
        "fetch",
        "multiedit",
        "edit_file",
        "write_file",
        "create_file",
        "str_replace_editor",
        "str_replace_based_edit_tool",
        "text_editor",
    }
)
"""Tools whose old results `microcompact` may blank (compared after `normalize_tool_name`).

A shell tool (`SHELL_TOOLS`) counts too, call by call, when its command only reads.
"""

SHELL_TOOLS: frozenset[str] = frozenset(
    {
        "bash",
        "cmd",
        "command",
        "container.exec",
        "exec",
        "exec_command",
        "execute",
        "execute_bash",
        "execute_command",
        "local_shell",
        "powershell",
        "run",
        "run_command",
        "run_shell_command",
        "run_terminal_cmd",
        "sh",
        "shell",
        "shell_exec",
        "terminal",
        "terminal_exec",
        "zsh",
    }
)
"""Tools that run a shell command named by their arguments (`command`, `cmd`, ...)."""

FILE_READ_TOOLS: frozenset[str] = frozenset(
    {"read", "read_file", "view", "view_file", "open_file", "cat"}
)
"""Tools that show one file's content, named by a path argument."""

FILE_WRITE_TOOLS: frozenset[str] = frozenset(
    {"edit", "write", "multiedit", "edit_file", "write_file", "create_file", "apply_patch"}
)
"""Tools that change one file, named by a path argument."""

_EDITOR_TOOLS = frozenset({"str_replace_editor", "str_replace_based_edit_tool", "text_editor"})
"""Editor tools whose `command` argument says what they do (`view`, `create`, ...)."""

_PATH_KEYS = (
    "path",
    "file_path",
    "filepath",
    "filePath",
    "file",
    "filename",
    "target_file",
    "absolute_path",
    "relative_path",
)
_COMMAND_KEYS = ("command", "cmd", "script", "commands")

_READ_COMMANDS = frozenset(
    {
        "cat",
        "head",
        "tail",
        "less",
        "more",
        "nl",
        "grep",
        "egrep",
        "fgrep",
        "rg",
        "ag",
        "ack",
        "ls",
        "tree",
        "find",
        "fd",
        "wc",
        "file",
        "stat",
        "du",
        "sed",
        "diff",
        "cut",
        "uniq",
        "column",
        "od",
        "xxd",
        "hexdump",
        "strings",
        "realpath",
        "readlink",
        "basename",
        "dirname",
        "pwd",
        "which",
        "git",
    }
)
_NEUTRAL_COMMANDS = frozenset({"cd", "echo", "printf", "true", "clear"})
"""Commands that neither read nor change anything; they may join a read."""
_GIT_READS = frozenset({"show", "log", "diff", "status", "grep", "blame", "ls-files", "branch"})
_FIND_ACTIONS = frozenset({"-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fls"})
_VIEW_COMMANDS = frozenset({"cat", "nl", "head", "tail", "sed", "less", "more"})
_SEPARATORS = frozenset({"|", "||", "&&", ";", "&", "|&", ";;", "(", ")"})
_REDIRECTS = frozenset({">", ">>", ">|", "&>", "&>>", ">&", "<", "<<", "<<<", "<&", "<>"})
_SED_PRINT = re.compile(r"^\d+(?:,(?:\d+|\$))?p$")
_GLOB = re.compile(r"[*?\[\]{}$`]")
_NAMESPACE = re.compile(r"^.*(?:__|\.)")
_EXIT_CODE = (
    re.compile(r"<returncode>\s*(-?\d+)\s*</returncode>"),
    re.compile(r"\"exit_?code\"\s*:\s*(-?\d+)", re.IGNORECASE),
    re.compile(r"\b(?:exit code|exit status|exited with code|exit_code)\s*[:=]?\s*(-?\d+)", re.I),
)


def normalize_tool_name(name: str) -> str:
    """Return a tool name lowercased and without a namespace (`mcp__fs__Read` -> `read`)."""
    return _NAMESPACE.sub("", name).lower()


def call_arguments(call: ToolCall) -> dict[str, Any]:
    """Return a call's arguments as a dict; empty when they are not a JSON object."""
    try:
        parsed = json.loads(call.arguments)
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def shell_command(call: ToolCall) -> str | None:
    """Return the command line a shell tool call ran, or None for any other call."""
    if normalize_tool_name(call.name) not in SHELL_TOOLS:
        return None
    arguments = call_arguments(call)
    for key in _COMMAND_KEYS:
        value = arguments.get(key)
        if isinstance(value, str):
            return value
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            # An argv such as ["bash", "-lc", "cat x"] runs its last element.
            if len(value) >= 3 and value[0].rsplit("/", 1)[-1] in {"bash", "sh", "zsh"}:
                return str(value[-1])
            return " ".join(shlex.quote(v) for v in value)
    return None


def shell_exit_code(output: str) -> int | None:
    """Return the exit code a shell tool's output reports, or None when it says none."""
    for pattern in _EXIT_CODE:
        found = pattern.search(output)
        if found:
            return int(found.group(1))
    return None


def _path_argument(arguments: dict[str, Any]) -> str | None:
    for key in _PATH_KEYS:
        value = arguments.get(key)
        if isinstance(value, str) and value.strip():
            return _normal_path(value.strip())
    return None


def _normal_path(path: str) -> str:
    return posixpath.normpath(path) if path else path


# ── shell parsing ──────────────────────────────────────────────────────────────


@dataclass(frozen=True, slots=True)
class _Simple:
    """One simple command: its words, and the redirections it makes."""

    words: tuple[str, ...]
    redirects: tuple[tuple[str, str], ...]
    """(operator, target) pairs."""


def _tokens(command: str) -> list[str] | None:
    # Command substitution runs anything; a parser this small does not follow it.
    if "$(" in command or "`" in command:
        return None
    command = command.replace("\\\n", " ")
    lexer = shlex.shlex(command.replace("\n", " ; "), posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = ""
    try:
        return list(lexer)
    except ValueError:  # an unbalanced quote
        return None


def _pipelines(command: str) -> list[list[_Simple]] | None:
    """Split a command line into pipelines (`a | b`) of simple commands, or None."""
    if "<<" in command:
        # A here-document's body is not shell syntax; keep only the line that opens it.
        command = command.split("\n", 1)[0]
    tokens = _tokens(command)
    if tokens is None:
        return None
    pipelines: list[list[_Simple]] = [[]]
    words: list[str] = []
    redirects: list[tuple[str, str]] = []

    def close() -> None:
        if words or redirects:
            pipelines[-1].append(_Simple(tuple(words), tuple(redirects)))
        words.clear()
        redirects.clear()

    index = 0
    while index < len(tokens):
        token = tokens[index]
        if token in _REDIRECTS:
            # A file descriptor number written right before the operator (`2>`) is not a word.
            if words and words[-1].isdigit():
                words.pop()
            target = tokens[index + 1] if index + 1 < len(tokens) else ""
            redirects.append((token, target))
            index += 2
            continue
        if token in _SEPARATORS:
            close()
            if token not in {"|", "|&"} and pipelines[-1]:
                pipelines.append([])
        elif token and set(token) <= set("();<>|&"):
            return None  # an operator this parser does not know
        else:
            words.append(token)
        index += 1
    close()
    return [pipeline for pipeline in pipelines if pipeline]


def _program(words: Sequence[str]) -> tuple[str, list[str]]:
    """Return a simple command's program name and its arguments, past `VAR=value` words."""
    start = 0
    while start < len(words) and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[start]):
        start += 1
    if start >= len(words):
        return "", []
    return words[start].rsplit("/", 1)[-1], list(words[start + 1 :])


def _writes_output(simple: _Simple) -> bool:
    for operator, target in simple.redirects:
        if operator in {"<", "<<", "<<<", "<&"}:
            continue
        if operator == ">&" and target.isdigit():
            continue
        if target == "/dev/null":
            continue
        return True
    return False


def _reads_only(simple: _Simple) -> bool | None:
    """True for a read, None for a neutral command (cd, echo), False for anything else."""
    if _writes_output(simple):
        return False
    program, arguments = _program(simple.words)
    if program in _NEUTRAL_COMMANDS:
        return None
    if program not in _READ_COMMANDS:
        return False
    if program == "sed":
        return not any(a.startswith("-i") or a.startswith("--in-place") for a in arguments)
    if program == "find":
        return not any(a in _FIND_ACTIONS for a in arguments)
    if program == "git":
        sub = next((a for a in arguments if not a.startswith("-")), "")
        return sub in _GIT_READS
    return True


def is_read_command(command: str) -> bool:
    """Return True when a shell command line only reads: `cat`, `sed -n`, `grep`, `ls`, ...

    Every simple command in it must read (or be neutral, like `cd` and `echo`), none may
    redirect output to a file, and at least one must read. `sed -i`, `find -exec`, command
    substitution and here-documents make it not a read.
    """
    if "<<" in command:
        return False
    pipelines = _pipelines(command)
    if not pipelines:
        return False
    verdicts = [_reads_only(simple) for pipeline in pipelines for simple in pipeline]
    return all(v is not False for v in verdicts) and any(v is True for v in verdicts)


# ── file views and writes ──────────────────────────────────────────────────────


@dataclass(frozen=True, slots=True)
class FileRead:
    """A call that showed one file's content (all of it, or a range of lines)."""

    path: str
    """The path as the call named it, normalised (`./a/../b.py` -> `b.py`)."""
    partial: bool
    """True when only some lines were shown (`sed -n 10,20p`, `head`, an offset)."""


def _view_operand(program: str, arguments: list[str]) -> tuple[str | None, bool]:
    """Return the file a view command reads and whether it reads only part of it."""
    operands: list[str] = []
    partial = program in {"head", "tail"}
    index = 0
    takes_value = {
        "head": {"-n", "-c", "--lines", "--bytes"},
        "tail": {"-n", "-c", "--lines", "--bytes"},
        "nl": {"-b", "-d", "-f", "-h", "-i", "-l", "-n", "-s", "-v", "-w"},
        "sed": {"-e", "--expression"},
    }.get(program, set())
    script_seen = False
    while index < len(arguments):
        argument = arguments[index]
        if argument in takes_value:
            if program == "sed":
                if not _SED_PRINT.match(arguments[index + 1] if index + 1 < len(arguments) else ""):
                    return None, False
                script_seen = partial = True
            index += 2
            continue
        if argument.startswith("-") and argument != "-":
            if program == "sed" and argument not in {"-n", "--quiet", "--silent"}:
                return None, False
            index += 1
            continue
        if program == "sed" and not script_seen:
            if not _SED_PRINT.match(argument):
                return None, False
            script_seen = partial = True
        else:
            operands.append(argument)
        index += 1
    if program == "sed" and not (script_seen and "-n" in arguments):
        return None, False
    if len(operands) != 1 or _GLOB.search(operands[0]) or operands[0] == "-":
        return None, False
    return operands[0], partial


def _is_range_filter(program: str, arguments: list[str]) -> bool:
    """Return True for `head`, `tail` or `sed -n 'A,Bp'` reading its input, not a file."""
    if program in {"head", "tail"}:
        index = 0
        while index < len(arguments):
            argument = arguments[index]
            if argument in {"-n", "-c", "--lines", "--bytes"}:
                index += 2
            elif argument.startswith("-") and argument != "-":
                index += 1
            else:
                return False
        return True
    if program == "sed":
        scripts = [a for a in arguments if a not in {"-n", "--quiet", "--silent", "-e"}]
        return "-n" in arguments and len(scripts) == 1 and bool(_SED_PRINT.match(scripts[0]))
    return False


def shell_file_read(command: str) -> FileRead | None:
    """Return the file a shell command line prints, or None (see `file_read`)."""
    pipelines = _pipelines(command)
    if not pipelines:
        return None
    # `cd dir && cat file` is still one file view.
    while len(pipelines) > 1 and _program(pipelines[0][0].words)[0] == "cd":
        pipelines = pipelines[1:]
    if len(pipelines) != 1:
        return None
    first, *rest = pipelines[0]
    if _writes_output(first):
        return None
    program, arguments = _program(first.words)
    if program not in _VIEW_COMMANDS:
        return None
    path, partial = _view_operand(program, arguments)
    if path is None:
        return None
    for simple in rest:
        if _writes_output(simple) or not _is_range_filter(*_program(simple.words)):
            return None
        partial = True
    return FileRead(_normal_path(path), partial)


def file_read(call: ToolCall) -> FileRead | None:
    """Return the file a call showed, or None when it is not a one-file view.

    A view is a read tool with a path argument (`read_file`, `Read`, `view`, an editor
    tool's `view` command), or a shell command that prints one file: `cat`, `nl`, `head`,
    `tail` or `sed -n 'A,Bp'` of one path, optionally piped into `head`, `tail` or
    `sed -n` (`nl -ba f.py | sed -n '1,80p'`), optionally after `cd dir &&`.
    """
    name = normalize_tool_name(call.name)
    if name in FILE_READ_TOOLS or name in _EDITOR_TOOLS:
        arguments = call_arguments(call)
        if name in _EDITOR_TOOLS and arguments.get("command") != "view":
            return None
        path = _path_argument(arguments)
        if path is None:
            return None
        partial = any(
            arguments.get(key) not in (None, 0, 1, "")
            for key in ("offset", "limit", "start_line", "end_line", "view_range", "line")
        )
        return FileRead(path, partial)
    command = shell_command(call)
    return shell_file_read(command) if command is not None else None


def _sed_files(arguments: list[str]) -> list[str]:
    """Return the files a sed command line names (the script is not one)."""
    operands: list[str] = []
    script_given = False
    index = 0
    while index < len(arguments):
        argument = arguments[index]
        if argument in {"-e", "--expression", "-f", "--file"}:
            script_given = True
            index += 2
            continue
        if not argument.startswith("-"):
            operands.append(argument)
        index += 1
    return operands if script_given else operands[1:]


def _shell_writes(command: str) -> Iterable[str]:
    pipelines = _pipelines(command)
    for pipeline in pipelines or []:
        for simple in pipeline:
            for operator, target in simple.redirects:
                if operator in {">", ">>", ">|", "&>", "&>>"} and target != "/dev/null":
                    yield _normal_path(target)
            program, arguments = _program(simple.words)
            if program == "sed" and any(a.startswith("-i") for a in arguments):
                yield from (_normal_path(f) for f in _sed_files(arguments))
            elif program == "tee":
                yield from (_normal_path(a) for a in arguments if not a.startswith("-"))


def written_paths(call: ToolCall) -> frozenset[str]:
    """Return the files a call changed, as far as its name and arguments tell."""
    name = normalize_tool_name(call.name)
    arguments = call_arguments(call)
    if name in FILE_WRITE_TOOLS:
        path = _path_argument(arguments)
        return frozenset({path} if path else ())
    if name in _EDITOR_TOOLS:
        path = _path_argument(arguments)
        if path and arguments.get("command") not in ("view", None):
            return frozenset({path})
        return frozenset()
    command = shell_command(call)
    if command is None:
        return frozenset()
    return frozenset(_shell_writes(command))
