"""PyTorch DDP over gloo vs Horovod over MPI (issue 45): the same small CNN, the same data, the
same 2-rank layout (1 host x 2 ranks), images/s.

Both jobs are the rooms' own entrypoints on the processing step's shards of the bundled digits
as a PNG tree (``harness.preprocess_images``: 1,797 images, 32x32, 2 shards per split,
ShardedByS3Key so each rank reads one):

- ``ddp``: ``training_torch/train.py --strategy ddp`` under torchrun (``--nproc_per_node 2``,
  gloo), launched as ``zero_state`` launches it; torchrun gives each worker
  ``OMP_NUM_THREADS=1`` (as the local runner's torchrun jobs get);
- ``horovod``: ``training_entry/train.py`` under mpirun with the local runner's launch defaults
  (``harness.tuned``: threads per rank, MPI yielding, pinning), ``harness.training_job``.

The same ``ModelArchitecture=small_cnn``, ``ImageSize=32``, per-rank batch ``--batch`` (32),
``--epochs``, base learning rate 0.001 with 1 warm-up epoch, Adam, seed. The two networks have
the same shape: 3x3 convolutions of 32, 64 and 128 filters, ``same`` padding, ReLU, 2x2
max-pooling after each, global average pooling, dropout 0.2, a dense layer to the 10 classes
(``training_entry/model/architectures.small_cnn``, ``training_torch/networks.small_cnn``:
the same parameter count). Where they differ:

- layout and output: Keras is NHWC and ends in a softmax with sparse categorical cross-entropy
  on probabilities; PyTorch permutes the HWC pixels to NCHW inside the model and computes
  cross-entropy on logits; both start as Keras does (Glorot-uniform, zero biases:
  ``networks.keras_init``);
- input: the PyTorch room decodes every PNG once, before training, into a tensor and slices
  batches from it; the TensorFlow room decodes in tf.data every epoch. Both rooms' augmentation
  is set to ``none`` here, so the only per-record work left is the TensorFlow room's decode;
- the step: Keras runs ``steps_per_execution`` (the room's default, 16) steps per call of a
  compiled graph, Horovod allreduces in its background thread (fusion, cycle time); PyTorch
  runs eager, one step per Python iteration, DDP's buckets allreduced over gloo during backward.

Each job's rate is the rank-0 metric line's ``throughput`` (every rank's images over the
epoch's training time: validation, start-up and the model save excluded), the median of the
epochs after the first (graph tracing, first touch). The two jobs alternate ``--repeats``
times (``harness.interleave``: ddp horovod, horovod ddp, ...). Figure:

- ``ddp_vs_horovod_cnn``: best-of-n (``harness.best``) images/s of ddp over horovod's, the
  same run (target >= 0.9). The medians' ratio is printed beside it.

Measured time: about 100 s on the 2-core machine (3 repeats, 5 epochs; 2026-11-28).

    .venv/bin/python -m benchmarks.training.ddp_vs_horovod [--repeats 3] [--epochs 5] [--batch 32]
"""

from __future__ import annotations

import argparse
import re
import sys
import time

from benchmarks import harness as h

RANKS = 2
IMAGE_SIZE = 32
BASE_LR = 0.001
WARMUP_EPOCHS = 1
SEED = 42
THROUGHPUT_RE = re.compile(r"trainpipe-metrics epoch=(\d+) .*?samples_per_sec=([0-9.eE+-]+)")
ACCURACY_RE = re.compile(r"trainpipe-metrics epoch=\d+ .*?val_accuracy=([0-9.]+)")
PARAMETERS_RE = re.compile(r"trainpipe-metrics epoch=\d+ .*?model_parameters=(\d+)")


def steady(rates: dict[int, float]) -> float:
    """Median images/s of the epochs after the first."""
    return h.median(v for e, v in rates.items() if e > 1)


