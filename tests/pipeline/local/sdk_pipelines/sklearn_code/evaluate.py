"""SKLearn evaluation processing, as in AWS's examples."""

import json
import os
import pickle
import tarfile

import pandas as pd

if __name__ == "__main__":
    with tarfile.open("/opt/ml/processing/model/model.tar.gz") as tar:
        tar.extractall(path=".")
    with open("model.pkl", "rb") as f:
        model = pickle.load(f)
    df = pd.read_csv("/opt/ml/processing/test/test.csv")
    accuracy = float(model.score(df.drop(columns=["label"]) / 16.0, df["label"]))
    print(f"test accuracy {accuracy:.4f}")
    os.makedirs("/opt/ml/processing/evaluation", exist_ok=True)
    with open("/opt/ml/processing/evaluation/evaluation.json", "w") as f:
        json.dump({"metrics": {"accuracy": {"value": accuracy}}}, f)
