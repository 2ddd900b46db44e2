"""Step caching, as SageMaker Pipelines' ``CacheConfig`` does it, in ``<workdir>/cache/``.

The key of a step is a hash of the pipeline name, the step's name and type, and the step
attributes SageMaker documents as its cache key ("Default cache key attributes by pipeline step
type"): for Processing ``AppSpecification``, ``Environment``, ``ProcessingInputs``; for Training
``AlgorithmSpecification``, ``CheckpointConfig``, ``DebugHookConfig``, ``DebugRuleConfigurations``,
``Environment``, ``HyperParameters``, ``InputDataConfig``; for Tuning ``HyperParameterTuningJobConfig``,
``TrainingJobDefinitions`` and five children of ``TrainingJobDefinition`` (``CACHE_KEY_CHILDREN``).
Everything else (job names, output locations, instance types) is left out, as SageMaker leaves it out.

The attributes are evaluated with the step's *own* execution variables kept symbolic
(``{"Get": "Execution.PipelineExecutionId"}`` stays as written), so a value that only names the
current execution, such as ``CheckpointConfig.S3Uri`` = ``.../checkpoints/<execution id>``, does
not defeat the cache; values that come from other steps (their output URIs) are resolved, so a
step whose inputs were re-made by a new execution is not served stale results.

A hit reuses the earlier run's properties (output URIs included) if it succeeded within
``ExpireAfter`` (ISO 8601 duration) and its outputs are still in the store.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

CACHE_KEY_ATTRIBUTES = {
    "Processing": ("AppSpecification", "Environment", "ProcessingInputs"),
    "Training": ("AlgorithmSpecification", "CheckpointConfig", "DebugHookConfig",
                 "DebugRuleConfigurations", "Environment", "HyperParameters", "InputDataConfig"),
    "Tuning": ("HyperParameterTuningJobConfig", "TrainingJobDefinition", "TrainingJobDefinitions"),
}
# SageMaker: of these attributes, only these children are part of the key.
CACHE_KEY_CHILDREN = {
    ("Tuning", "TrainingJobDefinition"): ("AlgorithmSpecification", "HyperParameterRanges", "InputDataConfig",
                                          "StaticHyperParameters", "TuningObjective"),
}

_DURATION_RE = re.compile(
    r"^P?(?:(?P<years>\d+)Y)?(?:(?P<months>\d+)M)?(?:(?P<weeks>\d+)W)?(?:(?P<days>\d+)D)?"
    r"(?:T(?:(?P<hours>\d+)H)?(?:(?P<minutes>\d+)M)?(?:(?P<seconds>\d+)S)?)?$",
    re.IGNORECASE,
)
_UNIT_SECONDS = {"years": 365 * 86400, "months": 30 * 86400, "weeks": 7 * 86400, "days": 86400,
                 "hours": 3600, "minutes": 60, "seconds": 1}


def parse_duration(text: str) -> float:
    """ISO 8601 duration (``P30D``, ``PT1H``, ``P1DT12H``; also the docs' ``30d``/``T16m``) in
    seconds. A year is 365 days and a month 30, as an expiry needs no more precision."""
    match = _DURATION_RE.match(text.strip()) if text else None
    if not match or not any(match.groupdict().values()):
        raise ValueError(f"CacheConfig.ExpireAfter {text!r} is not an ISO 8601 duration (e.g. P30D, PT1H)")
    return float(sum(int(v) * _UNIT_SECONDS[k] for k, v in match.groupdict().items() if v))


def key_material(pipeline: str, step_name: str, step_type: str, attributes: dict) -> dict:
    names = CACHE_KEY_ATTRIBUTES.get(step_type, ())
    chosen = {}
    for name in (n for n in names if n in attributes):
        value, children = attributes[name], CACHE_KEY_CHILDREN.get((step_type, name))
        chosen[name] = {k: value[k] for k in children if k in value} if children and isinstance(value, dict) else value
    return {
        "pipeline": pipeline,
        "step": step_name,
        "type": step_type,
        "attributes": chosen,
    }


def cache_key(material: dict) -> str:
    canonical = json.dumps(material, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


@dataclass(frozen=True)
class CacheEntry:
    key: str
    step: str
    execution_id: str
    completed_at: float
    properties: dict

    @property
    def age_seconds(self) -> float:
        return time.time() - self.completed_at


class StepCache:
    def __init__(self, directory: Path):
        self.directory = Path(directory)

    def _path(self, key: str) -> Path:
        return self.directory / f"{key}.json"

    def lookup(self, key: str, expire_after: str) -> CacheEntry | None:
        path = self._path(key)
        if not path.exists():
            return None
        try:
            doc = json.loads(path.read_text())
            entry = CacheEntry(doc["key"], doc["step"], doc["execution_id"],
                               float(doc["completed_at"]), doc["properties"])
        except (ValueError, KeyError):
            return None  # a damaged entry is a miss, not an error
        if entry.age_seconds > parse_duration(expire_after):
            return None
        return entry

    def store(self, key: str, step: str, execution_id: str, properties: dict, material: dict) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        doc = {
            "key": key, "step": step, "execution_id": execution_id, "completed_at": time.time(),
            "completed": datetime.now().isoformat(timespec="seconds"),
            "material": material, "properties": properties,
        }
        partial = self._path(key).with_suffix(".partial")
        partial.write_text(json.dumps(doc, indent=2, default=str))
        partial.replace(self._path(key))


def output_uris(step_type: str, properties: dict) -> list[str]:
    """The objects a cached step's successors will read, to check they still exist."""
    if step_type == "Processing":
        outputs = (properties.get("ProcessingOutputConfig") or {}).get("Outputs") or []
        return [o["S3Output"]["S3Uri"] for o in outputs if o.get("S3Output")]
    if step_type == "Training":
        uri = (properties.get("ModelArtifacts") or {}).get("S3ModelArtifacts")
        return [uri] if uri else []
    if step_type == "Tuning":  # every completed trial's model: get_top_model_s3_uri(k) reads them
        output = ((properties.get("TrainingJobDefinition") or {}).get("OutputDataConfig") or {}).get("S3OutputPath")
        return [f"{output.rstrip('/')}/{s['TrainingJobName']}/output/model.tar.gz"
                for s in properties.get("TrainingJobSummaries") or []
                if s.get("TrainingJobStatus") == "Completed"] if output else []
    return []
