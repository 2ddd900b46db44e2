"""A job's Python: a venv over the runner's in which its pip installs land, cached per image
and requirements; trainpipe's own venv never changes (pipeline/local/jobs/environments/environment.py)."""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from pipeline.errors import UserError
from pipeline.local.jobs.environments import environment as job_env
from pipeline.local.jobs.environments import interpreters
from pipeline.local.jobs.training import TrainingJob
from tests import readme_record
from tests.pipeline.local.helpers import BUCKET, put_code, training_request

CODE = f"s3://{BUCKET}/code/sourcedir.tar.gz"
TF_IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/tensorflow-training:2.14.1-cpu-py310-ubuntu20.04-sagemaker"


def build_wheel(folder: Path, name: str = "tpdemo", version: str = "1.0") -> Path:
    """A pure-Python wheel, made by hand: no build backend, no network."""
    files = {f"{name}.py": f"VERSION = {version!r}\n",
             f"{name}-{version}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
             f"{name}-{version}.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    record = f"{name}-{version}.dist-info/RECORD"
    lines = [f"{path},sha256={base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b'=').decode()},"
             f"{len(text.encode())}" for path, text in files.items()]
    files[record] = "\n".join([*lines, f"{record},,"]) + "\n"
    wheel = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, text in files.items():
            archive.writestr(path, text)
    return wheel


def runner_freeze() -> str:
    return subprocess.run([sys.executable, "-m", "pip", "freeze", "--all"], capture_output=True,
                          text=True, check=True).stdout


# The way AWS's example scripts install at their start.
INSTALLS = """
    import json, os, pathlib, subprocess, sys
    subprocess.check_call([sys.executable, "-m", "pip", "install", "--no-index", "--no-deps", sys.argv[2]])
    import tpdemo
    import six  # the image's (its record's version), for the image's Python
    report = {"tpdemo": tpdemo.__file__, "executable": sys.executable, "six": six.__file__,
              "six_version": six.__version__, "python": "%d.%d" % sys.version_info[:2],
              "pip": subprocess.run(["pip", "--version"], capture_output=True, text=True).stdout}
    pathlib.Path(os.environ["SM_MODEL_DIR"], "report.json").write_text(json.dumps(report))
"""


def run_job(storage, tmp_path, files, hyperparameters, name="job", image=TF_IMAGE):
    put_code(storage, CODE, files)
    request = training_request(CODE, hyperparameters=hyperparameters)
    request["AlgorithmSpecification"]["TrainingImage"] = image
    job = TrainingJob(request, name, storage, tmp_path / name, echo=False, environments=tmp_path / "envs")
    return job.run()


def test_a_jobs_pip_install_lands_in_its_environment_never_in_trainpipes(local_storage, tmp_path):
    wheel = build_wheel(tmp_path)
    before = runner_freeze()
    result = run_job(local_storage, tmp_path, {"user.py": INSTALLS}, {"wheel": str(wheel)})
    assert result.status == "Completed", result.failure_reason
    assert runner_freeze() == before
    report = json.loads((tmp_path / "job" / "hosts" / "algo-1" / "model" / "report.json").read_text())
    layer = tmp_path / "job" / job_env.JOB_LAYER  # the job's own: gone with the job
    assert Path(report["tpdemo"]).is_relative_to(layer)
    assert Path(report["executable"]).is_relative_to(layer)
    # A job that pip-installs runs under the image's Python (3.10 here, found on this machine),
    # over an environment holding the image's versions of what it imports.
    if job_env.find_python("3.10"):
        assert report["python"] == "3.10" and report["six_version"] == "1.17.0"
        assert "image-environments" in report["six"]
    assert "pip" in report["pip"]
    # SageMaker: the next job starts from a fresh container, without what this one installed.
    again = run_job(local_storage, tmp_path, {"user.py": "import tpdemo\n"}, {}, name="again")
    assert again.status == "Failed" and "No module named 'tpdemo'" in again.failure_reason


def test_the_codes_requirements_are_installed_into_the_job_environment(local_storage, tmp_path):
    wheel = build_wheel(tmp_path, "tpreq", "2.0")
    before = runner_freeze()
    code = {"user.py": "import tpreq\nassert tpreq.VERSION == '2.0'\n", "requirements.txt": f"{wheel}\n"}
    result = run_job(local_storage, tmp_path, code, {})
    assert result.status == "Completed", result.failure_reason
    assert runner_freeze() == before
    assert "Successfully installed tpreq-2.0" in (tmp_path / "job" / "logs" / "requirements.log").read_text()


def test_an_install_this_python_cannot_resolve_is_one_line_with_the_way_out(local_storage, tmp_path, monkeypatch):
    # Where this machine has no interpreter of the image's Python, the job runs under the runner's.
    monkeypatch.setattr(interpreters, "find_python", lambda version: None)
    script = ('import subprocess, sys\nsubprocess.check_call([sys.executable, "-m", "pip", "install", '
              '"--no-index", "--find-links", sys.argv[2], "tensorflow==2.11.0"])\n')
    result = run_job(local_storage, tmp_path, {"user.py": script}, {"links": str(tmp_path)})
    assert result.status == "Failed"
    readme_record.record(result.failure_reason)
    local = f"{sys.version_info[0]}.{sys.version_info[1]}"
    assert result.failure_reason.startswith(
        f"pip cannot install tensorflow==2.11.0 on this machine's Python {local} ")
    assert "the image " + TF_IMAGE + " has Python 3.10" in result.failure_reason
    assert ("TRAINPIPE_IMAGE_PYTHON='tensorflow-training:2\\.14\\.1-cpu-py310-ubuntu20\\.04-sagemaker="
            "/path/to/python3.10'") in result.failure_reason
    # and the requirements.txt way: the step fails before the script starts
    failed = run_job(local_storage, tmp_path, {"user.py": "", "requirements.txt": "--no-index\ntensorflow==2.11.0\n"},
                     {}, name="reqs")
    assert (failed.status, failed.failure_type) == ("Failed", "ClientError")
    readme_record.record(failed.failure_reason)
    assert failed.failure_reason.startswith(f"pip cannot install tensorflow==2.11.0 on this machine's Python {local}")


def test_an_image_maps_to_the_interpreter_the_user_chose(local_storage, tmp_path, monkeypatch):
    base = getattr(sys, "_base_executable", sys.executable)  # another interpreter than the venv's
    monkeypatch.setenv(job_env.IMAGE_PYTHON_ENV, f"nothing-matches=/nope;tensorflow-training:2\\.14={base}")
    script = ('import json, os, pathlib, sys\npathlib.Path(os.environ["SM_MODEL_DIR"], "py.json")'
              '.write_text(json.dumps([sys.base_prefix, sys.prefix]))\n')
    result = run_job(local_storage, tmp_path, {"user.py": script}, {})
    assert result.status == "Completed", result.failure_reason
    base_prefix, prefix = json.loads((tmp_path / "job" / "hosts" / "algo-1" / "model" / "py.json").read_text())
    assert Path(prefix).is_relative_to(tmp_path / "job") and base_prefix == sys.base_prefix
    # trainpipe's venv is not in that Python's path: another interpreter, another ABI
    assert not list(Path(prefix).rglob(job_env.RUNNER_PTH))


@pytest.mark.parametrize("text, message", [
    ("py310", "expected IMAGE_REGEX=/path/to/python"),
    ("(=/usr/bin/python3", "bad regex"),
])
def test_a_bad_mapping_is_one_line(text, message):
    with pytest.raises(UserError, match=message) as bad:
        job_env.parse_mapping(text)
    readme_record.record(bad.value)
    with pytest.raises(UserError, match="not an executable") as missing:
        job_env.interpreter_for("x:py310", {job_env.IMAGE_PYTHON_ENV: "py310=/no/such/python"})
    readme_record.record(missing.value)


@pytest.mark.parametrize("uri, version", [
    (TF_IMAGE, "3.10"), ("x/sagemaker-scikit-learn:1.2-1-cpu-py3", "3"), ("local", None),
    ("x/pytorch-training:2.1.0-gpu-py310-cu121-ubuntu20.04-sagemaker", "3.10")])
def test_the_images_python_comes_from_its_tag(uri, version):
    assert job_env.image_python(uri) == version


# Issue 35 (7): a job's changes to its environment die with the job.
DROPS = """
    import pathlib, sys, sysconfig
    args = dict(zip(sys.argv[1::2], sys.argv[2::2]))
    marker = args["--marker"]
    hook = f"import pathlib; pathlib.Path({marker!r}).write_text('ran')\\n"
    # Its own site-packages, and every shared folder on its path it can write to but trainpipe's.
    targets = [sysconfig.get_paths()["purelib"]] + [p for p in sys.path if p.startswith(args["--envs"])]
    for folder in targets:
        pathlib.Path(folder, "zz-left-behind.pth").write_text(hook)
        pathlib.Path(folder, "tpshadow.py").write_text("SHADOW = True\\n")
"""


def test_what_a_job_leaves_in_its_environment_never_reaches_the_next_job(local_storage, tmp_path):
    marker = tmp_path / "marker"
    first = run_job(local_storage, tmp_path, {"user.py": DROPS}, {"marker": str(marker), "envs": str(tmp_path / "envs")})
    assert first.status == "Completed", first.failure_reason
    assert (tmp_path / "job" / job_env.JOB_LAYER).is_dir()
    marker.unlink(missing_ok=True)  # its own .pth may run in its own later processes
    script = "try:\n    import tpshadow\nexcept ImportError:\n    pass\nelse:\n    raise SystemExit('shadowed')\n"
    second = run_job(local_storage, tmp_path, {"user.py": script}, {}, name="second")
    assert second.status == "Completed", second.failure_reason
    assert not marker.exists(), "a .pth the first job dropped ran in the second"
    log = (tmp_path / "second" / "job.log").read_text()
    assert "python:" in log


# Issue 34: a job imports what its image holds, not what trainpipe's venv holds.
# optuna: on this machine, not in the TF 2.14 image (matplotlib is: tf-models-official pulls it in).
DYNAMIC = "import importlib\nimportlib.import_module('opt' + 'una')\n"  # out of the pre-run check's sight
# A probe finds it missing, as it is in the image (None, not an error).
PROBE = "import importlib.util\nassert importlib.util.find_spec('optuna') is None\nimport json, numpy\n"


def test_an_import_the_image_lacks_fails_in_the_job_naming_the_image(local_storage, tmp_path):
    result = run_job(local_storage, tmp_path, {"user.py": DYNAMIC}, {})
    assert result.status == "Failed"
    readme_record.record(result.failure_reason)
    assert "No module named 'optuna': the image " + TF_IMAGE in result.failure_reason
    assert "record aws-tensorflow-training-2.14" in result.failure_reason
    if job_env.find_python("3.10"):  # the image's Python: the module is found nowhere, and still named so
        assert "(Python 3.10: the image's Python" in (tmp_path / "job" / "job.log").read_text()
    probed = run_job(local_storage, tmp_path, {"user.py": PROBE}, {}, name="probe")
    assert probed.status == "Completed", probed.failure_reason
    # The requirements.txt that installs it (here: satisfied by this machine) lets it through.
    done = run_job(local_storage, tmp_path, {"user.py": DYNAMIC, "requirements.txt": "optuna\n"}, {}, name="reqs")
    assert done.status == "Completed", done.failure_reason
    # An image with no record: the job sees every package of this machine, as before.
    unknown = run_job(local_storage, tmp_path, {"user.py": DYNAMIC}, {}, name="unknown",
                      image="123456789012.dkr.ecr.us-east-1.amazonaws.com/my-own:latest")
    assert unknown.status == "Completed", unknown.failure_reason


@pytest.mark.skipif(job_env.find_python("3.9") is None, reason="the image's Python (3.9) is not on this machine")
def test_an_image_module_the_code_imports_out_of_sight_is_named_so(local_storage, tmp_path):
    # On the image's Python the job's environment holds the image's packages its code imports by
    # name; pandas is the image's, imported by a name built at run time: the error says which.
    sklearn_image = "683313688378.dkr.ecr.us-east-1.amazonaws.com/sagemaker-scikit-learn:1.2-1-cpu-py3"
    script = "import importlib\nimportlib.import_module('pan' + 'das')\n"
    result = run_job(local_storage, tmp_path, {"user.py": script}, {}, image=sklearn_image)
    assert result.status == "Failed"
    readme_record.record(result.failure_reason)
    assert (f"No module named 'pandas': the image {sklearn_image} (record aws-sklearn-1.2-1) has it, but trainpipe "
            f"made this job's environment on the image's Python with only the image's packages the code "
            f"imports") in result.failure_reason, result.failure_reason
    # Named, it is there (the image's pandas), and a library's optional imports are Python's own answer.
    named = run_job(local_storage, tmp_path, {"user.py": "import pandas\nassert pandas.__version__ == '1.1.3'\n"},
                    {}, name="named", image=sklearn_image)
    assert named.status == "Completed", named.failure_reason
    # Named in requirements.txt, as the message says: pip finds the image's pandas there and keeps
    # it (SageMaker's image has it installed), not the newest pandas for Python 3.9.
    listed_script = ("import importlib\npandas = importlib.import_module('pan' + 'das')\n"
                     "assert pandas.__version__ == '1.1.3', pandas.__version__\n")
    listed = run_job(local_storage, tmp_path, {"user.py": listed_script, "requirements.txt": "pandas\n"}, {},
                     name="listed", image=sklearn_image)
    assert listed.status == "Completed", listed.failure_reason


# What a job loads imports the image's framework from a library's code (a pickle joblib reads
# names sklearn.linear_model._base); an optional import finds the image's pandas as it would
# there; a finder the job adds itself is asked before trainpipe says a module is missing.
LOADS = """
import base64, importlib, importlib.util, io, json, os, pathlib, sys
import joblib
try:
    import pandas
except ImportError:
    pandas = None
impl = pathlib.Path(os.environ["SM_MODEL_DIR"], "impl.py")
impl.write_text("VALUE = 7\\n")


class Finder:
    @classmethod
    def find_spec(cls, name, path=None, target=None):
        return importlib.util.spec_from_file_location(name, impl) if name == "tp_virtual" else None


sys.meta_path.append(Finder)
virtual = importlib.import_module("tp_" + "virtual")
estimator = joblib.load(io.BytesIO(base64.b64decode("gAJjc2tsZWFybi5saW5lYXJfbW9kZWwuX2Jhc2UKTGluZWFyUmVncmVzc2lvbgpxAC4=")))
pathlib.Path(os.environ["SM_MODEL_DIR"], "report.json").write_text(json.dumps({
    "estimator": estimator.__name__, "sklearn": sys.modules["sklearn"].__version__,
    "pandas": pandas and pandas.__version__, "virtual": virtual.VALUE, "python": "%d.%d" % sys.version_info[:2]}))
"""


@pytest.mark.skipif(job_env.find_python("3.9") is None, reason="the image's Python (3.9) is not on this machine")
def test_what_a_job_loads_and_probes_is_the_images(local_storage, tmp_path):
    sklearn_image = "683313688378.dkr.ecr.us-east-1.amazonaws.com/sagemaker-scikit-learn:1.2-1-cpu-py3"
    result = run_job(local_storage, tmp_path, {"user.py": LOADS}, {}, image=sklearn_image)
    assert result.status == "Completed", result.failure_reason
    report = json.loads((tmp_path / "job" / "hosts" / "algo-1" / "model" / "report.json").read_text())
    assert report == {"estimator": "LinearRegression", "sklearn": "1.2.1", "pandas": "1.1.3", "virtual": 7,
                      "python": "3.9"}
    # One environment for the image, which each job adds what it imports to (numpy once).
    facts = job_env.facts(sklearn_image, None, [tmp_path / "job"])
    seed = job_env.choose(sklearn_image, facts, {}).seed
    assert seed == job_env.choose(sklearn_image, job_env.facts(sklearn_image, b"requests\n", []), {}).seed
    assert {"joblib", "pandas", "scikit-learn"} <= set((seed / job_env.SEEDED_FILE).read_text().split())


def test_a_librarys_own_imports_are_not_held_back(local_storage, tmp_path, monkeypatch):
    # This machine's scikit-learn imports narwhals, which the 1.2-1 image's (1.2.1) does not:
    # the job's own imports are the image's question, a library's are this machine's versions.
    # Where the image's Python is on this machine the job runs the image's scikit-learn instead
    # (test_image_versions.py): here it is not, and the job keeps this machine's.
    from pipeline.local.jobs.environments import interpreters

    monkeypatch.setattr(interpreters, "find_python", lambda version: None)
    sklearn_image = "683313688378.dkr.ecr.us-east-1.amazonaws.com/sagemaker-scikit-learn:1.2-1-cpu-py3"
    script = "import sys\nimport sklearn.linear_model\nimport pandas\nassert 'narwhals' in sys.modules\n"
    result = run_job(local_storage, tmp_path, {"user.py": script}, {}, image=sklearn_image)
    assert result.status == "Completed", result.failure_reason
    # ...while the job's own import of it is held back.
    held = run_job(local_storage, tmp_path, {"user.py": "import narwhals\n"}, {}, name="held", image=sklearn_image)
    assert held.status == "Failed" and "No module named 'narwhals': the image " + sklearn_image in held.failure_reason


# AWS's TF2 California-housing example: its evaluation step runs on the SKLearn image and
# installs TensorFlow 2.11, which exists for the image's Python 3.9, not for this one's 3.11.
CALIFORNIA_EVALUATE = """
import subprocess, sys
subprocess.check_call([sys.executable, "-m", "pip", "install", "tensorflow==2.11.0"])
import json, os, tarfile
import numpy as np
import pandas as pd
import tensorflow as tf
"""
SKLEARN_IMAGE = "683313688378.dkr.ecr.us-east-1.amazonaws.com/sagemaker-scikit-learn:1.2-1-cpu-py3"


@pytest.mark.parametrize("code, image, version, seeded, wanted", [
    # Installs: the image's Python; with the image's framework (what its code loads may import it).
    (CALIFORNIA_EVALUATE, SKLEARN_IMAGE, "3.9", True, ["numpy", "pandas", "scikit-learn"]),
    ("import tensorflow as tf\nimport horovod.tensorflow.keras as hvd\n", TF_IMAGE, None, False, []),  # the runner's TF
    # Installs nothing, but this machine's pandas is not the image's 1.1.3: the image's Python (issue 47).
    ("import pandas\n", SKLEARN_IMAGE, "3.9", True, ["pandas", "scikit-learn"]),
    # Installs nothing, imports nothing of its image: still the image's Python (its standard library).
    ("import json\n", SKLEARN_IMAGE, "3.9", True, []),
])
def test_the_jobs_python_is_the_images_where_this_machine_has_it(tmp_path, code, image, version,
                                                                                  seeded, wanted):
    (tmp_path / "evaluate.py").write_text(code)
    interpreter = job_env.choose(image, job_env.facts(image, None, [tmp_path]), {})
    runner = f"{sys.version_info[0]}.{sys.version_info[1]}"
    if version and job_env.find_python(version):
        assert (interpreter.version, interpreter.seed is not None) == (version, seeded)
        assert interpreter.seed.name.startswith("aws-sklearn-1.2-1-py3.9-")
    else:
        assert (interpreter.version, interpreter.seed, interpreter.mapped) == (runner, None, False)
    # What the image's environment would hold: its pins of what the code imports, not what it installs.
    if seeded:
        pins, constraints = job_env._pins(job_env.facts(image, None, [tmp_path]).record,
                                            job_env.facts(image, None, [tmp_path]))
        assert pins == wanted and {"pandas==1.1.3", "numpy==1.24.1"} <= set(constraints)


@pytest.mark.skipif(job_env.find_python("3.10") is None, reason="no Python 3.10 on this machine")
def test_an_image_package_that_cannot_be_installed_for_its_python_is_one_line(tmp_path, monkeypatch):
    from pipeline.images import catalog

    monkeypatch.setenv("PIP_NO_INDEX", "1")  # no registry: what a machine without one sees
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path))
    record = catalog.parse({"name": "example-image", "uri_patterns": ["/example:"], "python": "3.10",
                            "packages": {"tp-absent": "1.0"}, "modules": ["tp_absent"],
                            "sources": [{"url": "https://github.com/aws/x"}], "retrieved": "2026-11-27"})
    code = job_env.CodeFacts(record, frozenset({"tp_absent"}), frozenset(), False)
    python = job_env.find_python("3.10")
    interpreter = job_env.Interpreter(python, True, "3.10", seed=tmp_path / "seed")
    with pytest.raises(job_env.InstallFailed) as failed:
        job_env.seeded(interpreter, code)
    readme_record.record(failed.value)
    assert str(failed.value).startswith("cannot install the image's tp-absent for its Python 3.10 (example-image): ")
    assert str(failed.value).endswith(f"make the package registry reachable, or run the job under this machine's "
                                      f"Python: TRAINPIPE_IMAGE_PYTHON='/example:={sys.executable}'")
    assert not (tmp_path / "seed").exists()  # nothing half-made is left to be taken for ready


