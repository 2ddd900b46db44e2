"""GPUs per SageMaker instance type: the default ``ProcessesPerHost`` (one Horovod rank per GPU).

Only types we know are listed; an unknown type needs an explicit ``ProcessesPerHost``.
"""

from __future__ import annotations

# GPUs per instance (0 = CPU only). Sources: the SageMaker pricing / instance-type pages.
_GPUS = {
    # GPU training instances
    "ml.p3.2xlarge": 1, "ml.p3.8xlarge": 4, "ml.p3.16xlarge": 8, "ml.p3dn.24xlarge": 8,
    "ml.p4d.24xlarge": 8, "ml.p4de.24xlarge": 8, "ml.p5.48xlarge": 8, "ml.p5e.48xlarge": 8,
    "ml.p5en.48xlarge": 8,
    "ml.g4dn.xlarge": 1, "ml.g4dn.2xlarge": 1, "ml.g4dn.4xlarge": 1, "ml.g4dn.8xlarge": 1,
    "ml.g4dn.16xlarge": 1, "ml.g4dn.12xlarge": 4,
    "ml.g5.xlarge": 1, "ml.g5.2xlarge": 1, "ml.g5.4xlarge": 1, "ml.g5.8xlarge": 1,
    "ml.g5.16xlarge": 1, "ml.g5.12xlarge": 4, "ml.g5.24xlarge": 4, "ml.g5.48xlarge": 8,
    "ml.g6.xlarge": 1, "ml.g6.2xlarge": 1, "ml.g6.4xlarge": 1, "ml.g6.8xlarge": 1,
    "ml.g6.16xlarge": 1, "ml.g6.12xlarge": 4, "ml.g6.24xlarge": 4, "ml.g6.48xlarge": 8,
}
_CPU_FAMILIES = ("ml.m4.", "ml.m5.", "ml.m5d.", "ml.m6i.", "ml.m7i.", "ml.c4.", "ml.c5.",
                 "ml.c5n.", "ml.c6i.", "ml.c7i.", "ml.r5.", "ml.r6i.", "ml.t3.")
LOCAL_INSTANCE_TYPES = ("local", "local_gpu")


def gpus_per_instance(instance_type: str) -> int | None:
    """GPUs of ``instance_type``; 0 for known CPU types; None when we do not know the type."""
    if instance_type in _GPUS:
        return _GPUS[instance_type]
    if instance_type.startswith(_CPU_FAMILIES) or instance_type == "local":
        return 0
    return None


def is_gpu(instance_type: str) -> bool:
    return bool(gpus_per_instance(instance_type)) or instance_type == "local_gpu"
