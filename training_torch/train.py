"""Train a classifier on the processing step's TFRecord shards with PyTorch, on every rank that
torchrun started (SageMaker: ``distribution={"torch_distributed": {"enabled": True}}``).

    torchrun --nnodes 2 --nproc_per_node 2 --master_addr algo-1 --master_port 7777 --node_rank 0 \\
        train.py --epochs 10 --batch-size 32 --base-learning-rate 0.001 --strategy ddp

The Horovod recipe (``training_entry/train.py``), in PyTorch: each rank reads its own shards;
the learning rate is scaled by the world size after a linear warm-up; the strategy broadcasts
rank 0's weights and averages the gradients; the epoch's metrics are averaged over every rank;
only rank 0 prints them and writes the model. Every line that exists for the distribution
carries the strategy's name (``# DDP:``) or ``# torch.distributed:``.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time

import torch
import torch.distributed as dist

from training_entry import contract
from training_entry.input import records
from training_torch import augment, data, export, networks, plan, strategies
from training_torch.backbones import efficientnet_lite0 as lite0
from training_torch.stopping import StopOnSigterm


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument(f"--{contract.HP_EPOCHS}", type=int, default=10)
    parser.add_argument(f"--{contract.HP_BATCH_SIZE}", type=int, default=32)
    parser.add_argument(f"--{contract.HP_BASE_LEARNING_RATE}", type=float, default=0.001)
    parser.add_argument(f"--{contract.HP_WARMUP_EPOCHS}", type=int, default=2)
    parser.add_argument(f"--{contract.HP_SEED}", type=int, default=0)
    parser.add_argument(f"--{contract.HP_MODEL_ARCHITECTURE}", default=contract.ARCH_AUTO)
    parser.add_argument(f"--{contract.HP_IMAGE_SIZE}", type=int, default=contract.DEFAULT_IMAGE_SIZE)
    parser.add_argument(f"--{contract.HP_TORCH_STRATEGY}", default=contract.TORCH_DDP)
    parser.add_argument(f"--{contract.HP_MICRO_BATCHES}", type=int, default=contract.DEFAULT_MICRO_BATCHES)
    # A pretrained backbone's fine-tuning phases (backbones/efficientnet_lite0.py), under the
    # TensorFlow room's names: the head alone first, then every layer at the rate x the factor.
    parser.add_argument(f"--{contract.HP_HEAD_EPOCHS}", type=int, default=contract.DEFAULT_HEAD_EPOCHS)
    parser.add_argument(f"--{contract.HP_FINE_TUNE_LR_FACTOR}", type=float, default=contract.DEFAULT_FINE_TUNE_LR_FACTOR)
    # Training images only, as the TensorFlow room's (augment.py).
    parser.add_argument(f"--{contract.HP_AUGMENTATION}", choices=contract.AUGMENTATIONS,
                        default=contract.DEFAULT_AUGMENTATION)
    # The TensorFlow entrypoint's settings a shared definition may send: accepted, unused here.
    args, _ = parser.parse_known_args(argv)
    args.image_size = contract.image_size_for(args.model_architecture, args.image_size)
    return args


def _channel(name: str) -> str:
    # SageMaker: SM_CHANNEL_<NAME>, else the contract's folder.
    return os.environ.get(f"SM_CHANNEL_{name.upper()}") or contract.container_path(f"{contract.INPUT_DATA_DIR}/{name}")


def _lr_at(step: int, steps_per_epoch: int, base: float, world: int, warmup_epochs: int) -> float:
    """Goyal et al. 2017: the rate x world size, reached linearly over the warm-up epochs."""
    target = base * world
    warmup = warmup_epochs * steps_per_epoch
    if warmup <= 0 or step >= warmup:
        return target
    return base + (target - base) * step / warmup


def _pretrained(num_classes: int, rank: int) -> torch.nn.Module:
    """EfficientNet-Lite0 with its ImageNet weights and a new head: the weights from the init
    channel where the job has one (``trainpipe init-weights``), else from the package its
    requirements.txt installed. Rank 0 logs where they came from and the file's sha256."""
    path = lite0.channel_weights(_channel(contract.CHANNEL_INIT))
    if path is not None:
        source = f"init channel file {os.path.basename(path)}"
    else:
        path = lite0.weights_path()  # ImportError naming the pip line where the package is missing
        source = f"{lite0.PACKAGE} {lite0.package_version()}"
    if rank == 0:
        print(lite0.weights_line(source, lite0.file_sha256(path)), flush=True)
    return lite0.classifier(num_classes, path)


