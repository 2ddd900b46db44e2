"""tools/image_records.py, run as a maintainer runs it, on a small fixture: a git repository
holding a Dockerfile in AWS's layout (stages, ARG defaults, pip and conda installs, a wheel
URL, a comment inside a continued RUN), AWS's published support file and a core_packages.json."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

DOCKERFILE = """\
ARG PYTHON_VERSION=3.12.10
ARG PYTORCH_VERSION=2.9.0
ARG SERVE_VERSION
FROM ubuntu:22.04 AS base_image
FROM base_image AS common
ARG PYTORCH_VERSION
RUN pip install --no-cache-dir \\
    numpy \\
    # a comment Docker drops
    "requests>=2.33.0" \\
 && pip install -U torch==${PYTORCH_VERSION} --index-url https://download.pytorch.org/whl/cpu
FROM common AS ec2
RUN pip install ec2-only-thing
FROM common AS sagemaker
RUN /opt/conda/bin/mamba install -y -c conda-forge pytorch=2.9.0 cpuonly scikit-learn \\
 && pip install https://example.com/smdistributed_dataparallel-2.2.0-cp312-cp312-linux_x86_64.whl \\
 && pip install torchserve==${SERVE_VERSION} "sagemaker>=2,<3"
"""
SUPPORT = """\
framework: PyTorch
version: "2.9"
accelerator: cpu
python: py312
ga: "2025-10-15"
eop: "2026-10-15"
tags:
  - "2.9.0-cpu-py312-ubuntu22.04-sagemaker"