def _summary(log: str) -> str:
    accuracy = ACCURACY_RE.findall(log)
    parameters = PARAMETERS_RE.findall(log)
    return (f"val_accuracy {float(accuracy[-1]) if accuracy else float('nan'):.3f}   "
            f"parameters {parameters[-1] if parameters else '?'}")


def ddp_job(splits: dict, args) -> tuple[dict[int, float], str, float]:
    """One torchrun job of the PyTorch entrypoint: per-epoch images/s, its summary, wall s."""
    from training_entry import contract

    started = time.perf_counter()
    done = h.torch_entrypoint(splits, h.work_dir("ddp_vs_horovod") / "model-ddp", RANKS,
                              "--epochs", str(args.epochs), "--batch-size", str(args.batch),
                              "--base-learning-rate", str(BASE_LR), "--warmup-epochs", str(WARMUP_EPOCHS),
                              "--seed", str(SEED), "--model-architecture", "small_cnn",
                              "--image-size", str(IMAGE_SIZE), "--strategy", "ddp",
                              f"--{contract.HP_AUGMENTATION}", "none", timeout=600)
    wall = time.perf_counter() - started
    rates = {int(e): float(v) for e, v in THROUGHPUT_RE.findall(done.stdout)}
    if done.returncode != 0 or not rates:
        raise RuntimeError(f"ddp failed (rc {done.returncode}):\n{done.stdout[-2000:]}{done.stderr[-3000:]}")
    return rates, _summary(done.stdout), wall


def horovod_job(splits: dict, args) -> tuple[dict[int, float], str, float]:
    """One mpirun job of the TensorFlow/Horovod entrypoint, the local runner's launch."""
    from training_entry import contract

    run = h.training_job(h.work_dir("ddp_vs_horovod"), splits, h.tuned(RANKS, args.batch), epochs=args.epochs,
                         label="horovod", timeout=600, hyperparameters={
                             "base-learning-rate": BASE_LR, "warmup-epochs": WARMUP_EPOCHS, "seed": SEED,
                             contract.HP_MODEL_ARCHITECTURE: contract.ARCH_SMALL_CNN,
                             contract.HP_IMAGE_SIZE: IMAGE_SIZE, contract.HP_AUGMENTATION: "none"})
    return run.samples_per_sec, _summary(run.log), run.wall_seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch", type=int, default=32, help="per rank")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    splits = h.preprocess_images(h.work_dir("ddp_vs_horovod"), RANKS)
    records = h.records_of(splits["manifest"], "train")
    h.say(f"ddp vs horovod, small_cnn {IMAGE_SIZE}px: {records} training images, 1 host x {RANKS} ranks, "
          f"batch {args.batch} per rank, {args.epochs} epochs; {args.repeats} interleaved repetitions")
    jobs = {"ddp": ddp_job, "horovod": horovod_job}

    def candidate(name: str):
        def run() -> float:
            try:
                rates, summary, wall = jobs[name](splits, args)
            except Exception as error:  # one failed job must not lose the others
                h.say(f"  {name}: FAILED {str(error).splitlines()[0]}")
                return float("nan")
            per_epoch = " ".join(f"{v:.0f}" for _, v in sorted(rates.items()))
            h.say(f"  {name:8s} steady {steady(rates):7.0f} images/s   {summary}   "
                  f"wall {wall:5.1f}s   per epoch: {per_epoch}")
            return steady(rates)
        return run

    rates = h.interleave({name: candidate(name) for name in jobs}, args.repeats)
    for name, values in rates.items():
        h.say(f"{name}: images/s {h.spread(values)}")
    h.say(f"medians' ratio ddp/horovod {h.median(rates['ddp']) / h.median(rates['horovod']):.3f}; "
          f"{time.perf_counter() - started:.0f} s")
    h.result("ddp_vs_horovod_cnn", h.best(rates["ddp"]) / h.best(rates["horovod"]), 0.9)
    return 0


if __name__ == "__main__":
    sys.exit(main())
