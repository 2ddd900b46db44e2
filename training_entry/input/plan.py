"""The per-rank plan: which shards or stream records each rank reads, and how many steps.

FullyReplicated: the one rule for who reads what is ``records.assign_shards``; every rank
computes the same plan from the manifest channel (record counts of every shard), so all ranks
agree on the steps per epoch without reading any data: the minimum over ranks of
floor(records of the rank / batch size). ShardedByS3Key: AWS does not document which objects
each host receives, so nothing here assumes it. In File/FastFile mode a host counts the
shards it actually holds, its ranks split them (by shard, or by record when it holds fewer
shards than ranks), and all ranks agree on the minimum through an allgather
(``plan_channel(..., gather=)``). In Pipe mode the records of the host's stream are dealt to
its ranks in turn, whatever objects it carries, and every rank counts on the records of the
smallest object only (a host receives at least one). Unequal step counts are the classic
Horovod deadlock (horovod#2083): the rank with more batches waits forever in an allreduce.
For the same reason no input pipeline can run short: File mode repeats its shards
(``datasets``), Pipe mode raises when a stream holds fewer records than the manifest promised.

Evaluation channels (validation) need no full batches: a small split (245 photos, 15%
validation, 2 ranks: 18 records a rank) must not be refused for batch size 32. In File and
FastFile mode every rank reads all its records exactly once per pass, in ``steps`` batches of
nearly equal size (``evaluation_steps``); in Pipe mode the batches shrink to what the rank
with the fewest records can fill. Training keeps whole batches: the gradients' allreduce
averages per-rank means, and the learning-rate scaling assumes ``batch_size`` a rank.

No TensorFlow here: a plan is arithmetic on the manifest and a look at the channel directory.

Python 3.10 syntax.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from training_entry import contract
from training_entry.config import Channel, Hosts
from training_entry.failure import UserError
from training_entry.input import pipe, records


class DataError(UserError):
    """The channels do not hold what the manifest and the job's layout need."""


# --- Where this rank sits ----------------------------------------------------------------------
@dataclass(frozen=True)
class Layout:
    """This rank's place among SageMaker hosts (not MPI's view of the machine)."""

    host_index: int
    host_count: int
    local_rank: int
    local_size: int

    @property
    def world_size(self) -> int:
        return self.host_count * self.local_size


def layout_from_peers(hosts: Hosts, rank: int, host_of_rank: Sequence[str]) -> Layout:
    """Local rank/size among the ranks that report the same SageMaker host.

    ``host_of_rank[r]``: SM_CURRENT_HOST of Horovod rank r (an allgather). On SageMaker this
    equals ``hvd.local_rank()/local_size()``; the local runner simulates several hosts on one
    machine, where MPI sees a single host, so we count by the SageMaker host names.
    """
    counts = Counter(host_of_rank)
    unknown = sorted(set(counts) - set(hosts.hosts))
    if unknown:
        raise DataError(f"ranks report hosts {unknown} that are not in the job's hosts {list(hosts.hosts)}")
    idle = [h for h in hosts.hosts if h not in counts]
    if idle:
        raise DataError(
            f"no training process runs on host(s) {idle} of {list(hosts.hosts)}: their data "
            f"would never be read; launch processes_per_host ranks on every host"
        )
    if len(set(counts.values())) != 1:
        raise DataError(f"hosts run different numbers of ranks ({dict(counts)}); every host must run the same number")
    me = host_of_rank[rank]
    local_rank = sum(1 for r in range(rank) if host_of_rank[r] == me)
    return Layout(hosts.hosts.index(me), len(hosts.hosts), local_rank, counts[me])


