"""What running a job under its image's Python costs (issue 47), against the runner's Python.

Every job runs under its image's Python where this machine has it (``interpreters.choose``),
over an environment of the image's pinned versions of what it imports, made once per machine
(``environment.seeded``, ``TRAINPIPE_IMAGE_ENVIRONMENTS``). The baseline is what such a job
cost before: the runner's Python with the image guard (``find_python`` finding no image Python,
the path a machine without it takes). A ScriptProcessor-shaped processing job on AWS's SKLearn
1.2-1 image (Python 3.9) runs, interleaved:

- ``runner``: the runner's Python, its workdir's job environment warm;
- ``image first``: the image's Python with nothing made yet: a new image-environments folder,
  a new workdir and a new pip cache (what a first run on a new machine pays, downloads included);
- ``image later``: the image's Python with both made (a later run).

Figures: the median of each; ``RESULT image_python_first_vs_runner`` and
``image_python_later_vs_runner``, ratios of medians. ``--script pandas`` runs a job importing
pandas and scikit-learn instead of the standard library alone: its first run installs the
image's scikit-learn 1.2.1, pandas 1.1.3, numpy 1.24.1 and scipy 1.8.0 from the package index.
Not in make bench (its 25-minute budget is spent): run by hand, figures in benchmarks/notes.md.

    .venv/bin/python -m benchmarks.environments.image_python [--repeats 3] [--script stdlib|pandas]
"""

from __future__ import annotations

import argparse
import itertools
import os
import shutil
import time

from benchmarks import harness as h
from benchmarks.training.scaling import p6_namespaces
from pipeline.local.jobs.environments import interpreters
from pipeline.local.jobs.processing import ProcessingJob
from pipeline.local.store.storage import LocalStorage

BUCKET = "image-python-bench"
IMAGE = "683313688378.dkr.ecr.us-east-1.amazonaws.com/sagemaker-scikit-learn:1.2-1-cpu-py3"
SCRIPTS = {
    "stdlib": "import json, sys\nprint(json.dumps({'python': '%d.%d' % sys.version_info[:2]}))\n",
    "pandas": "import sys\nimport pandas\nimport sklearn\nprint(sys.version_info[:2], pandas.__version__, "
              "sklearn.__version__)\n",
}


def request() -> dict:
    """P6's one-script processing request (``p6_namespaces.processing_request``), on one
    instance of the SKLearn image."""
    made = p6_namespaces.processing_request(BUCKET)
    made["ProcessingResources"]["ClusterConfig"]["InstanceCount"] = 1
    made["AppSpecification"]["ImageUri"] = IMAGE
    return made


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--script", choices=sorted(SCRIPTS), default="stdlib")
    args = parser.parse_args()
    image_python = interpreters.find_python("3.9")
    if image_python is None:
        h.say("the image's Python (3.9) is not on this machine: nothing to compare")
        for name in ("image_python_first_vs_runner", "image_python_later_vs_runner"):
            h.result(name, float("nan"), "-")
        return 0
    work = h.work_dir("image-python")
    shutil.rmtree(work, ignore_errors=True)
    storage = LocalStorage(work / "store")
    storage.put_bytes(SCRIPTS[args.script].encode(), f"s3://{BUCKET}/code/job.py")
    counter = itertools.count()
    pythons = []

    def timed(kind: str):
        def call() -> float:
            n = next(counter)
            # The baseline: no image Python found, so choose keeps the runner's (with the guard).
            interpreters.find_python = (lambda version: None) if kind == "runner" else finder
            warm = kind != "image first"
            environments = work / ("environments" if warm else f"environments-{n}")
            os.environ[interpreters.IMAGE_ENVIRONMENTS_ENV] = str(work / ("image-envs" if warm else f"image-envs-{n}"))
            os.environ["PIP_CACHE_DIR"] = str(work / ("pip-cache" if warm else f"pip-cache-{n}"))
            job_dir = work / "jobs" / f"job-{n}"
            started = time.perf_counter()
            result = ProcessingJob(request(), job_dir.name, storage, job_dir, echo=False,
                                   environments=environments).run()
            elapsed = time.perf_counter() - started
            assert result.status == "Completed", result.failure_reason
            pythons.append((kind, next(line for line in (job_dir / "job.log").read_text().splitlines()
                                       if "python:" in line)))
            shutil.rmtree(job_dir, ignore_errors=True)
            if not warm:
                shutil.rmtree(environments, ignore_errors=True)
            return elapsed
        return call

    finder = interpreters.find_python
    for kind in ("runner", "image later"):  # the warm conditions start warm: their first run is not theirs
        timed(kind)()
    times = h.interleave({kind: timed(kind) for kind in ("runner", "image first", "image later")}, args.repeats)
    interpreters.find_python = finder
    h.say(f"machine: {h.machine()}")
    h.say(f"script: {args.script}; image {IMAGE}")
    for kind, line in dict(pythons).items():
        h.say(f"{kind:12s} {line.split('] ', 1)[-1][:160]}")
    for name, values in times.items():
        h.say(f"{name:12s} {h.spread(values)} s")
    runner = h.median(times["runner"])
    suffix = "" if args.script == "stdlib" else f"_{args.script}"
    h.result(f"image_python_first_vs_runner{suffix}", h.median(times["image first"]) / runner, "-")
    h.result(f"image_python_later_vs_runner{suffix}", h.median(times["image later"]) / runner, "-")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
