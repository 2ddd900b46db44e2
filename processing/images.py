"""An image tree in RAW_DATA_DIR -> checked, split and written as shards of the encoded files.

The tree is ``<class name>/<file>.{jpg,jpeg,png}`` (files may sit deeper below their class
folder); labels are the indices of the sorted class names. Every image this host writes is
read and decoded (TensorFlow's decoders, the ones training uses; one thread per CPU) before
any shard is written;
the shards then hold each file's bytes unchanged (``examples.serialize_image``), or, given a
stored size (``stored_side``), an image larger than it resized to that short side (aspect
kept) and re-encoded as JPEG; streamed one file at a time, so memory does not grow with the
images' total size: only the list of paths and two integers per image (its height and width)
are held.

Every refusal is a ``DataError``: one line naming the file or class and the fix.
Python 3.10 syntax (SageMaker's TF 2.14 py310 image).
"""

from __future__ import annotations

import os
import re
from collections.abc import Collection, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import tensorflow as tf

from processing import contract
from processing.rawdata import DataError
from processing.split import MIN_RECORDS_PER_CLASS, SPLITS, shard_bounds
from training_entry.input import examples, records

# Failures named in the message besides the first one (the user fixes them all in one go).
_LISTED_FAILURES = 3
# Images handed to the decoding threads at a time (bounds the pending work, not the speed).
_BLOCK = 256
# Magic numbers: what a file is, whatever its name says.
_JPEG_MAGIC = b"\xff\xd8\xff"
_PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
_OTHER_MAGIC = {b"GIF8": "a GIF", b"BM": "a BMP", b"RIFF": "a WebP (or other RIFF)", b"II*\x00": "a TIFF",
                b"MM\x00*": "a TIFF"}
_TF_NOISE = re.compile(r"\{\{[^}]*\}\}\s*|\s*\[Op:[^\]]*\]")


@dataclass(frozen=True)
class ImageTree:
    root: str
    class_names: tuple[str, ...]  # sorted; label i is class_names[i]
    paths: tuple[str, ...]  # relative to root, '/'-separated, sorted
    labels: np.ndarray  # (images,) int64
    # Given splits (``<split>/<class>/<file>``): split -> image indices; None: one tree to split.
    given: dict[str, np.ndarray] | None = None

    @property
    def num_classes(self) -> int:
        return len(self.class_names)

    def path(self, index: int) -> str:
        return os.path.join(self.root, *self.paths[index].split("/"))


def has_images(directory: str) -> bool:
    """Whether any non-hidden file below ``directory`` has an image extension (the step then
    treats the input as an image tree; otherwise as one table file, as before images)."""
    return any(key.lower().endswith(contract.IMAGE_EXTENSIONS) for key in _keys(directory))


def _keys(directory: str) -> Iterable[str]:
    for root, dirs, files in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        relative = os.path.relpath(root, directory)
        for name in sorted(files):
            if not name.startswith("."):
                yield name if relative == "." else f"{relative.replace(os.sep, '/')}/{name}"


