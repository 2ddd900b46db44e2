"""Which registered model ``serve`` and ``predict`` take when the user names none, or names a
kind (``--model table``, ``--model image``).

Of the packages that fit, the best: an Approved version first (as ``deploy`` takes the
Approved one), then the highest registered accuracy (the evaluation report's
``metrics.accuracy.value``, the metric the pipeline's gate reads), then the newest. So a plain run
after a tuned one does not replace the tuned model with a worse one. ``choose`` says in one line
why it took the one it took.

A workdir's registry can hold a table model and an image model side by side (the README's tour
trains both). Each package's kind is what its evaluation report says (``evaluation.json``'s
``kind``, kept in the registry as the package's model-quality metrics), so nothing here loads
a model. ``predict`` knows what it is sent (``serving.files.kind_of``): each file goes to the
best model of its kind. ``serve`` cannot know what clients will send: with one kind
registered it serves the best model, with several it refuses in one line naming the
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


APPROVED = "Approved"


def accuracy(package: ModelPackage) -> float | None:
    """The accuracy its evaluation report registered (None: the report has none)."""
    try:
        value = report.read_json_path(package.metrics or {}, report.ACCURACY_JSON_PATH)
    except KeyError:
        return None
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _rank(package: ModelPackage) -> tuple:
    score = accuracy(package)
    return (package.approval_status == APPROVED, score is not None, score or 0.0, package.created, package.version)


def best(packages: Sequence[ModelPackage]) -> ModelPackage:
    """Approved first, then the highest accuracy, then the newest."""
    return max(packages, key=_rank)


def best_by_kind(packages: Sequence[ModelPackage]) -> dict[str, ModelPackage]:
    return {k: best(of) for k in KINDS if (of := [p for p in packages if kind(p) == k])}


def why(package: ModelPackage, candidates: Sequence[ModelPackage]) -> str:
    """The one line that says why ``package`` was taken of ``candidates``."""
    what = f"{len(candidates)} {DESCRIBED.get(kind(package) or '', 'registered').split(' ')[0]} model(s)"
    score = accuracy(package)
    approved = sum(p.approval_status == APPROVED for p in candidates)
    highest = "the highest accuracy" if score is not None else "the newest (no accuracy registered)"
    if package.approval_status != APPROVED:
        rule = f"none Approved, {highest} of {what}"
    elif approved == 1:
        rule = f"the one Approved of {what}"
    else:
        rule = f"{highest} of the {approved} Approved of {what}"
    shown = f", accuracy {score:.4g}" if score is not None else ""
    return (f"{package.group}/{package.version} ({package.approval_status}{shown}): {rule}; "
            f"--model N takes another (trainpipe models)")


def listing(by_kind: dict[str, ModelPackage]) -> str:
    """``--model table (digits/1) or --model image (digits/2)``: the version each would take."""
    return " or ".join(f"--model {k} ({p.group}/{p.version})" for k, p in by_kind.items())


def choose(packages: Sequence[ModelPackage], wanted: str | None, command: str) -> tuple[ModelPackage, str]:
    """The best package whose model takes ``wanted`` (a kind; None: whatever is sent), and why."""
    by_kind = best_by_kind(packages)
    if wanted is None:
        if len(by_kind) > 1:
            raise UserError(
                f"the registry holds {' and '.join(DESCRIBED[k] for k in by_kind)} models; say which "
                f"one to {command}: {listing(by_kind)}")
        return best(packages), why(best(packages), packages)
    if wanted in by_kind:
        of = [p for p in packages if kind(p) == wanted]
        return by_kind[wanted], why(by_kind[wanted], of)
    if by_kind:  # kinds are known, and none is the one wanted
        raise UserError(f"no {DESCRIBED[wanted]} model is registered (the registry holds "
                        f"{' and '.join(DESCRIBED[k] for k in by_kind)} models: {listing(by_kind)}); "
                        f"train one on {wanted} data, or pass --model")
    # No package says its kind (a pipeline of the user's own): the best of them all.
    return best(packages), why(best(packages), packages)
