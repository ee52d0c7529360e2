"""The strategy registry, and the strategies page examples that plug into it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sessionstore import (
    BlockCompactionStrategy,
    CompactionStrategy,
    DefaultBlockCompaction,
    DefaultCompaction,
    OneLineSummarizer,
    get_block_strategy,
    register_block_strategy,
)
from sessionstore.errors import ConfigurationError
from sessionstore.strategies import (
    get_compaction_strategy,
    register_compaction_strategy,
)

ROOT = Path(__file__).resolve().parents[2]


# ── registry ───────────────────────────────────────────────────────────────────


def test_get_block_strategy_resolves_names_and_objects() -> None:
    assert isinstance(get_block_strategy("default"), DefaultBlockCompaction)
    mine = DefaultBlockCompaction(OneLineSummarizer(max_chars=80))
    assert get_block_strategy(mine) is mine
    with pytest.raises(ConfigurationError, match=r"unknown block strategy 'nope'.*'default'"):
        get_block_strategy("nope")
    with pytest.raises(TypeError, match="compact"):
        get_block_strategy(object())  # type: ignore[arg-type]  # the wrong type is the point


def test_register_block_strategy() -> None:
    class Terse(DefaultBlockCompaction):
        name = "terse"

    register_block_strategy("terse-test", Terse, replace=True)
    assert isinstance(get_block_strategy("terse-test"), Terse)
    with pytest.raises(ValueError, match="already registered"):
        register_block_strategy("terse-test", Terse)
    with pytest.raises(ValueError, match="non-empty"):
        register_block_strategy("", Terse)
    assert isinstance(get_block_strategy("terse-test"), BlockCompactionStrategy)


def test_get_compaction_strategy_resolves_names_and_objects() -> None:
    assert isinstance(get_compaction_strategy("default"), DefaultCompaction)
    safe = DefaultCompaction(safe_tool_pairs=True)
    assert get_compaction_strategy(safe) is safe
    register_compaction_strategy("safe-test", lambda: safe, replace=True)
    assert get_compaction_strategy("safe-test") is safe
    assert isinstance(get_compaction_strategy("safe-test"), CompactionStrategy)
    with pytest.raises(ConfigurationError, match="unknown compaction strategy"):
        get_compaction_strategy("nope")


# ── docs ───────────────────────────────────────────────────────────────────────


def test_strategies_page_examples_run() -> None:
    page = (ROOT / "docs" / "concepts" / "strategies.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", page, flags=re.DOTALL)
    assert blocks
    for code in blocks:
        exec(compile(code, "strategies.md", "exec"), {"__name__": "strategies_md"})
