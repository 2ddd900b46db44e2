"""Evaluation in a TensorFlow processing container, as in AWS's examples."""

import json
import os
import tarfile

import numpy as np
import pandas as pd
import tensorflow as tf

if __name__ == "__main__":
    with tarfile.open("/opt/ml/processing/model/model.tar.gz") as tar:
        tar.extractall(path="/opt/ml/processing/model/extracted")
    model = tf.keras.models.load_model("/opt/ml/processing/model/extracted/1")
    df = pd.read_csv("/opt/ml/processing/test/test.csv")
    x = df.drop(columns=["label"]).to_numpy(np.float32) / 16.0
    accuracy = float((model.predict(x, verbose=0).argmax(axis=1) == df["label"].to_numpy()).mean())
    print(f"test accuracy {accuracy:.4f}")
    os.makedirs("/opt/ml/processing/evaluation", exist_ok=True)
    with open("/opt/ml/processing/evaluation/evaluation.json", "w") as f:
        json.dump({"metrics": {"accuracy": {"value": accuracy}}}, f)
