"""Which launcher an SDK v2 framework job runs on its hosts, read from its framework
hyperparameters as SageMaker's PyTorch toolkit reads them; and what is refused before any step.

SageMaker (sagemaker-pytorch-training-toolkit ``training.train``; the TensorFlow toolkit reads
the same MPI flag), in this order:
- ``sagemaker_mpi_enabled`` (``distribution={"mpi": ...}``): ``mpirun`` on algo-1 over every
  host's slots (``hosts/mpi.py``);
- ``sagemaker_pytorch_ddp_enabled`` or ``sagemaker_distributed_dataparallel_enabled``: the
  SMDataParallel runner, an ``mpirun`` whose ranks run ``python -m mpi4py script.py``
  (``smddprun`` in front of it only where SageMaker's data-parallel library is installed, AWS's
  GPU images). SDK v2 (2.257) writes ``{"pytorchddp": ...}`` as ``{"smdistributed":
  {"dataparallel": ...}}`` (``PyTorch.__init__`` rewrites it), so the flag alone cannot tell
  the two apart: what needs AWS's library is code that imports ``smdistributed``;
- ``sagemaker_torch_distributed_enabled`` (``{"torch_distributed": ...}``): ``torchrun`` on every
  host (``hosts/torchrun.py``);
- anything else: the script once per host.

Refused here, before any step: SageMaker's own distributed libraries (code that imports
``smdistributed``; ``smdistributed``'s model parallelism) and PyTorch/XLA's launcher, which need
AWS's GPU or Trainium images and exist nowhere else; and a torchrun job whose Python cannot
import torch.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
from collections.abc import Mapping

from pipeline.definition.instances import gpus_per_instance
from pipeline.environment import scrubbed

# SageMaker: the framework hyperparameters the SDK's estimators write (sagemaker/estimator.py,
# sagemaker/pytorch/estimator.py) and the toolkits read.
MPI_ENABLED = "sagemaker_mpi_enabled"
PYTORCH_DDP = "sagemaker_pytorch_ddp_enabled"
TORCH_DISTRIBUTED = "sagemaker_torch_distributed_enabled"
SMDATAPARALLEL = "sagemaker_distributed_dataparallel_enabled"
MODEL_PARALLEL = "mp_parameters"
PYTORCH_XLA = "sagemaker_pytorch_xla_multi_worker_enabled"
PROCESSES_PER_HOST = "sagemaker_mpi_num_of_processes_per_host"

PROCESS, MPIRUN, PYTORCHDDP, TORCHRUN = "process", "mpirun", "pytorchddp", "torchrun"
_SMDISTRIBUTED = re.compile(r"^\s*(?:import|from)\s+smdistributed\b", re.MULTILINE)

# A framework parameter (decoded) -> what the user wrote, for the one-line refusals.
SMDDP_LIBRARY = ("code that imports smdistributed",
                 "SageMaker's data-parallel library (smddp) exists only in AWS's PyTorch GPU images")
_UNSUPPORTED = {
    MODEL_PARALLEL: ('distribution={"smdistributed": {"modelparallel": ...}}',
                     "SageMaker's model-parallel library (smp) runs only on AWS's GPU images"),
    PYTORCH_XLA: ('distribution={"pytorchxla": ...}',
                  "PyTorch/XLA's launcher needs AWS's Trainium or XLA GPU images"),
}
INSTEAD = ('use distribution={"torch_distributed": {"enabled": True}} (torchrun; DDP, FSDP and DeepSpeed '
           'run under it) or {"pytorchddp": {"enabled": True}}, which run here and on SageMaker')


def pytorch_image(image_uri: str) -> bool:
    """SageMaker: AWS's PyTorch training images run the PyTorch toolkit, which sets MASTER_ADDR and
    MASTER_PORT for every launcher, mpirun's included (``training._set_distributed_environment``)."""
    return "/pytorch-training:" in str(image_uri or "")


def _enabled(value) -> bool:
    return value is True or (isinstance(value, str) and value.strip().lower() == "true")


def launcher(framework: Mapping[str, object]) -> str:
    """The launcher the toolkit picks for these (decoded) framework parameters."""
    if _enabled(framework.get(MPI_ENABLED)):
        return MPIRUN
    if _enabled(framework.get(PYTORCH_DDP)):
        return PYTORCHDDP
    if _enabled(framework.get(TORCH_DISTRIBUTED)):
        return TORCHRUN
    if _enabled(framework.get(SMDATAPARALLEL)):
        return PYTORCHDDP  # the same SMDataParallel runner (see the module's docstring)
    return PROCESS


def refusal(hyperparameters: Mapping[str, object], where: str, code: Mapping[str, str] | None = None) -> str | None:
    """The one line for a distribution that cannot run here, or None. ``hyperparameters``
    as the request holds them (JSON-encoded strings) or decoded; ``code`` (path -> text), where
    known, is read for an import of SageMaker's data-parallel library."""
    smddp = hyperparameters.get(SMDATAPARALLEL)
    if code and _enabled(smddp.strip().strip('"') if isinstance(smddp, str) else smddp):
        for path, text in sorted(code.items()):
            match = _SMDISTRIBUTED.search(text)
            if path.endswith(".py") and match:
                line = text.count("\n", 0, match.start()) + 1
                return (f"{where}: {SMDDP_LIBRARY[0]} ({path}:{line}) cannot run locally: {SMDDP_LIBRARY[1]}; "
                        f"{INSTEAD}, with torch.distributed's own backend (gloo, nccl)")
    for key, (written, why) in _UNSUPPORTED.items():
        value = hyperparameters.get(key)
        if isinstance(value, str) and key != MODEL_PARALLEL:
            value = value.strip().strip('"')
        if value is None or (key != MODEL_PARALLEL and not _enabled(value)):
            continue
        return f"{where}: {written} cannot run locally: {why}; {INSTEAD}"
    return None


