"""Which `ContextEngine` a session runs, chosen by name (seed 001's `context.engine`).

Engines are registered like strategies: `register_context_engine(name, factory)`, then
`CompactionConfig(context_engine=name)` (or the name itself) selects one. A factory takes
the store, the session id and the window, and returns an engine bound to that session:

    def make(store, session_id, *, context_length, system_prompt_tokens, overlay, config):
        return MyEngine(store, session_id, context_length=context_length)

`"store"` (the default) is `StoreContextEngine` with the seeds' gate: threshold,
anti-thrashing and failure cooldowns.
"""

from __future__ import annotations

from typing import Any, Protocol

from sessionstore._engine._contract import ContextEngine
from sessionstore._engine._store_engine import StoreContextEngine
from sessionstore.config import CompactionConfig
from sessionstore.errors import ConfigurationError
from sessionstore.store import SessionStore, TenantStore

__all__ = [
    "DEFAULT_ENGINE",
    "EngineChoice",
    "EngineFactory",
    "make_context_engine",
    "register_context_engine",
]

DEFAULT_ENGINE = "store"
"""The name of the default engine, `StoreContextEngine`."""


class EngineFactory(Protocol):
    """Builds the engine of one stored session."""

    def __call__(
        self,
        store: SessionStore | TenantStore,
        session_id: str,
        *,
        context_length: int,
        system_prompt_tokens: int,
        overlay: str,
        config: CompactionConfig,
    ) -> ContextEngine:
        """Return an engine bound to `session_id` with this window and policy."""
        ...


EngineChoice = str | EngineFactory | ContextEngine
"""A registered name, a factory, or an engine already bound to the session."""


def _store_engine(
    store: SessionStore | TenantStore,
    session_id: str,
    *,
    context_length: int,
    system_prompt_tokens: int,
    overlay: str,
    config: CompactionConfig,
) -> ContextEngine:
    return StoreContextEngine(
        store,
        session_id,
        context_length=context_length,
        system_prompt_tokens=system_prompt_tokens,
        overlay=overlay,
        config=config,
        strategy=config.block_strategy,
    )


_ENGINES: dict[str, EngineFactory] = {DEFAULT_ENGINE: _store_engine}


def register_context_engine(name: str, factory: EngineFactory, *, replace: bool = False) -> None:
    """Make `name` select `factory` in `CompactionConfig(context_engine=name)` and `engine=`.

    Raises:
        ValueError: `name` is empty, or already registered and `replace` is False.
        TypeError: `factory` is not callable.
    """
    if not name:
        raise ValueError("a context engine needs a non-empty name")
    if not callable(factory):
        raise TypeError(f"a context engine factory must be callable, not {type(factory).__name__}")
    if name in _ENGINES and not replace:
        raise ValueError(
            f"a context engine named {name!r} is already registered; pass replace=True"
        )
    _ENGINES[name] = factory


def make_context_engine(
    choice: EngineChoice | None,
    store: SessionStore | TenantStore,
    session_id: str,
    *,
    context_length: int,
    system_prompt_tokens: int = 0,
    overlay: str = "default",
    config: CompactionConfig | dict[str, Any] | None = None,
) -> ContextEngine:
    """Return the engine `choice` stands for, bound to `session_id`.

    `choice` is an engine (returned as it is), a factory, a registered name, or None for
    the config's `context_engine` (`"store"` by default).

    Raises:
        ConfigurationError: no engine is registered under the name, or a bad config.
        TypeError: `choice` is none of these, or the factory returned no engine.
    """
    policy = config if isinstance(config, CompactionConfig) else CompactionConfig(**(config or {}))
    if isinstance(choice, ContextEngine):
        return choice
    if choice is None:
        choice = policy.context_engine
    if isinstance(choice, str):
        factory = _ENGINES.get(choice)
        if factory is None:
            known = ", ".join(repr(name) for name in sorted(_ENGINES))
            raise ConfigurationError(
                f"unknown context engine {choice!r}; known names: {known} "
                "(register others with register_context_engine)"
            )
    elif callable(choice):
        factory = choice
    else:
        raise TypeError(
            "an engine is a registered name, a factory or a ContextEngine, "
            f"not {type(choice).__name__}"
        )
    engine = factory(
        store,
        session_id,
        context_length=context_length,
        system_prompt_tokens=system_prompt_tokens,
        overlay=overlay,
        config=policy,
    )
    if not isinstance(engine, ContextEngine):
        raise TypeError(f"the engine factory returned a {type(engine).__name__}, not an engine")
    return engine
