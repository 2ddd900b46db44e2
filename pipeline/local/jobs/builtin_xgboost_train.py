"""The job side of SageMaker's built-in XGBoost algorithm (algorithm mode: no script of the
user's), run by ``builtin_xgboost.py`` under the job's Python, which holds the ``xgboost`` the
image's record names. Standalone: it imports nothing of trainpipe (it runs in the image's
Python, where trainpipe is not installed), only the standard library, numpy and xgboost.

What it does is what the container's algorithm mode does (aws/sagemaker-xgboost-container,
branch 1.7-1: ``training.py`` run_algorithm_mode, ``algorithm_mode/train.py``,
``algorithm_mode/hyperparameter_validation.py``, ``data_utils.py``, ``callback.py``):

- the hyperparameters validated as the algorithm toolkit validates them: aliases replaced,
  ``num_round`` required, an unknown name refused, each value parsed and checked against its
  range (``sagemaker_algorithm_toolkit/hyperparameter_validation.py``'s messages);
- ``train`` (required) and ``validation`` channels read in the channel's ContentType: CSV (label
  in the first column, no header, the delimiter sniffed from the first line; ``csv_weights=1``:
  instance weights in the second) or libsvm (the default when no ContentType is given);
- one evaluation line per round as CloudWatch shows the container's (tabs as ``#011``), which is
  what the algorithm's own metric regexes (``algorithm_mode/metrics.py``) and AWS's examples read;
- ``xgboost-model`` written to the model folder: ``Booster.save_model`` from image 1.3-1 on,
  a pickle of the Booster before (0.90-1 to 1.2-2);
- with a CheckpointConfig, ``xgboost-checkpoint.<round>`` saved each round and training resumed
  from the newest one (``checkpointing.py``).

A user error is written to the failure file as ``ClientError: <the toolkit's message>`` and the
process exits 1; the runner names the job's failure from it.
"""

# No ``from __future__ import annotations``, no ``X | None`` and no ``list[str]`` in a signature
# (annotations are evaluated at def time before 3.9): the program runs under the
# image's Python, 3.6 for image 0.90-2.
import ast
import csv
import json
import os
import pickle
import re
import sys
import tempfile

MODEL_NAME = "xgboost-model"  # SageMaker: constants/xgb_constants.py MODEL_NAME
CHECKPOINT_NAME = "xgboost-checkpoint"  # SageMaker: checkpointing.py CHECKPOINT_FILENAME
CSV, LIBSVM = "csv", "libsvm"
# SageMaker: data_utils.py get_content_type: what each ContentType reads as.
CONTENT_TYPES = {"csv": CSV, "text/csv": CSV, "libsvm": LIBSVM, "text/libsvm": LIBSVM, "text/x-libsvm": LIBSVM}

# SageMaker: constants/xgb_constants.py XGB_MAXIMIZE_METRICS + XGB_MINIMIZE_METRICS.
METRICS = ["accuracy", "auc", "aucpr", "balanced_accuracy", "f1", "f1_binary", "f1_macro", "map", "ndcg", "precision",
           "r2", "recall", "precision_macro", "precision_micro", "recall_macro", "recall_micro",
           "aft-nloglik", "cox-nloglik", "error", "gamma-deviance", "gamma-nloglik",
           "interval-regression-accuracy", "logloss", "mae", "mape", "merror", "mlogloss", "mphe", "mse",
           "poisson-nloglik", "rmse", "rmsle", "tweedie-nloglik"]
OBJECTIVES = ["aft_loss_distribution", "binary:logistic", "binary:logitraw", "binary:hinge", "count:poisson",
              "multi:softmax", "multi:softprob", "rank:pairwise", "rank:ndcg", "rank:map", "reg:linear",
              "reg:squarederror", "reg:logistic", "reg:gamma", "reg:pseudohubererror", "reg:squaredlogerror",
              "reg:absoluteerror", "reg:tweedie", "survival:aft", "survival:cox"]
UPDATERS = ["grow_colmaker", "distcol", "grow_histmaker", "grow_skmaker", "sync", "refresh", "prune", "shotgun", "coord_descent"]
INF = float("inf")


class ClientError(Exception):
    """SageMaker: the algorithm toolkit's UserError (a mistake in the request, not the algorithm)."""


class AlgorithmError(Exception):
    """SageMaker: the algorithm toolkit's AlgorithmError (the algorithm failed)."""


