"""Build an image record (pipeline/images/records/*.json) from the files AWS builds the image from.

    .venv/bin/python tools/image_records.py --dlc /work/.mirror/aws+deep-learning-containers/repo \
        --dockerfile b872b74...:pytorch/training/docker/2.9/py3/Dockerfile.cpu \
        --support HEAD:docs/src/data/pytorch-training/2.9-cpu-sagemaker.yml \
        --name aws-pytorch-training-2.9-cpu --repository pytorch-training --stage sagemaker \
        --output pipeline/images/records/aws-pytorch-training-2.9-cpu.json

(stdout without ``--output``). Facts are read, never guessed:
- ``packages``: every ``pip install`` / ``mamba|conda install`` in the stage the SageMaker
  image is built from (``--stage``) and the stages it is ``FROM``, ARGs substituted, a wheel
  URL read as name and version; a later install of a name replaces an earlier specifier
  (``pip install -U``); ``*.core_packages.json`` next to the Dockerfile, where AWS keeps
  one, overrides (it is what AWS's own sanity test checks in the built image).
- ``python``: the support file's ``python: py312`` (AWS's published data); the Dockerfile's
  ``ARG PYTHON_VERSION`` must agree where it has one.
- ``eop``: the support file's end-of-patch date; ``uri_patterns`` from its version,
  accelerator and Python.
- ``modules``: each package's modules (pipeline.images.distributions), and, for the
  packages this venv holds, their dependencies as this venv resolved them (listed as
  ``dependency (unpinned)``: the image resolves them at its own build).
Each source is named with the commit it was read at and that commit's date.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
from datetime import date
from pathlib import Path
from urllib.parse import unquote

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout

from pipeline.images.distributions import modules_of, normalise  # noqa: E402

DLC_URL = "https://github.com/aws/deep-learning-containers/blob"
# conda names that are not pip distributions a job imports (CUDA, compilers, meta-packages)
# or whose pip name differs.
_CONDA_SKIP = re.compile(r"^(python|conda|cpuonly|pytorch-cuda|cuda-.*|libgcc|aws-ofi-nccl|mkl-include|typing)$")
_CONDA_NAMES = {"pytorch": "torch"}
_OPTIONS_WITH_VALUE = {"-c", "--channel", "--index-url", "-i", "--extra-index-url", "-f", "--find-links",
                       "--trusted-host", "--config-settings", "--prefix", "--target", "-t"}
# Packages AWS builds from a git repository: the distribution each one installs.
_GIT = {"NVIDIA/TransformerEngine": "transformer-engine", "NVIDIA/apex": "apex"}
_STRAY = {"tests", "test", "third_party", "wheelhouse", "build", "docs", "examples"}
_WHEEL = re.compile(r"([A-Za-z0-9_.]+)-(\d[^-]*)-.*\.whl$")


def instructions(text: str) -> list[str]:
    """The Dockerfile's instructions, continuation lines joined; comment lines inside a
    continued RUN dropped (Docker drops them too: AWS comments between package names), and
    empty lines inside one (Docker drops them with a warning: TF 2.2 to 2.5's Dockerfiles put
    one before ``&& pip install ${TF_URL}``)."""
    out, current = [], ""
    for line in text.splitlines():
        if line.strip().startswith("#") or (current and not line.strip()):
            continue
        if line.rstrip().endswith("\\"):
            current += line.rstrip()[:-1] + " "
            continue
        current += line
        if current.strip():
            out.append(current.strip())
        current = ""
    if current.strip():
        out.append(current.strip())
    return out


def stages(text: str, build: dict[str, str] | None = None) -> tuple[dict[str, str], dict[str, tuple[str, list[str]]]]:
    """(global ARG defaults, stage name -> (the stage it is FROM, its RUN commands)). Each RUN
    is read with the variables Docker gives it there: the global ARGs, the ENVs of its stage
    and the stages it is FROM (``ENV PIP=${PIP}`` in ``common``), and its own stage's ARG
    defaults (``ARG TF_URL=...`` in ``sagemaker``; an ARG's default does not pass to a child).
    ``build``: the build args the image is built with (``buildspec_args``); as ``docker build
    --build-arg``, each replaces the ARG's default or gives the one an ARG without default lacks."""
    build = build or {}
    args: dict[str, str] = {}
    found: dict[str, tuple[str, list[str]]] = {}
    env: dict[str, dict[str, str]] = {}
    local: dict[str, str] = {}
    stage = None
    for instruction in instructions(text):
        word, _, rest = instruction.partition(" ")
        word = word.upper()
        if word == "FROM":
            parts = rest.split()
            stage = parts[2] if len(parts) >= 3 and parts[1].upper() == "AS" else parts[0]
            if stage in found:  # an unnamed ``FROM base_image`` after ``... AS base_image``: another stage
                stage = f"{stage} (stage {len(found) + 1})"
            found[stage] = (parts[0], [])
            env[stage], local = dict(env.get(parts[0], {})), {}
        elif word == "ARG" and "=" not in rest and rest.strip() in build:
            (args if stage is None else local)[rest.strip()] = build[rest.strip()]
        elif word == "ARG" and "=" in rest:
            name, _, value = rest.partition("=")
            value = build.get(name.strip(), value.strip().strip('"'))
            if stage is None:
                args[name.strip()] = value
            else:
                local[name.strip()] = _substitute(value, {**args, **env[stage], **local})
        elif word == "ENV" and stage is not None:
            pairs = re.findall(r'([A-Za-z_][A-Za-z0-9_]*)=("[^"]*"|\S*)', rest) if "=" in rest.split()[0] \
                else [tuple(rest.split(None, 1))] if len(rest.split(None, 1)) == 2 else []
            for name, value in pairs:
                env[stage][name] = _substitute(value.strip('"'), {**args, **env[stage], **local})
        elif word == "RUN" and stage is not None:
            found[stage][1].append(_substitute(rest, {**args, **env[stage], **local}))
    return args, found


def _substitute(word: str, args: dict[str, str]) -> str:
    return re.sub(r"\$\{?([A-Z_][A-Z0-9_]*)\}?", lambda m: args.get(m.group(1), m.group(0)), word)


def _requirement(word: str, conda: bool) -> tuple[str, str] | None:
    """(distribution, specifier) from one install argument, or None for what is not one."""
    word = word.strip("'\"")
    if word.startswith("git+"):
        repo = re.search(r"github\.com/([^/]+/[^/.@]+)(?:\.git)?(?:@(\S+))?", word)
        name = _GIT.get(repo.group(1)) if repo else None
        return (name, f"git {repo.group(2) or 'HEAD'}") if name else None
    if "://" in word:
        wheel = _WHEEL.search(unquote(word.rsplit("/", 1)[-1]))
        return (normalise(wheel.group(1)), "==" + wheel.group(2)) if wheel else None
    if word.startswith((".", "/")) or not re.match(r"[A-Za-z0-9]", word) or "/" in word:
        return None  # a local path (SKLearn's base image: pip install dist/*.whl)
    match = re.match(r"([A-Za-z0-9_.\-]+)(\[[^\]]*\])?\s*(.*)$", word)
    name, spec = match.group(1), match.group(3).strip()
    if conda:
        if _CONDA_SKIP.match(name):
            return None
        name = _CONDA_NAMES.get(name, name)
        if re.fullmatch(r"=[^=<>!].*", spec):  # conda's name=1.2 is pip's ==1.2
            spec = "=" + spec
    # An ARG without a default (the buildspec passes it): the version is not in the Dockerfile.
    return normalise(name), spec if spec and "$" not in spec else "unpinned"


def installs(command: str, args: dict[str, str]) -> list[tuple[str, str]]:
    """What one RUN command pip- or conda-installs, in order."""
    found = []
    for part in re.split(r"&&|;|\|\|", command):
        try:
            words = shlex.split(part)
        except ValueError:
            words = part.split()
        words = [_substitute(w, args) for w in words]
        for index, word in enumerate(words[:-1]):
            tool = Path(word).name
            if words[index + 1] != "install" or not (tool in ("pip", "pip3", "mamba", "conda")
                                                     or (tool == "pip" and words[index - 1:index] == ["-m"])):
                continue
            conda = tool in ("mamba", "conda")
            skip = False
            for arg in words[index + 2:]:
                if skip:
                    skip = False
                elif arg.startswith("-"):
                    skip = arg in _OPTIONS_WITH_VALUE
                    if arg in ("-r", "--requirement", "-e", "--editable"):
                        skip = True
                else:
                    requirement = _requirement(arg, conda)
                    if requirement:
                        found.append(requirement)
            break
    return found


def packages(text: str, stage: str, core: dict | None = None, build: dict[str, str] | None = None) -> dict[str, str]:
    """Distribution -> specifier for the image built from ``stage`` of the Dockerfile ``text``
    (``:last``: its last stage, what ``docker build`` builds without ``--target``), with the
    build args ``build``."""
    args, found = stages(text, build)
    if stage == ":last":
        stage = list(found)[-1]
    chain, name = [], stage
    while name in found and name not in chain:
        chain.append(name)
        name = found[name][0]
    result: dict[str, str] = {}
    for name in reversed(chain):
        for command in found[name][1]:
            for dist, spec in installs(command, args):
                if spec != "unpinned" or dist not in result:
                    result[dist] = spec
    # core_packages.json: what AWS's sanity test expects; it is not updated with every patch
    # (2.2's still says requests>=2.31.0 where the Dockerfile installs >=2.32.0), so it only
    # fills in what the Dockerfile leaves unpinned or installs outside pip and conda.
    for dist, entry in (core or {}).items():
        if result.get(normalise(dist), "unpinned") == "unpinned" and entry.get("version_specifier"):
            result[normalise(dist)] = entry["version_specifier"]
    return result


def based_packages(base: str, dockerfile: str, stage: str, core: dict | None = None) -> dict[str, str]:
    """``packages`` of an image built FROM another Dockerfile's image (``FROM $BASE_IMAGE``): the
    base's last stage's installs, then this one's, a later pin replacing an earlier one."""
    found = packages(base, list(stages(base)[1])[-1])
    for dist, spec in packages(dockerfile, stage, core).items():
        if spec != "unpinned" or dist not in found:
            found[dist] = spec
    return found


# SageMaker: the build args AWS's builder passes from an image's buildspec entry (aws/deep-learning-
# containers src/image_builder.py: TRANSFORMERS_VERSION, DATASETS_VERSION, TORCHSERVE_VERSION,
# SM_TOOLKIT_VERSION), where the Dockerfile declares the ARG without a default.
BUILDSPEC_ARGS = {"transformers_version": "TRANSFORMERS_VERSION", "datasets_version": "DATASETS_VERSION",
                  "torch_serve_version": "TORCHSERVE_VERSION", "tool_kit_version": "SM_TOOLKIT_VERSION"}


def buildspec_args(text: str, dockerfile_path: str, stage: str | None = None) -> dict[str, str]:
    """The build args of the buildspec's image built from ``dockerfile_path`` (its entry's
    ``docker_file``, relative to the framework folder, ends that path) and, where an entry names
    one, ``stage`` (its ``target``: the EC2 and SageMaker images share a Dockerfile) and, where an
    entry names one, its ``root`` folder. One line
    naming the buildspec where no entry, or entries that disagree, build it."""
    import yaml

    class Loader(yaml.SafeLoader):
        def compose_node(self, parent, index):
            # Each image entry names its anchors again (&DEVICE_TYPE gpu after &DEVICE_TYPE cpu): as
            # YAML says, an alias is the nearest anchor before it; PyYAML refuses the repetition.
            event = self.peek_event()
            if not isinstance(event, yaml.events.AliasEvent) and getattr(event, "anchor", None) in self.anchors:
                del self.anchors[event.anchor]
            return super().compose_node(parent, index)

    # AWS's buildspecs join words with a custom tag: !join [docker/, *SHORT_VERSION, /Dockerfile., gpu]
    Loader.add_constructor("!join", lambda loader, node: "".join(
        str(part) for part in loader.construct_sequence(node, deep=True)))
    document = yaml.load(text, Loader=Loader) or {}
    entries = [image for image in (document.get("images") or {}).values() if isinstance(image, dict)
               and dockerfile_path.endswith("/" + str(image.get("docker_file", "")).lstrip("/"))]
    entries = [e for e in entries if e.get("target") in (None, stage)] or entries
    # A buildspec that builds training and inference images (huggingface/pytorch/buildspec.yml until
    # 2021) names the same docker_file for both: its entry's ``root`` (huggingface/pytorch/training)
    # says which folder that docker_file is in.
    entries = [e for e in entries if not e.get("root")
               or dockerfile_path.startswith(str(e["root"]).strip("/") + "/")] or entries
    found = [{arg: str(image[key]) for key, arg in BUILDSPEC_ARGS.items() if image.get(key) is not None}
             for image in entries]
    if not found or any(f != found[0] for f in found):
        raise SystemExit(f"the buildspec has {'no image' if not found else 'images that disagree'} built from "
                         f"{dockerfile_path}; name the buildspec that builds it")
    return found[0]


def lock_packages(text: str, extras: list[str]) -> dict[str, str]:
    """Distribution -> ==version for what ``uv sync --frozen --no-install-project --extra ...``
    installs from a uv.lock (AWS's images since PyTorch 2.11 and TensorFlow 2.21 are built so):
    the root project's dependencies and ``extras``, and theirs, as the lock resolved them."""
    import tomllib

    packages = {p["name"]: p for p in tomllib.loads(text)["package"]}
    root = next(p for p in packages.values() if (p.get("source") or {}).get("virtual") == ".")
    todo = list(root.get("dependencies", []))
    for extra in extras:
        todo += (root.get("optional-dependencies") or {}).get(extra, [])
    found: dict[str, str] = {}
    seen: set[tuple[str, tuple]] = set()
    while todo:
        dependency = todo.pop()
        name, wanted = dependency["name"], tuple(dependency.get("extra", ()))
        if (name, wanted) in seen or name not in packages:
            continue
        seen.add((name, wanted))
        package = packages[name]
        found[normalise(name)] = f"=={package['version']}"
        todo += package.get("dependencies", [])
        for extra in wanted:
            todo += (package.get("optional-dependencies") or {}).get(extra, [])
    return dict(sorted(found.items()))


def support(text: str) -> dict:
    """The few fields of AWS's published image data (docs/src/data/<repo>/<v>-<acc>-<platform>.yml)."""
    fields = {}
    for line in text.splitlines():
        match = re.match(r'^(\w+):\s*"?([^"#]*?)"?\s*$', line)
        if match and match.group(2):
            fields[match.group(1)] = match.group(2)
    fields["tags"] = re.findall(r'^\s*-\s*"([^"]+)"', text, re.MULTILINE)
    return fields


def _pattern(repository: str, supported: dict, python: str) -> str:
    """The URI pattern of the image's tags: version (any patch), then the tag's accelerator word
    (cpu, gpu, or a CUDA word such as cu130) and its Python where the tags name one."""
    version = re.escape(supported["version"])
    tags = supported.get("tags") or []
    words = tags[0].split("-") if tags else ["", supported["accelerator"], f"py{python.replace('.', '')}"]
    python_word = next((w for w in words if re.fullmatch(r"py3\d+", w)), None)
    return f"/{repository}:{version}(\\.\\d+)?-{words[1]}-" + (python_word or "")


def record(*, name: str, repository: str, dockerfile: str, stage: str, supported: dict,
           core: dict | None, sources: list[dict], retrieved: str, closure: dict[str, str],
           lock: dict[str, str] | None = None, uri_pattern: str | None = None,
           build: dict[str, str] | None = None) -> dict:
    """The record's JSON document (README.md next to the records says what each field is)."""
    python = supported["python"].removeprefix("py")
    python = f"{python[0]}.{python[1:]}"
    declared = dict(stages(dockerfile)[0]).get("PYTHON_VERSION")
    if declared and declared != python and not declared.startswith(python + "."):
        raise SystemExit(f"{name}: the Dockerfile builds Python {declared}, the support file says {python}")
    found = lock or packages(dockerfile, stage, core, build)
    # Hugging Face's images: transformers==${TRANSFORMERS_VERSION}, an ARG the buildspec passes; AWS's
    # published data for the image names the version (transformers: "4.36.0").
    if supported.get("transformers") and found.get("transformers") == "unpinned":
        found["transformers"] = f"=={supported['transformers']}"
    for dist, why in closure.items():
        found.setdefault(dist, why if why.startswith("dependency") else "dependency (unpinned)")
    modules = set()
    for dist in found:
        modules.update(modules_of(dist).modules)
    return {
        "name": name,
        "uri_patterns": [uri_pattern or _pattern(repository, supported, python).rstrip("-")],
        "python": python,
        "packages": found,
        # Folders some wheels ship at their top level by mistake: no code imports them.
        "modules": sorted(m for m in modules if m and not m.startswith("_") and m not in _STRAY),
        "sources": sources,
        "retrieved": retrieved,
        "eop": supported.get("eop"),
        "ga": supported.get("ga"),
        "horovod": "horovod" in found,
    }


# The repositories whose end-of-patch dates the image check reads (pipeline/images/support.json).
SUPPORT_REPOSITORIES = ("pytorch-training", "pytorch-inference", "pytorch", "tensorflow-training",
                        "tensorflow-inference")
# support_policy.md names frameworks, not repositories: each framework row covers these.
_POLICY_REPOSITORIES = {"PyTorch": ("pytorch-training", "pytorch-inference"),
                        "TensorFlow": ("tensorflow-training", "tensorflow-inference")}


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split("."))


