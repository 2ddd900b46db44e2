"""Request bodies into signature inputs, outputs into response bodies, as SageMaker's
TensorFlow Serving container reads and writes them (docker/build_artifacts/sagemaker/
tensorflowServing.js there, then TF Serving's REST predict API):

- ``application/json`` (also ``application/jsonlines``, ``application/jsons``): a TF Serving
  body, ``{"instances": [...]}`` (row format, answered ``{"predictions": [...]}``) or
  ``{"inputs": ...}`` (columnar, answered ``{"outputs": ...}``), with an optional
  ``signature_name``; ``{"b64": "..."}`` stands for bytes. Any other JSON is wrapped as
  instances (one list, or a list of lists), and JSON lines are one instance each;
- ``text/csv``: one instance per line;
- ``image/jpeg``, ``image/png``, ``application/x-image``: one encoded image (ours: SageMaker's
  TFS container needs an inference.py for these).

A row answers ``{"probabilities": [...], "classes": "cat"}`` (every output of the signature;
one output alone is answered bare, as TF Serving does).
"""

from __future__ import annotations

import base64
import binascii
import csv
import io
import json
from dataclasses import dataclass

import numpy as np

from serving import table_rows
from serving.model import RequestError, ServedModel, Signature
from training_entry import contract

JSON_TYPES = ("application/json", "application/jsonlines", "application/jsons")
CSV_TYPE = "text/csv"
IMAGE_TYPES = ("image/jpeg", "image/png", "application/x-image")
CONTENT_TYPES = (*JSON_TYPES, CSV_TYPE, *IMAGE_TYPES)
DEFAULT_CONTENT_TYPE = "application/json"  # SageMaker TFS: no Content-Type header is JSON
# Python's parsers refuse these with RecursionError and csv.Error: the client's to fix (400).
TOO_DEEP = ("the JSON body nests deeper than the parser reads (about 1000 levels); a TF Serving body "
            "is a few levels deep: send {\"instances\": [...]}")
CSV_FIELD_LIMIT = csv.field_size_limit()  # 131072 characters: one value, not one row


@dataclass
class Request:
    signature: Signature
    inputs: dict  # input name -> nested lists / arrays
    row_format: bool  # instances -> predictions; inputs -> outputs


def media_type(header: str | None) -> str:
    """``application/json; charset=utf-8`` -> ``application/json`` (no header: JSON)."""
    return (header or DEFAULT_CONTENT_TYPE).split(";")[0].strip().lower() or DEFAULT_CONTENT_TYPE


def decode(model: ServedModel, content_type: str, body: bytes) -> Request:
    """The request for ``model``; ``RequestError`` (415 for a type it cannot take) otherwise."""
    if content_type in JSON_TYPES:
        try:
            return from_json(model, parse_json(body))
        except RecursionError:  # parsed, but too deep for _unb64's walk
            raise RequestError(TOO_DEEP) from None
    if content_type == CSV_TYPE:
        return from_csv(model, body)
    if content_type in IMAGE_TYPES:
        if not model.takes_images:
            raise RequestError(f"{content_type} is for image models; this one takes "
                               f"{_what_it_takes(model)}", 415)
        if not body:
            raise RequestError("the request body is empty: send one encoded image")
        return Request(model.signature(contract.SIGNATURE_BYTES),
                       {contract.SERVING_INPUT_IMAGE_BYTES: [body]}, row_format=True)
    raise RequestError(f"Unsupported Media Type: {content_type}; send one of {', '.join(CONTENT_TYPES)}", 415)


def _what_it_takes(model: ServedModel) -> str:
    if model.takes_images:
        return "images (image/jpeg, image/png, application/x-image, or JSON with b64)"
    return "table rows (text/csv or application/json)"


