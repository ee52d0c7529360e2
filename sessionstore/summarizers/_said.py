"""What a message's text says: a rule, a decision, a plan, a harness complaint, a reply (pure).

The handoff's fact reader (`_facts.py`) sorts every sentence and user message it reads
with these: constraints go under Constraints, decisions and plans under Key Decisions and
Remaining Work, a harness's format complaint is not a request, a short confirmation is a
follow-up of the request it answers.
"""

from __future__ import annotations

import re

from sessionstore.summarizers._scan import collapse, cut, head_tail, sentences

__all__ = [
    "ACK",
    "CONSTRAINT",
    "DECISION",
    "FEEDBACK",
    "GIST_CHARS",
    "HARNESS_COMPLAINT",
    "INTERROGATIVE",
    "LABEL",
    "OUTPUT_LIKE",
    "PLAN",
    "asks_the_user",
    "gist_of",
    "is_constraint",
    "is_feedback",
    "is_short_reply",
    "without_markup",
]

GIST_CHARS = 400
"""The first request's gist is its first sentences, this many characters at most."""
FEEDBACK_CHARS = 3_000
"""A user message longer than this is never a harness's format complaint."""

CONSTRAINT = re.compile(
    r"\b(?:must|never|don'?t|do not|only|should|shouldn'?t|required?|always|avoid|prefer"
    r"|make sure|ensure|cannot|can'?t|not allowed|forbidden|mandatory|important)\b",
    re.IGNORECASE,
)


def is_constraint(sentence: str) -> bool:
    """Return True when a sentence states a rule or a preference (not a heading or a question)."""
    return (
        not sentence.startswith("#")
        and not sentence.endswith("?")
        and CONSTRAINT.search(sentence) is not None
    )


DECISION = re.compile(
    r"\b(?:decid\w*|instead of|chose|choose|opt(?:ed)? for|going with|will use|I'll use"
    r"|the (?:fix|solution|root cause|cause|issue|problem|bug) (?:is|was)|because|so that)\b",
    re.IGNORECASE,
)
PLAN = re.compile(
    r"\b(?:next(?! (?:day|week|month|year|morning|afternoon|evening|night|time)\b)"
    r"|then|need to|still|todo|remaining|will now|plan to)\b",
    re.IGNORECASE,
)
"""A sentence that says what is left to do (`next` of a time, `the next day`, is not)."""
LABEL = re.compile(r"^\s*(?:THOUGHT|Thought|Reasoning|Analysis|DISCUSSION|Plan)\s*:\s*")
FEEDBACK = re.compile(
    r"triple backticks|<response_example>|<format_example>|\bexactly one\b.{0,60}"
    r"\b(?:action|command|code block|bash block|tool call)"
    r"|\b(?:format|formatted) (?:your|the) (?:response|action|output|answer|command)"
    r"|^(?:invalid|malformed|unrecognized|unknown) (?:action|command|tool|format|response)"
    r"|^your (?:last )?(?:command|action|response) (?:timed out|was invalid|could not be parsed)",
    re.IGNORECASE | re.MULTILINE,
)
HARNESS_COMPLAINT = re.compile(
    r"\b(?:please )?always provide exactly one\b|\bexactly one\b.{0,60}\bfound \d+"
    r"|<response_example>|<format_example>"
    r"|^(?:invalid|malformed|unrecognized) (?:action|command|tool call|response)\b",
    re.IGNORECASE | re.MULTILINE,
)
"""The unmistakable complaints of a harness (not a user asking for a format)."""
ACK = re.compile(
    r"^\W*(?:yes|yeah|yep|ok|okay|sure|no|nope|thanks?|thank you|great|perfect|cool|awesome|"
    r"got it|sounds good|correct|right|fine|done|confirm(?:ed)?|go ahead|proceed|please do|"
    r"bye|goodbye|that'?s (?:all|it|right|correct))\b",
    re.IGNORECASE,
)
OUTPUT_LIKE = re.compile(
    r"<returncode>|<output>|^\s*(?:Observation|Output|stdout)\s*:", re.MULTILINE
)
INTERROGATIVE = re.compile(
    r"^(?:why|what|how|where|when|which|who|is|are|was|does|do|did|can|could|should|would"
    r"|will|shall|maybe|perhaps|wait|hmm)\b",
    re.IGNORECASE,
)


ASKS = re.compile(
    r"^(?:please|kindly)\b(?! (?:note|be aware|wait|hold)\b)"
    r"|\blet me know\b"
    r"|\b(?:could|can|would|will) you(?: please| kindly)? (?:provide|share|confirm|tell|specify"
    r"|send|give|enter|choose|select|clarify|describe|paste|upload|check)\b"
    r"|\b(?:please|kindly) (?:provide|share|confirm|tell|specify|send|give|enter|choose"
    r"|select|clarify|describe|paste|upload|check|reply|respond|answer|let me)\b",
    re.IGNORECASE,
)
"""A sentence that asks the user for something without a question mark ("Please provide
your user ID, and I'll look it up.")."""


def asks_the_user(sentence: str) -> bool:
    """Return True for a sentence of an assistant's reply that waits for the user's answer."""
    return sentence.endswith("?") or ASKS.search(sentence) is not None


def is_feedback(text: str) -> bool:
    """Return True for a harness's complaint about the format of the last reply.

    Harnesses that drive an agent through chat (mini-swe-agent and the like) answer a
    reply they cannot parse with a user message; it is not a request. Before the first
    request (turns that continue a run), only an unmistakable complaint counts, since a
    user may well ask for a format.
    """
    return len(text) <= FEEDBACK_CHARS and FEEDBACK.search(text) is not None


OPENING_REPLY_WORDS = 40
"""An acknowledgement that opens a loop's turns may say this much and still be a reply."""


def opens_as_reply(text: str) -> bool:
    """Return True for turns' first user message that answers what came before them.

    `Yes, please try to use the larger certificate, then my 7447 card.`: it opens with
    an acknowledgement, asks nothing and stays short (`OPENING_REPLY_WORDS`); a chat
    agent's loop opens at every user message, and such a loop continues a task.
    """
    return (
        "?" not in text and ACK.match(text) is not None and len(text.split()) <= OPENING_REPLY_WORDS
    )


def is_short_reply(text: str) -> bool:
    """Return True for a confirmation or thanks (`yes`, `ok, go ahead`), not a new request."""
    words = text.split()
    return len(words) <= 12 and "?" not in text and ACK.match(text) is not None


_MARKUP = re.compile(r"</?[A-Za-z_][\w-]*>")


def without_markup(text: str) -> str:
    """Return `text` with its tags (`<pr_description>`, `</uploaded_files>`) made spaces."""
    return _MARKUP.sub(" ", text)


def gist_of(request: str) -> str:
    """Return the first sentences of a request, markup removed, at most ~400 characters."""
    prose = collapse(without_markup(head_tail(request, 4_000)))
    if len(prose) <= GIST_CHARS:
        return prose
    said = sentences(prose)
    gist = ""
    for sentence in said:
        if len(gist) + len(sentence) + 1 > GIST_CHARS:
            break
        gist = f"{gist} {sentence}".strip()
    return gist or cut(prose, GIST_CHARS)
