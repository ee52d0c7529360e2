"""The fitting order's pure parts: summaries re-fitted, the system prompt by sentences."""

from __future__ import annotations

from sessionstore._tokens import estimate_tokens, message_tokens
from sessionstore._trim import shorten_sentences, shorten_summary
from sessionstore.models import SystemMessage

POLICY = (
    "You are an airline agent. Help users book, change or cancel flights. Never book "
    "without the user's confirmation. Payment must use a stored method: a credit card, "
    "a gift card or a certificate.\nAnswer politely."
)


def test_a_system_prompt_is_cut_between_sentences_never_inside_one() -> None:
    whole = message_tokens(SystemMessage(content=POLICY))
    assert shorten_sentences(POLICY, whole) == POLICY
    for budget in range(1, whole):
        short = shorten_sentences(POLICY, budget)
        if not short:
            continue
        assert message_tokens(SystemMessage(content=short)) <= budget
        kept, note = short.split("\n[…")
        assert POLICY.startswith(kept)
        assert kept.endswith((".", ":")), kept
        assert "more sentence(s) left out" in note
    assert shorten_sentences(POLICY, 5) == ""


def test_a_handoff_is_refitted_by_priority_not_cut_at_its_end() -> None:
    handoff = (
        "## Active Task\nFix the parser crash on empty input.\n\n## Completed Actions\n"
        + "\n".join(f"{i}. RAN pytest -q tests/test_{i}.py - failed" for i in range(1, 60))
        + "\n\n## Critical Context\n- ticket: ABC-123"
    )
    for budget in (400, 120, 40):
        short = shorten_summary(handoff, budget)
        assert estimate_tokens(short) <= budget
        assert "## Active Task\nFix the parser crash" in short
    plain = "\n".join(f"[Summary] turn {i}: ran the tests" for i in range(200))
    short = shorten_summary(plain, 100)
    assert estimate_tokens(short) <= 100
    assert short.startswith("[Summary] turn 0")
    assert short.endswith("turn 199: ran the tests")
