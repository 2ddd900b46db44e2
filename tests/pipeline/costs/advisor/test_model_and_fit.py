"""The step model's terms against hand computations; calibration and learning from runs."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from pipeline.costs.advisor import fit as F
from pipeline.costs.advisor.model import Layout, Link, Platform, StepModel
from pipeline.costs.advisor.observations import Observation

FAST = Link(10.0, 5e-6, "test")
SLOW = Link(1.0, 50e-6, "test")


def platform(cores=2, shared=True, gpus=0) -> Platform:
    return Platform("p", cores, gpus, FAST, SLOW, shared_machine=shared)


def obs(layout, step, cpu=None, batch=32, params=1_000_000, source="r") -> Observation:
    return Observation(source, layout, batch, step, cpu if cpu is not None else step, params, False,
                       "local", True, 2, 3)


def test_ring_allreduce_is_the_formula():
    model = StepModel(per_sample=1e-4, fixed=1e-3, parallelism=1.0, parameters=1_000_000)
    # 4 workers on 2 hosts (the network): 2 x 3/4 x 4 MB / 1 GB/s + 2 x 3 x 50 us
    expected = 2 * 3 / 4 * 4e6 / 1e9 + 6 * 50e-6
    assert model.allreduce(Layout(2, 2), platform()) == pytest.approx(expected)
    assert model.with_(fp16_allreduce=True).gradient_bytes == 2_000_000  # fp16 halves the bytes


def test_each_gradient_tensor_past_the_first_adds_the_platforms_per_tensor_cost():
    model = StepModel(per_sample=1e-4, fixed=1e-3, parallelism=1.0, parameters=1_000_000, tensors=6)
    ring = 2 * 1 / 2 * 4e6 / 10e9 + 2 * 5e-6  # 2 ranks of one host: the FAST link
    measured = replace(platform(), per_tensor_s=30e-6)
    assert model.allreduce(Layout(1, 2), measured) == pytest.approx(ring + 5 * 30e-6)
    assert model.with_(comm_scale=2.0).allreduce(Layout(1, 2), measured) == pytest.approx(2 * (ring + 5 * 30e-6))
    assert model.allreduce(Layout(1, 2), platform()) == pytest.approx(ring)  # not measured: fused, 0
    assert model.allreduce(Layout(1, 1), measured) == 0.0  # one rank reduces nothing
    # The fit carries the runs' tensor count into the model.
    fitted = F.fit_compute([replace(obs(Layout(1, 1), 0.01), tensors=6)])
    assert fitted.tensors == 6


def test_synchronised_ranks_wait_for_the_slowest_by_the_expected_maximum_of_n():
    from pipeline.costs.advisor.model import expected_max_of_normals

    assert expected_max_of_normals(1) == 0.0
    assert expected_max_of_normals(2) == pytest.approx(1 / math.sqrt(math.pi), abs=1e-6)
    assert expected_max_of_normals(3) == pytest.approx(1.5 / math.sqrt(math.pi), abs=1e-6)
    assert expected_max_of_normals(8) == pytest.approx(1.4236, abs=1e-4)  # tabulated
    model = StepModel(per_sample=1e-4, fixed=0.0, parallelism=1.0, parameters=1_000_000, spread=2e-4)
    # The spread is the wait of one of two ranks; n ranks wait for the slowest of n.
    assert model.wait(Layout(1, 1)) == 0.0
    assert model.wait(Layout(2, 1)) == pytest.approx(2e-4)
    assert model.wait(Layout(2, 4)) == pytest.approx(2e-4 * 1.4236 / 0.56419, rel=1e-4)
    p = platform()
    layout = Layout(1, 2)
    no_wait = model.with_(spread=0.0)
    assert model.step(32, layout, p) == pytest.approx(no_wait.step(32, layout, p) + 2e-4)
    assert model.step(32, Layout(1, 1), p) == no_wait.step(32, Layout(1, 1), p)
    # Calibrated from the 1-rank runs' spreads (median); runs without the metric model none.
    runs = [replace(obs(Layout(1, 1), 0.01), step_spread=s) for s in (1e-4, 3e-4, 2e-4)]
    assert F.fit_compute(runs).spread == pytest.approx(2e-4)
    assert F.fit_compute([*runs, replace(runs[0], layout=Layout(1, 2), step_spread=9e-3)]).spread == pytest.approx(2e-4)
    old = F.fit_compute([obs(Layout(1, 1), 0.01)])
    assert old.spread == 0.0 and any("step_spread_seconds" in n for n in old.notes)
    assert any("wait for the slowest rank" in line and "0.2 ms at 2 workers" in line for line in model.describe(32, p))


def test_the_local_platform_takes_the_probes_per_tensor_figure():
    from pipeline.costs.advisor.platforms import local_platform

    probe = {"per_tensor": {"seconds": 2.5e-5, "source": "allreduce probe"}}
    assert local_platform(2, probe).per_tensor_s == 2.5e-5
    assert local_platform(2, probe).per_tensor_source == "allreduce probe"
    assert local_platform(2).per_tensor_s == 0.0 and "not measured" in local_platform(2).per_tensor_source


def test_contention_when_ranks_share_cores_and_overlap_bounded_by_compute():
    model = StepModel(per_sample=1e-4, fixed=0.0, parallelism=1.5, parameters=0)
    t1 = 32 * 1e-4
    # 2 ranks on 2 shared cores: one core each, a 1-rank step used 1.5 cores' worth.
    assert model.compute(32, Layout(1, 2), platform()) == pytest.approx(t1 * 1.5)
    # 4 ranks on 2 cores: half a core each.
    assert model.compute(32, Layout(2, 2), platform()) == pytest.approx(t1 * 1.5 * 2)
    # GPU ranks do not share: the 1-rank step.
    assert model.compute(32, Layout(1, 8), platform(gpus=8, shared=False)) == pytest.approx(t1)
    big = StepModel(per_sample=1e-4, fixed=0.0, parallelism=1.0, parameters=10_000_000, overlap=1.0)
    step = big.step(32, Layout(2, 1), platform())
    compute = big.compute(32, Layout(2, 1), platform())
    # Full overlap hides at most 2/3 of compute: the rest of the allreduce stays exposed.
    assert step == pytest.approx(compute + big.allreduce(Layout(2, 1), platform()) - 2 / 3 * compute)


def test_compute_fit_splits_fixed_and_per_sample_from_two_batch_sizes():
    runs = [obs(Layout(1, 1), 0.002 + 32 * 5e-5, batch=32), obs(Layout(1, 1), 0.002 + 128 * 5e-5, batch=128)]
    model = F.fit_compute(runs)
    assert model.per_sample == pytest.approx(5e-5)
    assert model.fixed == pytest.approx(0.002)


def test_link_fit_recovers_latency_and_bandwidth_from_a_probe():
    link = Link(2.0, 40e-6, "truth")
    probe = {0: 1e-4, **{b: 1e-4 + link.ring_seconds(2, b) for b in (10_000, 100_000, 1_000_000)}}
    fitted = F.fit_link(probe, 2, "probe")
    assert fitted.gbytes_per_s == pytest.approx(2.0, rel=1e-6)
    assert fitted.latency_s == pytest.approx(40e-6, rel=1e-6)


def test_learning_from_multi_rank_runs_refits_overlap_and_comm_and_reports_error():
    plat = platform()
    truth = StepModel(per_sample=1e-4, fixed=0.0, parallelism=1.0, parameters=2_000_000, comm_scale=2.0)
    runs = [obs(Layout(1, 1), truth.step(32, Layout(1, 1), plat), params=2_000_000, source="one")]
    for layout in (Layout(1, 2), Layout(2, 1)):
        runs.append(obs(layout, truth.step(32, layout, plat), params=2_000_000, source=str(layout)))
    calibrated_only = F.fit_compute(runs)
    assert calibrated_only.comm_scale == 1.0
    learned = F.fit(runs, plat)
    assert learned.comm_scale == pytest.approx(2.0)
    report = F.error_report(runs, plat)
    assert report.worst_abs == pytest.approx(0.0, abs=1e-9)
    assert all(row[5] is not None for row in report.rows if row[1] != "1x1")  # leave-one-out
    assert "mean |error|" in report.lines()[-1]


def test_no_single_rank_run_is_one_line_naming_what_to_run():
    with pytest.raises(Exception, match="run once with TrainingInstanceCount=1 ProcessesPerHost=1"):
        F.fit_compute([obs(Layout(1, 2), 0.01)])


def test_one_probe_size_caught_by_a_hiccup_does_not_bend_the_link():
    link = Link(1.0, 100e-6, "truth")
    probe = {b: link.ring_seconds(2, b) for b in (17_000, 69_000, 276_000, 1_100_000)}
    probe[1_100_000] *= 30  # descheduled for a while
    fitted = F.fit_link(probe, 2, "probe")
    assert fitted.ring_seconds(2, 69_000) == pytest.approx(link.ring_seconds(2, 69_000), rel=0.05)


def test_a_starved_single_rank_run_counts_its_cpu_time_as_compute():
    # Waited for a core half the time (another process held it): 4 ms wall, 2 ms CPU.
    model = F.fit_compute([obs(Layout(1, 1), 0.004, cpu=0.002)])
    assert model.t1(32) == pytest.approx(0.002)
    assert any("less than one core" in note for note in model.notes)


def test_measured_contention_slows_ranks_that_share_a_machine_only():
    model = StepModel(per_sample=1e-4, fixed=0.0, parallelism=1.0, parameters=0, contention=1.25)
    t1 = 32 * 1e-4
    assert model.compute(32, Layout(1, 1), platform()) == pytest.approx(t1)
    assert model.compute(32, Layout(2, 1), platform()) == pytest.approx(t1 * 1.25)
    assert model.compute(32, Layout(2, 1), platform(shared=False)) == pytest.approx(t1)


def test_the_wait_is_the_spread_of_calls_not_of_independent_steps():
    # The metric multiplies the spread of k-step calls' means by sqrt(k); the advisor undoes
    # it (fit.call_spread): what makes a rank wait spans whole calls.
    call = replace(obs(Layout(1, 1), 0.01), step_spread=4e-4, steps_per_execution=16)
    assert F.call_spread(call) == pytest.approx(1e-4)
    assert F.fit_compute([call]).spread == pytest.approx(1e-4)
    one_step = replace(call, steps_per_execution=1)
    assert F.fit_compute([one_step]).spread == pytest.approx(4e-4)  # one step per call: the same reading


def test_a_collective_inside_a_step_adds_the_links_in_step_cost_on_a_shared_machine_only():
    intra, inter = replace(FAST, in_step_s=40e-6, in_step_source="probe 1x2"), replace(SLOW, in_step_s=25e-6)
    shared = Platform("p", 2, 0, intra, inter, shared_machine=True)
    model = StepModel(per_sample=1e-5, fixed=0.0, parallelism=1.0, parameters=17_000)
    bare = Platform("p", 2, 0, FAST, SLOW, shared_machine=True)
    # Its own term, by layout the link's: 1 host x 2 ranks the intra-node link, 2 hosts the network.
    assert model.in_step(Layout(1, 2), shared) == 40e-6
    assert model.in_step(Layout(2, 1), shared) == 25e-6
    assert model.step(32, Layout(1, 2), shared) == pytest.approx(model.step(32, Layout(1, 2), bare) + 40e-6)
    assert model.step(32, Layout(2, 1), shared) == pytest.approx(model.step(32, Layout(2, 1), bare) + 25e-6)
    # One rank issues no collective; dedicated hosts (a GPU cluster) never measured one.
    assert model.step(32, Layout(1, 1), shared) == model.step(32, Layout(1, 1), bare)
    dedicated = Platform("g", 8, 8, intra, inter, shared_machine=False)
    assert model.in_step(Layout(1, 8), dedicated) == 0.0
    assert any("intra-node 40 us [probe 1x2]" in line and "not measured" in line
               for line in model.describe(32, shared))


def test_the_in_step_cost_is_the_step_shaped_loop_less_the_kernel_alone_less_the_allreduce():
    link = Link(2.0, 50e-6, "probe")
    ring = link.ring_seconds(2, 68_904)  # 68904 / 2 GB/s + 2 x 50 us
    fitted = F.fit_in_step(shaped=0.45e-3, alone=0.28e-3, link=link, nbytes=68_904, ranks=2, source="loop")
    assert fitted.in_step_s == pytest.approx(0.45e-3 - 0.28e-3 - ring)
    assert (fitted.in_step_source, fitted.gbytes_per_s, fitted.latency_s) == ("loop", 2.0, 50e-6)
    # Noise below the sum of its parts is no negative cost.
    assert F.fit_in_step(0.3e-3, 0.28e-3, link, 68_904, 2, "loop").in_step_s == 0.0


def test_the_local_platform_takes_the_probes_in_step_figures():
    from pipeline.costs.advisor.platforms import local_platform

    probe = {"intra": {"gbytes_per_s": 3.0, "latency_s": 5e-5, "source": "probe", "in_step_s": 4e-5,
                       "in_step_source": "loop 1x2"},
             "inter": {"gbytes_per_s": 3.0, "latency_s": 5e-5}}
    plat = local_platform(2, probe)
    assert (plat.intra.in_step_s, plat.intra.in_step_source) == (4e-5, "loop 1x2")
    assert plat.inter.in_step_s == 0.0 and plat.inter.in_step_source == "not measured"
