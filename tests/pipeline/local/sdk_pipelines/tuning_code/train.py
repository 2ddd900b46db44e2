"""Softmax regression on the digits with mini-batch SGD, in numpy (seconds, no TensorFlow):
script mode as AWS's examples write it, argparse hyperparameters and /opt/ml paths, one
validation line per epoch for the tuning job's metric definitions to read."""

import argparse
import glob
import json
import os
import time

import numpy as np


def load(channel):
    (path,) = glob.glob(os.path.join(channel, "*.csv"))
    data = np.loadtxt(path, delimiter=",", skiprows=1)
    return data[:, :-1] / 16.0, data[:, -1].astype(int)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--learning_rate", type=float, default=0.1)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--optimizer", type=str, default="sgd")
    parser.add_argument("--epochs", type=int, default=4)
    # A real epoch takes a while; this one is milliseconds, so it waits to let the tuning job
    # read each epoch's line while the trial still runs (early stopping acts on that stream).
    parser.add_argument("--epoch_seconds", type=float, default=0.0)
    args, _ = parser.parse_known_args()

    print(f"cpus {sorted(os.sched_getaffinity(0))}", flush=True)  # the share the tuning job gave it
    x, y = load(os.environ.get("SM_CHANNEL_TRAIN", "/opt/ml/input/data/train"))
    rng = np.random.default_rng(0)
    order = rng.permutation(len(x))
    split = int(0.8 * len(x))
    (xt, yt), (xv, yv) = (x[order[:split]], y[order[:split]]), (x[order[split:]], y[order[split:]])
    w = np.zeros((x.shape[1], 10))
    velocity = np.zeros_like(w)
    for epoch in range(1, args.epochs + 1):
        for start in range(0, len(xt), args.batch_size):
            xb, yb = xt[start:start + args.batch_size], yt[start:start + args.batch_size]
            logits = xb @ w
            p = np.exp(logits - logits.max(axis=1, keepdims=True))
            p /= p.sum(axis=1, keepdims=True)
            p[np.arange(len(yb)), yb] -= 1
            grad = xb.T @ p / len(yb)
            velocity = 0.9 * velocity + grad if args.optimizer == "momentum" else grad
            w -= args.learning_rate * velocity
        accuracy = float(((xv @ w).argmax(axis=1) == yv).mean())
        print(f"epoch {epoch} val_accuracy={accuracy:.4f}", flush=True)
        time.sleep(args.epoch_seconds)
    model_dir = os.environ.get("SM_MODEL_DIR", "/opt/ml/model")
    np.save(os.path.join(model_dir, "weights.npy"), w)
    with open(os.path.join(model_dir, "hyperparameters.json"), "w") as f:
        json.dump(vars(args), f)
