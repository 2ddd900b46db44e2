"""The GPipe bubble and DDP-vs-Horovod benchmarks (issue 45) print their RESULT lines as
numbers: the figures' names and form, never their values (timings on shared cores vary)."""

from __future__ import annotations

import math
import re

import pytest

pytest.importorskip("torch")

from benchmarks.training import ddp_vs_horovod, gpipe_bubble  # noqa: E402

RESULT = re.compile(r"^RESULT (\S+) (\S+) target (\S+)$", re.MULTILINE)


def test_the_assumptions_read_from_timelines_give_equal_stages_no_imbalance_and_no_overhead():
    # Two equal stages, M=4, each busy 4 micro-batches of 10 ms (CPU the same), a window of 5 slots.
    lines = [f"trainpipe-gpipe stage={s} stages=2 micro_batches=4 steps=2 busy=0.0800 busy_cpu=0.0800 "
             "window=0.1000 idle_share=0.2000 gpipe_idle_share=0.2000 last_step_ms=F0:0-1" for s in (0, 1)]
    ratio, implied, overhead = gpipe_bubble._assumptions(lines, 4)
    assert ratio == pytest.approx(1.0) and implied == pytest.approx(0.0) and overhead == pytest.approx(0.0)
    # The second stage 10% costlier in CPU: an error the costs alone imply, above zero.
    lines[1] = lines[1].replace("busy_cpu=0.0800", "busy_cpu=0.0880")
    ratio, implied, _ = gpipe_bubble._assumptions(lines, 4)
    assert ratio == pytest.approx(1.1) and implied > 0.02


@pytest.mark.slow
def test_gpipe_bubble_prints_its_results_as_numbers(capfd):
    assert gpipe_bubble.main(["--repeats", "1", "--steps", "1", "--batch", "64", "--layers", "4"]) == 0
    found = dict((name, value) for name, value, _ in RESULT.findall(capfd.readouterr().out))
    for name in ("gpipe_bubble_error", "gpipe_m8_vs_m1", "gpipe_stage_imbalance",
                 "gpipe_bubble_error_from_stage_costs", "gpipe_overhead_share"):
        assert math.isfinite(float(found[name])), (name, found)


@pytest.mark.slow
def test_one_process_of_pytorch_prints_its_images_per_second(capsys):
    assert ddp_vs_horovod.main(["--single", "torch", "--batch", "8"]) == 0
    rate = ddp_vs_horovod.SINGLE_RE.findall(capsys.readouterr().out)
    assert rate and float(rate[-1]) > 0