# --- The plan: shards, stream routing, steps ---------------------------------------------------
@dataclass(frozen=True)
class ChannelPlan:
    channel: Channel
    manifest: records.Manifest
    layout: Layout
    batch_size: int
    steps: int  # per epoch, identical on every rank
    my_shards: tuple[str, ...]  # this rank's shards (assign_shards order)
    stream: tuple[tuple[str, int], ...]  # Pipe: this host's objects in stream order, with counts
    owners: tuple[int | None, ...]  # Pipe: the local rank that reads each stream object
    # ShardedByS3Key, files: the host holds fewer shards than ranks, each rank reads every
    # local_size-th record of all of them.
    split_records: bool = False
    # ShardedByS3Key, Pipe: records dealt to the host's ranks in turn (no assumed objects);
    # ``guaranteed`` records the stream surely carries.
    round_robin: bool = False
    guaranteed: int = 0
    # Evaluation, File/FastFile: all this rank's records per pass (0: whole batches), cut into
    # ``steps`` batches of nearly equal size (``batch_sizes``).
    records: int = 0

    @property
    def quota(self) -> int:
        """Records each rank uses per pass: steps x batch, or all its records (evaluation)."""
        return self.records or self.steps * self.batch_size

    def batch_sizes(self) -> tuple[int, int, int]:
        """(larger, smaller, how many larger): the pass's batches, the larger ones first.
        Whole batches: (batch_size, batch_size, steps)."""
        if not self.records:
            return self.batch_size, self.batch_size, self.steps
        smaller, larger_count = divmod(self.records, self.steps)
        return smaller + (1 if larger_count else 0), smaller, larger_count

    def router(self) -> pipe.RecordRouter:
        if self.round_robin:
            return pipe.RoundRobinRouter(self.layout.local_size, self.guaranteed)
        return pipe.RecordRouter(self.stream, self.owners)


def rank_shards(manifest: records.Manifest, distribution: str, layout: Layout, host_index: int,
                local_rank: int) -> list[str]:
    return records.assign_shards(
        list(manifest.shards), distribution, host_index, layout.host_count, local_rank, layout.local_size
    )


def host_stream(manifest: records.Manifest, distribution: str, host_index: int, host_count: int) -> list[str]:
    """SageMaker: the objects a host receives, in the order a Pipe stream carries them."""
    names = sorted(manifest.shards)
    if distribution == "ShardedByS3Key":
        return records.host_objects(names, host_index, host_count)
    return names


def rank_counts(manifest: records.Manifest, distribution: str, layout: Layout,
                channel: str) -> list[tuple[int, int, int]]:
    """(records, rank, shards) of every rank, by the one rule of who reads what."""
    world = layout.world_size
    counts = []
    for host_index in range(layout.host_count):
        for local_rank in range(layout.local_size):
            shards = rank_shards(manifest, distribution, layout, host_index, local_rank)
            rank = host_index * layout.local_size + local_rank
            if not shards:
                raise DataError(
                    f"channel {channel!r}: {len(manifest.shards)} shard(s) for {world} ranks "
                    f"({layout.host_count} host(s) x {layout.local_size}) under {distribution}: "
                    f"rank {rank} gets none; re-run processing with --instance-count x "
                    f"--processes-per-host = {layout.host_count} x {layout.local_size}"
                )
            counts.append((sum(manifest.shards[s] for s in shards), rank, len(shards)))
    return counts


def steps_per_epoch(manifest: records.Manifest, distribution: str, layout: Layout, batch_size: int,
                    channel: str) -> int:
    """min over all ranks of floor(records of the rank / batch); the same on every rank."""
    count, rank, shard_count = min(rank_counts(manifest, distribution, layout, channel))
    steps = count // batch_size
    if steps == 0:
        raise DataError(
            f"channel {channel!r}: batch-size {batch_size} is larger than the {count} records "
            f"rank {rank} reads per epoch ({shard_count} shard(s)); lower batch-size to at most "
            f"{count} or give each rank more records"
        )
    return steps