# --- JSON ------------------------------------------------------------------------------------
def parse_json(body: bytes):
    """The document; JSON lines become ``{"instances": [line, ...]}``."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise RequestError("the JSON body is not UTF-8 text") from None
    if not text.strip():
        raise RequestError("the request body is empty: send {\"instances\": [...]}")
    try:
        return json.loads(text)
    except RecursionError:
        raise RequestError(TOO_DEEP) from None
    except json.JSONDecodeError as error:
        lines = [line for line in text.splitlines() if line.strip()]
        if len(lines) > 1:
            try:
                return {"instances": [json.loads(line) for line in lines]}
            except (json.JSONDecodeError, RecursionError):
                pass
        raise RequestError(f"malformed JSON: {error}") from None


def from_json(model: ServedModel, doc) -> Request:
    if isinstance(doc, dict) and ("instances" in doc or "inputs" in doc):
        if "instances" in doc and "inputs" in doc:
            raise RequestError("send either 'instances' (row format) or 'inputs' (columnar), not both")
        name = doc.get("signature_name")
        if name is not None and not isinstance(name, str):
            raise RequestError("'signature_name' must be a string")
        if "instances" in doc:
            return _rows(model, name, _unb64(doc["instances"]))
        return _columns(model, model.signature(name), _unb64(doc["inputs"]))
    if isinstance(doc, dict) and "examples" in doc:
        raise RequestError("'examples' is TF Serving's classify/regress body; send 'instances' or 'inputs'")
    # SageMaker TFS: other JSON is instances: a list of lists as they are, anything else one.
    instances = doc if isinstance(doc, list) and doc and isinstance(doc[0], (list, dict)) else [doc]
    return _rows(model, None, _unb64(instances))


def _unb64(value):
    if isinstance(value, dict):
        if set(value) == {"b64"}:
            if not isinstance(value["b64"], str):
                raise RequestError("a {\"b64\": ...} value must be a base64 string")
            try:
                return base64.b64decode(value["b64"], validate=True)
            except (binascii.Error, ValueError):
                raise RequestError("a {\"b64\": ...} value is not valid base64") from None
        return {k: _unb64(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_unb64(v) for v in value]
    return value


def _rows(model: ServedModel, name: str | None, instances) -> Request:
    if not isinstance(instances, list):
        raise RequestError("'instances' must be a list, one entry per instance")
    if not instances:
        raise RequestError("'instances' is empty: send at least one")
    if name is None:
        name = _implied_signature(model, instances)
    signature = model.signature(name)
    if signature.name == contract.SIGNATURE_CSV:  # a table row as a list, or a CSV line
        instances = [_csv_line(i) if isinstance(i, list) else i for i in instances]
    keys = list(signature.inputs)
    if len(keys) == 1 and not all(isinstance(i, dict) for i in instances):
        return Request(signature, {keys[0]: instances}, row_format=True)
    columns: dict[str, list] = {key: [] for key in keys}
    for index, instance in enumerate(instances):
        if not isinstance(instance, dict):
            raise RequestError(f"instance {index} is not an object keyed by input name; the model "
                               f"takes {signature.describe()}")
        _check_keys(instance, keys, f"instance {index}", signature)
        for key in keys:
            columns[key].append(instance[key])
    return Request(signature, columns, row_format=True)


def _implied_signature(model: ServedModel, instances: list) -> str:
    """Bytes go to ``serving_bytes``, table rows as lists or lines to ``serving_csv``."""
    first = instances[0]
    if model.takes_images and isinstance(first, bytes):
        return contract.SIGNATURE_BYTES
    if model.takes_csv_lines and isinstance(first, (list, str)):
        return contract.SIGNATURE_CSV
    return contract.SIGNATURE_DEFAULT


def _columns(model: ServedModel, signature: Signature, inputs) -> Request:
    keys = list(signature.inputs)
    if isinstance(inputs, dict) and not (len(keys) == 1 and keys[0] not in inputs):
        _check_keys(inputs, keys, "'inputs'", signature)
        return Request(signature, inputs, row_format=False)
    if len(keys) != 1:
        raise RequestError(f"'inputs' must be an object keyed by input name; the model takes "
                           f"{signature.describe()}")
    return Request(signature, {keys[0]: inputs}, row_format=False)


def _check_keys(given: dict, keys: list, what: str, signature: Signature) -> None:
    missing, unknown = [k for k in keys if k not in given], sorted(set(given) - set(keys))
    if missing or unknown:
        raise RequestError(f"{what} " + "; ".join(filter(None, [
            f"lacks {missing}" if missing else "", f"has unknown {unknown}" if unknown else ""]))
            + f"; the model takes {signature.describe()}")


def _csv_line(values: list) -> str:
    out = io.StringIO()
    csv.writer(out, lineterminator="").writerow(["" if v is None else v for v in values])
    return out.getvalue()


# --- CSV -------------------------------------------------------------------------------------
def from_csv(model: ServedModel, body: bytes) -> Request:
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise RequestError("the CSV body is not UTF-8 text") from None
    numbered = [(number, line) for number, line in enumerate(text.splitlines(), 1) if line.strip()]
    lines, numbers = [line for _, line in numbered], [number for number, _ in numbered]
    if not lines:
        raise RequestError("the CSV body has no rows")
    if model.takes_csv_lines:  # a header line skipped, the width checked (table_rows.py)
        return Request(model.signature(contract.SIGNATURE_CSV),
                       {contract.SERVING_INPUT_CSV: table_rows.checked_lines(lines, model.table, numbers)}, True)
    width = model.feature_width
    if width is None:
        raise RequestError(f"text/csv is for table models; this one takes {_what_it_takes(model)}", 415)
    rows = []
    header = []  # [1] once the first line was a header: rows are numbered after it, as the answers are

    def name(index: int) -> str:  # the row at lines[index], numbered as its answer will be
        return table_rows.row_name(index + 1 - len(header), numbers[index])

    for index, row in enumerate(_csv_rows(lines, name)):
        try:
            values = [float(v) for v in row]
        except ValueError:
            if index == 0 and len(lines) > 1:
                header.append(1)
                continue  # a header line (the training CSV's first)
            raise RequestError(f"{name(index)} holds a value that is not a number: {row[:8]}") from None
        if width is not None and len(values) != width:
            raise RequestError(f"{name(index)} has {len(values)} values; the model takes {width} "
                               "(every feature column in the training header's order, without the label)")
        rows.append(values)
    signature = model.signature(contract.SIGNATURE_DEFAULT)
    return Request(signature, {next(iter(signature.inputs)): rows}, row_format=True)


def _csv_rows(lines: list[str], name):
    """csv.reader's rows, its refusal (a field over ``CSV_FIELD_LIMIT``) a 400 naming the row."""
    reader = csv.reader(lines)
    while True:
        try:
            yield next(reader)
        except StopIteration:
            return
        except csv.Error as error:
            raise RequestError(f"{name(reader.line_num - 1)}: {error} (one value over {CSV_FIELD_LIMIT} "
                               "characters); a table row holds numbers") from None


# --- responses -------------------------------------------------------------------------------
def encode(request: Request, outputs: dict[str, np.ndarray]) -> dict:
    """TF Serving's response: ``{"predictions": [row, ...]}`` or ``{"outputs": ...}``."""
    ordered = sorted(outputs, key=lambda k: (k != contract.SERVING_OUTPUT, k))
    values = {key: _jsonable(outputs[key]) for key in ordered}
    if not request.row_format:
        return {"outputs": values[ordered[0]] if len(ordered) == 1 else values}
    if len(ordered) == 1:
        return {"predictions": values[ordered[0]]}
    count = len(next(iter(values.values())))
    return {"predictions": [{key: values[key][i] for key in ordered} for i in range(count)]}


def _jsonable(array: np.ndarray):
    if array.dtype == object:
        return np.vectorize(_text, otypes=[object])(array).tolist() if array.size else array.tolist()
    return array.tolist()


def _text(value):
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return {"b64": base64.b64encode(value).decode("ascii")}
    return value
