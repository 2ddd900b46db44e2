"""Model FLOP utilisation: how close the training benchmarks come to this machine's limit.

For each workload (the digits MLP, ``small_cnn`` at 32 px, ``mobilenet_v2`` at 96 px, the whole
network: with no pretrained weights the entrypoint freezes nothing, issue 36) and each layout (one process, 2 ranks on one
host), all with the local runner's launch (``pipeline.local.hosts.launch_settings.local_launch``:
the same threads per rank, pinning and MPI options a user gets):

    MFU = FLOPs per training sample (flops.py: forward + backward, from the model's graph)
          x samples/s (the entrypoint's metric, median of the epochs after the first)
          / achievable FLOP/s (matmul_probe.py, launched exactly like that training run)

The training runs are interleaved ``--repeats`` times with the probe of their layout (one
probe per layout and repetition: it measures the machine under the same load); each
repetition gives one MFU and the RESULT is their median. RESULT lines:
``mfu_<workload>_1p`` and ``mfu_<workload>_2r``; the probe's FLOP/s and the samples/s are
printed beside them. Targets and why the MLP's is low: benchmarks/notes.md, "Model FLOP
utilisation".

``--compare VARIANT ...`` adds, per workload, a one-process run with one change (``VARIANTS``)
to the same interleaved rotation, and prints its MFU against the unchanged one-process run's
probe (the same denominator: the change is to the training, not to the machine) as
``mfu_<workload>_1p_<variant>`` (no target): a before/after in one run. Each variant takes one
suspect out of the step, so its gain is that suspect's share (``share``: 1 - unchanged rate /
changed rate, medians): ``no_input`` the input pipeline (one cached batch, repeated),
``spe64`` Keras' per-call dispatch (4x fewer calls), ``threads1`` the intra-op pool's
hand-offs (kernel choice and threading); the 2-rank run against the 1-process run is the
allreduce's and the shared cores' share.

    .venv/bin/python -m benchmarks.training.mfu [--repeats 2] [--only mlp cnn mobilenet]
    .venv/bin/python -m benchmarks.training.mfu --only mlp --repeats 3 --compare no_input spe64 threads1
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from benchmarks import harness as h
from benchmarks.training import flops, train_variants
from pipeline.local.hosts import launch_settings
from training_entry.contract import DEFAULT_STEPS_PER_EXECUTION as DEFAULT_SPE
from training_entry.contract import HP_STEPS_PER_EXECUTION as HP_SPE

HERE = Path(__file__).resolve().parent
PROBE = HERE / "probes" / "matmul_probe.py"
TRAIN_VARIANTS = HERE / "train_variants.py"
BATCH = 32  # per rank; one process runs 2 x BATCH (P1's fair comparison: same global batch)
# name -> (architecture, image size, head only, hyperparameters, epochs)
WORKLOADS = {
    "mlp": ("mlp", None, False, {}, 4),
    "cnn": ("small_cnn", 32, False, {"model-architecture": "small_cnn", "image-size": 32, "augmentation": "crop"}, 4),
    # No init channel here, so the whole network trains (never a frozen random backbone), and
    # its FLOPs are counted so: counting the head alone made its MFU read a third of the truth.
    "mobilenet": ("mobilenet_v2", 96, False, {"model-architecture": "mobilenet_v2", "image-size": 96,
                                              "augmentation": "none"}, 3),
}
# Targets (benchmarks/notes.md explains each): the MLP's steps are too small to fill a core.
TARGETS = {"mlp": "0.01", "cnn": "0.15", "mobilenet": "0.15"}  # minimums (RESULT targets are one token)
LAYOUTS = {"1p": lambda: h.tuned(1, 2 * BATCH), "2r": lambda: h.tuned(2, BATCH)}
# --compare: name -> (what it changes, the one-process launch with it).
VARIANTS = {
    "threads1": ("TRAINPIPE_RANK_THREADS=1 (one intra-op, inter-op and tf.data thread)",
                 lambda: h.tuned(1, 2 * BATCH, **launch_settings.rank_threads(1, len(launch_settings.usable_cpus()), "1").env())),
    "spe64": (f"{HP_SPE} 64 (Keras dispatch paid once per 64 steps, not {DEFAULT_SPE})",
              lambda: dataclasses.replace(h.tuned(1, 2 * BATCH), hyperparameters={HP_SPE: 64})),
    "no_input": ("one cached batch, repeated (no input work; train_variants.py one_batch)",
                 lambda: dataclasses.replace(h.tuned(1, 2 * BATCH, **{train_variants.VARIANT_ENV: "one_batch"}),
                                             entry=TRAIN_VARIANTS)),
}


def share(unchanged: float, changed: float) -> float:
    """The part of the unchanged step a change took away: 1 - unchanged rate / changed rate
    (negative: the change made it slower; nan without both rates)."""
    return 1.0 - unchanged / changed if unchanged > 0 and changed > 0 else float("nan")


def mfu(flops_per_sample: float, samples_per_sec: float, probe_flops: float) -> float:
    """Model FLOP utilisation (0 when the probe measured nothing)."""
    return flops_per_sample * samples_per_sec / probe_flops if probe_flops > 0 else 0.0


def measure(name: str, repeats: int, work: Path, compare: tuple[str, ...] = ()) -> dict[str, list[float]]:
    architecture, size, head_only, hps, epochs = WORKLOADS[name]
    counted = flops.count_in_subprocess(architecture, size, head_only)
    h.say(f"{name}: {counted.training / 1e6:.4g} MFLOP per training sample "
          f"(forward {counted.forward / 1e6:.4g}; {counted.parameters:,} trainable parameters)")
    splits = h.preprocess(work, 16, 2) if name == "mlp" else h.preprocess_images(work, 2)
    runs: dict = {}
    for layout, launch in LAYOUTS.items():
        def train(layout=layout, launch=launch):
            return h.training_job(work, splits, launch(), epochs=epochs, label=f"{name}_{layout}",
                                  validation=False, hyperparameters=hps).steady()

        def probe(layout=layout, launch=launch):
            return h.training_job(work, splits, dataclasses.replace(launch(), entry=PROBE), epochs=1,
                                  label=f"probe_{layout}", validation=False).steady()

        runs[f"{layout}_train"], runs[f"{layout}_probe"] = train, probe
    for variant in compare:
        def changed(variant=variant):
            return h.training_job(work, splits, VARIANTS[variant][1](), epochs=epochs, label=f"{name}_{variant}",
                                  validation=False, hyperparameters=hps).steady()

        runs[f"1p_{variant}_train"] = changed
    measured = h.interleave(runs, repeats)
    out = {}
    for layout in LAYOUTS:
        rates, probes = measured[f"{layout}_train"], measured[f"{layout}_probe"]
        out[layout] = [mfu(counted.training, r, p) for r, p in zip(rates, probes, strict=True)]
        h.say(f"  {layout}: {h.spread(rates)} samples/s, probe {h.spread([p / 1e9 for p in probes])} GFLOP/s, "
              f"MFU {h.spread(out[layout])}")
        h.result(f"mfu_{name}_{layout}", h.median(out[layout]), TARGETS[name])
    for variant in compare:
        rates = measured[f"1p_{variant}_train"]
        key = f"1p_{variant}"
        out[key] = [mfu(counted.training, r, p) for r, p in zip(rates, measured["1p_probe"], strict=True)]
        gained = share(h.median(measured["1p_train"]), h.median(rates))
        h.say(f"  1p with {VARIANTS[variant][0]}: {h.spread(rates)} samples/s "
              f"(x{h.median(rates) / h.median(measured['1p_train']):.2f} the unchanged 1p's median: "
              f"share {gained:+.0%} of its step), MFU {h.spread(out[key])} against the 1p probe")
        h.result(f"mfu_{name}_{key}", h.median(out[key]), "-")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="benchmarks.training.mfu", description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--only", nargs="+", choices=list(WORKLOADS), default=list(WORKLOADS))
    parser.add_argument("--compare", nargs="+", choices=list(VARIANTS), default=[],
                        help="also a one-process run with this change, in the same rotation")
    args = parser.parse_args(argv)
    work = h.work_dir("mfu")
    for name in args.only:
        measure(name, args.repeats, work, tuple(args.compare))
    return 0


if __name__ == "__main__":
    sys.exit(main())
