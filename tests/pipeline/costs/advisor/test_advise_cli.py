"""``trainpipe advise`` over a workdir of recorded runs, as a user runs it."""

from __future__ import annotations

from pipeline.cli.main import main
from tests.pipeline.costs.advisor.fixtures import recorded_workdir, write_run


def test_advise_prints_model_error_predictions_knee_recommendation_and_plot(tmp_path, capsys):
    workdir = recorded_workdir(tmp_path / "wd")
    # A fourth run: 3 runs fit the model's 3 terms exactly, and recommend nothing (issue 49).
    write_run(workdir, "r4", hosts=1, ppn=2, batch=32, step_seconds=[0.06, 0.0023, 0.0023, 0.0023],
              cpu_seconds=[0.02, 0.0021, 0.0021, 0.0020])
    plot = tmp_path / "advise.png"
    assert main(["advise", "--workdir", str(workdir), "--instance-types", "ml.c5.xlarge", "ml.p3.2xlarge",
                 "--max-workers", "4", "--goal", "cheapest", "--deadline", "1", "--plot", str(plot)]) == 0
    out = capsys.readouterr().out
    assert "4 run(s) measured (local: 4)" in out
    assert "step(n) = compute(n) + wait(n) + in_step(n) + max(0, allreduce(n) - overlap x 2/3 x compute(n))" in out
    assert "gradient 17,226 parameters x 4 B (fp32 allreduce)" in out
    assert "its error on the runs it has seen (local)" in out and "leave-1-out" in out
    assert "<- knee" in out
    assert "ml.p3.2xlarge: no measured run on it" in out and "-p TrainingInstanceType=ml.p3.2xlarge" in out
    assert "recommendation (cheapest, time <= 1 h): TrainingInstanceType=ml.c5.xlarge TrainingInstanceCount=1" in out
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_advise_learns_from_every_recorded_run(tmp_path, capsys):
    workdir = recorded_workdir(tmp_path / "wd")
    main(["advise", "--workdir", str(workdir), "--plot", str(tmp_path / "a.png")])
    before = capsys.readouterr().out
    # A fourth run, 4 ranks on the 2 cores, much slower than the model so far predicts.
    write_run(workdir, "r4", hosts=1, ppn=4, batch=32, step_seconds=[0.1, 0.012, 0.012, 0.012],
              cpu_seconds=[0.02, 0.002, 0.002, 0.002])
    main(["advise", "--workdir", str(workdir), "--plot", str(tmp_path / "b.png")])
    after = capsys.readouterr().out
    assert "fit on 4 run(s)" in after and "r4/TrainModel" in after
    assert "refit on 3 multi-rank run(s)" in after
    assert before.split("model for local")[1].split("its error")[0] != after.split("model for local")[1].split("its error")[0]


