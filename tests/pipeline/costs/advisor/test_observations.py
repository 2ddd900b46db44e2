"""Observations from what trainpipe records: a SageMaker training job's final metrics."""

from __future__ import annotations

import json

from pipeline.costs.advisor.model import Layout
from pipeline.costs.advisor.observations import from_training_job


def test_a_sagemaker_training_job_becomes_an_observation():
    described = {
        "TrainingJobName": "trainpipe-TrainModel-x",
        "ResourceConfig": {"InstanceType": "ml.p3.2xlarge", "InstanceCount": 2},
        "HyperParameters": {"batch-size": json.dumps(64), "fp16-allreduce": json.dumps(True),
                            "sagemaker_mpi_num_of_processes_per_host": json.dumps(1)},
        "FinalMetricDataList": [{"MetricName": "step_time", "Value": 0.01},
                                {"MetricName": "cpu_time", "Value": 0.004},
                                {"MetricName": "parameters", "Value": 25_000_000}],
    }
    obs = from_training_job(described)
    assert obs.layout == Layout(2, 1) and obs.batch == 64 and obs.fp16_allreduce
    assert obs.throughput == 2 * 64 / 0.01 and not obs.local
    assert obs.tensors == 1  # no gradient_tensors metric: the gradients count as one fused tensor
    assert from_training_job({**described, "FinalMetricDataList": []}) is None
    with_tensors = {**described, "FinalMetricDataList": [*described["FinalMetricDataList"],
                                                         {"MetricName": "tensors", "Value": 161}]}
    assert from_training_job(with_tensors).tensors == 161
    assert obs.step_spread == 0.0  # no step_spread metric: no wait modelled
    with_spread = {**described, "FinalMetricDataList": [*described["FinalMetricDataList"],
                                                        {"MetricName": "step_spread", "Value": 0.0007}]}
    assert from_training_job(with_spread).step_spread == 0.0007
    assert obs.steps_per_execution == 1  # no steps-per-execution hyperparameter: a call per step
    with_spe = {**described, "HyperParameters": {**described["HyperParameters"], "steps-per-execution": '"16"'}}
    assert from_training_job(with_spe).steps_per_execution == 16


def test_cloud_observations_read_every_succeeded_training_step_of_the_executions():
    import datetime as dt

    import boto3
    from botocore.stub import Stubber

    from pipeline.costs.advisor.observations import cloud_observations

    client = boto3.client("sagemaker", region_name="us-east-1", aws_access_key_id="x",
                          aws_secret_access_key="y")
    stubber = Stubber(client)
    arn = "arn:aws:sagemaker:us-east-1:123456789012:pipeline/trainpipe/execution/abc"
    job = "trainpipe-TrainModel-abc"
    stubber.add_response("list_pipeline_executions", {"PipelineExecutionSummaries": [
        {"PipelineExecutionArn": arn, "StartTime": dt.datetime(2026, 11, 1, tzinfo=dt.timezone.utc),
         "PipelineExecutionStatus": "Succeeded"}]})
    stubber.add_response("list_pipeline_execution_steps", {"PipelineExecutionSteps": [
        {"StepName": "TrainModel", "StepStatus": "Succeeded",
         "Metadata": {"TrainingJob": {"Arn": f"arn:aws:sagemaker:us-east-1:1:training-job/{job}"}}}]})
    stubber.add_response("describe_training_job", {
        "TrainingJobName": job, "TrainingJobArn": f"arn:aws:sagemaker:us-east-1:1:training-job/{job}",
        "AlgorithmSpecification": {"TrainingInputMode": "File", "TrainingImage": "img"},
        "RoleArn": "arn:aws:iam::123456789012:role/r", "OutputDataConfig": {"S3OutputPath": "s3://b/o"},
        "ResourceConfig": {"InstanceType": "ml.g5.12xlarge", "InstanceCount": 2, "VolumeSizeInGB": 30},
        "StoppingCondition": {"MaxRuntimeInSeconds": 3600},
        "CreationTime": dt.datetime(2026, 11, 1, tzinfo=dt.timezone.utc),
        "TrainingJobStatus": "Completed", "SecondaryStatus": "Completed",
        "ModelArtifacts": {"S3ModelArtifacts": "s3://b/o/m.tar.gz"},
        "HyperParameters": {"batch-size": "32", "sagemaker_mpi_num_of_processes_per_host": "4"},
        "FinalMetricDataList": [{"MetricName": "step_time", "Value": 0.02},
                                {"MetricName": "parameters", "Value": 1e6}],
    }, {"TrainingJobName": job})
    with stubber:
        found, skipped = cloud_observations(client, "trainpipe")
    assert skipped == []
    [obs] = found
    assert obs.instance_type == "ml.g5.12xlarge" and obs.layout == Layout(2, 4)
    assert obs.throughput == 8 * 32 / 0.02


