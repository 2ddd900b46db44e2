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
- ``ddp_vs_horovod_cnn_single_process``: the floor under that ratio, no distribution at all. The
  same two networks, batch ``--batch``, Adam, on synthetic 32x32 images already in memory, ONE
  process with one intra-op thread (one rank's share of the 2-core machine), PyTorch eager
  (one Python iteration per step) vs Keras compiled (``fit``, ``steps_per_execution`` 16, as the
  room runs it): best-of-n images/s of PyTorch over Keras', the two interleaved ``--repeats``
  times in the same run. Where this is at or under ``ddp_vs_horovod_cnn``, the 2-rank gap is the
  frameworks' single-process step (PyTorch's CPU convolutions against TensorFlow's), not DDP.

Measured time: about 100 s on the 2-core machine (3 repeats, 5 epochs; 2026-11-28); 153 s with the
one-process figure, at a load average of 4.5 from other sessions' jobs.

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
    parser.add_argument("--single", choices=("torch", "keras"), help="(internal) one process, no distribution")
    parser.add_argument("--threads", type=int, default=1, help="(internal, --single) intra-op threads")
    parser.add_argument("--no-mkldnn", action="store_true", help="(internal, --single torch) oneDNN off")
    args = parser.parse_args(argv)
    if args.single:
        return single_worker(args)
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
    single = h.interleave({name: _single(name, args.batch) for name in ("torch", "keras")}, args.repeats)
    for name, values in single.items():
        h.say(f"one process, {name}: images/s {h.spread(values)}")
    h.result("ddp_vs_horovod_cnn_single_process", h.best(single["torch"]) / h.best(single["keras"]), "-")
    return 0


SINGLE_STEPS = 64  # per timed block: 4 of Keras' 16-step calls
SINGLE_RE = re.compile(r"single images_per_sec=([0-9.]+)")


def _single(name: str, batch: int):
    """A candidate for ``harness.interleave``: one ``--single`` process, its best block's images/s."""
    import subprocess

    def run() -> float:
        # One intra-op thread, as each of the two ranks gets on this machine (torchrun's
        # OMP_NUM_THREADS=1; the local runner's threads per rank).
        env = h.quiet_env({"OMP_NUM_THREADS": "1", "TF_NUM_INTRAOP_THREADS": "1", "TF_NUM_INTEROP_THREADS": "1"})
        done = subprocess.run([h.PYTHON, "-m", "benchmarks.training.ddp_vs_horovod", "--single", name,
                               "--batch", str(batch)], cwd=h.REPO, env=env, text=True, capture_output=True,
                              timeout=600)
        found = SINGLE_RE.findall(done.stdout)
        if done.returncode != 0 or not found:
            h.say(f"  one process, {name}: FAILED rc {done.returncode} {done.stderr[-500:]}")
            return float("nan")
        h.say(f"  one process, {name:5s} {float(found[-1]):7.0f} images/s")
        return float(found[-1])
    return run


def single_worker(args) -> int:
    """One process, no distribution: best of 3 blocks of SINGLE_STEPS steps after a warm-up block."""
    import numpy as np

    rng = np.random.default_rng(SEED)
    x = rng.integers(0, 256, (SINGLE_STEPS * args.batch, IMAGE_SIZE, IMAGE_SIZE, 3)).astype("float32")
    y = rng.integers(0, 10, len(x))
    seconds = (_torch_blocks if args.single == "torch" else _keras_blocks)(x, y, args)
    print(f"single images_per_sec={len(x) / min(seconds[1:]):.1f}", flush=True)
    return 0


def _torch_blocks(x, y, args) -> list[float]:
    import torch

    from training_torch import networks

    torch.set_num_threads(args.threads)
    torch.backends.mkldnn.enabled = not args.no_mkldnn
    torch.manual_seed(SEED)
    model = networks.small_cnn(10)
    optimizer = torch.optim.Adam(model.parameters(), lr=BASE_LR)
    loss_fn = torch.nn.CrossEntropyLoss()
    xs, ys = torch.from_numpy(x), torch.from_numpy(y)
    seconds = []
    for _ in range(4):
        started = time.perf_counter()
        for i in range(0, len(xs), args.batch):
            optimizer.zero_grad(set_to_none=True)
            loss_fn(model(xs[i:i + args.batch]), ys[i:i + args.batch]).backward()
            optimizer.step()
        seconds.append(time.perf_counter() - started)
    return seconds


def _keras_blocks(x, y, args) -> list[float]:
    import tensorflow as tf

    from training_entry import contract
    from training_entry.model import architectures

    tf.keras.utils.set_random_seed(SEED)
    model = architectures.small_cnn(IMAGE_SIZE, 10)
    model.compile(optimizer=tf.keras.optimizers.legacy.Adam(learning_rate=BASE_LR),
                  loss="sparse_categorical_crossentropy", steps_per_execution=contract.DEFAULT_STEPS_PER_EXECUTION)
    data = tf.data.Dataset.from_tensor_slices((x, y)).batch(args.batch, drop_remainder=True).cache().repeat()
    seconds = []

    class Clock(tf.keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            self.started = time.perf_counter()

        def on_epoch_end(self, epoch, logs=None):
            seconds.append(time.perf_counter() - self.started)

    model.fit(data, epochs=4, steps_per_epoch=SINGLE_STEPS, verbose=0, callbacks=[Clock()])
    return seconds


if __name__ == "__main__":
    sys.exit(main())
