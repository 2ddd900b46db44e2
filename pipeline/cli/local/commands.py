"""``trainpipe run --local``, ``trainpipe train --local`` and ``trainpipe models``.

    trainpipe run --local [-p Name=Value ...] [--workdir DIR] [--s3-endpoint URL | --aws-s3]
                          [--no-cache] [--quiet] [--definition FILE] [--stub-unsupported succeed|skip]
                          [--stub STEP.OUTPUT=VALUE ...] [--max-parallel-steps N] [--pipeline-name NAME]
        Build the definition ``trainpipe definition`` prints (or read FILE: any definition,
        e.g. one built with the plain SDK and pipeline.local.store.session.LocalStoreSession) and run
        it on this machine: no Docker, no AWS account. Artifacts go to DIR (default
        $TRAINPIPE_WORKDIR, else .trainpipe at the project root, else ./.trainpipe; one line on
        stderr says which):
        runs/<execution>/, store/ (the s3:// object store: s3://bucket/key is store/bucket/key;
        see `trainpipe store`), cache/, registry.sqlite. An s3:// parameter also takes a local path
        (-p InputDataUri=~/photos/): it is copied into the store under
        s3://<bucket>/<prefix>/uploads/<name>-<content digest>/ once, and the run says where.
        Exit 0 when the execution succeeds, 1 when it fails (a FailStep included), 130 when
        stopped (Ctrl-C, SIGTERM, SIGHUP), 2 for bad input; the reason is on the last line. An
        execution whose runner died (SIGKILL, out of memory) is marked Failed, and what its
        jobs left running is ended, by the next `run --local` in the same DIR. MLflow: see --tracking-uri.
        A definition FILE runs as the pipeline --pipeline-name names (on SageMaker: the name it is
        created with); without it, under the file's name, which the run's first lines say.
    trainpipe run --sagemaker-local [-p Name=Value ...]
        The same pipeline through the SageMaker SDK's own local mode (needs Docker + Compose).
    trainpipe train --local --entry-point FILE [--source-dir DIR] [--instances N]
                            [--processes-per-host N] [--channel NAME=PATH_OR_URI[:Mode[:Distribution]] ...]
                            [--hyperparameter K=V ...]
        One training job of any SageMaker-compatible script under the same container contract
        (Pipe, ShardedByS3Key and several hosts included). --processes-per-host turns on MPI.
    trainpipe models [--group NAME] [--json]
        The model packages registered locally.
"""

from __future__ import annotations

import argparse
import json
import sys
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

# -p values that name local files or folders, checked and copied into the store: data.py.
from pipeline.cli.local.data import copy_local_data, find_local_data
from pipeline.cli.local.run_options import add_run_options, pipeline_name_line, run_options
from pipeline.cli.options import (
    add_parameter_arguments,
    add_settings_arguments,
    parameter_overrides,
    settings_from_args,
)
from pipeline.errors import UserError
from pipeline.local.hosts.processes import stop_signals_as_interrupt
from pipeline.local.store.storage import (
    Boto3Storage,
    LocalStorage,
    S3Uri,
    Storage,
    StorageError,
    join_uri,
)
from pipeline.workdir import HELP as WORKDIR_HELP
from serving.files import answerable_archive
from training_entry.contract import DISTRIBUTIONS, INPUT_MODES


def absolute_path(text: str) -> Path:
    """Job processes run in other directories (a host's code dir): a relative workdir would
    point somewhere else for them."""
    return Path(text).resolve()
EXIT_FAILED, EXIT_STOPPED = 1, 130


# --- Shared options --------------------------------------------------------------------------
def add_storage_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--workdir", type=absolute_path, help=WORKDIR_HELP)
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--s3-endpoint", metavar="URL",
                       help="read and write s3:// through boto3 at this endpoint (MinIO, moto) "
                            "instead of the local object store")
    where.add_argument("--aws-s3", action="store_true",
                       help="read and write s3:// in real S3 with your AWS credentials")
    parser.add_argument("--quiet", action="store_true",
                        help="do not echo job output (it is still in each job's job.log)")


