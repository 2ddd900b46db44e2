"""Growth: how P1-P3 scale with the data (digits x 1, 4, 16, replicated); plotted to growth.png.

Each point is the benchmark itself at that size (the sizes P1-P3 ran at in this ``make
bench`` are reused, not measured again). P1's points are its time in the training steps of
the epochs after the first (the first traces the graph: a fixed cost that moves by tenths
of a second between launches and hid the per-record cost at x1 and x4, R^2 0.03 and 0.39 in
one run), best-of-n over ``P1_REPEATS`` interleaved repetitions where this script measures
them (noise only slows a run down; P1's own run at x16 has 3 in make bench). Time should grow linearly with the
records: for each curve the script fits ``seconds = fixed + per_record x records`` and
prints the fit's R^2 (1.0 = on a straight line) and the *marginal* cost per 1000 records
between consecutive sizes; ``linearity`` is the marginal cost of the 4x->16x step over the
1x->4x step (1.0 = linear, above = worse than linear; meaningless where the fixed costs and
the noise dwarf the per-record cost, as for the whole pipeline on a few MB).

    .venv/bin/python -m benchmarks.training.scaling.growth [--sizes 1,4,16]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
from pathlib import Path

from benchmarks import harness as h

PLOT = Path(__file__).resolve().parent / "growth.png"
# P1 repetitions per point this script measures itself (each ~6 s of jobs at x1 and x4).
P1_REPEATS = 2


def figures(name: str, replicate: int, run) -> dict:
    found = h.load_figures(f"{name}-x{replicate}")
    if found is None:
        # Measure it now; its own lines are not this script's figures.
        with contextlib.redirect_stdout(io.StringIO()):
            run(replicate)
        found = h.load_figures(f"{name}-x{replicate}")
    if found is None:
        raise RuntimeError(f"{name} at x{replicate} recorded no figures")
    return found


def fit(xs: list[float], ys: list[float]) -> tuple[float, float, float]:
    """Least squares y = a + b x; returns (a, b, R^2)."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx if sxx else 0.0
    a = my - b * mx
    ss_tot = sum((y - my) ** 2 for y in ys)
    ss_res = sum((y - a - b * x) ** 2 for x, y in zip(xs, ys, strict=True))
    return a, b, (1 - ss_res / ss_tot) if ss_tot else 1.0


