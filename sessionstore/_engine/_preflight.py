"""Seed 001's pre-flight step on a stored session: measure the context, compact if due, build.

The SDK adapters call `build_with_engine` before they hand a model its history: the context
is built once, measured as the engine's gate measures it (`context_pressure`), and only when
the gate fires is it compacted and built again.
"""

from __future__ import annotations

from typing import Any

from sessionstore._context import build_context
from sessionstore._engine._contract import ContextEngine
from sessionstore._engine._store_engine import StoreContextEngine
from sessionstore._items import BuiltContext
from sessionstore.config import CompactionConfig
from sessionstore.models import RecordCache
from sessionstore.store import SessionStore, TenantStore

__all__ = ["build_with_engine", "context_pressure"]


def context_pressure(context: BuiltContext, system_prompt_tokens: int) -> int:
    """Return the prompt tokens a context asks for, as an engine's gate compares them.

    What it loads, the system prompt, and the loop its budget had to leave out with no
    digest standing for it (the chain does not fit).
    """
    return context.loaded_tokens + context.left_out_tokens + system_prompt_tokens


async def build_with_engine(
    store: SessionStore | TenantStore,
    session_id: str,
    engine: ContextEngine | None,
    *,
    max_context_tokens: int,
    system_prompt_tokens: int = 0,
    overlay: str = "default",
    config: CompactionConfig | dict[str, Any] | None = None,
    records: RecordCache | None = None,
) -> BuiltContext:
    """Build the context; first compact with `engine` when its gate says the context is due.

    The gate is the engine's (`should_compress` on `context_pressure`): its threshold,
    cooldown and anti-thrashing; a context with nothing to fold
    (`has_content_to_compress`) is not compacted. When the context leaves loops out with
    no session digest standing for them and was not compacted, the store's engine folds
    them into the digest (`StoreContextEngine.fold_left_out`: no block, and not held back
    by anti-thrashing), so no run of the session vanishes from the context. With `engine`
    None, the context is built as it is (and still trimmed to fit). A compaction that
    fails or is skipped leaves the context as built. `records`: see `build_context`.
    """

    async def build() -> BuiltContext:
        return await build_context(
            store,
            session_id,
            max_context_tokens=max_context_tokens,
            system_prompt_tokens=system_prompt_tokens,
            overlay=overlay,
            config=config,
            new_overlay=True,  # the overlay the engine compacts into may have no block yet
            records=records,
        )

    context = await build()
    if engine is None:
        return context
    # Nothing to fold is no reason to try: a no-op would count against anti-thrashing.
    if (
        engine.should_compress(context_pressure(context, system_prompt_tokens))
        and await engine.has_content_to_compress()
    ):
        outcome = await engine.compress()
        if outcome.status == "compacted":
            return await build()
    if context.left_out_tokens > 0 and isinstance(engine, StoreContextEngine):
        # Loops the budget left out with no digest standing for them would vanish from
        # the context: fold them into the session digest, whatever anti-thrashing says.
        outcome = await engine.fold_left_out()
        if outcome.status == "compacted":
            return await build()
    return context
