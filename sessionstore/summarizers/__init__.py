"""Summarizers: the injectable calls a strategy makes to turn history into short text.

`Summarizer` (async, may call a model) and `TurnSummarizer` (one line per turn, pure)
are the extension points; `OneLineSummarizer`, the default, is both and runs offline.
"""

from sessionstore.summarizers._oneline import OneLineSummarizer
from sessionstore.summarizers._protocol import Summarizer, Summary, SummaryRequest, TurnSummarizer

__all__ = ["OneLineSummarizer", "Summarizer", "Summary", "SummaryRequest", "TurnSummarizer"]
