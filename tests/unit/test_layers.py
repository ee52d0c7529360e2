"""Pure modules never import the database or CLI libraries (the design's layer rule)."""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "sessionstore"
PURE = [
    "formats/jsonl.py",
    "formats/text.py",
    "formats/_messages.py",
    "models.py",
    "tokens.py",
    "turns.py",
    "errors.py",
    "formats/openai.py",
    "formats/anthropic.py",
    "formats/__init__.py",
    "config.py",
    "overlay.py",
    "summarizers.py",
    "synthetic.py",
    "strategies/__init__.py",
    "strategies/block.py",
    "strategies/default.py",
    "strategies/legacy.py",
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
    "sessionstore.tables",
    "sessionstore.engine",
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
        if path.name in {"cli.py", "__main__.py"}:
            continue
        assert "sessionstore.cli" not in _imports(path), path
