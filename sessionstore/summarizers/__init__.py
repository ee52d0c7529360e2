"""Summarizers: the injectable calls a strategy makes to turn history into short text.

`Summarizer` (async, may call a model) and `TurnSummarizer` (one line per turn, pure)
are the extension points. `OneLineSummarizer` is the per-turn default;
`OpenAICompatibleSummarizer` calls any `/v1/chat/completions` endpoint with the seeds'
handoff prompt (`build_summary_prompt`).
"""

from sessionstore.summarizers._oneline import OneLineSummarizer
from sessionstore.summarizers._openai_compatible import OpenAICompatibleSummarizer
from sessionstore.summarizers._prompt import (
    HANDOFF_SECTIONS,
    PROMPT_VERSION,
    SummaryPrompt,
    build_summary_prompt,
    summary_budget,
)
from sessionstore.summarizers._protocol import Summarizer, Summary, SummaryRequest, TurnSummarizer

__all__ = [
    "HANDOFF_SECTIONS",
    "PROMPT_VERSION",
    "OneLineSummarizer",
    "OpenAICompatibleSummarizer",
    "Summarizer",
    "Summary",
    "SummaryPrompt",
    "SummaryRequest",
    "TurnSummarizer",
    "build_summary_prompt",
    "summary_budget",
]
