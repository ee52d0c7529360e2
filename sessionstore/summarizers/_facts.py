"""Reading a handoff's facts out of messages: requests, actions, failures, files, values (pure).

`extract_facts` walks the messages once, oldest first, and fills a `Handoff` with what
an assistant taking over needs: the latest request verbatim, the first request's gist,
constraints, each tool call as a completed action with its outcome, the error lines of
the latest failures, questions and whether they were answered, every file path touched,
and the identifiers worth keeping. Digests found among the messages (earlier compaction
or branch summaries) are returned apart, to be merged as prior digests.
"""

from __future__ import annotations

import re
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
from sessionstore.summarizers._actions import describe_call, describe_outcome, outcome_values
from sessionstore.summarizers._commands import Call, describe_command
from sessionstore.summarizers._handoff import (
    MAX_FOLLOW_UPS,
    Action,
    Handoff,
    Item,
    looks_like_handoff,
    with_follow_ups,
)
from sessionstore.summarizers._scan import (
    clean_text,
    code_identifiers,
    collapse,
    cut,
    find_paths,
    head_tail,
    is_noise_path,
    parse_json,
    record_values,
    sentences,
    without_fences,
)

__all__ = ["extract_facts"]

GIST_CHARS = 400
SENTENCE_CHARS = 240
FOLLOW_UP_CHARS = 400
MAX_SYSTEM_CONSTRAINTS = 8
MAX_TASK_IDENTIFIERS = 40
LEADING_IDENTIFIERS = 15
MAX_OUTPUT_PATHS = 10
MAX_DIFF_PATHS = 500
MAX_VALUES_PER_RESULT = 12
MAX_FAILURES = 2
"""Latest failures whose error lines are all kept."""
MAX_EARLIER_FAILURES = 6
"""Failures before those, kept as one line each (their last error line)."""
FEEDBACK_CHARS = 3_000

