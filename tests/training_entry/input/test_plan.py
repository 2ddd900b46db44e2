"""Who reads which shard, how many steps every rank runs, and the checks on a channel's files."""

from __future__ import annotations

import itertools

import pytest

from training_entry.config import Channel, Hosts
from training_entry.input import records
from training_entry.input.plan import (
    DataError,
    Layout,
    evaluation_steps,
    file_shards,
    layout_from_peers,
    load_manifest,
    plan_channel,
    steps_per_epoch,
)


def _manifest(counts, split="train"):
    n = len(counts)
    return records.Manifest(split, 64, 10, {records.shard_name(split, i, n): c for i, c in enumerate(counts)})


def _plans(manifest, distribution, hosts, local_size, batch=4):
    channel = Channel("train", "File", distribution, "/unused")
    return {
        (h, r): plan_channel(channel, manifest, Layout(h, hosts, r, local_size), batch)
        for h in range(hosts) for r in range(local_size)
    }


def test_fully_replicated_every_shard_read_exactly_once():
    manifest = _manifest([10] * 12)
    plans = _plans(manifest, "FullyReplicated", hosts=3, local_size=2)
    read = [s for plan in plans.values() for s in plan.my_shards]
    assert sorted(read) == sorted(manifest.shards)
    assert all(len(plan.my_shards) == 2 for plan in plans.values())
    # Every host streams everything; each record has exactly one owner in the job.
    for h in range(3):
        assert [name for name, _ in plans[(h, 0)].stream] == sorted(manifest.shards)


def test_sharded_by_s3_key_local_ranks_split_their_hosts_share():
    manifest = _manifest([10] * 8)
    plans = _plans(manifest, "ShardedByS3Key", hosts=2, local_size=2)
    for h in range(2):
        host_share = records.host_objects(list(manifest.shards), h, 2)
        mine = [plans[(h, r)].my_shards for r in range(2)]
        assert sorted(itertools.chain(*mine)) == sorted(host_share)
        assert not set(mine[0]) & set(mine[1])
        assert [name for name, _ in plans[(h, 0)].stream] == host_share
        assert plans[(h, 1)].owners == plans[(h, 0)].owners
        assert sorted(o for o in plans[(h, 0)].owners) == [0, 0, 1, 1]


def test_router_maps_stream_records_to_their_shards_owner():
    manifest = _manifest([3, 5, 2, 4, 6, 1])
    plan = _plans(manifest, "FullyReplicated", hosts=2, local_size=2, batch=1)[(1, 0)]
    router = plan.router()
    assert router.total == 21  # FullyReplicated: the whole data set on every host
    owners = [router.owner(i) for i in range(router.total)]
    # 4 ranks: rank r reads shards r, r+4. Host 1 runs ranks 2 (shard 2) and 3 (shard 3).
    assert owners == [None] * 8 + [0] * 2 + [1] * 4 + [None] * 7
    assert router.records_of(0) == 2 and router.records_of(1) == 4
    with pytest.raises(IndexError):
        router.owner(21)


def test_steps_are_the_minimum_over_ranks_and_the_same_everywhere():
    manifest = _manifest([40, 37, 41, 30])
    plans = _plans(manifest, "ShardedByS3Key", hosts=2, local_size=2, batch=8)
    assert {plan.steps for plan in plans.values()} == {3}  # floor(30 / 8)
    assert {plan.quota for plan in plans.values()} == {24}


def test_zero_steps_and_idle_ranks_are_refused_with_the_fix():
    with pytest.raises(DataError) as info:
        steps_per_epoch(_manifest([40, 7]), "FullyReplicated", Layout(0, 1, 0, 2), 8, "train")
    assert str(info.value) == (
        "channel 'train': batch-size 8 is larger than the 7 records rank 1 reads per epoch "
        "(1 shard(s)); lower batch-size to at most 7 or give each rank more records"
    )
    with pytest.raises(DataError) as info:
        steps_per_epoch(_manifest([40, 40, 40]), "ShardedByS3Key", Layout(0, 2, 0, 2), 8, "train")
    assert str(info.value) == (
        "channel 'train': 3 shard(s) for 4 ranks (2 host(s) x 2) under ShardedByS3Key: rank 3 "
        "gets none; re-run processing with --instance-count x --processes-per-host = 2 x 2"
    )


def test_layout_counts_local_ranks_by_sagemaker_host():
    hosts = Hosts("algo-2", ("algo-1", "algo-2"))
    peers = ["algo-1", "algo-2", "algo-1", "algo-2"]  # MPI may interleave hosts
    assert layout_from_peers(hosts, 3, peers) == Layout(1, 2, 1, 2)
    assert layout_from_peers(hosts, 0, peers) == Layout(0, 2, 0, 2)
    with pytest.raises(DataError, match=r"no training process runs on host\(s\) \['algo-2'\]"):
        layout_from_peers(hosts, 0, ["algo-1", "algo-1"])
    with pytest.raises(DataError, match="hosts run different numbers of ranks"):
        layout_from_peers(hosts, 0, ["algo-1", "algo-1", "algo-2"])
    with pytest.raises(DataError, match=r"ranks report hosts \['algo-7'\]"):
        layout_from_peers(hosts, 0, ["algo-1", "algo-7"])


