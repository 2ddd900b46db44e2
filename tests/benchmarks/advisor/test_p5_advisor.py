"""P5's cases: every workload at every StepsPerExecution checked, each calibrated on its own."""

from __future__ import annotations

import pytest

from benchmarks.advisor import p5_advisor as p5
from training_entry.contract import (
    DEFAULT_STEPS_PER_EXECUTION,
    HP_MODEL_ARCHITECTURE,
    HP_STEPS_PER_EXECUTION,
)


def test_every_workload_is_checked_at_the_default_and_at_one_step_per_call():
    assert p5.STEPS_PER_EXECUTION == (DEFAULT_STEPS_PER_EXECUTION, 1)
    checked = p5.cases(["mlp", "cnn"], p5.STEPS_PER_EXECUTION)
    assert list(checked) == ["mlp", "mlp_spe1", "cnn", "cnn_spe1"]
    assert checked["mlp_spe1"] == ("mlp", {HP_STEPS_PER_EXECUTION: 1})
    workload, hps = checked["cnn"]
    assert workload == "cnn" and hps[HP_STEPS_PER_EXECUTION] == DEFAULT_STEPS_PER_EXECUTION
    assert hps[HP_MODEL_ARCHITECTURE] == p5.WORKLOADS["cnn"][1][HP_MODEL_ARCHITECTURE]


def test_a_value_given_twice_is_one_case():
    assert list(p5.cases(["mlp"], [1, 1, 16])) == ["mlp_spe1", "mlp"]


def test_the_observation_carries_the_cases_steps_per_execution():
    from benchmarks import harness as h
    from pipeline.costs.advisor.model import Layout
    from training_entry.contract import format_metric_line

    def line(epoch, step):
        return format_metric_line(epoch, {"step_time": step, "cpu_time": step, "parameters": 100,
                                          "step_spread": 1e-4, "throughput": 32 / step})

    run = h.TrainingRun("x", 0, 1.0, log=line(1, 0.002) + "\n" + line(2, 0.001) + "\n")
    obs = p5.observation("mlp_spe1 1x1 #1", run, Layout(1, 1), 32, {HP_STEPS_PER_EXECUTION: 1})
    assert obs.steps_per_execution == 1
    assert obs.step_seconds == 0.001  # the epoch after the first (which traces the graph)


def _run_of(epochs: dict[int, tuple[float, float, float]]):
    """A run whose metric lines carry (step, cpu, spread) per epoch."""
    from benchmarks import harness as h
    from training_entry.contract import format_metric_line

    lines = [format_metric_line(e, {"step_time": step, "cpu_time": cpu, "step_spread": spread,
                                    "parameters": 100, "throughput": 32 / step})
             for e, (step, cpu, spread) in epochs.items()]
    return h.TrainingRun("x", 0, 1.0, log="\n".join(lines) + "\n")


def test_a_run_is_its_fastest_steady_epoch_with_that_epochs_cpu_and_spread():
    from pipeline.costs.advisor.model import Layout

    # Epoch 1 (tracing) is the fastest here and must not count; epoch 3 is a quiet spell.
    run = _run_of({1: (0.0001, 0.0001, 1e-6), 2: (0.002, 0.0019, 3e-4), 3: (0.001, 0.0009, 1e-4),
                   4: (0.0025, 0.002, 5e-4)})
    best = p5.observation("mlp 1x1 #1", run, Layout(1, 1), 32, {})
    assert (best.step_seconds, best.cpu_seconds, best.step_spread) == (0.001, 0.0009, 1e-4)
    assert best.epochs_used == 3
    before = p5.observation("mlp 1x1 #1", run, Layout(1, 1), 32, {}, estimate="median")
    assert (before.step_seconds, before.cpu_seconds, before.step_spread) == (0.002, 0.0019, 3e-4)


def test_the_mlp_runs_more_epochs_than_the_cnn():
    args = p5._arguments([])
    assert args.epochs == 3 and args.mlp_epochs == 10
    assert p5.epochs_of("mlp", args) == 10 and p5.epochs_of("cnn", args) == 3
    assert p5.epochs_of("mlp", p5._arguments(["--mlp-epochs", "4"])) == 4


def _probe_log(shaped: float) -> str:
    return (f"advisor-probe step alone=0.00028 kernel=0.00029 shaped={shaped} steps=16 bytes=68904\n"
            "trainpipe-metrics epoch=1 samples_per_sec=1\n")


def test_the_probes_step_shaped_line_is_parsed():
    found = p5.parse_step(_probe_log(0.00045))
    assert found == {p5.ALONE: 0.00028, p5.KERNEL: 0.00029, p5.SHAPED: 0.00045, p5.STEP_BYTES: 68904}


def test_each_layouts_in_step_cost_comes_from_its_own_probe():
    from pipeline.costs.advisor.model import Link

    link = Link(3.0, 50e-6, "truth")  # both layouts' allreduce of these sizes, plus a 0.1 ms call
    sizes = p5._gradient_sizes(68904 // 4)
    probes = {name: {0: 1e-4, **{b: 1e-4 + link.ring_seconds(2, b) for b in sizes},
                     **p5.parse_step(_probe_log(shaped))}
              for name, shaped in (("1x2", 0.00045), ("2x1", 0.00042))}
    found = p5.in_step(probes)
    ring = link.ring_seconds(2, 68904)
    assert found["1x2"][0] == pytest.approx(0.00045 - 0.00028 - ring, rel=1e-6)
    assert found["2x1"][0] == pytest.approx(0.00042 - 0.00028 - ring, rel=1e-6)
    assert "step-shaped loop 0.450 ms - kernel alone 0.280 ms" in found["1x2"][1]


def test_the_results_model_leaves_the_in_step_term_out_and_says_what_was_measured():
    from types import SimpleNamespace

    from pipeline.costs.advisor.model import Link

    link = Link(3.0, 50e-6, "truth")
    sizes = p5._gradient_sizes(17226)
    probes = {name: {0: 1e-4, **{b: 1e-4 + link.ring_seconds(2, b) for b in sizes}, p5.PER_TENSOR: 1e-5,
                     p5.PIECES: 8, **p5.parse_step(_probe_log(0.00045))} for name in ("1x2", "2x1")}
    runs = {("mlp", "1x1"): [SimpleNamespace(parameters=17226)]}
    measured = p5.in_step(probes)["1x2"][0]
    assert measured > 0
    left_out = p5._platform("mlp", runs, probes, 2, with_in_step=False)
    assert left_out.intra.in_step_s == 0.0 and f"measured {measured * 1e6:.1f} us" in left_out.intra.in_step_source
    assert p5._platform("mlp", runs, probes, 2).intra.in_step_s == pytest.approx(measured)


def test_skipped_cases_are_left_out_of_the_check():
    args = p5._arguments(["--skip-cases", "cnn_spe1"])
    checked = p5.cases(args.workloads, args.steps_per_execution, args.skip_cases)
    assert list(checked) == ["mlp", "mlp_spe1", "cnn"]
    assert list(p5.cases(args.workloads, args.steps_per_execution)) == ["mlp", "mlp_spe1", "cnn", "cnn_spe1"]
