"""Configuration of context building and compaction: what the seeds name, with their defaults.

- `ContextConfig` is the legacy, stateless path's configuration (`compact_messages`).
- `CompactionConfig` is the whole compaction policy: WHEN to compact (`compact_at_pct`,
  `compact_budget_threshold_pct`, `compaction_scope`; see `should_compact`) and HOW
  (`keep_first_turns`, `keep_recent_turns`, `max_summary_tokens`,
  `tool_output_max_lines`, and the strategies).
- `FixedCount` and `TokenBudget` are the two `CompactionScope`s.

Every model is frozen and validated: a zero or negative budget, a percentage outside
(0, 1] and the like are refused with a `ConfigurationError` naming the field.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeAlias, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeInt,
    PositiveInt,
    ValidationError,
    model_validator,
)

from sessionstore._protocols import BlockCompactionStrategy, CompactionStrategy
from sessionstore.errors import ConfigurationError, describe_validation_error
from sessionstore.models import MAX_INT

__all__ = [
    "CompactionConfig",
    "CompactionScope",
    "ContextConfig",
    "FixedCount",
    "TokenBudget",
    "should_compact",
    "validated_config",
]

SUMMARY_SHARE = 0.25
"""The share of a compaction's window one loop's summary may take unless set explicitly."""
TASK_SUMMARY_SHARE = 0.5
"""The same for the loop that states the session's task (the chain's first loop)."""
STORED_SUMMARY_MIN_TOKENS = 400
"""A stored summary's budget is at least this (unless `max_summary_tokens` is set smaller):
a built context re-fits a summary larger than its room by priority, but what a stored
summary leaves out is lost for good. On the development set at a tenth of each
transcript's tokens, the airline harness's key facts went from 78.3% to 88.8% with it."""


class _Config(BaseModel):
    # Built on first use, as the models are (see `sessionstore.models`): every command
    # imports this module for its options, few build a configuration.
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as error:
            raise ConfigurationError(describe_validation_error(error)) from None


class FixedCount(_Config):
    """Take part with a fixed number of earlier loops of the active chain."""

    kind: Literal["fixed_count"] = "fixed_count"
    count: Annotated[int, Field(ge=0, le=MAX_INT)] = 3
    """How many loops before the current one take part (0: the current loop only).

    At most `MAX_INT` (2**31 - 1), which is more loops than a chain can hold: a larger
    count would overflow the database's 64-bit integers once a query adds to it."""

    def __init__(self, count: int = 3, **data: Any) -> None:
        super().__init__(count=count, **data)


class TokenBudget(_Config):
    """Walk back from the current loop, adding loops while their estimates fit the budget.

    See `sessionstore.resolve_scope` for the exact rule.
    """

    kind: Literal["token_budget"] = "token_budget"


CompactionScope: TypeAlias = Annotated[FixedCount | TokenBudget, Field(discriminator="kind")]
"""How many earlier loops of the active chain take part in compaction and context loading."""


class ContextConfig(_Config):
    """The legacy path's configuration: a message list compacted to fit one budget."""

    max_context_tokens: PositiveInt = 100_000
    """The model's context window, in tokens."""
    system_prompt_tokens: NonNegativeInt = 4_000
    """Tokens reserved for the system prompt; the messages get the rest."""
    tool_output_max_lines: PositiveInt = 50
    """Level 1 keeps at most this many lines of each tool output (head + tail)."""
    keep_first: NonNegativeInt = 2
    """Level 3 keeps this many messages from the start."""
    keep_recent: NonNegativeInt = 10
    """Levels 2 and 3 keep this many messages from the end in full."""

    @model_validator(mode="after")
    def _room_for_messages(self) -> ContextConfig:
        if self.system_prompt_tokens >= self.max_context_tokens:
            raise ValueError(
                f"system_prompt_tokens ({self.system_prompt_tokens}) leaves no room in "
                f"max_context_tokens ({self.max_context_tokens})"
            )
        return self

    @property
    def budget(self) -> int:
        """The tokens the messages may use: `max_context_tokens - system_prompt_tokens`."""
        return self.max_context_tokens - self.system_prompt_tokens


