"""Which registered model ``serve`` and ``predict`` take when the user names none, or names a
kind (``--model table``, ``--model image``).

A workdir's registry can hold a table model and an image model side by side (the README's tour
trains both). Each package's kind is what its evaluation report says (``evaluation.json``'s
``kind``, kept in the registry as the package's model-quality metrics), so nothing here loads
a model. ``predict`` knows what it is sent (``serving.files.kind_of``): each file goes to the
newest model of its kind. ``serve`` cannot know what clients will send: with one kind
registered it serves the newest model, with several it refuses in one line naming the
``--model`` to pass for each.
"""

from __future__ import annotations

from collections.abc import Sequence

from evaluation import report
from pipeline.errors import UserError
from pipeline.local.store.registry import ModelPackage

KINDS = (report.KIND_TABLE, report.KIND_IMAGE)
DESCRIBED = {report.KIND_TABLE: "table (CSV rows)", report.KIND_IMAGE: "image"}


def kind(package: ModelPackage) -> str | None:
    """The data kind the package's model takes, or None when its report does not say (a model
    registered by a pipeline of the user's own, with other metrics)."""
    value = (package.metrics or {}).get(report.KIND_JSON_PATH)
    return value if value in KINDS else None


def newest(packages: Sequence[ModelPackage]) -> ModelPackage:
    return max(packages, key=lambda p: (p.created, p.version))


def newest_by_kind(packages: Sequence[ModelPackage]) -> dict[str, ModelPackage]:
    return {k: newest(of) for k in KINDS if (of := [p for p in packages if kind(p) == k])}


def listing(by_kind: dict[str, ModelPackage]) -> str:
    """``--model table (digits/1) or --model image (digits/2)``."""
    return " or ".join(f"--model {k} ({p.group}/{p.version})" for k, p in by_kind.items())


def choose(packages: Sequence[ModelPackage], wanted: str | None, command: str) -> ModelPackage:
    """The newest package whose model takes ``wanted`` (a kind; None: whatever is sent)."""
    by_kind = newest_by_kind(packages)
    if wanted is None:
        if len(by_kind) > 1:
            raise UserError(
                f"the registry holds {' and '.join(DESCRIBED[k] for k in by_kind)} models; say which "
                f"one to {command}: {listing(by_kind)}")
        return newest(packages)
    if wanted in by_kind:
        return by_kind[wanted]
    if by_kind:  # kinds are known, and none is the one wanted
        raise UserError(f"no {DESCRIBED[wanted]} model is registered (the registry holds "
                        f"{' and '.join(DESCRIBED[k] for k in by_kind)} models: {listing(by_kind)}); "
                        f"train one on {wanted} data, or pass --model")
    return newest(packages)  # no package says its kind: the newest, as before kinds were kept
