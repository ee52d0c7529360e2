"""The fictional project a session works on (`ledgerline`), made once per seed.

`_project` writes its files (modules, their tests, docs), and indexes them for the tools:
directory listings, grep hits, a service log and `wc -l` sizes.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from sessionstore._demo._draws import _below, _choice, _int
from sessionstore._demo._words import (
    _CONDITIONS,
    _DOCS,
    _IMPORTS,
    _MODULES,
    _NOUNS,
    _PACKAGE,
    _RETURNS,
    _SENTENCES,
    _STATEMENTS,
    _STATUSES,
    _VERBS,
)


@dataclass(frozen=True, slots=True)
class _File:
    path: str
    lines: tuple[str, ...]
    numbered: tuple[str, ...]
    """`lines` as `cat -n` prints them, made once so that reads only join."""
    defs: dict[str, tuple[int, int]]
    """Function or test name → its `[start, end)` line indices."""
    names: tuple[str, ...]
    """The keys of `defs`, for `random.choice`."""
    text: str
    """`numbered` joined: what reading the whole file returns."""


@dataclass(frozen=True, slots=True)
class _Project:
    modules: tuple[_File, ...]
    tests: tuple[_File, ...]
    """The test file of each module, at the same index."""
    docs: tuple[_File, ...]
    files: dict[str, _File]
    listing: dict[str, tuple[str, ...]]
    """Directory → its entries, subdirectories with a trailing slash."""
    hits: dict[str, tuple[str, ...]]
    """Identifier → its grep hits, `path:line:text`."""
    words: tuple[str, ...]
    """The keys of `hits`, for `random.choice`."""
    directories: tuple[str, ...]
    """The keys of `listing`, for `random.choice`."""
    log: tuple[str, ...]
    """The service's log; log tails are windows of it, made once because they are long."""
    sizes: str
    """`wc -l` of the modules."""


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


def _numbered(lines: Sequence[str], first: int = 1) -> tuple[str, ...]:
    return tuple(f"{i:>6}\t{line}" for i, line in enumerate(lines, first))


def _file(path: str, lines: Sequence[str], defs: dict[str, tuple[int, int]]) -> _File:
    numbered = _numbered(lines)
    return _File(path, tuple(lines), numbered, defs, tuple(defs), "\n".join(numbered))


def _statement_lines(rng: random.Random, noun: str, indent: str) -> list[str]:
    text = _choice(rng, _STATEMENTS).format(
        n=noun,
        N=_camel(noun),
        v=_choice(rng, _VERBS).capitalize(),
        f=f"{_choice(rng, _VERBS)}_{noun}",
        s=_choice(rng, _STATUSES),
    )
    return [indent + line for line in text.split("\n")]


def _python_module(rng: random.Random, path: str) -> tuple[list[str], dict[str, tuple[int, int]]]:
    nouns = rng.sample(_NOUNS, 3)
    target = int(rng.triangular(40, 450, 150))
    module = path.removesuffix(".py").replace("/", ".")
    verbs = ", ".join(_choice(rng, _VERBS) for _ in range(3))
    lines = [
        f'"""{_camel(nouns[0])} handling for {_PACKAGE}.{module}: {verbs} {nouns[0]}s."""',
        "",
        "from __future__ import annotations",
        "",
        *sorted(rng.sample(_IMPORTS, _int(rng, 3, 7))),
        "",
        f"from {_PACKAGE}.db.models import {', '.join(sorted(_camel(n) for n in nouns))}",
        f"from {_PACKAGE}.money import CENTS",
        "",
        "logger = logging.getLogger(__name__)",
        "",
        f"MAX_BATCH = {_choice(rng, (100, 250, 500, 1000))}",
        "",
        "",
        f"class {_camel(nouns[0])}Error(Exception):",
        f'    """Raised when a {nouns[0]} cannot be processed."""',
    ]
    defs: dict[str, tuple[int, int]] = {}
    while len(lines) < target:
        noun = _choice(rng, nouns)
        verb = _choice(rng, _VERBS)
        name = f"{verb}_{noun}s" if rng.random() < 0.4 else f"{verb}_{noun}"
        if name in defs:
            name = f"{name}_{len(defs)}"
        lines += ["", ""]
        start = len(lines)
        lines += [
            f"def {name}(account_id: int, *, db: Session, strict: bool = False) -> Any:",
            f'    """{verb.capitalize()} the {noun.replace("_", " ")}s of one account."""',
        ]
        for _ in range(_int(rng, 2, 9)):
            lines += _statement_lines(rng, noun, "    ")
        lines.append("    " + _choice(rng, _RETURNS).format(n=noun, N=_camel(noun)))
        defs[name] = (start, len(lines))
    return lines, defs


