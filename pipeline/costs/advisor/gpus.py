"""What a GPU instance will do with a workload before anyone pays for one: two ceilings on
images per second per GPU, the lower of which binds.

- **compute**: training FLOPs per image (forward + backward, counted the way
  ``benchmarks/training/flops.py`` counts them) over the GPU's peak FLOP/s at the run's
  precision, times a utilisation: ``u(GPU generation, precision) x e(architecture)``.
  ``u`` is calibrated on NVIDIA's published TensorFlow ResNet-50 rows (``e`` = 1 by
  definition); ``e`` of another architecture on its A100 mixed-precision row. Every other
  published row is held out and predicted (``published_check``): the error per row, worst
  and median, is what ``benchmarks/advisor/published_gpu.py`` reports.
- **input**: the records' decode-and-augment images/s on one core of this machine, measured
  on the user's own records (``training_entry/input/rate.py``), times the physical cores the
  instance gives each GPU (vCPUs / 2 / GPUs), assuming a core there as fast as one here.

Horovod's allreduce over the instance's NVLink/network and the per-job start-up are the
step model's (``model.py``, ``recommend.py``), applied to the images/s this module predicts.

Sources (not measured here): peaks and bandwidths from NVIDIA's datasheets (V100 SXM2, T4,
A10 for AWS's A10G, A100 SXM4, H100 SXM5; dense, no sparsity); the throughput rows from
NVIDIA/DeepLearningExamples at 729963dd47 (paths in ``PUBLISHED``).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from pipeline.costs import hardware

FP32, AMP = "fp32", "amp"  # fp32: TF32 on Ampere and later (TensorFlow's default there)
GPU_SOURCE = ("NVIDIA datasheets (dense peaks): V100 SXM2, T4, A10 (AWS's A10G: the A10 figures, "
              "assumed), A100 SXM4, H100 SXM5")

# GPU -> (generation whose utilisation it takes, peak FLOP/s at FP32-or-TF32, at FP16/BF16 tensor)
PEAKS = {
    "V100": ("volta", 15.7e12, 125e12),  # FP32 (no TF32 on Volta), FP16 tensor
    "T4": ("volta", 8.1e12, 65e12),  # Turing: Volta's tensor cores' kind; no TF32
    "A10G": ("ampere", 31.2e12, 125e12),  # TF32 dense 62.5 where used: see tf32_peak
    "A100": ("ampere", 156e12, 312e12),  # TF32 dense, FP16/BF16 dense
    "H100": ("ampere", 494.7e12, 989.4e12),  # Hopper: no published TF row; A100's utilisation assumed
}
TF32_PEAKS = {"A10G": 62.5e12}
PUBLISHED_GPUS = ("V100", "A100")
ASSUMED = {"volta": "the V100 rows' utilisation assumed",
           "ampere": "the A100 rows' utilisation assumed (on an H100 it predicted issue 39's PyTorch "
                     "ResNet-50 bf16 figure 89% high: an upper bound there)"}  # where the TF32 tensor peak differs from the FP32 column above

# Training FLOPs per image (forward + 2 x forward: every layer trains) at 224 px, counted by
# benchmarks/training/flops.py's ``count`` on the keras.applications network with its 1000-class
# top (weights=None); convolutional FLOPs scale with the pixels, so at S px: x (S/224)^2.
FLOPS_224 = {
    "resnet50": 23.20e9,
    "efficientnet_b0": 2.367e9,
    "mobilenet_v2": 1.806e9,
    # training_entry/model/efficientnet_lite0.py's build(224, include_top=True) (not in
    # keras.applications; its (x - 127) / 128 layer, 0.3 MFLOPs, left out): forward 0.771e9,
    # i.e. 0.385 G multiply-adds, the 0.385-0.4 "GFLOPs" published for Lite0; 4.652M parameters.
    "efficientnet_lite0": 2.312e9,
}
FLOPS_SOURCE = "benchmarks/training/flops.py count() of the keras.applications network at 224 px"
# DeepLearningExamples' EfficientNet-B4 runs at 380 px: counted there, not scaled.
FLOPS_B4_380 = 26.76e9

# Architecture -> the published architecture whose efficiency it takes, and why.
FAMILY = {
    "resnet50": ("resnet50", "published rows"),
    "efficientnet_b0": ("efficientnet_b0", "published rows"),
    "efficientnet_lite0": ("efficientnet_b0", "assumed EfficientNet-B0's: the same MBConv blocks without "
                                              "squeeze-and-excitation, no published TensorFlow row"),
    "mobilenet_v2": ("efficientnet_b0", "assumed EfficientNet-B0's: depthwise-separable convolutions, "
                                        "no published TensorFlow row"),
    "small_cnn": ("resnet50", "assumed ResNet-50's: dense convolutions; a model this small does not "
                              "fill a GPU, so this is an upper bound"),
}


@dataclass(frozen=True)
class Row:
    """One published single-GPU training row: images/s of ``model`` on ``gpu`` at ``precision``."""

    model: str  # "resnet50" (v1.5), "efficientnet_b0", "efficientnet_b4"
    gpu: str
    precision: str
    images_per_s: float
    source: str

    @property
    def flops(self) -> float:
        return FLOPS_B4_380 if self.model == "efficientnet_b4" else FLOPS_224[self.model]


_RN50 = "TensorFlow/Classification/ConvNets/resnet50v1.5/README.md (20.06 NGC, XLA, 1 GPU)"
_EFF = "TensorFlow2/Classification/ConvNets/efficientnet_v1/README.md (21.09 NGC, 1 GPU)"
# NVIDIA/DeepLearningExamples @729963dd47; DGX-1 V100 16/32 GB, DGX A100 40 GB (ResNet) / 80 GB.
PUBLISHED = (
    Row("resnet50", "V100", FP32, 412, _RN50), Row("resnet50", "V100", AMP, 1270, _RN50),
    Row("resnet50", "A100", FP32, 909, _RN50), Row("resnet50", "A100", AMP, 2375, _RN50),
    Row("efficientnet_b0", "V100", FP32, 752, _EFF), Row("efficientnet_b0", "V100", AMP, 868, _EFF),
    Row("efficientnet_b0", "A100", FP32, 1209, _EFF), Row("efficientnet_b0", "A100", AMP, 3454, _EFF),
    Row("efficientnet_b4", "V100", FP32, 79, _EFF), Row("efficientnet_b4", "V100", AMP, 211, _EFF),
    Row("efficientnet_b4", "A100", FP32, 165, _EFF), Row("efficientnet_b4", "A100", AMP, 470, _EFF),
)
REFERENCE = ("A100", AMP)  # where an architecture's efficiency is calibrated


def peak(gpu: str, precision: str) -> float:
    _, fp32, half = PEAKS[gpu]
    return half if precision == AMP else TF32_PEAKS.get(gpu, fp32)


def is_calibration(row: Row) -> bool:
    """ResNet-50 rows calibrate the utilisation; each architecture's A100 AMP row its
    efficiency; every other row is held out."""
    return row.model == "resnet50" or (row.gpu, row.precision) == REFERENCE


@dataclass(frozen=True)
class Calibration:
    utilisation: dict[tuple[str, str], float]  # (generation, precision) -> FLOP/s / peak, ResNet-50
    efficiency: dict[str, float]  # model -> its utilisation / ResNet-50's at the reference

    def images_per_s(self, flops: float, gpu: str, precision: str, model: str) -> float:
        generation = PEAKS[gpu][0]
        return self.utilisation[(generation, precision)] * self.efficiency[model] * peak(gpu, precision) / flops


def calibrate(rows=PUBLISHED) -> Calibration:
    utilisation = {(PEAKS[r.gpu][0], r.precision): r.images_per_s * r.flops / peak(r.gpu, r.precision)
                   for r in rows if r.model == "resnet50"}
    efficiency = {"resnet50": 1.0}
    for r in rows:
        if r.model != "resnet50" and (r.gpu, r.precision) == REFERENCE:
            base = utilisation[(PEAKS[r.gpu][0], r.precision)]
            efficiency[r.model] = r.images_per_s * r.flops / peak(r.gpu, r.precision) / base
    return Calibration(utilisation, efficiency)


def published_check(rows=PUBLISHED) -> list[tuple[Row, float, float]]:
    """Each held-out row: (row, predicted images/s, relative error) from the calibration rows."""
    calibration = calibrate([r for r in rows if is_calibration(r)])
    out = []
    for row in rows:
        if is_calibration(row):
            continue
        predicted = calibration.images_per_s(row.flops, row.gpu, row.precision, row.model)
        out.append((row, predicted, predicted / row.images_per_s - 1))
    return out


def check_summary(checked) -> tuple[float, float]:
    """(worst |error|, median |error|) of ``published_check``'s rows."""
    errors = [abs(e) for _, _, e in checked]
    return max(errors), statistics.median(errors)


