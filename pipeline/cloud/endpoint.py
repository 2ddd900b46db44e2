"""deploy: a real-time SageMaker endpoint from a model package in the Model Registry.

``plan_deploy`` only reads (the package, the endpoint if it exists, the model it serves):
``--dry-run`` stops after it, and every refusal (no approved package, a package not yet
approved, an instance type the package does not list, an endpoint busy or failed) happens
there, before anything is created. ``apply_deploy`` writes: CreateModel from the package,
CreateEndpointConfig (a new name each time: SageMaker's configs are immutable), then
CreateEndpoint, or UpdateEndpoint, which swaps the config in place with no downtime.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone

from botocore.exceptions import ClientError

from pipeline.cloud.aws import aws_errors, is_not_found
from pipeline.cloud.deploy import MANAGED_BY_TAG
from pipeline.cloud.secrets import find_secrets
from pipeline.definition.instances import LOCAL_INSTANCE_TYPES, gpus_per_instance
from pipeline.errors import UserError
from pipeline.settings import INFERENCE_INSTANCE_TYPE

APPROVED = "Approved"
IN_SERVICE = "InService"
# DescribeEndpoint's statuses after which nothing changes until someone acts.
FINAL_STATUSES = (IN_SERVICE, "Failed", "OutOfService", "UpdateRollbackFailed")
# Statuses in which SageMaker refuses UpdateEndpoint because a change is under way.
BUSY_STATUSES = ("Creating", "Updating", "SystemUpdating", "RollingBack", "Deleting")
VARIANT_NAME = "AllTraffic"
# The tag that says which package an endpoint's model and config were made from.
PACKAGE_TAG = "trainpipe:model-package"
# SageMaker's rule for model, endpoint config and endpoint names.
NAME_PATTERN = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")
NAME_MAX = 63
APPROVE_HELP = (
    "approve one: aws sagemaker update-model-package --model-package-arn ARN "
    "--model-approval-status Approved (or run the pipeline with -p ModelApprovalStatus=Approved)"
)


@dataclass(frozen=True)
class Package:
    """What deploy needs of DescribeModelPackage's answer."""

    arn: str
    group: str | None
    version: int | None
    approval_status: str
    status: str
    model_data_url: str | None
    realtime_instance_types: tuple[str, ...]

    @property
    def label(self) -> str:
        return f"{self.group} v{self.version}" if self.version is not None else self.arn

    @classmethod
    def from_description(cls, described: dict) -> Package:
        spec = described.get("InferenceSpecification") or {}
        containers = spec.get("Containers") or [{}]
        return cls(
            arn=described["ModelPackageArn"],
            group=described.get("ModelPackageGroupName"),
            version=described.get("ModelPackageVersion"),
            approval_status=described.get("ModelApprovalStatus", "(none)"),
            status=described.get("ModelPackageStatus", "Completed"),
            model_data_url=containers[0].get("ModelDataUrl"),
            realtime_instance_types=tuple(
                spec.get("SupportedRealtimeInferenceInstanceTypes") or ()),
        )


@dataclass(frozen=True)
class Deployed:
    """The endpoint as it is now, and what it serves."""

    arn: str
    status: str
    config_name: str
    model_name: str | None
    package_arn: str | None
    instance_type: str | None
    instance_count: int | None