def _test_module(
    rng: random.Random, module: str, functions: Sequence[str]
) -> tuple[list[str], dict[str, tuple[int, int]]]:
    imported = sorted(rng.sample(list(functions), min(len(functions), 4)))
    lines = [
        f'"""Tests for {_PACKAGE}.{module}."""',
        "",
        "from decimal import Decimal",
        "",
        "import pytest",
        "",
        f"from {_PACKAGE}.{module} import {', '.join(imported)}",
        "from tests.factories import make_account, make_entry",
    ]
    defs: dict[str, tuple[int, int]] = {}
    for _ in range(_int(rng, 6, 40)):
        function = _choice(rng, imported)
        name = f"test_{function}_{_choice(rng, _CONDITIONS)}"
        if name in defs:
            name = f"{name}_{len(defs)}"
        amount = f"{_int(rng, 1, 9999)}.{_int(rng, 0, 99):02d}"
        status = _choice(rng, _STATUSES)
        lines += ["", ""]
        start = len(lines)
        if rng.random() < 0.3:
            third = _choice(rng, ("GBP", "CHF", "JPY"))
            lines.append(f'@pytest.mark.parametrize("currency", ["EUR", "USD", "{third}"])')
        lines += [
            f"def {name}(db, currency):",
            f'    account = make_account(db, currency=currency, balance=Decimal("{amount}"))',
            f'    make_entry(db, account=account, amount=Decimal("-{amount}"), status="{status}")',
            "",
            f"    result = {function}(account.id, db=db, strict={_choice(rng, ('True', 'False'))})",
            "",
        ]
        for _ in range(_int(rng, 1, 4)):
            lines += (
                _choice(
                    rng,
                    (
                        f'    assert result.total == Decimal("{amount}")',
                        "    assert result.count == 1",
                        "    assert result == []",
                        f'    assert [e.status for e in result] == ["{_choice(rng, _STATUSES)}"]',
                        "    with pytest.raises(ValueError):\n"
                        f"        {function}(account.id, db=db, strict=True)",
                    ),
                )
            ).split("\n")
        defs[name] = (start, len(lines))
    return lines, defs


def _document(rng: random.Random, path: str) -> list[str]:
    title = path.rsplit("/", 1)[-1].removesuffix(".md").replace("_", " ").capitalize()
    lines = [f"# {title}", ""]
    for _ in range(_int(rng, 3, 12)):
        noun = _choice(rng, _NOUNS)
        lines += [f"## {_choice(rng, _VERBS).capitalize()} {noun.replace('_', ' ')}s", ""]
        sentences = [_choice(rng, _SENTENCES).format(n=noun) for _ in range(_int(rng, 2, 6))]
        lines += [" ".join(sentences), ""]
        if rng.random() < 0.5:
            lines += [
                "```console",
                f"$ {_PACKAGE} {_choice(rng, _VERBS)} {noun}s --account {_int(rng, 1000, 9999)}",
                f"{_int(rng, 1, 400)} {noun}s, total {_int(rng, 10, 99999)} EUR",
                "```",
                "",
            ]
    return lines