"""
CORE = {"torchserve": {"version_specifier": "==0.12.0"}, "requests": {"version_specifier": ">=2.31.0"}}


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                               "GIT_COMMITTER_EMAIL": "t@t", "GIT_COMMITTER_DATE": "2026-07-30T12:00:00Z",
                               "GIT_AUTHOR_DATE": "2026-07-30T12:00:00Z", "PATH": "/usr/bin:/bin"}).stdout


def test_the_generator_writes_a_record_from_the_dockerfile_and_pins_its_commit(tmp_path):
    dlc = tmp_path / "dlc"
    (dlc / "pt").mkdir(parents=True)
    (dlc / "pt" / "Dockerfile.cpu").write_text(DOCKERFILE)
    (dlc / "pt" / "core.json").write_text(json.dumps(CORE))
    (dlc / "pt" / "2.9-cpu-sagemaker.yml").write_text(SUPPORT)
    git(dlc, "init", "-q")
    git(dlc, "add", ".")
    git(dlc, "commit", "-qm", "fixture")
    commit = git(dlc, "rev-parse", "HEAD").strip()
    done = subprocess.run(
        [sys.executable, str(REPO / "tools" / "image_records.py"), "--dlc", str(dlc / ".git"),
         "--dockerfile", "HEAD:pt/Dockerfile.cpu", "--support", "HEAD:pt/2.9-cpu-sagemaker.yml",
         "--core", "HEAD:pt/core.json", "--name", "aws-pytorch-training-2.9-cpu",
         "--repository", "pytorch-training", "--retrieved", "2026-11-28"],
        capture_output=True, text=True, timeout=60, cwd=REPO)
    assert done.returncode == 0, done.stderr
    record = json.loads(done.stdout)
    assert record["python"] == "3.12" and record["eop"] == "2026-10-15"
    assert record["uri_patterns"] == ["/pytorch-training:2\\.9(\\.\\d+)?-cpu-py312"]
    assert record["packages"] == {
        "numpy": "unpinned", "requests": ">=2.33.0",  # the Dockerfile's pin, not core's older one
        "torch": "==2.9.0",  # ARG substituted; conda's pytorch=2.9.0 is pip's torch==2.9.0
        "scikit-learn": "unpinned", "smdistributed-dataparallel": "==2.2.0",  # a wheel URL
        "torchserve": "==0.12.0",  # no ARG default: core_packages.json gives it
        "sagemaker": ">=2,<3"}  # the ec2 stage is another image
    assert {"numpy", "torch", "sklearn", "smdistributed", "ts", "sagemaker"} <= set(record["modules"])
    for source in record["sources"]:
        assert source["commit"] == commit and source["date"] == "2026-07-30"
        assert source["url"] == f"https://github.com/aws/deep-learning-containers/blob/{commit}/{source['file']}"
    # What the record says can be read back as a record.
    from pipeline.images import catalog

    assert catalog.parse(record).python_minor == (3, 12)


POLICY = """\
| Framework  | Version | CUDA | GitHub GA  | End of Patch |
| ---------- | ------- | ---- | ---------- | ------------ |
| PyTorch    | 2.9     | 13.0 | 2025-10-15 | 2026-10-15   |
| PyTorch    | 2.2     | 12.1 | 2024-01-30 | 2025-01-30   |
"""


def test_the_support_table_reads_the_published_files_and_the_older_policy_rows(tmp_path):
    dlc = tmp_path / "dlc"
    data = dlc / "docs" / "src" / "data" / "pytorch-training"
    data.mkdir(parents=True)
    (data / "2.9-cpu-sagemaker.yml").write_text(SUPPORT)
    (data / "2.9-cpu-ec2.yml").write_text(SUPPORT)  # not a SageMaker image
    (dlc / "docs" / "reference").mkdir()
    (dlc / "docs" / "reference" / "support_policy.md").write_text(POLICY)
    git(dlc, "init", "-q")
    git(dlc, "add", ".")
    git(dlc, "commit", "-qm", "fixture")
    commit = git(dlc, "rev-parse", "HEAD").strip()
    done = subprocess.run([sys.executable, str(REPO / "tools" / "image_records.py"), "support-table", "--dlc",
                           str(dlc / ".git"), "HEAD", "HEAD:docs/reference/support_policy.md"],
                          capture_output=True, text=True, timeout=60, cwd=REPO)
    assert done.returncode == 0, done.stderr
    table = json.loads(done.stdout)
    assert [(r["repository"], r["version"], r["accelerator"], r["eop"], r["tag"]) for r in table["images"]] == [
        # The policy's framework rows: every one where no file of the repository is published,
        # only the older versions where one is (2.9 training comes from its file).
        ("pytorch-inference", "2.2", None, "2025-01-30", None),
        ("pytorch-inference", "2.9", None, "2026-10-15", None),
        ("pytorch-training", "2.2", None, "2025-01-30", None),
        ("pytorch-training", "2.9", "cpu", "2026-10-15", "2.9.0-cpu-py312-ubuntu22.04-sagemaker")]
    assert all(s["commit"] == commit for s in table["sources"])


LOCK = """\
version = 1
requires-python = "==3.12.*"

[[package]]
name = "img"
version = "1.0"
source = { virtual = "." }
dependencies = [{ name = "numpy" }]

[package.optional-dependencies]
sagemaker = [{ name = "sagemaker", extra = ["local"] }]
dev = [{ name = "pytest" }]

[[package]]
name = "numpy"
version = "2.3.1"
source = { registry = "https://pypi.org/simple" }

[[package]]
name = "sagemaker"
version = "3.8.0"
source = { registry = "https://pypi.org/simple" }
dependencies = [{ name = "boto3" }]

[package.optional-dependencies]
local = [{ name = "docker" }]

[[package]]
name = "boto3"
version = "1.40.0"
source = { registry = "https://pypi.org/simple" }

[[package]]
name = "docker"
version = "7.1.0"
source = { registry = "https://pypi.org/simple" }

