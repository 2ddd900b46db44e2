"""A tuning request's batch-size range, clipped to the data its trials will read.

Every training step of our entrypoint takes a whole batch on every rank, so a trial whose
batch size is larger than the records of the smallest rank fails ("batch-size 223 is larger
than the 120 records ..."). A fixed range (``--tune``'s 16 to 256) on a small table would
fail such trials on every run. Before the first trial, the tuning step reads the train split's
manifest (what the processing step wrote: each shard's record count), works out the smallest
rank's records with the training entrypoint's own rule (``training_entry.input.plan``), and
lowers the range's ``MaxValue`` to it; the job log says so. Where even ``MinValue`` does not
fit, the request is refused in one line before any trial.

Only a request of our training entrypoint's shape is touched: a ``batch-size`` integer range
and a ``manifest`` channel; any other request runs as written.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping

from pipeline.errors import UserError
from pipeline.local.store.storage import StorageError
from training_entry import contract as training
from training_entry.input import plan, records

# SageMaker's framework hyperparameter (SDK v2, distribution={"mpi": ...}): ranks per host.
PROCESSES_PER_HOST = "sagemaker_mpi_num_of_processes_per_host"


def _static(value: object) -> str:
    """A static hyperparameter as the job reads it: the SDK JSON-encodes strings."""
    text = str(value)
    try:
        decoded = json.loads(text)
    except ValueError:
        return text
    return str(decoded)


def smallest_rank_records(request: Mapping, storage) -> tuple[int, str] | None:
    """(records of the rank that reads fewest train records, how that was found), or None
    where the request does not read a manifest of ours."""
    definition = request.get("TrainingJobDefinition") or {}
    channels = {c.get("ChannelName"): c for c in definition.get("InputDataConfig") or []}
    train, manifests = channels.get(training.CHANNEL_TRAIN), channels.get(training.CHANNEL_MANIFEST)
    if train is None or manifests is None:
        return None
    where = (manifests.get("DataSource") or {}).get("S3DataSource", {}).get("S3Uri", "")
    try:
        doc = json.loads(storage.read_bytes(where.rstrip("/") + "/" + records.manifest_name(training.CHANNEL_TRAIN)))
        shards = {s["name"]: int(s["records"]) for s in doc["shards"]}
    except (StorageError, OSError, ValueError, KeyError, TypeError):
        return None  # the trials' own check says what is wrong with it
    resources = definition.get("ResourceConfig") or definition.get("HyperParameterTuningResourceConfig") or {}
    hosts = int(resources.get("InstanceCount") or 1)
    per_host = int(_static((definition.get("StaticHyperParameters") or {}).get(PROCESSES_PER_HOST) or 1))
    source = train.get("DataSource", {}).get("S3DataSource", {})
    distribution = source.get("S3DataDistributionType", "FullyReplicated")
    manifest = records.Manifest(split=training.CHANNEL_TRAIN, num_features=0, num_classes=0, shards=shards)
    layout = plan.Layout(0, hosts, 0, per_host)
    if (train.get("InputMode") or definition.get("AlgorithmSpecification", {}).get("TrainingInputMode")) == "Pipe" \
            and distribution == "ShardedByS3Key":
        # Pipe + ShardedByS3Key: a rank counts on the smallest object only (plan._plan_sharded_pipe).
        smallest = min(shards.values())
        return smallest // per_host, f"the smallest train object's {smallest} records are shared by {per_host} rank(s)"
    try:
        fewest = min(plan.rank_counts(manifest, distribution, layout, training.CHANNEL_TRAIN))
    except plan.DataError:
        return None  # more ranks than shards: the trials' own check says so
    return fewest[0], f"rank {fewest[1]} of {hosts * per_host} reads {fewest[0]} train records per epoch"


def clip_batch_size(request: Mapping, storage) -> tuple[dict, str | None]:
    """(the request with its batch-size range's MaxValue at most the smallest rank's records,
    the line that says what was clipped, or None where nothing was)."""
    ranges = ((request.get("HyperParameterTuningJobConfig") or {}).get("ParameterRanges") or {})
    spec = next((r for r in ranges.get("IntegerParameterRanges") or [] if r.get("Name") == training.HP_BATCH_SIZE),
                None)
    if spec is None:
        return dict(request), None
    found = smallest_rank_records(request, storage)
    if found is None:
        return dict(request), None
    fewest, how = found
    low, high = int(float(spec["MinValue"])), int(float(spec["MaxValue"]))
    if high <= fewest:
        return dict(request), None
    if low >= fewest:
        # At low == fewest one size still fits, but a range of one value is no range to search.
        fits = (f"only batch size {low} fits, and a range needs two values" if low == fewest
                else f"no batch size from {low} up fits")
        raise UserError(f"hyperparameter range {training.HP_BATCH_SIZE} [{low}, {high}]: {how}, so {fits}; use "
                        f"fewer workers (TrainingInstanceCount, ProcessesPerHost) or more data")
    clipped = copy.deepcopy(dict(request))
    for r in clipped["HyperParameterTuningJobConfig"]["ParameterRanges"]["IntegerParameterRanges"]:
        if r.get("Name") == training.HP_BATCH_SIZE:
            r["MaxValue"] = str(fewest)
    return clipped, (f"range {training.HP_BATCH_SIZE} [{low}, {high}] clipped to [{low}, {fewest}]: {how}, and every "
                     f"training step takes a whole batch on every rank")
