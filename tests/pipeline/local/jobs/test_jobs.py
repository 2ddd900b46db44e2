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
