"""Why a local job failed (``pipeline/local/jobs/failures.py``): the first failing rank, named
once and correctly, with its own reason."""

from __future__ import annotations

import os
import re
import signal

import pytest

from pipeline.local.hosts import mpi
from pipeline.local.jobs.failures import (
    ALGORITHM_ERROR,
    INTERNAL_ERROR,
    TEARDOWN_HINT,
    FailureWatch,
    exit_failure,
    first_failure,
    in_user_paths,
    in_user_terms,
    parameter_terms,
)
from pipeline.local.jobs.training import TrainingJob
from tests.pipeline.local.helpers import BUCKET, put_code, training_request


def test_the_oldest_failure_file_wins_whatever_the_hosts_order(tmp_path):
    """algo-2's rank failed first; algo-1's rank wrote its echo a moment later, and both files
    are there by the next poll."""
    files = {h: tmp_path / h / "failure" for h in ("algo-1", "algo-2")}
    for host, text in (("algo-2", "RuntimeError: the cause [rank 1 of 2 on algo-2]"),
                       ("algo-1", "HorovodInternalError: peer gone [rank 0 of 2 on algo-1]")):
        files[host].parent.mkdir()
        files[host].write_text(text)
    os.utime(files["algo-2"], ns=(1_000_000_000, 1_000_000_000))
    os.utime(files["algo-1"], ns=(1_000_000_001, 1_000_000_001))
    watch = FailureWatch(files)
    watch.poll()
    assert watch.first == ("algo-2", "RuntimeError: the cause [rank 1 of 2 on algo-2]")


CAUSE = "RuntimeError: TRAINPIPE_TEST_FAIL_AT_STEP: injected failure before step 5"


@pytest.mark.parametrize("rank, host, code, first_file, reason", [
    # mpirun saw the failing rank exit first: its exit and its reason, the rank named once
    (1, "algo-2", 1, ("algo-2", f"{CAUSE} [rank 1 of 2 on algo-2]"),
     f"AlgorithmError: rank 1 on algo-2 exited with code 1: {CAUSE}"),
    # mpirun saw a peer's exit first (killed as the failure spread): the reason's rank is named
    (0, "algo-1", 1, ("algo-2", f"{CAUSE} [rank 1 of 2 on algo-2]"),
     f"AlgorithmError: rank 1 on algo-2 failed: {CAUSE}"),
    # two ranks on one host: the file says which of them
    (0, "algo-1", 1, ("algo-1", f"{CAUSE} [rank 1 of 2 on algo-1]"),
     f"AlgorithmError: rank 1 on algo-1 failed: {CAUSE}"),
    # a failure before Horovod started names the host only
    (0, "algo-1", 2, ("algo-1", "channel 'train' is empty [algo-1]"),
     "AlgorithmError: rank 0 on algo-1 exited with code 2: channel 'train' is empty"),
    # another program's failure file says nothing of ranks: its host tells
    (1, "algo-2", 1, ("algo-1", "out of patience"), "AlgorithmError: algo-1 failed: out of patience"),
    # one process per host (no MPI)
    (None, "algo-2", 1, ("algo-2", "ValueError: bad [algo-2]"),
     "AlgorithmError: algo-2 exited with code 1: ValueError: bad"),
])
def test_the_reason_names_the_rank_that_failed_first(rank, host, code, first_file, reason):
    failure = first_failure(rank, host, None, code, first_file, last_line="Traceback (most recent call last):")
    assert (failure.reason, failure.failure_type) == (reason, ALGORITHM_ERROR)


def test_without_a_failure_file_a_kill_from_outside_is_internal():
    failure = first_failure(1, "algo-2", int(signal.SIGKILL), None, None, last_line="epoch 3")
    assert failure.reason == ("InternalServerError: rank 1 on algo-2 was killed by signal 9 (SIGKILL): "
                              "out of memory, or killed from outside the job")
    assert failure.failure_type == INTERNAL_ERROR
    crashed = first_failure(1, "algo-2", None, 1, None, last_line="ZeroDivisionError: division by zero")
    assert crashed.reason == "AlgorithmError: rank 1 on algo-2 exited with code 1: ZeroDivisionError: division by zero"


