"""TensorFlow script mode, as in AWS's examples: argparse hyperparameters, /opt/ml paths."""

import argparse
import json
import os
import socket

import numpy as np
import pandas as pd
import tensorflow as tf

if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--learning_rate", type=float, default=0.01)
    parser.add_argument("--model_dir", type=str)  # the SDK passes an s3:// path; unused
    args, _ = parser.parse_known_args()

    with open("/opt/ml/input/config/resourceconfig.json") as f:
        resources = json.load(f)
    hostname = socket.gethostname()
    if hostname != resources["current_host"]:
        raise SystemExit(f"gethostname() is {hostname!r} but resourceconfig.json says {resources['current_host']!r}")
    print(f"training on {hostname} of {resources['hosts']}")

    df = pd.read_csv("/opt/ml/input/data/train/train.csv")
    x = df.drop(columns=["label"]).to_numpy(np.float32) / 16.0
    y = df["label"].to_numpy()
    tf.keras.utils.set_random_seed(1)
    model = tf.keras.Sequential([tf.keras.layers.Dense(32, activation="relu", input_shape=(x.shape[1],)),
                                 tf.keras.layers.Dense(10, activation="softmax")])
    model.compile(optimizer=tf.keras.optimizers.Adam(args.learning_rate),
                  loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    history = model.fit(x, y, epochs=args.epochs, batch_size=64, verbose=0)
    for epoch, accuracy in enumerate(history.history["accuracy"], 1):
        print(f"epoch {epoch} train_accuracy={accuracy:.4f}")
    model.save(os.path.join("/opt/ml/model", "1"))
