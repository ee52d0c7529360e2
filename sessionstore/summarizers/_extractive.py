r"""`ExtractiveSummarizer`: the offline default summarizer, a structured handoff without a model.

It reads the facts an assistant taking over needs straight out of the messages (the
latest request verbatim, the goal, constraints, each tool call with its outcome, the
exact error lines of the latest failures, questions, files touched, identifiers), fills
the sections of the seed's structured summary template with them, merges them into the
prior digest when there is one, and trims by priority to the token budget. It is
deterministic and pure: the same request always gives the same text.

>>> import asyncio
>>> from sessionstore.models import AssistantMessage, ToolCall, ToolResultMessage, UserMessage
>>> output = "FAILED tests/test_io.py::test_read - KeyError: 1\n1 failed in 0.1s\nExit code: 1"
>>> run = ToolCall(id="1", name="bash", arguments={"command": "pytest tests/test_io.py"})
>>> messages = [
...     UserMessage(content="Fix the failing test in tests/test_io.py"),
...     AssistantMessage(content=[run]),
...     ToolResultMessage(tool_call_id="1", content=output),
... ]
>>> summary = asyncio.run(ExtractiveSummarizer().summarize(SummaryRequest(messages=messages)))
>>> print(summary.text)
## Active Task
Fix the failing test in tests/test_io.py
<BLANKLINE>
## Completed Actions
1. TESTED pytest tests/test_io.py - exit 1, 1 failed [tool: bash]
<BLANKLINE>
## Active State
- Last test run: pytest tests/test_io.py -> 1 failed in 0.1s
<BLANKLINE>
## Blocked
- action 1 failed (exit 1):
- FAILED tests/test_io.py::test_read - KeyError: 1
<BLANKLINE>
## Relevant Files
- tests/test_io.py
"""

from __future__ import annotations

import time

from sessionstore.summarizers._facts import extract_facts
from sessionstore.summarizers._fit import fit_handoff
from sessionstore.summarizers._handoff import (
    CONTINUED,
    Handoff,
    Item,
    parse_handoff,
    with_follow_ups,
)
from sessionstore.summarizers._handoff_merge import merge_handoffs
from sessionstore.summarizers._protocol import Summary, SummaryRequest
from sessionstore.summarizers._scan import clean_text, code_identifiers, record_values

__all__ = ["EXTRACTIVE_PROMPT_VERSION", "ExtractiveSummarizer"]

EXTRACTIVE_PROMPT_VERSION = "extractive-handoff-1"
"""The version of the extraction rules, recorded as the summary's `prompt_version`."""
MAX_CARRIED_IDENTIFIERS = 40
MIN_CARRIED_CHARS = 4
"""Shorter names are listed even when the task shows them, so they are not carried."""


class ExtractiveSummarizer:
    """The offline default `Summarizer`: a structured handoff built without a model.

    The digest has the sections of `HANDOFF_SECTIONS`, in order, empty ones left out:

    - **Active Task**: the latest user request, verbatim, with the user's later short
      replies (harness format complaints and tool output sent as user messages are not
      requests);
    - **Goal**: the gist of the first request; **Constraints & Preferences**: sentences
      with must / never / don't / only / should / ... from user and system messages;
    - **Completed Actions**: one line per tool call, `N. ACTION target - outcome [tool:
      name]`, the action inferred from the tool and its arguments (a shell command in a
      `command` argument, or in a ```` ```bash ```` block answered by the next message);
    - **Active State**, **In Progress**, **Remaining Work**: the latest assistant note,
      working directory, last test run, calls still waiting for a result;
    - **Blocked**: the exact error lines of the latest failures;
    - **Key Decisions**, **Resolved Questions**, **Pending User Asks**;
    - **Relevant Files**: every path touched, in order of last touch;
    - **Critical Context**: ids, record numbers, emails, dates, amounts, versions, and
      the identifiers of the task statement.

    With a prior digest (or digests among the messages), the result is an iterative
    update: goal, constraints, files and values carry forward, actions continue their
    numbering, and the task, state and blockers are replaced by newer ones. With a
    focus topic, items that mention it are trimmed last. With `scope="branch"` the
    first line says the digest is of an abandoned branch.

    The text always fits `request.budget_tokens` as `estimate_tokens` counts it; when
    everything does not fit, the least important items go first (see
    docs/concepts/summarizers.md for the order).
    """

    model = "extractive"
    prompt_version = EXTRACTIVE_PROMPT_VERSION

    def __repr__(self) -> str:
        return "ExtractiveSummarizer()"

    async def summarize(self, request: SummaryRequest) -> Summary:
        """Return the structured handoff of `request.messages` within its budget."""
        clock = time.perf_counter()
        text = self.digest(request)
        return Summary(
            text=text,
            model=self.model,
            prompt_version=self.prompt_version,
            duration_ms=(time.perf_counter() - clock) * 1000,
        )

    def digest(self, request: SummaryRequest) -> str:
        """Return the digest text (the synchronous core of `summarize`)."""
        messages = list(request.messages)
        prior = Handoff()
        if request.prior_digest and request.prior_digest.strip():
            prior = _carried(parse_handoff(clean_text(request.prior_digest)))
        facts, found = extract_facts(
            messages, first_number=prior.next_number, continuing=_has_start(prior)
        )
        if found:
            for text in found:
                prior = merge_handoffs(prior, _carried(parse_handoff(text)))
            facts, _ = extract_facts(
                messages, first_number=prior.next_number, continuing=_has_start(prior)
            )
        focus = clean_text(request.focus_topic) if request.focus_topic else None
        merged = merge_handoffs(prior, facts)
        if not merged.task and (messages or merged.later or merged.continued):
            # Turns without a request of their own continue a task stated before them.
            merged.task = with_follow_ups(CONTINUED, merged.later or facts.later)
        return fit_handoff(
            merged,
            request.budget_tokens,
            focus=focus,
            branch=request.scope == "branch",
        )


def _has_start(prior: Handoff) -> bool:
    """Return True when a prior digest holds the conversation's start."""
    return bool(prior.task or prior.goal or prior.actions)


def _carried(prior: Handoff) -> Handoff:
    """Return a parsed prior digest with the identifiers of its task listed as values.

    A digest leaves out values its task snapshot shows; if this compaction has to cut
    the snapshot further, they come back in Critical Context instead of being lost.
    """
    found = [*code_identifiers(prior.task), *record_values(prior.task, from_user=True)]
    values = [Item(value, rank=3) for value in dict.fromkeys(found)][:MAX_CARRIED_IDENTIFIERS]
    # Appended after the values already listed (highest rank last, as written), so that a
    # digest updated with nothing new comes out unchanged.
    listed = {item.identity for item in prior.critical}
    prior.critical = [
        *prior.critical,
        *(i for i in values if i.identity not in listed and len(i.identity) >= MIN_CARRIED_CHARS),
    ]
    return prior