# Rank 1 fails as training_entry/failure.py makes a rank fail: traceback, failure file with
# its rank, exit. Rank 0 goes on printing until mpirun ends it (a peer's echo of the failure).
ONE_RANK_FAILS = """
    import os, pathlib, sys, time
    rank = int(os.environ["OMPI_COMM_WORLD_RANK"])
    print(f"rank {rank} training", flush=True)
    if rank == 1:
        time.sleep(0.5)
        print("Traceback (most recent call last):\\n  ValueError: the cause", flush=True)
        pathlib.Path(os.environ["SM_OUTPUT_DIR"], "failure").write_text("ValueError: the cause [rank 1 of 2 on algo-2]")
        time.sleep(1.5)   # rank 0 keeps printing meanwhile
        sys.exit(1)
    for step in range(600):
        print(f"rank 0 step {step}", flush=True)
        time.sleep(0.05)
"""


class Terminal:
    def __init__(self):
        self.lines: list[str] = []

    def write(self, text):
        self.lines += text.splitlines()

    def flush(self):
        pass


@pytest.mark.skipif(mpi.mpirun_path() is None, reason="Open MPI's mpirun is not installed")
def test_an_abort_at_interpreter_exit_names_torch_s_teardown_and_the_fix():
    """torch.distributed's gloo threads abort a finished rank at interpreter exit when its
    process group outlived the script: the reason says what to add to the script's end."""
    abort = "terminate called without an active exception"
    failure = exit_failure("rank 2 on algo-2", int(signal.SIGABRT), None, abort, reported=False)
    assert failure.failure_type == ALGORITHM_ERROR
    assert failure.reason.startswith(f"AlgorithmError: rank 2 on algo-2 was killed by signal 6 (SIGABRT): {abort}")
    assert "gc.collect()" in failure.reason and "destroy_process_group()" in failure.reason
    # Another abort, or the same words from a process that exited, gets no hint.
    assert TEARDOWN_HINT not in exit_failure("algo-1", int(signal.SIGABRT), None, "double free", False).reason
    assert TEARDOWN_HINT not in exit_failure("algo-1", None, 1, abort, False).reason


def test_once_a_rank_has_failed_the_terminal_shows_only_its_output(local_storage, tmp_path):
    put_code(local_storage, f"s3://{BUCKET}/code/sourcedir.tar.gz", {"user.py": ONE_RANK_FAILS})
    request = training_request(f"s3://{BUCKET}/code/sourcedir.tar.gz", instances=2, mpi_processes=1)
    terminal = Terminal()
    result = TrainingJob(request, "job", local_storage, tmp_path / "job", echo=True, stream=terminal).run()
    assert result.failure_reason == "AlgorithmError: rank 1 on algo-2 exited with code 1: ValueError: the cause"
    note = next(i for i, line in enumerate(terminal.lines)
                if line.endswith(f"rank 1 on algo-2 failed; the other processes' output from here on "
                                 f"is in {tmp_path / 'job' / 'logs'} and job.log"))
    after = terminal.lines[note + 1:]
    assert not [line for line in after if line.startswith(("[algo-1 rank 0]", "[mpirun]"))], after
    # The reason is its caller's last line to say (issue 36: once); the job's log keeps it.
    assert re.fullmatch(r"\[job\] Failed after [0-9.]+s", after[-1]), after[-1]
    log = (tmp_path / "job" / "job.log").read_text().splitlines()
    assert f"[job] Failed: {result.failure_reason}" in log
    assert [line for line in log[log.index(terminal.lines[note]):] if line.startswith("[algo-1 rank 0] ")]


# --- The failure in the user's terms ------------------------------------------------------------
def test_trainpipe_s_definition_says_which_parameter_sets_each_hyperparameter(tmp_path):
    import json

    from pipeline.cli.main import main
    from pipeline.definition import parameters as P
    from training_entry import contract

    out = tmp_path / "definition.json"
    assert main(["definition", "-o", str(out)]) == 0
    terms = parameter_terms(json.loads(out.read_text()))
    assert terms[contract.HP_BATCH_SIZE] == P.BATCH_SIZE and terms[contract.HP_EPOCHS] == P.EPOCHS
    assert terms[contract.HP_MODEL_ARCHITECTURE] == P.MODEL_ARCHITECTURE  # a bare Get
    assert contract.HP_SEED not in terms  # a build setting, not a parameter


