"""One SavedModel, loaded once and called from many threads: its signatures, their inputs and
outputs, and TF Serving's status and metadata documents about it.

The folder is what TF Serving loads (SageMaker: ``/opt/ml/model``, our model.tar.gz
extracted): numbered version folders, each a SavedModel; the highest is served. A SavedModel
folder itself (``saved_model.pb`` in it) is taken as version 1.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import tensorflow as tf
from tensorflow.core.framework import types_pb2

from serving import table_rows
from serving.files import SAVED_MODEL_FILE
from serving.web import RequestError, process_seconds, resident_mib  # noqa: F401 (theirs)
from training_entry import contract
from training_entry.input import images


def find_version(model_dir: str | Path) -> tuple[Path, str]:
    """(the SavedModel folder to serve, its version): the highest ``<n>/saved_model.pb``
    under ``model_dir`` or one folder below it (SageMaker TFS: ``<name>/<n>/``), else
    ``model_dir`` itself when it is a SavedModel."""
    root = Path(model_dir)
    if not root.is_dir():
        raise FileNotFoundError(f"model folder {root} does not exist")
    for base in [root, *sorted(p for p in root.iterdir() if p.is_dir() and not p.name.isdigit())]:
        versions = [p for p in base.iterdir() if p.name.isdigit() and (p / SAVED_MODEL_FILE).is_file()]
        if versions:
            best = max(versions, key=lambda p: int(p.name))
            return best, str(int(best.name))
    if (root / SAVED_MODEL_FILE).is_file():
        return root, contract.MODEL_VERSION
    raise FileNotFoundError(
        f"no SavedModel in {root}: expected <version>/{SAVED_MODEL_FILE} (what training writes "
        f"to model.tar.gz), e.g. {root}/1/{SAVED_MODEL_FILE}")


@dataclass(frozen=True)
class Signature:
    name: str
    function: object  # a ConcreteFunction
    inputs: dict  # name -> tf.TensorSpec
    outputs: dict  # name -> tf.TensorSpec

    def describe(self) -> str:
        """``serving_default(x: float32 [None, 4])``: what a client must send."""
        args = ", ".join(f"{k}: {_spec_text(s)}" for k, s in self.inputs.items())
        return f"{self.name}({args})"


def _spec_text(spec: tf.TensorSpec) -> str:
    dims = "[]" if spec.shape.rank is None else "[" + ", ".join(str(d) for d in spec.shape.as_list()) + "]"
    return f"{spec.dtype.name} {dims}"


class ServedModel:
    """The model and its signatures. ``predict`` is safe to call from several threads."""

    def __init__(self, model_dir: str | Path, name: str = "model"):
        started = time.monotonic()
        self.name = name
        self.path, self.version = find_version(model_dir)
        self._loaded = tf.saved_model.load(str(self.path))
        # A table model's columns, for checking CSV lines and saying what it takes (or None).
        self.table = table_rows.load_description(self.path)
        self.signatures: dict[str, Signature] = {}
        for key, function in self._loaded.signatures.items():
            _, inputs = function.structured_input_signature
            self.signatures[key] = Signature(key, function, dict(inputs), dict(function.structured_outputs))
        if not self.signatures:
            raise ValueError(f"the SavedModel {self.path} has no serving signatures")
        self.load_seconds = time.monotonic() - started

    # --- what kind of data the model takes ------------------------------------------------
    @property
    def takes_images(self) -> bool:
        return contract.SIGNATURE_BYTES in self.signatures

    @property
    def takes_csv_lines(self) -> bool:
        return contract.SIGNATURE_CSV in self.signatures

    @property
    def feature_width(self) -> int | None:
        """A float table's features per row (the default signature's one [None, F] input)."""
        default = self.signatures.get(contract.SIGNATURE_DEFAULT)
        if default is None or len(default.inputs) != 1 or self.takes_images:
            return None
        (spec,) = default.inputs.values()
        if spec.dtype != tf.float32 or spec.shape.rank != 2:
            return None
        return spec.shape[1]

    def signature(self, name: str | None) -> Signature:
        name = name or contract.SIGNATURE_DEFAULT
        if name not in self.signatures:
            raise RequestError(f"unknown signature_name {name!r}; the model has: "
                               + "; ".join(s.describe() for s in self.signatures.values()))
        return self.signatures[name]

    # --- calling it -----------------------------------------------------------------------
    def predict(self, signature: Signature, inputs: dict) -> dict[str, np.ndarray]:
        """``inputs``: input name -> nested lists or an array. Bad shapes, types or image bytes
        raise ``RequestError``; the outputs come back as numpy arrays."""
        tensors = {name: _tensor(name, inputs[name], spec, signature) for name, spec in signature.inputs.items()}
        try:
            outputs = signature.function(**tensors)
        except tf.errors.InvalidArgumentError as error:
            raise _oversized(error.message) or RequestError(_first_line(error.message, signature)) from None
        return {key: value.numpy() for key, value in outputs.items()}

    # --- TF Serving's documents -----------------------------------------------------------
    def status_document(self) -> dict:
        """GET /v1/models/<name>: TF Serving's model status."""
        return {"model_version_status": [{"version": self.version, "state": "AVAILABLE",
                                          "status": {"error_code": "OK", "error_message": ""}}]}

    def metadata_document(self) -> dict:
        """GET /v1/models/<name>/metadata: TF Serving's shape (signature_def, tensor infos)."""
        def tensors(specs: dict) -> dict:
            return {key: {"dtype": types_pb2.DataType.Name(spec.dtype.as_datatype_enum), "name": spec.name or key,
                          "tensor_shape": _shape_document(spec)} for key, spec in specs.items()}

        signature_def = {key: {"inputs": tensors(s.inputs), "outputs": tensors(s.outputs),
                               "method_name": "tensorflow/serving/predict"}
                         for key, s in self.signatures.items()}
        return {"model_spec": {"name": self.name, "signature_name": "", "version": self.version},
                "metadata": {"signature_def": {"signature_def": signature_def}}}