def make_storage(args, region: str) -> Storage:
    if args.s3_endpoint:
        from pipeline.local.store.s3_endpoint import endpoint_client

        return Boto3Storage(endpoint_url=args.s3_endpoint, region=region,
                            client=endpoint_client(args.s3_endpoint, region))
    if args.aws_s3:
        return Boto3Storage(region=region)
    return LocalStorage(Path(args.workdir) / "store")


@contextmanager
def storage_errors_are_user_errors(storage: Storage):
    """A store that cannot be reached or written before any job starts is one clear line."""
    try:
        yield
    except StorageError as error:
        raise UserError(f"cannot use the {storage.describe()}: {error}") from None


def parse_key_values(items: list[str], flag: str) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UserError(f"{flag} {item!r}: expected KEY=VALUE")
        out[key] = value
    return out


def register(subparsers) -> None:
    run = subparsers.add_parser(
        "run", help="run the whole pipeline on this machine (--local) or in SDK local mode",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = run.add_mutually_exclusive_group(required=True)
    mode.add_argument("--local", action="store_true",
                      help="trainpipe's own runner: no Docker, no AWS account")
    mode.add_argument("--sagemaker-local", action="store_true",
                      help="the SageMaker SDK's LocalPipelineSession (needs Docker and Compose)")
    add_parameter_arguments(run)
    add_storage_arguments(run)
    run.add_argument("--no-cache", action="store_true", help="ignore CacheConfig: run every step")
    run.add_argument("--stub-unsupported", choices=("succeed", "skip"), metavar="succeed|skip",
                     help="steps that cannot run locally (Lambda without --lambda, EMR, QualityCheck, ..., "
                          "an @step function or built-in algorithm, and a Model step whose container "
                          "does not run here): mark them Succeeded with empty outputs (or --stub's), or "
                          "skip them (NotExecuted, with what depends on them; the execution ends "
                          "Stopped); without it they are refused")
    run.add_argument("--definition", type=Path, metavar="FILE",
                     help="run this definition JSON (e.g. saved by `trainpipe definition -o`) "
                          "instead of building trainpipe's; -p then sets its declared parameters")
    add_run_options(run)  # --max-parallel-steps, --stub (run_options.py)
    add_settings_arguments(run)  # --tracking-uri among them (a build setting for the cloud)
    run.set_defaults(func=run_pipeline)

    train = subparsers.add_parser(
        "train", help="run one training job of any SageMaker-compatible script locally",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    train.add_argument("--local", action="store_true", required=True,
                       help="run on this machine (the only place `train` runs)")
    train.add_argument("--entry-point", required=True, metavar="FILE",
                       help="the script SageMaker would run (relative to --source-dir if given)")
    train.add_argument("--source-dir", metavar="DIR",
                       help="directory packed as sourcedir.tar.gz (default: the entry point alone)")
    train.add_argument("--instances", type=int, default=1, metavar="N", help="simulated hosts (default 1)")
    train.add_argument("--processes-per-host", type=int, metavar="N",
                       help="MPI ranks per host; turns on the MPI launch (Horovod)")
    train.add_argument("--channel", action="append", default=[],
                       metavar="NAME=PATH_OR_URI[:Mode[:Distribution]]",
                       help=f"an input channel; Mode one of {'/'.join(INPUT_MODES)} (default File), "
                            f"Distribution one of {'/'.join(DISTRIBUTIONS)} (default FullyReplicated)")
    train.add_argument("--hyperparameter", action="append", default=[], metavar="K=V",
                       help="a hyperparameter (repeatable); V is read as JSON when it parses")
    train.add_argument("--env", action="append", default=[], metavar="K=V",
                       help="an environment variable of the job (the request's Environment)")
    train.add_argument("--metric", action="append", default=[], metavar="NAME=REGEX",
                       help="a metric definition: REGEX's first group is the value")
    train.add_argument("--instance-type", default="local", help="reported to the script (default: local)")
    train.add_argument("--job-name", help="default: <entry point>-<timestamp>")
    train.add_argument("--output-path", metavar="S3_URI",
                       help="where model.tar.gz goes (default: s3://<bucket>/<prefix>/training-local)")
    train.add_argument("--checkpoint-uri", metavar="S3_URI",
                       help="CheckpointConfig.S3Uri: restored at start, synced at the end")
    train.add_argument("--mpi-options", default="", help="extra mpirun options (custom_mpi_options)")
    train.add_argument("--max-run", type=int, default=24 * 3600, metavar="SECONDS",
                       help="StoppingCondition.MaxRuntimeInSeconds (default one day)")
    add_storage_arguments(train)
    add_settings_arguments(train)
    train.set_defaults(func=train_job)

    models = subparsers.add_parser("models", help="list the model packages registered locally")
    models.add_argument("--workdir", type=absolute_path, help=WORKDIR_HELP)
    models.add_argument("--group", help="only this model package group")
    models.add_argument("--json", action="store_true", help="print JSON instead of a table")
    models.set_defaults(func=list_models)


# --- run --local -----------------------------------------------------------------------------
def place_code_and_data(storage: Storage, settings, values: dict, say) -> None:
    """Put what the definition points to in the store: the content-addressed code bundles and,
    when InputDataUri is the default, the embedded digits CSV (or, when it is the default image
    data URI, the digits as PNGs in class folders). Identical objects are skipped."""
    from pipeline.data.default import DIGITS_CSV_MD5, DIGITS_FILENAME, digits_csv, digits_images
    from pipeline.definition import parameters as P
    from pipeline.definition.bundles import all_bundles

    uploaded = 0
    # values: resolved (-p), or a definition's own parameters, which name no Framework (fixed at build).
    framework = values.get(P.FRAMEWORK) or P.framework_of(values)
    for bundle in all_bundles(settings.model_file, framework=framework).values():
        prefix = f"s3://{settings.bucket}/{bundle.key_prefix(settings.prefix)}"
        for relative, data in sorted(bundle.objects().items()):
            uploaded += storage.put_bytes_if_changed(data, join_uri(prefix, relative))
    data_uri = values[P.INPUT_DATA_URI]
    if data_uri == P.default_input_data_uri(settings.bucket, settings.prefix):
        target = join_uri(data_uri, DIGITS_FILENAME)
        if storage.md5(target) != DIGITS_CSV_MD5:
            uploaded += storage.put_bytes_if_changed(digits_csv(), target)
    elif data_uri == P.default_image_data_uri(settings.bucket, settings.prefix):
        for key, data in digits_images().items():
            uploaded += storage.put_bytes_if_changed(data, join_uri(data_uri, key))
    say(f"code and data in the {storage.describe()}: {uploaded} object(s) uploaded, the rest unchanged")
    check_data_and_model(storage, settings, values, say)


def check_data_and_model(storage: Storage, settings, values: dict, say) -> None:
    """Before any job: the data's kind fits ModelArchitecture, its train split fills a batch
    on every rank, the user's model builds for its real classes and input, BatchInputUri
    holds data of that kind."""
    from pipeline.data.batch_input import check_batch_input
    from pipeline.data.kind import inspect_input_data
    from pipeline.definition.user_model import check_user_model, uses_user_model

    shape = inspect_input_data(storage, values, has_model_file=bool(settings.model_file), tuning=bool(settings.tune_jobs))
    check_batch_input(storage, values, shape.kind)
    if uses_user_model(values, settings.model_file):
        say(f"model file checked: {check_user_model(settings.model_file, shape, values)}")


def run_pipeline(args: argparse.Namespace) -> int:
    from pipeline.data.default import DIGITS_RECORDS
    from pipeline.definition import parameters as P

    settings = settings_from_args(args)
    if args.definition is not None:
        if args.sagemaker_local:
            raise UserError("--definition runs with --local only")
        return run_definition_file(args, settings)
    overrides = parameter_overrides(args)
    local_data = find_local_data(overrides, settings) if args.local else {}
    # Bad values are one line, before the SDK is imported or anything is written.
    values = P.resolve(overrides, bucket=settings.bucket, prefix=settings.prefix,
                       default_data_records=DIGITS_RECORDS)
    S3Uri.parse(values[P.INPUT_DATA_URI], P.INPUT_DATA_URI)
    note = P.warmup_note(overrides)
    if note:
        print(note, flush=True)
    if args.sagemaker_local:
        from pipeline.cli.local.sagemaker_local import run_sagemaker_local

        return run_sagemaker_local(settings, overrides)
    return run_local(args, settings, overrides, values, local_data)


def _say(text: str) -> None:
    print(text, flush=True)


def run_local(args, settings, overrides, values, local_data) -> int:
    from pipeline.definition.cache import cached_definition

    storage = make_storage(args, settings.region)
    # The runner logs a local run to MLflow itself (execute): its jobs get no tracking setting.
    definition, _ = cached_definition(replace(settings, tracking_uri=None), overrides, Path(args.workdir) / "definitions")

    def prepare():
        copy_local_data(storage, local_data, _say)
        place_code_and_data(storage, settings, values, _say)

    # A job's failure names these files as the user gave them, not their copies in the store.
    sources = {uri: path for path, uri in local_data.values()}
    return execute(args, settings, storage, definition, settings.pipeline_name, {}, prepare=prepare,
                   local_sources=sources)


def run_definition_file(args, settings) -> int:
    try:
        definition = json.loads(Path(args.definition).read_text())
    except (OSError, ValueError) as error:
        raise UserError(f"--definition {args.definition}: {error}") from None
    parameters = parse_key_values(args.parameters, "-p")
    storage = make_storage(args, settings.region)
    from pipeline.definition.steps.names import written_pipeline_name

    # --pipeline-name, else the name `trainpipe definition` wrote (our own file is the same
    # pipeline: its cache, experiment and registry), else the file's stem.
    name = args.setting_pipeline_name or written_pipeline_name(definition) or Path(args.definition).stem
    return execute(args, settings, storage, definition, name, parameters, prepare=None)


def execute(args, settings, storage, definition, pipeline_name, parameters, prepare,
            local_sources: dict | None = None) -> int:
    """Run one execution of ``definition``; print the summary; the exit code."""
    from pipeline.local import artifacts
    from pipeline.local.execution import SUCCEEDED, summary_table
    from pipeline.local.hosts.namespaces import mode_line
    from pipeline.local.runner import PipelineRunner, RunOptions
    from pipeline.tracking import target as tracking_target
    from pipeline.tracking.live import Tracker

    say = _say
    workdir = Path(args.workdir)
    # MLflow (pipeline/tracking); an SDK v3 definition's MlflowConfig names a target of its own.
    tracking = tracking_target.resolve(settings.tracking_uri, workdir, definition=definition)
    tracker = Tracker(tracking, workdir, storage, say) if tracking else None
    runner = PipelineRunner(definition, pipeline_name, RunOptions(
        workdir=workdir, storage=storage, region=settings.region, echo=not args.quiet,
        use_cache=not args.no_cache, execution_parameters=parameters,
        stub_unsupported=args.stub_unsupported, tracker=tracker, local_sources=dict(local_sources or {}),
        **run_options(args)))
    print(args.workdir_chosen.line(), file=sys.stderr, flush=True)  # pipeline/workdir.py
    # SIGTERM and SIGHUP (the terminal closed) stop the run as Ctrl-C does: the jobs'
    # processes live in sessions of their own, and only this process can end them.
    with stop_signals_as_interrupt():
        if prepare is not None:
            with storage_errors_are_user_errors(storage):
                prepare()
        # Once the data and code are in place and checked: a refusal there names no run
        # directory, since none is made.
        say(f"trainpipe run --local: execution {runner.execution_id} of {pipeline_name}, "
            f"{len(runner.nodes)} steps; run directory {runner.run_dir}")
        from pipeline.definition.steps.names import written_pipeline_name

        name_line = pipeline_name_line(args, pipeline_name, written_pipeline_name(definition) == pipeline_name)
        if name_line:
            say(name_line)
        say(mode_line())  # whether each host gets its own /opt/ml (namespaces.py)
        try:
            record = runner.run()
        except KeyboardInterrupt:  # a second Ctrl-C while cleaning up
            record = runner.record
    say("")
    say(summary_table(record))
    say("")
    say(f"run directory: {record.run_dir} (execution.json, jobs/<job>/hosts, logs, metrics)")
    if isinstance(storage, LocalStorage):
        say(f"object store:  {storage.root}")
    say(f"registry:      {runner.registry.path} (trainpipe models --workdir {workdir})")
    made = artifacts.lines(record, storage)  # the model, evaluation.json: URI, and file beneath
    for line in made:
        say(line)
    # predict --run takes the execution's last model: offered only where predict can answer it
    # (a built-in algorithm's xgboost-model is no model of ours).
    models = [path for what, _, path in artifacts.made(record, storage) if what == "model" and path]
    if record.status == SUCCEEDED and models and answerable_archive(models[-1]):
        say(f"try it:        trainpipe predict --workdir {workdir} --run {record.execution_id} FILE...")
    if tracker is not None and tracker.link():  # the run in MLflow, and the UI's one command
        from pipeline.tracking.logger import last_experiment_link

        say(f"mlflow run:    {tracker.link()} (open the UI: {tracking.ui_command()})")
        if last_experiment_link(record.run_dir):  # the runs side by side, test accuracy among the columns
            say(f"mlflow runs:   {last_experiment_link(record.run_dir)}")
    say(mode_line())
    if record.status == SUCCEEDED:
        say(f"Execution {record.execution_id} Succeeded")
        return 0
    return say_why(record, definition)


def say_why(record, definition) -> int:
    """A run that did not succeed: the log of the step that failed, then, on the last line,
    the one place the reason is said (the live line and the summary leave it out): its first
    line, a refusal about a hyperparameter naming the -p parameter that set it."""
    from pipeline.local.execution import FAILED, STOPPED
    from pipeline.local.jobs.failures import in_user_terms, parameter_terms

    failed = next((s for s in record.steps if s.status in (FAILED, STOPPED) and s.job_dir), None)
    log = Path(failed.job_dir) / "job.log" if failed is not None else None
    if log is not None and log.is_file():
        _say(f"full log:      {log}")
    reason = in_user_terms(str(record.failure_reason), parameter_terms(definition))
    first, *more = reason.splitlines() or [""]
    if more:
        first += f" (and {len(more)} more line(s) in {log or Path(record.run_dir) / 'execution.json'})"
    print(f"Execution {record.execution_id} {record.status}: {first}", file=sys.stderr, flush=True)
    return EXIT_STOPPED if record.status == STOPPED else EXIT_FAILED


# --- train --local ---------------------------------------------------------------------------
def train_job(args: argparse.Namespace) -> int:
    from pipeline.local.jobs.train_local import TrainSpec, run_training_job
    from pipeline.local.jobs.training import OUTPUT_ARCHIVE

    settings = settings_from_args(args)
    if args.setting_tracking_uri:  # MLflow logs pipeline executions; one job is none (nor silently ignored)
        raise UserError(f"--tracking-uri {args.setting_tracking_uri}: `trainpipe train --local` runs one job outside "
                        f"any pipeline and logs nothing to MLflow; run it as a pipeline step "
                        f"(`trainpipe run --local --tracking-uri ...`), or leave the flag out")
    storage = make_storage(args, settings.region)
    spec = TrainSpec(
        entry_point=args.entry_point, source_dir=args.source_dir, instances=args.instances,
        processes_per_host=args.processes_per_host, channels=list(args.channel),
        hyperparameters=parse_key_values(args.hyperparameter, "--hyperparameter"),
        env=parse_key_values(args.env, "--env"), metrics=parse_key_values(args.metric, "--metric"),
        instance_type=args.instance_type, job_name=args.job_name, output_path=args.output_path,
        checkpoint_uri=args.checkpoint_uri, mpi_options=args.mpi_options, max_run=args.max_run,
    )
    with storage_errors_are_user_errors(storage):
        result = run_training_job(spec, settings, storage, Path(args.workdir), echo=not args.quiet)
    job = result.name
    # After the job, not before: bad flags must stay the one line on stderr.
    print(args.workdir_chosen.line(), file=sys.stderr, flush=True)  # pipeline/workdir.py
    print(f"job directory: {result.job_dir} (hosts/<host>/ trees, logs/, job.log, metrics.json)")
    if result.metrics:
        finals = {k: v[-1]["value"] for k, v in result.metrics.items() if v}
        print("metrics: " + " ".join(f"{k}={v:.4g}" for k, v in finals.items()))
    if result.status == "Completed":
        model = result.description["ModelArtifacts"]["S3ModelArtifacts"]
        where = storage.local_path(model) if isinstance(storage, LocalStorage) else None
        print(f"model:  {model}" + (f" ({where})" if where else ""))
        output = join_uri(model.rsplit("/", 1)[0], OUTPUT_ARCHIVE)
        if storage.exists(output):
            print(f"output: {output}")
        for warning in result.warnings:  # Completed, but not as it should be (an empty model)
            print(f"warning: {warning}")
        print(f"Training job {job} Completed" + (" (with warnings)" if result.warnings else ""))
        return 0
    print(f"Training job {job} {result.status}: {channel_terms(result, args.channel, storage)}", file=sys.stderr)
    return EXIT_STOPPED if result.status == "Stopped" else EXIT_FAILED


def channel_terms(result, channels: list[str], storage) -> str:
    """The job's reason, an input file it names by its /opt/ml copy named as the user gave
    it: the local file of a ``--channel NAME=PATH``, or the s3:// object."""
    from pipeline.local.hosts.namespaces import unavailable_reason
    from pipeline.local.jobs.failures import in_user_paths
    from pipeline.local.jobs.train_local import parse_channel

    given = dict(parse_channel(text)[:2] for text in channels)
    sources = {c["DataSource"]["S3DataSource"]["S3Uri"]: Path(given[c["ChannelName"]])
               for c in result.description.get("InputDataConfig") or []
               if not str(given.get(c["ChannelName"], "s3://")).startswith("s3://")}
    return in_user_paths(str(result.failure_reason), result.description, storage, sources, result.job_dir,
                         container=unavailable_reason() is None)


# --- models ----------------------------------------------------------------------------------
def list_models(args: argparse.Namespace) -> int:
    from pipeline.cli.serving.model_choice import kind
    from pipeline.local.store.registry import Registry

    registry = Registry(Path(args.workdir) / "registry.sqlite")
    packages = registry.list(args.group)
    if args.json:
        print(json.dumps([{
            "ModelPackageGroupName": p.group, "ModelPackageVersion": p.version,
            "ModelPackageArn": p.arn, "ModelApprovalStatus": p.approval_status,
            "ModelDataUrl": p.model_data_url, "Metrics": p.metrics, "CreationTime": p.created,
            "PipelineExecutionId": p.execution_id, "Kind": kind(p)} for p in packages], indent=2))
        return 0
    if not packages:
        print(f"no model packages in {registry.path}")
        return 0
    # KIND: what serve and predict send it (table rows or images); "-" where its report does not say.
    rows = [("GROUP", "VERSION", "STATUS", "KIND", "CREATED", "METRICS", "MODEL")]
    rows += [(p.group, str(p.version), p.approval_status, kind(p) or "-", p.created, p.primary_metric(),
              p.model_data_url) for p in packages]
    widths = [max(len(r[i]) for r in rows) for i in range(6)]
    for row in rows:
        print("  ".join([row[i].ljust(widths[i]) for i in range(6)] + [row[6]]).rstrip())
    return 0
