"""P3: the local runner's own cost: ``trainpipe run --local`` on digits, in and outside the steps.

The whole pipeline runs as a user runs it, three times in one work directory with step
caching off (``trainpipe run --local --no-cache``): the first run builds the definition with
the SageMaker SDK and places the default data; later runs find both there; the third runs
with MLflow tracking off (``TRAINPIPE_TRACKING=off``), the baseline of what the default
tracking costs (``p3_tracking_s``: outside the jobs, tracked minus untracked). Every step
runs every time. Its wall time is measured around the command; the
time inside step processes is the union of the lifetimes of every process the runner
starts (preprocess, each training job's ``mpirun`` and its ranks, evaluation), recorded from
inside the same command: ``ProcessSet.spawn`` is wrapped to note when each child starts,
and a ``pidfd`` watcher notes when it exits without reaping it (the runner still reaps its
children itself). Everything else is the runner: Python and SDK start-up, building and
interpreting the definition, staging inputs, packing and uploading outputs, registering
the model, and noticing that a child ended.

    .venv/bin/python -m benchmarks.training.scaling.p3_runner_overhead [--replicate 1] [--repeats 2] [--no-untracked] [-p Epochs=3]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import select
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

from benchmarks import harness as h
from pipeline.data.default import DIGITS_RECORDS
from pipeline.settings import PLACEHOLDER_BUCKET


def merge(spans: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Overlapping (start, end) intervals joined: the stretches when some step process ran."""
    merged: list[list[float]] = []
    for start, stop in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], stop)
        else:
            merged.append([start, stop])
    return [(a, b) for a, b in merged]


def union_seconds(spans: list[tuple[float, float]]) -> float:
    return sum(b - a for a, b in merge(spans))


def child(argv: list[str]) -> int:
    """In the measured process: record child lifetimes, then be ``trainpipe``."""
    spans_file, cli_args = argv[0], argv[1:]
    from pipeline.cli import main as cli
    from pipeline.local.hosts import processes

    spans: list[dict] = []
    lock = threading.Lock()
    original = processes.ProcessSet.spawn

    def watch(label: str, pid: int, started: float) -> None:
        try:
            fd = os.pidfd_open(pid)
        except (AttributeError, OSError):  # exited already, or no pidfd: the runner's view
            return
        try:
            select.select([fd], [], [])
        finally:
            os.close(fd)
        with lock:
            spans.append({"label": label, "start": started, "end": time.time()})

    def spawn(self, label, argv, env, cwd, log):
        started = time.time()
        result = original(self, label, argv, env, cwd, log)
        threading.Thread(target=watch, args=(label, result.process.pid, started), daemon=True).start()
        return result

    processes.ProcessSet.spawn = spawn
    # The definition: built with the SageMaker SDK (imported then) on a cache miss, read
    # from <workdir>/definitions on a hit.
    from pipeline.definition import cache as definition_cache

    sdk = {"definition": 0.0, "definition_cached": False}
    cached = definition_cache.cached_definition

    def timed_definition(*args, **kwargs):
        started = time.time()
        try:
            result = cached(*args, **kwargs)
            sdk["definition_cached"] = result[1]
            return result
        finally:
            sdk["definition"] += time.time() - started

    definition_cache.cached_definition = timed_definition
    code = 1
    try:
        code = cli.main(cli_args)
    finally:
        sdk["returned_at"] = time.time()
        time.sleep(0.1)  # the last watcher's note
        with lock:
            Path(spans_file).write_text(json.dumps({"spans": spans, "sdk": sdk}))
    gc.freeze()  # as the trainpipe console script exits (pipeline.cli.main.run)
    return code


def upload_digits(workdir: Path, replicate: int) -> str:
    """digits x ``replicate`` as the raw CSV, in the local object store; returns its URI."""
    from pipeline.data.default import digits_csv

    body = digits_csv()
    header, _, rows = body.partition(b"\n")
    key = f"trainpipe/data/digits-x{replicate}/digits.csv"
    target = workdir / "store" / PLACEHOLDER_BUCKET / key
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(header + b"\n" + rows * replicate)
    return f"s3://{PLACEHOLDER_BUCKET}/{key}"