# --- A user's workload on a SageMaker GPU type ----------------------------------------------
@dataclass(frozen=True)
class Ceilings:
    instance_type: str
    gpus: int
    cores_per_gpu: float
    compute: float | None  # images/s per GPU
    compute_source: str
    input: float | None  # images/s per GPU
    input_source: str
    unit: str = "images"  # a table's: rows

    @property
    def per_gpu(self) -> float | None:
        known = [c for c in (self.compute, self.input) if c is not None]
        return min(known) if known else None

    @property
    def binding(self) -> str | None:
        if self.compute is None or self.input is None:
            return None
        return "input" if self.input < self.compute else "compute"

    def fix(self, resized_records: bool = False) -> str:
        """Which ceiling binds and what would lift it, in words (``resized_records``: the
        records already hold the images at the training size; a table's never need it)."""
        unit = f"{self.unit}/s per GPU"
        if self.binding == "input":
            short = self.compute / self.input
            return (f"the input binds ({self.input:,.0f} < {self.compute:,.0f} {unit}): the GPU "
                    f"waits on the CPUs. Lift it with a type giving more cores per GPU ({self.cores_per_gpu:g} "
                    f"here; {short:.1f}x as many would feed it) or fewer GPUs per instance"
                    + ("" if resized_records or self.unit != "images" else
                       ", or records at the training size (-p ImageRecords=resized: decoding costs per stored pixel)"))
        if self.binding == "compute":
            spare = self.input / self.compute
            return (f"the GPU's compute binds ({self.compute:,.0f} < {self.input:,.0f} {unit}; the "
                    f"cores could feed {spare:.1f}x this): a faster GPU lifts it, or mixed precision "
                    "(--mixed-precision mixed_float16) where the run trained in fp32")
        return "one ceiling is unknown: the other bounds it from above"


