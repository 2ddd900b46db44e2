"""The tuned model's accuracy on the test set: evaluation.json, as AWS's examples write it."""

import glob
import json
import os
import tarfile

import numpy as np

if __name__ == "__main__":
    with tarfile.open("/opt/ml/processing/model/model.tar.gz") as tar:
        tar.extractall("/tmp/model")
    w = np.load("/tmp/model/weights.npy")
    (path,) = glob.glob("/opt/ml/processing/test/*.csv")
    data = np.loadtxt(path, delimiter=",", skiprows=1)
    accuracy = float(((data[:, :-1] / 16.0 @ w).argmax(axis=1) == data[:, -1]).mean())
    print(f"test accuracy {accuracy:.4f}")
    os.makedirs("/opt/ml/processing/evaluation", exist_ok=True)
    with open("/opt/ml/processing/evaluation/evaluation.json", "w") as f:
        json.dump({"metrics": {"accuracy": {"value": accuracy}}}, f)
