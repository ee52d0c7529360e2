"""Summarizers: the injectable call a strategy makes to turn history into short text.

`Summarizer` is the extension point a model-backed summarizer implements;
`OneLineSummarizer`, the default, runs offline and is deterministic.
"""

from sessionstore.summarizers._oneline import OneLineSummarizer, Summarizer

__all__ = ["OneLineSummarizer", "Summarizer"]