def _build(args, manifest: records.Manifest, kind: str, rank: int = 0) -> torch.nn.Module:
    arch = args.model_architecture
    if kind == records.KIND_IMAGE:
        if arch in plan.PRETRAINED_ARCHITECTURES:
            return _pretrained(manifest.num_classes, rank)
        if arch not in (contract.ARCH_AUTO, contract.ARCH_SMALL_CNN):
            raise ValueError(f"ModelArchitecture={arch} is not built for PyTorch yet; use small_cnn (or auto)")
        return networks.small_cnn(manifest.num_classes)
    if arch not in (contract.ARCH_AUTO, contract.ARCH_MLP):
        raise ValueError(f"ModelArchitecture={arch} does not fit table data; use mlp (or auto)")
    return networks.mlp(manifest.num_features, manifest.num_classes, manifest.feature_mean, manifest.feature_std)


def _batches(split: data.Split, batch_size: int, steps: int, generator: torch.Generator):
    order = torch.randperm(len(split.y), generator=generator)
    for i in range(steps):
        idx = order[(i * batch_size) % max(len(order), 1):][:batch_size]
        yield split.x[idx], split.y[idx]


def _summed(values: list[float], device) -> list[float]:
    """torch.distributed: the sum over every rank of each value."""
    tensor = torch.tensor(values, dtype=torch.float64, device=device)
    dist.all_reduce(tensor)
    return tensor.tolist()


def _per_rank(value: float, rank: int, world: int, device) -> list[float]:
    """torch.distributed: every rank's ``value``, in rank order."""
    values = [0.0] * world
    values[rank] = float(value)
    return _summed(values, device)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    cuda = torch.cuda.is_available()
    # torch.distributed: torchrun set RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT.
    dist.init_process_group("nccl" if cuda else "gloo")
    _train(args, cuda)
    # torch.distributed: the wrapped model, optimizer and pipeline stages died with _train's frame,
    # before the group is torn down. Left alive into interpreter exit, their gloo work aborted a
    # rank after it had finished (SIGABRT, "terminate called without an active exception": 4 of
    # 150 two-rank mpirun runs of DDP under load; 0 of 100 with them freed first).
    gc.collect()
    dist.barrier()  # every rank done before any tears the group down (destroy_process_group's contract)
    dist.destroy_process_group()
    return 0