def run_pipeline(replicate: int, parameters: list[str], workdir: Path, env: dict | None = None) -> dict:
    """One ``trainpipe run --local --no-cache`` in ``workdir``; wall, in-step and overhead
    seconds. A new workdir is a user's first run; the same one again is every later run (the
    definition and the default data are already there; the steps still all run)."""
    workdir.mkdir(parents=True, exist_ok=True)
    extra = []
    if replicate != 1:
        extra = ["-p", f"InputDataUri={upload_digits(workdir, replicate)}"]
    spans_file = workdir / "spans.json"
    command = [h.PYTHON, "-m", "benchmarks.training.scaling.p3_runner_overhead", "--child", str(spans_file),
               "run", "--local", "--no-cache", "--quiet", "--workdir", str(workdir),
               *extra, *[a for p in parameters for a in ("-p", p)]]
    started = time.time()
    proc = subprocess.run(command, cwd=h.REPO, env=h.quiet_env(env), stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=900)
    ended = time.time()
    if proc.returncode != 0:
        raise RuntimeError(f"trainpipe run --local exited {proc.returncode}:\n{proc.stdout[-3000:]}")
    recorded = json.loads(spans_file.read_text())
    spans, sdk = recorded["spans"], recorded["sdk"]
    busy = merge([(s["start"], s["end"]) for s in spans])
    inside = union_seconds(busy)
    wall = ended - started
    # Where the rest goes: before the first step process (start-up, definition, staging),
    # between steps (uploads, packing, the next step's staging), after the last.
    before = busy[0][0] - started if busy else wall
    after = ended - busy[-1][1] if busy else 0.0
    exiting = ended - sdk.get("returned_at", ended)  # interpreter shutdown (+ our 0.1 s)
    labels = sorted({s["label"] for s in spans})
    return {"wall": wall, "inside": inside, "outside": wall - inside, "share": (wall - inside) / wall,
            "processes": len(spans), "labels": labels, "before": before, "after": after,
            "between": wall - inside - before - after, "definition": sdk["definition"],
            "cached": sdk["definition_cached"], "exiting": exiting}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--child":
        return child(argv[1:])
    parser = argparse.ArgumentParser(prog="benchmarks.training.scaling.p3_runner_overhead", description=__doc__.splitlines()[0])
    parser.add_argument("--replicate", type=int, default=1, help="digits copies (1797 records each)")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("-p", dest="parameters", action="append", default=[],
                        help="pipeline parameter Name=Value (default: the pipeline's defaults)")
    parser.add_argument("--no-untracked", action="store_true",
                        help="leave out the run with tracking off (growth: only the share grows with data)")
    args = parser.parse_args(argv)
    h.say(f"P3 runner overhead: trainpipe run --local --no-cache (a first and a later run"
          f"{'' if args.no_untracked else ', then one with TRAINPIPE_TRACKING=off'}) on digits x {args.replicate}"
          f"{' with ' + ' '.join(args.parameters) if args.parameters else ' (default parameters)'}, "
          f"{args.repeats} repetitions")
    # "untracked": a later run with MLflow tracking off (TRAINPIPE_TRACKING=off), the baseline
    # of what the default tracking costs the run (issue 38).
    phases: dict[str, list[dict]] = {"first": [], "later": [], **({} if args.no_untracked else {"untracked": []})}
    for _ in range(args.repeats):
        workdir = h.work_dir(f"p3-x{args.replicate}") / f"run-{time.monotonic_ns()}"
        for phase in phases:  # the same workdir thrice: a first run, then later ones
            r = run_pipeline(args.replicate, args.parameters, workdir,
                             {"TRAINPIPE_TRACKING": "off"} if phase == "untracked" else None)
            phases[phase].append(r)
            h.say(f"  {phase:5s} run: wall {r['wall']:5.1f}s  in step processes {r['inside']:5.1f}s  "
                  f"outside {r['outside']:4.1f}s ({100 * r['share']:.1f}%: {r['before']:.1f}s before the "
                  f"first step process, of which {r['definition']:.1f}s the definition "
                  f"({'cached' if r['cached'] else 'SDK import + build'}); {r['between']:.1f}s between, "
                  f"{r['after']:.1f}s after the last, of which {r['exiting']:.1f}s exiting)  "
                  f"[{r['processes']} processes: {', '.join(r['labels'])}]")
        shutil.rmtree(workdir, ignore_errors=True)
    summary = {}
    for phase, results in phases.items():
        summary[phase] = {key: h.median(r[key] for r in results)
                          for key in ("wall", "inside", "outside", "share", "definition", "exiting")}
        # What the runner itself does (staging, packing, uploads, interpretation,
        # registration): outside the steps, less the definition and the interpreter's exit.
        summary[phase]["own"] = h.median(
            (r["outside"] - r["definition"] - r["exiting"]) / (r["wall"] - r["definition"] - r["exiting"])
            for r in results)
        m = summary[phase]
        h.say(f"  median {phase} run: wall {m['wall']:.1f}s, outside the steps {m['outside']:.1f}s = "
              f"{100 * m['share']:.1f}% (definition {m['definition']:.1f}s, exit {m['exiting']:.1f}s; "
              f"the runner's own work {100 * m['own']:.1f}%)")
    later, first, untracked = summary["later"], summary["first"], summary.get("untracked")
    h.save_figures(f"p3-x{args.replicate}", {"records": DIGITS_RECORDS * args.replicate,
                                              **{k: later[k] for k in ("wall", "inside", "outside", "share")}})
    h.result("p3_runner_overhead_share", later["share"], 0.05)
    h.result("p3_runner_own_work_share", later["own"], 0.05)
    h.result("p3_runner_overhead_share_first_run", first["share"], "-")
    h.result("p3_first_run_definition_s", first["definition"], "-")
    h.result("p3_pipeline_wall_s", later["wall"], "-")
    h.result("p3_outside_steps_s", later["outside"], "-")
    if untracked is not None:
        h.result("p3_untracked_outside_steps_s", untracked["outside"], "-")
        # What MLflow tracking (on by default) adds outside the jobs: tracked minus untracked.
        h.result("p3_tracking_s", later["outside"] - untracked["outside"], "-")
        # The thread's CPU time falls inside the jobs (2 cores): the whole run's wall, tracked
        # over untracked (one pair per repetition: the jobs' own spread is in it).
        h.result("p3_tracked_over_untracked_wall", later["wall"] / untracked["wall"], "-")
    return 0


if __name__ == "__main__":
    sys.exit(main())