def evaluation_steps(fewest: int, most: int, batch_size: int, channel: str) -> int:
    """Steps of an evaluation pass that reads every record of every rank exactly once, the
    same on every rank: ceil(most / batch), so no batch is larger than ``batch_size``, but
    never more than the rank with the ``fewest`` records can fill with one record a batch
    (then its batches grow past ``batch_size``, by one or two records at most when the shards
    are equal give or take one, as processing writes them)."""
    if fewest < 1:
        raise DataError(f"channel {channel!r}: a rank reads no record of it; re-run processing "
                        f"for this job's ranks")
    return min(fewest, -(-most // batch_size))


def is_evaluation(channel: Channel) -> bool:
    """Every channel but the training one is only evaluated: partial batches are fine."""
    return channel.name != contract.CHANNEL_TRAIN


def plan_channel(channel: Channel, manifest: records.Manifest, layout: Layout, batch_size: int,
                 gather: Callable[[object], list] | None = None,
                 evaluation: bool | None = None) -> ChannelPlan:
    """This rank's plan. ``gather`` (Horovod's allgather_object) lets ShardedByS3Key channels
    plan from what the hosts actually received; without it (tests of the FullyReplicated
    arithmetic) the sorted-keys rule of ``records.host_objects`` stands in. ``evaluation``
    (default: every channel but train) allows partial or smaller batches."""
    evaluation = is_evaluation(channel) if evaluation is None else evaluation
    if channel.distribution == "ShardedByS3Key" and gather is not None:
        if channel.is_pipe:
            return _plan_sharded_pipe(channel, manifest, layout, batch_size, evaluation)
        return _plan_sharded_files(channel, manifest, layout, batch_size, gather, evaluation)
    counts = rank_counts(manifest, channel.distribution, layout, channel.name)
    fewest, most = min(counts)[0], max(counts)[0]
    my_records = 0
    if evaluation and not channel.is_pipe:  # every record once, in steps partial batches
        steps = evaluation_steps(fewest, most, batch_size, channel.name)
        my_records = counts[layout.host_index * layout.local_size + layout.local_rank][0]
    else:
        if evaluation:  # Pipe: whole batches, as small as the fewest records need
            batch_size = min(batch_size, fewest)
        steps = steps_per_epoch(manifest, channel.distribution, layout, batch_size, channel.name)
    mine = rank_shards(manifest, channel.distribution, layout, layout.host_index, layout.local_rank)
    stream = host_stream(manifest, channel.distribution, layout.host_index, layout.host_count)
    owner_of = {
        shard: local_rank
        for local_rank in range(layout.local_size)
        for shard in rank_shards(manifest, channel.distribution, layout, layout.host_index, local_rank)
    }
    return ChannelPlan(
        channel=channel,
        manifest=manifest,
        layout=layout,
        batch_size=batch_size,
        steps=steps,
        my_shards=tuple(mine),
        stream=tuple((name, manifest.shards[name]) for name in stream),
        owners=tuple(owner_of.get(name) for name in stream),
        records=my_records,
    )


def _plan_sharded_files(channel: Channel, manifest: records.Manifest, layout: Layout,
                        batch_size: int, gather: Callable[[object], list],
                        evaluation: bool = False) -> ChannelPlan:
    """ShardedByS3Key, File/FastFile: from the shards this host holds; steps agreed by all."""
    present = present_shards(channel, manifest)
    size, local_rank = layout.local_size, layout.local_rank
    split_records = len(present) < size
    if split_records:  # fewer shards than ranks: every rank reads every size-th record
        mine = present
        total = sum(manifest.shards[s] for s in present)
        count = (total - local_rank + size - 1) // size
    else:
        mine = present[local_rank::size]
        count = sum(manifest.shards[s] for s in mine)
    rank = layout.host_index * size + local_rank
    # Horovod: every rank must run the same number of steps; one allgather, then each rank
    # computes the same minimum (and, if one is hopeless, the same error).
    everyone = sorted(gather((count, rank, len(mine))))
    if evaluation:  # every record once, in the same number of partial batches on every rank
        steps = evaluation_steps(everyone[0][0], everyone[-1][0], batch_size, channel.name)
        return ChannelPlan(
            channel=channel, manifest=manifest, layout=layout, batch_size=batch_size, steps=steps,
            my_shards=tuple(mine), stream=tuple((name, manifest.shards[name]) for name in present),
            owners=tuple(None for _ in present), split_records=split_records, records=count,
        )
    count, rank, shard_count = everyone[0]
    steps = count // batch_size
    if steps == 0:
        raise DataError(
            f"channel {channel.name!r}: batch-size {batch_size} is larger than the {count} records "
            f"rank {rank} reads per epoch ({shard_count} shard(s) on its host under "
            f"ShardedByS3Key); lower batch-size to at most {count} or give each host more records"
        )
    return ChannelPlan(
        channel=channel, manifest=manifest, layout=layout, batch_size=batch_size, steps=steps,
        my_shards=tuple(mine), stream=tuple((name, manifest.shards[name]) for name in present),
        owners=tuple(None for _ in present), split_records=split_records,
    )


def _plan_sharded_pipe(channel: Channel, manifest: records.Manifest, layout: Layout,
                       batch_size: int, evaluation: bool = False) -> ChannelPlan:
    """ShardedByS3Key, Pipe: the stream's objects are unknown until read; count on the
    smallest object (every host receives at least one), dealt to the ranks in turn."""
    smallest = min(manifest.shards.values())
    per_rank = smallest // layout.local_size
    if evaluation and per_rank:  # whole batches, as small as the records need
        batch_size = min(batch_size, per_rank)
    steps = per_rank // batch_size
    if steps == 0:
        raise DataError(
            f"channel {channel.name!r}: batch-size {batch_size} is larger than the {per_rank} "
            f"records a rank can count on per pass (Pipe + ShardedByS3Key: a host may receive "
            f"only the smallest object, {smallest} records, shared by {layout.local_size} "
            f"rank(s)); lower batch-size or use FullyReplicated"
        )
    return ChannelPlan(
        channel=channel, manifest=manifest, layout=layout, batch_size=batch_size, steps=steps,
        my_shards=(), stream=(), owners=(), round_robin=True, guaranteed=smallest,
    )


def load_manifest(manifest_channel: Channel, split: str) -> records.Manifest:
    path = os.path.join(manifest_channel.directory, records.manifest_name(split))
    try:
        manifest = records.Manifest.load(path)
    except FileNotFoundError:
        present = sorted(os.listdir(manifest_channel.directory)) if os.path.isdir(manifest_channel.directory) else None
        where = f"it holds {present}" if present is not None else "the directory does not exist"
        raise DataError(
            f"channel {manifest_channel.name!r}: {path} is missing ({where}); the processing "
            f"step writes <split>.json for every split into its 'manifest' output"
        ) from None
    except ValueError as e:
        raise DataError(str(e)) from None
    if manifest.split != split:
        raise DataError(f"{path} describes split {manifest.split!r}, not {split!r}")
    if not manifest.shards:
        raise DataError(f"{path} lists no shards: the {split!r} split is empty; re-run processing")
    return manifest


# --- File / FastFile -----------------------------------------------------------------------------
def present_shards(channel: Channel, manifest: records.Manifest) -> list[str]:
    """The manifest's shards in the channel directory, sorted, after checking it holds some
    and nothing from another processing run."""
    if not os.path.isdir(channel.directory):
        raise DataError(
            f"channel {channel.name!r}: {channel.directory} does not exist; SageMaker downloads "
            f"{channel.mode}-mode channels there (check the channel's S3 URI)"
        )
    entries = sorted(os.listdir(channel.directory))
    present = [n for n in entries if records.is_shard_name(n)]
    if not present:
        shown = ", ".join(entries[:5]) or "nothing"
        raise DataError(
            f"channel {channel.name!r}: {channel.directory} is empty of TFRecord shards (it "
            f"holds {shown}); expected names like {records.shard_name(channel.name, 0, 2)} "
            f"from the processing step"
        )
    stray = [n for n in present if n not in manifest.shards]
    if stray:
        raise DataError(
            f"channel {channel.name!r}: {stray[0]} in {channel.directory} is not in the "
            f"{manifest.split!r} manifest: the shards and the manifest come from different "
            f"processing runs"
        )
    return present


def file_shards(plan: ChannelPlan, hosts: Hosts) -> list[str]:
    """Paths of this rank's shards, after checking the directory holds what the plan says."""
    channel = plan.channel
    present = present_shards(channel, plan.manifest)
    # FullyReplicated: every shard; ShardedByS3Key: what this host was given (the plan).
    expected = {name for name, _ in plan.stream}
    missing = sorted(expected - set(present))
    if missing:
        raise DataError(
            f"channel {channel.name!r} ({channel.distribution}): host {hosts.current} "
            f"({hosts.index + 1} of {hosts.count}) should hold {missing[0]}"
            f"{f' and {len(missing) - 1} more' if len(missing) > 1 else ''} but "
            f"{channel.directory} does not"
        )
    return [os.path.join(channel.directory, name) for name in plan.my_shards]
