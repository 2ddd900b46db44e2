"""SDK v3 training jobs, written by this test code in the format ``ModelTrainer`` uploads and
emits (sagemaker 3.27: ``model_trainer.py``, ``constants.py``, ``templates.py``): the
``code`` channel, the ``sm_drivers`` channel with ``sourcecode.json``
(``SourceCode.model_dump()``), ``distributed.json`` (``MPI``/``Torchrun``'s
``model_dump()``) and an ``sm_train.sh``, and the request with ``ContainerEntrypoint``
``["/bin/bash"]``. Checked against what sagemaker 3.27 wrote for the same settings (a
throwaway venv; see docs/sdk-v3.md). None of AWS's driver code is here: the ``sm_train.sh``
below is ours, and holds only the line that says which driver runs.
"""

from __future__ import annotations

import json
import textwrap

# sagemaker.core.training.configs.SourceCode's default ignore_patterns.
IGNORE_PATTERNS = [".env", ".git", "__pycache__", ".DS_Store", ".cache", ".ipynb_checkpoints"]
CONTAINER_ARGUMENTS = ["-c", "chmod +x /opt/ml/input/data/sm_drivers/sm_train.sh "
                             "&& /opt/ml/input/data/sm_drivers/sm_train.sh"]
TF_IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/tensorflow-training:2.14-cpu-py310"
ROLE = "arn:aws:iam::123456789012:role/test"


def source_code(entry_script=None, *, command=None, requirements=None, source_dir="code", args=None) -> dict:
    return {"source_dir": source_dir, "requirements": requirements, "entry_script": entry_script,
            "command": command, "args": args, "ignore_patterns": list(IGNORE_PATTERNS)}


def mpi(process_count_per_node=None, mpi_additional_options=None) -> dict:
    return {"process_count_per_node": process_count_per_node, "mpi_additional_options": mpi_additional_options}


def torchrun(process_count_per_node=None) -> dict:
    return {"process_count_per_node": process_count_per_node, "smp": None}


def train_script(driver: str | None, command: str | None = None) -> str:
    """Ours, in sm_train.sh's place: what the container would run last."""
    run = (f"$SM_PYTHON_CMD /opt/ml/input/data/sm_drivers/distributed_drivers/{driver}"
           if driver else f'CMD="{command}"\neval $CMD')
    return f"#!/bin/bash\nset -e\ncd /opt/ml/input/data/code\n{run}\n"


def driver_of(distributed: dict, source: dict) -> str | None:
    if source.get("command"):
        return None
    if "mpi_additional_options" in distributed:
        return "mpi_driver.py"
    if "smp" in distributed:
        return "torchrun_driver.py"
    return "basic_script_driver.py"


def put_job_files(storage, prefix: str, code: dict[str, str], source: dict, distributed: dict,
                  driver: str | None = "auto") -> tuple[str, str]:
    """Upload the two channels ModelTrainer uploads; returns (code URI, sm_drivers URI)."""
    code_uri, drivers_uri = f"{prefix}/input/code", f"{prefix}/input/sm_drivers"
    for name, text in code.items():
        storage.put_bytes(textwrap.dedent(text).encode(), f"{code_uri}/{name}")
    storage.put_bytes(json.dumps(source).encode(), f"{drivers_uri}/sourcecode.json")
    storage.put_bytes(json.dumps(distributed).encode(), f"{drivers_uri}/distributed.json")
    chosen = driver_of(distributed, source) if driver == "auto" else driver
    storage.put_bytes(train_script(chosen, source.get("command")).encode(), f"{drivers_uri}/sm_train.sh")
    return code_uri, drivers_uri


def channel(name: str, uri) -> dict:
    return {"ChannelName": name,
            "DataSource": {"S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": uri,
                                            "S3DataDistributionType": "FullyReplicated"}},
            "InputMode": "File"}


def training_arguments(code_uri: str, drivers_uri: str, *, output: str, instances: int = 1,
                       hyperparameters: dict | None = None, channels=(), image: str = TF_IMAGE,
                       instance_type: str = "ml.c5.xlarge", metrics=()) -> dict:
    """A TrainingStep's Arguments as ModelTrainer.train() under a PipelineSession emits them:
    hyperparameters as plain strings (safe_serialize), data channels, then code, sm_drivers."""
    spec = {"TrainingInputMode": "File", "TrainingImage": image,
            "ContainerEntrypoint": ["/bin/bash"], "ContainerArguments": list(CONTAINER_ARGUMENTS)}
    if metrics:
        spec["MetricDefinitions"] = list(metrics)
    return {
        "AlgorithmSpecification": spec,
        "HyperParameters": {k: v if isinstance(v, str) else json.dumps(v)
                            for k, v in (hyperparameters or {}).items()},
        "InputDataConfig": [*channels, channel("code", code_uri), channel("sm_drivers", drivers_uri)],
        "ResourceConfig": {"InstanceType": instance_type, "InstanceCount": instances, "VolumeSizeInGB": 30},
        "RoleArn": ROLE,
        "StoppingCondition": {"MaxRuntimeInSeconds": 600},
        "OutputDataConfig": {"S3OutputPath": output, "CompressionType": "GZIP"},
    }
