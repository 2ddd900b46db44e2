"""The SageMaker container contract, written for a simulated host on this machine.

What a training or processing container sees — the ``/opt/ml`` tree, the config JSON files,
the ``SM_*`` environment and the ``--key value`` arguments — encoded exactly the way the
sagemaker-training toolkit does it (``mapping.to_env_vars`` / ``to_cmd_args``,
``environment.py``), so that any SageMaker-compatible script runs unchanged. Each simulated
host gets its own base directory, which its processes see at ``/opt/ml`` (``namespaces.py``);
the functions here take the base the processes see: ``/opt/ml`` itself, or, where namespaces
are not available, the host's directory, when ``SAGEMAKER_BASE_DIR`` tells the toolkit-style
code (and our entrypoints) where it is and container paths that appear as values
(``--model_dir /opt/ml/model``, processing ``LocalPath``s) are moved under it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

from training_entry.contract import BASE_DIR_ENV, CONTAINER_BASE_DIR, TRACKING_EXECUTION_ENV

FRAMEWORK_PREFIX = "sagemaker_"


def host_names(count: int) -> list[str]:
    """SageMaker: hosts are algo-1 ... algo-N, sorted lexicographically in resourceconfig."""
    return sorted(f"algo-{i}" for i in range(1, count + 1))


def relocate(value, base_dir: Path | str):
    """Move an in-container path (``/opt/ml/...``) under ``base_dir``; other values unchanged."""
    if isinstance(value, str) and (
        value == CONTAINER_BASE_DIR or value.startswith(CONTAINER_BASE_DIR + "/")
    ):
        return str(base_dir) + value[len(CONTAINER_BASE_DIR) :]
    return value


# --- Encoding (the toolkit's mapping.py rules) --------------------------------------------
def request_string(value) -> str:
    """A ``HyperParameters`` value as the request carries it: a string.

    The SDK writes most values as strings itself, and they are kept as written (sources at
    aws/sagemaker-python-sdk, v2.257.6 = fc582aaa and master a2481266):

    - SDK v2 framework estimators (and ``Estimator`` with ``source_dir``): ``json.dumps`` of
      each value (``True`` -> ``"true"``, a dict -> ``'{"a": 1}'``), a pipeline variable as
      its ``to_string()`` (src/sagemaker/estimator.py, ``EstimatorBase._json_encode_hyperparameters``);
    - SDK v2 ``Estimator`` without ``source_dir``: ``str(v)`` (``True`` -> ``"True"``), a
      pipeline variable as its ``to_string()`` (estimator.py ``_TrainingJob._get_train_args``,
      src/sagemaker/utils.py ``to_string``);
    - a pipeline variable's ``to_string()``: ``ParameterString`` itself, any other
      ``Join(on="", values=[v])`` (src/sagemaker/workflow/entities.py
      ``PipelineVariable.to_string``, workflow/parameters.py ``ParameterString.to_string``);
    - SDK v3 ``ModelTrainer``: a string as is, a ``PipelineVariable`` untouched (the definition
      holds ``{"Get": "Parameters.X"}``), anything else ``json.dumps`` (sagemaker-train/src/
      sagemaker/train/model_trainer.py ``_create_training_job_args`` -> train/utils.py
      ``safe_serialize``).

    What is not a string here came from such a ``Get``: the pipeline fills it in when it runs,
    which no SDK source shows. It is spelled as this runner's ``Std:Join`` spells the value
    (``pipeline.local.dag.interpreter.to_string``: a Boolean ``true``/``false``, so that the
    toolkit's ``json.loads`` reads it back as a boolean, as it reads the framework estimators'
    ``json.dumps(True)``). SDK v2's own local mode differs: its ``_evaluate_join_function``
    (src/sagemaker/local/pipeline.py) joins ``str()`` of each value, ``True``."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def request_hyperparameters(raw: Mapping | None) -> dict[str, str]:
    """The request's ``HyperParameters`` (or a tuning job's ``StaticHyperParameters``) after
    the definition's expressions were evaluated: every value the string the job receives."""
    return {str(k): request_string(v) for k, v in (raw or {}).items()}


def decode_hyperparameters(raw: Mapping[str, str]) -> dict[str, object]:
    """SageMaker: hyperparameters.json holds strings; the toolkit json-decodes each value and
    keeps the raw string when that fails."""
    decoded = {}
    for key, value in raw.items():
        try:
            decoded[key] = json.loads(value)
        except (TypeError, ValueError):
            decoded[key] = value
    return decoded


def split_hyperparameters(decoded: Mapping[str, object]) -> tuple[dict, dict]:
    """(user hyperparameters, framework parameters): keys starting with ``sagemaker_``."""
    user = {k: v for k, v in decoded.items() if not k.startswith(FRAMEWORK_PREFIX)}
    framework = {k: v for k, v in decoded.items() if k.startswith(FRAMEWORK_PREFIX)}
    return user, framework


def _decode(obj) -> str:
    if obj is None:
        return ""
    if isinstance(obj, bytes):
        return obj.decode("latin1")
    return str(obj)