def test_a_reason_names_hyperparameters_as_the_user_sets_them():
    terms = {"batch-size": "BatchSize", "epochs": "Epochs", "fine-tune-lr-factor": "FineTuneLearningRateFactor"}
    assert in_user_terms("channel 'validation': batch-size 32 is larger than the 18 records rank 1 "
                         "reads per epoch (1 shard(s)); lower batch-size to at most 18", terms) == (
        "channel 'validation': -p BatchSize=32 is larger than the 18 records rank 1 reads per epoch "
        "(1 shard(s)); lower -p BatchSize to at most 18")
    assert in_user_terms("--batch-size 0: must be at least 1", terms) == "-p BatchSize=0: must be at least 1"
    assert in_user_terms("fine-tune-lr-factor=0.5 is too high.", terms) == "-p FineTuneLearningRateFactor=0.5 is too high."
    # A one-word name is plain English as well: renamed only with a number after it.
    assert in_user_terms("after 3 epochs; epochs 3.", terms) == "after 3 epochs; -p Epochs=3."
    # Part of another word or name: left alone.
    assert in_user_terms("max-batch-size 3, batch-sizes, global_batch-size 2", terms) == (
        "max-batch-size 3, batch-sizes, global_batch-size 2")


def test_hyperparameters_that_are_no_bare_parameter_have_no_term():
    request = {"HyperParameters": {
        "a": {"Get": "Parameters.A"},
        "b": {"Std:Join": {"On": "", "Values": [{"Get": "Parameters.B"}]}},
        "c": {"Std:Join": {"On": "", "Values": ["x", {"Get": "Parameters.C"}]}},  # more than C
        "d": {"Get": "Steps.Prep.Properties.X"},
        "e": "\"literal\""}}
    definition = {"Steps": [{"Name": "T", "Type": "Training", "Arguments": request},
                            {"Name": "P", "Type": "Processing", "Arguments": request}]}
    assert parameter_terms(definition) == {"a": "A", "b": "B"}


def test_a_reason_names_input_files_as_the_user_gave_them(local_storage, tmp_path):
    """A container path of an input (a training channel, a processing input; under the
    fallback, the host's own tree) becomes the object it was copied from, found by the
    channel's own rule, and that object the user's local file where run --local copied it."""
    local_storage.put_bytes(b"x", f"s3://{BUCKET}/data/train/part/a.csv")
    local_storage.put_bytes(b"x", f"s3://{BUCKET}/one/model.tar.gz")
    mine = tmp_path / "photos"
    mine.mkdir()
    description = {
        "InputDataConfig": [
            {"ChannelName": "train", "InputMode": "File",
             "DataSource": {"S3DataSource": {"S3Uri": f"s3://{BUCKET}/data/train"}}},
            {"ChannelName": "model", "DataSource": {"S3DataSource": {"S3Uri": f"s3://{BUCKET}/one/model.tar.gz"}}},
            {"ChannelName": "stream", "InputMode": "Pipe",
             "DataSource": {"S3DataSource": {"S3Uri": f"s3://{BUCKET}/stream/"}}}],
        "ProcessingInputs": [{"S3Input": {"S3Uri": f"s3://{BUCKET}/up/photos-1a2b/",
                                          "LocalPath": "/opt/ml/processing/input/data"}}]}
    sources = {f"s3://{BUCKET}/up/photos-1a2b/": mine}

    def said(reason, job_dir=None, container=True):
        return in_user_paths(reason, description, local_storage, sources, job_dir, container)

    assert said("No such file: '/opt/ml/input/data/train/part/a.csv'") == \
        f"No such file: 's3://{BUCKET}/data/train/part/a.csv'"
    assert said("cannot open /opt/ml/input/data/model/model.tar.gz, truncated") == \
        f"cannot open s3://{BUCKET}/one/model.tar.gz, truncated"
    assert said("no /opt/ml/input/data/train/b.csv.") == f"no s3://{BUCKET}/data/train/b.csv."
    assert said("bad image /opt/ml/processing/input/data/ants/x.gif") == f"bad image {mine}/ants/x.gif"
    assert said("empty: /opt/ml/processing/input/data") == f"empty: {mine}"
    job = tmp_path / "job"
    assert said(f"open {job}/hosts/algo-2/input/data/train/part/a.csv", job) == \
        f"open s3://{BUCKET}/data/train/part/a.csv"
    # Without namespaces a literal /opt/ml is the machine's, not the job's: left as it is.
    assert said(f"open {job}/hosts/algo-1/input/data/train/part/a.csv or /opt/ml/input/data/train/part/a.csv",
                job, container=False) == f"open s3://{BUCKET}/data/train/part/a.csv or /opt/ml/input/data/train/part/a.csv"
    # A FIFO, a folder that is no input's, a longer name that only starts like one: as they were.
    for untouched in ("read /opt/ml/input/data/stream_0", "wrote /opt/ml/model/x.keras",
                      "no /opt/ml/input/data/training/a.csv"):
        assert said(untouched) == untouched
