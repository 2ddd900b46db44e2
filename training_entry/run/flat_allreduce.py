"""A small model's gradients averaged as one flat tensor: one Horovod allreduce per step.

``hvd.DistributedOptimizer`` gives Horovod one allreduce operation per gradient tensor.
Tensor fusion packs them into one buffer for the wire, but Horovod still enqueues,
negotiates, copies and calls back each operation: in ``benchmarks/advisor/advisor_probe.py`` the same
bytes as 8 tensors cost 10-30 us per extra tensor over 1 tensor. This concatenates a small,
dense, single-dtype gradient into one vector, reduces it with one ``hvd.allreduce`` (same
average, same compression) and splits it back; anything else (``IndexedSlices``, ``None``,
mixed dtypes, unknown shapes, over ``MAX_FLAT_BYTES``, where overlapping each tensor's
allreduce with the rest of the backward pass matters more) goes through Horovod's own
function, as does a job of one rank (Horovod skips the collective there).

Measured (``benchmarks/notes.md``, P1): with StepsPerExecution 16 the digits MLP's 2-rank
job ran 1.10x faster with it (139-144k against 122-128k samples/s). At one step per call
the gain was lost in Keras' dispatch noise, which is why it was first left out (stop 18).
``TRAINPIPE_FLAT_ALLREDUCE=0`` in the job's environment keeps Horovod's per-tensor path.

It reduces as the optimizer would: its ``op`` (element-wise ones: Average, Sum, Min, Max,
Product) and ``gradient_predivide_factor`` (as Horovod's pre/postscale factors), read from
Horovod's own gradient function. Where it cannot do the same (Adasum weighs each tensor by
itself, ``groups``, ``backward_passes_per_step`` > 1 whose helper calls Horovod's function
directly, a Horovod whose function does not show its options) it is not installed, and the
log says why, once. Gradients are matched by position, so at the first step the ranks compare
their gradients' layout (one allgather, outside the graph) and stop with one line if they
differ.

Python 3.10 syntax.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import horovod.tensorflow as hvd
import tensorflow as tf

from training_entry import failure
from training_entry.contract import FLAT_ALLREDUCE_ENV

# Above this many gradient bytes (1M float32 parameters) Horovod's per-tensor path is kept.
MAX_FLAT_BYTES = 4 * 1024 * 1024
# The attribute hvd.DistributedOptimizer (horovod/_keras, 0.28) calls with (grads, vars).
HOROVOD_HOOK = "_allreduce_grads"
# Reductions that act element by element: one joined vector reduces as its parts would.
ELEMENTWISE_OPS = {hvd.Average: "Average", hvd.Sum: "Sum", hvd.Min: "Min", hvd.Max: "Max",
                   hvd.Product: "Product"}
# What Horovod's gradient function (horovod/tensorflow/__init__.py, allreduce_grads) closes
# over: the options DistributedOptimizer was given, as its per-tensor allreduces use them.
HOOK_OPTIONS = ("compression", "op", "prescale_factor", "postscale_factor", "device_dense",
                "process_set", "groups")

AllreduceGrads = Callable[[Sequence, Sequence], list]


class GradientLayoutError(failure.UserError):
    """The ranks' gradients differ; the message names the first difference. (An Exception
    with its __init__: autograph re-raises it from the trace as this type, not StagingError.)"""


@dataclass(frozen=True)
class Reduction:
    """How the optimizer's allreduce treats each gradient (Horovod's defaults here)."""

    compression: object = hvd.Compression.none
    op: int = hvd.Average
    # Average: 1 / gradient_predivide_factor before the sum, the factor after (and 1/size).
    prescale_factor: float = 1.0
    postscale_factor: float = 1.0
    device_dense: str = ""
    process_set: object = field(default=hvd.global_process_set, compare=False)

    def is_default(self) -> bool:
        return self.op == hvd.Average and self.prescale_factor == self.postscale_factor == 1.0

    def describe(self) -> str:
        text = f"op={ELEMENTWISE_OPS.get(self.op, self.op)}"
        if self.op == hvd.Average:
            return f"{text}, gradient_predivide_factor={self.postscale_factor:g}"
        return f"{text}, prescale_factor={self.prescale_factor:g}, postscale_factor={self.postscale_factor:g}"

    def size(self) -> int:
        return hvd.size() if self.process_set is hvd.global_process_set else self.process_set.size()


def reduction_of(optimizer) -> tuple[Reduction | None, str]:
    """(the optimizer's reduction, "") or (None, why one flat allreduce cannot match it)."""
    helper = getattr(optimizer, "_agg_helper", None)
    if helper is not None:
        passes = getattr(helper, "backward_passes_per_step", "> 1")
        return None, (f"backward_passes_per_step={passes} (Horovod's aggregation helper calls its "
                      f"own per-tensor allreduce)")
    hook = getattr(optimizer, HOROVOD_HOOK, None)
    function = getattr(hook, "python_function", hook)  # Horovod wraps it in tf.function eagerly
    code, cells = getattr(function, "__code__", None), getattr(function, "__closure__", None) or ()
    try:
        options = {name: cell.cell_contents for name, cell in zip(code.co_freevars, cells, strict=True)}
    except (AttributeError, ValueError):  # not a closure, or an empty cell
        options = {}
    if not set(HOOK_OPTIONS) <= set(options):
        return None, "this Horovod's gradient function does not show its options (op, factors)"
    if options["groups"] is not None:
        return None, f"groups={options['groups']!r} (Horovod's grouped allreduce)"
    if options["op"] not in ELEMENTWISE_OPS:
        return None, "op=Adasum (it combines each tensor by its own norms, not element by element)"
    return Reduction(options["compression"], options["op"], float(options["prescale_factor"]),
                     float(options["postscale_factor"]), options["device_dense"],
                     options["process_set"]), ""


def flattenable(grads: Sequence, max_bytes: int = MAX_FLAT_BYTES) -> bool:
    """Dense tensors of one floating dtype, shapes known, at most ``max_bytes`` in all."""
    if len(grads) < 2 or not all(isinstance(g, tf.Tensor) for g in grads):
        return False  # None, IndexedSlices, or nothing to gain from one tensor
    dtypes = {g.dtype for g in grads}
    if len(dtypes) != 1 or not next(iter(dtypes)).is_floating:
        return False
    if not all(g.shape.is_fully_defined() for g in grads):
        return False
    return sum(g.shape.num_elements() * g.dtype.size for g in grads) <= max_bytes


def layout(grads: Sequence) -> list[str]:
    """Each gradient's kind, dtype and static shape: what matching by position relies on."""
    def one(g) -> str:
        if g is None:
            return "None"
        if isinstance(g, tf.IndexedSlices):
            return f"IndexedSlices {g.values.dtype.name}{g.values.shape.as_list()[1:]}"
        return f"{g.dtype.name}{g.shape.as_list() if g.shape.rank is not None else '[?]'}"
    return [one(g) for g in grads]


def compare_layouts(layouts: Sequence[list[str]]) -> None:
    """Raise GradientLayoutError naming the first rank and gradient that differ from rank 0."""
    first = layouts[0]
    for rank, other in enumerate(layouts[1:], start=1):
        if other == first:
            continue
        if len(other) != len(first):
            what = f"rank 0 has {len(first)} gradient tensors and rank {rank} has {len(other)}"
        else:
            i = next(i for i, (a, b) in enumerate(zip(first, other, strict=True)) if a != b)
            what = f"gradient {i} is {first[i]} on rank 0 and {other[i]} on rank {rank}"
        raise GradientLayoutError(
            f"the ranks' gradients differ ({what}): every rank must build the same model (the same "
            f"model file, hyperparameters and input shape)")


class FlatAllreduce:
    """Horovod's ``(grads, vars) -> grads`` function, one flat allreduce where ``flattenable``.

    ``operations``: the allreduce operations a step of several ranks issues (1 when
    flattened, else one per gradient), set when the step is traced, on one rank too; the
    metric line reports it as ``gradient_tensors`` for the scaling advisor."""

    def __init__(self, per_tensor: AllreduceGrads, reduction: Reduction, max_bytes: int = MAX_FLAT_BYTES):
        self.per_tensor = per_tensor
        self.reduction = reduction
        self.max_bytes = max_bytes
        self.operations: int | None = None
        self.checked = False  # the ranks' layouts compared (once: the first trace)

    def __call__(self, grads, variables):
        grads = list(grads)
        flat = flattenable(grads, self.max_bytes)
        self.operations = 1 if flat else sum(g is not None for g in grads)
        # Horovod: one rank reduces nothing; Horovod's function then skips the collective.
        if self.reduction.size() < 2:
            return self.per_tensor(grads, variables)
        if not self.checked:
            self.check_layout(grads)
        if not flat:
            return self.per_tensor(grads, variables)
        r = self.reduction
        sizes = [g.shape.num_elements() for g in grads]
        joined = tf.concat([tf.reshape(g, [-1]) for g in grads], axis=0)
        # Horovod: the optimizer's own op and factors, element-wise, so as its per-tensor path.
        reduced = hvd.allreduce(joined, op=r.op, prescale_factor=r.prescale_factor,
                                postscale_factor=r.postscale_factor, compression=r.compression,
                                device_dense=r.device_dense, process_set=r.process_set)
        return [tf.reshape(part, g.shape) for part, g in zip(tf.split(reduced, sizes), grads, strict=True)]

    def check_layout(self, grads) -> None:
        """Horovod: every rank traces its first step; there each gathers all ranks' layouts,
        outside the graph (init_scope), so no step after the first pays for it."""
        self.checked = True
        with tf.init_scope():
            layouts = hvd.allgather_object(layout(grads), name="trainpipe_gradient_layout",
                                           process_set=self.reduction.process_set)
        try:
            compare_layouts(layouts)
        except GradientLayoutError as error:
            # Autograph re-raises it with the trace's frames in its text: the failure file
            # and the last log line take this one-line original.
            failure.note_cause(error)
            raise


def enabled(env=None) -> bool:
    """On unless ``TRAINPIPE_FLAT_ALLREDUCE=0`` (to measure Horovod's per-tensor path)."""
    env = os.environ if env is None else env
    return env.get(FLAT_ALLREDUCE_ENV, "1").strip() != "0"


def _say(message: str) -> None:
    """The chief's one line (runtime.Log's form): every rank would repeat it."""
    try:
        chief = hvd.rank() == 0
    except ValueError:  # Horovod not initialised (a test)
        chief = True
    if chief:
        print(f"trainpipe: {message}", flush=True)


def install(optimizer, compression=None, max_bytes: int = MAX_FLAT_BYTES,
            log: Callable[[str], None] = _say) -> FlatAllreduce | None:
    """Route ``optimizer``'s (an ``hvd.DistributedOptimizer``) gradient reduction through
    ``FlatAllreduce``, reducing as the optimizer would. None (nothing changed, and the log
    says why unless this Horovod has no such hook) where one flat allreduce cannot match it.
    ``compression``, when given, must be the optimizer's own."""
    per_tensor = getattr(optimizer, HOROVOD_HOOK, None)
    if per_tensor is None:
        return None
    reduction, why = reduction_of(optimizer)
    if reduction is None:
        log(f"flat allreduce off: {why}; Horovod's per-tensor allreduce is used")
        return None
    if compression is not None and compression is not reduction.compression:
        raise ValueError(f"flat_allreduce.install: compression {compression!r} is not the "
                         f"optimizer's ({reduction.compression!r})")
    if not reduction.is_default():
        log(f"flat allreduce with the optimizer's {reduction.describe()}")
    reducer = FlatAllreduce(per_tensor, reduction, max_bytes)
    setattr(optimizer, HOROVOD_HOOK, reducer)
    return reducer
