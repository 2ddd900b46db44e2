"""The infra stack (``infra/template.yaml``) as a source of settings: its output names, read once.

The template's Outputs section uses exactly these names (a test holds the two together).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from pipeline.cloud.aws import aws_errors, error_code, error_message, is_not_found

DEFAULT_STACK_NAME = "trainpipe"
STACK_NAME_ENV = "TRAINPIPE_STACK_NAME"

# Settings field -> the stack output that holds it.
OUTPUT_FOR_SETTING = {
    "bucket": "ArtifactBucketName",
    "prefix": "ArtifactPrefix",
    "role_arn": "ExecutionRoleArn",
    "model_package_group": "ModelPackageGroupName",
    "kms_key_id": "KmsKeyArn",
    "pipeline_name": "PipelineName",
    "training_image_repository": "TrainingImageRepositoryUri",
}
# Outputs for people and the workflow, not for a setting.
OUTPUT_CI_ROLE = "CiRoleArn"
OUTPUT_OIDC_PROVIDER = "GitHubOidcProviderArn"
ALL_OUTPUTS = (*OUTPUT_FOR_SETTING.values(), OUTPUT_CI_ROLE, OUTPUT_OIDC_PROVIDER)


def stack_name(flag: str | None, environ: Mapping[str, str] = os.environ) -> str:
    return flag or environ.get(STACK_NAME_ENV) or DEFAULT_STACK_NAME


class StackOutputs:
    """The outputs of one stack, fetched on first use; an absent stack has no outputs."""

    def __init__(self, cloudformation, name: str):
        self._cloudformation = cloudformation
        self.name = name
        self._outputs: dict[str, str] | None = None
        self.missing_reason: str | None = None

    def get(self, key: str) -> str | None:
        return self.outputs().get(key)

    def outputs(self) -> dict[str, str]:
        if self._outputs is None:
            self._outputs = self._fetch()
        return self._outputs

    def _fetch(self) -> dict[str, str]:
        from botocore.exceptions import ClientError, NoCredentialsError

        with aws_errors(f"reading the outputs of stack {self.name!r}"):
            try:
                stacks = self._cloudformation.describe_stacks(StackName=self.name)["Stacks"]
            # Absent or unreadable is not fatal: flags and variables may supply everything.
            # The reason goes into the error that names a setting nobody supplied.
            except ClientError as error:
                if is_not_found(error):
                    self.missing_reason = f"stack {self.name!r} does not exist"
                    return {}
                if error_code(error) in ("AccessDenied", "AccessDeniedException"):
                    self.missing_reason = f"stack {self.name!r} is not readable: {error_message(error)}"
                    return {}
                raise
            except NoCredentialsError:
                self.missing_reason = f"no AWS credentials to read stack {self.name!r}"
                return {}
        stack = stacks[0]
        outputs = {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs") or []}
        if not outputs:
            self.missing_reason = f"stack {self.name!r} has no outputs (state {stack.get('StackStatus')})"
        return outputs
