"""Evaluation in a PyTorch processing container, as in AWS's examples."""

import json
import os
import tarfile

import numpy as np
import pandas as pd
import torch


def net():  # the network train.py trained (ScriptProcessor uploads this file alone)
    return torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))

if __name__ == "__main__":
    with tarfile.open("/opt/ml/processing/model/model.tar.gz") as tar:
        tar.extractall(path="/opt/ml/processing/model/extracted")
    model = net()
    model.load_state_dict(torch.load("/opt/ml/processing/model/extracted/model.pth"))
    model.eval()
    df = pd.read_csv("/opt/ml/processing/test/test.csv")
    x = torch.tensor(df.drop(columns=["label"]).to_numpy(np.float32) / 16.0)
    with torch.no_grad():
        accuracy = float((model(x).argmax(dim=1).numpy() == df["label"].to_numpy()).mean())
    print(f"test accuracy {accuracy:.4f}")
    os.makedirs("/opt/ml/processing/evaluation", exist_ok=True)
    with open("/opt/ml/processing/evaluation/evaluation.json", "w") as f:
        json.dump({"metrics": {"accuracy": {"value": accuracy}}}, f)
