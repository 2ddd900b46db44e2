"""The step end to end: shards, manifests, hosts, determinism, and a run as the container does."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from processing.preprocess import main, write_shards
from tests.processing.conftest import (
    MlTree,
    labelled_data,
    list_dir,
    run_preprocess,
    shard_record_counts,
)
from training_entry.contract import BASE_DIR_ENV
from training_entry.input import records

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("instances, per_host", [(1, 1), (2, 3), (4, 2), (1, 7)])
def test_each_split_gets_one_shard_per_rank_equal_within_one(ml, instances, per_host):
    ml.write_csv(*labelled_data())
    assert main([f"--instance-count={instances}", f"--processes-per-host={per_host}"]) == 0
    shards = instances * per_host
    for split in ("train", "validation", "test"):
        counts = shard_record_counts(ml.outputs[split])
        assert list(counts) == [records.shard_name(split, i, shards) for i in range(shards)]
        assert max(counts.values()) - min(counts.values()) <= 1
        assert ml.manifest(split).shards == counts


def test_manifests_describe_the_data_and_every_shard(ml):
    x, y = labelled_data(per_class=(40, 35, 25), features=5)
    ml.write_csv(x, y)
    assert main(["--instance-count", "2", "--processes-per-host", "2"]) == 0
    assert list_dir(ml.outputs["manifest"]) == ["test.json", "train.json", "validation.json"]
    sizes = {}
    for split in ("train", "validation", "test"):
        manifest = ml.manifest(split)
        assert (manifest.split, manifest.num_features, manifest.num_classes) == (split, 5, 3)
        assert manifest.shards == shard_record_counts(ml.outputs[split])
        sizes[split] = manifest.total_records
    assert sizes == {"train": 70, "validation": 15, "test": 15}


def test_manifests_carry_the_train_split_feature_statistics(ml):
    x, y = labelled_data(per_class=(40, 35, 25), features=5)
    x[:, 2] = 7.0  # a constant feature must not give a zero std
    ml.write_csv(x, y)
    assert main(["--instance-count", "1", "--processes-per-host", "1"]) == 0
    train = ml.manifest("train")
    (shard,) = sorted(os.listdir(ml.outputs["train"]))
    from training_entry.input.examples import parse_batch

    serialized = list(records.read_file_records(os.path.join(ml.outputs["train"], shard)))
    train_x = parse_batch(np.array(serialized, dtype=object), 5)[0].numpy().astype(np.float64)
    np.testing.assert_allclose(train.feature_mean, train_x.mean(axis=0), rtol=1e-5)
    expected_std = train_x.std(axis=0)
    expected_std[2] = 1.0
    np.testing.assert_allclose(train.feature_std, expected_std, rtol=1e-4)
    # Every split's manifest carries the train statistics (never its own).
    assert ml.manifest("test").feature_mean == train.feature_mean
    round_trip = records.Manifest.load(os.path.join(ml.outputs["manifest"], "train.json"))
    assert round_trip == train


def test_every_record_lands_in_exactly_one_split_unchanged(ml):
    x, y = labelled_data()
    ml.write_csv(x, y)
    assert main(["--processes-per-host", "3"]) == 0
    parts = [ml.read_split(split) for split in ("train", "validation", "test")]
    got = np.concatenate([np.column_stack([px, py]) for px, py in parts])
    want = np.column_stack([x.astype(np.float32), y])
    assert np.array_equal(got[np.lexsort(got.T)], want[np.lexsort(want.T)])
    train_labels = parts[0][1]
    assert not np.all(np.diff(train_labels) >= 0), "the raw file is sorted by label; train must not be"


def test_csv_exports_with_a_bom_quotes_blank_lines_and_spaces_are_read(ml):
    (ml.raw_dir / "export.CSV").write_bytes(
        b'\xef\xbb\xbf"f0", f1 ,label\r\n' + b"".join(
            f'"{i}.5", {i % 7} ,{i % 3}\r\n\r\n'.encode() for i in range(30)
        )
    )
    assert main([]) == 0
    got = sorted(
        (*features, label)
        for split in ("train", "validation", "test")
        for features, label in zip(*ml.read_split(split), strict=True)
    )
    assert got == sorted((i + 0.5, i % 7, i % 3) for i in range(30))


def test_csv_and_npz_of_the_same_data_give_identical_bytes(tmp_path, monkeypatch):
    x, y = labelled_data()
    from_csv, from_npz = MlTree(tmp_path / "csv"), MlTree(tmp_path / "npz")
    from_csv.write_csv(x, y)
    from_npz.write_npz(x, y)
    assert run_preprocess(from_csv, monkeypatch, "--processes-per-host", 2) == 0
    assert run_preprocess(from_npz, monkeypatch, "--processes-per-host", 2) == 0
    assert from_csv.output_files() == from_npz.output_files()


def test_same_seed_gives_identical_bytes_and_another_seed_does_not(tmp_path, monkeypatch):
    x, y = labelled_data()
    trees = [MlTree(tmp_path / name) for name in ("a", "b", "c")]
    for tree, seed in zip(trees, (5, 5, 6), strict=True):
        tree.write_npz(x, y)
        assert run_preprocess(tree, monkeypatch, "--seed", seed, "--processes-per-host", 2) == 0
    a, b, c = (tree.output_files() for tree in trees)
    assert a == b
    assert a["train/train-00000-of-00002.tfrecord"] != c["train/train-00000-of-00002.tfrecord"]


@pytest.mark.parametrize("hosts, instances, per_host", [(2, 2, 2), (3, 2, 2), (5, 1, 3)])
def test_hosts_write_disjoint_shards_whose_union_is_the_single_host_output(
    tmp_path, monkeypatch, hosts, instances, per_host
):
    x, y = labelled_data()
    args = ("--instance-count", instances, "--processes-per-host", per_host)
    single = MlTree(tmp_path / "single")
    single.write_csv(x, y)
    assert run_preprocess(single, monkeypatch, *args) == 0

    union: dict[str, bytes] = {}
    for host in range(hosts):
        tree = MlTree(tmp_path / f"algo-{host + 1}")
        tree.write_csv(x, y)
        tree.set_hosts(host, hosts)
        assert run_preprocess(tree, monkeypatch, *args) == 0
        files = tree.output_files()
        assert not set(files) & set(union), "two hosts wrote the same key"
        has_manifests = any(name.startswith("manifest/") for name in files)
        assert has_manifests == (host == 0)
        for name in files:
            if name.endswith(".tfrecord"):
                index = int(name.split("-")[1])
                assert index % hosts == host
        union.update(files)
    assert union == single.output_files()


def test_write_shards_writes_only_the_asked_shards_but_counts_all(tmp_path):
    x, y = labelled_data(per_class=(6, 5))
    counts = write_shards(str(tmp_path), "train", x, y, 4, only={1, 3})
    assert counts == {records.shard_name("train", i, 4): n for i, n in enumerate((3, 3, 3, 2))}
    assert list_dir(tmp_path) == [records.shard_name("train", i, 4) for i in (1, 3)]
    assert shard_record_counts(tmp_path) == {name: counts[name] for name in list_dir(tmp_path)}


def test_summary_names_the_splits_and_the_shards(ml, capsys):
    ml.write_csv(*labelled_data())
    assert main(["--processes-per-host", "2"]) == 0
    out = capsys.readouterr().out
    assert "100 records from data.csv (4 features, 3 classes) -> train 70, validation 15, test 15" in out
    assert "2 shards per split, host 1/1 wrote 2 of them and the manifests in" in out


def container_env(base: Path) -> dict[str, str]:
    # SageMaker: the definition runs `python3 -m processing.preprocess` with PYTHONPATH set to
    # the code dir; here the repository stands in for it.
    env = {k: v for k, v in os.environ.items() if k != BASE_DIR_ENV}
    return {**env, BASE_DIR_ENV: str(base), "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "2"}


def test_runs_as_the_container_runs_it(tmp_path):
    tree = MlTree(tmp_path / "ml")
    tree.write_csv(*labelled_data())
    args = ["--instance-count", "2", "--processes-per-host", "2", "--seed", "7"]
    done = subprocess.run(
        [sys.executable, "-m", "processing.preprocess", *args],
        env=container_env(tree.base), cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "-> train 70, validation 15, test 15; 4 shards per split" in done.stdout
    assert len(list_dir(tree.outputs["train"])) == 4
    assert not tree.message.exists()


def test_a_refusal_as_the_container_sees_it(tmp_path):
    tree = MlTree(tmp_path / "ml")
    done = subprocess.run(
        [sys.executable, "-m", "processing.preprocess"],
        env=container_env(tree.base), cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 1
    message = tree.message.read_text()
    assert message.startswith(f"no raw data: {tree.raw_dir} has no .csv or .npz file")
    assert done.stderr.strip().splitlines()[-1] == f"preprocess: {message}"
    assert "Traceback" not in done.stderr
    assert tree.leftovers() == []