[[package]]
name = "pytest"
version = "9.0.0"
source = { registry = "https://pypi.org/simple" }
"""


def test_a_uv_lock_gives_what_uv_sync_installs_with_the_extras_named():
    sys.path.insert(0, str(REPO / "tools"))
    try:
        from image_records import lock_packages
    finally:
        sys.path.remove(str(REPO / "tools"))
    assert lock_packages(LOCK, ["sagemaker"]) == {
        "boto3": "==1.40.0", "docker": "==7.1.0", "numpy": "==2.3.1", "sagemaker": "==3.8.0"}  # not pytest (dev)
    assert lock_packages(LOCK, []) == {"numpy": "==2.3.1"}



def test_a_run_reads_its_stages_env_and_its_own_stage_args():
    """TF 2.16's layout: ``ARG PIP=pip3`` and ``ENV PIP=${PIP}`` in ``common``, the TF wheel in
    the sagemaker stage's own ``ARG TF_URL=...`` (no core_packages.json to fill it in); an ARG
    default of a sibling stage reaches no other."""
    sys.path.insert(0, str(REPO / "tools"))
    from image_records import packages

    dockerfile = """\
FROM ubuntu:20.04 AS base_image
FROM base_image AS common
ARG PIP=pip3
ENV PIP=${PIP}
ENV LANG C.UTF-8
FROM common AS ec2
ARG EC2_URL=https://example.com/ec2_only-1.0-py3-none-any.whl
FROM common AS sagemaker
ARG TF_URL=https://example.com/r2.16/tensorflow_cpu-2.16.2-cp310-cp310-linux_x86_64.whl
RUN ${PIP} install --no-cache-dir -U tf-models-official==2.16.0 \\
 && ${PIP} install --no-cache-dir -U ${TF_URL} ${EC2_URL} "tensorflow-io==0.37.*"
"""
    assert packages(dockerfile, "sagemaker") == {"tf-models-official": "==2.16.0", "tensorflow-cpu": "==2.16.2",
                                                 "tensorflow-io": "==0.37.*"}


def test_an_empty_line_inside_a_continued_run_does_not_end_it():
    """TF 2.2 to 2.5's Dockerfiles leave an empty line (and a comment) before ``&& pip install
    ${TF_URL} horovod``; Docker drops both and the RUN goes on."""
    sys.path.insert(0, str(REPO / "tools"))
    from image_records import packages

    dockerfile = """\
FROM ubuntu:18.04
ARG PIP=pip3
ARG TF_URL=https://example.com/tensorflow_cpu-2.4.3-cp37-cp37m-manylinux2010_x86_64.whl
RUN ${PIP} install --no-cache-dir -U \\
    numpy==1.19.1 \\
    "sagemaker>=2,<3" \\

    # Let's install TensorFlow separately in the end
 && ${PIP} install --no-cache-dir -U \\
    ${TF_URL} \\
    horovod==0.21.0

