"""The README's ten-line tour, as a newcomer runs it: every line as written, top to bottom, in a
fresh workdir, and what three of its runs must have done; then the next section's
``predict new-rows.csv digit.png``. Slow (four whole pipelines):

    .venv/bin/pytest tests/test_readme_tour.py -m slow
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from tests.test_readme import README, REPO

AWS_COMMANDS = ("upsert", "start")  # "an AWS account from here on": each refuses in one line here


def tour_lines() -> list[str]:
    """The README's tour: each line of its first bash block, comment dropped."""
    block = README.split("## A ten-line tour", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    return [re.sub(r"\s+#.*$", "", line).strip() for line in block.splitlines() if line.strip()]


def use_the_model_line(command: str) -> str:
    """The README's ``trainpipe <command> ...`` line in "Use the model", comment dropped."""
    block = README.split("## Use the model", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    (line,) = [ln for ln in block.splitlines() if f"trainpipe {command} " in ln]
    return re.sub(r"\s+#.*$", "", line).strip()


def check_what_the_tour_line_did(line: str, done: subprocess.CompletedProcess, work: Path) -> None:
    """What three of the tour's runs must have done, beyond exiting 0: the pipeline's own
    end-to-end checks, made on the tour's runs rather than on runs of their own (minutes:
    tests/pipeline/local/test_images_end_to_end.py's image-tree run is the tour's)."""
    import tarfile

    from pipeline.definition import build as D
    from pipeline.local.store.registry import Registry

    runs = sorted((work / "runs").iterdir())
    steps = {s["name"]: s for s in json.loads((runs[-1] / "execution.json").read_text())["steps"]}
    registered = Registry(work / "registry.sqlite").list()
    if "TrainInputMode=Pipe" in line:
        # 2 hosts x 2 processes, Pipe, ShardedByS3Key: each rank on its host, FIFOs cleaned
        # up, the model registered (the second version: make run's table model is the first).
        assert [p.version for p in registered] == [1, 2]
        assert registered[-1].metrics["metrics"]["accuracy"]["value"] >= 0.9
        assert steps[D.STEP_CONDITION]["properties"] == {"Outcome": True}
        assert steps[D.STEP_FAIL]["status"] == "NotExecuted"
        train = steps[D.STEP_TRAIN]
        job = Path(train["job_dir"])
        assert sorted(p.name for p in (job / "logs").glob("*.rank-*.log")) == [
            "algo-1.rank-0.log", "algo-1.rank-1.log", "algo-2.rank-2.log", "algo-2.rank-3.log"]
        assert "train Pipe/ShardedByS3Key" in (job / "job.log").read_text()
        assert not list(job.glob("hosts/*/input/data/*_[0-9]*")), "Pipe FIFOs left behind"
        model = work / "store" / train["properties"]["ModelArtifacts"]["S3ModelArtifacts"][5:]
        with tarfile.open(model) as tar:
            assert any(n.startswith("1/") and n.endswith("saved_model.pb") for n in tar.getnames())
    elif "digits-images" in line:
        assert [p.version for p in registered] == [1, 2, 3]
        log = (Path(steps[D.STEP_TRAIN]["job_dir"]) / "job.log").read_text()
        assert "model small_cnn on 32x32 images" in log, log[-2000:]
    elif "--definition pipeline.json" in line:
        # The definition make run interpreted, from its file: the same pipeline (issue 49: it was
        # one named after the file), so make run's steps are cache hits and no version is added.
        from pipeline.settings import Settings

        said = next(ln for ln in done.stdout.splitlines() if ln.startswith("trainpipe run --local: execution "))
        assert f" of {Settings().pipeline_name}, " in said, said
        assert [p.version for p in registered] == [1, 2, 3]
        assert all(steps[name]["status"] == "Succeeded" and steps[name].get("cache_hit")
                   for name in (D.STEP_PREPROCESS, D.STEP_TRAIN, D.STEP_EVALUATE))


def check_the_tuned_run(work: Path) -> None:
    from mlflow import MlflowClient

    from pipeline.definition import build as D
    from pipeline.local.store.registry import Registry
    from pipeline.settings import Settings
    from pipeline.tracking import records as R
    from pipeline.tracking import target as T

    runs = sorted((work / "runs").iterdir())
    steps = {s["name"]: s for s in json.loads((runs[-1] / "execution.json").read_text())["steps"]}
    best = steps[D.STEP_TUNE]["properties"]["BestTrainingJob"]
    assert [p.version for p in Registry(work / "registry.sqlite").list()] == [1, 2, 3, 4]
    client = MlflowClient(T.embedded(work).uri)
    (execution,) = client.search_runs([client.get_experiment_by_name(Settings().pipeline_name).experiment_id],
                                      filter_string=f"tags.`{R.TAG_EXECUTION}` = '{runs[-1].name}' "
                                                    f"and tags.`{R.TAG_TUNED}` = 'true'")
    assert execution.data.params["BatchSize"] == best["TunedHyperParameters"]["batch-size"]
    assert "test_accuracy" in execution.data.metrics


@pytest.mark.slow
@pytest.mark.timeout(3600)  # four whole pipeline runs: over the suite's 600 s on a busy machine
def test_the_readme_tour_runs_top_to_bottom_in_a_fresh_workdir(tmp_path):
    """Issue 36: every line of the tour, as written, in a fresh workdir and folder; then a run
    with ``--tune 2`` (issue 49), and the next section's ``predict new-rows.csv digit.png`` with
    both kinds registered. ``make``
    keeps its install stamp as it is (``make test`` installed; the tour is not the install)."""
    work = tmp_path / "work"
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "TRAINPIPE_"))},
           "TRAINPIPE_WORKDIR": str(work), "AWS_CONFIG_FILE": os.devnull,
           "AWS_SHARED_CREDENTIALS_FILE": os.devnull, "AWS_EC2_METADATA_DISABLED": "true"}

    def run(line: str) -> subprocess.CompletedProcess:
        line = line.replace(".venv/bin/", f"{REPO}/.venv/bin/")
        if line.startswith("make "):
            line = f"make -C {REPO} -o .venv/.trainpipe-installed " + line[len("make "):]
        return subprocess.run(["bash", "-o", "pipefail", "-c", line], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=1200)

    lines = tour_lines()
    assert len(lines) == 10 and lines[0] == "make run", lines
    for line in lines:
        done = run(line)
        if shlex.split(line)[1] in AWS_COMMANDS:
            assert done.returncode == 2, f"{line}: exit {done.returncode}\n{done.stderr[-2000:]}"
            assert len(done.stderr.strip().splitlines()) == 1 and "error:" in done.stderr, done.stderr
        else:
            assert done.returncode == 0, f"{line}: exit {done.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
            check_what_the_tour_line_did(line, done, work)

    # Issue 49: tuning, as docs/tuning.md runs it, kept small (2 trials of 1 epoch, side by side;
    # the processing is make run's, cached): the best trial's model registered, the execution's
    # MLflow run tagged tuned with the best trial's values, the tuning job described.
    tuned = run(".venv/bin/trainpipe run --local --tune 2 -p Epochs=1 -p AccuracyThreshold=0")
    assert tuned.returncode == 0, tuned.stdout[-3000:] + tuned.stderr[-2000:]
    assert "best of 2 trials: " in tuned.stdout
    check_the_tuned_run(work)

    # Both kinds are registered now: the next section's predict sends each file to its own.
    store = work / "store" / "trainpipe-artifacts-placeholder" / "trainpipe" / "data"
    table = next((store / "digits").glob("*.csv")).read_text().splitlines()
    label = table[0].split(",").index("label")
    rows = [",".join(c for i, c in enumerate(row.split(",")) if i != label) for row in table[:4]]
    (tmp_path / "new-rows.csv").write_text("\n".join(rows) + "\n")  # the header and 3 rows, no label
    (tmp_path / "digit.png").write_bytes(next((store / "digits-images").rglob("*.png")).read_bytes())
    predicted = run(use_the_model_line("predict") + " --json")
    assert predicted.returncode == 0, predicted.stderr[-2000:]
    answers = [json.loads(a) for a in predicted.stdout.splitlines()]
    assert [a["input"] for a in answers] == ["new-rows.csv:1", "new-rows.csv:2", "new-rows.csv:3", "digit.png"]