# SageMaker: constants/xgb_constants.py CUSTOMER_ERRORS: xgboost's messages that are the user's mistake.
CUSTOMER_ERRORS = ["label must be in [0,1] for logistic regression", "label must be in [0, num_class)",
                   "feature_names mismatch", "Check failed: preds.size() == info.labels_.size()",
                   "Check failed: !auc_error AUC: the dataset only contains pos or neg samples",
                   "base_score must be in (0,1) for logistic loss", "PoissonRegression: label must be nonnegative",
                   "TweedieRegression: label must be nonnegative", "Parameter reg_lambda should be greater equal to 0"]


class Interval:
    """SageMaker: sagemaker_algorithm_toolkit Interval, printed as the toolkit prints it."""

    def __init__(self, low=-INF, high=INF, low_open=False, high_open=False):
        self.low, self.high, self.low_open, self.high_open = low, high, low_open, high_open

    def __contains__(self, value):
        return not (value < self.low or (self.low_open and value == self.low)
                    or value > self.high or (self.high_open and value == self.high))

    def __str__(self):
        low = "(-inf" if self.low == -INF else f"{'(' if self.low_open else '['}{self.low}"
        high = "+inf)" if self.high == INF else f"{self.high}{')' if self.high_open else ']'}"
        return f"{low}, {high}"


def _unit(open_low=False):
    return Interval(0, 1, low_open=open_low)


# SageMaker: algorithm_mode/hyperparameter_validation.py (1.7-1): name -> (kind, range).
HYPERPARAMETERS = {
    "num_round": ("int", Interval(1)), "csv_weights": ("int", Interval(0, 1)),
    "early_stopping_rounds": ("int", Interval(1)), "booster": ("cat", ["gbtree", "gblinear", "dart"]),
    "verbosity": ("int", Interval(0, 3)), "nthread": ("int", Interval(1)), "eta": ("float", _unit()),
    "gamma": ("float", Interval(0)), "max_depth": ("int", Interval(0)), "min_child_weight": ("float", Interval(0)),
    "max_delta_step": ("float", Interval(0)), "subsample": ("float", _unit(True)),
    "colsample_bytree": ("float", _unit(True)), "colsample_bylevel": ("float", _unit(True)),
    "colsample_bynode": ("float", _unit(True)), "lambda": ("float", Interval(0)), "alpha": ("float", Interval(0)),
    "tree_method": ("cat", ["auto", "exact", "approx", "hist", "gpu_hist"]),
    "sketch_eps": ("float", Interval(0, 1, True, True)), "scale_pos_weight": ("float", Interval(0, low_open=True)),
    "updater": ("list", UPDATERS), "dsplit": ("cat", ["row", "col"]), "refresh_leaf": ("int", Interval(0, 1)),
    "process_type": ("cat", ["default", "update"]), "grow_policy": ("cat", ["depthwise", "lossguide"]),
    "max_leaves": ("int", Interval(0)), "max_bin": ("int", Interval(0)),
    "predictor": ("cat", ["auto", "cpu_predictor", "gpu_predictor"]),
    "monotone_constraints": ("tuple", [-1, 0, 1]), "interaction_constraints": ("nested", Interval(1)),
    "sample_type": ("cat", ["uniform", "weighted"]), "normalize_type": ("cat", ["tree", "forest"]),
    "rate_drop": ("float", _unit()), "one_drop": ("int", Interval(0, 1)), "skip_drop": ("float", _unit()),
    "lambda_bias": ("float", _unit()), "tweedie_variance_power": ("float", Interval(1, 2, True, True)),
    "objective": ("cat", OBJECTIVES), "num_class": ("int", Interval(2)), "base_score": ("float", Interval(0)),
    "_kfold": ("int", Interval(2)), "_num_cv_round": ("int", Interval(1)),
    "_tuning_objective_metric": ("cat", [f"validation:{m}" for m in METRICS]),
    "eval_metric": ("list", METRICS), "seed": ("int", Interval(-(2 ** 31), 2 ** 31 - 1, True, True)),
    "num_parallel_tree": ("int", Interval(1)), "save_model_on_termination": ("cat", ["true", "false"]),
    "aft_loss_distribution": ("cat", ["normal", "logistic", "extreme"]),
    "aft_loss_distribution_scale": ("float", Interval(0)), "deterministic_histogram": ("cat", ["true", "false"]),
    "sampling_method": ("cat", ["uniform", "gradient_based"]), "prob_buffer_row": ("int", Interval(1, low_open=True)),
    "use_dask_gpu_training": ("cat", ["true", "false"]),
}
# SageMaker: hyperparameters.declare_alias(key, alias).
ALIASES = {"learning_rate": "eta", "min_split_loss": "gamma", "reg_lambda": "lambda", "reg_alpha": "alpha"}
PARSERS = {"int": int, "float": float, "cat": str, "list": lambda v: v.split(","),
           # The toolkit eval()s tuples and literal_evals nested lists; literals only here.
           "tuple": lambda v: tuple(ast.literal_eval(v)), "nested": ast.literal_eval}


