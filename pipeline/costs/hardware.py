"""What SageMaker instance types are made of, and where AWS regions are: the inputs of the
energy estimate and of the scaling advisor's network model, each table with its source.

Figures AWS and NVIDIA publish (not measured here):

- vCPUs, memory, CPU model, GPUs and network bandwidth: the EC2 instance type pages
  (https://aws.amazon.com/ec2/instance-types/ and the per-family pages; an ``ml.`` type is
  the EC2 type of the same name). "Up to N Gbps" types are given their baseline-free peak N.
- intra-node GPU bandwidth: NVLink / NVSwitch figures of the NVIDIA V100, A100 and H100
  datasheets (per GPU, one direction); PCIe Gen3 x16 (~12 GB/s usable) for the PCIe-only
  types (g4dn, g5, g6), from the PCI-SIG rate less protocol overhead.
- GPU board power: NVIDIA datasheets (V100 SXM2 300 W, T4 70 W, A100 SXM4 400 W, H100 SXM5
  700 W, L4 72 W); A10G (AWS-only part): its 300 W power limit as nvidia-smi reports it.
"""

from __future__ import annotations

from dataclasses import dataclass

EC2_SOURCE = "https://aws.amazon.com/ec2/instance-types/ (vCPUs, memory, CPU, GPUs, network)"
NVIDIA_SOURCE = "NVIDIA datasheets (board power, NVLink/NVSwitch bandwidth per GPU)"

# GPU model -> (board power W, intra-node bandwidth GB/s per GPU one direction)
GPUS = {
    "V100": (300.0, 150.0),  # NVLink 2: 300 GB/s total bidirectional per GPU
    "T4": (70.0, 12.0),  # PCIe Gen3 x16
    "A10G": (300.0, 12.0),  # PCIe Gen4 x16 between GPUs through the host: ~PCIe3 usable
    "A100": (400.0, 300.0),  # NVSwitch, NVLink 3: 600 GB/s total
    "H100": (700.0, 450.0),  # NVSwitch, NVLink 4: 900 GB/s total
    "L4": (72.0, 12.0),
}
# CPU model -> threads per package (for the share of a package's TDP a vCPU is)
CPU_THREADS = {
    "Intel Xeon Platinum 8124M": 36, "Intel Xeon Platinum 8175M": 48,
    "Intel Xeon Platinum 8259CL": 48, "Intel Xeon Platinum 8275CL": 48,
    "Intel Xeon Platinum 8375C": 64, "Intel Xeon E5-2686 v4": 36,
    "AMD EPYC 7R13": 96, "AMD EPYC 7R32": 96,
}


@dataclass(frozen=True)
class Instance:
    name: str
    vcpus: int
    memory_gib: float
    cpu: str
    gpus: int = 0
    gpu: str | None = None
    network_gbps: float = 10.0  # between instances

    @property
    def intra_node_gbytes_per_s(self) -> float | None:
        """Bandwidth between two ranks of one instance (GPU interconnect); None on CPU types
        (shared memory, far faster than the network: the advisor treats it as free of
        bandwidth limits and charges only latency)."""
        return GPUS[self.gpu][1] if self.gpu else None


def _types(*rows: tuple) -> dict[str, Instance]:
    return {row[0]: Instance(*row) for row in rows}


