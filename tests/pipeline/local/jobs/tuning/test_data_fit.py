"""pipeline/local/jobs/tuning/data_fit.py: ``--tune``'s batch-size range clipped to the records of
the smallest rank, so no trial fails for a size its data cannot hold (issue 49: on penguins, 2 of
4 trials failed every run with "batch-size 223 is larger than the 120 records ...")."""

from __future__ import annotations

import json

import pytest

from pipeline.errors import UserError
from pipeline.local.jobs.tuning import data_fit
from pipeline.local.jobs.tuning import hyperparameter_ranges as hr
from pipeline.local.store.storage import LocalStorage

MANIFESTS = "s3://bucket/run/manifest"


def _request(hosts: int = 2, per_host: int = 1, mode: str = "File", low: int = 16, high: int = 256) -> dict:
    def channel(name, distribution="ShardedByS3Key"):
        return {"ChannelName": name, "InputMode": mode, "DataSource": {"S3DataSource": {
            "S3DataType": "S3Prefix", "S3Uri": f"s3://bucket/run/{name}", "S3DataDistributionType": distribution}}}

    return {
        "HyperParameterTuningJobConfig": {
            "Strategy": "Random", "ResourceLimits": {"MaxNumberOfTrainingJobs": 4, "MaxParallelTrainingJobs": 2},
            "HyperParameterTuningJobObjective": {"Type": "Maximize", "MetricName": "val_accuracy"},
            "ParameterRanges": {"IntegerParameterRanges": [
                {"Name": "batch-size", "MinValue": str(low), "MaxValue": str(high), "ScalingType": "Logarithmic"}]}},
        "TrainingJobDefinition": {
            "AlgorithmSpecification": {"TrainingInputMode": mode, "TrainingImage": "img",
                                       "MetricDefinitions": [{"Name": "val_accuracy", "Regex": "val=([0-9.]+)"}]},
            "StaticHyperParameters": {"sagemaker_mpi_enabled": "true",
                                      "sagemaker_mpi_num_of_processes_per_host": json.dumps(per_host)},
            "ResourceConfig": {"InstanceCount": hosts, "InstanceType": "ml.c5.xlarge", "VolumeSizeInGB": 30},
            "InputDataConfig": [channel("train"), channel("validation"), channel("manifest", "FullyReplicated")],
            "OutputDataConfig": {"S3OutputPath": "s3://bucket/out"}, "RoleArn": "r",
            "StoppingCondition": {"MaxRuntimeInSeconds": 600}},
    }


@pytest.fixture
def penguins(tmp_path) -> LocalStorage:
    """The train split of penguins as processing writes it for 2 ranks: 120 and 121 records."""
    storage = LocalStorage(tmp_path / "store")
    shards = [{"name": "train-00000-of-00002.tfrecord", "records": 120},
              {"name": "train-00001-of-00002.tfrecord", "records": 121}]
    storage.put_bytes(json.dumps({"split": "train", "num_features": 6, "num_classes": 3, "shards": shards}).encode(),
                      f"{MANIFESTS}/train.json")
    return storage


def test_the_batch_size_range_is_clipped_to_the_smallest_rank(penguins):
    clipped, line = data_fit.clip_batch_size(_request(), penguins)
    assert line == ("range batch-size [16, 256] clipped to [16, 120]: rank 0 of 2 reads 120 train records per "
                    "epoch, and every training step takes a whole batch on every rank")
    (batch,) = hr.parse(clipped).ranges
    assert (batch.low, batch.high) == (16, 120)
    # Every value the search can ask for fits: the study draws within the clipped range.
    assert _request()["HyperParameterTuningJobConfig"]["ParameterRanges"]["IntegerParameterRanges"][0]["MaxValue"] == "256"


def test_pipe_sharded_counts_on_the_smallest_object_shared_by_its_hosts_ranks(penguins):
    _, line = data_fit.clip_batch_size(_request(hosts=2, per_host=2, mode="Pipe"), penguins)
    assert line.startswith("range batch-size [16, 256] clipped to [16, 60]: the smallest train object's 120 "
                           "records are shared by 2 rank(s)")


def test_a_range_that_fits_or_no_manifest_is_left_as_written(penguins, tmp_path):
    assert data_fit.clip_batch_size(_request(high=100), penguins) == (_request(high=100), None)
    assert data_fit.clip_batch_size(_request(), LocalStorage(tmp_path / "empty")) == (_request(), None)


def test_a_range_whose_smallest_value_does_not_fit_is_refused_in_one_line(penguins):
    with pytest.raises(UserError) as refused:
        data_fit.clip_batch_size(_request(low=128), penguins)
    assert str(refused.value) == (
        "hyperparameter range batch-size [128, 256]: rank 0 of 2 reads 120 train records per epoch, so no batch "
        "size from 128 up fits; use fewer workers (TrainingInstanceCount, ProcessesPerHost) or more data")


def test_a_range_whose_smallest_value_alone_fits_is_refused_saying_so(penguins):
    """At MinValue == the smallest rank's records that one size fits: the refusal says so
    rather than that none does (the up-front data check had let it through)."""
    with pytest.raises(UserError) as refused:
        data_fit.clip_batch_size(_request(low=120), penguins)
    assert str(refused.value) == (
        "hyperparameter range batch-size [120, 256]: rank 0 of 2 reads 120 train records per epoch, so only batch "
        "size 120 fits, and a range needs two values; use fewer workers (TrainingInstanceCount, ProcessesPerHost) "
        "or more data")