def policy_rows(text: str) -> list[dict]:
    """The rows of AWS's docs/reference/support_policy.md: framework, version, GA, end of patch."""
    rows = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 5 and cells[0] in _POLICY_REPOSITORIES and re.fullmatch(r"\d+\.\d+", cells[1]):
            for repository in _POLICY_REPOSITORIES[cells[0]]:
                rows.append({"repository": repository, "version": cells[1], "accelerator": None,
                             "python": None, "ga": cells[3], "eop": cells[4], "tag": None})
    return rows


def support_table(repo: str, data_commit: str, policy: str) -> dict:
    """Every SageMaker image AWS's published data (docs/src/data/<repository>/*-sagemaker.yml at
    ``data_commit``) and its older support table (``policy``: COMMIT:PATH) date, for the
    end-of-patch warning (pipeline/images/support.py)."""
    images, seen = [], set()
    for path in _git(repo, "ls-tree", "-r", "--name-only", data_commit, "docs/src/data/").split():
        parts = path.split("/")
        if len(parts) != 5 or parts[3] not in SUPPORT_REPOSITORIES or not parts[4].endswith("-sagemaker.yml"):
            continue
        fields = support(_git(repo, "show", f"{data_commit}:{path}"))
        python = fields.get("python", "").removeprefix("py")
        images.append({"repository": parts[3], "version": fields["version"], "accelerator": fields["accelerator"],
                       "python": f"{python[0]}.{python[1:]}" if python else None,
                       "ga": fields.get("ga"), "eop": fields.get("eop"), "tag": min(fields["tags"], key=len)})
        seen.add((parts[3], _version(fields["version"])))
    # The policy's framework rows only for versions older than every published image of the
    # repository: a framework version in the table is no promise of an inference image (AWS
    # published no pytorch-inference past 2.6).
    oldest = {}
    for repository, version in seen:
        oldest[repository] = min(oldest.get(repository, version), version)
    images += [row for row in policy_rows(_git(repo, "show", policy))
               if _version(row["version"]) < oldest.get(row["repository"], (0,))
               or row["repository"] not in oldest]
    images.sort(key=lambda r: (r["repository"], _version(r["version"]), r["accelerator"] or ""))
    return {"sources": [_pinned(repo, f"{data_commit}:docs/src/data", "each SageMaker image's version, "
                                "accelerator, Python, GA and end-of-patch date (docs/src/data/<repository>/*.yml)"),
                        _pinned(repo, policy, "the support table's older versions (GA, end of patch)")],
            "images": images}


