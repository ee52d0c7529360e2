"""The live context engine (seed 001's `ContextEngine`), on a stored session.

- `_gate`: the pure gates (`GatePolicy`, `budget_limit`, `threshold_tokens`,
  `should_compress`, the cooldown and anti-thrashing state).
- `_contract`: the `ContextEngine` protocol and the values it returns.
- `_store_engine`: `StoreContextEngine`, the default implementation.
"""

from sessionstore._engine._contract import CompressionOutcome, ContextEngine, EngineStatus
from sessionstore._engine._gate import (
    GatePolicy,
    budget_limit,
    should_compress,
    threshold_tokens,
)
from sessionstore._engine._store_engine import StoreContextEngine

__all__ = [
    "CompressionOutcome",
    "ContextEngine",
    "EngineStatus",
    "GatePolicy",
    "StoreContextEngine",
    "budget_limit",
    "should_compress",
    "threshold_tokens",
]
