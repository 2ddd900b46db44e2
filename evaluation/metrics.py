"""Classification metrics accumulated batch by batch: accuracy, loss, confusion matrix,
per-class precision/recall/F1 and top-k accuracy. Python 3.10 syntax.

Precision of a class the model never predicts is 0 (as scikit-learn's zero_division=0), and so
is the F1 of a class with precision and recall both 0.
"""

from __future__ import annotations

import numpy as np

from evaluation import report

# Keras' backend epsilon: its crossentropy clips probabilities to [EPSILON, 1 - EPSILON].
EPSILON = 1e-7


def keras_crossentropy(labels: np.ndarray, probabilities: np.ndarray) -> np.ndarray:
    """``tf.keras.losses.sparse_categorical_crossentropy(labels, probabilities)`` in NumPy, so the
    PyTorch room (no TensorFlow) reports the same loss: Keras clips to [EPSILON, 1 - EPSILON],
    takes the log, and its softmax cross-entropy renormalises the clipped row."""
    clipped = np.clip(probabilities.astype(np.float32), np.float32(EPSILON), np.float32(1 - EPSILON))
    picked = clipped[np.arange(len(labels)), labels.astype(np.int64)]
    return (np.log(clipped.sum(axis=1, dtype=np.float32)) - np.log(picked)).astype(np.float32)


def top_k_for(classes: int) -> int:
    """k for top-k accuracy: ``report.TOP_K``, below the class count (k = classes is always 1)."""
    return max(1, min(report.TOP_K, classes - 1))


class Scores:
    def __init__(self) -> None:
        self.records = 0
        self.loss_sum = 0.0
        self.confusion: np.ndarray | None = None  # [true label, predicted label] -> records
        self.k = 0
        self.top_k_hits = 0

    def add(self, labels: np.ndarray, probabilities: np.ndarray) -> None:
        classes = probabilities.shape[1]
        if self.confusion is None:
            self.confusion = np.zeros((classes, classes), dtype=np.int64)
            self.k = top_k_for(classes)
        # Keras' own loss (its clipping included), so the report's loss is model.evaluate's.
        losses = keras_crossentropy(labels, probabilities)
        predicted = np.argmax(probabilities, axis=1)
        np.add.at(self.confusion, (labels, predicted), 1)
        # Stable sort on -p: ties go to the lower label, as argmax does.
        top = np.argsort(-probabilities, axis=1, kind="stable")[:, : self.k]
        self.top_k_hits += int((top == labels[:, None]).any(axis=1).sum())
        self.records += len(labels)
        self.loss_sum += float(np.sum(losses, dtype=np.float64))

    @property
    def support(self) -> np.ndarray:
        return self.confusion.sum(axis=1)

    @property
    def correct(self) -> np.ndarray:
        return np.diag(self.confusion)

    def per_class(self, class_names: list[str] | None = None) -> dict[str, dict]:
        """label -> support, correct, precision, recall, f1 (and class_name when given)."""
        predicted = self.confusion.sum(axis=0)
        out = {}
        for label, (support, correct, guessed) in enumerate(zip(self.support, self.correct, predicted, strict=True)):
            precision = correct / guessed if guessed else 0.0
            recall = correct / support if support else 0.0
            f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
            entry = {"support": int(support), "correct": int(correct)}
            if class_names is not None:
                entry["class_name"] = class_names[label]
            entry.update(precision=float(precision), recall=float(recall), f1=float(f1))
            out[str(label)] = entry
        return out

    def to_report(
        self,
        kind: str = report.KIND_TABLE,
        class_names: list[str] | None = None,
        misclassified: list[dict] | None = None,
    ) -> dict:
        return report.build_report(
            int(self.correct.sum()) / self.records,
            self.loss_sum / self.records,
            self.records,
            self.per_class(class_names),
            kind=kind,
            top_k=(self.k, self.top_k_hits / self.records),
            confusion_matrix=self.confusion.tolist(),
            class_names=class_names,
            misclassified=misclassified,
        )