_CONSTRAINT = re.compile(
    r"\b(?:must|never|don'?t|do not|only|should|shouldn'?t|required?|always|avoid|prefer"
    r"|make sure|ensure|cannot|can'?t|not allowed|forbidden|mandatory|important)\b",
    re.IGNORECASE,
)
_DECISION = re.compile(
    r"\b(?:decid\w*|instead of|chose|choose|opt(?:ed)? for|going with|will use|I'll use"
    r"|the (?:fix|solution|root cause|cause|issue|problem|bug) (?:is|was)|because|so that)\b",
    re.IGNORECASE,
)
_PLAN = re.compile(
    r"\b(?:next|then|need to|still|todo|remaining|will now|plan to)\b", re.IGNORECASE
)
_LABEL = re.compile(r"^\s*(?:THOUGHT|Thought|Reasoning|Analysis|DISCUSSION|Plan)\s*:\s*")
_FEEDBACK = re.compile(
    r"triple backticks|<response_example>|<format_example>|\bexactly one\b.{0,60}"
    r"\b(?:action|command|code block|bash block|tool call)"
    r"|\b(?:format|formatted) (?:your|the) (?:response|action|output|answer|command)"
    r"|^(?:invalid|malformed|unrecognized|unknown) (?:action|command|tool|format|response)"
    r"|^your (?:last )?(?:command|action|response) (?:timed out|was invalid|could not be parsed)",
    re.IGNORECASE | re.MULTILINE,
)
_ACK = re.compile(
    r"^\W*(?:yes|yeah|yep|ok|okay|sure|no|nope|thanks?|thank you|great|perfect|cool|awesome|"
    r"got it|sounds good|correct|right|fine|done|confirm(?:ed)?|go ahead|proceed|please do|"
    r"bye|goodbye|that'?s (?:all|it|right|correct))\b",
    re.IGNORECASE,
)
_OUTPUT_LIKE = re.compile(
    r"<returncode>|<output>|^\s*(?:Observation|Output|stdout)\s*:", re.MULTILINE
)
_FENCED_COMMAND = re.compile(r"```(?:bash|sh|shell|console|zsh)?[ \t]*\n(.*?)\n```", re.DOTALL)
_DIFF_PATH = re.compile(r"^(?:diff --git a/(\S+) b/\S+|\+\+\+ b/(\S+)|--- a/(\S+))", re.MULTILINE)
_TRACE_PATH = re.compile(r'^\s*File "([^"]+)", line \d+', re.MULTILINE)
_LOCATED_PATH = re.compile(r"^([\w./-]+\.[A-Za-z]\w{0,7})(?::\d+|::\w)", re.MULTILINE)
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
    failures: list[tuple[str, int, list[str]]] = field(default_factory=list)
    user_questions: list[str] = field(default_factory=list)
    assistant_questions: list[str] = field(default_factory=list)
    last_text: str = ""
    last_test: str = ""
    cwd: str = ""
    clock: int = 0
    system_constraints: int = 0

    # ── messages ──────────────────────────────────────────────────────────────

    def visit(self, message: Message) -> None:
        self.clock += 1
        if isinstance(message, UserMessage):
            self.user(clean_text(message.text))
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
            if _OUTPUT_LIKE.search(text[:2_000]):
                self.close(self.open(call), text)
                return
        if not text.strip():
            return
        if looks_like_handoff(text):
            self.digests.append(text)
            return
        started = bool(self.first_request) or self.continuing
        if started and _OUTPUT_LIKE.match(text):
            return
        if started and _is_feedback(text):
            # Not a request, but the last thing the user side said: kept short, in case.
            self.feedback = cut(collapse(text), FOLLOW_UP_CHARS)
            return
        self.feedback = ""
        answering = bool(self.assistant_questions)
        self.resolve_assistant_questions(text)
        if (self.request or self.continuing) and (answering or _is_short_reply(text)):
            self.follow_ups.append(cut(collapse(text), FOLLOW_UP_CHARS))
        else:
            self.request, self.follow_ups = text.strip(), []
        if not self.first_request:
            self.first_request = text.strip()
            identifiers = code_identifiers(text)[:MAX_TASK_IDENTIFIERS]
            for index, identifier in enumerate(identifiers):
                # The first ones name the subject; a long statement's later ones are boilerplate.
                self.value(identifier, identifier, rank=4 if index < LEADING_IDENTIFIERS else 3)
        self.constraints(text, rank=2)
        for value in record_values(text, from_user=True):
            self.value(value, value, rank=3)
        for path in find_paths(without_fences(text)):
            self.file(path, rank=2)
        self.user_questions.extend(
            cut(s, SENTENCE_CHARS) for s in sentences(text) if s.endswith("?")
        )

    def assistant(self, message: AssistantMessage) -> None:
        self.fenced = None
        text = clean_text(message.text)
        calls = message.tool_calls
        for call in calls:
            if call.name.lower() in _THINK_TOOLS:
                self.note(_argument_text(clean_text(call.arguments)))
            else:
                self.tool_call(call)
        if text.strip():
            self.note(text)
            fenced = _FENCED_COMMAND.findall(text)
            if not calls and len(fenced) == 1 and fenced[0].strip():
                # Counted only once an output answers it: until then it may be a suggestion.
                self.fenced = describe_command(fenced[0].strip(), tool="bash")

    def note(self, text: str) -> None:
        """Read an assistant's text: its questions, decisions and plans."""
        said = [s for s in sentences(text) if s]
        if not said:
            return
        self.handoff.has_reply = True
        self.last_text = text
        if self.user_questions:
            answer = cut(_LABEL.sub("", said[0]), 160)
            self.handoff.resolved.extend(Item(f"{q} -> {answer}") for q in self.user_questions)
            self.user_questions = []
        self.assistant_questions = [cut(s, SENTENCE_CHARS) for s in said if s.endswith("?")]
        for sentence in said:
            if _DECISION.search(sentence) and not sentence.endswith("?"):
                self.handoff.decisions.append(Item(cut(_LABEL.sub("", sentence), SENTENCE_CHARS)))

    def resolve_assistant_questions(self, answer: str) -> None:
        if self.assistant_questions:
            reply = cut(collapse(answer), 120)
            self.handoff.resolved.extend(
                Item(f"Assistant asked: {q} -> user: {reply}") for q in self.assistant_questions
            )
            self.assistant_questions = []

    def tool_call(self, call: ToolCall) -> None:
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
        output = clean_text(message.text)
        if opened is None:
            if message.tool_name.lower() in _THINK_TOOLS:
                return
            name = clean_text(message.tool_name) or "tool"
            call = Call("RESULT", "of an earlier call", name, brief="earlier call")
            opened = self.open(call, call_id=message.tool_call_id)
        self.close(opened, output, is_error=message.is_error)

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
        call = opened.call
        outcome = describe_outcome(call.verb, output, is_error=is_error, code=code)
        # A run that printed a test summary was a test run, whatever the command's name.
        verb = "TESTED" if outcome.tests is not None and call.verb == "RAN" else call.verb
        self.handoff.actions.append(
            Action(
                opened.number,
                opened.number,
                verb,
                call.target,
                outcome.text,
                call.tool,
                brief=call.brief,
            )
        )
        if outcome.failed or outcome.errors:
            errors = outcome.errors
            status = "" if outcome.exit_code is None else f" (exit {outcome.exit_code})"
            what = "failed" if outcome.failed else "printed errors"
            self.failures.append((f"action {opened.number} {what}{status}", opened.number, errors))
            self.failures = self.failures[-(MAX_FAILURES + MAX_EARLIER_FAILURES) :]
        if verb == "TESTED":
            self.last_test = f"{call.target} - {outcome.text}"
        for key, value in outcome_values(output)[:MAX_VALUES_PER_RESULT]:
            self.value(value, f"{key}={value}", rank=1)
        if not outcome_values(output):
            for value in record_values(output)[:MAX_VALUES_PER_RESULT]:
                self.value(value, value, rank=1)
        for path, rank in _output_paths(output):
            self.file(path, rank=rank)

    # ── facts ─────────────────────────────────────────────────────────────────

    def file(self, path: str, *, rank: int, note: str = "") -> None:
        if is_noise_path(path) or path in (".", "..", "/"):
            return
        _, old_rank, old_note = self.files.pop(path, (0, 0, ""))
        self.files[path] = (self.clock, max(rank, old_rank), note or old_note)

    def value(self, key: str, text: str, *, rank: int) -> None:
        key = key.strip()
        if not key or len(key) > 120:
            return
        _, old_rank, old_text = self.values.pop(key, (0, 0, ""))
        self.values[key] = (self.clock, max(rank, old_rank), old_text if old_rank > rank else text)

    def constraints(self, text: str, *, rank: int) -> None:
        for sentence in sentences(text):
            if sentence.startswith("#") or sentence.endswith("?"):
                continue
            if not _CONSTRAINT.search(sentence):
                continue
            if rank == 0:
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
        handoff.goal = _gist(self.first_request)
        handoff.pending = [Item(q, rank=2) for q in self.user_questions]
        handoff.files = [
            Item(path, rank=rank, note=note)
            for path, (_, rank, note) in sorted(self.files.items(), key=lambda kv: kv[1][0])
        ]
        handoff.critical = [
            Item(text, rank=rank, key=key)
            for key, (_, rank, text) in sorted(self.values.items(), key=lambda kv: kv[1][0])
        ]
        earlier, latest = self.failures[:-MAX_FAILURES], self.failures[-MAX_FAILURES:]
        for header, _, errors in earlier:
            last = f" {errors[-1]}" if errors else ""
            handoff.blocked.append(Item(f"earlier: {header}:{last}", rank=0))
        for index, (header, number, errors) in enumerate(latest):
            rank = 2 if index == len(latest) - 1 else 1
            since = sum(1 for a in handoff.actions if a.first > number)
            since_note = f"; {since} action(s) since" if since else ""
            handoff.blocked.append(Item(f"{header}{since_note}:", rank))
            handoff.blocked.extend(Item(line, rank) for line in errors)
        if self.last_text:
            said = sentences(_LABEL.sub("", self.last_text))
            gist = cut(" ".join(said[:2]), 300)
            if gist:
                handoff.state.append(Item(f"Last assistant note: {gist}"))
            plans = [s for s in said[2:] if _PLAN.search(s) and not s.endswith("?")]
            handoff.remaining = [Item(cut(s, SENTENCE_CHARS)) for s in plans[-3:]]
        if self.cwd:
            handoff.state.append(Item(f"Working directory: {self.cwd}"))
        if self.last_test:
            handoff.state.append(Item(f"Last test run: {self.last_test}"))
        for opened in self.open_calls:
            call = opened.call
            waiting = f"Waiting for the result of {opened.number}. {call.verb} {call.target}"
            handoff.in_progress.append(Item(waiting, rank=2))
        handoff.in_progress.extend(
            Item(f"Waiting for the user's answer: {q}") for q in self.assistant_questions
        )
        return handoff


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