def _shape_document(spec: tf.TensorSpec) -> dict:
    if spec.shape.rank is None:
        return {"dim": [], "unknown_rank": True}
    return {"dim": [{"size": str(-1 if d is None else d), "name": ""} for d in spec.shape.as_list()],
            "unknown_rank": False}


def _tensor(name: str, value, spec: tf.TensorSpec, signature: Signature) -> tf.Tensor:
    wanted = signature.describe()
    try:
        if spec.dtype == tf.string:
            array = np.asarray(value, dtype=object)
            if array.dtype != object or any(not isinstance(v, (bytes, str)) for v in array.ravel()):
                raise TypeError("not text")
        else:
            array = np.asarray(value, dtype=spec.dtype.as_numpy_dtype)
    except (TypeError, ValueError):
        raise RequestError(f"input {name!r} is not a regular array of {spec.dtype.name} "
                           f"(the instances differ in length or type); the model takes {wanted}") from None
    if not spec.shape.is_compatible_with(array.shape):
        raise RequestError(f"input {name!r} has shape {list(array.shape)}; the model takes {wanted}")
    if array.shape and array.shape[0] == 0:
        raise RequestError("no instances: send at least one")
    return tf.constant(array, dtype=spec.dtype)


def _oversized(message: str) -> RequestError | None:
    """The graph's refusal of an image whose header declares too many pixels (images.py's
    ``refuse_oversized``, in every SavedModel exported since): 413, in its own words."""
    if images.TOO_LARGE not in (message or ""):
        return None
    said = message.split("assertion failed: [", 1)[-1].split("]", 1)[0]
    return RequestError(said, 413)


def _first_line(message: str, signature: Signature) -> str:
    # TF's message: "Graph execution error:", where the op was defined, the op's own words,
    # then "[[{{node ...}}]]": the op's words are the line before the node.
    lines = [line.strip() for line in (message or "").splitlines() if line.strip()]
    said = [line for line in lines if not line.startswith(("Graph execution", "Detected at", "<stack", "[["))]
    cause = said[-1] if said else "invalid argument"
    if signature.name == contract.SIGNATURE_CSV:  # decode_csv's words are no image's
        return (f"the CSV lines do not fit the model (every feature column in the training header's "
                f"order, without the label column): {cause[:200]}")
    if signature.name == contract.SIGNATURE_BYTES or "decode" in message.lower():
        return f"the bytes are not an image the model can read (JPEG, PNG, GIF or BMP): {cause[:200]}"
    return f"{signature.name} refused the input: {cause[:300]}"