class CompactionConfig(_Config):
    """The whole compaction policy: when to compact and how.

    The strategies are given by name (`"default"`, or a name registered with
    `sessionstore.strategies.register_block_strategy`) or as objects.
    """

    model_config = ConfigDict(
        frozen=True, extra="forbid", arbitrary_types_allowed=True, defer_build=True
    )

    # WHEN
    compact_at_pct: float = Field(default=0.90, gt=0, le=1)
    """The fraction of `max_context_tokens` at which headroom is measured."""
    compact_budget_threshold_pct: float = Field(default=0.05, ge=0, lt=1)
    """Compaction fires when the headroom left below `compact_at_pct` is under this fraction."""
    compaction_scope: CompactionScope = Field(default_factory=FixedCount)
    """How many earlier loops of the active chain take part."""

    # HOW
    keep_first_turns: NonNegativeInt = 2
    """Turns kept verbatim from the start of the most recent loop."""
    keep_recent_turns: NonNegativeInt = 10
    """Turns kept from the end of the most recent loop, with tool output truncated."""
    max_summary_tokens: PositiveInt = 2_000
    """The token budget of one loop's summarised (`keep_compacted`) section."""
    tool_output_max_lines: PositiveInt = 50
    """The most lines a tool output keeps in the `keep_recent` section (head + tail)."""
    keep_recent_tokens: PositiveInt = 6_000
    """The tokens of recent messages a summarizing strategy keeps (seed 001's protected
    tail, by tokens: up to 1.5 times this to keep a tool call with its results). Unless
    set explicitly, a compaction uses `summary_target_ratio` of its window instead."""
    summary_target_ratio: float = Field(default=0.1, gt=0, le=0.8)
    """Seed 001's tail budget that scales with the window: the tail a summarizing strategy
    keeps is this share of `max_context_tokens` when `keep_recent_tokens` is not set
    (seed 001: 20% of its 50% threshold, so a tenth of the window)."""
    in_memory_strategy: str | CompactionStrategy = "summarize"
    """The `CompactionStrategy` of `compress_messages` (the stateless path): a registered
    name or the object. `"summarize"`: one digest of the middle (seeds 001 and 003);
    `"default"`: the seed's legacy three levels (`compact_messages`)."""
    block_strategy: str | BlockCompactionStrategy = "summarize"
    """The `BlockCompactionStrategy` of `compact_session_loops`: a registered name or the
    object. `"summarize"`: each loop's middle as one structured digest, offline (seeds 001
    and 003; the command line's, the live engine's and the SDK sessions' too);
    `"default"`: the seed's three levels, one line a compacted turn."""
    context_engine: str = Field(default="store", min_length=1)
    """The live `ContextEngine` of the SDK adapters, by registered name (seed 001's
    `context.engine`; see `register_context_engine`). Not recorded on blocks."""

    def within(
        self, max_context_tokens: int, *, states_task: bool = False, min_summary_tokens: int = 0
    ) -> CompactionConfig:
        """Return this config with its default summary and tail budgets sized to a window.

        Unless set explicitly, a summary gets at most a quarter of the window (half for
        the loop that states the session's task, `states_task`), and the tail kept
        verbatim is `summary_target_ratio` of the window (seed 001's tail that scales
        with the window), so a small window is not asked to hold more than it can and a
        large one keeps more of its latest turns. Values set explicitly are kept; a
        config that fits comes back unchanged.

        The task's loop gets more because its digest holds the task statement, which
        goes last when a context is cut: what a digest leaves out is lost for good,
        while a build shortens a digest larger than the room it has. For the same reason
        a summary that is stored gets at least `min_summary_tokens`
        (`STORED_SUMMARY_MIN_TOKENS` for a compaction), whatever the window.
        """
        chosen = self.model_fields_set
        summary = self.max_summary_tokens
        if "max_summary_tokens" not in chosen:
            share = TASK_SUMMARY_SHARE if states_task else SUMMARY_SHARE
            share_tokens = max(int(max_context_tokens * share), min_summary_tokens)
            summary = max(1, min(summary, share_tokens))
        tail = self.keep_recent_tokens
        if "keep_recent_tokens" not in chosen:
            tail = max(1, int(max_context_tokens * self.summary_target_ratio))
        if (summary, tail) == (self.max_summary_tokens, self.keep_recent_tokens):
            return self
        return self.model_copy(update={"max_summary_tokens": summary, "keep_recent_tokens": tail})

    def snapshot(self) -> dict[str, Any]:
        """Return the JSON-able settings a block records as the config it was built with."""
        data = self.model_dump(
            mode="json", exclude={"in_memory_strategy", "block_strategy", "context_engine"}
        )
        for key in ("in_memory_strategy", "block_strategy"):
            value = getattr(self, key)
            data[key] = value if isinstance(value, str) else type(value).__name__
        return data


_C = TypeVar("_C", bound=_Config)


def validated_config(config: object, kind: type[_C]) -> _C:
    """Return `config` if it is a `kind`, or `kind(**config)` for a mapping; refuse the rest."""
    if config is None:
        return kind()
    if isinstance(config, kind):
        return config
    if isinstance(config, dict):
        return kind(**config)
    raise ConfigurationError(f"expected a {kind.__name__}, got {type(config).__name__}")


def should_compact(
    context_tokens: int,
    max_context_tokens: int,
    config: CompactionConfig | None = None,
) -> bool:
    """Return True when a context of `context_tokens` should be compacted now.

    The seed's two WHEN knobs, written out: the *trigger line* is `compact_at_pct` of
    the window (90% by default). The *headroom* is what is left below that line,
    `trigger_line - context_tokens`. Compaction fires when the headroom is smaller than
    `compact_budget_threshold_pct` of the window (5% by default), that is when

        context_tokens > (compact_at_pct - compact_budget_threshold_pct) * max_context_tokens

    With the defaults a 100,000-token window compacts once the context passes 85,000
    tokens: 5,000 tokens short of the 90% line, leaving room for the next turn's
    output before the window is really full.

    Raises:
        ValueError: `max_context_tokens` is not positive or `context_tokens`
            is negative.
    """
    config = config or CompactionConfig()
    if max_context_tokens <= 0:
        raise ValueError(f"max_context_tokens must be positive, got {max_context_tokens}")
    if context_tokens < 0:
        raise ValueError(f"context_tokens must not be negative, got {context_tokens}")
    headroom = config.compact_at_pct * max_context_tokens - context_tokens
    return headroom < config.compact_budget_threshold_pct * max_context_tokens
