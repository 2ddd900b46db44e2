"""``trainpipe start / status / executions`` against moto, and the answers moto never gives
(a Failed execution, step details) through botocore's Stubber."""

from __future__ import annotations

import datetime as dt
import io
import json

import boto3
import pytest
from botocore.stub import Stubber

from pipeline.cli.main import main
from pipeline.cloud import executions as ex
from pipeline.cloud.aws import Clients
from pipeline.definition import parameters as P
from pipeline.definition.build import STEP_EVALUATE, STEP_FAIL, STEP_PREPROCESS, STEP_TRAIN
from pipeline.errors import UserError
from tests.moto_aws import MOTO_CFN_WARNING, REGION

pytestmark = pytest.mark.filterwarnings(MOTO_CFN_WARNING)

ARN = f"arn:aws:sagemaker:{REGION}:123456789012:pipeline/trainpipe/execution/abc123def456"


@pytest.fixture(scope="module")
def definition_text() -> str:
    """A definition built once for the module (each build takes about a second)."""
    from pipeline.definition.build import build_definition
    from pipeline.settings import Settings

    return json.dumps(build_definition(Settings(bucket="tests-bucket")))


def put_objects(bucket: str, keys: list[str]) -> None:
    s3 = boto3.client("s3", region_name=REGION)
    s3.create_bucket(Bucket=bucket)
    for key in keys:
        s3.put_object(Bucket=bucket, Key=key, Body=b"0")


@pytest.fixture
def deployed(stack, definition_text):
    """The infra stack and the pipeline in it (test_upsert.py tests how it gets there), and a
    table at the default InputDataUri (start lists it to check ModelArchitecture fits)."""
    boto3.client("sagemaker", region_name=REGION).create_pipeline(
        PipelineName="trainpipe", PipelineDefinition=definition_text,
        RoleArn=stack["ExecutionRoleArn"],
    )
    put_objects("tests-bucket", ["trainpipe/data/digits/digits.csv"])
    return stack


def sent_parameters(arn: str) -> dict[str, str]:
    sagemaker = boto3.client("sagemaker", region_name=REGION)
    answer = sagemaker.list_pipeline_parameters_for_execution(PipelineExecutionArn=arn)
    return {p["Name"]: p["Value"] for p in answer["PipelineParameters"]}


def started_arn(out: str) -> str:
    return next(line.split()[1] for line in out.splitlines() if line.startswith("started "))


def execution_count() -> int:
    sagemaker = boto3.client("sagemaker", region_name=REGION)
    return len(sagemaker.list_pipeline_executions(PipelineName="trainpipe")["PipelineExecutionSummaries"])


# --- start ------------------------------------------------------------------------------------


def test_start_sends_the_overrides_checked_and_normalised(deployed, capsys):
    assert main(["start", "-p", "Epochs=4", "-p", "BaseLearningRate=1e-2",
                 "-p", "TrainInputMode=Pipe"]) == 0
    out = capsys.readouterr().out
    arn = started_arn(out)
    assert sent_parameters(arn) == {"Epochs": "4", "BaseLearningRate": "0.01", "TrainInputMode": "Pipe"}
    assert f"follow it: trainpipe status {arn}" in out


def test_start_without_overrides_uses_the_deployed_defaults(deployed, capsys):
    assert main(["start"]) == 0
    assert "parameters: the deployed defaults" in capsys.readouterr().out
    assert execution_count() == 1