def to_cmd_args(mapping: Mapping[str, object]) -> list[str]:
    """Sorted ``--key value`` pairs; one-letter keys get one dash; dicts become k=v,k2=v2;
    everything else goes through str(). SageMaker: sagemaker-training-toolkit's
    ``mapping.to_cmd_args``/``_decode`` (aws/sagemaker-training-toolkit@33839372, mapping.py
    lines 65-122) after ``environment.read_hyperparameters`` json-decoded each value, so a
    framework estimator's ``json.dumps(True)`` (``"true"``, ``request_string`` says which SDK
    function writes what) arrives as ``True``, a list as its Python repr, null as an empty
    argument; a generic ``Estimator``'s ``"True"`` is no JSON and arrives as the string ``True``."""
    args = []
    for key in sorted(mapping):
        name = _decode(key)
        args.append(f"--{name}" if len(name) > 1 else f"-{name}")
        value = mapping[key]
        if hasattr(value, "items"):
            args.append(",".join(f"{k}={v}" for k, v in sorted(value.items())))
        else:
            args.append(_decode(value))
    return args


def bad_hyperparameter_names(hyperparameters) -> str | None:
    """Why names of ``hyperparameters`` cannot reach a script, or None. The toolkit makes each
    one an ``SM_HP_<NAME>`` variable: a name with ``=`` (or NUL, or none) cannot be a
    variable's name, and the job would die in an internal error instead."""
    names = [str(k) for k in (hyperparameters or {}) if not str(k) or "=" in str(k) or "\0" in str(k)]
    if not names:
        return None
    return (f"hyperparameter name(s) {', '.join(map(repr, names))} cannot become the SM_HP_<NAME> "
            f"variable the training toolkit sets ('=' ends a variable's name); rename them")


def to_env_vars(mapping: Mapping[str, object]) -> dict[str, str]:
    """``SM_<KEY>``: strings raw, None empty, everything else compact sorted JSON."""

    def value(v):
        if isinstance(v, bytes):
            return v.decode("latin1")
        if v is None:
            return ""
        if isinstance(v, str):
            return v
        return json.dumps(v, sort_keys=True, separators=(",", ":"), ensure_ascii=True)

    return {f"SM_{str(k).upper()}": value(v) for k, v in mapping.items() if k}


def _write_json(path: Path, document) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2, sort_keys=True))


# --- Training ------------------------------------------------------------------------------
def resource_config(current_host: str, hosts: list[str], instance_type: str) -> dict:
    return {
        "current_host": current_host,
        "current_instance_type": instance_type,
        "current_group_name": "homogeneousCluster",
        "hosts": list(hosts),
        "instance_groups": [
            {"instance_group_name": "homogeneousCluster", "instance_type": instance_type,
             "hosts": list(hosts)}
        ],
        "network_interface_name": "lo",
    }


def write_training_tree(
    base_dir: Path,
    *,
    current_host: str,
    hosts: list[str],
    instance_type: str,
    hyperparameters: Mapping[str, str],
    input_data_config: Mapping[str, Mapping[str, str]],
) -> None:
    """Create one host's ``/opt/ml`` for a training job.

    ``hyperparameters`` are the raw (JSON-encoded string) values of the request;
    ``input_data_config`` maps channel -> {TrainingInputMode, S3DistributionType, ...}.
    Channel directories are made for File/FastFile channels; Pipe channels get FIFOs later.
    """
    base_dir = Path(base_dir)
    config = base_dir / "input" / "config"
    _write_json(config / "hyperparameters.json", dict(hyperparameters))
    _write_json(config / "resourceconfig.json", resource_config(current_host, hosts, instance_type))
    _write_json(config / "inputdataconfig.json", {k: dict(v) for k, v in input_data_config.items()})
    for sub in ("input/data", "model", "output/data", "output/intermediate", "checkpoints", "code"):
        (base_dir / sub).mkdir(parents=True, exist_ok=True)
    for channel, spec in input_data_config.items():
        if spec.get("TrainingInputMode", "File") != "Pipe":
            (base_dir / "input" / "data" / channel).mkdir(parents=True, exist_ok=True)


