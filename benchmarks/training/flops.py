"""FLOPs per training sample, counted from a Keras model's graph: the numerator of model FLOP
utilisation (MFU = FLOPs per sample x samples/s / the machine's achievable FLOP/s, the last
from ``matmul_probe.py``).

How it counts:
- *forward*: each top-level layer is traced at batch 1 (``training=False``) into a graph with
  its weights folded to constants, and TensorFlow's profiler sums the float operations its ops
  register (MatMul 2mnk, Conv2D 2 x output pixels x kh x kw x in x out, BiasAdd/Add/Mul one per
  element, ...). Data movement (pooling windows, reshapes, casts) counts as nothing, as in
  every MFU figure.
- *backward*: 2 x the forward FLOPs of every layer the gradient passes through, i.e. every
  layer from the first one holding trainable weights to the output: one product for the
  gradient with respect to the layer's input and one for its weights, each the size of the
  forward product (the rule behind "6N FLOPs per token" for a dense network: 2N forward, 4N
  backward). Layers before the first trainable one (the input normalisation; a frozen
  backbone while the head trains) are run forward only, so a head-training MobileNetV2
  counts its backbone once, not three times. It slightly over-counts the first trainable
  layer (nobody needs the gradient of the input) and ignores the optimizer's per-weight
  update (a few FLOPs per parameter per step, divided by the batch).

    .venv/bin/python -m benchmarks.training.flops --architecture small_cnn --image-size 32
    {"forward": ..., "training": ..., "parameters": ...}

Needs TensorFlow; the benchmarks' drivers call it in a subprocess (``count``) so they stay
TensorFlow-free.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class FlopCount:
    """Per sample: forward FLOPs, forward + backward FLOPs of one training step."""

    forward: int
    training: int
    parameters: int  # trainable ones


def graph_flops(function, *specs) -> int:
    """Float operations of ``function`` traced on ``specs`` (variables folded to constants)."""
    import tensorflow as tf
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    concrete = tf.function(function).get_concrete_function(*specs)
    graph = convert_variables_to_constants_v2(concrete).graph
    builder = tf.compat.v1.profiler.ProfileOptionBuilder
    options = builder(builder.float_operation()).with_empty_output().build()
    info = tf.compat.v1.profiler.profile(graph=graph, run_meta=tf.compat.v1.RunMetadata(),
                                         cmd="op", options=options)
    return int(info.total_float_ops) if info is not None else 0


def _batch_one_spec(keras_input):
    import tensorflow as tf

    return tf.nest.map_structure(lambda t: tf.TensorSpec([1, *t.shape[1:]], t.dtype), keras_input)


def layer_flops(model) -> list[tuple[object, int]]:
    """(layer, forward FLOPs per sample) for each top-level layer of a functional model."""
    import tensorflow as tf

    out = []
    for layer in model.layers:
        if isinstance(layer, tf.keras.layers.InputLayer):
            continue
        spec = _batch_one_spec(layer.input)
        out.append((layer, graph_flops(lambda x, layer=layer: layer(x, training=False), spec)))
    return out


def count(model) -> FlopCount:
    """FLOPs per training sample of ``model`` as it will train now (its trainable flags)."""
    per_layer = layer_flops(model)
    forward = sum(flops for _, flops in per_layer)
    trainable = [bool(layer.trainable_weights) for layer, _ in per_layer]
    first = trainable.index(True) if True in trainable else len(per_layer)
    backward = 2 * sum(flops for _, flops in per_layer[first:])
    parameters = sum(int(w.shape.num_elements()) for w in model.trainable_weights)
    return FlopCount(forward, forward + backward, parameters)


def build(architecture: str, image_size: int | None, head_only: bool) -> object:
    """The entrypoint's model for the digits (64 features or images, 10 classes), frozen the
    way the head-training phase freezes it when ``head_only``."""
    from training_entry.model import architectures, transfer

    if architecture == "mlp":
        model = architectures.build("mlp", num_classes=10, num_features=64,
                                    feature_mean=[0.0] * 64, feature_std=[1.0] * 64)
    else:
        model = architectures.build(architecture, num_classes=10, image_size=image_size)
    if head_only:
        transfer.set_trainable(model, transfer.Phase(transfer.HEAD, 0, 1, 1.0), 0)
    return model


def count_in_subprocess(architecture: str, image_size: int | None = None, head_only: bool = False) -> FlopCount:
    """``count`` of ``build(...)`` in a fresh interpreter (the caller need not import TF)."""
    argv = [sys.executable, "-m", "benchmarks.training.flops", "--architecture", architecture]
    if image_size:
        argv += ["--image-size", str(image_size)]
    if head_only:
        argv.append("--head-only")
    env = {"PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "2", "PATH": "/usr/bin:/bin"}
    out = subprocess.run(argv, capture_output=True, text=True, cwd=REPO, env=env, check=True).stdout
    return FlopCount(**json.loads(out.strip().splitlines()[-1]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="benchmarks.training.flops", description=__doc__.split("\n")[0])
    parser.add_argument("--architecture", default="mlp", help="mlp, small_cnn, mobilenet_v2, ...")
    parser.add_argument("--image-size", type=int, default=None)
    parser.add_argument("--head-only", action="store_true", help="backbone frozen (head-training phase)")
    args = parser.parse_args(argv)
    counted = count(build(args.architecture, args.image_size, args.head_only))
    print(json.dumps(asdict(counted)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
