"""infra/template.yaml read as data: the security properties the issue asks for, each checked
where it is written (cfn-lint and checkov run in `make lint`)."""

from __future__ import annotations

import json

from pipeline.cloud.stack import ALL_OUTPUTS

# Actions AWS defines without resource-level permissions: "*" is the only resource they take.
RESOURCE_STAR_ACTIONS = {"ecr:GetAuthorizationToken", "cloudwatch:PutMetricData",
                         "sagemaker:ListModelPackages"}


def as_list(value) -> list:
    return value if isinstance(value, list) else [value]


def resources(template: dict, kind: str) -> dict[str, dict]:
    return {k: v for k, v in template["Resources"].items() if v["Type"] == kind}


def identity_policies(template: dict) -> list[tuple[str, dict]]:
    """(where, statement) for every statement of every IAM (identity) policy."""
    found = []
    for name, role in resources(template, "AWS::IAM::Role").items():
        for policy in role["Properties"].get("Policies", []):
            found += [(f"{name}/{policy['PolicyName']}", s) for s in policy["PolicyDocument"]["Statement"]]
    for kind in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):
        for name, policy in resources(template, kind).items():
            found += [(name, s) for s in policy["Properties"]["PolicyDocument"]["Statement"]]
    return found


def all_statements(template: dict) -> list[tuple[str, dict]]:
    found = identity_policies(template)
    for name, role in resources(template, "AWS::IAM::Role").items():
        found += [(f"{name} trust", s) for s in role["Properties"]["AssumeRolePolicyDocument"]["Statement"]]
    for name, policy in resources(template, "AWS::S3::BucketPolicy").items():
        found += [(name, s) for s in policy["Properties"]["PolicyDocument"]["Statement"]]
    for name, key in resources(template, "AWS::KMS::Key").items():
        found += [(name, s) for s in key["Properties"]["KeyPolicy"]["Statement"]]
    return found


def statement(template: dict, role: str, sid: str) -> dict:
    return next(s for where, s in identity_policies(template)
                if where.startswith(role + "/") and s.get("Sid") == sid)


def test_there_are_policies_to_check(template):
    assert len(identity_policies(template)) >= 20


def test_no_statement_allows_every_action(template):
    for where, s in all_statements(template):
        if s["Effect"] == "Allow":
            assert "*" not in as_list(s["Action"]), where


def test_no_star_action_on_star_resource_and_star_resource_only_where_aws_requires_it(template):
    for where, s in identity_policies(template):
        actions = as_list(s["Action"])
        assert not any(a == "*" or a.endswith(":*") for a in actions), (where, actions)
        if "*" in as_list(s.get("Resource", [])):
            assert set(actions) <= RESOURCE_STAR_ACTIONS, (where, actions)
            if "cloudwatch:PutMetricData" in actions:
                assert s["Condition"]["StringLike"]["cloudwatch:namespace"] == "/aws/sagemaker/*"


def test_the_key_is_administered_only_by_the_account_and_rotates(template):
    (key,) = resources(template, "AWS::KMS::Key").values()
    assert key["Properties"]["EnableKeyRotation"] is True
    for s in key["Properties"]["KeyPolicy"]["Statement"]:
        assert s["Principal"] == {"AWS": {"Fn::Sub": "arn:${AWS::Partition}:iam::${AWS::AccountId}:root"}}


def test_bucket_is_encrypted_versioned_private_and_tls_only(template):
    (bucket_name,) = resources(template, "AWS::S3::Bucket")
    bucket = template["Resources"][bucket_name]
    properties = bucket["Properties"]
    (rule,) = properties["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    assert rule["ServerSideEncryptionByDefault"] == {
        "SSEAlgorithm": "aws:kms", "KMSMasterKeyID": {"Fn::GetAtt": ["ArtifactKey", "Arn"]},
    }
    assert properties["VersioningConfiguration"] == {"Status": "Enabled"}
    assert set(properties["PublicAccessBlockConfiguration"].values()) == {True}
    assert len(properties["PublicAccessBlockConfiguration"]) == 4
    assert bucket["DeletionPolicy"] == "Retain"
    (policy,) = resources(template, "AWS::S3::BucketPolicy").values()
    (deny,) = policy["Properties"]["PolicyDocument"]["Statement"]
    assert deny["Effect"] == "Deny" and deny["Action"] == "s3:*"
    assert deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    assert deny["Resource"] == [{"Fn::GetAtt": [bucket_name, "Arn"]}, {"Fn::Sub": f"${{{bucket_name}.Arn}}/*"}]


