"""Reuse a definition built before: importing the SageMaker SDK and building the definition
take ~2 s of every ``trainpipe run --local`` (benchmarks/training/scaling/p3_runner_overhead.py), for a JSON
document that only changes when its inputs do.

The key covers everything the definition depends on: the build settings, the parameter
overrides, the SDK's version, and the content of every source file of the four packages
(``pipeline/`` builds it; the entrypoint packages' files become the content-addressed code
bundles whose keys it names). A changed byte anywhere gives a new key.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections.abc import Mapping
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from pipeline.definition.bundles import REPO_ROOT
from pipeline.settings import Settings

PACKAGES = ("pipeline", "processing", "training_entry", "evaluation")


def _sources_digest() -> str:
    digest = hashlib.sha256()
    for package in PACKAGES:
        root = REPO_ROOT / package
        for path in sorted(root.rglob("*")):
            if path.suffix in (".py", ".json") and "__pycache__" not in path.parts:
                digest.update(path.relative_to(REPO_ROOT).as_posix().encode() + b"\0")
                digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def _sdk_version() -> str:
    try:
        return version("sagemaker")
    except PackageNotFoundError:  # pragma: no cover - the SDK is a dependency
        return "unknown"


def definition_key(settings: Settings, overrides: Mapping[str, object]) -> str:
    material = {
        "settings": dataclasses.asdict(settings),
        "overrides": {k: str(v) for k, v in sorted(overrides.items())},
        "sdk": _sdk_version(),
        "sources": _sources_digest(),
        # The user's model file ships in the training bundle: its bytes name the bundle's key.
        "model_file": (
            hashlib.sha256(Path(settings.model_file).read_bytes()).hexdigest() if settings.model_file else None
        ),
    }
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()[:32]


def cached_definition(
    settings: Settings, overrides: Mapping[str, object], cache_dir: Path
) -> tuple[dict, bool]:
    """(definition, whether it came from the cache). A miss builds it (with the SDK) and
    stores it atomically; an unreadable entry is rebuilt."""
    path = Path(cache_dir) / f"{definition_key(settings, overrides)}.json"
    try:
        return json.loads(path.read_text()), True
    except (OSError, ValueError):
        pass
    from pipeline.definition.build import build_definition

    definition = build_definition(settings, overrides)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    partial.write_text(json.dumps(definition))
    os.replace(partial, path)
    return definition, False