def _is_feedback(text: str) -> bool:
    """Return True for a harness's complaint about the format of the last reply.

    Harnesses that drive an agent through chat (mini-swe-agent and the like) answer a
    reply they cannot parse with a user message; it is not a request. Only messages
    after the first request can be feedback, since a task statement often explains the
    format itself.
    """
    return len(text) <= FEEDBACK_CHARS and _FEEDBACK.search(text) is not None


def _is_short_reply(text: str) -> bool:
    """Return True for a confirmation or thanks (`yes`, `ok, go ahead`), not a new request."""
    words = text.split()
    return len(words) <= 12 and "?" not in text and _ACK.match(text) is not None


def _gist(request: str) -> str:
    """Return the first sentences of a request, markup removed, at most ~400 characters."""
    prose = collapse(re.sub(r"</?[A-Za-z_][\w-]*>", " ", head_tail(request, 4_000)))
    if len(prose) <= GIST_CHARS:
        return prose
    said = sentences(prose)
    gist = ""
    for sentence in said:
        if len(gist) + len(sentence) + 1 > GIST_CHARS:
            break
        gist = f"{gist} {sentence}".strip()
    return gist or cut(prose, GIST_CHARS)


def _output_paths(output: str) -> list[tuple[str, int]]:
    """Return the paths an output shows as touched, with a rank.

    Every file of a diff (rank 2), then up to ten paths of tracebacks and `path:line`
    hits (rank 1).
    """
    found: dict[str, int] = {}
    if "diff --git" in output or "+++ " in output:
        for match in _DIFF_PATH.finditer(output):
            found.setdefault(next(g for g in match.groups() if g), 2)
            if len(found) >= MAX_DIFF_PATHS:
                break
    window = head_tail(output)
    located: dict[str, int] = {}
    for pattern in (_TRACE_PATH, _LOCATED_PATH):
        for match in pattern.finditer(window):
            path = match.group(1)
            if path not in found and not is_noise_path(path):
                located.setdefault(path, 1)
    return [*found.items(), *list(located.items())[:MAX_OUTPUT_PATHS]]


def _argument_text(arguments: str) -> str:
    """Return the text of a think-style call: its string arguments, or the raw arguments."""
    data = parse_json(arguments)
    if isinstance(data, dict):
        return "\n".join(v for v in data.values() if isinstance(v, str))
    return arguments
