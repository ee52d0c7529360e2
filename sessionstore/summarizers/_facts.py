"""Reading a handoff's facts out of messages: requests, actions, failures, files, values (pure).

`extract_facts` walks the messages once, oldest first, and fills a `Handoff` with what
an assistant taking over needs: the latest request verbatim, the first request's gist,
constraints, each tool call as a completed action with its outcome, the error lines of
the latest failures, questions and whether they were answered, every file path touched,
and the identifiers worth keeping. Digests found among the messages (earlier compaction
or branch summaries) are returned apart, to be merged as prior digests. What the calls
changed (the open file, each file's latest change, the latest diff) is followed by
`WorkingState` (`_changes.py`).
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass, field

from sessionstore.models import (
    AssistantMessage,
    BashExecutionMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from sessionstore.summarizers._actions import (
    body_of,
    describe_call,
    describe_outcome,
    outcome_values,
)
from sessionstore.summarizers._changes import MAX_DIFF_LINES, WorkingState, output_paths
from sessionstore.summarizers._commands import Call, describe_command
from sessionstore.summarizers._handoff import (
    FOLLOW_UP_CHARS,
    MAX_FOLLOW_UPS,
    WAITING_FOR_USER,
    Action,
    Handoff,
    Item,
    looks_like_handoff,
    state_item,
    with_follow_ups,
)
from sessionstore.summarizers._harness import (
    is_demonstration,
    is_placeholder,
    statement_part,
    without_examples,
)
from sessionstore.summarizers._plan_calls import PlanEntry, merged_plan, plan_lines, plan_of
from sessionstore.summarizers._run_output import (
    exec_output,
    resolved_note,
    telling_line,
    test_result_line,
)
from sessionstore.summarizers._said import (
    DECISION,
    HARNESS_COMPLAINT,
    INTERROGATIVE,
    LABEL,
    OUTPUT_LIKE,
    PLAN,
    asks_the_user,
    gist_of,
    is_constraint,
    is_feedback,
    is_short_reply,
    opens_as_reply,
)
from sessionstore.summarizers._scan import (
    clean_text,
    code_identifiers,
    collapse,
    cut,
    find_paths,
    is_noise_path,
    parse_json,
    record_values,
    sentences,
    split_reminders,
    without_fences,
)

__all__ = ["extract_facts", "is_constraint"]

SENTENCE_CHARS = 240
MAX_SYSTEM_CONSTRAINTS = 8
MAX_TASK_IDENTIFIERS = 40
LEADING_IDENTIFIERS = 15
MAX_SEEN_PATHS = 8
"""Paths seen only in tool output (not read, run or changed) kept, the newest."""
MAX_VALUES_PER_RESULT = 12
MAX_FAILURES = 2
"""Latest failures whose error lines are all kept."""
MAX_EARLIER_FAILURES = 6
"""Failures before those, kept as one line each (their last error line)."""
FEEDBACK_SHOWN_CHARS = 240
"""A harness's format complaint is kept this short: it is repeated on every bad reply."""
RESULT_LINE_CHARS = 160
"""The last line of a test run's output, when it printed no result line, kept this long."""
MAX_CHANGES = 12
"""Files whose latest change is described in Active State."""
DIFF_LINE_CHARS = 160
MAX_OUTPUT_VALUES = 24
"""Values seen only in the output of record reads kept, the newest first."""

_FENCED_COMMAND = re.compile(r"```(?:bash|sh|shell|console|zsh)?[ \t]*\n(.*?)\n```", re.DOTALL)
_THINK_TOOLS = frozenset({"think", "thought", "reasoning", "scratchpad"})
_CD = re.compile(r"(?:^|&&|;|\n)\s*cd\s+([^\s;&|]+)")


@dataclass(slots=True)
class _Open:
    """An action whose result has not been read yet."""

    number: int
    call: Call
    call_id: str = ""