def list_image_tree(directory: str) -> ImageTree:
    """Walk ``directory``; refuse anything that is not a usable image tree (before reading
    any image): a mix with table files, loose or non-image files, an empty or too small
    class, a single class, a refused split layout (``contract.data_kind``)."""
    keys = list(_keys(directory))
    try:
        kind = contract.data_kind(keys)
        given = contract.image_splits([k.split("/") for k in keys])
    except contract.DataKindError as e:
        raise DataError(f"{directory}: {e}") from None
    if kind != records.KIND_IMAGE:  # pragma: no cover - the caller checked has_images
        raise DataError(f"{directory} holds a table, not an image tree")
    by_class: dict[str, int] = {}
    for top in _folders(directory):
        for folder in (_folders(os.path.join(directory, top)) if given else [top]):
            by_class.setdefault(folder, 0)
            where = f"{top}/{folder}" if given else folder
            if not any(k.startswith(where + "/") for k in keys):
                raise DataError(
                    f"class folder {directory}/{where} holds no {'/'.join(contract.IMAGE_EXTENSIONS)} "
                    f"images; add images of '{folder}' or remove the folder"
                )
    for key in keys:
        by_class[contract.class_of(key, given)] += 1
    class_names = tuple(sorted(by_class))
    if len(class_names) < 2:
        raise DataError(
            f"{directory} has a single class folder ('{class_names[0]}'); a classifier needs at "
            f"least 2: add a folder of images for each class"
        )
    for name in class_names if not given else ():  # given splits: checked when carving
        if by_class[name] < MIN_RECORDS_PER_CLASS:
            raise DataError(
                f"class '{name}' ({directory}/{name}) has {by_class[name]} image(s), too few to "
                f"appear in every split ({'/'.join(SPLITS)}); each class needs at least "
                f"{MIN_RECORDS_PER_CLASS}: add images of '{name}' or remove the folder"
            )
    label_of = {name: i for i, name in enumerate(class_names)}
    labels = np.fromiter((label_of[contract.class_of(k, given)] for k in keys), dtype=np.int64, count=len(keys))
    splits = None
    if given:
        of_key = np.array([contract.split_of(k.split("/", 1)[0]) for k in keys])
        splits = {split: np.flatnonzero(of_key == split) for split in SPLITS if (of_key == split).any()}
    return ImageTree(directory, class_names, tuple(keys), labels, splits)


def _folders(directory: str) -> list[str]:
    return sorted(
        name for name in os.listdir(directory)
        if not name.startswith(".") and os.path.isdir(os.path.join(directory, name))
    )


# --- Checking: every image decodes ----------------------------------------------------------
def check_images(tree: ImageTree, indices: Iterable[int], workers: int | None = None) -> np.ndarray:
    """Decode each image of ``indices``; returns (images, 2) int64 [height, width], zero for
    images not asked for. Raises one ``DataError`` naming the first failure and counting the
    rest, after trying them all (so one run lists what to fix).

    ``workers`` threads decode at once (default: one per CPU; TensorFlow's decode kernels
    release the GIL), a block of ``_BLOCK`` images at a time so that pending work stays
    bounded whatever the number of images."""
    sizes = np.zeros((len(tree.paths), 2), dtype=np.int64)
    failures: list[tuple[str, str]] = []

    def check(index: int) -> tuple[int, int] | DataError:
        path = tree.path(index)
        try:
            return decoded_size(read_file(path), path)
        except DataError as e:
            return e

    with ThreadPoolExecutor(max_workers=workers or os.cpu_count() or 1) as pool:
        todo = list(indices)
        for start in range(0, len(todo), _BLOCK):
            block = todo[start : start + _BLOCK]
            for index, outcome in zip(block, pool.map(check, block), strict=True):
                if isinstance(outcome, DataError):
                    failures.append((tree.paths[index], str(outcome)))
                else:
                    sizes[index] = outcome
    if failures:
        first, why = failures[0]
        others = [name for name, _ in failures[1 : 1 + _LISTED_FAILURES]]
        more = len(failures) - 1
        rest = (
            f"; {more} more image(s) fail too ({', '.join(others)}{', ...' if more > len(others) else ''})"
            if more
            else ""
        )
        raise DataError(f"{why}{rest}; replace or remove each one under {tree.root}")
    return sizes