@dataclass(frozen=True)
class DeployRequest:
    """What the user asked for, checked by ``check_request`` before any AWS call."""

    group: str
    role_arn: str
    endpoint_name: str | None = None
    version: int | None = None
    package_arn: str | None = None
    instance_type: str = INFERENCE_INSTANCE_TYPE
    instance_count: int = 1
    allow_unapproved: bool = False
    network_isolation: bool = True
    tags: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class DeployPlan:
    request: DeployRequest
    package: Package
    endpoint_name: str
    model_name: str
    config_name: str
    deployed: Deployed | None

    @property
    def creates(self) -> bool:
        return self.deployed is None

    @property
    def up_to_date(self) -> bool:
        """The endpoint already serves this package on these instances: nothing to do."""
        d, r = self.deployed, self.request
        return (d is not None and d.status == IN_SERVICE and d.package_arn == self.package.arn
                and d.instance_type == r.instance_type and d.instance_count == r.instance_count)

    def lines(self) -> list[str]:
        """The plan in words: what exists, and what apply_deploy would create or update."""
        r, d = self.request, self.deployed
        lines = [f"model package: {self.package.label} ({self.package.approval_status})  "
                 f"{self.package.arn}"]
        if self.package.model_data_url:
            lines.append(f"  model data: {self.package.model_data_url}")
        if d is not None:
            serving = d.package_arn or d.model_name or "(unknown model)"
            lines.append(f"endpoint {self.endpoint_name!r}: {d.status}, serving {serving} on "
                         f"{d.instance_count} x {d.instance_type} (config {d.config_name})")
        if self.up_to_date:
            lines.append("up to date: it already serves this package on these instances")
            return lines
        supported = self.package.realtime_instance_types
        if supported and r.instance_type not in supported:
            # For a versioned package the list is advice, not a rule SageMaker enforces; the
            # pipeline registers a CPU image chosen for INFERENCE_INSTANCE_TYPE.
            lines.append(f"note: the package lists {', '.join(supported)} for real-time "
                         f"inference, not {r.instance_type}; its image was chosen for those")
        lines += [
            f"create model {self.model_name!r} from the package (role {r.role_arn}, "
            f"network isolation {'on' if r.network_isolation else 'off'})",
            f"create endpoint config {self.config_name!r}: {r.instance_count} x {r.instance_type}",
            (f"create endpoint {self.endpoint_name!r}" if self.creates else
             f"update endpoint {self.endpoint_name!r} in place to the new config"),
        ]
        return lines


def check_request(request: DeployRequest) -> None:
    """Refuse what SageMaker would refuse, and names it would mangle, before any call."""
    if request.endpoint_name is not None and not NAME_PATTERN.match(request.endpoint_name):
        raise UserError(
            f"--endpoint-name {request.endpoint_name!r}: use 1 to 63 letters, digits and "
            "hyphens, starting and ending with a letter or digit (SageMaker's rule)"
        )
    if request.version is not None and request.version < 1:
        raise UserError(f"--version {request.version}: versions start at 1")
    if request.instance_count < 1:
        raise UserError(f"--instance-count {request.instance_count}: must be at least 1")
    kind = request.instance_type
    if kind in LOCAL_INSTANCE_TYPES or gpus_per_instance(kind) is None:
        raise UserError(
            f"--instance-type {kind!r}: not an instance type trainpipe knows for SageMaker "
            f"(pipeline/definition/instances.py); e.g. {INFERENCE_INSTANCE_TYPE}, ml.c5.xlarge, "
            "ml.g4dn.xlarge"
        )


def _describe_package(sagemaker, name: str) -> Package:
    with aws_errors(f"reading model package {name}"):
        try:
            return Package.from_description(sagemaker.describe_model_package(ModelPackageName=name))
        except ClientError as error:
            if is_not_found(error):
                raise UserError(
                    f"model package {name} does not exist in this region: list them with "
                    "aws sagemaker list-model-packages --model-package-group-name GROUP"
                ) from None
            raise


def _summaries(sagemaker, group: str, limit: int | None = None, **filters) -> list[dict]:
    """The group's packages, newest first (the first ``limit`` of them)."""
    with aws_errors(f"listing the model packages of group {group!r}"):
        pages = sagemaker.get_paginator("list_model_packages").paginate(
            ModelPackageGroupName=group, SortBy="CreationTime", SortOrder="Descending",
            PaginationConfig={"MaxItems": limit} if limit else {}, **filters,
        )
        return [summary for page in pages for summary in page.get("ModelPackageSummaryList", [])]


def find_package(sagemaker, request: DeployRequest) -> Package:
    """The package to deploy: the ARN given, else version N of the group, else the group's
    latest Approved version."""
    if request.package_arn:
        return _describe_package(sagemaker, request.package_arn)
    group = request.group
    if request.version is not None:
        summaries = _summaries(sagemaker, group)
        match = [s for s in summaries if s.get("ModelPackageVersion") == request.version]
        if not match:
            versions = sorted(s.get("ModelPackageVersion") or 0 for s in summaries)
            have = f"its versions are {', '.join(map(str, versions))}" if versions else "none"
            raise UserError(
                f"model package group {group!r} has no version {request.version}: {have}")
        return _describe_package(sagemaker, match[0]["ModelPackageArn"])
    approved = _summaries(sagemaker, group, limit=1, ModelApprovalStatus=APPROVED)
    if approved:
        return _describe_package(sagemaker, approved[0]["ModelPackageArn"])
    everything = _summaries(sagemaker, group, limit=1)
    if not everything:
        raise UserError(
            f"model package group {group!r} has no model packages: run the pipeline "
            "(trainpipe start --wait) to register one, or pass --model-package-group"
        )
    latest = everything[0]
    raise UserError(
        f"model package group {group!r} has no Approved version (the latest, v"
        f"{latest.get('ModelPackageVersion')}, is {latest.get('ModelApprovalStatus')}); "
        f"{APPROVE_HELP}, or pass --version N --allow-unapproved"
    )


