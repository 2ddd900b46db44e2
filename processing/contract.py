"""The processing container's contract with ``pipeline/``: paths, output names, arguments.

Standard library only, Python 3.10 syntax. Every path is an in-container path; the scripts
resolve it with ``training_entry.contract.container_path`` so the local runner can move it.
"""

from __future__ import annotations

ENTRY_POINT = "preprocess.py"

# SageMaker: processing inputs and outputs must live under /opt/ml/processing/.
CODE_DIR = "/opt/ml/processing/input/code"
RAW_DATA_DIR = "/opt/ml/processing/input/data"
# SageMaker: {"current_host": "algo-1", "hosts": ["algo-1", ...]} on every processing host.
RESOURCE_CONFIG = "/opt/ml/config/resourceconfig.json"

SPLITS = ("train", "validation", "test")
# Output name -> in-container directory; the output names are also the ProcessingOutput names
# that later steps reference (Steps.PreprocessData.ProcessingOutputConfig.Outputs['train']).
OUTPUT_MANIFEST = "manifest"
OUTPUT_DIRS = {
    "train": "/opt/ml/processing/output/train",
    "validation": "/opt/ml/processing/output/validation",
    "test": "/opt/ml/processing/output/test",
    OUTPUT_MANIFEST: "/opt/ml/processing/output/manifest",
}

# Container arguments (``--name value``): how many shards to write is instances x processes
# per host of the *training* job, so each worker reads its own shard.
ARG_INSTANCE_COUNT = "--instance-count"
ARG_PROCESSES_PER_HOST = "--processes-per-host"
ARG_SEED = "--seed"
ARG_VALIDATION_FRACTION = "--validation-fraction"
ARG_TEST_FRACTION = "--test-fraction"

DEFAULT_SEED = 42
DEFAULT_VALIDATION_FRACTION = 0.15
DEFAULT_TEST_FRACTION = 0.15

# Raw input formats the script accepts (one file in RAW_DATA_DIR): CSV with a header whose
# last column is the integer label, or NPZ with arrays "x" (n, features) and "y" (n,).
RAW_SUFFIXES = (".csv", ".npz")
LABEL_COLUMN = "label"
