"""ZeRO (Rajbhandari et al. 2020) through DeepSpeed: data parallel, with the model states that
DDP replicates on every rank partitioned across the ranks instead. Stage 1 partitions the
optimizer state, stage 2 the gradients too, stage 3 the parameters too (gathered layer by layer
for each forward and backward, then freed). In fp32 with Adam, DDP holds 4Ψ of parameters, 4Ψ
of gradients and 8Ψ of moments on every rank; ZeRO-3 holds 16Ψ/N, the paper's (2 + 2 + K)Ψ/N.
``state_bytes`` measures what a rank holds from the tensors, not from that formula.

Lines that exist for ZeRO carry ``# ZeRO:``. DeepSpeed is imported here alone (``strategies.get``
imports this module only when a zero strategy is chosen). On a machine without CUDA it picks its
CPU accelerator, talks over the process group torchrun's gloo started, and compiles its CPU
communication op with ninja at first use (cached in ~/.cache/torch_extensions)."""

from __future__ import annotations

import copy
import logging

import torch
import torch.distributed as dist

from training_torch import plan
from training_torch.strategies import Strategy

NAMES = ("zero1", "zero2", "zero3")
# ZeRO: where DeepSpeed's optimizer keeps the gradients and fp32 master weights of this rank's
# partition (stage 1/2 in DeepSpeedZeroOptimizer, stage 3 in DeepSpeedZeroOptimizer_Stage3).
_GRADIENT_ATTRS = ("averaged_gradients", "grad_partitions_flat_buffer", "grads_in_partition")
_MASTER_ATTRS = ("single_partition_of_fp32_groups", "fp32_partitioned_groups_flat")


def config(stage: int) -> dict:
    """DeepSpeed's config for ``stage`` with the client's Adam and fp32 (the numbers DDP uses)."""
    return {
        # ZeRO: DeepSpeed checks micro × accumulation × world = train batch; train.py feeds the
        # batches itself (no DeepSpeed data loader), so only accumulation = 1 matters: every
        # engine.step() is an optimizer step, as in DDP.
        "train_micro_batch_size_per_gpu": 1,
        "gradient_accumulation_steps": 1,
        "zero_optimization": {
            "stage": stage,
            # ZeRO: DeepSpeed keeps parameters under 1e5 elements whole on every rank by default
            # (gathering small ones costs more latency than it saves); every layer of the
            # digits' networks is under that, so 0 makes stage 3 partition every parameter.
            "stage3_param_persistence_threshold": 0,
            # ZeRO: by default stage 3 swaps torch.nn.functional.linear, process-wide, for its own
            # autograd Function (it keeps only the partition for backward); TorchScript cannot
            # trace that into the exported model, and the digits' layers gain nothing from it.
            "memory_efficient_linear": False,
        },
        # No gradient clipping, no loss scaling: the same update as DDP's Adam.
        "gradient_clipping": 0.0,
        "steps_per_print": 2**31 - 1,
        "wall_clock_breakdown": False,
    }


