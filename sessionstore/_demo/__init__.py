"""Synthetic coding-agent sessions: long, realistic, and the same every time for a seed.

A session is a list of loops; a loop is the work for one user request on a fictional
Python project (`ledgerline`, a small bookkeeping service). The demo, the benchmarks and
the tests use it to get histories of any length without a model.

- `_generator`: `generate_session` and `iter_session_messages`, and the shape of the
  sessions they make;
- `_loop`: the messages of one loop;
- `_codebase`: the fictional project, made once per seed (`_project`);
- `_words`: the vocabularies and templates, data only;
- `_draws`: cheap draws from a `random.Random`.
"""

from sessionstore._demo._codebase import _project as _project
from sessionstore._demo._generator import generate_session, iter_session_messages

__all__ = ["generate_session", "iter_session_messages"]
