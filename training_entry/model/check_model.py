"""Check the user's model file the way the job will use it, in the seconds before any job:
``python -m training_entry.model.check_model my_model.py --image-size 32 --classes 10``
(``--features N`` for table data). Prints one line and exits 1 when the file does not import,
has no ``build_model``, or builds a model that does not take the input or does not output
``[batch, classes]``. ``pipeline/`` runs it as a subprocess (it cannot import TensorFlow).
Python 3.10 syntax.
"""

from __future__ import annotations

import argparse
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # before TensorFlow is imported


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m training_entry.model.check_model")
    p.add_argument("model_file")
    shape = p.add_mutually_exclusive_group(required=True)
    shape.add_argument("--image-size", type=int)
    shape.add_argument("--features", type=int)
    p.add_argument("--classes", type=int, required=True)
    args = p.parse_args(argv)

    from training_entry.model.architectures import ModelError, build_user_model

    input_shape = (args.image_size, args.image_size, 3) if args.image_size else (args.features,)
    try:
        model = build_user_model(args.model_file, input_shape, args.classes, {})
    except ModelError as error:
        print(error, file=sys.stderr)
        return 1
    print(f"{os.path.basename(args.model_file)}: {model.name} takes {input_shape}, outputs [batch, {args.classes}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
