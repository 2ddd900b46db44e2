"""What of trainpipe's environment reaches code that is not trainpipe's (pipeline/environment.py)."""

from __future__ import annotations

from pipeline.environment import passed_on, scrubbed


def test_only_the_stated_allowlist_passes_and_never_a_credential():
    runner = {
        "PATH": "/bin", "LANG": "C.UTF-8", "LC_ALL": "C", "TRAINPIPE_FLAT_ALLREDUCE": "0",
        "HOROVOD_FUSION_THRESHOLD": "0", "TF_CPP_MIN_LOG_LEVEL": "2", "XLA_FLAGS": "--x",
        # Not on the list: the caller's, or another container's.
        "HOME": "/root", "TF_CONFIG": "{}", "TF_FORCE_GPU_ALLOW_GROWTH": "true", "PYTHONPATH": "/x",
        "VIRTUAL_ENV": "/venv", "PIP_INDEX_URL": "https://user:pw@example/simple", "SM_HOSTS": "[]",
        "OMPI_COMM_WORLD_RANK": "0", "AWS_PROFILE": "prod",
        # On the list by prefix, but a secret's name.
        "TRAINPIPE_API_KEY": "k", "HOROVOD_SECRET": "s", "NCCL_TOKEN": "t",
    }
    assert scrubbed(runner) == {
        "PATH": "/bin", "LANG": "C.UTF-8", "LC_ALL": "C", "TRAINPIPE_FLAT_ALLREDUCE": "0",
        "HOROVOD_FUSION_THRESHOLD": "0", "TF_CPP_MIN_LOG_LEVEL": "2", "XLA_FLAGS": "--x"}
    assert passed_on("AWS_REGION") and not passed_on("AWS_SECRET_ACCESS_KEY")


def test_a_credentials_name_inside_a_prefix_family_is_refused_and_the_rest_is_not_guessed():
    """The allowlist decides: credentials under names no pattern guesses (APIKEY, DB_PWD)
    pass only where the list names them, which it never does; inside a prefix family the
    common credential names are refused too."""
    for name in ("APIKEY", "ACCESSKEY", "SSH_KEYS", "KEYFILE", "DB_PASS", "DB_PWD", "HF_PAT",
                 "HOROVOD_SSH_KEYS", "TRAINPIPE_APIKEY", "NCCL_KEYFILE", "TRAINPIPE_DB_PASS",
                 "KMP_DB_PWD", "TRAINPIPE_HF_PAT", "MKL_ACCESSKEY"):
        assert not passed_on(name), name
    for name in ("PATH", "LC_PAPER", "HOROVOD_AUTOTUNE", "TRAINPIPE_PIPE_WAIT_SECONDS",
                 "TRAINPIPE_ARCHIVE_MAX_GIB", "NCCL_IB_DISABLE", "KMP_AFFINITY"):
        assert passed_on(name), name


def test_a_prefix_familys_variable_whose_value_carries_a_credential_stays_out():
    runner = {"TRAINPIPE_DB_URL": "postgres://app:hunter2@db.example/prod", "TRAINPIPE_NOTE": "AKIAIOSFODNN7EXAMPLE",
              "TRAINPIPE_MLFLOW": "https://mlflow.example.com", "HOROVOD_X": "s3://bucket/key@v1"}
    assert scrubbed(runner) == {"TRAINPIPE_MLFLOW": "https://mlflow.example.com", "HOROVOD_X": "s3://bucket/key@v1"}
