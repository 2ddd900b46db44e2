"""Observations from what trainpipe records: a SageMaker training job's final metrics."""

from __future__ import annotations

import json

from pipeline.advisor.model import Layout
from pipeline.advisor.observations import from_training_job


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
    assert from_training_job({**described, "FinalMetricDataList": []}) is None
