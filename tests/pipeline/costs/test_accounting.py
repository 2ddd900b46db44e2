"""A SageMaker job's cost and energy from a stubbed DescribeTrainingJob, checked against the
same computation done by hand; the report's lines name every factor's source."""

from __future__ import annotations

import io
import json
from datetime import datetime, timezone
from pathlib import Path

import boto3
import pytest
from botocore.stub import Stubber

from pipeline.costs import accounting, carbon
from pipeline.costs.cloud import execution_costs
from pipeline.costs.prices import PriceBook
from tests import readme_record

REGION = "us-east-1"
JOB = "trainpipe-TrainModel-abc"
T0 = datetime(2026, 11, 1, 10, 0, tzinfo=timezone.utc)


def training_answer(**extra) -> dict:
    answer = {
        "TrainingJobName": JOB,
        "TrainingJobArn": f"arn:aws:sagemaker:{REGION}:123456789012:training-job/{JOB}",
        "AlgorithmSpecification": {"TrainingInputMode": "File", "TrainingImage": "img"},
        "RoleArn": "arn:aws:iam::123456789012:role/r",
        "OutputDataConfig": {"S3OutputPath": "s3://b/o"},
        "ResourceConfig": {"InstanceType": "ml.p3.2xlarge", "InstanceCount": 2, "VolumeSizeInGB": 30},
        "StoppingCondition": {"MaxRuntimeInSeconds": 3600},
        "CreationTime": T0,
        "TrainingJobStatus": "Completed",
        "SecondaryStatus": "Completed",
        "ModelArtifacts": {"S3ModelArtifacts": "s3://b/o/model.tar.gz"},
        "TrainingTimeInSeconds": 1800,
        "BillableTimeInSeconds": 1800,
    }
    answer.update(extra)
    return answer


def stubbed_sagemaker(*answers):
    client = boto3.client("sagemaker", region_name=REGION, aws_access_key_id="x",
                          aws_secret_access_key="y")
    stubber = Stubber(client)
    for answer in answers:
        stubber.add_response("describe_training_job", answer, {"TrainingJobName": JOB})
    return client, stubber


def test_cost_of_a_stubbed_training_job_matches_a_hand_computation():
    client, stubber = stubbed_sagemaker(training_answer())
    steps = [{"StepName": "TrainModel", "StepStatus": "Succeeded",
              "Metadata": {"TrainingJob": {"Arn": f"arn:aws:sagemaker:{REGION}:1:training-job/{JOB}"}}}]
    with stubber:
        [job] = execution_costs(client, steps, REGION, PriceBook({"ml.p3.2xlarge": 3.825}))
    # By hand: 2 instances x 1800 s = 1 instance-hour at $3.825.
    assert job["instance_hours"] == pytest.approx(1.0)
    assert job["cost_usd"] == pytest.approx(3.825)
    # Energy by hand: p3.2xlarge = 8 vCPU of an E5-2686 v4 (145 W / 36 threads) at codecarbon's
    # 0.5 load + one V100 at 300 W + 61 GiB x 3/8 W; x 2 instances x 0.5 h x PUE 1.15 x
    # Virginia's eGRID intensity.
    watts = 8 * 145 / 36 * 0.5 + 300 + 61 * 3 / 8
    kwh = watts * 2 * 0.5 / 1000 * 1.15
    virginia = carbon.codecarbon()["us_state_intensity"]["values"]["virginia"]
    assert job["energy"]["kwh"] == pytest.approx(kwh)
    assert job["energy"]["co2e_kg"] == pytest.approx(kwh * virginia / 1000)
    assert job["step"] == "TrainModel"


def test_managed_spot_is_billed_for_billable_seconds_and_shows_the_saving():
    doc = accounting.cloud_job_cost(
        training_answer(EnableManagedSpotTraining=True, TrainingTimeInSeconds=3600,
                        BillableTimeInSeconds=1080),
        "Training", REGION, PriceBook({"ml.p3.2xlarge": 3.825}))
    assert doc["cost_usd"] == pytest.approx(2 * 1080 / 3600 * 3.825)
    assert doc["spot_savings"] == pytest.approx(0.7)


def test_processing_job_is_charged_start_to_end():
    described = {"ProcessingJobName": "p", "ProcessingStartTime": T0,
                 "ProcessingEndTime": T0.replace(minute=15),
                 "ProcessingResources": {"ClusterConfig": {"InstanceType": "ml.m5.xlarge", "InstanceCount": 1}}}
    doc = accounting.cloud_job_cost(described, "Processing", REGION, PriceBook())
    assert doc["cost_usd"] == pytest.approx(0.25 * 0.23)  # the shipped table's us-east-1 rate
    assert "table" in doc["price"]["source"]


def test_a_missing_price_is_one_line_naming_what_to_pass_and_the_rest_stands():
    answer = training_answer(ResourceConfig={"InstanceType": "ml.trn1.32xlarge", "InstanceCount": 1,
                                             "VolumeSizeInGB": 30})
    doc = accounting.cloud_job_cost(answer, "Training", "eu-south-2", PriceBook(),
                                    accounting.Options(power={"ml.trn1.32xlarge": 3000}))
    assert doc["cost_usd"] is None
    readme_record.record(doc["notes"][0])
    assert doc["notes"] == ["no price for ml.trn1.32xlarge in eu-south-2 (not in the Price List API "
                            "answer nor in the shipped table prices.json): pass "
                            "--price ml.trn1.32xlarge=USD_PER_HOUR"]
    assert doc["energy"]["kwh"] == pytest.approx(3000 * 0.5 / 1000 * 1.15)
    lines = accounting.report_lines([doc], local=False)
    assert any("--price ml.trn1.32xlarge=USD_PER_HOUR" in line for line in lines)
    assert accounting.totals([doc])["cost_usd"] is None  # never a partial sum


