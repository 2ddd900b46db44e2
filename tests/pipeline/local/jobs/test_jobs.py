"""What every local job shares: the environment its processes start from."""

from __future__ import annotations

import sys
from pathlib import Path

from pipeline.local.jobs import lifecycle as jobs


def test_job_environment_hides_tensorflow_info_lines_unless_the_user_chose():
    env = jobs.base_environment({"PATH": "/bin", "SM_HOSTS": "[]", "PYTHONPATH": "/x"})
    # The image's python/python3 by name are the runner's Python.
    assert env == {"PATH": f"{Path(sys.executable).parent}:/bin", "TF_CPP_MIN_LOG_LEVEL": "1"}
    assert jobs.base_environment({"TF_CPP_MIN_LOG_LEVEL": "0"})["TF_CPP_MIN_LOG_LEVEL"] == "0"


def test_a_job_gets_its_own_home_and_no_tf_config(tmp_path):
    runner = {"PATH": "/bin", "HOME": "/root", "TF_CONFIG": '{"cluster": {"worker": ["a:1"]}}',
              "TF_NUM_INTRAOP_THREADS": "2", "HOROVOD_CYCLE_TIME": "1"}
    env = jobs.base_environment(runner, home=tmp_path / "home")
    # SageMaker: HOME is the image's, never the caller's (~/.aws/credentials); TF_CONFIG
    # would switch TensorFlow into multi-worker mode: only a job kind sets it, per host.
    assert env["HOME"] == str(tmp_path / "home") and "TF_CONFIG" not in env
    assert env["TF_NUM_INTRAOP_THREADS"] == "2" and env["HOROVOD_CYCLE_TIME"] == "1"
    assert "HOME" not in jobs.base_environment(runner)


def test_code_naming_opt_ml_is_found_unless_it_reads_sagemaker_base_dir(tmp_path):
    code = tmp_path / "code"
    code.mkdir()
    (code / "ok.py").write_text("# writes to /opt/ml/model\nimport os\nprint(os.environ['SM_MODEL_DIR'])\n")
    (code / "data.csv").write_text("/opt/ml/model\n")  # not code
    assert jobs.names_container_base([code]) is None
    (code / "train.py").write_text("import os\n\nopen('/opt/ml/model/m.txt', 'w')\n")
    assert jobs.names_container_base([code]) == f"{code / 'train.py'}:3"
    (code / "paths.py").write_text("BASE = os.environ.get('SAGEMAKER_BASE_DIR', '/opt/ml')\n")
    assert jobs.names_container_base([code]) is None  # moves its paths as the toolkit does
    script = tmp_path / "run"  # a file the command names: read whatever its suffix
    script.write_text("#!/bin/sh\ncat /opt/ml/input/config/x.json\n")
    assert jobs.names_container_base([script]) == f"{script}:2"
