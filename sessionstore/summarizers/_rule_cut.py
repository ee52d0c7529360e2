"""Cutting long rules of one punctuation character (pure; imports nothing heavy).

The context builder squeezes tool output with it on every build and the summarizer cuts
a task with it: a module of its own, so that `sessionstore context` loads no scanner.
"""

from __future__ import annotations

import re

__all__ = ["RULE_CHARS", "shorten_rules"]

RULE_CHARS = 8
"""What a long rule of one punctuation character (`=====`, `-----`) is cut to."""
_RULE = re.compile(r"([^\w\s])\1{23,}")


def shorten_rules(text: str) -> str:
    """Return `text` with every rule of 24 or more of one punctuation character cut to 8.

    pytest's `===== 1 failed in 0.08s =====` says as much with eight on each side. A text
    without such a rule is returned as it is (the same object).
    """
    return _RULE.sub(lambda match: match.group(1) * RULE_CHARS, text)
