"""A SageMaker training job's start-up (pipeline/costs/startup.py) and ``trainpipe advise``
counting it: the training image's pull on every host of every cloud job, none locally."""

from __future__ import annotations

import pytest

from pipeline.costs import startup
from pipeline.costs.accounting import Options
from pipeline.costs.advisor import platforms as PL
from pipeline.costs.advisor.model import StepModel
from pipeline.costs.advisor.recommend import Workload, job_startup_seconds, predict
from pipeline.costs.prices import PriceBook


def test_every_part_is_the_size_over_the_rate_or_the_measured_build_and_has_a_source():
    for device in ("cpu", "gpu"):
        own = startup.training_job(device)
        base, layer = own.parts
        assert base.seconds == pytest.approx(startup.BASE_IMAGE_MIB[device] * 2**20 / startup.PULL_BYTES_PER_SECOND)
        assert layer.seconds == pytest.approx(startup.HOROVOD_LAYER_MIB * 2**20 / startup.PULL_BYTES_PER_SECOND)
        at_start = startup.training_job(device, startup.BUILD_AT_START)
        assert at_start.parts[0] == base
        assert at_start.parts[1].seconds == startup.HOROVOD_BUILD_SECONDS
        assert all(p.source for p in (*own.parts, *at_start.parts))
        assert own.describe()[0].startswith(f"start-up of a SageMaker training job (own image, {device}): ")


def test_our_image_starts_sooner_than_building_horovod_at_start():
    # The layer is tens of MB; the build is minutes: the evidence for infra/training-image.
    for device in ("cpu", "gpu"):
        own = startup.training_job(device).seconds
        at_start = startup.training_job(device, startup.BUILD_AT_START).seconds
        assert own < at_start
        assert startup.training_job(device).parts[1].seconds < 0.05 * own


def test_the_gpu_image_is_the_larger_pull():
    assert startup.seconds_for(gpus_per_host=8) > startup.seconds_for(gpus_per_host=0)
    assert startup.seconds_for(0) == startup.training_job("cpu").seconds
    assert startup.seconds_for(1) == startup.training_job("gpu").seconds


@pytest.mark.parametrize(("device", "choice"), [("tpu", startup.OWN_IMAGE), ("cpu", "pip at start")])
def test_unknown_device_or_choice_is_refused(device, choice):
    with pytest.raises(ValueError, match="one of"):
        startup.training_job(device, choice)


def test_advise_adds_the_start_up_to_every_cloud_run_and_nothing_locally():
    model = StepModel(per_sample=1e-4, fixed=1e-3, parallelism=1.0, parameters=100_000)
    workload = Workload(batch=64, samples_per_epoch=64_000, epochs=2)
    cloud = PL.cloud_platform("ml.c5.2xlarge")
    local = PL.local_platform(2)
    assert job_startup_seconds(local) == 0.0
    assert job_startup_seconds(cloud) == startup.seconds_for(0)

    book = PriceBook({"ml.c5.2xlarge": 0.4})
    rows, notes = predict(model, cloud, workload, 4, 1, book, "us-east-1", Options(), 0.5)
    for row in rows:
        trained = row.epoch_seconds * workload.epochs
        assert row.run_hours * 3600 == pytest.approx(trained + startup.seconds_for(0))
        # Billed on every host: the start-up is in the cost too.
        assert row.cost_usd == pytest.approx(row.layout.hosts * row.run_hours * 0.4)
    assert any("of start-up on every host" in n and "pipeline/costs/startup.py" in n for n in notes)
    local_rows, local_notes = predict(model, local, workload, 2, 2, book, "us-east-1", Options(), 0.5)
    assert all(r.run_hours * 3600 == pytest.approx(r.epoch_seconds * workload.epochs) for r in local_rows)
    assert not any("start-up" in n for n in local_notes)
