"""Two first runs in a new workdir, started 1 s apart through the CLI, share one embedded store
(``logger.place_empty_store``: made beside its name and linked in, never copied over another
run's) and both end with complete MLflow records; the store lost afterwards, ``track sync``
logs both again from the records, with no server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mlflow import MlflowClient

from pipeline.local.hosts.shared_memory import cache_root
from pipeline.local.store.storage import LocalStorage
from pipeline.tracking import records as R
from pipeline.tracking import target as T

from .conftest import put_step_code, small_definition

REPO = Path(__file__).resolve().parents[3]
STEP_RUNS = {"Make", "Train", "Check", "Register"}


def cold_mlflow_cache(tmp_path: Path) -> Path:
    """trainpipe's cache with everything but the empty MLflow store: the first runs on a new
    machine make it (seconds of migrations), the window in which both used to copy it in."""
    cache = tmp_path / "cache"
    cache.mkdir()
    real = cache_root()
    for entry in real.iterdir() if real.is_dir() else []:
        if entry.name != "mlflow":
            (cache / entry.name).symlink_to(entry)
    return cache


def complete_records(workdir: Path, execution_ids: list[str]) -> dict[str, set[str]]:
    """Each execution's finished parent run and the names of the step runs under it."""
    client = MlflowClient(T.embedded(workdir).uri)
    experiment = client.get_experiment_by_name("tracked")
    found = client.search_runs([experiment.experiment_id], max_results=100)
    out = {}
    for execution_id in execution_ids:
        parents = [r for r in found if r.data.tags.get(R.TAG_EXECUTION) == execution_id
                   and R.TAG_PARENT not in r.data.tags]
        assert len(parents) == 1 and parents[0].info.status == "FINISHED", (execution_id, parents)
        out[execution_id] = {r.info.run_name for r in found
                             if r.data.tags.get(R.TAG_PARENT) == parents[0].info.run_id}
    assert sum(len(names) for names in out.values()) + len(out) == len(found)  # no orphans
    return out


@pytest.mark.slow  # two small pipelines at once through the CLI, the store made cold: ~40 s on 2 cores
def test_two_first_runs_a_second_apart_both_keep_their_records_and_sync_rebuilds_a_lost_store(tmp_path):
    workdir = tmp_path / "work"
    put_step_code(LocalStorage(workdir / "store"))
    definition = tmp_path / "tracked.json"
    definition.write_text(json.dumps(small_definition()))
    env = {k: v for k, v in os.environ.items() if k not in (T.SWITCH_ENV_VAR, T.ENV_VAR)}
    env["TRAINPIPE_CACHE"] = str(cold_mlflow_cache(tmp_path))
    command = [sys.executable, "-m", "pipeline", "run", "--local", "--definition", str(definition),
               "--workdir", str(workdir), "--no-cache"]
    first = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    time.sleep(1)
    second = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    outputs = [p.communicate(timeout=240)[0] for p in (first, second)]
    assert [first.returncode, second.returncode] == [0, 0], "\n".join(o[-2000:] for o in outputs)
    assert not [line for o in outputs for line in o.splitlines() if "warning: MLflow" in line], outputs
    execution_ids = sorted(p.name for p in (workdir / "runs").iterdir())
    assert len(execution_ids) == 2
    assert complete_records(workdir, execution_ids) == dict.fromkeys(execution_ids, STEP_RUNS)

    # The store lost (deleted, or replaced by a concurrent first run's before this fix): the
    # records say everything was logged, and sync checks the store before it believes them.
    (workdir / T.EMBEDDED_DB).unlink()
    sync = subprocess.run([sys.executable, "-m", "pipeline", "track", "sync", "--workdir", str(workdir)],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=240)
    assert sync.returncode == 0, sync.stdout + sync.stderr
    for line, execution_id in zip(sync.stdout.splitlines(), execution_ids, strict=False):
        assert line.startswith(f"execution {execution_id}: logged the execution's run, step Make, "), line
    assert complete_records(workdir, execution_ids) == dict.fromkeys(execution_ids, STEP_RUNS)