def _train(args: argparse.Namespace, cuda: bool) -> None:
    # SageMaker: a stopped job (a tuning job's early stopping) gets SIGTERM; train to an epoch's end.
    stop = StopOnSigterm()
    stop.install()
    rank, world = dist.get_rank(), dist.get_world_size()
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    local_size = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    hosts = json.loads(os.environ.get("SM_HOSTS") or '["algo-1"]')
    host_index = hosts.index(os.environ.get("SM_CURRENT_HOST", hosts[0]))
    device = torch.device("cuda", local_rank) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)  # torch.distributed: one GPU per local rank
    torch.manual_seed(args.seed)

    manifest_dir = _channel(contract.CHANNEL_MANIFEST)
    manifest = records.Manifest.load(os.path.join(manifest_dir, records.manifest_name("train")))
    if manifest.columns is not None:
        raise ValueError("a table of typed columns (categories, gaps) is not read by the PyTorch entrypoint yet; "
                         "train it with the TensorFlow one")
    kind = manifest.kind
    strategy = strategies.get(args.strategy)
    strategy.configure(args, local_size)  # refuses a combination that cannot work, before any data is read
    plan.check_pretrained(args.model_architecture, strategy.name)
    pretrained = kind == records.KIND_IMAGE and args.model_architecture in plan.PRETRAINED_ARCHITECTURES
    # GPipe: a host's ranks are one model's stages, one replica that reads the same shards and batches.
    per = strategy.ranks_per_replica
    # torch.distributed: one id for the job, naming where a host's local rank 0 hands its other
    # local ranks their share of a Pipe stream (data.PipeChannel).
    run_id = [os.urandom(6).hex()]
    dist.broadcast_object_list(run_id, src=0)
    sources = data.sources(contract.DATA_CHANNELS, data.RankPlace(
        host_index, len(hosts), hosts[host_index], local_rank, local_size, per, strategy.name, run_id[0]),
        kind=kind, image_size=args.image_size, batch_size=args.batch_size,
        manifest_dir=manifest_dir, channel_dir=_channel)
    train_source, val_source = sources[contract.CHANNEL_TRAIN], sources[contract.CHANNEL_VALIDATION]

    model = _build(args, manifest, kind, rank).to(device)
    base_lr = args.base_learning_rate
    schedule = [(None, 0, args.epochs, 1.0)]  # one phase, every group at the rate
    inner = model

    def make_optimizer(params):
        # A pretrained backbone: one optimizer for the run, its two groups (backbone, head) at
        # each phase's rates.
        return torch.optim.Adam(lite0.param_groups(inner, params) if pretrained else params, lr=base_lr)

    if pretrained:
        schedule = lite0.phases(args.epochs, args.head_epochs, args.fine_tune_lr_factor)
        # DDP: one wrap for the whole run, made while every parameter requires grad (DDP syncs
        # only those it sees then). In the head phase the backbone's parameters stop requiring
        # grad, so no backward runs through the backbone (the phase costs the head's backward
        # alone) and DDP is told some parameters go unused. The alternative, a rate of 0 for the
        # backbone with gradients still computed, would pay the whole backward every head step
        # and feed the head phase's gradients into Adam's moments for the backbone.
        strategy.find_unused_parameters = True
    model, optimizer = strategy.wrap(model, make_optimizer)
    loss_fn = torch.nn.CrossEntropyLoss()
    # Every rank takes the same number of steps (a collective waits for all): the fewest batches any rank has.
    # Pipe: every rank's quota is the same whole number of batches (data.PipeChannel).
    steps = int(min(_per_rank(max(1, -(-train_source.records // args.batch_size)), rank, world, device)))
    generator = torch.Generator().manual_seed(args.seed + rank // per)
    # Its own draws, so the batches' order does not depend on the augmentation; per replica, as the
    # batches (GPipe: a replica's stages see one batch).
    augmenting = augment.applies(kind, args.augmentation)
    augment_generator = torch.Generator().manual_seed(args.seed + rank // per + 1_000_003)
    step_index = 0
    phase = None
    for epoch in range(1, args.epochs + 1):
        name, factor = lite0.phase_at(schedule, epoch - 1)
        if pretrained and name != phase:
            lite0.set_phase(strategy.module(model), name)
            if rank == 0:
                first, end = next((a, b) for n, a, b, _ in schedule if n == name)
                print(f"phase {name}: epochs {first + 1}-{end}, "
                      f"{'backbone frozen' if name == lite0.HEAD_PHASE else 'every layer'}, rate x{factor:g}",
                      flush=True)
        phase = name
        train, val = train_source.epoch(), val_source.epoch()  # Pipe: the epoch's FIFOs
        model.train()
        started, cpu_started = time.perf_counter(), time.process_time()
        loss_sum, correct, seen = 0.0, 0, 0
        for x, y in _batches(train, args.batch_size, steps, generator):
            rate = _lr_at(step_index, steps, base_lr, world // per, args.warmup_epochs)
            for group in optimizer.param_groups:
                group["lr"] = lite0.group_rate(group["name"], phase, factor, rate) if pretrained else rate
            if augmenting:  # training batches only: validation below sees val.x as decoded
                x = augment.batch(x, args.augmentation, augment_generator)
            x, y = x.to(device), y.to(device)
            loss, right = strategy.step(model, optimizer, x, y, loss_fn)
            if loss is not None:  # GPipe: the last stage alone computes the loss and counts the batch
                loss_sum += float(loss) * len(y)
                correct += int(right)
                seen += len(y)
            step_index += 1
        wall = time.perf_counter() - started
        cpu = time.process_time() - cpu_started
        model.eval()
        whole = strategy.module(model)  # ZeRO: on every rank, for stage 3 gathers the partitions (a collective)
        with torch.no_grad():
            logits = whole(val.x.to(device)) if len(val.y) else torch.zeros(0, manifest.num_classes)
            val_loss = float(loss_fn(logits, val.y.to(device))) * len(val.y) if len(val.y) else 0.0
            val_right = int((logits.argmax(1).cpu() == val.y).sum()) if len(val.y) else 0
        # torch.distributed: the epoch's metrics averaged over every rank's examples.
        t_loss, t_right, t_seen, v_loss, v_right, v_seen = _summed(
            [loss_sum, correct, seen, val_loss, val_right, len(val.y)], device)
        lines = strategy.report()  # every rank (GPipe: gathers the stages' timelines)
        if rank == 0:
            print(contract.format_metric_line(epoch, {
                "loss": t_loss / max(t_seen, 1), "accuracy": t_right / max(t_seen, 1),
                "val_loss": v_loss / max(v_seen, 1), "val_accuracy": v_right / max(v_seen, 1),
                "throughput": t_seen / max(wall, 1e-9), "step_time": wall / steps, "cpu_time": cpu / steps,
                "parameters": sum(p.numel() for p in whole.parameters()),
            }), flush=True)
            for line in lines:
                print(line, flush=True)
        if stop.agreed(device):  # every rank, each epoch: all stop after the same one
            if rank == 0:
                print(f"stopped (SIGTERM) after epoch {epoch}: saving the model trained so far", flush=True)
            break
    for source in sources.values():
        source.close()  # Pipe: the host's private FIFOs' folder
    state = _per_rank(strategy.state_bytes(model, optimizer), rank, world, device)
    whole = strategy.module(model)  # ZeRO: on every rank, as above
    if rank == 0:
        print(f"trainpipe-torch strategy={strategy.name} world={world} "
              f"state_bytes_per_rank={' '.join(str(int(b)) for b in state)}", flush=True)
        # Only rank 0 writes the model.
        export.save(whole.cpu(), contract.container_path(os.environ.get("SM_MODEL_DIR", contract.MODEL_DIR)),
                    kind=kind, manifest=manifest, image_size=args.image_size)


if __name__ == "__main__":
    sys.exit(main())
