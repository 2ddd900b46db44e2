"""Which encoding of a photo record decodes and augments fastest per core (issue 39): the
photo's original bytes against copies stored nearer the training size, keeping the aspect.

Synthetic photographs of a realistic size (500x375 JPEG quality 90, ~100 KB: smooth gradients,
shapes, sensor-like noise; ``tests/pipeline/costs/advisor/test_gpu_advise.write_photos``) go
through the training path's map (``training_entry.input.images.parse_example``, training=True,
crop_flip, ``--image-size`` px) on one thread, the records' bytes in memory, as the advisor's
input ceiling measures a core (``training_entry/input/rate.py``). Candidates:

- ``original``: the bytes as the photographer saved them (what processing writes today);
- ``jpeg<Q>_<side>``: re-encoded JPEG at quality Q, the short side at ``side`` px (the
  training size, or the training size x the crop margin, 1.125), aspect kept;
- ``..._fastidct``: the same bytes decoded with libjpeg's fast integer IDCT
  (``decode_jpeg(dct_method="INTEGER_FAST")``; the training path's ``decode_image`` uses the
  accurate one);
- ``raw_<side>``: the same pixels as raw uint8 (no decode at all; 3 bytes a pixel, so the shards
  grow: the bytes per record are printed beside).

Rates are images per CPU second of the process (one thread works), so other processes on the
shared machine do not count against a candidate; repetitions are interleaved and each
candidate's best is taken. RESULT ``input_resized_vs_original_per_core``: what processing stores by default
(``processing_resized``: ``processing.images.resized_jpeg``, short side at the training size x
1.125, JPEG q90) over the original (target >= 2.5; naive 256 px q95 records gave 2.0).
Then the accuracy effect: small_cnn trained on each (``--accuracy-photos``, at
``--accuracy-size`` px), tested on its own test records, and the resized model on the test
photos' original files as serving receives them (RESULT ``input_resized_accuracy``,
``input_original_accuracy``, ``input_resized_served_originals_accuracy``).

    .venv/bin/python -m benchmarks.input.resized_records [--image-size 224] [--photos 48] [--repeats 3]
"""

from __future__ import annotations

import argparse
import math
import os
import time

from benchmarks import harness as h