def describe(label: str, records: list[int], seconds: list[float]) -> tuple[float, float, float]:
    """Print one curve; returns (linearity, seconds per 1000 records, R^2 of the fit)."""
    a, b, r2 = fit([float(r) for r in records], seconds)
    marginal = [
        1000 * (seconds[i + 1] - seconds[i]) / (records[i + 1] - records[i])
        for i in range(len(records) - 1)
    ]
    points = ", ".join(f"{r} -> {s:.2f}s" for r, s in zip(records, seconds, strict=True))
    linearity = marginal[-1] / marginal[0] if len(marginal) > 1 and marginal[0] > 0 else float("nan")
    h.say(f"  {label}: {points}")
    h.say(f"      fit {a:.2f}s + {1000 * b:.3f}s per 1000 records (R^2 {r2:.3f}); marginal s/1000 "
          f"records: {', '.join(f'{m:.3f}' for m in marginal)}; linearity {linearity:.2f}")
    return linearity, 1000 * b, r2


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="benchmarks.training.scaling.growth", description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,4,16", help="digits copies, comma separated")
    parser.add_argument("--epochs", type=int, default=4, help="P1 epochs (as P1's own run)")
    parser.add_argument("--plot", type=Path, default=PLOT, help=f"where the PNG goes (default {PLOT.name})")
    parser.add_argument("--fresh", action="store_true",
                        help="measure every point now (default: reuse this make bench's P1-P3 runs)")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    if args.fresh:
        for path in h.work_dir("figures").glob("*.json"):
            path.unlink()

    from benchmarks.input import p2_pipe_reader
    from benchmarks.training.scaling import p1_local_scaling, p3_runner_overhead

    h.say(f"Growth over digits x {', '.join(map(str, sizes))}")
    p1 = {r: figures("p1", r, lambda r: p1_local_scaling.main(
        ["--quick", "--no-naive", "--replicate", str(r), "--epochs", str(args.epochs),
         "--repeats", str(P1_REPEATS)]))
        for r in sizes}
    # P2's passes take 0.05-0.2 s each, so a median of 3 still moved the fit (R^2 0.89-0.95
    # between runs); 7 cost ~5 s more.
    p2 = {r: figures("p2", r, lambda r: p2_pipe_reader.main(
        ["--replicate", str(r), "--repeats", "7", "--no-staging"])) for r in sizes}
    p3 = {r: figures("p3", r, lambda r: p3_runner_overhead.main(["--replicate", str(r), "--repeats", "1", "--no-untracked"]))
          for r in sizes}

    curves: dict[str, dict[str, tuple[list[int], list[float]]]] = {"P1": {}, "P2": {}, "P3": {}}
    h.say("P1 training: seconds in training steps after the first epoch (graph tracing, start-up, "
          "validation, checkpoints excluded; best of the repetitions; end to end in brackets), records "
          "= samples trained in those epochs:")
    records = [p1[r]["records"] for r in sizes]
    for name in ("one_process", "tuned_1x2"):
        if all(name in p1[r] for r in sizes):
            curves["P1"][name] = (records, [p1[r][name]["train_seconds"] for r in sizes])
    for r in sizes:
        line = ", ".join(f"{n} {p1[r][n]['steady']:.0f} samples/s ({p1[r][n]['wall']:.1f}s end to end)"
                         for n in ("one_process", "tuned_1x2") if n in p1[r])
        h.say(f"      x{r}: {line}")
    h.say("P2 one pass of the training input (seconds = records / records per second):")
    records = [p2[r]["records"] for r in sizes]
    for name in ("file_dataset", "pipe_dataset"):
        curves["P2"][name] = (records, [p2[r]["records"] / p2[r][name] for r in sizes])
    h.say("P3 whole pipeline (trainpipe run --local), records = raw records:")
    records = [p3[r]["records"] for r in sizes]
    curves["P3"]["pipeline wall"] = (records, [p3[r]["wall"] for r in sizes])
    curves["P3"]["outside the steps"] = (records, [p3[r]["outside"] for r in sizes])
    h.say("      overhead share: " + ", ".join(f"x{r} {100 * p3[r]['share']:.1f}%" for r in sizes))

    linearity = {}
    for bench, series in curves.items():
        for name, (xs, ys) in series.items():
            linearity[(bench, name)] = describe(f"{bench} {name}", xs, ys)

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    titles = {"P1": "P1 time in training steps (after epoch 1)", "P2": "P2 one input pass", "P3": "P3 whole local pipeline"}
    for ax, (bench, series) in zip(axes, curves.items(), strict=True):
        for name, (xs, ys) in series.items():
            ax.plot(xs, ys, marker="o", label=name)
        ax.set_title(titles[bench])
        ax.set_xlabel("records")
        ax.set_ylabel("seconds")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"Growth with data size (digits x {', '.join(map(str, sizes))})")
    fig.tight_layout()
    fig.savefig(args.plot, dpi=90)
    shown = args.plot.resolve()
    h.say(f"  plot: {shown.relative_to(h.REPO) if shown.is_relative_to(h.REPO) else shown}")
    # R^2 of seconds = fixed + per_record x records over the sizes: 1.0 = exactly linear.
    for key, (bench, name) in {"p1_tuned_1x2": ("P1", "tuned_1x2"), "p1_one_process": ("P1", "one_process"),
                               "p2_pipe": ("P2", "pipe_dataset"), "p2_file": ("P2", "file_dataset"),
                               "p3_pipeline": ("P3", "pipeline wall")}.items():
        if (bench, name) in linearity:
            _, per_1000, r2 = linearity[(bench, name)]
            # One File pass of a few MB is ~0.1 s of fixed set-up: nothing to fit a line to.
            h.result(f"growth_{key}_fit_r2", r2, "-" if key == "p2_file" else 0.9)
            h.result(f"growth_{key}_s_per_1000_records", per_1000, "-")
    h.result("growth_p3_share_at_x16" if 16 in sizes else "growth_p3_share_at_largest",
             p3[sizes[-1]]["share"], 0.05)
    return 0


if __name__ == "__main__":
    sys.exit(main())
