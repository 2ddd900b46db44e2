"""Where the advisor's candidate runs would execute: this machine (the local runner puts every
simulated host on it) or a SageMaker instance type (``pipeline/costs/hardware.py``)."""

from __future__ import annotations

import json
from pathlib import Path

from pipeline.costs import hardware
from pipeline.costs.advisor.model import Link, Platform

# Assumed where nothing was measured; printed with the model, marked "assumed".
SHARED_MEMORY = Link(10.0, 5e-6, "assumed: shared-memory copy between ranks of one host")
NETWORK_LATENCY_S = 30e-6  # assumed: TCP round trip inside one EC2 placement group
# Under the workdir: {"intra": {link}, "inter": {link}, "per_tensor": {"seconds", "source"}};
# a link: gbytes_per_s, latency_s, source and optionally in_step_s, in_step_source.
PROBE_FILE = "advisor-probe.json"


def local_platform(cores: int, probe: dict | None = None) -> Platform:
    """This machine: every rank of every simulated host shares its cores."""
    def link(kind: str, fallback: Link) -> Link:
        if probe and kind in probe:
            p = probe[kind]
            return Link(p["gbytes_per_s"], p["latency_s"], p.get("source", "allreduce probe"),
                        float(p.get("in_step_s", 0.0)), p.get("in_step_source", "not measured"))
        return fallback

    per_tensor = (probe or {}).get("per_tensor") or {}
    measured = {"per_tensor_s": float(per_tensor["seconds"]),
                "per_tensor_source": per_tensor.get("source", "allreduce probe")} if "seconds" in per_tensor else {}
    return Platform(
        name="local", cores_per_host=cores, gpus_per_host=0, shared_machine=True, **measured,
        intra=link("intra", SHARED_MEMORY),
        # Simulated hosts share memory too (one MPI node, pipeline/local/hosts/shared_memory.py);
        # loopback TCP only where the runner falls back to an MPI node per host.
        inter=link("inter", Link(SHARED_MEMORY.gbytes_per_s, SHARED_MEMORY.latency_s,
                                 "assumed: shared-memory copy between simulated hosts on one MPI node")),
    )


def load_probe(workdir: Path) -> dict | None:
    path = Path(workdir) / PROBE_FILE
    return json.loads(path.read_text()) if path.exists() else None


def cloud_platform(instance_type: str) -> Platform | None:
    spec = hardware.instance(instance_type)
    if spec is None:
        return None
    intra = (Link(spec.intra_node_gbytes_per_s, 10e-6, hardware.NVIDIA_SOURCE)
             if spec.gpu else SHARED_MEMORY)
    inter = Link(spec.network_gbps / 8.0, NETWORK_LATENCY_S,
                 f"{hardware.EC2_SOURCE}: {spec.network_gbps:g} Gbps; latency assumed")
    return Platform(name=instance_type, cores_per_host=spec.vcpus / 2,  # vCPU = hyperthread
                    gpus_per_host=spec.gpus, intra=intra, inter=inter)


def ranks_per_host(instance_type: str, platform: Platform) -> int:
    """Horovod's usual layout: one rank per GPU; one per host on CPU types."""
    return platform.gpus_per_host or 1


def published_prediction(machine: dict, parameters: int, bytes_per_parameter: int = 4) -> float:
    """The advisor's samples/s for ``machine["gpus"]`` GPUs of one host, calibrated on the
    1-GPU figure only (the whole step per sample, as from one batch size) and given the
    interconnect (``link_gbytes_per_s`` per direction, ``link_latency_s``): the check of the
    model against a published scaling table (tests/pipeline/costs/advisor/published_scaling.json).
    No overlap of the allreduce with the backward pass and no wait term: nothing published
    measures them, so the prediction is the model's upper bound of the loss."""
    from pipeline.costs.advisor.model import Layout, StepModel

    batch = int(machine["batch_per_gpu"])
    link = Link(float(machine["link_gbytes_per_s"]), float(machine["link_latency_s"]), machine["link_source"])
    platform = Platform(name=machine["name"], cores_per_host=1.0, gpus_per_host=int(machine["gpus"]),
                        intra=link, inter=link)
    model = StepModel(per_sample=1.0 / float(machine["images_per_s_1"]), fixed=0.0, parallelism=1.0,
                      parameters=parameters, fp16_allreduce=bytes_per_parameter == 2)
    return model.throughput(batch, Layout(1, int(machine["gpus"])), platform)
