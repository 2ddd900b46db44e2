"""Before the first step: is everything the definition reads from ``s3://`` there?

A definition built with the plain SageMaker SDK points at code and data the SDK uploaded:
processing code and inputs, ``sagemaker_submit_directory`` bundles, training channels, model
artifacts. Locally those must be in the store (``trainpipe store cp``, or built with
``pipeline.local.store.session.LocalStoreSession``); one missing is found here, all at once, instead
of in the middle of the third step.

What is checked: every location a step reads whose value is known before the run (literals,
parameters, execution variables), except those under a location some step of the
definition writes (a literal output path another step reads after a ``DependsOn``). What a
step reads from an earlier step's properties is checked when that step has run.

Local paths: a ``String`` parameter that feeds an ``s3://`` input may be given a local file or
folder (``-p InputData=./data`` or ``file:///...``); it is copied into the store under
``s3://<bucket>/trainpipe-local-inputs/<parameter>/<content hash>/`` and the parameter takes
that URI. The bucket is the one of the parameter's default, else the first the definition
names.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from pipeline.errors import UserError
from pipeline.local.dag import image_check, interpreter, training_kinds
from pipeline.local.dag.interpreter import (
    STEP_PROCESSING,
    STEP_REGISTER_MODEL,
    STEP_TRAINING,
    STEP_TUNING,
    Context,
    ExpressionError,
    StepNode,
)
from pipeline.local.store.storage import S3Uri, S3UriError, Storage, StorageError, content_digest

LOCAL_INPUTS_PREFIX = "trainpipe-local-inputs"
PREFIX, OBJECT = "prefix", "object"
_FALLBACK_BUCKET = "trainpipe-local"


class MissingInputs(UserError):
    """Locations the definition reads that are not in the store (or not valid URIs)."""


@dataclass(frozen=True)
class Read:
    where: str  # e.g. "PreprocessData input 'code'"
    expr: object  # the definition's expression for the URI
    kind: str  # PREFIX (objects under it) or OBJECT (this key)


def _framework_value(raw):
    """SageMaker: framework hyperparameters are JSON-encoded strings ("\"s3://...\"")."""
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except ValueError:
            return raw
    return raw


def reads(node: StepNode) -> list[Read]:
    """The s3:// locations a step reads, as expressions."""
    args = node.body.get("Arguments", {}) or {}
    found: list[Read] = []
    if node.type == STEP_PROCESSING:
        for item in args.get("ProcessingInputs", []) or []:
            if "S3Input" in item:
                found.append(Read(f"{node.name} input {item.get('InputName')!r}",
                                  item["S3Input"].get("S3Uri"), PREFIX))
    elif node.type in (STEP_TRAINING, STEP_TUNING):
        # A Tuning step's trials are training jobs of its TrainingJobDefinition.
        hyperparameters = "HyperParameters"
        if node.type == STEP_TUNING:
            args, hyperparameters = args.get("TrainingJobDefinition") or {}, "StaticHyperParameters"
        for channel in args.get("InputDataConfig", []) or []:
            source = (channel.get("DataSource") or {}).get("S3DataSource")
            if source is not None:
                found.append(Read(f"{node.name} channel {channel.get('ChannelName')!r}",
                                  source.get("S3Uri"), PREFIX))
        submit = (args.get(hyperparameters) or {}).get("sagemaker_submit_directory")
        if submit is not None:
            found.append(Read(f"{node.name} sagemaker_submit_directory", submit, OBJECT))
    elif node.type == STEP_REGISTER_MODEL:
        containers = (args.get("InferenceSpecification") or {}).get("Containers") or []
        for index, container in enumerate(containers):
            if "ModelDataUrl" in container:
                found.append(Read(f"{node.name} model data (container {index})",
                                  container["ModelDataUrl"], OBJECT))
    return found


def writes(node: StepNode) -> list[object]:
    """Expressions of the s3:// locations a step writes."""
    args = node.body.get("Arguments", {}) or {}
    if node.type == STEP_PROCESSING:
        outputs = (args.get("ProcessingOutputConfig") or {}).get("Outputs") or []
        return [(o.get("S3Output") or {}).get("S3Uri") for o in outputs]
    if node.type == STEP_TUNING:
        args = args.get("TrainingJobDefinition") or {}
    if node.type in (STEP_TRAINING, STEP_TUNING):
        return [(args.get("OutputDataConfig") or {}).get("S3OutputPath"),
                (args.get("CheckpointConfig") or {}).get("S3Uri")]
    return []


