"""The public surface is exactly what `__all__` lists (after httpx's test of the same name)."""

import ast
from pathlib import Path

import pytest

import sessionstore
import sessionstore.errors

PUBLIC_MODULES = {
    "cli",
    "config",
    "errors",
    "formats",
    "formats/adk",
    "formats/pydantic_ai",
    "integrations",
    "integrations/adk",
    "integrations/openai_agents",
    "integrations/pydantic_ai",
    "migrate",
    "models",
    "recall",
    "recall/mcp",
    "recall/openai_agents",
    "recall/pydantic_ai",
    "store",
    "strategies",
    "summarizers",
    "testing",
}
"""The documented modules; every other module of the package is private (a leading underscore)."""


def _isort_key(name: str) -> tuple[int, str]:
    return (0 if name.isupper() else 1 if name[0].isupper() else 2, name)


def test_all_public_names_are_exported_and_sorted() -> None:
    for name in sessionstore.__all__:  # the names load on first use
        getattr(sessionstore, name)
    public = {
        name
        for name in vars(sessionstore)
        if not name.startswith("_") and name not in PUBLIC_MODULES
    }
    assert set(sessionstore.__all__) - {"__version__"} == public
    # Sorted as ruff's RUF022 sorts: constants, then classes, then functions.
    assert sessionstore.__all__ == sorted(sessionstore.__all__, key=_isort_key)


def test_every_module_but_the_documented_ones_is_private() -> None:
    package = Path(sessionstore.__file__).parent
    names = set()
    for path in package.rglob("*.py"):
        parts = path.relative_to(package).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if parts and not any(part.startswith("_") for part in parts):
            names.add("/".join(parts))
    assert names == PUBLIC_MODULES


def test_every_error_is_exported_and_drawn_in_the_tree() -> None:
    doc = sessionstore.errors.__doc__ or ""
    for name in sessionstore.errors.__all__:
        if not isinstance(getattr(sessionstore.errors, name), type):
            continue  # describe_validation_error, a helper
        assert name in sessionstore.__all__
        assert name in doc
        assert issubclass(getattr(sessionstore, name), sessionstore.SessionStoreError)


def test_the_lazy_table_matches_the_type_checking_imports() -> None:
    tree = ast.parse(Path(sessionstore.__file__).read_text())
    guarded = next(
        node
        for node in tree.body
        if isinstance(node, ast.If) and ast.unparse(node.test) == "_typing.TYPE_CHECKING"
    )
    imported = {
        node.module: tuple(alias.name for alias in node.names)
        for node in guarded.body
        if isinstance(node, ast.ImportFrom) and node.module is not None
    }

    assert imported == sessionstore._SOURCES
    assert sorted(name for names in imported.values() for name in names) == sorted(
        set(sessionstore.__all__) - {"__version__"}
    )


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_name"):
        sessionstore.no_such_name  # noqa: B018