# --- Files on disk -------------------------------------------------------------------------------
def _write_shards(directory, manifest, names=None):
    directory.mkdir(parents=True, exist_ok=True)
    for name in names if names is not None else manifest.shards:
        records.write_records(str(directory / name), [b"r"] * manifest.shards[name])


def test_file_shards_of_a_sharded_host(tmp_path):
    manifest = _manifest([5, 5, 5, 5])
    names = sorted(manifest.shards)
    channel = Channel("train", "File", "ShardedByS3Key", str(tmp_path / "train"))
    hosts = Hosts("algo-2", ("algo-1", "algo-2"))
    _write_shards(tmp_path / "train", manifest, records.host_objects(names, 1, 2))
    plan = plan_channel(channel, manifest, Layout(1, 2, 1, 2), 2)
    assert file_shards(plan, hosts) == [str(tmp_path / "train" / names[3])]


def test_file_channel_errors(tmp_path):
    manifest = _manifest([5, 5])
    channel = Channel("train", "FastFile", "FullyReplicated", str(tmp_path / "train"))
    hosts = Hosts("algo-1", ("algo-1",))
    plan = plan_channel(channel, manifest, Layout(0, 1, 0, 2), 2)
    with pytest.raises(DataError) as info:
        file_shards(plan, hosts)
    assert str(info.value) == (f"channel 'train': {tmp_path}/train does not exist; SageMaker downloads "
                               f"FastFile-mode channels there (check the channel's S3 URI)")
    (tmp_path / "train").mkdir()
    (tmp_path / "train" / "README").write_text("")
    with pytest.raises(DataError) as info:
        file_shards(plan, hosts)
    assert str(info.value) == (
        f"channel 'train': {tmp_path}/train is empty of TFRecord shards (it holds README); "
        f"expected names like train-00000-of-00002.tfrecord from the processing step")
    _write_shards(tmp_path / "train", manifest, [records.shard_name("train", 0, 2)])
    with pytest.raises(DataError) as info:
        file_shards(plan, hosts)
    assert str(info.value) == (
        f"channel 'train' (FullyReplicated): host algo-1 (1 of 1) should hold "
        f"train-00001-of-00002.tfrecord but {tmp_path}/train does not")
    records.write_records(str(tmp_path / "train" / records.shard_name("train", 0, 3)), [b"r"])
    with pytest.raises(DataError, match="train-00000-of-00003.tfrecord in .* is not in the 'train' manifest: "
                                        "the shards and the manifest come from different processing runs"):
        file_shards(plan, hosts)


def test_manifest_errors(tmp_path):
    channel = Channel("manifest", "File", "FullyReplicated", str(tmp_path))
    (tmp_path / "test.json").write_text("{}")
    with pytest.raises(DataError) as info:
        load_manifest(channel, "train")
    assert str(info.value) == (
        f"channel 'manifest': {tmp_path}/train.json is missing (it holds ['test.json']); the "
        f"processing step writes <split>.json for every split into its 'manifest' output")
    (tmp_path / "train.json").write_text('{"split": "train"}')
    with pytest.raises(DataError, match=r"manifest .*train.json is malformed \(KeyError\('num_features'\)\); re-run processing"):
        load_manifest(channel, "train")
    (tmp_path / "train.json").write_text(_manifest([1], split="validation").to_json())
    with pytest.raises(DataError, match=r"train.json describes split 'validation', not 'train'"):
        load_manifest(channel, "train")


# --- ShardedByS3Key without an assumed assignment -----------------------------------------------
def _sharded_channel(tmp_path, host_shards, mode="File"):
    directory = tmp_path / "train"
    directory.mkdir(exist_ok=True)
    for name in host_shards:
        (directory / name).write_bytes(b"")
    return Channel("train", mode, "ShardedByS3Key", str(directory))


def _gather_of(plans_inputs):
    """A stand-in allgather: what every rank would contribute, computed the same way."""
    def gather(mine):
        return [mine, *plans_inputs]
    return gather


@pytest.mark.parametrize("local_rank", [0, 1])
def test_sharded_files_plan_from_what_the_host_holds_and_agree_on_the_fewest(tmp_path, local_rank):
    names = [records.shard_name("train", i, 5) for i in range(5)]
    manifest = records.Manifest("train", 4, 3, {n: 100 + 10 * i for i, n in enumerate(names)})
    # This host got one object (not the sorted-keys share); it has two ranks: they split records.
    channel = _sharded_channel(tmp_path, [names[4]])
    layout = Layout(host_index=0, host_count=2, local_rank=local_rank, local_size=2)
    others = [(sum(manifest.shards[n] for n in names[0:2]), 2, 2), (manifest.shards[names[2]], 3, 1)]
    plan = plan_channel(channel, manifest, layout, 10, gather=_gather_of(others))
    assert plan.split_records and plan.my_shards == (names[4],)
    assert plan.steps == min(70, 210, 120) // 10  # 140 records split over 2 ranks: 70 each
    hosts = Hosts("algo-1", ("algo-1", "algo-2"))
    assert file_shards(plan, hosts) == [str(tmp_path / "train" / names[4])]