RUN echo done
"""
    assert packages(dockerfile, "ubuntu:18.04") == {"numpy": "==1.19.1", "sagemaker": ">=2,<3",
                                                   "tensorflow-cpu": "==2.4.3", "horovod": "==0.21.0"}


def test_a_dockerfile_that_names_its_own_python_is_one_source(tmp_path):
    """TF 2.13 and older: no support file; ``--set-source`` is the Dockerfile itself (its ARG
    PYTHON_VERSION), said with ``--set-what``, and named once."""
    dlc = tmp_path / "dlc"
    (dlc / "tf").mkdir(parents=True)
    (dlc / "tf" / "Dockerfile.cpu").write_text(
        "FROM ubuntu:20.04 AS sagemaker\nARG PYTHON_VERSION=3.10.12\nRUN pip install tensorflow-cpu==2.13.0\n")
    git(dlc, "init", "-q")
    git(dlc, "add", ".")
    git(dlc, "commit", "-qm", "fixture")
    done = subprocess.run(
        [sys.executable, str(REPO / "tools" / "image_records.py"), "--dlc", str(dlc / ".git"),
         "--dockerfile", "HEAD:tf/Dockerfile.cpu", "--set", "version=2.13", "--set", "accelerator=cpu",
         "--set", "python=py310", "--set-source", "HEAD:tf/Dockerfile.cpu",
         "--set-what", "ARG PYTHON_VERSION (Python 3.10); no dates", "--name", "aws-tensorflow-training-2.13-cpu",
         "--repository", "tensorflow-training", "--retrieved", "2026-11-28"],
        capture_output=True, text=True, timeout=60, cwd=REPO)
    assert done.returncode == 0, done.stderr
    record = json.loads(done.stdout)
    assert (record["python"], record["eop"], record["packages"]) == ("3.10", None, {"tensorflow-cpu": "==2.13.0"})
    (source,) = record["sources"]
    assert source["what"] == ("the sagemaker stage's pip/conda installs, ARG defaults; "
                              "ARG PYTHON_VERSION (Python 3.10); no dates")


def test_a_sklearn_record_reads_the_base_dockerfile_then_requirements_txt(tmp_path):
    """aws/sagemaker-scikit-learn-container's layout: the base Dockerfile's last (unnamed) stage
    conda-installs pyarrow and pip-installs scikit-learn and a local wheel (not a distribution name);
    the final image pip-installs requirements.txt last. Sources name that repository; the tags'
    pattern is given (1.4-2-cpu-py3: py3 and no more)."""
    repo = tmp_path / "sk"
    (repo / "docker" / "1.4-2" / "base").mkdir(parents=True)
    (repo / "docker" / "1.4-2" / "base" / "Dockerfile.cpu").write_text(
        "ARG UBUNTU_VERSION=20.04\nFROM ubuntu:${UBUNTU_VERSION} as builder\nRUN pip install builder-only\n"
        "FROM ubuntu:${UBUNTU_VERSION}\nARG PYTHON_VERSION=3.10\nARG PYARROW_VERSION=17.0.0\n"
        "RUN conda install -c conda-forge python=${PYTHON_VERSION} pyarrow=${PYARROW_VERSION} && \\\n"
        "    python3 -m pip install dist/*.whl && python3 -m pip install scikit-learn==1.4.2 numpy==1.26.0\n")
    (repo / "requirements.txt").write_text("numpy==2.1.0  # the final image's\nscipy>=1.9.0\n\ncertifi\n")
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "fixture")
    commit = git(repo, "rev-parse", "HEAD").strip()
    done = subprocess.run(
        [sys.executable, str(REPO / "tools" / "image_records.py"), "--dlc", str(repo / ".git"),
         "--github", "aws/sagemaker-scikit-learn-container", "--dockerfile", "HEAD:docker/1.4-2/base/Dockerfile.cpu",
         "--stage", "ubuntu:${UBUNTU_VERSION}", "--requirements", "HEAD:requirements.txt",
         "--set", "version=1.4-2", "--set", "accelerator=cpu", "--set", "python=py310",
         "--set-source", "HEAD:docker/1.4-2/base/Dockerfile.cpu", "--set-what", "ARG PYTHON_VERSION",
         "--uri-pattern", "/sagemaker-scikit-learn:1\\.4-2-cpu-py3(?![0-9])", "--name", "aws-sklearn-1.4-2",
         "--repository", "sagemaker-scikit-learn", "--retrieved", "2026-11-28",
         "--source", "https://pypi.org/project/scikit-learn/1.4.2/|METADATA|scikit-learn requires joblib"],
        capture_output=True, text=True, timeout=60, cwd=REPO)
    assert done.returncode == 0, done.stderr
    record = json.loads(done.stdout)
    assert record["packages"] == {"pyarrow": "==17.0.0", "scikit-learn": "==1.4.2", "numpy": "==2.1.0",
                                  "scipy": ">=1.9.0", "certifi": "unpinned"}
    assert record["python"] == "3.10" and record["uri_patterns"] == ["/sagemaker-scikit-learn:1\\.4-2-cpu-py3(?![0-9])"]
    assert [s["file"] for s in record["sources"]] == ["docker/1.4-2/base/Dockerfile.cpu", "requirements.txt", "METADATA"]
    for source in record["sources"][:2]:  # (a --source after them does not change their URLs)
        assert source["url"] == f"https://github.com/aws/sagemaker-scikit-learn-container/blob/{commit}/{source['file']}"
    from pipeline.images import catalog

    parsed = catalog.parse(record)
    assert any(re.search(p, "x/sagemaker-scikit-learn:1.4-2-cpu-py3") for p in parsed.uri_patterns)
    assert not any(re.search(p, "x/sagemaker-scikit-learn:1.4-2-cpu-py312") for p in parsed.uri_patterns)


def test_an_image_built_from_another_dockerfiles_image_reads_that_one_first():
    """TF 2.7's and PyTorch 1.10's SageMaker images: ``FROM $BASE_IMAGE``, the EC2 image, whose
    Dockerfile's last stage installs TF; the SageMaker Dockerfile's later pins replace it."""
    sys.path.insert(0, str(REPO / "tools"))
    from image_records import based_packages

    base = """\