def _in_range(kind, value, allowed) -> bool:
    if kind == "list":
        return all(_metric_ok(v) if allowed is METRICS else v in allowed for v in value)
    if kind == "tuple":
        return all(v in allowed for v in value)
    if kind == "nested":
        return all(v in allowed for inner in value for v in inner)
    return value in allowed


def _metric_ok(metric: str) -> bool:
    """SageMaker: eval_metric_range_validator: ``error@t``, ``ndcg@t`` and ``map@t`` take a threshold."""
    if "@" not in metric:
        return metric in METRICS
    name, threshold = (part.strip() for part in metric.split("@", 1))
    if name not in ("error", "ndcg", "map"):
        raise ClientError(f"Metric '{metric}' is not supported. Parameter 'eval_metric' with customized threshold "
                          f"should be one of these options: 'error', 'ndcg', 'map'.")
    try:
        float(threshold)
    except ValueError:
        raise ClientError(f"Threshold value 't' in '{name}@t' expects float input.") from None
    return True


def validate(given: dict) -> dict:
    """SageMaker: sagemaker_algorithm_toolkit Hyperparameters.validate, in its order: aliases,
    required, parse, range, then the dependencies the algorithm declares."""
    given = {ALIASES.get(name, name): value for name, value in given.items()}
    if "num_round" not in given:
        raise ClientError("Missing required hyperparameter: num_round")
    parsed = {}
    for name, value in given.items():
        if name not in HYPERPARAMETERS:
            raise ClientError(f"Extraneous hyperparameter found: {name}")
        kind, _ = HYPERPARAMETERS[name]
        try:
            parsed[name] = PARSERS[kind](str(value))
        except (ValueError, SyntaxError, TypeError):
            raise ClientError(f"Hyperparameter {name}: could not parse value") from None
    for name, value in parsed.items():
        kind, allowed = HYPERPARAMETERS[name]
        if not _in_range(kind, value, allowed):
            if kind in ("int", "float", "cat"):
                raise ClientError(f"Hyperparameter {name}: {value} is not in {allowed}")
            raise ClientError(f"Hyperparameter {name}: value {value} not in range {allowed}")
    objective = parsed.get("objective")
    if objective in ("multi:softmax", "multi:softprob") and "num_class" not in parsed:
        raise ClientError("Require input for parameter 'num_class' for multi-classification")
    if objective is None and "num_class" in parsed:
        raise ClientError("Do not need to setup parameter 'num_class' for learning task other than "
                          "multi-classification.")
    metrics = parsed.get("eval_metric") or []
    if "auc" in metrics and not str(objective or "").startswith(("binary:", "rank:")):
        raise ClientError("Metric 'auc' can only be applied for classification and ranking problems.")
    if "monotone_constraints" in parsed and parsed.get("tree_method") not in ("exact", "hist"):
        raise ClientError("monotone_constraints can be used only when the tree_method parameter is set to "
                          "either 'exact' or 'hist'.")
    if "interaction_constraints" in parsed and parsed.get("tree_method") not in ("exact", "hist", "approx"):
        raise ClientError("interaction_constraints can be used only when the tree_method parameter is set to "
                          "either 'exact', 'hist' or 'approx'.")
    for unsupported in ("_kfold", "_num_cv_round"):
        if unsupported in parsed:
            raise ClientError(f"hyperparameter {unsupported} (cross-validation) is not run by trainpipe's local "
                              f"XGBoost; remove it to train once")
    if parsed.get("use_dask_gpu_training") == "true":
        raise ClientError("use_dask_gpu_training=true (Dask GPU training) is not run by trainpipe's local XGBoost")
    return parsed


def content_type(value) -> str:
    """SageMaker: data_utils.py get_content_type (libsvm when the channel names none)."""
    if value is None:
        return LIBSVM
    kind, _, params = str(value).lower().partition(";")
    label_size = re.search(r"label_size\s*=\s*([^;\s]+)", params)
    if kind.strip() in ("csv", "text/csv") and label_size and label_size.group(1) != "1":
        raise ClientError(f"{value} is not an accepted csv ContentType. Optional parameter label_size must be equal to 1")
    found = CONTENT_TYPES.get(kind.strip())
    if found is None:
        raise ClientError(f"{value} is not a ContentType trainpipe's local XGBoost reads: text/csv, text/libsvm, "
                          f"text/x-libsvm")
    return found


