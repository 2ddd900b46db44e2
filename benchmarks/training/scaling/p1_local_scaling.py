"""P1: local distributed training, 2 Horovod ranks vs one process, same model, data and samples.

Every run is the project's training entrypoint (``training_entry/train.py``: the digits MLP,
Horovod's DistributedOptimizer, File-mode TFRecord input) on a tree built by
``pipeline.local.jobs.contract`` and launched with the ``mpirun`` command line that
``pipeline.local.hosts.mpi.prepare`` builds for the local runner. Samples/s is the entrypoint's
own per-epoch metric (training steps only; every rank's samples), median over the epochs
after the first (which traces the graph); end-to-end is mpirun's wall time.

Fair comparison: the same global batch. One process runs ``2B`` per step, each of two ranks
``B`` (the pipeline's BatchSize is per worker): both make the same optimizer updates over the
same samples, so samples/s compares the same training. The per-worker-equal run (one
process at ``B``, twice the steps) is printed too; it flatters the ranks, because a small
model's step costs about the same at B and 2B.

Layouts: ``1x2`` is one simulated host with two ranks (ProcessesPerHost=2), ``2x1`` two
simulated hosts with one rank each (the default pipeline's TrainingInstanceCount=2).

The bar is the best single process, found in the same run: three single-process layouts,
launched as the runner launches one rank with ``TRAINPIPE_RANK_THREADS`` at ``default``
(TensorFlow's own threads, ``one_process``: the baseline of the older ratios), ``1`` (one
intra-op, inter-op and tf.data thread) and unset (the runner's rule for one rank: intra-op and
tf.data = cores, inter-op 1, and one intra-op and tf.data thread for an MLP,
``one_process_cores``). They and the 2-rank headline runs (tuned
1x2 and 2x1; quick: naive and tuned 1x2) are interleaved ``--repeats`` times (5 in ``make
bench``), so every layout gets the same number of tries under the same load.

Estimator: **best-of-n** (``harness.best``): each layout's rate is its fastest repetition (the
minimum time), and a ratio divides two such rates. Noise on a shared machine only ever slows
a run down, and slows two synchronous ranks more than one process (a stall of either rank
stalls both at the next allreduce), so the fastest repetition is each layout's closest
estimate of what it does on a quiet machine, and needs one undisturbed repetition where a
median needs most of them. The median [min..max] of every layout is printed beside it, and
so are the paired ratios (each 2-rank run over the one-process run of its own repetition):
their median and minimum show how far single pairs move, the minimum (``_2hosts_min``,
no target) being the most disturbed pair's, i.e. the machine's load, not the layout's.
RESULT ``p1_vs_best_single_process`` = tuned 1x2 over the fastest single-process layout
(target 1.0; ``p1_cnn_...`` for the CNN), ``p1_2hosts_vs_best_single_process`` the 2x1 one.
The settings ladder (``--explore`` only) adds the fast defaults of
``pipeline.local.hosts.launch_settings`` one at a time. ``allreduce_1x2`` / ``allreduce_2x1`` time bare
Horovod allreduces of the model's gradient size in both layouts (``allreduce_probe.py``):
the transport between the ranks, without the training around it. ``tcp_2x1`` and
``allreduce_2x1_tcp`` are the 2x1 launch as it was before ``pipeline.local.hosts.shared_memory``:
one Open MPI node per simulated host, so TCP over loopback between the hosts.

    .venv/bin/python -m benchmarks.training.scaling.p1_local_scaling [--replicate 16] [--epochs 4] [--repeats 5]
    .venv/bin/python -m benchmarks.training.scaling.p1_local_scaling --explore     # every setting tried (~10 min)
    .venv/bin/python -m benchmarks.training.scaling.p1_local_scaling --workload cnn --quick   # small_cnn on the digits PNGs

``--workload cnn``: the same comparison on the image path (``small_cnn`` at 32x32, PNG
decode + augmentation per record in tf.data), RESULT names prefixed ``p1_cnn``.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

from benchmarks import harness as h
from benchmarks.training import train_variants
from pipeline.local.hosts import launch_settings, mpi
from training_entry.contract import FLAT_ALLREDUCE_ENV, SMALL_STEP_THREADS_ENV
from training_entry.contract import HP_STEPS_PER_EXECUTION as HP_SPE

HERE = Path(__file__).resolve().parent
EXPLORE_OUTPUT = HERE / "p1_explore.txt"
VARIANTS = HERE.parent / "train_variants.py"
ALLREDUCE_PROBE = HERE.parent / "probes" / "allreduce_probe.py"
THREADS_1 = {name: "1" for name in launch_settings.THREAD_ENVS}
# Workload -> hyperparameters added to every run (the MLP's are the harness defaults).
WORKLOADS = {
    "mlp": {},
    "cnn": {"model-architecture": "small_cnn", "image-size": 32, "augmentation": "crop"},
}
YIELD = list(launch_settings.YIELD_OPTIONS)
# The single-process layouts whose fastest is the bar (threads as TRAINPIPE_RANK_THREADS sets them).
SINGLE_PROCESS = ("one_process", "one_process_1thread", "one_process_cores")
SPE_SWEEP = (1, 8, 32)  # the default (contract.DEFAULT_STEPS_PER_EXECUTION) is every headline run's


def _base_options(bind: str, btl: str | None = None) -> list[str]:
    """The runner's mpirun options with binding (and the byte transfer layers) changed."""
    options = list(mpi.BASE_OPTIONS)
    options[options.index("-bind-to") + 1] = bind
    if btl is not None:
        options[options.index("btl") + 1] = btl
    return options


