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