def _git(repo: str, *args: str) -> str:
    return subprocess.run(["git", "--git-dir", repo, *args], check=True, capture_output=True, text=True).stdout


def _pinned(repo: str, spec: str, what: str, url: str = DLC_URL) -> dict:
    commit, _, path = spec.partition(":")
    # The commit that last changed the file (as of ``commit``): what the record pins.
    full, when = _git(repo, "log", "-1", "--format=%H %cs", commit, "--", path).split()
    return {"url": f"{url}/{full}/{path}", "file": path, "commit": full, "date": when, "what": what}


def requirement_lines(text: str) -> dict[str, str]:
    """Distribution -> specifier for each line of a requirements.txt (``pip install -r``)."""
    found = {}
    for line in text.splitlines():
        requirement = _requirement(line.split("#", 1)[0].strip(), False) if line.split("#", 1)[0].strip() else None
        if requirement:
            found[requirement[0]] = requirement[1]
    return found


def write(document: dict, output: str | None) -> None:
    """The document as JSON on stdout, or replacing ``output`` whole: written to a temporary
    file in the same folder and renamed over it (``os.replace``), so that a reader of the
    records (pipeline/images/catalog.py, a run in progress) sees the old file or the new one,
    never half of one, as a shell's ``> FILE`` (truncate, then write) let it."""
    text = json.dumps(document, indent=1) + "\n"
    if output is None:
        sys.stdout.write(text)
        return
    target = Path(output)
    mode = target.stat().st_mode & 0o777 if target.exists() else 0o666 & ~_umask()
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temporary, mode)  # mkstemp's file is 0600; the record keeps the checkout's mode
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["support-table"]:  # image_records.py support-table --dlc GITDIR DATA_COMMIT POLICY
        table = argparse.ArgumentParser(prog="image_records.py support-table")
        table.add_argument("--dlc", required=True)
        table.add_argument("data_commit")
        table.add_argument("policy", help="COMMIT:docs/reference/support_policy.md")
        table.add_argument("--output", help="the file to replace (pipeline/images/support.json); else stdout")
        targs = table.parse_args(argv[1:])
        write(support_table(targs.dlc, targs.data_commit, targs.policy), targs.output)
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dlc", required=True, help="a git directory of aws/deep-learning-containers (or of "
                                                     "--github's repository)")
    parser.add_argument("--github", default="aws/deep-learning-containers",
                        help="the repository --dlc is a clone of (aws/sagemaker-scikit-learn-container)")
    parser.add_argument("--requirements", help="COMMIT:PATH of a requirements.txt the image pip-installs last "
                                               "(SKLearn's final Dockerfile: pip install -r requirements.txt)")
    parser.add_argument("--base", help="COMMIT:PATH of the Dockerfile whose image --dockerfile is FROM "
                                       "(FROM $BASE_IMAGE: TF 2.7's and PyTorch 1.10's SageMaker images); its last "
                                       "stage's installs come first")
    parser.add_argument("--extends", help="the record of the image the Dockerfile is FROM (Hugging Face's "
                                          "training images: AWS's PyTorch training image); this record holds "
                                          "what the Dockerfile adds")
    parser.add_argument("--uri-pattern", help="the tags' pattern, where it is not version-accelerator-python "
                                              "(SKLearn's 1.2-1-cpu-py3)")
    parser.add_argument("--dockerfile", required=True, help="COMMIT:PATH")
    parser.add_argument("--support", help="COMMIT:docs/src/data/...yml (images since 2.6)")
    parser.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                        help="a support field where no support file exists (older images: version, "
                             "accelerator, python, eop from docs/reference/support_policy.md)")
    parser.add_argument("--set-source", help="COMMIT:PATH the --set values were read from")
    parser.add_argument("--set-what", help="what --set-source says, where it is not AWS's support table "
                                           "(TF 2.13 and older: the Dockerfile's ARG PYTHON_VERSION; no dates)")
    parser.add_argument("--core", help="COMMIT:PATH of a *.core_packages.json, where AWS keeps one")
    parser.add_argument("--name", required=True)
    parser.add_argument("--repository", required=True, help="the ECR repository: pytorch-training")
    parser.add_argument("--stage", default="sagemaker")
    parser.add_argument("--closure", nargs="*", default=[], help="packages whose venv dependencies count")
    parser.add_argument("--lock", help="COMMIT:PATH of the uv.lock the image is synced from (replaces the "
                                       "Dockerfile's installs)")
    parser.add_argument("--extra", action="append", default=[], help="the lock's extras the image installs")
    parser.add_argument("--dependency", action="append", default=[], metavar="DIST=VIA",
                        help="a dependency of an installed package, read in VIA's own metadata "
                             "(name that file with --source); its venv dependencies count too")
    parser.add_argument("--source", action="append", default=[], metavar="URL|FILE|WHAT",
                        help="one more source the record names (where a --dependency was read)")
    parser.add_argument("--buildspec", help="COMMIT:PATH of the buildspec that builds the image, for the build "
                                            "args it passes to ARGs the Dockerfile leaves without a default "
                                            "(Hugging Face's DATASETS_VERSION, PyTorch inference's TORCHSERVE_VERSION)")
    parser.add_argument("--retrieved", default=date.today().isoformat())
    parser.add_argument("--output", help="the record file to replace, whole (written beside it, then renamed); "
                                         "else stdout")
    args = parser.parse_args(argv)
    blob = f"https://github.com/{args.github}/blob"

    def _source(repo: str, spec: str, what: str) -> dict:
        return _pinned(repo, spec, what, blob)

    dockerfile = _git(args.dlc, "show", args.dockerfile)
    supported = support(_git(args.dlc, "show", args.support)) if args.support else {}
    supported.update(dict(item.split("=", 1) for item in args.set))
    core = json.loads(_git(args.dlc, "show", args.core)) if args.core else None
    stage_words = "the last stage's" if args.stage == ":last" else f"the {args.stage} stage's"
    sources = [_source(args.dlc, args.dockerfile, f"{stage_words} pip/conda installs, ARG defaults"),
               _source(args.dlc, args.support or args.set_source,
                       "Python, tags, GA and end-of-patch dates (AWS's published data)" if args.support else
                       args.set_what or
                       f"{', '.join(dict(item.split('=', 1) for item in args.set))} (AWS's support table)")]
    if not args.support and args.set_source == args.dockerfile:  # one file, named once
        sources[0]["what"] += "; " + sources.pop()["what"]
    if args.core:
        sources.append(_source(args.dlc, args.core, "core packages and version specifiers"))
    build = None
    if args.buildspec:
        build = buildspec_args(_git(args.dlc, "show", args.buildspec), args.dockerfile.split(":", 1)[1], args.stage)
        sources.append(_source(args.dlc, args.buildspec, "the build args the image is built with: "
                                                         + ", ".join(f"{k}={v}" for k, v in build.items())
                               if build else f"which Dockerfile the {args.stage} image is built from "
                                             f"(its entry's docker_file); no build args"))
    for extra in args.source:
        url, file, what = extra.split("|")
        sources.append({"url": url, "file": file, "what": what})
    via = dict(d.split("=", 1) for d in args.dependency)
    closure: dict[str, str] = {}
    roots = [*args.closure, *via]
    if roots:
        from image_record_modules import closure as venv_closure

        closure = {d: v for d, v in venv_closure(roots).items() if normalise(d) not in args.closure}
    closure.update({dist: f"dependency of {parent} (unpinned)" for dist, parent in via.items()})
    lock = None
    if args.lock:
        lock = lock_packages(_git(args.dlc, "show", args.lock), args.extra)
        sources.append(_source(args.dlc, args.lock, f"every installed package at its locked version "
                                                    f"(uv sync --frozen{''.join(' --extra ' + e for e in args.extra)})"))
    if args.base:
        lock = based_packages(_git(args.dlc, "show", args.base), dockerfile, args.stage, core)
        sources.insert(1, _source(args.dlc, args.base, "the image the Dockerfile is FROM ($BASE_IMAGE): its last "
                                                       "stage's pip/conda installs"))
    if args.requirements:
        lock = {**(lock or packages(dockerfile, args.stage, core, build)),
                **requirement_lines(_git(args.dlc, "show", args.requirements))}
        sources.insert(1, _source(args.dlc, args.requirements, "what the final image pip-installs last "
                                                               "(pip install -r requirements.txt)"))
    document = record(name=args.name, repository=args.repository, dockerfile=dockerfile, stage=args.stage,
                      supported=supported, core=core, sources=sources, retrieved=args.retrieved,
                      closure=closure, lock=lock, uri_pattern=args.uri_pattern, build=build)
    if args.extends:
        document["extends"] = args.extends
    write(document, args.output)


if __name__ == "__main__":
    main()
