"""Pure modules never import the database or CLI libraries (the design's layer rule)."""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "sessionstore"
PURE = [
    "formats/_jsonl.py",
    "formats/_text.py",
    "formats/_messages.py",
    "models.py",
    "_tokens.py",
    "_tracker.py",
    "_turns.py",
    "errors.py",
    "formats/_openai.py",
    "formats/_anthropic.py",
    "formats/__init__.py",
    "config.py",
    "_overlay.py",
    "summarizers/__init__.py",
    "summarizers/_oneline.py",
    "_demo/__init__.py",
    "strategies/__init__.py",
    "strategies/_block.py",
    "strategies/_default.py",
    "strategies/_legacy.py",
]
FORBIDDEN = (
    "sqlalchemy",
    "alembic",
    "click",
    "rich",
    "asyncpg",
    "aiosqlite",
    "sessionstore.store",
    "sessionstore.cli",
    "sessionstore.store._tables",
    "sessionstore.store._engine",
)


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


@pytest.mark.parametrize("module", PURE)
def test_pure_module_imports_no_io_library(module: str) -> None:
    imported = _imports(PACKAGE / module)
    bad = {name for name in imported if name.startswith(FORBIDDEN)}
    assert not bad, f"{module} imports {bad}"


def test_nothing_imports_the_cli() -> None:
    for path in PACKAGE.rglob("*.py"):
        if "cli" in path.parts or path.name == "__main__.py":
            continue
        assert "sessionstore.cli" not in _imports(path), path