def compute_ceiling(architecture: str, image_size: int | None, gpu: str, precision: str,
                    calibration: Calibration | None = None, parameters: int | None = None) -> tuple[float | None, str]:
    """Images/s one ``gpu`` trains ``architecture`` at ``image_size`` px (a table's MLP: rows/s
    from its ``parameters``), and its source."""
    calibration = calibration or calibrate([r for r in PUBLISHED if is_calibration(r)])
    if architecture == DENSE:
        return dense_ceiling(parameters, gpu, precision, calibration)
    if architecture not in FAMILY or not image_size:
        return None, (f"no FLOPs count for {architecture}: a model of your own is not rebuilt from its run, and "
                      f"the counts kept are of the architectures trainpipe builds ({', '.join([*FAMILY, DENSE])})"
                      if architecture not in FAMILY else "the run's image size is not recorded")
    family, why = FAMILY[architecture]
    flops = (SMALL_CNN_FLOPS_32 * (image_size / 32) ** 2 if architecture == "small_cnn"
             else FLOPS_224[architecture] * (image_size / 224) ** 2)
    rate = calibration.images_per_s(flops, gpu, precision, family)
    util = calibration.utilisation[(PEAKS[gpu][0], precision)] * calibration.efficiency[family]
    counted = ("benchmarks/training/flops.py count() of small_cnn at 32 px" if architecture == "small_cnn"
               else FLOPS_SOURCE.replace("the keras.applications network", "training_entry/model/efficientnet_lite0.py")
               if architecture == "efficientnet_lite0" else FLOPS_SOURCE)
    own = "" if gpu in PUBLISHED_GPUS else f"; {gpu} has no published TF row: {ASSUMED[PEAKS[gpu][0]]}"
    return rate, (f"{flops / 1e9:.3g} GFLOP/image ({counted}, scaled to {image_size} px) over {gpu}'s "
                  f"{peak(gpu, precision) / 1e12:g} TFLOP/s {precision} at {util:.1%} utilisation "
                  f"(calibrated on DeepLearningExamples' TensorFlow rows; efficiency {why}{own})")


DENSE = "mlp"  # the table model: dense layers only


def dense_ceiling(parameters: int | None, gpu: str, precision: str,
                  calibration: Calibration) -> tuple[float | None, str]:
    """Rows/s one ``gpu`` trains a dense network of ``parameters`` trainable weights: 6 FLOPs
    per weight per row (flops.py's count of a dense network: 2N forward, 4N backward) over the
    GPU's peak at ResNet-50's utilisation. An upper bound: a table's MLP is far too small to
    fill a GPU, whose per-step kernel launches then bind first (not modelled)."""
    if not parameters:
        return None, "the run's parameter count is not recorded"
    flops = 6 * parameters
    util = calibration.utilisation[(PEAKS[gpu][0], precision)]
    return util * peak(gpu, precision) / flops, (
        f"{flops / 1e6:.3g} MFLOP/row (6 x {parameters:,} trainable parameters, flops.py's count of a dense "
        f"network) over {gpu}'s {peak(gpu, precision) / 1e12:g} TFLOP/s {precision} at ResNet-50's {util:.1%} "
        "utilisation: an upper bound, a model this small does not fill a GPU (per-step launches bind first)")


# small_cnn (training_entry/model/architectures.py) at 32 px, 10 classes: `python -m
# benchmarks.training.flops --architecture small_cnn --image-size 32` (training FLOPs per sample).
SMALL_CNN_FLOPS_32 = 62.30e6


def ceilings(instance_type: str, architecture: str, image_size: int | None, precision: str,
             input_per_core: float | None, input_source: str, parameters: int | None = None,
             unit: str = "images") -> Ceilings | None:
    """Both ceilings for one GPU of ``instance_type``; None for a type without GPUs or figures.
    ``unit``: what a sample is ("rows" for a table)."""
    spec = hardware.instance(instance_type)
    if spec is None or not spec.gpus or spec.gpu not in PEAKS:
        return None
    cores_per_gpu = spec.vcpus / 2 / spec.gpus  # vCPU = hyperthread
    compute, compute_source = compute_ceiling(architecture, image_size, spec.gpu, precision, parameters=parameters)
    feed = input_per_core * cores_per_gpu if input_per_core else None
    return Ceilings(instance_type, spec.gpus, cores_per_gpu, compute, compute_source, feed,
                    (f"{input_per_core:.0f} {unit}/s per core ({input_source}) x {cores_per_gpu:g} cores per GPU"
                     if input_per_core else input_source), unit)
