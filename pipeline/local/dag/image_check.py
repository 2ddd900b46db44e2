"""Before the first step: does each job's code import only what its image provides?

For every Processing and Training step whose image and code are known before the run
(literal or parameter URIs), the code is read from the store, never run, and judged by
``pipeline.images.imports.check_code`` against the image's record and the requirements.txt
SageMaker would install for it:

- Processing: the inputs the command names (``python3 /opt/ml/processing/input/code/x.py``,
  ``python3 -m pkg.mod`` with the code input on PYTHONPATH) and the SDK's ``code`` and
  ``entrypoint`` inputs; a ``sourcedir.tar.gz`` there is read as FrameworkProcessor's
  runproc.sh unpacks it, and its ``requirements.txt`` counts where a shell script of the
  code runs ``pip install -r`` on it (runproc.sh does).
- Training (SDK v2 script mode): ``sagemaker_submit_directory`` (a tar.gz) and
  ``sagemaker_program``; the toolkit pip-installs the archive's ``requirements.txt``.

A step whose code is only known at run time (an earlier step's output) is not judged here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from pipeline.errors import UserError
from pipeline.images import support
from pipeline.images.imports import Verdict, check_code
from pipeline.local.dag import interpreter
from pipeline.local.dag.interpreter import (
    STEP_PROCESSING,
    STEP_TRAINING,
    Context,
    ExpressionError,
    StepNode,
)
from pipeline.local.store.storage import Storage, StorageError

PROCESSING_INPUTS = "/opt/ml/processing/input/"
CHANNELS = "/opt/ml/input/data/"
CODE_INPUT_NAMES = ("code", "entrypoint")  # what the SDK v2 processors name their code inputs
SOURCEDIR = "sourcedir.tar.gz"
_MAX_FILES = 2000
_MAX_BYTES = 4 << 20  # per file, and per archive
_MAX_TOTAL = 32 << 20  # per input
_PIP_R = re.compile(r"pip3?\s+install\s+(?:[^\n]*\s)?-r\s+(\S+)")
# SDK v3's FrameworkProcessor: runproc.sh installs the requirements through the SDK's own
# helper, uploaded beside the code (sagemaker-core, processing.py _generate_framework_script:
# ``python3 {dir}/install_requirements.py requirements.txt``).
_INSTALL_REQUIREMENTS = re.compile(r"python3?\s+(\S*install_requirements\.py)\s+(\S+)")
_RUNPROC_PY = re.compile(r"^\s*python3?\s+(\S+\.py)\b", re.MULTILINE)


class ImageCheckFailed(UserError):
    """A job's code imports what its image lacks, or cannot be parsed by the image's Python."""


@dataclass
class JobCode:
    step: str
    image_uri: str
    files: dict[str, str] = field(default_factory=dict)  # path under the code root -> text
    entry_points: list[str] | None = None  # None: every .py file
    requirements: str | None = None
    requirements_name: str = "requirements.txt"


def _known(expr, ctx: Context):
    try:
        return interpreter.evaluate(expr, ctx)
    except ExpressionError:
        return None


def _add_archive(files: dict[str, str], data: bytes, under: str = "") -> None:
    """The .py/.sh/.txt members of a tar.gz, as SageMaker extracts it into the code folder
    (read by the one tar reader, ``training_entry/archives.py``; an unreadable archive adds
    nothing: the job finds out as it would)."""
    from training_entry import archives

    for name, content in archives.read_members(data, _code_like, _MAX_FILES, _MAX_BYTES).items():
        files[str(PurePosixPath(under, name)) if under else name] = content.decode("utf-8", errors="replace")


def _code_like(key: str) -> bool:
    name = key.rsplit("/", 1)[-1]
    return name.endswith((".py", ".sh")) or (name.startswith("requirements") and name.endswith(".txt"))


def _read_prefix(storage: Storage, uri: str, files: dict[str, str], archives: bool) -> None:
    """The code-like objects under ``uri`` (a prefix, or one object) into ``files``; archives
    (``sourcedir.tar.gz``) too where ``archives``. A command may name a data input: what is
    read stays small (code files, at most ``_MAX_FILES`` objects and ``_MAX_TOTAL`` bytes)."""
    try:
        keys = storage.list(uri)[:_MAX_FILES]
    except StorageError:
        return
    base = uri if uri.endswith("/") else uri.rsplit("/", 1)[0] + "/"
    total = 0
    for key in keys:
        relative = key[len(base):] if key.startswith(base) else key.rsplit("/", 1)[-1]
        wanted = key.endswith(SOURCEDIR) or (archives and key.endswith(".tar.gz"))
        if not (wanted or _code_like(key)) or total > _MAX_TOTAL:
            continue
        data = storage.read_bytes(key)
        total += len(data)
        if wanted and len(data) <= _MAX_BYTES:
            _add_archive(files, data, str(PurePosixPath(relative).parent).strip("."))
        elif not wanted and len(data) <= _MAX_BYTES:
            files[relative] = data.decode("utf-8", errors="replace")


def _folder(local: str) -> str:
    """An input's folder in the code's namespace: its path under /opt/ml/processing/input/."""
    return local[len(PROCESSING_INPUTS):] if local.startswith(PROCESSING_INPUTS) else local.lstrip("/")


def _pip_requirements(files: dict[str, str]) -> tuple[str | None, str]:
    """The requirements file a shell script of the code pip-installs (runproc.sh's), if any."""
    for path, text in files.items():
        if path.endswith(".sh"):
            match = _PIP_R.search(text) or _INSTALL_REQUIREMENTS.search(text)
            if match:
                name = match.group(match.lastindex).strip("'\"")
                return files.get(name), name
    return None, "requirements.txt"


def _sdk_helpers(files: dict[str, str]) -> set[str]:
    """The SDK's install_requirements.py a runproc.sh runs: SageMaker's helper, not the job's code."""
    return {PurePosixPath(m.group(1)).name for path, text in files.items() if path.endswith(".sh")
            for m in _INSTALL_REQUIREMENTS.finditer(text)}


def processing_code(node: StepNode, ctx: Context, storage: Storage) -> JobCode | None:
    args = node.body.get("Arguments", {}) or {}
    app = args.get("AppSpecification") or {}
    image = _known(app.get("ImageUri"), ctx)
    argv = [_known(a, ctx) for a in [*(app.get("ContainerEntrypoint") or []), *(app.get("ContainerArguments") or [])]]
    if not isinstance(image, str) or not argv or not all(isinstance(a, str) for a in argv[:3]):
        return None
    code_dirs = []
    job = JobCode(node.name, image)
    for item in args.get("ProcessingInputs") or []:
        s3 = item.get("S3Input") or {}
        local = str(s3.get("LocalPath") or "").rstrip("/")
        named = any(isinstance(a, str) and (a == local or a.startswith(local + "/")) for a in argv)
        if not local or not (named or item.get("InputName") in CODE_INPUT_NAMES):
            continue
        uri = _known(s3.get("S3Uri"), ctx)
        if not isinstance(uri, str) or not uri.startswith("s3://"):
            return None  # made by an earlier step: judged when it runs
        code_dirs.append(local)
        # One namespace: each input is a folder under /opt/ml/processing/input/.
        files: dict[str, str] = {}
        _read_prefix(storage, uri, files, archives=item.get("InputName") in CODE_INPUT_NAMES)
        for path, text in files.items():
            job.files[str(PurePosixPath(_folder(local), path))] = text
    if not code_dirs or not job.files:
        return None
    # Rooted at the folder the code runs from (its modules import one another by name): the
    # input holding the script python3 is given, else the ``code`` input (runproc.sh cd's
    # there; ``python3 -m`` finds its module there through PYTHONPATH).
    program = PurePosixPath(argv[0]).name
    python = re.fullmatch(r"python(3(\.\d+)?)?", program) is not None
    named = [d for d in code_dirs if python and len(argv) > 1 and argv[1].startswith(d + "/")]
    main_dir = (named or [d for d in code_dirs if d.endswith("/code")] or code_dirs)[0]
    prefix = _folder(main_dir) + "/"
    job.files = {path[len(prefix):] if path.startswith(prefix) else f"../{path}": text
                 for path, text in job.files.items()}
    # Other inputs' scripts stay (runproc.sh names the requirements and the script); their
    # Python files are not on this code's path.
    job.files = {p: t for p, t in job.files.items() if not p.startswith("../") or p.endswith(".sh")}
    job.requirements, job.requirements_name = _pip_requirements(job.files)
    for helper in _sdk_helpers(job.files):
        job.files.pop(helper, None)
    if python:
        if len(argv) > 2 and argv[1] == "-m":
            module = argv[2].replace(".", "/")
            job.entry_points = [p for p in (f"{module}.py", f"{module}/__main__.py") if p in job.files]
        elif len(argv) > 1 and argv[1].startswith(main_dir + "/"):
            job.entry_points = [argv[1][len(main_dir) + 1:]]
    else:
        # runproc.sh (FrameworkProcessor): `python <script>.py` after unpacking the source.
        for path, text in job.files.items():
            if path.endswith(".sh"):
                for found in _RUNPROC_PY.finditer(text):
                    if found.group(1) in job.files:
                        job.entry_points = [found.group(1)]
    return job


def training_code(node: StepNode, ctx: Context, storage: Storage) -> JobCode | None:
    args = node.body.get("Arguments", {}) or {}
    spec = args.get("AlgorithmSpecification") or {}
    image = _known(spec.get("TrainingImage"), ctx)
    hyper = args.get("HyperParameters") or {}
    submit, program = (_framework(_known(hyper.get(key), ctx)) for key in
                       ("sagemaker_submit_directory", "sagemaker_program"))
    if isinstance(submit, str) and submit.startswith(CHANNELS):
        submit = _in_channel(args, ctx, submit)  # network isolation: the code comes as a channel
    if not isinstance(image, str) or not isinstance(submit, str) or not submit.startswith("s3://") \
            or not isinstance(program, str):
        return None  # an SDK v3 job or a bring-your-own container: another contract
    job = JobCode(node.name, image, entry_points=[program] if program.endswith(".py") else None)
    try:
        data = storage.read_bytes(submit)
    except StorageError:
        return None
    if submit.endswith(".py"):
        job.files[submit.rsplit("/", 1)[-1]] = data.decode("utf-8", errors="replace")
    else:
        _add_archive(job.files, data)
    job.requirements = job.files.get("requirements.txt")  # SageMaker: the toolkit installs it
    return job if job.files else None


def _in_channel(args: dict, ctx: Context, path: str) -> str | None:
    """The s3:// object a container path under /opt/ml/input/data/<channel>/ comes from."""
    channel, _, rest = path[len(CHANNELS):].partition("/")
    for item in args.get("InputDataConfig") or []:
        if item.get("ChannelName") == channel:
            uri = _known(((item.get("DataSource") or {}).get("S3DataSource") or {}).get("S3Uri"), ctx)
            if not isinstance(uri, str):
                return None
            return uri if not rest or uri.rstrip("/").endswith("/" + rest) else uri.rstrip("/") + "/" + rest
    return None


def _framework(value):
    """SageMaker: framework hyperparameters are JSON-encoded strings ("\"train.py\"")."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def judge(job: JobCode) -> Verdict:
    return check_code(job.files, job.image_uri, job.requirements, step=job.step,
                      entry_points=job.entry_points, requirements_name=job.requirements_name)


def check(nodes: list[StepNode], ctx: Context, storage: Storage, say: Callable[[str], None] | None = None,
          code_of: Callable[[StepNode, Context, Storage], JobCode | None] | None = None,
          note: Callable[[JobCode], str | None] | None = None) -> list[Verdict]:
    """Refuse the run (``ImageCheckFailed``, one line) at the first step whose code imports
    what its image lacks or cannot be parsed by its Python; say each warning. ``code_of``
    reads a step's code (SDK v3 jobs: pass a reader of their own contract); ``note`` says
    what of a passed job will not be its image's (jobs/environments/before_run.py), one line
    per difference naming its steps."""
    verdicts, notes = [], {}
    # Before any verdict: one line per AWS image past its end of patch (or newer than the data
    # knows), naming every step that runs it: SageMaker runs it without a word.
    images: dict[str, list[str]] = {}
    for node in nodes:
        request = node.body.get("Arguments", {}) or {}
        uri = _known((request.get("AppSpecification") or {}).get("ImageUri") if node.type == STEP_PROCESSING
                     else (request.get("AlgorithmSpecification") or {}).get("TrainingImage")
                     if node.type == STEP_TRAINING else None, ctx)
        if isinstance(uri, str):
            images.setdefault(uri, []).append(node.name)
    for uri, steps in images.items():
        line = support.end_of_patch(uri, steps)
        if line and say is not None:
            say(f"warning: {line}")
    for node in nodes:
        reader = code_of or {STEP_PROCESSING: processing_code, STEP_TRAINING: training_code}.get(node.type)
        job = reader(node, ctx, storage) if reader else None
        if job is None:
            continue
        verdict = judge(job)
        verdicts.append(verdict)
        if verdict.refusal:
            raise ImageCheckFailed(verdict.refusal)
        if verdict.warning and say is not None:
            say(f"warning: {verdict.warning}")
        line = note(job) if note is not None else None
        if line:
            notes.setdefault(line, []).append(job.step)
    for line, steps in notes.items():
        if say is not None:
            say(f"warning: {'steps' if len(steps) > 1 else 'step'} {', '.join(steps)}: {line}")
    return verdicts
