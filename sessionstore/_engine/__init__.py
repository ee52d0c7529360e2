"""The live context engine (seed 001's `ContextEngine`), on a stored session.

- `_gate`: the pure gates (`GatePolicy`, `budget_limit`, `threshold_tokens`,
  `should_compress`, the cooldown and anti-thrashing state).
- `_contract`: the `ContextEngine` protocol and the values it returns.
- `_store_engine`: `StoreContextEngine`, the default implementation.
- `_registry`: engines by name (`register_context_engine`, `make_context_engine`).
"""

from sessionstore._engine._contract import CompressionOutcome, ContextEngine, EngineStatus
from sessionstore._engine._gate import (
    GatePolicy,
    budget_limit,
    should_compress,
    threshold_tokens,
)
from sessionstore._engine._registry import (
    DEFAULT_ENGINE,
    EngineChoice,
    EngineFactory,
    make_context_engine,
    register_context_engine,
)
from sessionstore._engine._store_engine import StoreContextEngine

__all__ = [
    "DEFAULT_ENGINE",
    "CompressionOutcome",
    "ContextEngine",
    "EngineChoice",
    "EngineFactory",
    "EngineStatus",
    "GatePolicy",
    "StoreContextEngine",
    "budget_limit",
    "make_context_engine",
    "register_context_engine",
    "should_compress",
    "threshold_tokens",
]