def test_an_image_of_this_machines_python_still_gets_its_own_pins(tmp_path):
    """A PyTorch 2.5 image has Python 3.11, this machine's: a job importing its pandas still gets
    the image's pandas over the image's Python, not this machine's packages; one importing its
    torch keeps this machine's (a framework is not installed again)."""
    image = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.5.1-cpu-py311-ubuntu22.04-sagemaker"
    runner = f"{sys.version_info[0]}.{sys.version_info[1]}"
    (tmp_path / "prepare.py").write_text("import pandas\n")
    pandas = job_env.choose(image, job_env.facts(image, None, [tmp_path]), {})
    assert runner == "3.11" and job_env.find_python("3.11")
    assert (pandas.version, pandas.mapped) == ("3.11", True) and pandas.seed.name.startswith("aws-pytorch-training-2.5")
    (tmp_path / "prepare.py").write_text("import torch\n")
    torch = job_env.choose(image, job_env.facts(image, None, [tmp_path]), {})
    assert (torch.python, torch.seed) == (sys.executable, None)
    assert torch.why == "the image's torch is this machine's; the image's Python is 3.11, this machine's too"


def test_a_framework_a_requirement_only_pulls_in_is_the_images(tmp_path):
    """DeepSpeed's requirements name torch; on a PyTorch image pip finds it installed and keeps
    it, so the job runs under this machine's torch (the image's framework), not an environment
    of the image's Python that would fetch another torch (it fetched torch 2.14.1 and CUDA wheels)."""
    image = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.10.0-cpu-py313-ubuntu22.04-sagemaker"
    (tmp_path / "zero.py").write_text("import torch\nimport deepspeed\n")
    runner = f"{sys.version_info[0]}.{sys.version_info[1]}"
    pulled = job_env.choose(image, job_env.facts(image, b"deepspeed==0.19.8\n", [tmp_path]), {})
    assert (pulled.version, pulled.seed) == (runner, None) and "the image's torch is this machine's" in pulled.why
    # Named in the requirements themselves, torch is what the job installs: not the image's.
    named = job_env.facts(image, b"deepspeed==0.19.8\ntorch==2.11.0\n", [tmp_path])
    assert "torch" in named.named and "torch" not in job_env.facts(image, b"deepspeed\n", [tmp_path]).named