def training_environment(
    base_dir: Path,
    *,
    current_host: str,
    hosts: list[str],
    instance_type: str,
    hyperparameters: Mapping[str, str],
    input_data_config: Mapping[str, Mapping[str, str]],
    job_name: str,
    region: str = "us-east-1",
    num_gpus: int = 0,
    num_cpus: int | None = None,
) -> dict[str, str]:
    """The environment the toolkit gives the user script (``SM_*`` and friends)."""
    base = Path(base_dir)
    user_hps, framework = split_hyperparameters(decode_hyperparameters(hyperparameters))
    user_hps = {k: relocate(v, base) for k, v in user_hps.items()}
    entry_point = str(framework.get("sagemaker_program", ""))
    channel_dirs = {ch: str(base / "input" / "data" / ch) for ch in input_data_config}
    resources = resource_config(current_host, hosts, instance_type)
    paths = {
        "model_dir": str(base / "model"),
        "input_dir": str(base / "input"),
        "input_config_dir": str(base / "input" / "config"),
        "output_dir": str(base / "output"),
        "output_data_dir": str(base / "output" / "data"),
        "output_intermediate_dir": str(base / "output" / "intermediate"),
        "module_dir": str(base / "code"),
    }
    env = {
        "hosts": list(hosts),
        "current_host": current_host,
        "current_instance_type": instance_type,
        "current_instance_group": "homogeneousCluster",
        "current_instance_group_hosts": list(hosts),
        "instance_groups": ["homogeneousCluster"],
        "distribution_instance_groups": ["homogeneousCluster"],
        "is_hetero": False,
        "network_interface_name": "lo",
        "hps": user_hps,
        "user_entry_point": entry_point,
        "module_name": entry_point[:-3] if entry_point.endswith(".py") else entry_point,
        "framework_params": framework,
        "resource_config": resources,
        "input_data_config": {k: dict(v) for k, v in input_data_config.items()},
        "channels": sorted(channel_dirs),
        "num_gpus": num_gpus,
        "num_cpus": num_cpus if num_cpus is not None else (os.cpu_count() or 1),
        "log_level": 20,
        "user_args": to_cmd_args(user_hps),
        **paths,
    }
    env["training_env"] = {
        k: v for k, v in env.items() if k not in ("user_args",)
    } | {"hyperparameters": user_hps, "channel_input_dirs": channel_dirs, "job_name": job_name}
    for name, path in channel_dirs.items():
        env[f"channel_{name}"] = path
    for key, value in user_hps.items():
        env[f"hp_{key}"] = value
    out = to_env_vars(env)
    out.update(
        {
            BASE_DIR_ENV: str(base),
            "TRAINING_JOB_NAME": job_name,
            "SAGEMAKER_JOB_NAME": job_name,
            "CURRENT_HOST": current_host,
            "SAGEMAKER_REGION": region,
            "AWS_REGION": region,
        }
    )
    return out


def user_command(python: str, hyperparameters: Mapping[str, str], base_dir: Path) -> list[str]:
    """``python <entry point> --key value ...`` as the toolkit runs it from /opt/ml/code."""
    user_hps, framework = split_hyperparameters(decode_hyperparameters(hyperparameters))
    entry_point = framework.get("sagemaker_program")
    if not entry_point:
        raise ValueError("hyperparameters have no sagemaker_program (the entry point)")
    user_hps = {k: relocate(v, base_dir) for k, v in user_hps.items()}
    return [python, str(entry_point), *to_cmd_args(user_hps)]


# --- Processing ----------------------------------------------------------------------------
def write_processing_tree(
    base_dir: Path,
    *,
    current_host: str,
    hosts: list[str],
    job_config: Mapping[str, object],
) -> None:
    """Create one host's ``/opt/ml`` for a processing job: ``config/processingjobconfig.json``,
    ``config/resourceconfig.json``, every input and output ``LocalPath`` and ``output/``."""
    base_dir = Path(base_dir)
    _write_json(base_dir / "config" / "processingjobconfig.json", dict(job_config))
    _write_json(
        base_dir / "config" / "resourceconfig.json",
        {"current_host": current_host, "hosts": list(hosts), "network_interface_name": "lo"},
    )
    (base_dir / "output").mkdir(parents=True, exist_ok=True)
    for item in job_config.get("ProcessingInputs", []) or []:
        local = (item.get("S3Input") or {}).get("LocalPath")
        if local:
            Path(relocate(local, base_dir)).mkdir(parents=True, exist_ok=True)
    outputs = (job_config.get("ProcessingOutputConfig") or {}).get("Outputs", []) or []
    for item in outputs:
        local = (item.get("S3Output") or {}).get("LocalPath")
        if local:
            # SageMaker: the platform creates output LocalPaths before the entrypoint starts.
            Path(relocate(local, base_dir)).mkdir(parents=True, exist_ok=True)


def request_environment(environment: Mapping[str, str] | None) -> dict[str, str]:
    """The request's ``Environment`` map as a local job gets it: all but the MLflow execution
    variable (``definition --tracking-uri``). With it the job logs its own run from inside
    (training_entry/tracking.py), as on SageMaker; run locally, the runner already logs every
    step from outside (pipeline/tracking), so the job stands down: each step logged once."""
    return {k: str(v) for k, v in (environment or {}).items() if k != TRACKING_EXECUTION_ENV}


def processing_environment(base_dir: Path, environment: Mapping[str, str] | None) -> dict[str, str]:
    """The job's ``Environment`` map, container paths moved under ``base_dir``."""
    env = {k: relocate(v, base_dir) for k, v in request_environment(environment).items()}
    # PYTHONPATH-like values may list several container paths.
    for key, value in list(env.items()):
        if ":" in value and CONTAINER_BASE_DIR in value:
            env[key] = ":".join(str(relocate(p, base_dir)) for p in value.split(":"))
    env[BASE_DIR_ENV] = str(base_dir)
    return env
