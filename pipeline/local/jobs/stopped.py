"""What a stopped training job leaves behind. SageMaker: StopTrainingJob sends the algorithm
SIGTERM and waits up to 120 s, "so the results of training are not lost": the model the script
saved in that time (``/opt/ml/model`` of algo-1) is uploaded and the job's description names it.
Here a job is stopped by a tuning job's early stopping (``tuning/trials.py``) or by the user's
Ctrl-C / SIGTERM of ``run --local`` (``job_steps.py``); both keep that model the same way."""

from __future__ import annotations

import json

from evaluation.report import MODEL_ARCHIVE
from pipeline.local.jobs.lifecycle import JobResult
from pipeline.local.jobs.packing import pack_directory
from pipeline.local.jobs.training import TrainingJob
from pipeline.local.store.private import write_private
from pipeline.local.store.storage import StorageError


def keep_model(job: TrainingJob, result: JobResult) -> bool:
    """Upload the stopped ``job``'s model and name it in ``result``'s description (and the
    job's description.json). False where the job never got as far as a model folder, or its
    script had saved nothing there (an empty archive would pass for a model)."""
    model = job.host_dir(job.hosts[0]) / "model"
    if not model.is_dir() or not any(model.iterdir()):
        return False
    archive = job.job_dir / "artifacts" / MODEL_ARCHIVE
    try:
        pack_directory(model, archive)
        job.storage.put_file(archive, job.model_uri)
    except (OSError, StorageError):
        return False
    result.description["ModelArtifacts"] = {"S3ModelArtifacts": job.model_uri}
    write_private(job.job_dir / "description.json", json.dumps(result.description, indent=2, default=str))
    return True