def data_files(path: str):  # -> list of paths (no list[str]: evaluated at def time on 3.6-3.8)
    """SageMaker: data_utils.py _is_data_file: files not starting with '.' or '_', in name order."""
    if os.path.isfile(path):
        return [path]
    found = []
    for root, dirs, files in os.walk(path):
        dirs.sort()
        found += [os.path.join(root, f) for f in sorted(files) if not f.startswith((".", "_"))]
    return found


def load(path: str, kind: str, csv_weights: int, xgb):
    files = [f for f in data_files(path) if os.path.getsize(f) > 0]
    if not files:
        return None
    if kind == CSV:
        import numpy as np

        with open(files[0]) as first:
            sample = first.readline()
        try:
            delimiter = csv.Sniffer().sniff(sample).delimiter
        except csv.Error as error:
            raise ClientError(f"Could not determine delimiter on line {sample[:50]}:\n{error}") from None
        try:
            rows = np.vstack([np.loadtxt(f, delimiter=delimiter, ndmin=2) for f in files])
        except ValueError as error:
            raise ClientError(f"Failed to load csv data with exception:\n{error}") from None
        # SageMaker: label_column=0, and weight_column=1 with csv_weights=1.
        first = 2 if csv_weights == 1 else 1
        # Contiguous copies: xgboost < 1.3 warns about (and copies) a sliced array itself.
        return xgb.DMatrix(np.ascontiguousarray(rows[:, first:]), label=np.ascontiguousarray(rows[:, 0]),
                           weight=np.ascontiguousarray(rows[:, 1]) if csv_weights == 1 else None)
    # libsvm: XGBoost's own reader, all files of the channel as one.
    with tempfile.NamedTemporaryFile("wb", suffix=".libsvm", delete=False) as joined:
        for name in files:
            with open(name, "rb") as part:
                data = part.read()
            joined.write(data if data.endswith(b"\n") else data + b"\n")
    try:
        return xgb.DMatrix(f"{joined.name}?format=libsvm" if _version(xgb) >= (1, 5) else joined.name)
    except Exception as error:  # noqa: BLE001 - XGBoostError: the toolkit reports it as the user's
        raise ClientError(f"Failed to load libsvm data with exception:\n{error}") from None
    finally:
        os.unlink(joined.name)


def _version(xgb):  # -> (major, minor)
    major, minor = (re.findall(r"\d+", xgb.__version__) + ["0", "0"])[:2]
    return int(major), int(minor)


def evaluation_line(iteration: int, results) -> str:
    """``[0]#011train-rmse:1.23#011validation-rmse:1.45``: xgboost's EvaluationMonitor line as
    CloudWatch shows it (SageMaker's log shipping writes a tab as #011; the algorithm's metric
    regexes, ``.*\\[[0-9]+\\].*#011validation-rmse:(\\S+)``, expect it)."""
    return f"[{iteration}]" + "".join(f"#011{name}:{value:.5f}" for name, value in results)


def monitor(xgb, checkpoint_dir, start: int):
    """The per-round callback: the evaluation line, and the round's checkpoint."""
    def after(model, iteration, results):
        print(evaluation_line(iteration, results), flush=True)
        if checkpoint_dir:
            os.makedirs(checkpoint_dir, exist_ok=True)
            model.save_model(os.path.join(checkpoint_dir, f"{CHECKPOINT_NAME}.{iteration}"))

    if hasattr(xgb.callback, "TrainingCallback"):  # xgboost >= 1.3
        class Monitor(xgb.callback.TrainingCallback):
            def after_iteration(self, model, epoch, evals_log):
                results = [(f"{data}-{metric}", scores[-1]) for data, metrics in evals_log.items()
                           for metric, scores in metrics.items()]
                after(model, start + epoch, [(n, float(v[0] if isinstance(v, tuple) else v)) for n, v in results])
                return False
        return Monitor()

    def legacy(env):  # xgboost < 1.3: a function of the callback environment
        after(env.model, start + env.iteration, [(name, float(value)) for name, value in env.evaluation_result_list])
    return legacy


