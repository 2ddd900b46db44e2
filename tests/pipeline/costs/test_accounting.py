"""A SageMaker job's cost and energy from a stubbed DescribeTrainingJob, checked against the
same computation done by hand; the report's lines name every factor's source."""

from __future__ import annotations

from datetime import datetime, timezone

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
