"""SKLearn processing, as in AWS's examples: fixed container paths, no SageMaker helpers."""

import os

import numpy as np
import pandas as pd

base_dir = "/opt/ml/processing"

if __name__ == "__main__":
    df = pd.read_csv(f"{base_dir}/input/raw_data_all.csv")
    rng = np.random.default_rng(0)
    df = df.iloc[rng.permutation(len(df))]
    cut = int(0.8 * len(df))
    os.makedirs(f"{base_dir}/train", exist_ok=True)
    df.iloc[:cut].to_csv(f"{base_dir}/train/train.csv", index=False)
    df.iloc[cut:].to_csv(f"{base_dir}/test/test.csv", index=False)
    print(f"split {len(df)} rows: {cut} train, {len(df) - cut} test")