def latest_checkpoint(checkpoint_dir):
    """SageMaker: checkpointing.py load_checkpoint: the newest ``xgboost-checkpoint.N`` and N + 1."""
    if not checkpoint_dir or not os.path.isdir(checkpoint_dir):
        return None, 0
    matches = (re.fullmatch(re.escape(CHECKPOINT_NAME) + r"\.(\d+)", f) for f in os.listdir(checkpoint_dir))
    rounds = [int(m.group(1)) for m in matches if m]
    if not rounds:
        return None, 0
    return os.path.join(checkpoint_dir, f"{CHECKPOINT_NAME}.{max(rounds)}"), max(rounds) + 1


def train(environ) -> None:
    import xgboost as xgb

    with open(environ["SM_INPUT_TRAINING_CONFIG_FILE"]) as f:
        config = validate(json.load(f))
    with open(environ["SM_INPUT_DATA_CONFIG_FILE"]) as f:
        channels = json.load(f)
    checkpoint_dir = None
    if os.path.exists(environ.get("SM_CHECKPOINT_CONFIG_FILE", "")):
        with open(environ["SM_CHECKPOINT_CONFIG_FILE"]) as f:
            checkpoint_dir = json.load(f).get("LocalPath")
    if "train" not in channels:
        raise ClientError("Missing required channel: train")  # SageMaker: Channel("train", required=True)
    extra = sorted(set(channels) - {"train", "validation", "code"})
    if extra:
        raise ClientError(f"Extraneous channel found: {extra[0]}")
    kind = content_type(channels["train"].get("ContentType"))
    csv_weights = config.pop("csv_weights", 0)
    train_data = load(environ["SM_CHANNEL_TRAIN"], kind, csv_weights, xgb)
    if train_data is None:
        raise ClientError(f"No data in training channel path {environ['SM_CHANNEL_TRAIN']}")
    watchlist = [(train_data, "train")]
    if "validation" in channels:
        validation = load(environ["SM_CHANNEL_VALIDATION"], kind, csv_weights, xgb)
        if validation is None:
            raise ClientError(f"No data in validation channel path {environ['SM_CHANNEL_VALIDATION']}")
        watchlist.append((validation, "validation"))
    print(f"Train matrix has {train_data.num_row()} rows and {train_data.num_col()} columns", flush=True)

    num_round = config.pop("num_round")
    for name in ("save_model_on_termination", "_tuning_objective_metric", "use_dask_gpu_training"):
        config.pop(name, None)
    if config.get("updater"):
        config["updater"] = ",".join(config["updater"])
    metrics = config.pop("eval_metric", None)
    if metrics:
        config["eval_metric"] = metrics
    early = config.pop("early_stopping_rounds", None)
    resume, start = latest_checkpoint(checkpoint_dir)
    if resume:
        print(f"Checkpoint loaded from {resume}; resuming from iteration {start}", flush=True)
    try:
        booster = xgb.train(config, train_data, num_boost_round=max(num_round - start, 0), evals=watchlist,
                            callbacks=[monitor(xgb, checkpoint_dir, start)], xgb_model=resume, verbose_eval=False,
                            # SageMaker: early stopping watches the validation channel.
                            early_stopping_rounds=early if len(watchlist) > 1 else None)
    except Exception as error:  # noqa: BLE001 - the container sorts xgboost's errors the same way
        # SageMaker: train.py train_job: a message of CUSTOMER_ERRORS is the user's, the rest the algorithm's.
        if any(known in str(error) for known in CUSTOMER_ERRORS):
            raise ClientError(str(error).strip().splitlines()[0]) from None
        raise AlgorithmError(f"XGB train call failed with exception: {str(error).strip().splitlines()[0]}") from None
    model_dir = environ["SM_MODEL_DIR"]
    os.makedirs(model_dir, exist_ok=True)
    location = os.path.join(model_dir, MODEL_NAME)
    if _version(xgb) >= (1, 3):
        booster.save_model(location)  # SageMaker: 1.3-1 on, train.py bst.save_model(model_location)
    else:
        with open(location, "wb") as f:  # SageMaker: 0.90-1 to 1.2-2, pkl.dump(bst, f)
            pickle.dump(booster, f, protocol=4)
    print(f"model: {location} (xgboost {xgb.__version__})", flush=True)


def main() -> int:
    try:
        train(os.environ)
    except (ClientError, AlgorithmError) as error:
        reason = f"{type(error).__name__}: {error}"
        failure = os.path.join(os.environ.get("SM_OUTPUT_DIR", "."), "failure")
        os.makedirs(os.path.dirname(failure), exist_ok=True)
        with open(failure, "w") as f:
            f.write(reason)
        print(reason, file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