def _log(rng: random.Random, count: int) -> list[str]:
    millisecond = _below(rng, 86_400_000)
    lines = []
    for _ in range(count):
        millisecond += _int(rng, 0, 12_000)
        second = millisecond // 1000
        module = _choice(rng, _MODULES).removesuffix(".py").replace("/", ".")
        noun = _choice(rng, _NOUNS)
        level, event = _choice(
            rng,
            (
                ("INFO", f"{_choice(rng, _VERBS)} {_int(rng, 1, 500)} {noun}s"),
                ("INFO", f"request finished status=200 duration_ms={_int(rng, 3, 900)}"),
                ("DEBUG", f"cache miss key={noun}:{_int(rng, 1000, 99999)}"),
                ("WARNING", f"slow query duration_ms={_int(rng, 1000, 40000)} on {noun}s"),
                ("ERROR", f"failed to {_choice(rng, _VERBS)} {noun} id={_int(rng, 1, 10**6)}"),
            ),
        )
        day, clock = divmod(second, 86_400)
        hh, mm, ss = clock // 3600, clock // 60 % 60, clock % 60
        lines.append(
            f"2025-03-{14 + day:02d}T{hh:02d}:{mm:02d}:{ss:02d}.{millisecond % 1000:03d}Z "
            f"{level:<7} {_PACKAGE}.{module} {event}"
        )
    return lines


@lru_cache(maxsize=4)
def _project(seed: int) -> _Project:
    """Return the fictional project of a seed: its files, listings, grep index and log."""
    rng = random.Random(f"sessionstore._demo:{seed}:project")
    modules: list[_File] = []
    tests: list[_File] = []
    for path in _MODULES:
        lines, defs = _python_module(rng, path)
        full = f"src/{_PACKAGE}/{path}"
        modules.append(_file(full, lines, defs))
        module = path.removesuffix(".py").replace("/", ".")
        stem = path.rsplit("/", 1)[-1].removesuffix(".py")
        lines, defs = _test_module(rng, module, list(defs))
        tests.append(_file(f"tests/test_{stem}.py", lines, defs))
    docs = [_file(path, _document(rng, path), {}) for path in _DOCS]
    files = {file.path: file for file in (*modules, *tests, *docs)}
    children: dict[str, set[str]] = {}
    for path in [*files, "pyproject.toml", "tests/conftest.py", "tests/factories.py"]:
        parts = path.split("/")
        for depth in range(len(parts)):
            parent = "/".join(parts[:depth]) or "."
            is_dir = depth < len(parts) - 1
            children.setdefault(parent, set()).add(parts[depth] + ("/" if is_dir else ""))
    for directory in list(children):
        if directory.startswith(f"src/{_PACKAGE}"):
            children[directory].add("__init__.py")
    listing = {directory: tuple(sorted(entries)) for directory, entries in children.items()}
    found: dict[str, list[str]] = {}
    wanted = {name for file in files.values() for name in file.defs}
    wanted.update(_camel(noun) for noun in _NOUNS)
    wanted.update(("MAX_BATCH", "CENTS", "strict", "currency"))
    for file in files.values():
        for number, line in enumerate(file.lines, 1):
            for word in set(re.findall(r"\w+", line)) & wanted:
                found.setdefault(word, []).append(f"{file.path}:{number}:{line}")
    # Sorted, because set order changes with PYTHONHASHSEED and `words` is drawn from.
    hits = {word: tuple(found[word]) for word in sorted(found)}
    total = sum(len(file.lines) for file in modules)
    return _Project(
        tuple(modules),
        tuple(tests),
        tuple(docs),
        files,
        listing,
        hits,
        tuple(hits),
        tuple(listing),
        tuple(_log(rng, 4_000)),
        "\n".join([*(f"{len(f.lines):>6} {f.path}" for f in modules), f"{total:>6} total"]),
    )
