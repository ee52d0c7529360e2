"""One loop of a synthetic session: `_Loop` writes its messages.

It draws the tools, their arguments and their outputs from the fictional project
(`_codebase`), and what people and the model say from `_words`.
"""

from __future__ import annotations

import base64
import json
import random
from collections.abc import Sequence

from sessionstore._demo._codebase import _File, _numbered, _Project
from sessionstore._demo._draws import _below, _choice, _int
from sessionstore._demo._words import (
    _BUGS,
    _CHANGE_NOTES,
    _CONTEXT,
    _DEPENDENCIES,
    _FIX_FINALS,
    _FIX_KINDS,
    _FLAGS,
    _FOLLOW_UPS,
    _LINT_ISSUES,
    _NOUNS,
    _OBSERVATIONS,
    _OTHER_FINALS,
    _PACKAGE,
    _PREAMBLES,
    _PYTEST_HEADER,
    _REQUESTS,
    _SYMPTOMS,
    _THOUGHTS,
    _TYPE_ISSUES,
    _VERBS,
)
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

_MODEL = "synthetic-coder-1"
_SYSTEM_TOKENS = 5_200
"""What a coding agent's system prompt and tool schemas cost, counted into `Usage`."""

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
_REPEATABLE = frozenset(("read_file", "grep"))
_TASK_KINDS = tuple(_REQUESTS)
_SHELL_KINDS = ("status", "diff", "lint", "types", "log", "time", "sizes", "plan")


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