def single_process(batch: int, threads: str | None) -> h.Launch:
    """One process launched as the local runner launches one rank, its threads chosen as
    ``TRAINPIPE_RANK_THREADS=threads`` chooses them (None: the runner's own rule), whatever
    this shell exports."""
    fast = launch_settings.local_launch(1, environ={} if threads is None else {launch_settings.RANK_THREADS_ENV: threads})
    return h.Launch(1, batch, hosts=1, mpirun_options=fast.mpirun_options, env=fast.env, pin=fast.pin)


def configurations(batch: int, explore: bool, quick: bool) -> dict[str, tuple[h.Launch, str]]:
    """name -> (launch, what it is). The first is the baseline every ratio divides by."""
    fast = launch_settings.local_launch(2)
    pin_env = {launch_settings.AFFINITY_ENV: fast.env.get(launch_settings.AFFINITY_ENV, "0,1")}
    cycle = {launch_settings.CYCLE_TIME_ENV: launch_settings.LOCAL_CYCLE_TIME_MS}
    cores = len(launch_settings.usable_cpus())
    configs: dict[str, tuple[h.Launch, str]] = {
        "one_process": (single_process(2 * batch, "default"), f"1 process, batch {2 * batch}, TF default threads"),
        "one_process_1thread": (single_process(2 * batch, "1"),
                                f"1 process, batch {2 * batch}, 1 thread (intra, inter, tf.data)"),
        "one_process_cores": (single_process(2 * batch, None),
                              f"1 process, batch {2 * batch}, the runner's one-rank threads "
                              f"(intra {cores}, inter {launch_settings.INTER_OP_THREADS}, tf.data {cores}; "
                              f"{launch_settings.SMALL_STEP_THREADS} for an MLP)"),
        "naive_1x2": (h.Launch(2, batch), "2 ranks on 1 host, the runner's launch before tuning"),
        "tuned_1x2": (h.tuned(2, batch), "2 ranks on 1 host, pipeline.local.hosts.launch_settings defaults"),
    }
    if quick:
        return configs
    configs.update({
        "tuned_2x1": (h.tuned(1, batch, hosts=2), "2 hosts x 1 rank, tuning defaults (one MPI node, shared memory)"),
        "tcp_2x1": (dataclasses.replace(h.tuned(1, batch, hosts=2), shared_memory=False),
                    "2 hosts x 1 rank, tuned, one MPI node per host (TCP between hosts, as before)"),
        "allreduce_1x2": (dataclasses.replace(h.tuned(2, batch), entry=ALLREDUCE_PROBE),
                          "allreduces/s (not samples), 1 host x 2 ranks: shared memory"),
        "allreduce_2x1": (dataclasses.replace(h.tuned(1, batch, hosts=2), entry=ALLREDUCE_PROBE),
                          "allreduces/s (not samples), 2 hosts x 1 rank: shared memory (one MPI node)"),
        "allreduce_2x1_tcp": (dataclasses.replace(h.tuned(1, batch, hosts=2), entry=ALLREDUCE_PROBE, shared_memory=False),
                              "allreduces/s (not samples), 2 hosts x 1 rank, one MPI node per host: TCP over loopback"),
    })
    if not explore:
        return configs
    tuned = dict(h.tuned(2, batch).env)
    configs.update({
        "one_process_b32": (h.Launch(1, batch), f"1 process, batch {batch} (per-worker-equal)"),
        "ladder_threads": (h.Launch(2, batch, env=THREADS_1), "naive + 1 thread per rank"),
        "ladder_yield": (h.Launch(2, batch, mpirun_options=YIELD, env=THREADS_1), "+ mpi_yield_when_idle"),
        "ladder_pin": (h.Launch(2, batch, mpirun_options=YIELD, env={**THREADS_1, **pin_env}, pin=True),
                       "+ rank r pinned to core r"),
        # + HOROVOD_CYCLE_TIME=0.1 is tuned_1x2.
        "naive_2x1": (h.Launch(1, batch, hosts=2), "2 hosts x 1 rank, before tuning"),
        "x_no_yield": (h.Launch(2, batch, env=tuned, pin=True), "tuned without mpi_yield_when_idle"),
        "x_bind_core_mpirun": (h.Launch(2, batch, mpirun_options=YIELD, env={**THREADS_1, **cycle},
                                        base_options=_base_options("core")),
                               "tuned, but -bind-to core by mpirun instead of the pinning shim"),
        "x_bind_core_no_yield": (h.Launch(2, batch, env={**THREADS_1, **cycle},
                                          base_options=_base_options("core")),
                                 "-bind-to core, no yield"),
        "x_default_threads": (h.Launch(2, batch, mpirun_options=YIELD, pin=True,
                                       env={k: v for k, v in tuned.items() if k not in THREADS_1}),
                              "tuned, TF/OMP default threads (one per core per rank)"),
        "x_unpinned": (h.Launch(2, batch, mpirun_options=YIELD, env={**THREADS_1, **cycle}), "tuned, not pinned"),
        "x_cycle_1ms": (h.Launch(2, batch, mpirun_options=YIELD, env={**tuned, launch_settings.CYCLE_TIME_ENV: "1"}, pin=True),
                        "tuned, HOROVOD_CYCLE_TIME=1 (Horovod's default)"),
        "x_cycle_5ms": (h.Launch(2, batch, mpirun_options=YIELD, env={**tuned, launch_settings.CYCLE_TIME_ENV: "5"}, pin=True),
                        "tuned, HOROVOD_CYCLE_TIME=5"),
        "x_cycle_0.05ms": (h.Launch(2, batch, mpirun_options=YIELD, env={**tuned, launch_settings.CYCLE_TIME_ENV: "0.05"}, pin=True),
                           "tuned, HOROVOD_CYCLE_TIME=0.05"),
        "x_fusion_off": (h.Launch(2, batch, mpirun_options=YIELD, env={**tuned, "HOROVOD_FUSION_THRESHOLD": "0"}, pin=True),
                         "tuned, tensor fusion off"),
        "x_cache_off": (h.Launch(2, batch, mpirun_options=YIELD, env={**tuned, "HOROVOD_CACHE_CAPACITY": "0"}, pin=True),
                        "tuned, response cache off"),
        "x_mpi_threads_off": (h.Launch(2, batch, mpirun_options=YIELD, env={**tuned, "HOROVOD_MPI_THREADS_DISABLE": "1"},
                                       pin=True), "tuned, MPI_THREAD_SINGLE"),
        # Not as a custom option: Open MPI refuses an MCA parameter given twice.
        "x_btl_no_tcp": (h.Launch(2, batch, mpirun_options=YIELD, env=tuned, pin=True,
                                  base_options=_base_options("none", btl="self,vader")),
                         "tuned, -mca btl self,vader"),
        "x_onednn_off": (h.Launch(2, batch, mpirun_options=YIELD, env={**tuned, "TF_ENABLE_ONEDNN_OPTS": "0"}, pin=True),
                         "tuned, TF_ENABLE_ONEDNN_OPTS=0"),
        "x_one_process_onednn_off": (h.Launch(1, 2 * batch, env={"TF_ENABLE_ONEDNN_OPTS": "0"}),
                                     "1 process, TF_ENABLE_ONEDNN_OPTS=0"),
        "x_gc_freeze": (h.Launch(2, batch, mpirun_options=YIELD, pin=True, entry=VARIANTS,
                                 env={**tuned, train_variants.VARIANT_ENV: "gc_freeze"}),
                        "tuned + gc.freeze() before fit (a train.py change)"),
        "x_one_process_gc_freeze": (h.Launch(1, 2 * batch, entry=VARIANTS,
                                             env={train_variants.VARIANT_ENV: "gc_freeze"}),
                                    "1 process + gc.freeze() before fit"),
        "x_group1": (h.Launch(2, batch, mpirun_options=YIELD, pin=True, entry=VARIANTS,
                              env={**tuned, train_variants.VARIANT_ENV: "group1"}),
                     "tuned + DistributedOptimizer(num_groups=1) (a train.py change)"),
        "x_per_tensor": (h.Launch(2, batch, mpirun_options=YIELD, pin=True, env={**tuned, FLAT_ALLREDUCE_ENV: "0"}),
                         "tuned, Horovod's allreduce per gradient tensor (before training_entry/run/flat_allreduce.py)"),
        "x_2x1_per_tensor": (h.tuned(1, batch, hosts=2, **{FLAT_ALLREDUCE_ENV: "0"}),
                             "2 hosts x 1 rank, tuned, Horovod's allreduce per gradient tensor"),
        # steps-per-execution other than the default (1: every step a call, as before it existed).
        **{name: config for n in SPE_SWEEP for name, config in {
            f"x_spe{n}": (dataclasses.replace(h.tuned(2, batch), hyperparameters={HP_SPE: n}),
                          f"tuned, {HP_SPE} {n}"),
            f"x_2x1_spe{n}": (dataclasses.replace(h.tuned(1, batch, hosts=2), hyperparameters={HP_SPE: n}),
                              f"2 hosts x 1 rank, tuned, {HP_SPE} {n}"),
            f"x_one_process_spe{n}": (h.Launch(1, 2 * batch, hyperparameters={HP_SPE: n}),
                                      f"1 process, {HP_SPE} {n}"),
        }.items()},
        "x_2x1_cycle_1ms": (h.tuned(1, batch, hosts=2, HOROVOD_CYCLE_TIME="1"),
                            "2 hosts x 1 rank, tuned, cycle 1 ms"),
        "x_2x1_unpinned": (h.Launch(1, batch, hosts=2, mpirun_options=YIELD, env={**THREADS_1, **cycle}),
                           "2 hosts x 1 rank, tuned, not pinned"),
    })
    return configs