def check_package(package: Package, request: DeployRequest) -> None:
    if package.status != "Completed":
        raise UserError(f"model package {package.label} is {package.status}, not Completed: "
                        "it cannot be deployed yet")
    if package.approval_status != APPROVED and not request.allow_unapproved:
        raise UserError(
            f"model package {package.label} is {package.approval_status}, not Approved: "
            f"{APPROVE_HELP.replace('ARN', package.arn)}; or pass --allow-unapproved"
        )


def deployed_endpoint(sagemaker, name: str) -> Deployed | None:
    """The endpoint, its config's first variant and the package its model came from; None
    when there is no such endpoint."""
    with aws_errors(f"reading endpoint {name!r}"):
        try:
            endpoint = sagemaker.describe_endpoint(EndpointName=name)
        except ClientError as error:
            if is_not_found(error):
                return None
            raise
        config_name = endpoint["EndpointConfigName"]
        config = sagemaker.describe_endpoint_config(EndpointConfigName=config_name)
        variant = (config.get("ProductionVariants") or [{}])[0]
        model_name = variant.get("ModelName")
        package_arn = None
        if model_name:
            try:
                model = sagemaker.describe_model(ModelName=model_name)
            except ClientError as error:
                if not is_not_found(error):
                    raise
                model = {}  # deleted since: the endpoint keeps serving its copy
            containers = model.get("Containers") or [model.get("PrimaryContainer") or {}]
            package_arn = containers[0].get("ModelPackageName") if containers else None
    return Deployed(
        arn=endpoint["EndpointArn"], status=endpoint["EndpointStatus"], config_name=config_name,
        model_name=model_name, package_arn=package_arn,
        instance_type=variant.get("InstanceType"),
        instance_count=variant.get("InitialInstanceCount"),
    )


def _check_updatable(deployed: Deployed, name: str) -> None:
    if deployed.status in BUSY_STATUSES:
        raise UserError(
            f"endpoint {name!r} is {deployed.status}: wait until it is InService "
            f"(aws sagemaker wait endpoint-in-service --endpoint-name {name}), then deploy again"
        )
    if deployed.status != IN_SERVICE:
        raise UserError(
            f"endpoint {name!r} is {deployed.status}, and SageMaker updates only an InService "
            f"endpoint: delete it (aws sagemaker delete-endpoint --endpoint-name {name}), then "
            "deploy again"
        )


def default_endpoint_name(group: str) -> str:
    """The group's name: the infra stack lets the CI role manage endpoints, models and
    configs whose names start with it."""
    return group[:NAME_MAX].rstrip("-")


def resource_name(endpoint_name: str, package: Package, now: datetime) -> str:
    """<endpoint>-v<N>-<UTC time to the ms>: new for every deploy (a config cannot be changed,
    and a model name cannot be reused), sortable, and starting with the endpoint's name."""
    version = f"-v{package.version}" if package.version is not None else ""
    suffix = f"{version}-{now.astimezone(timezone.utc):%Y%m%d-%H%M%S-%f}"[:-3]
    return endpoint_name[: NAME_MAX - len(suffix)].rstrip("-") + suffix


def check_tags(tags: dict[str, str], credential_values: list[str]) -> None:
    """Tags are readable by anyone who can list the account's endpoints: upsert's rule."""
    findings = find_secrets(json.dumps(tags), extra_values=credential_values)
    if findings:
        raise UserError(
            "refusing to tag the endpoint: a --tag contains "
            + "; ".join(str(f) for f in findings)
            + ". Never put credentials in tags"
        )


def plan_deploy(sagemaker, request: DeployRequest, now: datetime | None = None) -> DeployPlan:
    """Read the package and the endpoint, refuse what cannot be deployed; writes nothing."""
    check_request(request)
    package = find_package(sagemaker, request)
    check_package(package, request)
    endpoint_name = request.endpoint_name or default_endpoint_name(package.group or request.group)
    deployed = deployed_endpoint(sagemaker, endpoint_name)
    plan_name = resource_name(endpoint_name, package, now or datetime.now(timezone.utc))
    plan = DeployPlan(request, package, endpoint_name, plan_name, plan_name, deployed)
    if deployed is not None and not plan.up_to_date:
        _check_updatable(deployed, endpoint_name)
    return plan


