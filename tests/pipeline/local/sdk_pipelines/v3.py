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
TORCH_IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.9.0-cpu-py312-ubuntu22.04-sagemaker"
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


# --- A whole pipeline, as sagemaker 3.27's Pipeline.definition() writes it -------------------------
SKLEARN_IMAGE = "683313688378.dkr.ecr.us-east-1.amazonaws.com/sagemaker-scikit-learn:1.2-1-cpu-py3"


def _processing_input(name: str, uri, local: str) -> dict:
    return {"InputName": name, "S3Input": {"S3Uri": uri, "LocalPath": local, "S3DataType": "S3Prefix",
                                           "S3InputMode": "File", "S3DataDistributionType": "FullyReplicated",
                                           "S3CompressionType": "None"}}


def _processing_step(name: str, script_uri: str, inputs: list, output: tuple[str, str, str], **extra) -> dict:
    out_name, out_uri, out_local = output
    return {"Name": name, "Type": "Processing", "Arguments": {
        "ProcessingResources": {"ClusterConfig": {"InstanceType": "ml.m5.xlarge", "InstanceCount": 1,
                                                  "VolumeSizeInGB": 30}},
        "AppSpecification": {"ImageUri": SKLEARN_IMAGE, "ContainerEntrypoint": [
            "python3", f"/opt/ml/processing/input/code/{script_uri.rsplit('/', 1)[-1]}"]},
        "RoleArn": ROLE,
        "ProcessingInputs": [*inputs, _processing_input("code", script_uri, "/opt/ml/processing/input/code")],
        "ProcessingOutputConfig": {"Outputs": [{"OutputName": out_name, "S3Output": {
            "S3Uri": out_uri, "LocalPath": out_local, "S3UploadMode": "EndOfJob"}}]}}, **extra}


def pipeline_definition(bucket: str, training: dict, *, preprocess_uri: str, evaluate_uri: str,
                        threshold: float = 0.5) -> dict:
    """ScriptProcessor -> ModelTrainer -> ScriptProcessor (PropertyFile) -> ConditionStep ->
    ModelStep(ModelBuilder.register()) | FailStep, in v3's shapes (a RegisterModel step named
    as the ModelStep, its container's SAGEMAKER_* variables empty, ``SkipModelValidation``)."""
    model = {"Get": "Steps.Train.ModelArtifacts.S3ModelArtifacts"}
    training = dict(training)
    training["InputDataConfig"] = [
        {**c, "DataSource": {"S3DataSource": {**c["DataSource"]["S3DataSource"], "S3Uri": {
            "Get": "Steps.Preprocess.ProcessingOutputConfig.Outputs['train'].S3Output.S3Uri"}}}}
        if c["ChannelName"] == "train" else c for c in training["InputDataConfig"]]
    register = {"Name": "Register", "Type": "RegisterModel", "Arguments": {
        "ModelPackageGroupName": "digits-v3",
        "InferenceSpecification": {"Containers": [{
            "Image": training["AlgorithmSpecification"]["TrainingImage"],
            "Environment": {"SAGEMAKER_PROGRAM": "", "SAGEMAKER_SUBMIT_DIRECTORY": "",
                            "SAGEMAKER_CONTAINER_LOG_LEVEL": "20", "SAGEMAKER_REGION": "us-east-1"},
            "ModelDataUrl": model}],
            "SupportedContentTypes": ["application/json"], "SupportedResponseMIMETypes": ["application/json"],
            "SupportedRealtimeInferenceInstanceTypes": ["ml.m5.xlarge"]},
        "ModelApprovalStatus": "Approved", "SkipModelValidation": "None"}}
    return {
        "Version": "2020-12-01", "Metadata": {},
        "Parameters": [{"Name": "InputData", "Type": "String", "DefaultValue": f"s3://{bucket}/raw"}],
        "PipelineExperimentConfig": {"ExperimentName": {"Get": "Execution.PipelineName"},
                                     "TrialName": {"Get": "Execution.PipelineExecutionId"}},
        "MlflowConfig": None,
        "Steps": [
            _processing_step("Preprocess", preprocess_uri,
                             [_processing_input("raw", {"Get": "Parameters.InputData"}, "/opt/ml/processing/input")],
                             ("train", f"s3://{bucket}/v3/train", "/opt/ml/processing/train")),
            {"Name": "Train", "Type": "Training", "Arguments": training},
            _processing_step("Evaluate", evaluate_uri, [_processing_input("model", model, "/opt/ml/processing/model")],
                             ("evaluation", f"s3://{bucket}/v3/evaluation", "/opt/ml/processing/evaluation"),
                             PropertyFiles=[{"PropertyFileName": "EvaluationReport", "OutputName": "evaluation",
                                             "FilePath": "evaluation.json"}]),
            {"Name": "Check", "Type": "Condition", "Arguments": {
                "Conditions": [{"Type": "GreaterThanOrEqualTo", "LeftValue": {"Std:JsonGet": {
                    "PropertyFile": {"Get": "Steps.Evaluate.PropertyFiles.EvaluationReport"},
                    "Path": "metrics.accuracy.value"}}, "RightValue": threshold}],
                "IfSteps": [register],
                "ElseSteps": [{"Name": "Fail", "Type": "Fail", "Arguments": {"ErrorMessage": "accuracy too low"}}]}},
        ],
    }


