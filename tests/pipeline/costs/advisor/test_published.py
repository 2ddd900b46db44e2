"""The advisor against a published scaling table: NVIDIA's TensorFlow ResNet-50 v1.5 with
Horovod on a DGX-1 V100 (FP32) and a DGX A100 (TF32), 1 and 8 GPUs. Inputs and their sources
are in published_scaling.json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.costs.advisor.platforms import published_prediction

TABLE = json.loads((Path(__file__).with_name("published_scaling.json")).read_text())


@pytest.mark.parametrize("machine", TABLE["machines"], ids=lambda m: m["name"].split(" (")[0])
def test_eight_gpus_predicted_within_ten_percent_from_one_gpu_the_model_size_and_nvlink(machine):
    predicted = published_prediction(machine, TABLE["model"]["parameters"],
                                     TABLE["model"]["gradient_bytes_per_parameter"])
    assert abs(predicted / machine["images_per_s_n"] - 1) <= 0.10
    # The allreduce of ~102 MB over NVLink is < 1% of a 0.28-0.31 s step: the prediction is
    # close to linear, and above the published figure (which loses 4% to what the model does
    # not see without a measured spread: stragglers, input).
    assert machine["images_per_s_n"] < predicted < machine["gpus"] * machine["images_per_s_1"]


def test_every_input_has_a_source():
    assert TABLE["table_source"].startswith("https://github.com/NVIDIA/DeepLearningExamples")
    for machine in TABLE["machines"]:
        assert "https://" in machine["link_source"]
