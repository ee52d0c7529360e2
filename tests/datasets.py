"""Where the shared real-transcripts dataset is, and how messages name it.

The dataset lives beside the checkout (`../shared/datasets/real-transcripts`), not in it.
A skip message names it relative to the checkout: an absolute path would print a
directory of the machine the suite ran on, outside the project.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

__all__ = ["CHECKOUT", "DATASET", "DATASET_LABEL", "first_conversations"]

CHECKOUT = Path(__file__).resolve().parents[1]
"""The root of the checkout (the directory holding `tests/`)."""

DATASET = CHECKOUT.parent / "shared" / "datasets" / "real-transcripts"
"""The dataset's directory (it may not exist)."""

DATASET_LABEL = "../shared/datasets/real-transcripts beside the checkout"
"""The dataset's place as skip messages say it: relative to the checkout."""


def first_conversations(per_file: int) -> str:
    """The first `per_file` conversation lines of each dataset file, as one JSONL text.

    Skips the calling test when the dataset is not there.
    """
    files = sorted(DATASET.glob("*.jsonl"))
    if not files:
        pytest.skip(f"the real-transcripts dataset is not at {DATASET_LABEL}")
    lines = []
    for file in files:
        with file.open(encoding="utf-8") as opened:
            lines += [line for line in itertools.islice(opened, per_file) if line.strip()]
    return "".join(lines)