def test_report_prints_each_factor_with_its_source():
    doc = accounting.cloud_job_cost(training_answer(), "Training", REGION, PriceBook())
    text = "\n".join(accounting.report_lines([{**doc, "step": "TrainModel"}], local=False))
    assert "TOTAL" in text and "TrainModel" in text
    assert "codecarbon 3.3.2" in text and "eGRID" in text
    assert "PUE = 1.15" in text and "sustainability" in text
    assert "NVIDIA datasheets" in text
    assert "price ml.p3.2xlarge: $3.825/h [table https://aws.amazon.com/sagemaker/pricing/" in text


# --- a stopped execution ------------------------------------------------------------------------
def _stopped_local_run(tmp_path, monkeypatch):
    """A local execution of two training steps whose second job is stopped (Ctrl-C) part way:
    the runner's job launcher is replaced, the recording around it is the real one."""
    from pipeline.local import runner as runner_module
    from pipeline.local.jobs.lifecycle import JobResult, JobStopped
    from pipeline.local.store.storage import LocalStorage
    from tests.pipeline.local.helpers import BUCKET, put_code, training_request

    storage = LocalStorage(tmp_path / "store")
    code = put_code(storage, f"s3://{BUCKET}/code/sourcedir.tar.gz", {"user.py": "print('hi')\n"})
    definition = {"Version": "2020-12-01", "Parameters": [], "Steps": [
        {"Name": name, "Type": "Training", "Arguments": training_request(code)}
        for name in ("First", "Second")]}

    def launch(self, node, request, record):
        record.attempts, record.job_name = 1, f"job-{node.name}"
        described = {**request, "TrainingJobName": record.job_name,
                     "ModelArtifacts": {"S3ModelArtifacts": f"s3://{BUCKET}/out/model.tar.gz"}}
        result = JobResult(record.job_name, "Training", "Completed", described, tmp_path, tmp_path / "log",
                           0.0, 1.0)
        if node.name == "Second":
            raise JobStopped(JobResult(**{**vars(result), "status": "Stopped"}))
        return result

    monkeypatch.setattr(runner_module.PipelineRunner, "_run_with_retries", launch)
    options = runner_module.RunOptions(workdir=tmp_path / "work", storage=storage, echo=False,
                                       stream=io.StringIO(), use_cache=False)
    return runner_module.PipelineRunner(definition, "testpipe", options).run()


def test_the_cost_table_of_a_stopped_run_lists_every_job_that_ran(tmp_path, monkeypatch):
    from pipeline.local.execution import record_from_document, summary_table

    record = _stopped_local_run(tmp_path, monkeypatch)
    assert record.status == "Stopped"
    assert [(s.name, s.status) for s in record.steps] == [("First", "Succeeded"), ("Second", "Stopped")]
    stopped = record.steps[1].cost
    assert stopped["status"] == "Stopped" and stopped["seconds"] >= 0
    assert any(note.startswith("job-Second: ran ") and note.endswith("; charged up to the stop")
               for note in stopped["notes"])
    doc = json.loads((Path(record.run_dir) / "execution.json").read_text())
    assert doc["cost"]["jobs"] == 2
    # The run's summary and `executions --local`'s (read back from execution.json) alike.
    for table in (summary_table(record), summary_table(record_from_document(doc))):
        rows = table[table.index("cost and carbon"):].splitlines()
        assert any(row.split()[0] == "First" for row in rows[2:])
        assert any(row.strip().startswith("Second (stopped)") for row in rows), table
        assert any(row.strip().startswith("TOTAL") for row in rows)


def test_a_cloud_job_stopped_before_billing_adds_nothing_and_keeps_the_totals():
    started = accounting.cloud_job_cost(training_answer(TrainingJobStatus="Stopped", BillableTimeInSeconds=900),
                                        "Training", REGION, PriceBook({"ml.p3.2xlarge": 3.825}))
    never = training_answer(TrainingJobStatus="Stopped")
    del never["BillableTimeInSeconds"], never["TrainingTimeInSeconds"]
    unbilled = accounting.cloud_job_cost(never, "Training", REGION, PriceBook({"ml.p3.2xlarge": 3.825}))
    assert started["status"] == "Stopped" and started["cost_usd"] == pytest.approx(2 * 900 / 3600 * 3.825)
    assert unbilled["cost_usd"] == 0.0 and unbilled["notes"] == [f"{JOB}: stopped before any billable time (nothing charged)"]
    total = accounting.totals([started, unbilled])
    assert total["cost_usd"] == pytest.approx(started["cost_usd"]) and total["jobs"] == 2
    assert total["energy_kwh"] == pytest.approx(started["energy"]["kwh"])
    text = "\n".join(accounting.report_lines([started, unbilled], local=False))
    assert text.count(f"{JOB} (stopped)") == 2


def test_a_job_pinned_to_some_cores_is_metered_on_those_cores_only():
    """Steps side by side (dag/scheduler.py) are each pinned to their cores: each counts its own
    cores' busy time, not the machine's, so their energies add up to the machine's once."""
    stat = ("cpu  300 0 100 1000 50 0 0 0 0 0\n"
            "cpu0 100 0 50 500 25 0 0 0 0 0\n"
            "cpu1 200 0 50 500 25 0 0 0 0 0\n"
            "intr 12345\n")
    assert accounting.busy_ticks(stat) == 400
    assert accounting.busy_ticks(stat, frozenset({0})) == 150
    assert accounting.busy_ticks(stat, frozenset({1})) == 250
    assert accounting.busy_ticks(stat, frozenset({0, 1})) == accounting.busy_ticks(stat)