def _known(expr, ctx: Context):
    """The expression's value when it is known before the run, else None."""
    try:
        value = interpreter.evaluate(expr, ctx)
    except ExpressionError:  # Unresolved included: an earlier step makes it
        return None
    return value


def known_request(node: StepNode, ctx: Context) -> dict:
    """A step's request as far as it is known before the run: each argument, and each
    training channel, evaluated alone; None where an earlier step makes the value."""
    return known_arguments(node.body.get("Arguments", {}) or {}, ctx)


def known_arguments(arguments: dict, ctx: Context) -> dict:
    known = {}
    for key, value in arguments.items():
        if key == "InputDataConfig" and isinstance(value, list):
            known[key] = [_known(c, ctx) or {"ChannelName": c.get("ChannelName") if isinstance(c, dict) else None}
                          for c in value]
        else:
            known[key] = _known(value, ctx)
    return known


def check_launches(nodes: list[StepNode], ctx: Context, storage: Storage, check) -> None:
    """A training step whose launch cannot be determined (no sagemaker_program; SDK v3
    sm_drivers files that name nothing runnable) is refused now, not after a step ran.
    ``check(request, storage, where)`` is the jobs' reader (``jobs/v3/sdk_v3.check_launch``)."""
    for node in nodes:
        if training_kinds.is_function_step(node):  # no sagemaker_program: the SDK's job driver
            why = training_kinds.function_step_refusal(known_request(node, ctx), storage)
            if why:
                raise UserError(f"the local runner cannot run step {node.name} (Type Training: {why})")
        elif training_kinds.builtin_algorithm(node):
            continue  # no sagemaker_program: the image's algorithm (training_kinds.why_not_local judged it)
        elif node.type == STEP_TRAINING:
            check(known_request(node, ctx), storage, f"step {node.name}")
        elif node.type == STEP_TUNING:
            # Each trial is a training job of the TrainingJobDefinition (its static
            # hyperparameters as HyperParameters): refused now, not after earlier steps ran.
            definition = (node.body.get("Arguments") or {}).get("TrainingJobDefinition")
            if isinstance(definition, dict):
                trial = known_arguments(definition, ctx)
                if training_kinds.tuning_refusal(trial):
                    raise UserError(f"the local runner cannot run step {node.name} (Type Tuning: "
                                    f"{training_kinds.tuning_refusal(trial)})")
                trial["HyperParameters"] = trial.get("StaticHyperParameters") or {}
                check(trial, storage, f"step {node.name} (each trial of its TrainingJobDefinition; SDK v3's "
                                      f"HyperparameterTuner names the script only from SourceCode(entry_script=...), "
                                      f"not command=)")


def job_code(node: StepNode, ctx: Context, storage: Storage, v3_code=None) -> image_check.JobCode | None:
    """The code the image check reads of a step: SDK v3 ModelTrainer jobs through ``v3_code``
    (``jobs/v3/sdk_v3.code_for_image_check``: the code channel, sourcecode.json's script and
    requirements), the rest as image_check reads them."""
    if node.type == STEP_TRAINING and v3_code is not None:
        code = v3_code(known_request(node, ctx), storage, f"step {node.name}")
        if code is not None:
            return image_check.JobCode(node.name, code.image_uri, code.files, code.entry_points,
                                       code.requirements, code.requirements_name)
    reader = {STEP_PROCESSING: image_check.processing_code, STEP_TRAINING: image_check.training_code}.get(node.type)
    return reader(node, ctx, storage) if reader else None


def _present(storage: Storage, uri: str, kind: str) -> bool:
    try:
        if kind == OBJECT:
            return storage.exists(uri)
        return bool(storage.list(uri))
    except StorageError as error:
        raise UserError(f"cannot use the {storage.describe()}: {error}") from None


