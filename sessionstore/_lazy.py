"""Lazy re-exports (PEP 562) for a package whose `__init__` lists many names.

A package that re-exports names from its modules would import all of them on its first
import, so a command that needs one name pays for every module (the summarizers' HTTP
client, the provider formats, alembic). `lazy_exports` instead returns the module-level
`__getattr__` and `__dir__` that import a name's module on first use. The package keeps
its imports under `TYPE_CHECKING` for type checkers, and a table of where each name
lives for the interpreter:

>>> __getattr__, __dir__ = lazy_exports(__name__, globals(), {"._passes": ("microcompact",)})
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, namespace: dict[str, Any], sources: Mapping[str, tuple[str, ...]]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """Return `__getattr__` and `__dir__` for `package`, whose names live in `sources`.

    Args:
        package: The package's `__name__`.
        namespace: The package's `globals()`; a loaded name is stored there, so later
            lookups never reach `__getattr__` again.
        sources: Each module (absolute, or relative to `package` with a leading dot)
            and the names it provides.
    """
    module_of = {name: module for module, names in sources.items() for name in names}

    def __getattr__(name: str) -> Any:
        module = module_of.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, package), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *module_of})

    return __getattr__, __dir__
