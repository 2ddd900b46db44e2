"""``trainpipe track sync``: log to MLflow what the live run could not (the tracking server
was down or slow), from trainpipe's own records.

    trainpipe track sync [--workdir DIR] [--execution ID] [--tracking-uri URI]
                         [--s3-endpoint URL | --aws-s3]
        Every finished local execution in DIR (or the one named) gets what its tracking target
        lacks: the parent run, each step's run (metrics of every epoch, evaluation artifacts,
        the registered model), the execution's end. Each goes where it was meant to go (the
        target it last logged to), else --tracking-uri, $MLFLOW_TRACKING_URI or the embedded
        store DIR/mlflow.db; --tracking-uri sends them all there. Nothing is logged twice.
        The store flags say where the run's s3:// objects are (as `run --local` was given them).
        Exit 0 when everything is logged, 1 when a target still cannot be reached.

    trainpipe track sync --execution-arn ARN [--tracking-uri URI]
        A SageMaker execution (`definition|upsert --tracking-uri`): its jobs log their own
        runs; this logs what no job can, under the same execution's run: each Condition
        step's outcome and each RegisterModel step's model package as a version of the
        registered model named as its group, and the execution's end. To --tracking-uri,
        else $MLFLOW_TRACKING_URI. Nothing twice: run it again at any time.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from pipeline.cli.local.commands import add_storage_arguments, make_storage
from pipeline.errors import UserError
from pipeline.local import execution as ex
from pipeline.settings import from_environment
from pipeline.tracking.target import HELP
from training_entry.contract import has_userinfo, redact


def register(subparsers) -> None:
    track = subparsers.add_parser("track", help="MLflow experiment tracking of local runs",
                                  description=__doc__,
                                  formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = track.add_subparsers(dest="track_command", required=True, metavar="COMMAND")
    sync = commands.add_parser("sync", help="log what a tracking server that was down missed",
                               description=__doc__,
                               formatter_class=argparse.RawDescriptionHelpFormatter)
    add_storage_arguments(sync)
    sync.add_argument("--execution", metavar="ID", help="only this execution")
    sync.add_argument("--execution-arn", metavar="ARN",
                      help="a SageMaker pipeline execution: log its condition and registration steps")
    sync.add_argument("--tracking-uri", metavar="URI", help=HELP)
    sync.set_defaults(func=run_sync)


def _target_of(run_dir: Path, args, workdir: Path):
    from pipeline.tracking import target as T
    from pipeline.tracking.logger import read_state

    if args.tracking_uri is None:
        last = read_state(run_dir).get("last")
        if last:
            embedded = T.embedded(workdir)
            if last == embedded.uri:
                return embedded
            if not has_userinfo(last):
                return T.Target(uri=last, embedded=False)
            # Stored as shown: the password was never written down. The same server from the
            # environment, with its credentials, is the one meant.
            given = (os.environ.get(T.ENV_VAR) or "").strip()
            if given and redact(given) == last:
                return T.Target(uri=given, embedded=False)
            raise UserError(f"execution {run_dir.name} logged to {last}, whose credentials trainpipe does not "
                            f"store: give the URI again with --tracking-uri URI or ${T.ENV_VAR}")
    return T.resolve(args.tracking_uri, workdir)


def sync_cloud(args: argparse.Namespace) -> int:
    from pipeline.cloud.aws import Clients
    from pipeline.tracking import deadline
    from pipeline.tracking import target as T
    from pipeline.tracking.cloud_sync import region_of, sync_cloud_execution
    from pipeline.tracking.logger import client_for, quiet

    region = region_of(args.execution_arn)
    uri = args.tracking_uri or os.environ.get(T.ENV_VAR)
    if not uri or uri.strip().lower() == T.OFF:
        raise UserError(f"--execution-arn: give the tracking server its jobs log to (--tracking-uri URI "
                        f"or ${T.ENV_VAR}), as `trainpipe definition --tracking-uri` was given it")
    target = T.Target(uri=uri.strip(), embedded=False)
    if target.is_arn:
        T.from_definition({T.DEFINITION_CONFIG: {T.DEFINITION_ARN: target.uri}})  # the plugin, or one line
    limit = deadline.seconds()
    try:
        with quiet():
            done, missing = deadline.call(lambda: sync_cloud_execution(
                Clients(region).sagemaker, args.execution_arn, target, client_for(target)), limit)
    except UserError:
        raise
    except Exception as error:  # noqa: BLE001 (the tracking server: one line, as for local executions)
        first = (str(error).strip().splitlines() or [type(error).__name__])[0][:200]
        print(f"execution {args.execution_arn}: cannot log to {target.display}: {redact(first)}; run this again when it answers")
        return 1
    if missing:  # the execution's end is still logged; the steps wait for a later run of this
        print(f"execution {args.execution_arn}: {missing}; its condition and registration steps are not logged")
    print(f"execution {args.execution_arn}: " + (f"logged {', '.join(done)}" if done else "already logged"))
    return 1 if missing else 0


def run_sync(args: argparse.Namespace) -> int:
    from pipeline.tracking import deadline
    from pipeline.tracking.logger import quiet, sync_execution

    if args.execution_arn:
        if args.execution:
            raise UserError("--execution names a local execution, --execution-arn a SageMaker one: give one")
        return sync_cloud(args)
    workdir = Path(args.workdir)
    if args.execution:
        run_dir = workdir / "runs" / args.execution
        if not (run_dir / ex.RECORD_FILE).is_file():
            raise UserError(f"no local execution {args.execution!r} in {workdir}: "
                            f"`trainpipe executions --local --workdir {workdir}` lists them")
        docs = [ex.load(run_dir)]
    else:
        docs = [d for d in ex.list_executions(workdir) if d.get("status") not in (ex.EXECUTING, ex.UNREADABLE)]
    if not docs:
        print(f"{workdir} has no finished local executions to log")
        return 0
    storage = make_storage(args, from_environment().region)
    limit = deadline.seconds()
    stalled: dict[str, str] = {}
    unreached = []
    failed = 0
    for doc in reversed(docs):  # oldest first: the MLflow runs list in the order they ran
        run_dir = Path(doc["run_dir"])
        target = _target_of(run_dir, args, workdir)
        if target is None:
            raise UserError("--tracking-uri off: nothing to sync to; give a tracking URI")
        if target.uri in stalled:  # it missed its deadline once: every execution would wait as long
            print(f"execution {doc['execution_id']}: cannot log to {target.display}: {stalled[target.uri]}")
            failed += 1
            unreached.append(target)
            continue
        try:
            # The whole execution's logging has a deadline, not only each read (deadline.py).
            done = deadline.call(lambda: sync_execution(doc, target, storage, workdir / "registry.sqlite"),  # noqa: B023
                                 limit)
        except UserError:
            raise
        except Exception as error:  # noqa: BLE001 (one line per execution that cannot be logged)
            with quiet():
                first = redact((str(error).strip().splitlines() or [type(error).__name__])[0])[:200]
            if isinstance(error, deadline.DeadlineExceeded):
                stalled[target.uri] = first
            print(f"execution {doc['execution_id']}: cannot log to {target.display}: {first}")
            failed += 1
            unreached.append(target)
            continue
        from pipeline.tracking.logger import last_link

        what = f"logged {', '.join(done)}" if done else "already logged"
        print(f"execution {doc['execution_id']}: {what} ({last_link(run_dir)})")
    if failed:
        # The embedded store is a file here: no server to wait for, its error is the line above.
        when = ("when the tracking server answers" if all(t.is_server for t in unreached)
                else "once the error above is fixed")
        print(f"{failed} execution(s) not logged; run this again {when}")
        return 1
    return 0