def test_execution_role_reaches_only_its_prefix_group_logs_and_images(template):
    role = "ExecutionRole"
    trust = template["Resources"][role]["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert [s["Principal"] for s in trust] == [{"Service": "sagemaker.amazonaws.com"}]
    assert trust[0]["Condition"]["StringEquals"]["aws:SourceAccount"] == {"Ref": "AWS::AccountId"}

    # The one key prefix a definition uses (test_security.py checks the definition side).
    objects = statement(template, role, "ReadWriteTheArtifactPrefix")
    assert objects["Resource"] == [{"Fn::Sub": "${ArtifactBucket.Arn}/${ArtifactPrefix}/*"}]
    listing = statement(template, role, "ListOnlyTheArtifactPrefix")
    assert listing["Condition"]["StringLike"]["s3:prefix"] == [
        {"Ref": "ArtifactPrefix"}, {"Fn::Sub": "${ArtifactPrefix}/*"}]
    registry = statement(template, role, "RegisterModelsInTheGroup")
    assert all("${ModelPackageGroupName}" in r["Fn::Sub"] for r in registry["Resource"])
    logs = statement(template, role, "WriteJobLogs")
    assert all(r["Fn::Sub"].endswith(("/aws/sagemaker/ProcessingJobs:*", "/aws/sagemaker/TrainingJobs:*"))
               for r in logs["Resource"])
    images = statement(template, role, "PullTheDeepLearningImages")
    assert all(r["Fn::Sub"].endswith(("repository/tensorflow-training", "repository/tensorflow-inference"))
               for r in images["Resource"])
    jobs = statement(template, role, "CreateTheJobsOfThisPipeline")
    assert jobs["Condition"] == {"Bool": {"sagemaker:NetworkIsolation": "true"}}
    passes_itself = template["Resources"]["ExecutionRolePassesItself"]["Properties"]
    assert passes_itself["Roles"] == [{"Ref": role}]
    (pass_role,) = passes_itself["PolicyDocument"]["Statement"]
    assert pass_role["Action"] == "iam:PassRole"
    assert pass_role["Resource"] == {"Fn::GetAtt": [role, "Arn"]}
    assert pass_role["Condition"]["StringEquals"]["iam:PassedToService"] == "sagemaker.amazonaws.com"


def test_ci_role_is_assumable_only_by_main_of_this_repository_through_oidc(template):
    (trust,) = template["Resources"]["CiRole"]["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert trust["Action"] == "sts:AssumeRoleWithWebIdentity"
    assert set(trust["Principal"]) == {"Federated"}
    # StringEquals, never StringLike: no wildcard in the subject.
    assert set(trust["Condition"]) == {"StringEquals"}
    assert trust["Condition"]["StringEquals"] == {
        "token.actions.githubusercontent.com:aud": "sts.amazonaws.com",
        "token.actions.githubusercontent.com:sub": {
            "Fn::Sub": "repo:${GitHubRepository}:ref:refs/heads/${GitHubBranch}"},
    }
    assert template["Parameters"]["GitHubBranch"]["Default"] == "main"
    assert "Default" not in template["Parameters"]["GitHubRepository"]
    provider = template["Resources"]["GitHubOidcProvider"]["Properties"]
    assert provider["Url"] == "https://token.actions.githubusercontent.com"
    assert provider["ClientIdList"] == ["sts.amazonaws.com"]


def test_ci_role_manages_only_this_pipeline_and_passes_only_the_execution_role(template):
    for _, s in identity_policies(template):
        for action in as_list(s["Action"]):
            if action.startswith("sagemaker:") and "Pipeline" in action:
                assert all("pipeline/${PipelineName}" in r["Fn::Sub"] for r in as_list(s["Resource"]))
    passes = statement(template, "CiRole", "HandTheExecutionRoleToThePipeline")
    assert passes["Resource"] == {"Fn::GetAtt": ["ExecutionRole", "Arn"]}
    stack = statement(template, "CiRole", "ReadThisStacksOutputs")
    assert stack["Resource"] == {"Ref": "AWS::StackId"}


def test_outputs_are_the_ones_the_cli_reads(template):
    assert set(template["Outputs"]) == set(ALL_OUTPUTS)


def test_every_checkov_skip_says_why(template):
    skips = [
        skip
        for body in template["Resources"].values()
        for skip in body.get("Metadata", {}).get("checkov", {}).get("skip", [])
    ]
    assert skips, "expected the documented skip on the bucket"
    for skip in skips:
        assert skip["id"].startswith("CKV_") and len(skip.get("comment", "")) >= 60, skip


def test_training_image_repository_scans_on_push_keeps_tags_immutable_and_expires_old_images(template):
    import json

    (name,) = resources(template, "AWS::ECR::Repository")
    repository = template["Resources"][name]
    properties = repository["Properties"]
    assert properties["ImageTagMutability"] == "IMMUTABLE"
    assert properties["ImageScanningConfiguration"] == {"ScanOnPush": True}
    assert properties["EncryptionConfiguration"] == {
        "EncryptionType": "KMS", "KmsKey": {"Fn::GetAtt": ["ArtifactKey", "Arn"]}}
    assert repository["DeletionPolicy"] == "Retain"
    rules = json.loads(properties["LifecyclePolicy"]["LifecyclePolicyText"])["rules"]
    assert [r["selection"]["tagStatus"] for r in rules] == ["untagged", "any"]
    assert all(r["action"] == {"type": "expire"} for r in rules)
    assert template["Outputs"]["TrainingImageRepositoryUri"]["Value"] == {
        "Fn::GetAtt": [name, "RepositoryUri"]}


def test_jobs_pull_the_training_image_and_only_ci_pushes_it(template):
    arn = {"Fn::GetAtt": ["TrainingImageRepository", "Arn"]}
    pull = statement(template, "ExecutionRole", "PullTheTrainingImage")
    assert pull["Resource"] == arn
    assert set(pull["Action"]) == {"ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer",
                                   "ecr:BatchCheckLayerAvailability"}
    push = statement(template, "CiRole", "PushTheTrainingImage")
    assert push["Resource"] == arn
    assert "ecr:PutImage" in push["Action"]
    # Add images, never delete them or loosen the repository.
    writes = {"ecr:PutImage", "ecr:InitiateLayerUpload", "ecr:UploadLayerPart", "ecr:CompleteLayerUpload"}
    for where, s in identity_policies(template):
        actions = set(as_list(s["Action"]))
        assert not any(a.startswith(("ecr:Delete", "ecr:BatchDelete", "ecr:Set", "ecr:Put")) and a != "ecr:PutImage"
                       for a in actions), where
        if actions & writes:
            assert where.startswith("CiRole/") and s["Resource"] == arn, where
    base = statement(template, "CiRole", "PullTheBaseTrainingImage")
    assert base["Resource"]["Fn::Sub"].endswith(":${DeepLearningImagesAccount}:repository/tensorflow-training")


def test_the_mlflow_policy_grants_the_jobs_calls_on_the_named_server_only(template):
    from training_entry.tracking import MLFLOW_ACTIONS

    policy = template["Resources"]["ExecutionRoleLogsToMlflow"]
    assert policy["Condition"] == "TrackWithMlflow"  # none unless a tracking server is named
    assert template["Conditions"]["TrackWithMlflow"] == {
        "Fn::Not": [{"Fn::Equals": [{"Ref": "MlflowTrackingServerName"}, ""]}]}
    assert policy["Properties"]["Roles"] == [{"Ref": "ExecutionRole"}]
    logs, jobs = policy["Properties"]["PolicyDocument"]["Statement"]
    assert sorted(logs["Action"]) == sorted(f"sagemaker-mlflow:{a}" for a in MLFLOW_ACTIONS)
    assert logs["Resource"]["Fn::Sub"].endswith(":mlflow-tracking-server/${MlflowTrackingServerName}")
    assert jobs["Action"] == ["sagemaker:CreateTrainingJob", "sagemaker:CreateProcessingJob"]
    assert [r["Fn::Sub"].rsplit(":", 1)[1] for r in jobs["Resource"]] == ["training-job/pipelines-*",
                                                                          "processing-job/pipelines-*"]
    # The evaluation job's artifacts: puts into the named artifact bucket, only when one is named.
    artifacts = template["Resources"]["ExecutionRoleUploadsMlflowArtifacts"]
    assert artifacts["Condition"] == "UploadMlflowArtifacts"
    condition = json.dumps(template["Conditions"]["UploadMlflowArtifacts"])
    assert "TrackWithMlflow" in condition and '{"Ref": "MlflowArtifactBucket"}, ""' in condition
    assert artifacts["Properties"]["Roles"] == [{"Ref": "ExecutionRole"}]
    [put] = artifacts["Properties"]["PolicyDocument"]["Statement"]
    assert put["Action"] == ["s3:PutObject"]
    assert put["Resource"] == {"Fn::Sub": "arn:${AWS::Partition}:s3:::${MlflowArtifactBucket}/*"}
