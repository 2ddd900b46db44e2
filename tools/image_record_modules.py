"""Print the top-level modules a list of distributions provides, for an image record's
``modules`` (pipeline/images/records/*.json; how they are made: pipeline/images/README.md).

    .venv/bin/python tools/image_record_modules.py tensorflow-cpu sagemaker --closure tensorflow-cpu sagemaker

Each named distribution gives its modules (pipeline.images.distributions: the table of known
names, else this venv's metadata, else the name). ``--closure`` names distributions whose
dependencies, as installed in this venv, are added too: use it only where this venv holds the
image's version (TensorFlow 2.14.1 here and in the TF 2.14 images).
"""

from __future__ import annotations

import argparse
import json
import re
from importlib import metadata

from pipeline.images.distributions import KNOWN, installed_modules, modules_of, normalise


def closure(roots: list[str]) -> dict[str, str]:
    found: dict[str, str] = {}
    todo = [normalise(r) for r in roots]
    while todo:
        name = todo.pop()
        if name in found:
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        found[name] = dist.version
        for requirement in dist.requires or []:
            if "extra ==" not in requirement:
                todo.append(normalise(re.match(r"[A-Za-z0-9_.-]+", requirement).group(0)))
    return found


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("distributions", nargs="*")
    parser.add_argument("--closure", nargs="*", default=[])
    args = parser.parse_args()
    modules: set[str] = set()
    for name in args.distributions:
        modules.update(modules_of(name).modules)
    deps = closure(args.closure)
    for name in deps:
        known = modules_of(name)
        modules.update(known.modules if normalise(name) in KNOWN
                       else installed_modules(metadata.distribution(name)) or known.modules)
    # Folders some wheels ship at their top level by mistake: no code imports them.
    stray = {"tests", "test", "third_party", "wheelhouse", "build", "docs", "examples"}
    print(json.dumps({"dependencies": dict(sorted(deps.items())),
                      "modules": sorted(m for m in modules if m and not m.startswith("_") and m not in stray)},
                     indent=1))


if __name__ == "__main__":
    main()