def _arguments(argv: list[str] | None) -> tuple[argparse.ArgumentParser, argparse.Namespace]:
    parser = argparse.ArgumentParser(prog="benchmarks.training.scaling.p1_local_scaling", description=__doc__.splitlines()[0])
    parser.add_argument("--replicate", type=int, default=16, help="digits copies (1797 records each)")
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--batch", type=int, default=32, help="per-rank batch B")
    parser.add_argument("--repeats", type=int, default=5, help="interleaved repetitions of the headline runs")
    parser.add_argument("--quick", action="store_true", help="the single-process layouts, naive and tuned 1x2 only")
    parser.add_argument("--no-naive", action="store_true",
                        help="baseline and tuned 1x2 only (growth's points: it plots those two)")
    parser.add_argument("--workload", choices=sorted(WORKLOADS), default="mlp",
                        help="mlp: the digits features; cnn: small_cnn on the digits as PNGs")
    parser.add_argument("--explore", action="store_true",
                        help=f"also every setting that was tried; output saved to {EXPLORE_OUTPUT.name}")
    parser.add_argument("--only", nargs="+", metavar="NAME",
                        help="with --explore: the headline runs and these settings only; output "
                             f"appended to {EXPLORE_OUTPUT.name}")
    return parser, parser.parse_args(argv)