@dataclass(slots=True)
class _Walker:
    next_number: int
    continuing: bool = False
    """True when an earlier digest holds the conversation's start (its task statement)."""
    handoff: Handoff = field(default_factory=Handoff)
    digests: list[str] = field(default_factory=list)
    request: str = ""
    follow_ups: list[str] = field(default_factory=list)
    first_request: str = ""
    feedback: str = ""
    open_calls: list[_Open] = field(default_factory=list)
    fenced: Call | None = None
    files: dict[str, tuple[int, int, str]] = field(default_factory=dict)
    values: dict[str, tuple[int, int, str]] = field(default_factory=dict)
    failures: list[tuple[str, int, list[str], str]] = field(default_factory=list)
    """The failures not resolved yet: header, action number, error lines, what ran."""
    resolved: list[tuple[int, tuple[str, int, list[str], str]]] = field(default_factory=list)
    """Failures a later clean run of the same command resolved, with that run's number."""
    user_questions: list[str] = field(default_factory=list)
    assistant_questions: list[str] = field(default_factory=list)
    last_text: str = ""
    tests: dict[str, str] = field(default_factory=dict)
    """By test command: its last run's result line, the command run last at the end (the
    last two commands)."""
    cwd: str = ""
    clock: int = 0
    system_constraints: int = 0
    results: int = 0
    """Tool results read so far."""
    work: WorkingState = field(default_factory=WorkingState)
    """The open file, the changes made, the latest diff."""
    output_values: dict[str, tuple[int, bool]] = field(default_factory=dict)
    """Values seen only in tool output: the number of the result that showed them last,
    and whether that result was a search or listing (rather than a record read)."""
    human: bool = False
    """A user replied after the first request (not a harness): the run is interactive."""
    harness: bool = False
    """A harness speaks on the user side (format complaints, command output as user text)."""
    plan: list[PlanEntry] = field(default_factory=list)
    """The agent's own plan: the newest list its todo or plan tool was given."""
    plan_tool: str = ""

    # ── messages ──────────────────────────────────────────────────────────────

    def visit(self, message: Message) -> None:
        self.clock += 1
        if isinstance(message, UserMessage):
            text, reminders = split_reminders(clean_text(message.text))
            for reminder in reminders:
                self.constraints(reminder, rank=0)  # the harness's, as a system prompt's
            if text.strip() or not reminders:
                self.user(text)
        elif isinstance(message, AssistantMessage):
            self.assistant(message)
        elif isinstance(message, ToolResultMessage):
            self.tool_result(message)
        elif isinstance(message, BashExecutionMessage):
            call = describe_command(clean_text(message.command), tool="user shell")
            opened = self.open(call)
            self.close(opened, clean_text(message.output), code=message.exit_code)
        elif isinstance(message, SystemMessage):
            self.constraints(clean_text(message.text), rank=0)
        elif isinstance(message, BranchSummaryMessage | CompactionSummaryMessage):
            self.digests.append(clean_text(message.summary))

    def user(self, text: str) -> None:
        if self.fenced is not None:
            call, self.fenced = self.fenced, None
            if OUTPUT_LIKE.search(text[:2_000]):
                self.harness = True
                self.close(self.open(call), text)
                return
        if not text.strip():
            return
        if looks_like_handoff(text):
            self.digests.append(text)
            return
        if is_demonstration(text):
            # A worked example the harness shows the agent: not its task, nor facts of it.
            return
        started = bool(self.first_request) or self.continuing
        if started and OUTPUT_LIKE.match(text):
            self.harness = True
            return
        if is_feedback(text) and (started or HARNESS_COMPLAINT.search(text[:1_000])):
            # A harness's complaint about the format of the last reply: not a request,
            # but the last thing the user side said, kept short in case.
            self.feedback = cut(collapse(text), FEEDBACK_SHOWN_CHARS)
            self.assistant_questions = []
            self.harness = True
            return
        self.feedback = ""
        answering = bool(self.assistant_questions)
        self.resolve_assistant_questions(text)
        if self.first_request:
            self.human = True
        # An acknowledgement that opens the turns (`Yes, please proceed`) answers turns
        # before them (a chat agent's loop opens at every user message): they continue a
        # task stated earlier, and it is a reply to it, not a task.
        opening_reply = not (self.request or self.continuing or self.first_request) and (
            opens_as_reply(text)
        )
        if opening_reply:
            self.continuing = True
        if opening_reply or (
            (self.request or self.continuing) and (answering or is_short_reply(text))
        ):
            self.follow_ups.append(cut(collapse(text), FOLLOW_UP_CHARS))
        else:
            self.request, self.follow_ups = text.strip(), []
        # Facts come from the statement, not from the examples of the harness's standing
        # instructions (`MY_ENV_VAR`, `/path/to/working/dir`).
        facts = without_examples(statement_part(text))
        if not self.first_request and not opening_reply:
            self.first_request = text.strip()
            identifiers = [i for i in code_identifiers(facts) if not is_placeholder(i)][
                :MAX_TASK_IDENTIFIERS
            ]
            for index, identifier in enumerate(identifiers):
                # The first ones name the subject; a long statement's later ones are boilerplate.
                self.value(identifier, identifier, rank=4 if index < LEADING_IDENTIFIERS else 3)
            standing = without_examples(text[len(statement_part(text)) :])
            # The harness's standing rules stay as constraints if the task is cut.
            self.constraints(standing, rank=1)
            for identifier in code_identifiers(standing)[:MAX_TASK_IDENTIFIERS]:
                # The harness's own names (its submit sentinel, its commands), least first.
                if not is_placeholder(identifier) and identifier not in identifiers:
                    self.value(identifier, identifier, rank=1)
        self.constraints(facts, rank=2)
        for value in record_values(facts, from_user=True):
            if not is_placeholder(value):
                self.value(value, value, rank=3)
        for path in find_paths(without_fences(facts)):
            if not is_placeholder(path):
                self.file(path, rank=2)
        self.user_questions.extend(
            cut(s, SENTENCE_CHARS) for s in sentences(text) if s.endswith("?")
        )

    def assistant(self, message: AssistantMessage) -> None:
        self.fenced = None
        text = clean_text(message.text)
        calls = message.tool_calls
        fenced = _FENCED_COMMAND.findall(text) if text.strip() and not calls else []
        acting = bool(calls) or len(fenced) == 1
        for call in calls:
            if call.name.lower() in _THINK_TOOLS:
                self.note(_argument_text(clean_text(call.arguments)), acting=True)
            else:
                self.tool_call(call)
        if text.strip():
            self.note(text, acting=acting)
            if len(fenced) == 1 and fenced[0].strip():
                # Counted only once an output answers it: until then it may be a suggestion.
                self.fenced = describe_command(fenced[0].strip(), tool="bash")

    def note(self, text: str, *, acting: bool = False) -> None:
        """Read an assistant's text: its questions, decisions and plans.

        Questions count as asked of the user only in a text that ends the assistant's
        turn (no tool call, no command run): an agent working on its own asks itself. A
        sentence that asks for something without a question mark ("Please provide your
        user ID") asks too: the user's next message answers it, it is not a new request.
        """
        said = [s for s in sentences(text) if s]
        if not said:
            return
        self.handoff.has_reply = True
        self.last_text = text
        if self.user_questions:
            answer = cut(LABEL.sub("", said[0]), 160)
            self.handoff.resolved.extend(Item(f"{q} -> {answer}") for q in self.user_questions)
            self.user_questions = []
        self.assistant_questions = (
            [] if acting else [cut(s, SENTENCE_CHARS) for s in said if asks_the_user(s)]
        )
        for sentence in said:
            plain = LABEL.sub("", sentence)
            if DECISION.search(plain) and "?" not in plain and not INTERROGATIVE.match(plain):
                self.handoff.decisions.append(Item(cut(plain, SENTENCE_CHARS)))

    def resolve_assistant_questions(self, answer: str) -> None:
        if self.assistant_questions:
            reply = cut(collapse(answer), 120)
            self.handoff.resolved.extend(
                Item(f"Assistant asked: {q} -> user: {reply}") for q in self.assistant_questions
            )
            self.assistant_questions = []

    def tool_call(self, call: ToolCall) -> None:
        found = plan_of(call.arguments)
        if found is not None:
            entries, merge = found
            self.plan = merged_plan(self.plan, entries) if merge else entries
            self.plan_tool = clean_text(call.name)
        described = describe_call(clean_text(call.name), clean_text(call.arguments))
        self.open(described, call_id=call.id)
        for key, value in described.values:
            self.value(value, f"{key}={value}", rank=2)

    def tool_result(self, message: ToolResultMessage) -> None:
        opened = None
        for candidate in reversed(self.open_calls):
            if candidate.call_id == message.tool_call_id:
                opened = candidate
                break
        output, code = exec_output(split_reminders(clean_text(message.text))[0])
        if opened is None:
            if message.tool_name.lower() in _THINK_TOOLS:
                return
            name = clean_text(message.tool_name) or "tool"
            call = Call("RESULT", "of an earlier call", name, brief="earlier call")
            opened = self.open(call, call_id=message.tool_call_id)
        self.close(opened, output, is_error=message.is_error, code=code)

    # ── actions ───────────────────────────────────────────────────────────────

    def open(self, call: Call, call_id: str = "") -> _Open:
        opened = _Open(self.next_number, call, call_id)
        self.next_number += 1
        self.open_calls.append(opened)
        for path, note in call.files:
            self.file(path, rank=2, note=note)
        if call.command:
            for match in _CD.finditer(call.command):
                self.cwd = match.group(1)
        return opened

    def close(
        self, opened: _Open, output: str, *, is_error: bool = False, code: int | None = None
    ) -> None:
        if opened in self.open_calls:
            self.open_calls.remove(opened)
        self.results += 1
        call = opened.call
        outcome = describe_outcome(
            call.verb, output, is_error=is_error, code=code, target=call.target
        )
        # A run that printed a test summary was a test run, whatever the command's name.
        verb = "TESTED" if outcome.tests is not None and call.verb == "RAN" else call.verb
        target = call.target
        path = self.work.open_file if call.on_open_file else ""
        if path and verb == "EDITED":
            target = f"{path} {call.target}"
            self.file(path, rank=3, note="edited")
        self.handoff.actions.append(
            Action(
                opened.number,
                opened.number,
                verb,
                target,
                outcome.text,
                call.tool,
                brief=path or call.brief,
            )
        )
        key = _failure_key(call, path)
        if outcome.failed or outcome.errors:
            errors = outcome.errors
            status = "" if outcome.exit_code is None else f" (exit {outcome.exit_code})"
            what = "failed" if outcome.failed else "printed errors"
            self.failures.append(
                (f"action {opened.number} {what}{status}", opened.number, errors, key)
            )
            self.failures = self.failures[-(MAX_FAILURES + MAX_EARLIER_FAILURES) :]
        else:
            # A later clean run of the same command (or edit of the same file) resolves
            # the failures it had.
            fixed = [f for f in self.failures if f[3] == key]
            if fixed:
                self.failures = [f for f in self.failures if f[3] != key]
                self.resolved.extend((opened.number, f) for f in fixed)
                self.resolved = self.resolved[-MAX_EARLIER_FAILURES:]
        if verb == "TESTED":
            body = body_of(output)
            lines = [line.strip() for line in body.split("\n") if line.strip()]
            result = (
                test_result_line(body)
                or (outcome.errors[-1] if outcome.errors else "")
                or (cut(lines[-1], RESULT_LINE_CHARS) if lines else outcome.text)
            )
            command = _one_line(call.tested or call.target)
            self.tests.pop(command, None)
            self.tests[command] = result
            if len(self.tests) > 2:  # the last run and the earlier one are all shown
                del self.tests[next(iter(self.tests))]
        if not outcome.failed:
            touched = self.work.track_changes(call, verb, path, output, clock=self.clock)
            for file_path, note in touched:
                kept = note or self.files.get(file_path, (0, 0, ""))[2] or "edited"
                self.file(file_path, rank=3, note=kept)
        self.work.track_output(call, output)
        search = call.verb in ("SEARCHED", "LISTED")
        found = outcome_values(output)
        for found_key, value in found[:MAX_VALUES_PER_RESULT]:
            self.value(value, f"{found_key}={value}", rank=1, output=True, search=search)
        if not found:
            for value in record_values(output)[:MAX_VALUES_PER_RESULT]:
                self.value(value, value, rank=1, output=True, search=search)
        for found_path, rank in output_paths(output):
            self.file(found_path, rank=rank)

    # ── facts ─────────────────────────────────────────────────────────────────

    def file(self, path: str, *, rank: int, note: str = "") -> None:
        if len(path) > 1:
            path = path.rstrip("/")  # `src/` and `src` are one directory
        if is_noise_path(path) or path in (".", "..", "/", ""):
            return
        _, old_rank, old_note = self.files.pop(path, (0, 0, ""))
        if note == "deleted":
            # A removed scratch file matters less than the files read or changed.
            self.files[path] = (self.clock, 1, note)
            return
        if note in ("edited", "written", "created"):
            rank = max(rank, 3)
        self.files[path] = (self.clock, max(rank, old_rank), note or old_note)

    def value(
        self, key: str, text: str, *, rank: int, output: bool = False, search: bool = False
    ) -> None:
        key = key.strip()
        if not key or len(key) > 120:
            return
        _, old_rank, old_text = self.values.pop(key, (0, 0, ""))
        if output and (key in self.output_values or old_rank == 0):
            self.output_values[key] = (self.results, search)
        else:
            self.output_values.pop(key, None)
        self.values[key] = (self.clock, max(rank, old_rank), old_text if old_rank > rank else text)

    def constraints(self, text: str, *, rank: int) -> None:
        for sentence in sentences(text):
            if not is_constraint(sentence):
                continue
            if rank <= 1:
                # System prompts and standing instructions: the first few rules.
                if self.system_constraints >= MAX_SYSTEM_CONSTRAINTS:
                    return
                self.system_constraints += 1
            self.handoff.constraints.append(
                Item(cut(sentence.lstrip("-*• "), SENTENCE_CHARS), rank)
            )

    # ── the handoff ───────────────────────────────────────────────────────────

    def finish(self) -> Handoff:
        handoff = self.handoff
        later = [*self.follow_ups, self.feedback] if self.feedback else self.follow_ups
        if self.request:
            handoff.task = with_follow_ups(self.request, later)
        else:
            handoff.later = later[-MAX_FOLLOW_UPS:]
        handoff.goal = gist_of(statement_part(self.first_request))
        handoff.pending = [Item(q, rank=2) for q in self.user_questions]
        files = sorted(self.files.items(), key=lambda kv: kv[1][0])
        # Paths only an output named (traceback frames, grep hits): the newest few.
        seen_only = [path for path, (_, rank, _) in files if rank <= 1][-MAX_SEEN_PATHS:]
        paths = {path for path, (_, rank, _) in files if rank > 1 or path in seen_only}
        ordered = sorted(paths)
        handoff.files = [
            Item(path, rank=rank, note=note)
            for path, (_, rank, note) in files
            if path in paths and (note or not _holds_another(path, ordered))
        ]
        handoff.critical = self.critical_values()
        for index, (number, (header, _, errors, _)) in enumerate(self.resolved):
            newest = index == len(self.resolved) - 1
            note = resolved_note(number, header, errors, newest=newest)
            handoff.blocked.append(Item(note, rank=1))
        handoff.blocked.extend(self.blocked_items(handoff))
        # The last test run, and the last run of another test command before it (the
        # suite after a reproduction script, or the other way round): what each showed.
        for label, (command, result) in zip(
            ("Last test run", "Earlier test run"), reversed(self.tests.items()), strict=False
        ):
            handoff.state.append(state_item(f"{label}: {command} -> {result}"))
        changes = sorted(self.work.changes.items(), key=lambda kv: kv[1][0])[-MAX_CHANGES:]
        handoff.state.extend(state_item(text) for _, (_, text) in changes)
        for index, line in enumerate(self.work.diff[:MAX_DIFF_LINES]):
            text = f"Diff {cut(line, DIFF_LINE_CHARS)}"
            handoff.state.append(Item(text, rank=2, key=f"diff {index}"))
        if self.last_text:
            said = sentences(LABEL.sub("", self.last_text))
            gist = cut(" ".join(said[:2]), 300)
            if gist:
                handoff.state.append(Item(f"Last assistant note: {gist}", key="note"))
            plans = [s for s in said[2:] if PLAN.search(s) and not s.endswith("?")]
            handoff.remaining = [Item(cut(s, SENTENCE_CHARS)) for s in plans[-3:]]
        if self.plan:
            # The agent's own list comes first: what it had left to do, in its words.
            listed = plan_lines(self.plan, self.plan_tool)
            handoff.remaining[:0] = [Item(text, rank=rank) for text, rank in listed]
        if self.cwd:
            handoff.state.append(Item(f"Working directory: {self.cwd}", key="cwd"))
        for opened in self.open_calls:
            call = opened.call
            waiting = f"Waiting for the result of {opened.number}. {call.verb} {call.target}"
            handoff.in_progress.append(Item(waiting, rank=2))
        if not self.harness:
            handoff.in_progress.extend(
                Item(f"{WAITING_FOR_USER}{q}", rank=2) for q in self.assistant_questions
            )
        return handoff

    def blocked_items(self, handoff: Handoff) -> list[Item]:
        """Return the Blocked lines of the failures not resolved: each error line once.

        A failure that printed the same error lines as the one before it (the same call
        retried) is one header naming both, so the lines are not repeated; an earlier
        failure whose last line a latest one shows is left out.
        """
        earlier, latest = self.failures[:-MAX_FAILURES], self.failures[-MAX_FAILURES:]
        shown = {line for _, _, errors, _ in latest for line in errors}
        items: list[Item] = []
        for header, _, errors, _ in earlier:
            if errors and errors[-1] in shown:
                continue
            telling = telling_line(errors)
            last = f" {telling}" if telling else ""
            items.append(Item(f"earlier: {header}:{last}", rank=0))
        groups: list[tuple[str, int, list[str], list[int]]] = []
        for header, number, errors, _ in latest:
            if groups and errors and groups[-1][2] == errors:
                groups[-1][3].append(groups[-1][1])
                groups[-1] = (header, number, errors, groups[-1][3])
            else:
                groups.append((header, number, errors, []))
        for index, (header, number, errors, before) in enumerate(groups):
            rank = 3 if index == len(groups) - 1 else 2
            since = sum(1 for a in handoff.actions if a.first > number)
            since_note = f"; {since} action(s) since" if since else ""
            also = f" (as did action {', '.join(map(str, before))})" if before else ""
            items.append(Item(f"{header}{also}{since_note}:", rank))
            items.extend(Item(line, rank) for line in errors)
        return items

    def rank_of(self, key: str) -> int:
        """Return a value's rank as `critical_values` gives it."""
        shown = self.output_values.get(key)
        if shown is not None:
            return 0 if shown[1] else 1
        return self.values[key][1]

    def critical_values(self) -> list[Item]:
        """Return the values worth keeping, those the latest turns use ranked highest.

        Values the user gave or a call used keep their rank. Values seen only in tool
        output: those of records read (a user's reservations, payment ids) rank 1, the
        newest `MAX_OUTPUT_VALUES` kept; those of searches and listings only from the
        newest such result, rank 0 (a search's twenty flight numbers are not all
        critical; the one the agent then books is, as a call argument).
        """
        searches = [result for result, search in self.output_values.values() if search]
        newest_search = max(searches, default=-1)
        records = sorted(
            (k for k, (_, search) in self.output_values.items() if not search),
            key=lambda k: self.output_values[k][0],
            reverse=True,
        )
        kept_records = set(records[:MAX_OUTPUT_VALUES])
        items: list[Item] = []
        # Lowest rank first, then oldest: a digest read back and trimmed again (where
        # ranks are not written) drops from the start.
        ordered = sorted(self.values.items(), key=lambda kv: (self.rank_of(kv[0]), kv[1][0]))
        for key, (_, rank, text) in ordered:
            shown = self.output_values.get(key)
            if shown is not None:
                result, search = shown
                if search and result != newest_search:
                    continue
                if not search and key not in kept_records:
                    continue
                rank = 0 if search else 1
            items.append(Item(text, rank=rank, key=key))
        return items