def test_a_local_run_brings_its_gradient_tensor_count(tmp_path):
    from pipeline.costs.advisor.observations import local_observations
    from tests.pipeline.costs.advisor.fixtures import write_run

    write_run(tmp_path, "old", hosts=1, ppn=1, batch=32, step_seconds=[0.05, 0.002], cpu_seconds=[0.02, 0.002])
    write_run(tmp_path, "new", hosts=1, ppn=2, batch=32, step_seconds=[0.05, 0.002], cpu_seconds=[0.02, 0.002],
              tensors=6)
    found, skipped = local_observations(tmp_path)
    assert {o.source.split("/")[0]: o.tensors for o in found} == {"old": 1, "new": 6} and skipped == []


def test_a_local_run_brings_its_step_spread_median_over_the_epochs_after_the_first(tmp_path):
    from pipeline.costs.advisor.observations import local_observations
    from tests.pipeline.costs.advisor.fixtures import write_run

    write_run(tmp_path, "old", hosts=1, ppn=1, batch=32, step_seconds=[0.05, 0.002], cpu_seconds=[0.02, 0.002])
    write_run(tmp_path, "new", hosts=1, ppn=1, batch=32, step_seconds=[0.05, 0.002, 0.002, 0.002],
              cpu_seconds=[0.02, 0.002, 0.002, 0.002], step_spread=[0.009, 0.0001, 0.0003, 0.0002])
    found, _ = local_observations(tmp_path)
    assert {o.source.split("/")[0]: o.step_spread for o in found} == {"old": 0.0, "new": 0.0002}


def test_a_local_run_brings_what_its_job_took_and_emitted(tmp_path):
    from pipeline.costs.advisor.observations import local_observations
    from tests.pipeline.costs.advisor.fixtures import write_run

    write_run(tmp_path, "old", hosts=1, ppn=1, batch=32, step_seconds=[0.05, 0.002], cpu_seconds=[0.02, 0.002])
    write_run(tmp_path, "new", hosts=1, ppn=2, batch=32, step_seconds=[0.05, 0.002], cpu_seconds=[0.02, 0.002],
              job_seconds=9.5, co2e_kg=2e-5)
    found = {o.source.split("/")[0]: (o.job_seconds, o.co2e_kg) for o in local_observations(tmp_path)[0]}
    assert found == {"old": (None, None), "new": (9.5, 2e-5)}


def _with_hyperparameters(run_dir, **hps):
    """The recorded run's TrainModel step with these hyperparameters added (as SageMaker
    passes them: JSON-encoded strings)."""
    path = run_dir / "execution.json"
    doc = json.loads(path.read_text())
    doc["steps"][1]["properties"]["HyperParameters"].update(hps)
    path.write_text(json.dumps(doc))