def headline_runs(quick: bool, no_naive: bool) -> list[str]:
    """The runs interleaved ``--repeats`` times: every single-process layout (the best of them
    is the bar), then the 2-rank layouts. Quick: the 1x2 ladder's ends; otherwise the default
    pipeline's layout (2x1) instead of the untuned 1x2 (measured once)."""
    if no_naive:
        return ["one_process", "tuned_1x2"]
    return [*SINGLE_PROCESS, *(["naive_1x2", "tuned_1x2"] if quick else ["tuned_1x2", "tuned_2x1"])]


def _print_table(configs: dict, runs: dict[str, list[h.TrainingRun]], base: float) -> None:
    h.say("")
    h.say(f"  {'setting':26s} {'samples/s (median [min..max])':38s} {'best':>8s} {'ratio':>6s} {'wall s':>7s}  what")
    for name, (_, what) in configs.items():
        if name.startswith("allreduce_"):
            continue
        steady = [r.steady() for r in runs[name]]
        if not steady:
            h.say(f"  {name:26s} {'failed':38s}")
            continue
        wall = h.median(r.wall_seconds for r in runs[name])
        h.say(f"  {name:26s} {h.spread(steady):38s} {h.best(steady):8.0f} {h.best(steady) / base:6.2f} "
              f"{wall:7.1f}  {what}")
    h.say("  (best: the fastest repetition; ratio: best over one_process's best)")


