"""Summarizers: the injectable calls a strategy makes to turn history into short text.

`Summarizer` (async, may call a model) and `TurnSummarizer` (one line per turn, pure)
are the extension points. `ExtractiveSummarizer`, the offline default `Summarizer`, writes
a structured handoff under the `HANDOFF_SECTIONS` headings without a model;
`OpenAICompatibleSummarizer` asks any `/v1/chat/completions` endpoint for the same
handoff with the seeds' prompt (`build_summary_prompt`); `OneLineSummarizer` is the
per-turn default of `DefaultBlockCompaction`.
"""

from typing import TYPE_CHECKING

from sessionstore._lazy import lazy_exports

if TYPE_CHECKING:
    from sessionstore.summarizers._extractive import ExtractiveSummarizer
    from sessionstore.summarizers._handoff import HANDOFF_SECTIONS
    from sessionstore.summarizers._oneline import OneLineSummarizer
    from sessionstore.summarizers._openai_compatible import OpenAICompatibleSummarizer
    from sessionstore.summarizers._prompt import (
        PROMPT_VERSION,
        SummaryPrompt,
        build_summary_prompt,
        summary_budget,
    )
    from sessionstore.summarizers._protocol import (
        Summarizer,
        Summary,
        SummaryRequest,
        TurnSummarizer,
    )

__all__ = [
    "HANDOFF_SECTIONS",
    "PROMPT_VERSION",
    "ExtractiveSummarizer",
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

# Where each name lives: imported on first use (PEP 562), so importing one module of
# the package does not import the others.
_SOURCES: dict[str, tuple[str, ...]] = {
    "sessionstore.summarizers._extractive": ("ExtractiveSummarizer",),
    "sessionstore.summarizers._handoff": ("HANDOFF_SECTIONS",),
    "sessionstore.summarizers._oneline": ("OneLineSummarizer",),
    "sessionstore.summarizers._openai_compatible": ("OpenAICompatibleSummarizer",),
    "sessionstore.summarizers._prompt": (
        "PROMPT_VERSION",
        "SummaryPrompt",
        "build_summary_prompt",
        "summary_budget",
    ),
    "sessionstore.summarizers._protocol": (
        "Summarizer",
        "Summary",
        "SummaryRequest",
        "TurnSummarizer",
    ),
}
__getattr__, __dir__ = lazy_exports(__name__, globals(), _SOURCES)
