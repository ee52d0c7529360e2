"""Where the shared real-transcripts dataset is, and how messages name it.

The dataset lives beside the checkout (`../shared/datasets/real-transcripts`), not in it.
A skip message names it relative to the checkout: an absolute path would print a
directory of the machine the suite ran on, outside the project.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["CHECKOUT", "DATASET", "DATASET_LABEL"]

CHECKOUT = Path(__file__).resolve().parents[1]
"""The root of the checkout (the directory holding `tests/`)."""

DATASET = CHECKOUT.parent / "shared" / "datasets" / "real-transcripts"
"""The dataset's directory (it may not exist)."""

DATASET_LABEL = "../shared/datasets/real-transcripts beside the checkout"
"""The dataset's place as skip messages say it: relative to the checkout."""
