"""The cost and energy of a SageMaker pipeline execution: every job its steps ran, from
``DescribeTrainingJob`` / ``DescribeProcessingJob`` (billed seconds, instance type and
count, managed spot), priced by ``prices.PriceBook``."""

from __future__ import annotations

from botocore.exceptions import ClientError

from pipeline.costs.accounting import Options, cloud_job_cost
from pipeline.costs.prices import PriceBook

# Step metadata key -> (job kind, describe call, its name argument)
_JOBS = {
    "TrainingJob": ("Training", "describe_training_job", "TrainingJobName"),
    "ProcessingJob": ("Processing", "describe_processing_job", "ProcessingJobName"),
}


def execution_costs(sagemaker, steps: list[dict], region: str, book: PriceBook,
                    options: Options | None = None) -> list[dict]:
    """One document per job (``accounting.cloud_job_cost``), tagged with its step name."""
    jobs = []
    for step in steps or []:
        metadata = step.get("Metadata") or {}
        for key, (kind, call, argument) in _JOBS.items():
            arn = (metadata.get(key) or {}).get("Arn")
            if not arn:
                continue
            name = arn.rsplit("/", 1)[-1]
            try:
                described = getattr(sagemaker, call)(**{argument: name})
            except ClientError as error:
                jobs.append({"job": name, "kind": kind, "step": step["StepName"],
                             "notes": [f"{call}({name}) failed: {error}"]})
                continue
            doc = cloud_job_cost(described, kind, region, book, options)
            doc["step"] = step["StepName"]
            jobs.append(doc)
    return jobs