BATCH = 16


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="benchmarks.input.resized_records", description=__doc__.splitlines()[0])
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument("--photos", type=int, default=48)
    parser.add_argument("--seconds", type=float, default=1.0, help="per candidate per repetition")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--accuracy-photos", type=int, default=120, help="0: no accuracy comparison")
    parser.add_argument("--accuracy-size", type=int, default=64)
    parser.add_argument("--accuracy-epochs", type=int, default=10)
    parser.add_argument("--accuracy-contrast", type=float, default=0.4,
                        help="how far apart the classes' colours are (write_photos): low enough not to saturate")
    args = parser.parse_args(argv)
    for name in ("TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS", "OMP_NUM_THREADS"):
        os.environ[name] = "1"
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tempfile
    from pathlib import Path

    import tensorflow as tf

    from processing.images import resized_jpeg
    from tests.pipeline.costs.advisor.test_gpu_advise import write_photos
    from training_entry.input import images

    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    size = args.image_size
    with tempfile.TemporaryDirectory(prefix="resized-records-") as tmp:
        write_photos(Path(tmp), per_class=max(args.photos // 2, 1))
        originals = [p.read_bytes() for p in sorted(Path(tmp).rglob("*.jpg"))]

    def shrunk(data: bytes, side: int) -> tf.Tensor:
        """Decoded, resized so the short side is ``side`` (aspect kept), uint8."""
        image = tf.io.decode_jpeg(data, channels=3)
        height, width = int(image.shape[0]), int(image.shape[1])
        scale = side / min(height, width)
        target = [max(side, round(height * scale)), max(side, round(width * scale))]
        return tf.cast(tf.clip_by_value(tf.round(tf.image.resize(image, target, antialias=True)), 0, 255), tf.uint8)

    margin = math.ceil(size * images.CROP_MARGIN)
    candidates: dict[str, tuple[list[bytes], str]] = {"original": (originals, "encoded")}
    for side in (size, margin):
        for quality in (90, 95):
            candidates[f"jpeg{quality}_{side}"] = (
                [tf.io.encode_jpeg(shrunk(d, side), quality=quality).numpy() for d in originals], "encoded")
    # What processing writes by default (ImageRecords=resized): processing.images.resized_jpeg.
    candidates["processing_resized"] = ([resized_jpeg(d, margin)[0] for d in originals], "encoded")
    candidates[f"jpeg90_{margin}_fastidct"] = (candidates[f"jpeg90_{margin}"][0], "fast")
    candidates["original_fastidct"] = (originals, "fast")
    raw = [shrunk(d, margin) for d in originals]
    candidates[f"raw_{margin}"] = ([t.numpy().tobytes() for t in raw], "raw")
    shapes = {tuple(t.shape) for t in raw}
    assert len(shapes) == 1, shapes  # the synthetic photos share one size
    raw_shape = list(shapes.pop())

    options = tf.data.Options()
    options.threading.private_threadpool_size = 1
    options.threading.max_intra_op_parallelism = 1

    def raw_image(data: tf.Tensor) -> tf.Tensor:
        # A real record would carry its height and width beside the bytes (the image records
        # already do: records.FEATURE_HEIGHT/WIDTH); here every photo has one shape.
        return tf.reshape(tf.io.decode_raw(data, tf.uint8), raw_shape)

    def iterator(blobs: list[bytes], kind: str):
        ds = tf.data.Dataset.from_tensor_slices(blobs).repeat()
        if kind == "raw":
            decode = lambda b: images.augment(raw_image(b), size, "crop_flip")  # noqa: E731
        elif kind == "fast":  # libjpeg's fast integer IDCT instead of decode_image's accurate one
            decode = lambda b: images.augment(  # noqa: E731
                tf.io.decode_jpeg(b, channels=3, dct_method="INTEGER_FAST"), size, "crop_flip")
        else:
            decode = lambda b: images.augment(images.decode(b), size, "crop_flip")  # noqa: E731
        it = iter(ds.map(decode, num_parallel_calls=1).batch(BATCH).with_options(options))
        next(it)
        return it

    iterators = {name: iterator(blobs, kind) for name, (blobs, kind) in candidates.items()}

    def rate_of(name: str):
        def rate() -> float:
            # Per CPU second of this process (one thread does the work): what a core of its own
            # delivers, whatever else the shared machine runs meanwhile.
            it, started, cpu, done = iterators[name], time.perf_counter(), time.process_time(), 0
            while time.perf_counter() - started < args.seconds:
                next(it)
                done += BATCH
            return done / max(time.process_time() - cpu, 1e-9)
        return rate

    h.say(f"photo records, decode + {size} px crop_flip on 1 core: {len(originals)} synthetic 500x375 photos, "
          f"{args.repeats} interleaved repetitions, best of each (machine may be shared)")
    rates = h.interleave({name: rate_of(name) for name in candidates}, args.repeats)
    base = h.best(rates["original"])
    for name, (blobs, _) in candidates.items():
        kb = sum(len(b) for b in blobs) / len(blobs) / 1024
        h.say(f"  {name:20s} {h.best(rates[name]):8.0f} images/s per core  x{h.best(rates[name]) / base:4.2f}  "
              f"{kb:6.1f} KB per record")
    h.result("input_resized_vs_original_per_core", h.best(rates["processing_resized"]) / base, ">=2.5")
    h.result("input_raw_vs_original_per_core", h.best(rates[f"raw_{margin}"]) / base, "-")
    if args.accuracy_photos:
        _accuracy(args, tf, images, resized_jpeg)
    return 0


def _accuracy(args, tf, images, resized_jpeg) -> None:
    """small_cnn trained on each encoding's records (the training path's map: decode,
    antialiased resize, crop_flip), tested on its own test records as evaluation does; the
    resized model also on the test photos' original files, as serving gets them."""
    import tempfile
    from pathlib import Path

    import numpy as np

    from tests.pipeline.costs.advisor.test_gpu_advise import write_photos
    from training_entry.model import architectures

    size = args.accuracy_size
    side = math.ceil(size * images.CROP_MARGIN)
    with tempfile.TemporaryDirectory(prefix="resized-accuracy-") as tmp:
        write_photos(Path(tmp), per_class=args.accuracy_photos // 2, seed=1, contrast=args.accuracy_contrast)
        files = sorted(Path(tmp).rglob("*.jpg"))
        blobs = [p.read_bytes() for p in files]
        labels = np.array([0 if p.parent.name == "ants" else 1 for p in files])
    order = np.random.default_rng(0).permutation(len(blobs))
    test, train = order[: len(order) // 3], order[len(order) // 3:]
    encodings = {"original": blobs, "resized": [resized_jpeg(b, side)[0] for b in blobs]}

    def pixels(encoded: list[bytes]) -> np.ndarray:
        return np.stack([images.resize(images.decode(b), size).numpy() for b in encoded])

    accuracy = {}
    for name, encoded in encodings.items():
        tf.keras.utils.set_random_seed(0)
        ds = (tf.data.Dataset.from_tensor_slices(([encoded[i] for i in train], labels[train]))
              .shuffle(len(train), seed=0).map(lambda b, y: (images.augment(images.decode(b), size, "crop_flip"), y))
              .batch(16))
        model = architectures.small_cnn(size, 2)
        model.compile(optimizer=tf.keras.optimizers.legacy.Adam(0.002), loss="sparse_categorical_crossentropy")
        model.fit(ds, epochs=args.accuracy_epochs, verbose=0)
        predicted = model.predict(pixels([encoded[i] for i in test]), verbose=0).argmax(axis=1)
        accuracy[name] = float((predicted == labels[test]).mean())
        if name == "resized":
            served = model.predict(pixels([blobs[i] for i in test]), verbose=0).argmax(axis=1)
            accuracy["resized_served_originals"] = float((served == labels[test]).mean())
    h.say(f"accuracy, small_cnn at {size} px, {len(train)} train / {len(test)} test photos, "
          f"{args.accuracy_epochs} epochs: " + ", ".join(f"{k} {v:.3f}" for k, v in accuracy.items()))
    h.result("input_resized_accuracy", accuracy["resized"], "-")
    h.result("input_original_accuracy", accuracy["original"], "-")
    h.result("input_resized_served_originals_accuracy", accuracy["resized_served_originals"], "-")


if __name__ == "__main__":
    raise SystemExit(main())
