"""The flat allreduce of a small model's gradients (training_entry/run/flat_allreduce.py).

    .venv/bin/python -m pytest tests/training_entry/run/test_flat_allreduce.py
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import horovod.tensorflow.keras as hvd
import numpy as np
import pytest
import tensorflow as tf

from pipeline.local.hosts import mpi
from training_entry.run import flat_allreduce as F

REPO = Path(__file__).resolve().parents[3]


def _grads():
    return [tf.reshape(tf.range(6, dtype=tf.float32), [3, 2]), tf.constant([10.0, 20.0])]


def test_only_small_dense_gradients_of_one_float_dtype_are_flattened():
    assert F.flattenable(_grads())
    assert not F.flattenable(_grads()[:1])  # one tensor: nothing to gain
    assert not F.flattenable([*_grads(), None])
    sparse = tf.IndexedSlices(tf.ones([1, 2]), tf.constant([0]), tf.constant([3, 2]))
    assert not F.flattenable([_grads()[0], sparse])
    assert not F.flattenable([_grads()[0], tf.constant([1.0], tf.float16)])
    assert not F.flattenable([tf.constant([1, 2]), tf.constant([3])])  # not floating
    assert not F.flattenable(_grads(), max_bytes=8 * 4 - 1)  # 8 float32 values = 32 bytes
    assert F.flattenable(_grads(), max_bytes=8 * 4)


def _two_ranks(monkeypatch, layouts=None):
    """hvd as two ranks: ``layouts`` is what the allgather of the layouts returns (the same
    on both by default); returns the list of objects gathered."""
    gathered = []
    monkeypatch.setattr(F.hvd, "size", lambda: 2)
    monkeypatch.setattr(F.hvd, "allgather_object", lambda obj, **kwargs: gathered.append(obj) or (
        layouts if layouts is not None else [obj, obj]))
    return gathered


def test_the_gradients_go_through_one_allreduce_and_come_back_in_their_shapes(monkeypatch):
    seen = []

    def fake_allreduce(tensor, **kwargs):
        seen.append((tensor.numpy().tolist(), kwargs["op"], kwargs["compression"],
                     kwargs["prescale_factor"], kwargs["postscale_factor"]))
        return tensor * 2  # stands for what the ranks' average came to

    monkeypatch.setattr(F.hvd, "allreduce", fake_allreduce)
    gathered = _two_ranks(monkeypatch)
    per_tensor = []
    fn = F.FlatAllreduce(lambda g, v: per_tensor.append(g) or g, F.Reduction(hvd.Compression.fp16))
    assert fn.operations is None  # not traced yet
    out = fn(_grads(), [None, None])
    assert fn.operations == 1
    assert seen == [([0, 1, 2, 3, 4, 5, 10, 20], F.hvd.Average, hvd.Compression.fp16, 1.0, 1.0)]
    assert [o.shape for o in out] == [(3, 2), (2,)]
    assert out[0].numpy().tolist() == [[0, 2], [4, 6], [8, 10]] and out[1].numpy().tolist() == [20, 40]
    assert per_tensor == []
    assert gathered == [["float32[3, 2]", "float32[2]"]]
    fn(_grads(), [None, None])
    assert len(gathered) == 1  # the layouts are compared once, at the first step
    monkeypatch.setattr(F.hvd, "size", lambda: 1)  # one rank: Horovod's function, which skips it
    assert fn(_grads(), [None, None]) == per_tensor[0] and len(seen) == 2
    assert fn.operations == 1  # what a multi-rank step of this model issues (the advisor's figure)


def test_anything_else_goes_through_horovods_own_function(monkeypatch):
    monkeypatch.setattr(F.hvd, "allreduce", lambda *a, **k: pytest.fail("flattened a sparse gradient"))
    gathered = _two_ranks(monkeypatch)
    per_tensor = []
    sparse = tf.IndexedSlices(tf.ones([1, 2]), tf.constant([0]), tf.constant([3, 2]))
    grads = [_grads()[0], sparse]
    fn = F.FlatAllreduce(lambda g, v: per_tensor.append(g) or g, F.Reduction())
    assert fn(grads, [None, None]) == grads and per_tensor == [grads]
    assert fn.operations == 2  # one per gradient tensor
    assert gathered == [["float32[3, 2]", "IndexedSlices float32[2]"]]  # checked on this path too


@pytest.mark.parametrize("other, message", [
    (["float32[3, 2]"], "rank 0 has 2 gradient tensors and rank 1 has 1"),
    # The same 8 values split otherwise: one flat allreduce would mix them up without a word.
    (["float32[2, 2]", "float32[4]"], r"gradient 0 is float32\[3, 2\] on rank 0 and float32\[2, 2\] on rank 1"),
])
def test_ranks_whose_gradients_differ_stop_at_the_first_step_with_one_line(monkeypatch, other, message):
    monkeypatch.setattr(F.hvd, "allreduce", lambda *a, **k: pytest.fail("reduced mismatched gradients"))
    _two_ranks(monkeypatch, layouts=[F.layout(_grads()), other])
    monkeypatch.setattr(F.failure, "_causes", [])
    fn = F.FlatAllreduce(lambda g, v: g, F.Reduction())
    with pytest.raises(F.GradientLayoutError, match=rf"^the ranks' gradients differ \({message}\): every rank "
                                                    r"must build the same model \(the same model file, "
                                                    r"hyperparameters and input shape\)$") as error:
        fn(_grads(), [None, None])
    # The failure file's reason, whatever autograph makes of the text (a UserError: no type name).
    assert F.failure.root_cause(Exception("rewritten")) is error.value
    assert F.failure.describe(error.value) == str(error.value)


def test_the_optimizers_op_and_predivide_factor_are_honoured_and_said_once(monkeypatch):
    seen, said = [], []
    monkeypatch.setattr(F.hvd, "allreduce", lambda tensor, **kwargs: seen.append(kwargs) or tensor)
    _two_ranks(monkeypatch)
    optimizer = hvd.DistributedOptimizer(tf.keras.optimizers.legacy.SGD(0.1), gradient_predivide_factor=4.0,
                                         compression=hvd.Compression.fp16)
    reducer = F.install(optimizer, hvd.Compression.fp16, log=said.append)
    assert said == ["flat allreduce with the optimizer's op=Average, gradient_predivide_factor=4"]
    reducer(_grads(), [None, None])
    assert (seen[0]["op"], seen[0]["prescale_factor"], seen[0]["postscale_factor"]) == (hvd.Average, 0.25, 4.0)
    assert seen[0]["compression"] is hvd.Compression.fp16
    said.clear()
    assert F.install(hvd.DistributedOptimizer(tf.keras.optimizers.legacy.SGD(0.1), op=hvd.Sum), log=said.append)
    assert said == ["flat allreduce with the optimizer's op=Sum, prescale_factor=1, postscale_factor=1"]
    said.clear()
    assert F.install(hvd.DistributedOptimizer(tf.keras.optimizers.legacy.SGD(0.1)), log=said.append)
    assert said == []  # the defaults: nothing to say


@pytest.mark.parametrize("options, why", [
    ({"backward_passes_per_step": 4}, r"backward_passes_per_step=4 \(Horovod's aggregation helper"),
    ({"groups": 2}, r"groups=2 \(Horovod's grouped allreduce\)"),
])
def test_what_one_flat_allreduce_cannot_match_keeps_horovods_path_and_says_why(options, why):
    """(Keras' DistributedOptimizer takes no op but Average and Sum, so Adasum cannot arrive.)"""
    said = []
    optimizer = hvd.DistributedOptimizer(tf.keras.optimizers.legacy.SGD(0.1), **options)
    original = getattr(optimizer, F.HOROVOD_HOOK)
    assert F.install(optimizer, log=said.append) is None
    assert getattr(optimizer, F.HOROVOD_HOOK) is original
    assert len(said) == 1 and re.match(rf"flat allreduce off: {why}.*; Horovod's per-tensor allreduce is used$",
                                       said[0])


def test_on_unless_its_variable_says_0():
    assert F.enabled({}) and F.enabled({F.FLAT_ALLREDUCE_ENV: "1"})
    assert not F.enabled({F.FLAT_ALLREDUCE_ENV: "0"})


def test_it_hooks_into_this_horovods_distributed_optimizer():
    # Guards the private hook: a Horovod without it would silently lose the single allreduce.
    optimizer = hvd.DistributedOptimizer(tf.keras.optimizers.legacy.SGD(0.1))
    original = getattr(optimizer, F.HOROVOD_HOOK)
    assert F.install(optimizer, hvd.Compression.none)
    assert getattr(optimizer, F.HOROVOD_HOOK) is not original
    assert not F.install(object(), hvd.Compression.none)


PROGRAM = textwrap.dedent("""
    import json
    import os
    import sys

    import horovod.tensorflow.keras as hvd
    import tensorflow as tf
    from training_entry.run import flat_allreduce as F

    hvd.init()
    r = float(hvd.rank())
    calls, traces = [], []
    allreduce = F.hvd.allreduce
    F.hvd.allreduce = lambda *args, **kwargs: calls.append(1) or allreduce(*args, **kwargs)
    optimizer = hvd.DistributedOptimizer(tf.keras.optimizers.legacy.SGD(1.0))
    assert F.install(optimizer, hvd.Compression.none)
    # "mismatch": rank 1 splits the same 8 values otherwise (a model built differently).
    mismatch = sys.argv[2] == "mismatch" and hvd.rank() == 1
    a = tf.Variable(tf.zeros([2, 2] if mismatch else [3, 2]))
    b = tf.Variable(tf.zeros([4] if mismatch else [2]))

    @tf.function
    def step():
        traces.append(1)  # Python runs at tracing only (twice: the optimizer creates variables)
        # Rank r's gradients: (r + 1) for a, 10 (r + 1) for b.
        optimizer.minimize(lambda: (r + 1) * tf.reduce_sum(a) + 10 * (r + 1) * tf.reduce_sum(b), [a, b])

    try:
        step()
    except F.GradientLayoutError as error:  # re-raised by autograph, its text grown
        from training_entry import failure

        with open(os.path.join(sys.argv[1], f"rank{hvd.rank()}.json"), "w") as f:
            f.write(json.dumps([type(error).__name__, failure.describe(failure.root_cause(error))]))
        sys.exit(0)
    # SGD(1.0) from zero: the weights are minus the gradients' average over both ranks. Each
    # rank writes its own file: a line on stdout can be lost in mpirun's forwarding when
    # both ranks exit at once (seen once in CI: one RESULT line of two).
    result = json.dumps([len(calls) / len(traces), a.numpy().tolist(), b.numpy().tolist()])
    with open(os.path.join(sys.argv[1], f"rank{hvd.rank()}.json"), "w") as f:
        f.write(result)
""")


def _two_ranks_run(tmp_path, mode: str) -> list[str]:
    script = tmp_path / "flat.py"
    script.write_text(PROGRAM)
    out = subprocess.run(
        [mpi.mpirun_path(), "--allow-run-as-root", "--oversubscribe", "-np", "2", "-x", "PYTHONPATH",
         sys.executable, str(script), str(tmp_path), mode],
        cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "2"},
        capture_output=True, text=True, timeout=240,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return [(tmp_path / f"rank{rank}.json").read_text() for rank in (0, 1)]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("mpirun") is None, reason="needs Open MPI's mpirun")
def test_two_ranks_get_the_average_of_their_gradients(tmp_path):
    results = _two_ranks_run(tmp_path, "same")
    assert results[0] == results[1]  # both ranks hold the same weights
    calls, a, b = json.loads(results[0])
    assert calls == 1  # per traced step: both tensors in one allreduce
    assert np.allclose(a, -1.5) and np.allclose(b, -15.0)  # average of 1 and 2, of 10 and 20


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("mpirun") is None, reason="needs Open MPI's mpirun")
def test_two_ranks_with_gradients_split_otherwise_both_stop_with_the_same_line(tmp_path):
    results = [json.loads(r) for r in _two_ranks_run(tmp_path, "mismatch")]
    assert results[0] == results[1] == ["GradientLayoutError",
        "the ranks' gradients differ (gradient 0 is float32[3, 2] on rank 0 and float32[2, 2] on rank 1): "
        "every rank must build the same model (the same model file, hyperparameters and input shape)"]