def main(argv: list[str] | None = None) -> int:
    parser, args = _arguments(argv)
    work = h.work_dir("p1")
    cnn = args.workload == "cnn"
    splits = h.preprocess_images(work, 2) if cnn else h.preprocess(work, args.replicate, 2)
    prefix = "p1_cnn" if cnn else "p1"
    train = h.records_of(splits["manifest"], "train")
    configs = configurations(args.batch, args.explore, args.quick)
    headline = headline_runs(args.quick, args.no_naive)
    if args.no_naive:
        configs = {k: v for k, v in configs.items() if k in headline}
    if args.only:
        unknown = sorted(set(args.only) - set(configs))
        if unknown:
            parser.error(f"unknown setting(s) {unknown}; known: {sorted(configs)}")
        configs = {k: v for k, v in configs.items() if k in headline or k in args.only}
    h.say(f"P1 local scaling, {args.workload}: "
          f"{'digits PNGs' if cnn else f'digits x {args.replicate}'} ({train} training records), {args.epochs} "
          f"epochs, batch {args.batch} per rank; {args.repeats} interleaved repetitions of "
          f"{', '.join(headline)}, {args.repeats if args.explore else 1} of the others")
    h.say(f"  tuned launch: env {launch_settings.local_launch(2).env}, mpirun {list(launch_settings.local_launch(2).mpirun_options)}")
    runs: dict[str, list[h.TrainingRun]] = {name: [] for name in configs}

    def job(name: str):
        def run() -> float:
            launch, _ = configs[name]
            try:
                result = h.training_job(work, splits, launch, epochs=args.epochs, label=name,
                                        hyperparameters=WORKLOADS[args.workload])
            except Exception as error:  # one failed setting must not lose the others
                h.say(f"  {name}: FAILED {str(error).splitlines()[0]}")
                return float("nan")
            runs[name].append(result)
            per_epoch = " ".join(f"{v:.0f}" for _, v in sorted(result.samples_per_sec.items()))
            h.say(f"  {name:26s} steady {result.steady():8.0f} samples/s   wall {result.wall_seconds:5.1f}s"
                  f"   per epoch: {per_epoch}")
            return result.steady()
        return run

    started = time.perf_counter()
    h.interleave({name: job(name) for name in headline}, args.repeats)
    others = [name for name in configs if name not in headline]
    if others:
        h.interleave({name: job(name) for name in others}, args.repeats if args.explore else 1)
    _print_table(configs, runs, _best(runs, "one_process"))
    _report(prefix, runs, train, args, time.perf_counter() - started, cnn)
    return 0