FROM ubuntu:20.04 AS base_image
RUN pip install base-only-tool
FROM base_image
ARG TF_URL=https://example.com/tensorflow-2.7.4-cp38-cp38-manylinux2010_x86_64.whl
RUN pip install ${TF_URL} horovod==0.25.0 "protobuf<3.20" requests
"""
    sagemaker = """\
ARG BASE_IMAGE=""
FROM $BASE_IMAGE
RUN pip install "sagemaker>=2,<3" "protobuf>=3.19.5,<3.20" requests
"""
    assert based_packages(base, sagemaker, "$BASE_IMAGE") == {
        "base-only-tool": "unpinned", "tensorflow": "==2.7.4", "horovod": "==0.25.0",
        "protobuf": ">=3.19.5,<3.20", "requests": "unpinned", "sagemaker": ">=2,<3"}


def test_a_hugging_face_image_extends_its_base_and_takes_transformers_from_the_published_data(tmp_path):
    """Hugging Face's Dockerfiles: one unnamed stage FROM AWS's PyTorch image (``--stage :last``), the
    transformers version an ARG the buildspec passes; AWS's published file names it. ``--extends`` names
    the base image's record."""
    dlc = tmp_path / "dlc"
    (dlc / "hf").mkdir(parents=True)
    (dlc / "hf" / "Dockerfile.gpu").write_text(
        "FROM 763104351884.dkr.ecr.us-west-2.amazonaws.com/pytorch-training:2.1.0-gpu-py310\n"
        "ARG TRANSFORMERS_VERSION\nRUN pip install transformers[sklearn]==${TRANSFORMERS_VERSION} datasets\n")
    (dlc / "hf" / "2.1-gpu-sagemaker.yml").write_text(
        'version: "2.1"\naccelerator: gpu\npython: py310\ntransformers: "4.36.0"\ntags:\n'
        '  - "2.1.0-transformers4.36.0-gpu-py310-cu121-ubuntu20.04"\n')
    git(dlc, "init", "-q")
    git(dlc, "add", ".")
    git(dlc, "commit", "-qm", "fixture")
    done = subprocess.run(
        [sys.executable, str(REPO / "tools" / "image_records.py"), "--dlc", str(dlc / ".git"),
         "--dockerfile", "HEAD:hf/Dockerfile.gpu", "--stage", ":last", "--support", "HEAD:hf/2.1-gpu-sagemaker.yml",
         "--uri-pattern", "/huggingface-pytorch-training:2\\.1(\\.\\d+)?-transformers4\\.36\\.0-gpu-py310",
         "--extends", "aws-pytorch-training-2.1-gpu", "--name", "aws-huggingface-pytorch-training-2.1-gpu",
         "--repository", "huggingface-pytorch-training", "--retrieved", "2026-11-28"],
        capture_output=True, text=True, timeout=60, cwd=REPO)
    assert done.returncode == 0, done.stderr
    record = json.loads(done.stdout)
    assert record["packages"] == {"transformers": "==4.36.0", "datasets": "unpinned"}
    assert record["extends"] == "aws-pytorch-training-2.1-gpu" and record["python"] == "3.10"
    assert record["sources"][0]["what"].startswith("the last stage's pip/conda installs")