def test_sharded_files_with_enough_shards_split_them_by_shard(tmp_path):
    names = [records.shard_name("train", i, 4) for i in range(4)]
    manifest = records.Manifest("train", 4, 3, {n: 50 for n in names})
    channel = _sharded_channel(tmp_path, [names[3], names[0], names[2]])  # any 3, any order
    layout = Layout(host_index=1, host_count=2, local_rank=1, local_size=2)
    plan = plan_channel(channel, manifest, layout, 10, gather=_gather_of([(50, 0, 1)]))
    assert not plan.split_records and plan.my_shards == (names[2],)  # sorted present, rank 1
    assert plan.steps == 5


def test_sharded_pipe_deals_records_in_turn_and_counts_on_the_smallest_object(tmp_path):
    names = [records.shard_name("train", i, 3) for i in range(3)]
    manifest = records.Manifest("train", 4, 3, {names[0]: 90, names[1]: 41, names[2]: 300})
    channel = Channel("train", "Pipe", "ShardedByS3Key", str(tmp_path / "train"))
    layout = Layout(host_index=0, host_count=2, local_rank=1, local_size=2)
    plan = plan_channel(channel, manifest, layout, 10, gather=_gather_of([]))
    assert plan.round_robin and plan.steps == 41 // 2 // 10
    router = plan.router()
    chunk = [bytes([i]) for i in range(7)]
    assert router.take(chunk, 3, 7, 1) == [bytes([0]), bytes([2]), bytes([4]), bytes([6])]
    assert router.take(chunk, 3, 7, 0) == [bytes([1]), bytes([3]), bytes([5])]
    assert router.records_of(1) == 20 and router.records_of(0) == 21


def _eval_plans(manifest, mode, distribution, hosts, local_size, batch, gather=None):
    channel = Channel("validation", mode, distribution, "/unused")
    return [plan_channel(channel, manifest, Layout(h, hosts, r, local_size), batch, gather=gather)
            for h in range(hosts) for r in range(local_size)]


@pytest.mark.parametrize("counts,hosts,local_size,batch", [
    ([18, 19], 2, 1, 32), ([18, 19], 1, 2, 32), ([40, 37, 41, 30], 2, 2, 8), ([3, 4, 3, 4], 4, 1, 1),
    ([100] * 3, 3, 1, 7),
])
def test_evaluation_plans_read_every_record_in_the_same_steps_everywhere(counts, hosts, local_size, batch):
    """Horovod: every rank runs the same evaluation steps; File: all records, once each."""
    manifest = _manifest(counts, split="validation")
    plans = _eval_plans(manifest, "File", "FullyReplicated", hosts, local_size, batch)
    assert len({plan.steps for plan in plans}) == 1
    assert sum(plan.quota for plan in plans) == sum(counts)
    for plan in plans:
        larger, smaller, larger_count = plan.batch_sizes()
        assert larger_count * larger + (plan.steps - larger_count) * smaller == plan.records
        assert smaller >= 1 and larger - smaller <= 1
        if min(counts) >= -(-max(counts) // batch):
            assert larger <= batch  # never a batch larger than BatchSize when it can be avoided


def test_evaluation_steps_stay_within_the_fewest_records():
    assert evaluation_steps(18, 19, 32, "validation") == 1
    assert evaluation_steps(30, 41, 8, "validation") == 6
    assert evaluation_steps(3, 4, 1, "validation") == 3  # batch 1: the 4-record rank doubles one
    with pytest.raises(DataError, match="no record"):
        evaluation_steps(0, 4, 1, "validation")


def test_sharded_files_evaluation_agrees_on_steps_and_keeps_every_record(tmp_path):
    names = [records.shard_name("validation", i, 2) for i in range(2)]
    manifest = records.Manifest("validation", 4, 3, {names[0]: 18, names[1]: 19})
    (tmp_path / "validation").mkdir()
    (tmp_path / "validation" / names[1]).write_bytes(b"")
    channel = Channel("validation", "File", "ShardedByS3Key", str(tmp_path / "validation"))
    plan = plan_channel(channel, manifest, Layout(1, 2, 0, 1), 32, gather=_gather_of([(18, 0, 1)]))
    assert (plan.steps, plan.records, plan.batch_sizes()) == (1, 19, (19, 19, 0))


@pytest.mark.parametrize("distribution", ["FullyReplicated", "ShardedByS3Key"])
def test_pipe_evaluation_uses_whole_batches_as_small_as_the_fewest_records_need(distribution):
    manifest = _manifest([18, 19], split="validation")
    plans = _eval_plans(manifest, "Pipe", distribution, 2, 1, 32, gather=_gather_of([]))
    assert {(plan.batch_size, plan.steps, plan.records) for plan in plans} == {(18, 1, 0)}


def test_training_channel_keeps_whole_batches_of_batch_size():
    with pytest.raises(DataError, match="larger than the 18 records"):
        _plans(_manifest([18, 19]), "FullyReplicated", hosts=2, local_size=1, batch=32)