@pytest.mark.parametrize(
    "argv, message",
    [
        (["-p", "Epochs=0"], "Epochs=0: must be at least 1"),
        (["-p", "Nope=1"], "unknown parameter 'Nope'"),
        # Combinations, against the deployed defaults (Epochs=10).
        (["-p", "WarmupEpochs=11"], "WarmupEpochs=11 is longer than Epochs=10"),
        (["-p", "TrainingInstanceCount=64", "-p", "ProcessesPerHost=8"], "512 shards per split"),
    ],
)
def test_bad_overrides_start_nothing(deployed, capsys, argv, message):
    assert main(["start", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert execution_count() == 0


def test_start_with_fewer_epochs_than_the_deployed_warmup_clamps_it_and_says_so(deployed, capsys):
    assert main(["start", "-p", "Epochs=1"]) == 0
    assert ("note: WarmupEpochs defaults to 2, longer than Epochs=1: warming up over 1 epoch(s) "
            "instead") in capsys.readouterr().out
    sagemaker = boto3.client("sagemaker", region_name=REGION)
    arn = sagemaker.list_pipeline_executions(PipelineName="trainpipe")["PipelineExecutionSummaries"][0][
        "PipelineExecutionArn"]
    sent = {p["Name"]: p["Value"] for p in sagemaker.list_pipeline_parameters_for_execution(
        PipelineExecutionArn=arn)["PipelineParameters"]}
    assert (sent["Epochs"], sent["WarmupEpochs"]) == ("1", "1")


def test_shard_check_is_skipped_for_own_data(deployed, capsys):
    put_objects("big", ["data/table.csv"])
    assert main(["start", "-p", "InputDataUri=s3://big/data/", "-p", "TrainingInstanceCount=64",
                 "-p", "ProcessesPerHost=8"]) == 0


def test_start_refuses_an_architecture_that_does_not_fit_the_data_in_s3(deployed, capsys):
    put_objects("photos", ["flowers/daisy/1.jpg", "flowers/rose/2.JPEG"])
    assert main(["start", "-p", "ModelArchitecture=mobilenet_v2"]) == 2  # the default: a table
    err = capsys.readouterr().err.strip()
    assert err.endswith("ModelArchitecture=mobilenet_v2 does not fit the table data under "
                        "InputDataUri=s3://tests-bucket/trainpipe/data/digits/; use one of mlp (or auto)")
    assert len(err.splitlines()) == 1
    assert main(["start", "-p", "InputDataUri=s3://photos/flowers/", "-p", "ModelArchitecture=mlp"]) == 2
    assert "ModelArchitecture=mlp does not fit the image data" in capsys.readouterr().err
    assert main(["start", "-p", "InputDataUri=s3://photos/empty/"]) == 2
    assert "no raw data under InputDataUri" in capsys.readouterr().err
    assert execution_count() == 0
    assert main(["start", "-p", "InputDataUri=s3://photos/flowers/", "-p", "ModelArchitecture=resnet50",
                 "-p", "ImageSize=224"]) == 0
    assert sent_parameters(started_arn(capsys.readouterr().out))[P.MODEL_ARCHITECTURE] == "resnet50"


def test_overrides_are_checked_against_the_deployed_parameter_list(stack, capsys):
    # An older deployment that has no Epochs parameter.
    sagemaker = boto3.client("sagemaker", region_name=REGION)
    definition = {"Version": "2020-12-01", "Steps": [],
                  "Parameters": [{"Name": P.BATCH_SIZE, "Type": "Integer", "DefaultValue": 32}]}
    sagemaker.create_pipeline(PipelineName="trainpipe", PipelineDefinition=json.dumps(definition),
                              RoleArn=stack["ExecutionRoleArn"])
    assert main(["start", "-p", "Epochs=3"]) == 2
    err = capsys.readouterr().err
    assert "the deployed pipeline has no parameter Epochs (it has BatchSize)" in err
    assert "trainpipe upsert" in err


def test_start_before_upsert(stack, capsys):
    assert main(["start"]) == 2
    assert "pipeline 'trainpipe' is not deployed in us-east-1: run `trainpipe upsert` first" in (
        capsys.readouterr().err
    )


def test_upsert_then_start_wait_on_a_succeeded_execution(stack, capsys):
    assert main(["upsert"]) == 0
    assert main(["start", "--wait", "--poll-seconds", "0", "-p", "Epochs=2"]) == 0
    captured = capsys.readouterr()
    # moto has no ListPipelineExecutionSteps: said once, plainly, and the wait goes on.
    assert "step details unavailable: this endpoint does not implement ListPipelineExecutionSteps" in (
        captured.out
    )
    assert "] Succeeded" in captured.out and "Succeeded" in captured.out.splitlines()[-1]
    assert "Traceback" not in captured.out + captured.err


# --- the answers moto does not give: Stubber ---------------------------------------------------------


def steps_answer(*steps):
    start = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    return {"PipelineExecutionSteps": [
        {"StepName": name, "StepStatus": status, "StartTime": start, **extra}
        for name, status, extra in steps
    ]}


def execution_answer(status, reason=None):
    answer = {"PipelineExecutionArn": ARN, "PipelineExecutionStatus": status,
              "CreationTime": dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)}
    if reason:
        answer["FailureReason"] = reason
    return answer


@pytest.fixture
def stubbed(deployed, definition_text, monkeypatch):
    """A SageMaker client with a Stubber in front, used by every command; moto answers the
    rest (the stack, S3)."""
    client = boto3.client("sagemaker", region_name=REGION)
    stubber = Stubber(client)

    def clients(region):
        made = Clients(region)
        made.set_client("sagemaker", client)
        return made

    monkeypatch.setattr("pipeline.cloud.account.Clients", clients)
    stubber.add_response("describe_pipeline", {"PipelineDefinition": definition_text},
                         {"PipelineName": "trainpipe"})
    stubber.add_response("start_pipeline_execution", {"PipelineExecutionArn": ARN})
    with stubber:
        yield stubber
    stubber.assert_no_pending_responses()


ACCURACY_REASON = "Test accuracy 0.42 is below AccuracyThreshold=0.9; the model was not registered."


def test_wait_on_a_failed_execution_prints_why_and_exits_non_zero(stubbed, capsys):
    arn = {"PipelineExecutionArn": ARN}
    stubbed.add_response("describe_pipeline_execution", execution_answer("Executing"), arn)
    stubbed.add_response("list_pipeline_execution_steps", steps_answer(
        (STEP_PREPROCESS, "Succeeded", {}), (STEP_TRAIN, "Executing", {})),
        {**arn, "SortOrder": "Ascending"})
    stubbed.add_response("describe_pipeline_execution",
                         execution_answer("Failed", "Step failure: One or multiple steps failed."), arn)
    stubbed.add_response("list_pipeline_execution_steps", steps_answer(
        (STEP_PREPROCESS, "Succeeded", {}), (STEP_TRAIN, "Succeeded", {}),
        (STEP_EVALUATE, "Succeeded", {}), (STEP_FAIL, "Failed", {"FailureReason": ACCURACY_REASON})),
        {**arn, "SortOrder": "Ascending"})

    assert main(["start", "--wait", "--poll-seconds", "0"]) == 1
    captured = capsys.readouterr()
    progress = [line for line in captured.out.splitlines() if line.startswith("[")]
    assert len(progress) == 2
    assert f"{STEP_PREPROCESS} Succeeded, {STEP_TRAIN} Executing" in progress[0]
    assert progress[1].split()[1] == "Failed"
    assert "execution abc123def456 Failed" in captured.err
    assert "reason: Step failure: One or multiple steps failed." in captured.err
    assert f"step {STEP_FAIL} Failed: {ACCURACY_REASON}" in captured.err


def test_credentials_expiring_during_the_wait(stubbed, capsys):
    stubbed.add_client_error("describe_pipeline_execution", "ExpiredTokenException",
                             "The security token included in the request is expired")
    assert main(["start", "--wait", "--poll-seconds", "0"]) == 2
    err = capsys.readouterr().err
    assert "the credentials expired" in err
    assert f"follow it with `trainpipe status {ARN}`" in err


def test_waiting_gives_up_after_the_timeout():
    client = boto3.client("sagemaker", region_name=REGION)
    stubber = Stubber(client)
    for _ in range(3):
        stubber.add_response("describe_pipeline_execution", execution_answer("Executing"))
        stubber.add_response("list_pipeline_execution_steps", steps_answer())
    now = [0.0]

    def sleep(seconds):
        now[0] += seconds

    with stubber, pytest.raises(UserError, match="gave up waiting after 0:01:00; the execution is still Executing"):
        ex.wait_for_execution(client, ARN, poll_seconds=40, timeout_seconds=60, sleep=sleep,
                              clock=lambda: now[0], out=io.StringIO())
    stubber.assert_no_pending_responses()


def test_a_transient_step_list_failure_is_retried_next_poll():
    client = boto3.client("sagemaker", region_name=REGION)
    stubber = Stubber(client)
    stubber.add_client_error("list_pipeline_execution_steps", "ThrottlingException", "slow down")
    stubber.add_response("list_pipeline_execution_steps", steps_answer((STEP_TRAIN, "Executing", {})))
    lister = ex.StepLister(client)
    with stubber:
        assert lister.steps(ARN) is None and "ThrottlingException" in lister.last_error
        assert lister.steps(ARN)[0]["StepName"] == STEP_TRAIN
    assert lister.unsupported_reason is None


def test_status_shows_the_steps_when_the_endpoint_has_them(deployed, monkeypatch, capsys):
    client = boto3.client("sagemaker", region_name=REGION)
    stubber = Stubber(client)
    monkeypatch.setattr("pipeline.cloud.account.Clients",
                        lambda region: _with(Clients(region), client))
    stubber.add_response("describe_pipeline_execution", execution_answer("Executing"))
    stubber.add_response("list_pipeline_execution_steps", steps_answer(
        (STEP_PREPROCESS, "Succeeded", {"CacheHitResult": {"SourcePipelineExecutionArn": ARN}}),
        (STEP_TRAIN, "Executing", {})))
    stubber.add_response("list_pipeline_parameters_for_execution",
                         {"PipelineParameters": [{"Name": "Epochs", "Value": "3"}]})
    with stubber:
        assert main(["status", ARN]) == 0
    out = capsys.readouterr().out
    assert "parameters   Epochs=3" in out
    rows = {line.split()[0]: line for line in out.splitlines() if line.split()}
    assert "cache hit" in rows[STEP_PREPROCESS]
    assert "Executing" in rows[STEP_TRAIN]


def _with(clients: Clients, sagemaker) -> Clients:
    clients.set_client("sagemaker", sagemaker)
    return clients


# --- status and executions against moto --------------------------------------------------------------


def test_status_of_the_latest_and_of_a_named_execution(deployed, capsys):
    assert main(["start", "-p", "Epochs=2"]) == 0
    first = started_arn(capsys.readouterr().out)
    assert main(["start", "-p", "Epochs=3", "--display-name", "second"]) == 0
    second = started_arn(capsys.readouterr().out)

    assert main(["status"]) == 0
    out = capsys.readouterr().out
    assert f"execution    {second}" in out and "Epochs=3" in out and "name         second" in out
    assert "status       Succeeded" in out
    assert "step details unavailable" in out

    assert main(["status", first]) == 0
    assert "Epochs=2" in capsys.readouterr().out


def test_status_takes_the_region_from_the_arn(deployed, capsys, monkeypatch):
    assert main(["start"]) == 0
    arn = started_arn(capsys.readouterr().out)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    assert main(["status", arn]) == 0
    assert "Succeeded" in capsys.readouterr().out


def test_status_with_no_executions(deployed, capsys):
    assert main(["status"]) == 2
    assert "has no executions in us-east-1 yet: run `trainpipe start`" in capsys.readouterr().err


def test_executions_table_newest_first(deployed, capsys):
    names = ["first", "second", "third"]
    for name in names:
        assert main(["start", "--display-name", name]) == 0
    capsys.readouterr()
    assert main(["executions"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["EXECUTION", "STATUS", "STARTED", "NAME", "FAILURE", "REASON"]
    assert set(lines[1]) <= {"-", " "}
    assert [line.split()[-1] for line in lines[2:]] == names[::-1]
    assert all(" Succeeded " in line for line in lines[2:])

    assert main(["executions", "--limit", "2"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 4


def test_executions_of_a_pipeline_never_run(deployed, capsys):
    assert main(["executions"]) == 0
    assert "has no executions in us-east-1 yet" in capsys.readouterr().out


def test_status_shows_what_each_job_cost_and_emitted(deployed, monkeypatch, capsys):
    client = boto3.client("sagemaker", region_name=REGION)
    stubber = Stubber(client)
    monkeypatch.setattr("pipeline.cloud.account.Clients",
                        lambda region: _with(Clients(region), client))
    job = "trainpipe-TrainModel-x"
    stubber.add_response("describe_pipeline_execution", execution_answer("Succeeded"))
    stubber.add_response("list_pipeline_execution_steps", steps_answer(
        (STEP_TRAIN, "Succeeded", {"Metadata": {"TrainingJob": {
            "Arn": f"arn:aws:sagemaker:{REGION}:123456789012:training-job/{job}"}}})))
    stubber.add_response("list_pipeline_parameters_for_execution", {"PipelineParameters": []})
    stubber.add_response("describe_training_job", {
        "TrainingJobName": job, "TrainingJobArn": f"arn:aws:sagemaker:{REGION}:1:training-job/{job}",
        "AlgorithmSpecification": {"TrainingInputMode": "File", "TrainingImage": "img"},
        "RoleArn": "arn:aws:iam::123456789012:role/r", "OutputDataConfig": {"S3OutputPath": "s3://b/o"},
        "ResourceConfig": {"InstanceType": "ml.g5.xlarge", "InstanceCount": 2, "VolumeSizeInGB": 30},
        "StoppingCondition": {"MaxRuntimeInSeconds": 3600}, "CreationTime": dt.datetime.now(dt.timezone.utc),
        "TrainingJobStatus": "Completed", "SecondaryStatus": "Completed",
        "ModelArtifacts": {"S3ModelArtifacts": "s3://b/o/m.tar.gz"},
        "TrainingTimeInSeconds": 900, "BillableTimeInSeconds": 900,
    }, {"TrainingJobName": job})
    with stubber:
        assert main(["status", ARN, "--price", "ml.g5.xlarge=2.0"]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.strip().startswith(STEP_TRAIN) and "ml.g5.xlarge" in line)
    assert "2 x ml.g5.xlarge" in row and "0.5000 h" in row and "$1.00" in row  # 2 x 900 s x $2/h
    assert "price ml.g5.xlarge: $2/h [--price given by the user]" in out
    assert "grid intensity" in out and "PUE = 1.15" in out


def test_a_deployed_pytorch_pipeline_starts_with_its_micro_batches_and_refuses_a_framework(stack, capsys):
    from pipeline.definition.build import build_definition
    from pipeline.settings import Settings

    definition = build_definition(Settings(bucket="tests-bucket"), {P.FRAMEWORK: "pytorch", P.PROCESSES_PER_HOST: "2"})
    boto3.client("sagemaker", region_name=REGION).create_pipeline(
        PipelineName="trainpipe", PipelineDefinition=json.dumps(definition), RoleArn=stack["ExecutionRoleArn"])
    put_objects("tests-bucket", ["trainpipe/data/digits/digits.csv"])
    assert main(["start", "-p", "MicroBatches=8"]) == 0
    assert sent_parameters(started_arn(capsys.readouterr().out)) == {"MicroBatches": "8"}
    # Framework picks the images and the code: a start cannot change it, and says how to.
    assert main(["start", "-p", "Framework=tensorflow"]) == 2
    err = capsys.readouterr().err
    assert "Framework is fixed when the definition is built" in err and "trainpipe upsert -p Framework=" in err
    assert execution_count() == 1
