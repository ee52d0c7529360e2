"""Summarizers: the injectable calls a strategy makes to turn history into short text.

`Summarizer` (async, may call a model) and `TurnSummarizer` (one line per turn, pure)
are the extension points; `OneLineSummarizer`, the default per-turn summarizer, is both
and runs offline; `ExtractiveSummarizer`, the offline default `Summarizer`, writes a
structured handoff under the `HANDOFF_SECTIONS` headings without a model.
"""

from sessionstore.summarizers._extractive import ExtractiveSummarizer
from sessionstore.summarizers._handoff import HANDOFF_SECTIONS
from sessionstore.summarizers._oneline import OneLineSummarizer
from sessionstore.summarizers._protocol import Summarizer, Summary, SummaryRequest, TurnSummarizer

__all__ = [
    "HANDOFF_SECTIONS",
    "ExtractiveSummarizer",
    "OneLineSummarizer",
    "Summarizer",
    "Summary",
    "SummaryRequest",
    "TurnSummarizer",
]
