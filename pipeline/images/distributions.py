"""Which top-level modules a pip distribution provides, and what a requirements.txt installs.

A requirement names a distribution (``scikit-learn``); code imports a module (``sklearn``).
The names differ often enough that guessing from the name alone would refuse good code, so
the answer comes, in order, from: the table below (the well-known mismatches), the
distribution's own metadata when this machine has it installed (``top_level.txt`` or its
file list), and else the normalised name (``foo-bar`` -> ``foo_bar``) marked as a guess.
A guess is never a reason to refuse (the pre-run check turns a refusal into a warning when
a requirement's modules could only be guessed).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import metadata

# Distribution (normalised, PEP 503) -> the top-level modules it installs, where the two
# names differ. Each checked against the package's own top_level.txt or file list.
KNOWN: dict[str, tuple[str, ...]] = {
    "scikit-learn": ("sklearn",),
    "pillow": ("PIL",),
    "pyyaml": ("yaml",),
    "opencv-python": ("cv2",),
    "opencv-python-headless": ("cv2",),
    "opencv-contrib-python": ("cv2",),
    "opencv-contrib-python-headless": ("cv2",),
    "protobuf": ("google",),
    "googleapis-common-protos": ("google",),
    "google-auth": ("google",),
    "google-cloud-storage": ("google",),
    "google-pasta": ("pasta",),
    "python-dateutil": ("dateutil",),
    "beautifulsoup4": ("bs4",),
    "absl-py": ("absl",),
    "tensorflow": ("tensorflow",),
    "tensorflow-cpu": ("tensorflow",),
    "tensorflow-gpu": ("tensorflow",),
    "tensorflow-datasets": ("tensorflow_datasets",),
    "tensorflow-hub": ("tensorflow_hub",),
    "tensorflow-io": ("tensorflow_io",),
    "tensorflow-io-gcs-filesystem": ("tensorflow_io_gcs_filesystem",),
    "tensorflow-text": ("tensorflow_text",),
    "tensorflow-metadata": ("tensorflow_metadata",),
    "tensorflow-model-optimization": ("tensorflow_model_optimization",),
    "tensorflow-estimator": ("tensorflow_estimator",),
    "tensorflow-serving-api": ("tensorflow_serving",),
    "tensorflow-serving-api-gpu": ("tensorflow_serving",),  # AWS's TF inference GPU images (2.8 to 2.13)
    "tf-models-official": ("official", "orbit"),
    "tf-keras": ("tf_keras",),
    "torch": ("torch", "torchgen", "functorch"),
    "pytorch": ("torch",),
    "sagemaker-tensorflow": ("sagemaker_tensorflow",),
    "sagemaker-tensorflow-training": ("sagemaker_tensorflow_container",),
    "sagemaker-pytorch-training": ("sagemaker_pytorch_container",),
    "sagemaker-sklearn-container": ("sagemaker_sklearn_container",),
    "sagemaker-training": ("sagemaker_training",),
    "sagemaker-inference": ("sagemaker_inference",),
    "sagemaker-containers": ("sagemaker_containers",),
    "sagemaker-experiments": ("smexperiments",),
    "smclarify": ("smclarify",),
    "multi-model-server": ("mms",),
    "model-archiver": ("model_archiver",),
    "cython": ("Cython", "pyximport", "cython"),
    "mpi4py": ("mpi4py",),
    "horovod": ("horovod",),
    "google-crc32c": ("google_crc32c",),
    "jupyter-server": ("jupyter_server",),
    "msgpack-python": ("msgpack",),
    "pyopenssl": ("OpenSSL",),
    "pyjwt": ("jwt",),
    "attrs": ("attr", "attrs"),
    "setuptools": ("setuptools", "pkg_resources", "_distutils_hack"),
    "typing-extensions": ("typing_extensions",),
    "awscli": ("awscli",),
    "ipython": ("IPython",),
    "pyzmq": ("zmq",),
    "faiss-cpu": ("faiss",),
    "lightgbm": ("lightgbm",),
    "xgboost": ("xgboost",),
    "mlflow": ("mlflow",),
    "mlflow-skinny": ("mlflow",),
    "grpcio": ("grpc",),
    "dnspython": ("dns",),
    "python-json-logger": ("pythonjsonlogger",),
    "scikit-image": ("skimage",),
    "gitpython": ("git",),
    "pycocotools": ("pycocotools",),
    "gin-config": ("gin",),  # gin_config-0.5.0 wheel
    "google-api-python-client": ("googleapiclient", "apiclient"),  # its 2.202.0 wheel
    "sentencepiece": ("sentencepiece",),
    "markdown": ("markdown",),
    "charset-normalizer": ("charset_normalizer",),
    "mlio-py": ("mlio",),
    "zope-event": ("zope",),
    "zope-interface": ("zope",),
    "pip": ("pip",),
    # The PyTorch images' own (AWS's Dockerfiles; the modules as AWS's examples import them).
    "smdistributed-dataparallel": ("smdistributed",),
    "sagemaker-pytorch-inference": ("sagemaker_pytorch_serving_container",),
    "torchserve": ("ts",),
    "torchserve-nightly": ("ts",),  # AWS's PyTorch inference 1.10 image
    "torch-model-archiver": ("model_archiver",),
    "transformer-engine": ("transformer_engine",),
    "flash-attn": ("flash_attn",),
}

_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def normalise(name: str) -> str:
    """PEP 503: ``Scikit_Learn`` -> ``scikit-learn``."""
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True)
class Provided:
    modules: tuple[str, ...]
    known: bool  # False: only guessed from the name


def modules_of(distribution: str) -> Provided:
    """The top-level modules ``distribution`` installs (see the module docstring)."""
    key = normalise(distribution)
    if key in KNOWN:
        return Provided(KNOWN[key], True)
    try:
        dist = metadata.distribution(key)
    except metadata.PackageNotFoundError:
        dist = None
    if dist is not None:
        found = installed_modules(dist)
        if found:
            return Provided(tuple(found), True)
    return Provided((key.replace("-", "_"),), False)


def installed_modules(dist) -> list[str]:
    """The top-level importable names of an installed distribution (its own metadata)."""
    text = dist.read_text("top_level.txt")
    if text:
        return sorted({line.strip() for line in text.split() if line.strip()})
    names = set()
    for entry in dist.files or []:
        first = str(entry).split("/", 1)[0]
        if first.endswith((".dist-info", ".data", ".pth")) or first in ("..", "__pycache__"):
            continue
        if first.endswith(".py"):
            names.add(first[:-3])
        elif "." not in first and "/" in str(entry):
            names.add(first)
        elif first.endswith(".so"):
            names.add(first.split(".", 1)[0])
    return sorted(names)


def dependency_modules(distribution: str) -> set[str]:
    """The modules of what pip would install with ``distribution``, as far as this machine
    has it installed (its requirements without extras, followed): a requirement that this
    machine already satisfies brings its dependencies here, as pip brings them in the image."""
    found: set[str] = set()
    seen: set[str] = set()
    todo = [normalise(distribution)]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        if name != normalise(distribution):
            found.update(modules_of(name).modules)
        for requirement in dist.requires or []:
            if "extra ==" not in requirement:
                match = _NAME.match(requirement)
                if match:
                    todo.append(normalise(match.group(1)))
    return found


@dataclass(frozen=True)
class Requirements:
    distributions: tuple[str, ...]  # normalised names, in file order
    modules: frozenset[str]  # what they install (top-level names)
    guessed: tuple[str, ...]  # distributions whose modules are only guessed
    opaque: tuple[str, ...]  # lines naming no distribution (-e ., a URL, -r other.txt)


def parse_requirements(text: str | None) -> Requirements:
    """What a requirements.txt installs, as top-level modules. Options (``--index-url``),
    comments and markers are skipped; a line that names no distribution (a path, a URL
    without ``#egg=``, ``-r``) is kept as opaque: it may install anything."""
    distributions: list[str] = []
    modules: set[str] = set()
    guessed: list[str] = []
    opaque: list[str] = []
    for raw in (text or "").splitlines():
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("-") and not line.startswith(("-r", "--requirement", "-c", "--constraint",
                                                          "-e", "--editable")):
            continue  # an option: --index-url, --find-links, --no-binary ...
        if line.startswith(("-r", "--requirement", "-c", "--constraint", "-e", "--editable")) \
                or "://" in line or line.startswith((".", "/")):
            egg = re.search(r"#egg=([A-Za-z0-9._-]+)", raw)
            if egg:
                line = egg.group(1)
            else:
                opaque.append(line)
                continue
        match = _NAME.match(line.split("@", 1)[0] if " @ " in line else line)
        if not match:
            opaque.append(line)
            continue
        name = normalise(match.group(1).split("[", 1)[0])
        distributions.append(name)
        provided = modules_of(name)
        modules.update(provided.modules)
        modules.update(dependency_modules(name))
        if not provided.known:
            guessed.append(name)
    return Requirements(tuple(distributions), frozenset(modules), tuple(guessed), tuple(opaque))