def _tool():
    import importlib.util

    spec = importlib.util.spec_from_file_location("image_records_tool", REPO / "tools" / "image_records.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_output_replaces_a_record_whole_so_a_reader_never_sees_half_of_one(tmp_path, monkeypatch):
    """The catalog read a record while the generator rewrote it in place (``> FILE``) and raised
    JSONDecodeError: ``--output`` writes beside the record and renames over it."""
    tool = _tool()
    record = tmp_path / "aws-x.json"
    record.write_text('{"name": "old"}\n')
    record.chmod(0o644)
    with open(record) as reader:  # a reader that opened the record before the rewrite
        tool.write({"name": "new", "packages": {"a": "==1"}}, str(record))
        assert reader.read() == '{"name": "old"}\n'  # its file was replaced, not rewritten under it
    assert json.loads(record.read_text()) == {"name": "new", "packages": {"a": "==1"}}
    assert record.read_text() == json.dumps({"name": "new", "packages": {"a": "==1"}}, indent=1) + "\n"
    assert record.stat().st_mode & 0o777 == 0o644 and sorted(p.name for p in tmp_path.iterdir()) == ["aws-x.json"]

    def interrupted(fd):
        raise OSError("disk full")

    monkeypatch.setattr(tool.os, "fsync", interrupted)
    with pytest.raises(OSError, match="disk full"):
        tool.write({"name": "newer"}, str(record))
    assert json.loads(record.read_text())["name"] == "new"  # untouched, and no temporary file left
    assert sorted(p.name for p in tmp_path.iterdir()) == ["aws-x.json"]


def test_the_make_script_writes_every_record_through_output():
    """tools/image_records_make.sh never redirects the generator into a record (``> $R/...``)."""
    script = (REPO / "tools" / "image_records_make.sh").read_text()
    assert not re.search(r">\s*(\$R/|pipeline/images/)", script)
    assert script.count("--output $R/") >= 20 and "--output pipeline/images/support.json" in script


BUILDSPEC = """\
version: &VERSION 2.0.1
short_version: &SHORT_VERSION "2.0"
images:
  BuildCpu:
    device_type: &DEVICE_TYPE cpu
    python_version: &DOCKER_PYTHON_VERSION py3
    torch_serve_version: &TORCHSERVE_VERSION 0.8.2
    tool_kit_version: &SM_TOOLKIT_VERSION 2.0.16
    docker_file: !join [ docker/, *SHORT_VERSION, /, *DOCKER_PYTHON_VERSION, /Dockerfile., *DEVICE_TYPE ]
  BuildGpu:
    device_type: &DEVICE_TYPE gpu
    python_version: &DOCKER_PYTHON_VERSION py3
    torch_serve_version: &TORCHSERVE_VERSION 0.9.0
    docker_file: !join [ docker/, *SHORT_VERSION, /, *DOCKER_PYTHON_VERSION, /Dockerfile., *DEVICE_TYPE ]
"""


def test_a_buildspec_gives_the_build_args_the_dockerfile_leaves_without_a_default(tmp_path):
    """``ARG TORCHSERVE_VERSION`` with no default: AWS's builder passes the buildspec's
    ``torch_serve_version`` (src/image_builder.py), read from the entry whose docker_file is this one
    (anchors named again per entry, ``!join``); without ``--buildspec`` the record says unpinned."""
    dlc = tmp_path / "dlc"
    (dlc / "pt" / "docker" / "2.0" / "py3").mkdir(parents=True)
    (dlc / "pt" / "docker" / "2.0" / "py3" / "Dockerfile.cpu").write_text(
        "ARG PYTHON_VERSION=3.10.9\nARG TORCHSERVE_VERSION\nARG SM_TOOLKIT_VERSION\nFROM ubuntu AS sagemaker\n"
        "ARG TORCHSERVE_VERSION\nRUN pip install torchserve==${TORCHSERVE_VERSION} "
        "sagemaker-pytorch-inference==${SM_TOOLKIT_VERSION} numpy\n")
    (dlc / "pt" / "buildspec-2-0-sm.yml").write_text(BUILDSPEC)
    git(dlc, "init", "-q")
    git(dlc, "add", ".")
    git(dlc, "commit", "-qm", "fixture")

    def generate(*more: str) -> dict:
        done = subprocess.run(
            [sys.executable, str(REPO / "tools" / "image_records.py"), "--dlc", str(dlc / ".git"),
             "--dockerfile", "HEAD:pt/docker/2.0/py3/Dockerfile.cpu", "--set", "version=2.0", "--set", "accelerator=cpu",
             "--set", "python=py310", "--set-source", "HEAD:pt/docker/2.0/py3/Dockerfile.cpu",
             "--name", "aws-pytorch-inference-2.0-cpu", "--repository", "pytorch-inference", *more],
            capture_output=True, text=True, timeout=60, cwd=REPO)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    record = generate("--buildspec", "HEAD:pt/buildspec-2-0-sm.yml")
    assert record["packages"] == {"torchserve": "==0.8.2", "sagemaker-pytorch-inference": "==2.0.16", "numpy": "unpinned"}
    assert record["sources"][-1]["file"] == "pt/buildspec-2-0-sm.yml"
    assert record["sources"][-1]["what"].endswith("TORCHSERVE_VERSION=0.8.2, SM_TOOLKIT_VERSION=2.0.16")
    assert generate()["packages"]["torchserve"] == "unpinned"


def test_a_buildspec_for_training_and_inference_gives_each_its_own_entrys_build_args():
    """Hugging Face's buildspec.yml of 2021 builds the training and the inference image of one version,
    each entry's docker_file the same relative path (docker/1.9/py3/cu111/Dockerfile.gpu): the entry's
    ``root`` says which folder's Dockerfile it builds; the inference entry has no DATASETS_VERSION."""
    from tools.image_records import buildspec_args

    text = """\
version: &VERSION 1.9.0
short_version: &SHORT_VERSION 1.9
repository_info:
  training_repository: &TRAINING_REPOSITORY
    image_type: &TRAINING_IMAGE_TYPE training
    root: !join [ "huggingface/pytorch/", *TRAINING_IMAGE_TYPE ]
  inference_repository: &INFERENCE_REPOSITORY
    image_type: &INFERENCE_IMAGE_TYPE inference
    root: !join [ "huggingface/pytorch/", *INFERENCE_IMAGE_TYPE ]
images:
  BuildTraining:
    <<: *TRAINING_REPOSITORY
    transformers_version: &TRANSFORMERS_VERSION 4.11.0
    datasets_version: &DATASETS_VERSION 1.12.1
    docker_file: !join [ docker/, *SHORT_VERSION, /py3/cu111/Dockerfile.gpu ]
  BuildInference:
    <<: *INFERENCE_REPOSITORY
    transformers_version: &TRANSFORMERS_VERSION 4.11.0
    docker_file: !join [ docker/, *SHORT_VERSION, /py3/cu111/Dockerfile.gpu ]
"""
    assert buildspec_args(text, "huggingface/pytorch/training/docker/1.9/py3/cu111/Dockerfile.gpu") == {
        "TRANSFORMERS_VERSION": "4.11.0", "DATASETS_VERSION": "1.12.1"}
    assert buildspec_args(text, "huggingface/pytorch/inference/docker/1.9/py3/cu111/Dockerfile.gpu") == {
        "TRANSFORMERS_VERSION": "4.11.0"}
