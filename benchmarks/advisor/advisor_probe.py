"""Allreduce probe for the scaling advisor's calibration (run by every rank under mpirun).

Times Horovod allreduces of float32 tensors of a few sizes, inside a ``tf.function`` as the
training step runs them, after a warm-up, the sizes interleaved; rank 0 prints one
``advisor-probe bytes=N seconds=S`` line per size (the median over repetitions), one
``advisor-probe per_tensor=S`` line (what each gradient tensor past the first adds when the
same bytes are reduced as several tensors, as DistributedOptimizer reduces a model's), one
``advisor-probe compute alone=S together=S`` line (a fixed kernel on rank 0 with the other
ranks idle, then on every rank at once: the compute contention of ranks sharing the machine)
and a ``trainpipe-metrics`` line so the benchmark harness accepts the job.

    mpirun -np 2 python benchmarks/advisor/advisor_probe.py --sizes 4096 65536 1048576 --repeats 200
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import horovod.tensorflow as hvd
import tensorflow as tf

SIZES_ENV = "TRAINPIPE_PROBE_SIZES"  # how the benchmark passes sizes through the launch
# "BYTES SECONDS": the gradient bytes and 1-rank step seconds the step-shaped loop imitates.
STEP_ENV = "TRAINPIPE_PROBE_STEP"
STEPS_PER_CALL = 16  # the entrypoint's default StepsPerExecution


# Consecutive calls per window of ``fastest_window``: about 20 x ~0.3 ms, the length of a few
# MLP steps' worth of allreduces, far shorter than the slow spells seen on the shared machine.
WINDOW = 20


def fastest_window(values: list[float], size: int = WINDOW) -> float:
    """The smallest median over consecutive windows of ``size`` calls (one window if fewer):
    the probe's figure read as P5 reads its runs (each run's fastest steady epoch, noise only
    slowing a stretch down). A median over every call let a slow spell in: in two quiet
    ``make bench`` runs the fitted latency read 53 and 94 us, moving the MLP's predictions
    from +10.9% to -18.1%. A window, not the single fastest call: one lucky call (both ranks
    arriving at once) is not what a step of training sees."""
    if len(values) <= size:
        return statistics.median(values)
    return min(statistics.median(values[i:i + size]) for i in range(0, len(values) - size + 1, size))


def _timed_call(fn, x, repeats: int, estimate=statistics.median) -> float:
    """Seconds of ``fn(x)``: ``estimate`` (median unless told) over ``repeats`` calls after a warm-up."""
    for _ in range(10):
        fn(x).numpy()
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn(x).numpy()
        times.append(time.perf_counter() - started)
    return estimate(times)


def compute_contention(repeats: int = 100) -> tuple[float, float]:
    """Seconds of a fixed dense kernel on rank 0 while the other ranks sleep, and while every
    rank runs it at once (Horovod's background threads cycling throughout): what ranks that
    share a machine cost each other's compute (cores, caches, memory bandwidth)."""
    x = tf.random.normal([192, 192], seed=1)

    @tf.function
    def work(y):
        for _ in range(8):
            y = tf.tanh(tf.matmul(y, y) * 1e-2)
        return y

    sync = tf.zeros([1])
    hvd.allreduce(sync)
    alone = _timed_call(work, x, repeats) if hvd.rank() == 0 else 0.0
    hvd.allreduce(sync)  # the others wait here (Horovod yields while waiting)
    together = _timed_call(work, x, repeats)
    hvd.allreduce(sync)
    return alone, together


def _kernel(y, iterations):
    """A dense chain of ``iterations`` links (one thread's matmul, about 40 us each): the
    step's compute, its length set by the count (a tensor: one trace for every length)."""
    w = tf.eye(128) * 0.5
    return tf.while_loop(lambda i, y: i < iterations,
                         lambda i, y: (i + 1, tf.tanh(tf.matmul(y, w))), (tf.constant(0), y))[1]


@tf.function
def _kernel_steps(y, g, iterations):
    """STEPS_PER_CALL steps of the kernel alone, each feeding a gradient-sized tensor
    (what the step-shaped loop reduces), as one call into the graph."""
    for _ in range(STEPS_PER_CALL):
        y = _kernel(y, iterations)
        g = g + tf.reduce_mean(y) * 1e-30
        y = y + g[0] * 1e-30
    return y, g


def kernel_alone(target_s: float, nbytes: int, repeats: int) -> tuple[float, int]:
    """Before ``hvd.init``: no Horovod background thread yet (the 1-rank calibration run's
    world; every rank does this at once, each on its own pinned core). The kernel's seconds
    per step and its link count, sized to ``target_s`` per step."""
    y, g = tf.random.normal([128, 128], seed=1), tf.zeros([max(nbytes // 4, 1)])
    # Sized by the fastest of its calls: one calibration in a slow spell (other processes) made
    # the kernel half the step's length.
    per_link = _timed_call(lambda n: _kernel_steps(y, g, n)[0], tf.constant(16), 30, min) / STEPS_PER_CALL / 16
    iterations = max(round(target_s / per_link), 1)
    alone = _timed_call(lambda n: _kernel_steps(y, g, n)[0], tf.constant(iterations), repeats)
    return alone / STEPS_PER_CALL, iterations


def step_shaped(nbytes: int, iterations: int, repeats: int) -> tuple[float, float]:
    """Seconds per step, every rank at once inside the Horovod world: the kernel alone, and the
    kernel followed by an allreduce of ``nbytes`` that the next step's kernel waits for, as a
    training step issues its gradient's (computed in the step, reduced, applied before the
    next), STEPS_PER_CALL steps a call, the two calls alternated. Less the kernel and the bare
    allreduce, what a collective inside a step costs that neither measures: TF handing the
    tensor to Horovod's background thread mid-graph and waiting on its callback, the thread's
    cycles on the rank's core, the other rank arriving later."""
    y, g = tf.random.normal([128, 128], seed=1), tf.zeros([max(nbytes // 4, 1)])
    count = tf.constant(iterations)

    @tf.function
    def shaped(y, g, iterations):
        for _ in range(STEPS_PER_CALL):
            y = _kernel(y, iterations)
            g = hvd.allreduce(g + tf.reduce_mean(y) * 1e-30, op=hvd.Average)  # Horovod: the step's collective
            y = y + g[0] * 1e-30
        return y, g

    calls = {"kernel": lambda: _kernel_steps(y, g, count)[0], "shaped": lambda: shaped(y, g, count)[0]}
    for call in calls.values():
        for _ in range(5):
            call().numpy()
    times: dict = {name: [] for name in calls}
    for rep in range(repeats):  # the same order on every rank (shaped is collective)
        for name in (list(calls) if rep % 2 else list(calls)[::-1]):
            started = time.perf_counter()
            calls[name]().numpy()
            times[name].append(time.perf_counter() - started)
    return (statistics.median(times["kernel"]) / STEPS_PER_CALL,
            statistics.median(times["shaped"]) / STEPS_PER_CALL)


def main() -> None:
    parser = argparse.ArgumentParser()
    sizes = os.environ.get(SIZES_ENV, "4096 65536 262144 1048576")
    parser.add_argument("--sizes", type=int, nargs="+", default=[int(s) for s in sizes.split()])
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--tensors", type=int, default=8,
                        help="pieces the per-tensor measurement splits --split-bytes into")
    parser.add_argument("--split-bytes", type=int, default=0, help="default: the median size")
    parser.add_argument("--step", type=float, nargs=2, metavar=("BYTES", "SECONDS"),
                        default=[float(v) for v in os.environ.get(STEP_ENV, "0 0.0003").split()],
                        help="gradient bytes (default: the median size) and 1-rank step seconds "
                             "the step-shaped loop imitates")
    args, _ = parser.parse_known_args()  # the harness passes training hyperparameters too
    step_bytes = int(args.step[0]) or sorted(args.sizes)[len(args.sizes) // 2]
    alone_step, iterations = kernel_alone(args.step[1], step_bytes, repeats=60)
    hvd.init()
    # Horovod: every rank runs the same kernel length (rank 0's), or one would wait for the other.
    iterations = int(hvd.broadcast(tf.constant(iterations), 0).numpy())
    alone, together = compute_contention()
    if hvd.rank() == 0:
        print(f"advisor-probe compute alone={alone:.6g} together={together:.6g}", flush=True)
    kernel_step, shaped_step = step_shaped(step_bytes, iterations, repeats=120)
    if hvd.rank() == 0:
        print(f"advisor-probe step alone={alone_step:.6g} kernel={kernel_step:.6g} shaped={shaped_step:.6g} "
              f"steps={STEPS_PER_CALL} bytes={step_bytes}", flush=True)

    @tf.function
    def step(x):
        return hvd.allreduce(x, op=hvd.Average)

    @tf.function
    def nothing(x):
        return x + 0.0  # the call without the collective: its overhead, to subtract (bytes=0)

    @tf.function
    def each(tensors):
        # As DistributedOptimizer reduces gradients: one allreduce op per tensor, fused by
        # Horovod into one collective, each op still handled on its own.
        return [hvd.allreduce(t, op=hvd.Average) for t in tensors]

    @tf.function
    def each_nothing(tensors):
        return [t + 0.0 for t in tensors]

    split = args.split_bytes or sorted(args.sizes)[len(args.sizes) // 2]
    pieces = max(args.tensors, 2)
    calls = {0: (nothing, tf.ones([1], tf.float32))}
    calls.update({size: (step, tf.ones([max(size // 4, 1)], tf.float32)) for size in args.sizes})
    one_list = [tf.ones([max(split // 4, 1)], tf.float32)]
    many_list = [tf.ones([max(split // 4 // pieces, 1)], tf.float32) for _ in range(pieces)]
    calls.update({"each 1": (each, one_list), "nothing 1": (each_nothing, one_list),
                  f"each {pieces}": (each, many_list), f"nothing {pieces}": (each_nothing, many_list)})
    for fn, tensor in calls.values():
        for _ in range(20):
            tf.nest.map_structure(lambda r: r.numpy(), fn(tensor))
    # Round-robin over the calls, rotated each round (the same order on every rank: they are
    # collectives): a drift over the probe's seconds (the other rank still warming up, the
    # machine's other users) falls on every size alike instead of bending the line.
    times: dict = {name: [] for name in calls}
    order = list(calls)
    for rep in range(args.repeats):
        shift = rep % len(order)
        for name in order[shift:] + order[:shift]:
            fn, tensor = calls[name]
            started = time.perf_counter()
            tf.nest.map_structure(lambda r: r.numpy(), fn(tensor))
            times[name].append(time.perf_counter() - started)
    if hvd.rank() == 0:
        figure = {name: fastest_window(values) for name, values in times.items()}
        for size in args.sizes + [0]:
            print(f"advisor-probe bytes={size} seconds={figure[size]:.6g}", flush=True)
        # What each tensor past the first adds: the same bytes as `pieces` tensors vs as one,
        # each less its call's own overhead (a list of that many inputs, no collective).
        extra = ((figure[f"each {pieces}"] - figure[f"nothing {pieces}"])
                 - (figure["each 1"] - figure["nothing 1"])) / (pieces - 1)
        print(f"advisor-probe per_tensor={max(extra, 0.0):.6g} tensors={pieces} bytes={split}", flush=True)
        print("trainpipe-metrics epoch=1 samples_per_sec=1", flush=True)


if __name__ == "__main__":
    main()
