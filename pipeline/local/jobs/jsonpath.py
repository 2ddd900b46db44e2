"""The JSONPath subset a Transform job's ``InputFilter`` and ``OutputFilter`` take, as
SageMaker documents it ("Associate Prediction Results with Input Records"): ``$`` and then
any of ``.name``, ``['name']``, ``['a','b']`` (the named members, as an object), ``[i]``,
``[i,j,...]`` and ``[i:j]`` (negative indices count from the end; ranges and index lists
select into a list). A CSV record is filtered as the list of its fields.
"""

from __future__ import annotations

import re

from pipeline.errors import UserError

_NAME = re.compile(r"\.([A-Za-z_][A-Za-z0-9_\-]*)")
_BRACKET = re.compile(r"\[([^\]]*)\]")


class JsonPathError(UserError, ValueError):
    pass


def parse(path: str, what: str = "filter") -> list[tuple[str, object]]:
    """``path`` as a list of (kind, argument) steps; a path outside the subset is one line."""
    if not isinstance(path, str) or not path.startswith("$"):
        raise JsonPathError(f"{what} {path!r} must start with '$' (SageMaker's JSONPath subset)")
    steps, at = [], 1
    while at < len(path):
        name = _NAME.match(path, at)
        bracket = _BRACKET.match(path, at)
        if name:
            steps.append(("keys", [name.group(1)]))
            at = name.end()
        elif bracket:
            steps.append(_bracket(bracket.group(1).strip(), path, what))
            at = bracket.end()
        else:
            raise JsonPathError(f"{what} {path!r}: cannot read {path[at:]!r}; SageMaker's subset is $, .name, "
                                "['name'], ['a','b'], [i], [i,j], [i:j]")
    return steps


def _bracket(inner: str, path: str, what: str) -> tuple[str, object]:
    parts = [p.strip() for p in inner.split(",")]
    if all(len(p) >= 2 and p[0] == p[-1] and p[0] in "'\"" for p in parts):
        return ("keys", [p[1:-1] for p in parts])
    if len(parts) == 1 and ":" in parts[0]:
        start, _, stop = parts[0].partition(":")
        try:
            return ("slice", (int(start) if start.strip() else None, int(stop) if stop.strip() else None))
        except ValueError:
            pass
    else:
        try:
            return ("indices", [int(p) for p in parts])
        except ValueError:
            pass
    raise JsonPathError(f"{what} {path!r}: [{inner}] is not an index, index list, range or quoted names")


def apply(path: str, value, what: str = "filter"):
    """``value`` filtered by ``path``; a path that does not fit the value is one line."""
    for kind, argument in parse(path, what):
        value = _step(kind, argument, value, path, what)
    return value


def _step(kind: str, argument, value, path: str, what: str):
    if kind == "keys":
        if not isinstance(value, dict):
            raise JsonPathError(f"{what} {path!r} selects names from a record that is not a JSON object")
        missing = [k for k in argument if k not in value]
        if missing:
            raise JsonPathError(f"{what} {path!r}: the record has no {missing}; it has {sorted(value)[:10]}")
        return value[argument[0]] if len(argument) == 1 else {k: value[k] for k in argument}
    if not isinstance(value, list):
        raise JsonPathError(f"{what} {path!r} indexes a record that is not a list (a CSV row or a JSON array)")
    if kind == "slice":
        return value[slice(*argument)]
    try:
        picked = [value[i] for i in argument]
    except IndexError:
        raise JsonPathError(f"{what} {path!r}: the record has only {len(value)} fields") from None
    return picked[0] if len(argument) == 1 else picked