INSTANCES = _types(
    ("ml.m5.xlarge", 4, 16, "Intel Xeon Platinum 8175M", 0, None, 10),
    ("ml.m5.2xlarge", 8, 32, "Intel Xeon Platinum 8175M", 0, None, 10),
    ("ml.m5.4xlarge", 16, 64, "Intel Xeon Platinum 8175M", 0, None, 10),
    ("ml.m5.12xlarge", 48, 192, "Intel Xeon Platinum 8175M", 0, None, 10),
    ("ml.m5.24xlarge", 96, 384, "Intel Xeon Platinum 8175M", 0, None, 25),
    ("ml.c5.xlarge", 4, 8, "Intel Xeon Platinum 8124M", 0, None, 10),
    ("ml.c5.2xlarge", 8, 16, "Intel Xeon Platinum 8124M", 0, None, 10),
    ("ml.c5.4xlarge", 16, 32, "Intel Xeon Platinum 8124M", 0, None, 10),
    ("ml.c5.9xlarge", 36, 72, "Intel Xeon Platinum 8124M", 0, None, 10),
    ("ml.c5.18xlarge", 72, 144, "Intel Xeon Platinum 8124M", 0, None, 25),
    ("ml.p3.2xlarge", 8, 61, "Intel Xeon E5-2686 v4", 1, "V100", 10),
    ("ml.p3.8xlarge", 32, 244, "Intel Xeon E5-2686 v4", 4, "V100", 10),
    ("ml.p3.16xlarge", 64, 488, "Intel Xeon E5-2686 v4", 8, "V100", 25),
    ("ml.p3dn.24xlarge", 96, 768, "Intel Xeon Platinum 8175M", 8, "V100", 100),
    ("ml.g4dn.xlarge", 4, 16, "Intel Xeon Platinum 8259CL", 1, "T4", 25),
    ("ml.g4dn.2xlarge", 8, 32, "Intel Xeon Platinum 8259CL", 1, "T4", 25),
    ("ml.g4dn.12xlarge", 48, 192, "Intel Xeon Platinum 8259CL", 4, "T4", 50),
    ("ml.g5.xlarge", 4, 16, "AMD EPYC 7R32", 1, "A10G", 10),
    ("ml.g5.2xlarge", 8, 32, "AMD EPYC 7R32", 1, "A10G", 10),
    ("ml.g5.12xlarge", 48, 192, "AMD EPYC 7R32", 4, "A10G", 40),
    ("ml.g5.48xlarge", 192, 768, "AMD EPYC 7R32", 8, "A10G", 100),
    ("ml.p4d.24xlarge", 96, 1152, "Intel Xeon Platinum 8275CL", 8, "A100", 400),
    ("ml.p5.48xlarge", 192, 2048, "AMD EPYC 7R13", 8, "H100", 3200),
)

# AWS region -> (country ISO code, US state or None): https://aws.amazon.com/about-aws/global-infrastructure/regions_az/
REGIONS_SOURCE = "https://aws.amazon.com/about-aws/global-infrastructure/regions_az/ (region locations)"
REGIONS = {
    "us-east-1": ("USA", "virginia"), "us-east-2": ("USA", "ohio"),
    "us-west-1": ("USA", "california"), "us-west-2": ("USA", "oregon"),
    "ca-central-1": ("CAN", None), "sa-east-1": ("BRA", None),
    "eu-west-1": ("IRL", None), "eu-west-2": ("GBR", None), "eu-west-3": ("FRA", None),
    "eu-central-1": ("DEU", None), "eu-central-2": ("CHE", None), "eu-north-1": ("SWE", None),
    "eu-south-1": ("ITA", None), "eu-south-2": ("ESP", None),
    "ap-northeast-1": ("JPN", None), "ap-northeast-2": ("KOR", None),
    "ap-southeast-1": ("SGP", None), "ap-southeast-2": ("AUS", None),
    "ap-southeast-3": ("IDN", None), "ap-south-1": ("IND", None), "ap-east-1": ("HKG", None),
    "af-south-1": ("ZAF", None), "me-central-1": ("ARE", None), "me-south-1": ("BHR", None),
    "il-central-1": ("ISR", None),
}
# Power usage effectiveness of AWS data centres: AWS' published global figure.
AWS_PUE = 1.15
AWS_PUE_SOURCE = ("AWS 2023 Amazon Sustainability Report / https://sustainability.aboutamazon.com/"
                  "products-services/aws-cloud (global data-centre PUE 1.15, 2023)")


def instance(name: str) -> Instance | None:
    return INSTANCES.get(name)