def test_advise_without_runs_and_with_a_missing_price_say_what_to_do(tmp_path, capsys):
    assert main(["advise", "--workdir", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "run `trainpipe run --local`" in err
    workdir = recorded_workdir(tmp_path / "wd")
    assert main(["advise", "--workdir", str(workdir), "--instance-types", "ml.m5.xlarge",
                 "--region", "ap-east-1", "--plot", str(tmp_path / "c.png")]) == 0
    out = capsys.readouterr().out
    assert "no price for ml.m5.xlarge in ap-east-1" in out and "pass --price ml.m5.xlarge=USD_PER_HOUR" in out


def test_advise_models_the_runs_of_one_steps_per_execution(tmp_path, capsys):
    """Runs recorded before StepsPerExecution count as 1; two runs at 16 outnumber them."""
    workdir = recorded_workdir(tmp_path / "wd")  # 3 runs, no steps-per-execution: 1
    for name, ppn in (("s1", 1), ("s2", 2), ("s3", 2), ("s4", 1)):
        write_run(workdir, name, hosts=1, ppn=ppn, batch=32, step_seconds=[0.05, 0.0008, 0.0008, 0.0008],
                  cpu_seconds=[0.02, 0.0008, 0.0008, 0.0008], steps_per_execution=16)
    assert main(["advise", "--workdir", str(workdir), "--plot", str(tmp_path / "a.png")]) == 0
    out = capsys.readouterr().out
    assert ("local: modelling the 4 run(s) at StepsPerExecution=16; left out 3 at 1 (a step's fixed cost "
            "depends on it: run again at 16 to use them)") in out
    assert "fit on 4 run(s)" in out and "s2/TrainModel" in out and "r2/TrainModel" not in out


def test_one_run_is_too_few_to_recommend_from(tmp_path, capsys):
    """Issue 49: with one run the fit's error on it was 0% by construction, and advise
    recommended a layout from it. A fit of k terms needs k + 1 runs before its error shows."""
    workdir = tmp_path / "wd"
    write_run(workdir, "s1", hosts=1, ppn=1, batch=32, step_seconds=[0.05, 0.0020, 0.0021, 0.0019],
              cpu_seconds=[0.02, 0.0020, 0.0021, 0.0019])
    assert main(["advise", "--workdir", str(workdir), "--plot", str(tmp_path / "a.png")]) == 0
    out = capsys.readouterr().out
    assert ("local: 1 run(s) for a fit of 1 term(s): its error on them shows nothing until it has 2; its "
            "predictions are shown, nothing is recommended from them: run again at another batch size or "
            "layout (e.g. -p BatchSize=64, or -p TrainingInstanceCount=2)") in out
    assert "recommendation (fastest): none: " in out and "TrainingInstanceCount=1 x" not in out
    # With the fixture's three runs (1 per-sample term, overlap and scale: 3 terms), four runs
    # give the fit a residual, and a recommendation.
    recorded_workdir(workdir)
    write_run(workdir, "r4", hosts=1, ppn=2, batch=32, step_seconds=[0.06, 0.0023, 0.0023, 0.0023],
              cpu_seconds=[0.02, 0.0021, 0.0021, 0.0020])
    assert main(["advise", "--workdir", str(workdir), "--plot", str(tmp_path / "b.png")]) == 0
    out = capsys.readouterr().out
    assert "too few runs" not in out and "shows nothing until" not in out
    assert "recommendation (fastest, no constraint): run --local" in out
    # Three runs for the usual three terms are as few (docs/cost.md): said, nothing recommended.
    three = recorded_workdir(tmp_path / "three")
    assert main(["advise", "--workdir", str(three), "--plot", str(tmp_path / "c.png")]) == 0
    out = capsys.readouterr().out
    assert "local: 3 run(s) for a fit of 3 term(s): its error on them shows nothing until it has 4" in out
    assert "recommendation (fastest): none: " in out


def test_predicted_runs_include_the_measured_jobs_start_up_and_save(tmp_path, capsys, monkeypatch):
    """Issue 49: the plot drew predicted runs of 0.1-0.3 s beside measured jobs of 20-28 s: the
    prediction left out start-up and saving. Each predicted run now includes the measured jobs'
    median time outside their epochs, so a prediction for a measured layout is near its job."""
    import re

    workdir = tmp_path / "wd"
    table = {"kind": "table", "num_features": 6, "records": 240}
    for name, ppn, job in (("r1", 1, 20.0), ("r2", 2, 24.0), ("r3", 1, 21.0), ("r4", 2, 23.0)):
        write_run(workdir, name, hosts=1, ppn=ppn, batch=32, step_seconds=[0.05, 0.002, 0.002, 0.002],
                  cpu_seconds=[0.02, 0.002, 0.002, 0.002], job_seconds=job, workload=table)
    drawn: dict = {}
    savefig = __import__("matplotlib.figure", fromlist=["Figure"]).Figure.savefig

    def spy(fig, path, **kwargs):  # the plot's time panel: its predicted lines and measured points
        bottom = fig.axes[1]
        drawn["predicted"] = {line.get_label(): dict(zip(line.get_xdata(), line.get_ydata(), strict=True))
                              for line in bottom.lines}
        drawn["measured"] = [tuple(xy) for c in bottom.collections for xy in c.get_offsets()]
        return savefig(fig, path, **kwargs)

    monkeypatch.setattr("matplotlib.figure.Figure.savefig", spy)
    assert main(["advise", "--workdir", str(workdir), "--epochs", "4", "--plot", str(tmp_path / "a.png")]) == 0
    out = capsys.readouterr().out
    # The plot: at each measured job's layout the predicted line is within a fifth of the job.
    assert sorted(drawn["measured"]) == [(1, 20.0), (1, 21.0), (2, 23.0), (2, 24.0)]
    predicted = drawn["predicted"]["local 1 host: predicted run (start-up, save included)"]
    assert all(abs(predicted[workers] - seconds) < 0.2 * seconds for workers, seconds in drawn["measured"])
    overhead = float(re.search(r"each predicted run includes ([0-9.]+) s of start-up and model save: the median "
                               r"of 4 measured job\(s\)' wall time outside their epochs", out).group(1))
    assert 20.0 < overhead < 24.0
    one_rank = next(line for line in out.splitlines() if re.match(r"\s+local\s+1x1\s+1 ", line))
    assert 20.0 < float(one_rank.split()[-3]) * 3600 < 24.5  # run h: the measured jobs took 20-24 s
