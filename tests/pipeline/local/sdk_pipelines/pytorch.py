"""PyTorch pipelines built the way AWS's examples build them: SDK v2's ``PyTorch`` estimator
with ``distribution=`` on AWS's PyTorch 2.9 training image, evaluation in the same image, the
model registered with the newest PyTorch inference image AWS publishes."""

from __future__ import annotations

from pathlib import Path

from sagemaker.inputs import TrainingInput
from sagemaker.processing import ScriptProcessor
from sagemaker.pytorch import PyTorch
from sagemaker.workflow.parameters import ParameterFloat, ParameterString
from sagemaker.workflow.pipeline import Pipeline
from sagemaker.workflow.steps import TrainingStep

from .pipelines import ROLE, _evaluation, _preprocess_step, register_or_fail

HERE = Path(__file__).resolve().parent
ECR = "763104351884.dkr.ecr.us-east-1.amazonaws.com"
# AWS's PyTorch 2.9 training image (SDK 2.257's image_uris knows none past 2.8, so AWS's examples name
# it) and the newest PyTorch inference image AWS publishes (2.6).
TRAINING_IMAGE = f"{ECR}/pytorch-training:2.9.0-cpu-py312-ubuntu22.04-sagemaker"
INFERENCE_IMAGE = f"{ECR}/pytorch-inference:2.6.0-cpu-py312-ubuntu22.04-sagemaker"


def estimator(session, bucket: str, distribution: dict, instance_count: int = 2, processes_per_host: int = 2,
              epochs: int = 3, source_dir: Path = HERE / "torch_code") -> PyTorch:
    # SageMaker: processes per host are the instance's GPUs unless the framework parameter says
    # otherwise; a CPU instance runs one, so a CPU DDP job names its count.
    return PyTorch(entry_point="train.py", source_dir=str(source_dir), role=ROLE,
                   image_uri=TRAINING_IMAGE, instance_count=instance_count, instance_type="ml.c5.2xlarge",
                   distribution=distribution,
                   hyperparameters={"epochs": epochs, "sagemaker_mpi_num_of_processes_per_host": processes_per_host},
                   output_path=f"s3://{bucket}/models", sagemaker_session=session)


def train_step(session, bucket, distribution, data, name="TrainModel", **kwargs) -> TrainingStep:
    return TrainingStep(name=name, step_args=estimator(session, bucket, distribution, **kwargs).fit(
        inputs={"train": TrainingInput(s3_data=data, content_type="text/csv")}))


def pytorch_pipeline(session, bucket: str, name: str = "sdk-pytorch",
                     distribution: dict | None = None, source_dir: Path = HERE / "torch_code") -> Pipeline:
    """SKLearn processing -> PyTorch DDP training under torchrun on 2 instances x 2 processes ->
    evaluation -> condition -> ModelStep(model.register()) | Fail."""
    input_data = ParameterString(name="InputData", default_value=f"s3://{bucket}/digits/raw_data_all.csv")
    threshold = ParameterFloat(name="AccuracyThreshold", default_value=0.8)
    step_process = _preprocess_step(session, input_data, "ml.m5.xlarge")
    step_train = train_step(session, bucket, distribution or {"torch_distributed": {"enabled": True}},
                            step_process.properties.ProcessingOutputConfig.Outputs["train"].S3Output.S3Uri,
                            source_dir=source_dir)
    evaluator = ScriptProcessor(image_uri=TRAINING_IMAGE, command=["python3"], instance_type="ml.m5.xlarge",
                                instance_count=1, base_job_name="digits-eval", role=ROLE, sagemaker_session=session)
    step_eval, report = _evaluation("EvaluateModel", evaluator, step_train, step_process,
                                    str(HERE / "torch_code" / "evaluate.py"))
    step_cond = register_or_fail(session, INFERENCE_IMAGE, step_train, step_eval, report, threshold,
                                 "sdk-pytorch-digits", "application/json")
    return Pipeline(name=name, parameters=[input_data, threshold],
                    steps=[step_process, step_train, step_eval, step_cond], sagemaker_session=session)


def launchers_pipeline(session, bucket: str, name: str = "sdk-pytorch-launchers") -> Pipeline:
    """One pytorchddp job and one mpi job on the same script, each on 1 instance x 2 processes."""
    data = ParameterString(name="TrainData", default_value=f"s3://{bucket}/digits-split/train/")
    steps = [train_step(session, bucket, {"pytorchddp": {"enabled": True}}, data, name="TrainPyTorchDDP",
                        instance_count=1, epochs=1),
             train_step(session, bucket, {"mpi": {"enabled": True, "processes_per_host": 2}}, data,
                        name="TrainMPI", instance_count=1, epochs=1)]
    return Pipeline(name=name, parameters=[data], steps=steps, sagemaker_session=session)