def _tensors(value):
    """Every tensor in ``value``, a tensor or lists/tuples/dicts of them (DeepSpeed's buffers)."""
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _tensors(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _tensors(item)


def held_bytes(tensors) -> int:
    """Bytes of the distinct storages behind ``tensors``: a view into one of DeepSpeed's flat
    buffers counts the buffer once, however many parameters point into it."""
    storages = {}
    for t in tensors:
        if t is not None and t.numel() > 0:
            storage = t.untyped_storage()
            storages[storage.data_ptr()] = storage.nbytes()
    return sum(storages.values())


def _share_fp32_master(optimizer) -> None:
    """ZeRO: in fp32 the master weights are the parameters' partition itself. DeepSpeed 0.19.8's
    stage 3 means to share it (stage3.py, _create_fp32_partitions: "we don't need another copy")
    but compares a torch.device with the device's name as a string (torch.device("cpu") == "cpu"
    is False in torch 2.13), so it clones the partition: one more 4Ψ/N per rank, (4+4+4+8)/(16N) = 0.625 of DDP at N = 2 where
    ZeRO-3 promises 1/N. Pointing the master at the partition's storage is what its own branch
    does; the Adam state keyed by the master tensor is kept, the clone freed."""
    low = getattr(optimizer, "fp16_partitioned_groups_flat", [])
    for master, partition in zip(optimizer.fp32_partitioned_groups_flat, low, strict=True):
        if master.dtype == partition.dtype and master.device == partition.device and master.numel():
            master.data = partition.data


class Zero(Strategy):
    def __init__(self, stage: int):
        if stage not in (1, 2, 3):
            raise ValueError(f"ZeRO has stages 1, 2 and 3, not {stage}")
        self.stage = stage
        self.name = NAMES[stage - 1]
        self._whole = None  # stage 3: a hook-free copy of the model that module() fills

    def configure(self, args, local_size: int) -> None:
        self._refuse_one_rank()  # before any data is read, where train.py calls configure

    def _refuse_one_rank(self) -> None:
        plan.check_zero(self.name, dist.get_world_size())  # refused before any step

    def wrap(self, model, make_optimizer):
        self._refuse_one_rank()
        import deepspeed

        logging.getLogger("DeepSpeed").setLevel(logging.WARNING)  # its INFO lines would crowd the job log
        if self.stage == 3:
            # ZeRO: the network without its weights, taken before DeepSpeed partitions them and
            # hooks the model, so module() can put the gathered weights into it.
            self._whole = copy.deepcopy(model)
            self._free_whole()
        # ZeRO: DeepSpeed calls make_optimizer on the parameters (stage 3: its partitions) and
        # wraps it; param_groups stays the client Adam's, so train.py's warm-up still sets lr.
        engine, optimizer, _, _ = deepspeed.initialize(
            model=model, model_parameters=model.parameters(), optimizer=make_optimizer,
            config=config(self.stage), dist_init_required=False)
        if self.stage == 3:
            _share_fp32_master(optimizer)
        return engine, optimizer

    def step(self, model, optimizer, x, y, loss_fn):
        self._free_whole()  # ZeRO: the evaluation copy is not held while training
        logits = model(x)  # ZeRO: stage 3 gathers each layer's parameters for its forward
        loss = loss_fn(logits, y)
        model.backward(loss)  # ZeRO: gradients reduce-scattered to the rank that owns them
        model.step()  # ZeRO: each rank updates its partition; stages 1-2 all-gather the weights
        return loss.detach(), (logits.argmax(1) == y).sum()

    def module(self, model):
        """The whole model. Stage 3 gathers every parameter from every rank, so train.py calls
        this on every rank (a collective); the copy is freed by the next ``step``."""
        if self.stage < 3:
            return model.module
        import deepspeed

        params = list(model.module.parameters())
        with deepspeed.zero.GatheredParameters(params):  # ZeRO: all-gather the partitions
            for whole, param in zip(self._whole.parameters(), params, strict=True):
                whole.data = param.data.detach().clone()
        for whole, buffer in zip(self._whole.buffers(), model.module.buffers(), strict=True):
            whole.data = buffer.data.detach().clone()  # buffers are not partitioned
        # ZeRO: the engine's eval() sets its module's flag, not its own: dropout off as train.py evaluates.
        return self._whole.train(model.module.training)

    def _free_whole(self):
        if self._whole is not None:
            for param in self._whole.parameters():
                param.data = torch.empty(0, dtype=param.dtype, device=param.device)

    def state_bytes(self, model, optimizer) -> int:
        """ZeRO: bytes of the parameters, gradients and optimizer state this rank holds, read
        from the tensors: the module's parameters (stage 3: their ``ds_tensor`` partitions, the
        gathered ``data`` being empty between layers), DeepSpeed's gradient buffers and fp32
        master partitions (in fp32 on one device, stage 3's master is the parameters' own
        partition, counted once), and the client Adam's state (moments of this partition).
        Stages 1-2 keep every parameter and a cloned fp32 master of their partition (DeepSpeed's
        stage_1_and_2.py always clones), and free their gradients after each step, so after
        training they hold 4Ψ + (4 + 8)Ψ/N. Not counted: stage 3's evaluation copy (module())."""
        tensors = []
        for param in model.module.parameters():
            tensors += [param.data, getattr(param, "ds_tensor", None), param.grad]
        for attr in _GRADIENT_ATTRS + _MASTER_ATTRS:
            tensors += list(_tensors(getattr(optimizer, attr, None)))
        tensors += [t.grad for attr in _MASTER_ATTRS for t in _tensors(getattr(optimizer, attr, None))]
        tensors += list(_tensors(optimizer.optimizer.state))  # the client Adam's exp_avg, exp_avg_sq, step
        return held_bytes(tensors)