def check(nodes: list[StepNode], ctx: Context, storage: Storage) -> None:
    """Refuse the run, listing every missing or malformed location at once."""
    produced = []
    for node in nodes:
        for expr in writes(node):
            value = _known(expr, ctx)
            if isinstance(value, str) and value.startswith("s3://"):
                produced.append(value.rstrip("/"))
    problems: list[str] = []
    for node in nodes:
        for read in reads(node):
            uri = _known(read.expr, ctx)
            if uri is None:
                continue
            if read.kind == OBJECT:
                uri = _framework_value(uri)
            if read.kind == OBJECT and not (isinstance(uri, str) and uri.startswith("s3://")):
                continue  # SageMaker: a submit directory may be a container path (network isolation)
            try:
                S3Uri.parse(uri, f"{read.where} S3Uri")
            except S3UriError as error:
                problems.append(str(error))
                continue
            if any(uri.rstrip("/") == out or uri.startswith(out + "/") for out in produced):
                continue  # a step of this definition writes it
            if not _present(storage, uri, read.kind):
                problems.append(f"{read.where}: no objects under {uri}" if read.kind == PREFIX
                                else f"{read.where}: no object {uri}")
    if not problems:
        return
    fix = ("check the URI (a prefix is matched as a key prefix) or copy the data there first: "
           "`trainpipe store cp LOCAL_PATH s3://...`, or build the definition with "
           "pipeline.local.store.session.LocalStoreSession; an s3:// parameter also takes a local path")
    if len(problems) == 1:
        raise MissingInputs(f"{problems[0]} in the {storage.describe()}; {fix}")
    listed = "".join(f"\n  - {p}" for p in problems)
    raise MissingInputs(f"{len(problems)} locations the definition reads are missing or malformed in "
                        f"the {storage.describe()}; {fix}:{listed}")


# --- Local paths for s3:// parameters ----------------------------------------------------------
def _s3_parameters(nodes: list[StepNode]) -> set[str]:
    """Parameters that are, on their own, the URI of an s3:// input (not a part of one, such
    as a bucket name inside a Std:Join)."""
    names: set[str] = set()
    for node in nodes:
        for read in reads(node):
            get = read.expr.get("Get") if isinstance(read.expr, dict) and len(read.expr) == 1 else None
            if isinstance(get, str) and get.startswith("Parameters."):
                names.add(get.split(".", 1)[1])
    return names


def _first_bucket(definition: Mapping) -> str | None:
    text = json.dumps(definition)
    start = text.find('"s3://')
    while start != -1:
        bucket = text[start + 6:].split("/", 1)[0].split('"', 1)[0]
        try:
            S3Uri.parse(f"s3://{bucket}/x")
            return bucket
        except S3UriError:
            start = text.find('"s3://', start + 1)
    return None


def local_path_of(value) -> Path | None:
    """The local path a parameter value names (``file://...`` or a plain path), or None."""
    if not isinstance(value, str) or not value or value.startswith("s3://") or "://" in value.replace("file://", "", 1):
        return None
    return Path(value[len("file://"):] if value.startswith("file://") else value).expanduser()


def place_local_parameters(definition: Mapping, nodes: list[StepNode], parameters: dict,
                           storage: Storage, say=None) -> dict[str, str]:
    """Copy local paths given to s3:// parameters into the store; returns {name: new URI} and
    updates ``parameters``. A path that does not exist is one line naming the parameter."""
    declared = {p["Name"]: p for p in definition.get("Parameters", [])}
    placed: dict[str, str] = {}
    for name in sorted(_s3_parameters(nodes)):
        value = parameters.get(name)
        path = local_path_of(value)
        if path is None:
            continue
        if not path.exists():
            raise UserError(f"parameter {name}={value!r}: no such file or directory; give an "
                            f"s3:// URI, or a local file or folder (a path or file:// URI)")
        default = str(declared.get(name, {}).get("DefaultValue", ""))
        bucket = (default[5:].split("/", 1)[0] if default.startswith("s3://") else None) \
            or _first_bucket(definition) or _FALLBACK_BUCKET
        prefix = f"s3://{bucket}/{LOCAL_INPUTS_PREFIX}/{name}/{content_digest(path)}"
        try:
            if path.is_dir():
                storage.put_tree(path, prefix + "/")
                uri = prefix + "/"
            else:
                uri = f"{prefix}/{path.name}"
                storage.put_file_if_changed(path, uri)
        except StorageError as error:
            raise UserError(f"cannot use the {storage.describe()}: {error}") from None
        parameters[name] = uri
        placed[name] = uri
        if say is not None:
            say(f"parameter {name}: {path} copied to {uri}")
    return placed


# --- Each job's code against its image ---------------------------------------------------------
def check_images(nodes: list[StepNode], ctx: Context, storage: Storage, say=None, code_of=None, note=None):
    """Refuse, in one line, a job whose code imports what its image lacks (and its
    requirements.txt does not install), or that the image's Python cannot parse; say one
    warning for an image with no record (``image_check.py``, ``pipeline/images/``)."""
    # An @step's code is a pickle under the runner's own Python (training_kinds.function_step_refusal).
    nodes = [node for node in nodes if not training_kinds.is_function_step(node)]
    return image_check.check(nodes, ctx, storage, say, code_of, note)