def model_step(name: str, model_data, image: str) -> dict:
    """ModelStep(ModelBuilder.build()) as sagemaker 3.27 emits it."""
    return {"Name": name, "Type": "Model", "Arguments": {
        "ExecutionRoleArn": ROLE,
        "PrimaryContainer": {"Image": image, "Environment": {}, "ModelDataUrl": model_data}}}


def transform_step(name: str, model_step_name: str, data: str, output: str) -> dict:
    """TransformStep(Transformer(model_name=<the ModelStep's ModelName>).transform(...)) as
    sagemaker 3.27 emits it."""
    return {"Name": name, "Type": "Transform", "Arguments": {
        "ModelName": {"Get": f"Steps.{model_step_name}.ModelName"},
        "TransformInput": {"DataSource": {"S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": data}},
                           "ContentType": "text/csv", "SplitType": "Line"},
        "TransformOutput": {"S3OutputPath": output},
        "TransformResources": {"InstanceType": "ml.m5.xlarge", "InstanceCount": 1}}}


# --- A TuningStep over a ModelTrainer, as SDK v3 emits it -------------------------------------------
# aws/sagemaker-python-sdk at 3203e4996219799e7fcad214c7925ffd8594da1f:
# sagemaker-train/src/sagemaker/train/tuner.py (HyperparameterTuner(model_trainer=...).tune():
# _upload_source_code_and_configure_hyperparameters, _build_tuning_job_config,
# _build_training_job_definition, _start_tuning_job under a PipelineSession) and
# sagemaker-mlops/src/sagemaker/mlops/workflow/steps.py (TuningStep(step_args=tuner.tune(...)),
# which drops the job name). v3's tuner does not use sm_drivers: it uploads the source_dir as a
# sourcedir.tar.gz and sets v2's script-mode hyperparameters, as plain strings (to_string, not
# JSON), like every static hyperparameter and categorical value (as_tuning_range).
def tuning_arguments(*, submit_directory: str, entry_script: str, output: str, train_uri,
                     hyperparameters: dict, ranges: dict, objective: str, metric_regex: str,
                     strategy: str = "Bayesian", max_jobs: int = 2, max_parallel_jobs: int = 1,
                     early_stopping_type: str = "Off", image: str = SKLEARN_IMAGE) -> dict:
    static = {str(k): str(v) for k, v in hyperparameters.items()}
    static.update({"sagemaker_program": entry_script, "sagemaker_submit_directory": submit_directory})
    return {
        "HyperParameterTuningJobConfig": {
            "Strategy": strategy,
            "HyperParameterTuningJobObjective": {"Type": "Maximize", "MetricName": objective},
            "ResourceLimits": {"MaxNumberOfTrainingJobs": max_jobs, "MaxParallelTrainingJobs": max_parallel_jobs},
            "ParameterRanges": {"IntegerParameterRanges": ranges.get("Integer", []),
                                "ContinuousParameterRanges": ranges.get("Continuous", []),
                                "CategoricalParameterRanges": ranges.get("Categorical", [])},
            "TrainingJobEarlyStoppingType": early_stopping_type,
        },
        "TrainingJobDefinition": {
            "AlgorithmSpecification": {"TrainingImage": image, "TrainingInputMode": "File",
                                       "MetricDefinitions": [{"Name": objective, "Regex": metric_regex}]},
            "RoleArn": ROLE,
            "InputDataConfig": [{"ChannelName": "train", "DataSource": {"S3DataSource": {
                "S3DataType": "S3Prefix", "S3Uri": train_uri, "S3DataDistributionType": "FullyReplicated"}}}],
            "OutputDataConfig": {"S3OutputPath": output},
            "ResourceConfig": {"InstanceType": "ml.m5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 30},
            "StoppingCondition": {"MaxRuntimeInSeconds": 3600},
            "StaticHyperParameters": static,
        },
    }