def same_threads_twice(cnn: bool) -> bool:
    """Whether ``one_process_cores`` runs ``one_process_1thread``'s threads: on the MLP, wherever
    the runner's rule lets a small-step model take one thread (more than one core). Then the
    pair is one layout measured twice, interleaved: an A/A check of the estimator."""
    return not cnn and launch_settings.SMALL_STEP_THREADS == 1 and SMALL_STEP_THREADS_ENV in single_process(1, None).env


def _best(runs: dict[str, list[h.TrainingRun]], name: str) -> float:
    return h.best(r.steady() for r in runs.get(name, []))


def _report(prefix: str, runs: dict[str, list[h.TrainingRun]], train: int, args, seconds: float,
            cnn: bool) -> None:
    """The summary lines and RESULT lines: best-of-n rates and their ratios (module docstring)."""
    base = _best(runs, "one_process")

    def paired(name: str) -> list[float]:
        # Each run over the baseline run of its own repetition: how far single pairs move.
        return [t.steady() / b.steady() for t, b in zip(runs[name], runs["one_process"], strict=False)]

    for name in ("tuned_1x2", "tuned_2x1"):
        if runs.get(name):
            pairs = paired(name)
            h.say(f"  paired {name}/one_process ratios: {' '.join(f'{p:.2f}' for p in pairs)} "
                  f"(median {h.median(pairs):.2f}, min {min(pairs):.2f})")
    singles = {name: [r.steady() for r in runs[name]] for name in SINGLE_PROCESS if runs.get(name)}
    best_single, best_rate = h.best_layout(singles)
    if len(singles) > 1:
        h.say(f"  best single process: {best_single} ({best_rate:.0f} samples/s; "
              + ", ".join(f"{n} {h.best(v):.0f}" for n, v in singles.items()) + ")")
    twice = same_threads_twice(cnn) and runs.get("one_process_cores") and runs.get("one_process_1thread")
    if twice:
        same_best = _best(runs, "one_process_cores") / _best(runs, "one_process_1thread")
        same_median = (h.median(r.steady() for r in runs["one_process_cores"])
                       / h.median(r.steady() for r in runs["one_process_1thread"]))
        h.say(f"  one layout twice (one_process_cores runs one_process_1thread's threads on an MLP): "
              f"{same_best:.2f} best of n, {same_median:.2f} by median: what this run's noise alone does to a ratio")
    probes = {name: runs[name][0].steady() for name in ("allreduce_1x2", "allreduce_2x1", "allreduce_2x1_tcp")
              if runs.get(name)}
    if len(probes) == 3:
        h.say(f"  one allreduce of the gradients: {1000 / probes['allreduce_1x2']:.2f} ms between two ranks "
              f"of one host, {1000 / probes['allreduce_2x1']:.2f} ms between two hosts on one MPI node "
              f"(shared memory), {1000 / probes['allreduce_2x1_tcp']:.2f} ms between two hosts on two "
              f"nodes (TCP over loopback)")
    base_wall = h.median(r.wall_seconds for r in runs["one_process"])
    tuned_wall = h.median(r.wall_seconds for r in runs["tuned_1x2"]) if runs["tuned_1x2"] else float("nan")
    h.say(f"  end to end (whole mpirun, start-up and model save included, medians): one process "
          f"{base_wall:.1f}s, tuned 2 ranks {tuned_wall:.1f}s")
    h.say(f"  ({seconds:.0f}s)")
    h.save_figures("p1-cnn" if cnn else f"p1-x{args.replicate}", {
        # The samples of the epochs after the first (the first traces the graph: not timed).
        "records": train * max(args.epochs - 1, 1),
        **{name: {"steady": h.median(r.steady() for r in runs[name]),
                  "wall": h.median(r.wall_seconds for r in runs[name]),
                  # Best-of-n, as the rates: the least disturbed repetition's time in the
                  # steps (samples per epoch: what the steps consumed, ~ the training records).
                  "train_seconds": min(r.train_seconds(train) for r in runs[name])}
           for name in ("one_process", "tuned_1x2", "naive_1x2") if runs.get(name)},
    })
    h.result(f"{prefix}_local_scaling", _best(runs, "tuned_1x2") / base, 1.0)
    if len(singles) > 1:
        h.result(f"{prefix}_vs_best_single_process", _best(runs, "tuned_1x2") / best_rate, 1.0)
    if runs.get("naive_1x2"):
        h.result(f"{prefix}_local_scaling_naive", _best(runs, "naive_1x2") / base, "-")
    h.result(f"{prefix}_samples_per_s_one_process", base, "-")
    if len(singles) > 1:
        h.result(f"{prefix}_samples_per_s_best_single_process", best_rate, "-")
    h.result(f"{prefix}_samples_per_s_tuned_1x2", _best(runs, "tuned_1x2"), "-")
    if runs.get("tuned_2x1"):
        h.result(f"{prefix}_local_scaling_2hosts", _best(runs, "tuned_2x1") / base, 1.0)
        h.result(f"{prefix}_local_scaling_2hosts_min", min(paired("tuned_2x1")), "-")
        h.result(f"{prefix}_2hosts_vs_best_single_process", _best(runs, "tuned_2x1") / best_rate, "-")
    for name, target in (("naive_2x1", "-"), ("tcp_2x1", "-")):
        if runs.get(name):
            suffix = name.split("_")[0]
            h.result(f"{prefix}_local_scaling_2hosts_{suffix}", _best(runs, name) / base, target)
    for name, ops in probes.items():
        h.result(f"{prefix}_{name.replace('allreduce_', 'allreduce_ms_')}", 1000 / ops, "-")
    if twice:
        h.result(f"{prefix}_same_layout_twice_ratio", same_best, "-")
    h.result(f"{prefix}_end_to_end_ratio", base_wall / tuned_wall, "-")


if __name__ == "__main__":
    if "--explore" in sys.argv:
        # Keep what --explore printed: BENCHMARKS.md quotes it (it is too slow for make bench).
        import contextlib
        import io

        buffer = io.StringIO()

        class Tee(io.TextIOBase):
            def write(self, text):
                sys.__stdout__.write(text)
                buffer.write(text)
                return len(text)

            def flush(self):
                sys.__stdout__.flush()

        with contextlib.redirect_stdout(Tee()):
            code = main()
        stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        text = (f"# {stamp}: .venv/bin/python -m benchmarks.training.scaling.p1_local_scaling "
                f"{' '.join(sys.argv[1:])}\n" + buffer.getvalue())
        if "--only" in sys.argv and EXPLORE_OUTPUT.exists():
            text = EXPLORE_OUTPUT.read_text().rstrip() + "\n\n" + text
        EXPLORE_OUTPUT.write_text(text)
        sys.exit(code)
    sys.exit(main())
