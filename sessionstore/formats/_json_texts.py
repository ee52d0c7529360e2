"""Many stored JSON texts decoded in one parse (`decoded`): the kept texts of SDK items."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, cast

from pydantic_core import from_json

from sessionstore.models._batch import paused_gc

__all__ = ["decoded"]


def decoded(texts: Sequence[str]) -> list[Any]:
    """Decode many stored JSON texts in one parse, the cyclic GC paused meanwhile.

    Decoding builds many small containers, and the collector would scan them again and
    again as they pile up (more than half of the decode time for a long history); they
    hold no cycles, so it is paused (`paused_gc`, which also spares a big batch the pass
    after it). pydantic-core's parser builds
    the same values as `json.loads` in about a third of its time; it refuses a lone
    surrogate escape (an escaped half of a surrogate pair), which `json.loads` decodes, so
    that text is parsed again. The brackets go on the first and last text before the join,
    so the whole text is copied once, not three times (each copy of megabytes also pays
    the page faults of its fresh memory). Only the keys go through the parser's string
    cache: the values are mostly distinct texts, and looking them up cost a sixth to a
    fifth of the parse.

    Raises:
        ValueError: a text is not JSON (`json.loads`' error).
    """
    if not texts:
        return []
    parts = list(texts)
    parts[0] = "[" + parts[0]
    parts[-1] += "]"
    text = ",".join(parts)
    with paused_gc():
        try:
            return cast(list[Any], from_json(text, cache_strings="keys"))
        except ValueError:
            return cast(list[Any], json.loads(text))