def processes_per_host(framework: Mapping[str, object], instance_type: str, kind: str) -> int:
    """SageMaker: ``sagemaker_mpi_num_of_processes_per_host`` where given, else one process per
    GPU of the instance type (the toolkit's ``runner._get_by_runner_type``), else one. MPI keeps
    one where none is given (this runner's rule since before torchrun: the SDK's MPI settings
    name the count)."""
    given = framework.get(PROCESSES_PER_HOST)
    if given not in (None, ""):
        return int(given)
    if kind in (TORCHRUN, PYTORCHDDP):
        return gpus_per_instance(instance_type) or 1
    return 1


def torch_importable(python: str) -> bool:
    """Whether ``python`` finds torch (without importing it: 3 s)."""
    import sys

    if python == sys.executable:
        return importlib.util.find_spec("torch") is not None
    # The job's Python runs what its installed requirements put at its start (a .pth file):
    # never with the runner's environment.
    done = subprocess.run([python, "-c", "import importlib.util, sys; "
                           "sys.exit(importlib.util.find_spec('torch') is None)"],
                          capture_output=True, timeout=120, env=scrubbed(os.environ))
    return done.returncode == 0


def torch_missing(what: str, image_uri: str, record, installs_torch: bool, python: str) -> str | None:
    """Why a torchrun job could not import torch, in one line naming the actual cause, or None.

    ``record`` is the image's record (``pipeline/images``) or None; ``installs_torch``: the
    job's requirements install torch; ``python`` runs the job where nothing maps its image."""
    head = f"{what} runs torchrun, which needs PyTorch"
    if record is not None and not record.provides("torch") and not installs_torch:
        return (f"{head}, and the image {image_uri} has none (record {record.name}) nor do the code's "
                f"requirements install it: use AWS's PyTorch training image "
                f"(pytorch-training:2.9 or 2.10) or add torch to the requirements")
    if installs_torch or torch_importable(python):
        return None
    if record is not None:
        return (f"{head}: the image {image_uri} has it (record {record.name}), but this machine's "
                f"Python ({python}), which runs its jobs, has no torch: install trainpipe's local extras "
                f"(`make install`, torch is one of them) or `pip install torch` there")
    return (f"{head}, and this machine's Python ({python}), which runs the jobs of an image with no record "
            f"({image_uri or 'none'}), has no torch: install trainpipe's local extras (`make install`) "
            f"or add torch to the code's requirements")


def installs_torch(requirements: str | bytes | None) -> bool:
    from pipeline.images.distributions import parse_requirements

    text = requirements.decode(errors="replace") if isinstance(requirements, bytes) else requirements
    return "torch" in parse_requirements(text).modules


def submitted_code(storage, submit) -> dict[str, str]:
    """The .py files and requirements.txt of an SDK v2 ``sagemaker_submit_directory`` in the
    store ({} where it is not there yet: an earlier step makes it, judged when the job starts)."""
    from training_entry import archives

    if not (isinstance(submit, str) and submit.startswith("s3://") and submit.endswith(".tar.gz")):
        return {}
    try:
        data = storage.read_bytes(submit)
    except Exception:  # noqa: BLE001 - the store says why when the job reads it
        return {}
    members = archives.read_members(
        data, lambda name: name.endswith(".py") or name.lstrip("./") == "requirements.txt", 2_000, 1 << 20)
    return {name.lstrip("./"): m.decode(errors="replace") for name, m in members.items()}


def check_before_run(request: Mapping, storage, where: str, requirements: str | None = None,
                     what: str | None = None) -> str | None:
    """The one line that refuses this (known part of a) training request before any step, or
    None: a distribution that cannot run here; torchrun (``what`` names v3's Torchrun) where
    the job's Python will have no torch."""
    from pipeline.images import catalog
    from pipeline.local.jobs.contract import decode_hyperparameters
    from pipeline.local.jobs.environments.interpreters import interpreter_for

    hyperparameters = request.get("HyperParameters")
    if what is None:
        if not isinstance(hyperparameters, Mapping):
            return None
        known = {k: v for k, v in hyperparameters.items() if isinstance(v, str)}
        decoded = decode_hyperparameters(known)
        wanted = launcher(decoded)
        code = submitted_code(storage, decoded.get("sagemaker_submit_directory")) \
            if wanted in (TORCHRUN, PYTORCHDDP) else {}
        refused = refusal(known, where, code)
        if refused:
            return refused
        if wanted != TORCHRUN:
            return None
        what = 'distribution={"torch_distributed": {"enabled": True}}'
        requirements = code.get("requirements.txt")
    image = (request.get("AlgorithmSpecification") or {}).get("TrainingImage")
    if not isinstance(image, str):
        return None  # a parameter an earlier step sets: judged when the job starts
    missing = torch_missing(what, image, catalog.find(image), installs_torch(requirements),
                            interpreter_for(image).python)
    return f"{where}: {missing}" if missing else None