def read_file(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise DataError(f"cannot read {path} ({e.strerror or e})") from None


def decoded_size(data: bytes, path: str) -> tuple[int, int]:
    """(height, width) of a JPEG or PNG after a full decode; ``DataError`` if it is not one."""
    if data.startswith(_JPEG_MAGIC):
        decode, kind = tf.io.decode_jpeg, "JPEG"
    elif data.startswith(_PNG_MAGIC):
        decode, kind = tf.io.decode_png, "PNG"
    else:
        what = next((name for magic, name in _OTHER_MAGIC.items() if data.startswith(magic)), None)
        if not data:
            what = "an empty file"
        raise DataError(
            f"{path} is {what or 'not an image'}, not a JPEG or PNG"
            f"{'' if what else f' (it starts {data[:8]!r})'}"
        )
    try:
        shape = decode(data).shape  # the full decode: a header can be fine and the rest truncated
    except (tf.errors.InvalidArgumentError, tf.errors.DataLossError) as e:
        raise DataError(f"{path} does not decode as a {kind} ({_TF_NOISE.sub('', e.message).strip()})") from None
    return int(shape[0]), int(shape[1])


# --- Writing ---------------------------------------------------------------------------------
def stored_side(image_size: int | None, image_records: str) -> int | None:
    """The short side images are stored at (``contract.IMAGE_RECORDS``), or None: as they are."""
    if image_size is None or image_records != contract.IMAGE_RECORDS_RESIZED:
        return None
    if image_size == contract.AUTO_IMAGE_SIZE:
        image_size = contract.AUTO_STORED_IMAGE_SIZE
    return int(np.ceil(image_size * contract.RESIZE_MARGIN))


def resized_jpeg(data: bytes, side: int) -> tuple[bytes, int, int]:
    """The image with its short side at ``side`` px, aspect kept (area-weighted: no aliasing
    when shrinking), as JPEG at ``contract.RESIZED_JPEG_QUALITY``: (bytes, height, width)."""
    image = tf.io.decode_image(data, channels=3, expand_animations=False)
    height, width = int(image.shape[0]), int(image.shape[1])
    scale = side / min(height, width)
    target = [max(side, round(height * scale)), max(side, round(width * scale))]
    resized = tf.image.resize(image, target, method="area")
    pixels = tf.cast(tf.clip_by_value(tf.round(resized), 0, 255), tf.uint8)
    return tf.io.encode_jpeg(pixels, quality=contract.RESIZED_JPEG_QUALITY).numpy(), target[0], target[1]


def write_image_shards(
    directory: str,
    split: str,
    tree: ImageTree,
    order: np.ndarray,
    sizes: np.ndarray,
    shard_count: int,
    only: Collection[int] | None = None,
    side: int | None = None,
) -> tuple[dict[str, int], int]:
    """Like ``preprocess.write_shards`` for images: shard i holds the i-th contiguous run of
    ``order`` (sizes equal +-1); each record is the file's bytes as they are, or, with
    ``side``, an image whose short side is longer than ``side`` resized to it (``resized_jpeg``).
    Returns ({shard name: record count} for every shard, written or not; images resized)."""
    counts, resized = {}, 0
    for index, (start, stop) in enumerate(shard_bounds(len(order), shard_count)):
        name = records.shard_name(split, index, shard_count)
        counts[name] = stop - start
        if only is None or index in only:
            with tf.io.TFRecordWriter(os.path.join(directory, name)) as writer:
                for i in order[start:stop]:
                    label = int(tree.labels[i])
                    height, width = (int(v) for v in sizes[i])
                    data = read_file(tree.path(i))
                    if side is not None and min(height, width) > side:
                        data, height, width = resized_jpeg(data, side)
                        resized += 1
                    writer.write(examples.serialize_image(data, label, tree.class_names[label], height, width))
    return counts, resized


def indices_of_shards(order: dict[str, np.ndarray], shard_count: int, only: Collection[int]) -> list[int]:
    """The image indices that land in the shards ``only`` of every split: what this host
    writes, hence what it must check."""
    mine = []
    for indices in order.values():
        for index, (start, stop) in enumerate(shard_bounds(len(indices), shard_count)):
            if index in only:
                mine.extend(int(i) for i in indices[start:stop])
    return sorted(mine)  # file order: sequential reads on the volume