def extract_facts(
    messages: list[Message], *, first_number: int = 1, continuing: bool = False
) -> tuple[Handoff, list[str]]:
    """Return the handoff facts of `messages` and the digests found among them.

    Args:
        messages: The messages to read, oldest first.
        first_number: The number of the first completed action (after a prior digest's).
        continuing: The messages continue a conversation whose start an earlier digest
            holds, so their first user message is not necessarily a task statement.
    """
    walker = _Walker(next_number=first_number, continuing=continuing)
    for message in messages:
        walker.visit(message)
    return walker.finish(), walker.digests


def _argument_text(arguments: str) -> str:
    """Return the text of a think-style call: its string arguments, or the raw arguments."""
    data = parse_json(arguments)
    if isinstance(data, dict):
        return "\n".join(v for v in data.values() if isinstance(v, str))
    return arguments


def _one_line(text: str) -> str:
    """Return the first line of a command, marked when more follows."""
    return text.rstrip(" …") if not text.endswith(" …") else text


def _failure_key(call: Call, path: str) -> str:
    """Return what a failure is about: the command run, or the file an edit changed."""
    if call.verb in ("EDITED", "WROTE", "CREATED"):
        files = [path] if path else [p for p, _ in call.files]
        if files:
            return "change " + " ".join(files)
    return collapse(call.command or call.target)


def _holds_another(directory: str, ordered: Sequence[str]) -> bool:
    """Return True when a path of `ordered` (sorted) lies under `directory`, naming it."""
    prefix = f"{directory}/"
    at = bisect_left(ordered, prefix)
    return at < len(ordered) and ordered[at].startswith(prefix)
