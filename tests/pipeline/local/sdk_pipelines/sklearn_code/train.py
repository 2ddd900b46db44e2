"""SKLearn script mode, as in AWS's examples: SM_* defaults, but the config read from /opt/ml."""

import argparse
import json
import os
import pickle
import socket

import pandas as pd
from sklearn.linear_model import LogisticRegression

if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--C", type=float, default=1.0)
    parser.add_argument("--model-dir", type=str, default=os.environ.get("SM_MODEL_DIR"))
    parser.add_argument("--train", type=str, default=os.environ.get("SM_CHANNEL_TRAIN"))
    args, _ = parser.parse_known_args()

    with open("/opt/ml/input/config/resourceconfig.json") as f:
        current_host = json.load(f)["current_host"]
    if socket.gethostname() != current_host:
        raise SystemExit(f"gethostname() is {socket.gethostname()!r}, resourceconfig.json says {current_host!r}")

    df = pd.read_csv(os.path.join(args.train, "train.csv"))
    model = LogisticRegression(C=args.C, max_iter=200).fit(df.drop(columns=["label"]) / 16.0, df["label"])
    with open(os.path.join(args.model_dir, "model.pkl"), "wb") as f:
        pickle.dump(model, f)
    print(f"trained on {current_host}")
