"""``python -m serving.predict --model-dir DIR FILE...``: the served model's answers for files,
without a server (``trainpipe predict`` resolves the model and runs this).

A model folder with ``code/inference.py`` and no SavedModel (the PyTorch room's, for AWS's
PyTorch inference image) is answered through that script, as ``serving.handler`` serves it:
the same ``input_fn`` / ``predict_fn`` / ``output_fn`` calls an endpoint makes.

Each file goes through the same decoding as a request to ``serving.server`` (codec.py), by its
extension: ``.csv`` rows (text/csv), ``.json``/``.jsonl`` bodies, anything else one image.
Prints one line per prediction: the input (``file`` or ``file:row``), the class name and its
probability; ``--json``: one JSON object per line instead. Exit 2 when any file was refused;
141, quietly, when the reader of the output went away (``| head -2``), as a shell reports ``cat``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from serving import codec
from serving.files import BROKEN_PIPE_STATUS, SCRIPT, TYPES_BY_SUFFIX, content_type, is_script_model  # noqa: F401 (TYPES_BY_SUFFIX: theirs)
from serving.handler import LoadError
from serving.model import RequestError, ServedModel
from training_entry import contract


def predictions(model: ServedModel, path: Path) -> list[dict]:
    """One dict per instance in ``path``: input, class, probability, probabilities."""
    request = codec.decode(model, content_type(path), path.read_bytes())
    answer = codec.encode(request, model.predict(request.signature, request.inputs))
    rows = answer.get("predictions")
    if rows is None:  # a columnar JSON body: {"outputs": {...}}
        outputs = answer["outputs"]
        rows = [dict(zip(outputs, values, strict=True)) for values in zip(*outputs.values(), strict=True)]
    single = len(rows) == 1 and content_type(path) not in (codec.CSV_TYPE,)
    out = []
    for number, row in enumerate(rows, 1):
        probabilities = row[contract.SERVING_OUTPUT] if isinstance(row, dict) else row
        best = max(range(len(probabilities)), key=probabilities.__getitem__)
        name = row.get(contract.SERVING_CLASSES, str(best)) if isinstance(row, dict) else str(best)
        out.append({"input": str(path) if single else f"{path}:{number}", "class": name,
                    "probability": probabilities[best], "probabilities": probabilities})
    return out


class ScriptModel:
    """The inference script's answers, as rows of class names and probabilities (the PyTorch
    room's script answers ``{"probabilities": [[...]], "classes": [...]}``)."""

    def __init__(self, model_dir: str):
        from serving import handler

        self.handler = handler
        self.script = handler.Script(handler.import_script(Path(model_dir) / "code", SCRIPT), SCRIPT, Path(model_dir))
        self.script.load_model()

    def predictions(self, path: Path) -> list[dict]:
        try:
            answer, _ = self.script.invoke(path.read_bytes(), content_type(path), "application/json")
        except self.handler.ScriptError as e:
            raise RequestError(str(e)) from None
        document = json.loads(answer)
        rows = document["probabilities"]
        single = len(rows) == 1 and content_type(path) != codec.CSV_TYPE
        return [{"input": str(path) if single else f"{path}:{number}", "class": name,
                 "probability": max(probabilities), "probabilities": probabilities}
                for number, (probabilities, name) in enumerate(zip(rows, document["classes"], strict=True), 1)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m serving.predict", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model-dir", required=True, help="<version>/saved_model.pb under it")
    parser.add_argument("--json", action="store_true", help="one JSON object per prediction")
    parser.add_argument("files", nargs="+", type=Path, metavar="FILE")
    args = parser.parse_args(argv)
    try:
        model = ScriptModel(args.model_dir) if is_script_model(args.model_dir) else ServedModel(args.model_dir)
    except (FileNotFoundError, ValueError, LoadError) as e:
        print(f"predict: error: {e}", file=sys.stderr)
        return 2
    try:
        refused = _print_predictions(model, args.files, args.json)
    except BrokenPipeError:
        # The reader stopped (``| head -2``): stop quietly, as Unix tools do. Python would
        # flush stdout again at exit and print a second BrokenPipeError: point it at /dev/null.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return BROKEN_PIPE_STATUS
    return 2 if refused else 0


def _print_predictions(model: ServedModel, paths: list[Path], as_json: bool) -> int:
    """Print each file's predictions; the number of files refused."""
    refused = 0
    for path in paths:
        try:
            rows = model.predictions(path) if isinstance(model, ScriptModel) else predictions(model, path)
        except (OSError, RequestError) as e:
            print(f"predict: {path}: {e}", file=sys.stderr)
            refused += 1
            continue
        for row in rows:
            if as_json:
                print(json.dumps(row), flush=True)
            else:
                print(f"{row['input']}\t{row['class']}\t{row['probability']:.4f}", flush=True)
    return refused


if __name__ == "__main__":
    sys.exit(main())