def apply_deploy(sagemaker, plan: DeployPlan) -> str:
    """CreateModel, CreateEndpointConfig, then CreateEndpoint or UpdateEndpoint; returns the
    endpoint's ARN. Does nothing when the plan is up to date."""
    if plan.up_to_date:
        return plan.deployed.arn
    r = plan.request
    tags = [{"Key": k, "Value": v} for k, v in sorted(
        {MANAGED_BY_TAG[0]: MANAGED_BY_TAG[1], PACKAGE_TAG: plan.package.arn, **r.tags}.items())]
    with aws_errors(f"creating model {plan.model_name!r}"):
        sagemaker.create_model(
            ModelName=plan.model_name,
            ExecutionRoleArn=r.role_arn,
            # The registry's container (image and model data) as registered: nothing to
            # restate here, and the endpoint serves exactly what was approved.
            Containers=[{"ModelPackageName": plan.package.arn}],
            # The TF Serving container needs no network: SageMaker itself fetches the model data.
            EnableNetworkIsolation=r.network_isolation,
            Tags=tags,
        )
    with aws_errors(f"creating endpoint config {plan.config_name!r}"):
        sagemaker.create_endpoint_config(
            EndpointConfigName=plan.config_name,
            ProductionVariants=[{
                "VariantName": VARIANT_NAME,
                "ModelName": plan.model_name,
                "InstanceType": r.instance_type,
                "InitialInstanceCount": r.instance_count,
                "InitialVariantWeight": 1.0,
            }],
            Tags=tags,
        )
    if plan.creates:
        with aws_errors(f"creating endpoint {plan.endpoint_name!r}"):
            return sagemaker.create_endpoint(
                EndpointName=plan.endpoint_name, EndpointConfigName=plan.config_name, Tags=tags
            )["EndpointArn"]
    with aws_errors(f"updating endpoint {plan.endpoint_name!r}"):
        return sagemaker.update_endpoint(
            EndpointName=plan.endpoint_name, EndpointConfigName=plan.config_name
        )["EndpointArn"]


def one_line(text: str | None) -> str:
    return " ".join((text or "").split())


def wait_for_endpoint(
    sagemaker,
    name: str,
    *,
    poll_seconds: float = 30.0,
    timeout_seconds: float | None = None,
    new_config: str | None = None,
    on_status: Callable[[str, float], None] = lambda status, elapsed: None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> dict:
    """Poll DescribeEndpoint until a final status; ``on_status`` hears every change (with
    the seconds since the start). Returns the last description. With ``new_config`` (an
    update), InService counts only once the endpoint runs that config or says why it rolled
    back: just after UpdateEndpoint it may still describe the old one."""
    start, last = clock(), None
    while True:
        with aws_errors(f"reading endpoint {name!r}"):
            described = sagemaker.describe_endpoint(EndpointName=name)
        status = described["EndpointStatus"]
        if status != last:
            on_status(status, clock() - start)
            last = status
        settled = (new_config is None or status != IN_SERVICE or described.get("FailureReason")
                   or described.get("EndpointConfigName") == new_config)
        if status in FINAL_STATUSES and settled:
            return described
        if timeout_seconds is not None and clock() - start >= timeout_seconds:
            raise UserError(
                f"endpoint {name!r} is still {status} after {timeout_seconds:.0f} s; it goes on: "
                f"aws sagemaker wait endpoint-in-service --endpoint-name {name}"
            )
        sleep(poll_seconds)


def outcome(plan: DeployPlan, described: dict) -> str | None:
    """None when the endpoint serves the new config; otherwise why not, in one line. A failed
    update rolls back to the previous config and is InService again, with a FailureReason."""
    status = described["EndpointStatus"]
    reason = one_line(described.get("FailureReason"))
    if status == IN_SERVICE and described.get("EndpointConfigName") == plan.config_name:
        return None
    if status == IN_SERVICE:
        return (f"the update failed and rolled back to config {described.get('EndpointConfigName')}"
                + (f": {reason}" if reason else ""))
    return f"{status}" + (f": {reason}" if reason else "")
