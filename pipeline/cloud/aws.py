"""boto3 clients for one region, and AWS failures as one-line errors a user can act on.

Clients are created lazily (a command that needs only SageMaker never builds an S3 client) and
can be replaced, which is how the tests put botocore's Stubber in front of one of them. Each is
made by pipeline/aws_clients.py, so each API call ends by its deadline (TRAINPIPE_AWS_DEADLINE_S).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import boto3
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    EndpointConnectionError,
    NoCredentialsError,
    NoRegionError,
    PartialCredentialsError,
)

from pipeline import aws_clients
from pipeline.errors import UserError

CREDENTIALS_HELP = (
    "configure credentials (aws configure / AWS_PROFILE / AWS_ACCESS_KEY_ID), "
    "or in GitHub Actions assume the CI role through OIDC"
)


class AwsError(UserError):
    """An AWS call failed for a reason the user can fix (credentials, permissions, names)."""


class Clients:
    """The AWS clients trainpipe uses, for one region."""

    def __init__(self, region: str, session: boto3.Session | None = None):
        self.region = region
        # A BoundedSession: a client made from it anywhere (not only by client() below) is bounded.
        self.session = aws_clients.session(session or boto3.Session(region_name=region))
        self._clients: dict[str, object] = {}

    def client(self, service: str):
        if service not in self._clients:
            self._clients[service] = aws_clients.client(self.session, service, region=self.region)
        return self._clients[service]

    def set_client(self, service: str, client) -> None:
        """Use ``client`` (a test's, with a Stubber) for ``service``, bounded as the others are."""
        self._clients[service] = aws_clients.bounded(client)

    @property
    def sagemaker(self):
        return self.client("sagemaker")

    @property
    def s3(self):
        return self.client("s3")

    @property
    def cloudformation(self):
        return self.client("cloudformation")

    @property
    def pricing(self):
        """The Price List API, which only answers on its own endpoints (us-east-1)."""
        if "pricing" not in self._clients:
            self._clients["pricing"] = aws_clients.client(self.session, "pricing", region="us-east-1")
        return self._clients["pricing"]

    def credential_values(self) -> list[str]:
        """The secrets of the credentials in use (to make sure none is ever sent on)."""
        credentials = self.session.get_credentials()
        if credentials is None:
            return []
        frozen = credentials.get_frozen_credentials()
        return [v for v in (frozen.access_key, frozen.secret_key, frozen.token) if v]


def error_code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))


def error_message(error: ClientError) -> str:
    message = str(error.response.get("Error", {}).get("Message", "")).strip()
    # An endpoint that does not implement an action (a local emulator) answers with an HTML
    # error page: keep it out of the one-line message.
    if message.startswith("<"):
        status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        return f"HTTP {status} from the endpoint"
    return message


def is_not_found(error: ClientError) -> bool:
    """Whether the named resource does not exist (SageMaker answers ResourceNotFound, or a
    ValidationException that says so; CloudFormation a ValidationError "does not exist")."""
    code, message = error_code(error), error_message(error).lower()
    return code in ("ResourceNotFound", "NoSuchKey", "404", "NoSuchBucket") or (
        code in ("ValidationException", "ValidationError")
        and ("does not exist" in message or "could not find" in message)
    )


@contextlib.contextmanager
def aws_errors(action: str) -> Iterator[None]:
    """Turn the AWS failures a user can fix into ``AwsError`` naming ``action``."""
    try:
        yield
    except (NoCredentialsError, PartialCredentialsError):
        raise AwsError(f"{action}: no AWS credentials found; {CREDENTIALS_HELP}") from None
    except NoRegionError:
        raise AwsError(f"{action}: no AWS region; pass --region or set AWS_REGION") from None
    except EndpointConnectionError as error:
        raise AwsError(f"{action}: cannot reach AWS ({error})") from None
    except ClientError as error:
        code = error_code(error)
        hint = ""
        if code in ("ExpiredToken", "ExpiredTokenException", "RequestExpired"):
            hint = "; the credentials expired: renew them and run the command again"
        elif code in ("AccessDenied", "AccessDeniedException", "UnauthorizedOperation"):
            hint = "; the credentials in use lack this permission (see infra/README.md)"
        raise AwsError(f"{action}: {code}: {error_message(error)}{hint}") from None
    except BotoCoreError as error:
        raise AwsError(f"{action}: {error}") from None