def test_runs_of_each_strategy_are_kept_apart_and_old_runs_are_horovod(tmp_path, capsys):
    from pipeline.cli.main import main
    from pipeline.costs.advisor.observations import local_observations
    from tests.pipeline.costs.advisor.fixtures import recorded_workdir, write_run

    recorded_workdir(tmp_path)  # three runs recorded before the strategy existed
    steps = dict(step_seconds=[0.05, 0.003, 0.003], cpu_seconds=[0.02, 0.002, 0.002])
    # The entrypoint's own hyperparameter, as the definition sets it beside Horovod.
    _with_hyperparameters(write_run(tmp_path, "m1", hosts=2, ppn=1, batch=32, **steps), distribution='"mirrored"')
    # Only the flag the SageMaker SDK sets from distribution={"parameter_server": ...}.
    _with_hyperparameters(write_run(tmp_path, "p1", hosts=2, ppn=1, batch=32, **steps),
                          sagemaker_parameter_server_enabled="true")
    found, skipped = local_observations(tmp_path)
    assert skipped == []
    assert {o.source.split("/")[0]: o.group for o in found} == {
        "r1": "local", "r2": "local", "r3": "local",
        "m1": "local --distribution mirrored", "p1": "local --distribution parameter_server"}
    by_source = {o.source.split("/")[0]: o for o in found}
    # Mirrored: a step is every worker's batch; parameter server: one worker's, timed by the chief.
    assert by_source["m1"].throughput == 2 * 32 / 0.003
    assert by_source["p1"].throughput == 32 / 0.003

    assert main(["advise", "--workdir", str(tmp_path), "--plot", str(tmp_path / "a.png")]) == 0
    out = capsys.readouterr().out
    measured = out.splitlines()[0]
    assert measured.startswith("trainpipe advise: 5 run(s) measured (")
    for group in ("local: 3", "local --distribution mirrored: 1", "local --distribution parameter_server: 1"):
        assert group in measured, measured
    assert "model for local (fit on 3 run(s))" in out  # the Horovod model saw no other strategy's run
    assert "model for local --distribution mirrored (fit on 1 run(s))" in out  # allreduce, too
    # Asynchronous: no allreduce step to model; its measurement is shown, not extrapolated.
    assert ("local --distribution parameter_server: measured, not modelled (the step model is "
            "synchronous allreduce's): best 10667 samples/s (p1/TrainModel, 2x1)") in out


def test_a_sagemaker_job_brings_its_strategy():
    from pipeline.costs.advisor.observations import strategy_of

    assert strategy_of({}) == "horovod"
    assert strategy_of({"sagemaker_mpi_enabled": "true"}) == "horovod"
    assert strategy_of({"sagemaker_multi_worker_mirrored_strategy_enabled": "true"}) == "mirrored"
    assert strategy_of({"sagemaker_parameter_server_enabled": "true", "distribution": '"parameter_server"'}) \
        == "parameter_server"
    described = {
        "TrainingJobName": "j", "ResourceConfig": {"InstanceType": "ml.c5.xlarge", "InstanceCount": 2},
        "HyperParameters": {"sagemaker_parameter_server_enabled": "true"},
        "FinalMetricDataList": [{"MetricName": "step_time", "Value": 0.01},
                                {"MetricName": "parameters", "Value": 1000}],
    }
    assert from_training_job(described).group == "ml.c5.xlarge --distribution parameter_server"


def test_each_completed_trial_of_a_tuning_step_is_a_training_run_on_its_slots_cores(tmp_path):
    """--tune: every trial is a training job; advise reads each completed one, with its own
    batch size and the cores the tuning job gave it (not the machine's)."""
    from pipeline.costs.advisor.observations import training_steps
    from pipeline.local.jobs.tuning.hyperparameter_tuning import TRIALS_FILE

    def trial(name, status, batch, cpus):
        return {"name": name, "status": status, "cpus": cpus, "seconds": 12.5, "job_dir": str(tmp_path / name),
                "description": {"TrainingJobName": name, "HyperParameters": {"batch-size": batch},
                                "FinalMetricDataList": [{"MetricName": "val_accuracy", "Value": 0.9}]}}

    (tmp_path / TRIALS_FILE).write_text(json.dumps([trial("t-001", "Completed", "32", [0]),
                                                     trial("t-002", "Stopped", "64", [1])]))
    doc = {"steps": [{"name": "PreprocessData", "type": "Processing"},
                     {"name": "TuneModel", "type": "Tuning", "status": "Succeeded", "job_dir": str(tmp_path),
                      "cost": {"machine": {"cpu": "x", "cores": 2}}}]}
    steps = training_steps(doc)
    assert [(s["name"], s["type"], s.get("status")) for s in steps] == [
        ("PreprocessData", "Processing", None), ("TuneModel/t-001", "Training", "Succeeded"),
        ("TuneModel/t-002", "Training", "Stopped")]
    first = steps[1]
    assert first["cost"]["machine"]["cores"] == 1 and first["job_dir"] == str(tmp_path / "t-001")
    assert first["properties"]["HyperParameters"]["batch-size"] == "32" and first["metrics"] == {"val_accuracy": 0.9}
