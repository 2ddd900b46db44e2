"""A job's log lines and metrics: every process writes its own log file; a tailer streams the
lines to the terminal and the job's ``job.log`` with ``[algo-K rank R]`` prefixes, applies the
job's metric regexes, and keeps each file's last lines for failure reasons."""

from __future__ import annotations

import re
import sys
import threading
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path


def now_iso(t: float | None = None) -> str:
    return datetime.fromtimestamp(time.time() if t is None else t, timezone.utc).isoformat(timespec="seconds")


class Sink:
    """Where a job's prefixed lines go: its log file, and the terminal unless quiet."""

    def __init__(self, log_path: Path, echo: bool = True, stream=None):
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self.file = open(log_path, "a", encoding="utf-8", errors="replace")  # noqa: SIM115 (closed by close())
        self.echo = echo
        self.stream = stream
        self.lock = threading.Lock()

    def line(self, text: str, echo: bool = True) -> None:
        """``text`` into the log; onto the terminal too unless quiet or ``echo`` is False."""
        with self.lock:
            self.file.write(text + "\n")
            self.file.flush()
            if self.echo and echo:
                stream = self.stream or sys.stdout
                try:
                    stream.write(text + "\n")
                    stream.flush()
                except (OSError, ValueError):  # the terminal hung up (EIO) or was closed
                    self.echo = False  # the log file still gets every line

    def close(self) -> None:
        self.file.close()


class Metrics:
    """SageMaker: MetricDefinitions regexes applied to every log line; the first group is the
    value (lines where it is not a number are skipped). Every match is kept in order, which for
    a script that prints one line per epoch is the per-epoch series."""

    def __init__(self, definitions: list[dict]):
        self.definitions = [(d["Name"], re.compile(d["Regex"])) for d in definitions or []]
        self.series: dict[str, list[dict]] = {name: [] for name, _ in self.definitions}
        self.lock = threading.Lock()

    def feed(self, line: str, source: str) -> None:
        for name, regex in self.definitions:
            match = regex.search(line)
            if not match:
                continue
            try:
                value = float(match.group(1) if match.groups() else match.group(0))
            except ValueError:
                continue
            with self.lock:
                self.series[name].append({"value": value, "timestamp": now_iso(), "source": source})

    def final(self) -> list[dict]:
        """SageMaker: FinalMetricDataList, the last value of each metric."""
        return [
            {"MetricName": name, "Value": points[-1]["value"], "Timestamp": points[-1]["timestamp"]}
            for name, points in self.series.items() if points
        ]

    def summary(self) -> dict[str, float]:
        return {m["MetricName"]: m["Value"] for m in self.final()}


class LogTailer(threading.Thread):
    """Follows every ``*.log`` in a folder, emitting whole lines with a prefix per file."""

    def __init__(self, directory: Path, prefix: Callable[[str], str | None], sink: Sink, metrics: Metrics,
                 shown: Callable[[str], bool] = lambda stem: True):
        super().__init__(name=f"tail-{directory}", daemon=True)
        self.directory = Path(directory)
        self.prefix = prefix
        # Whether a file's lines reach the terminal now (they always reach the job's log):
        # once a rank has failed, the other ranks' echoes of it and mpirun's report are noise.
        self.shown = shown
        self.sink = sink
        self.metrics = metrics
        self.offsets: dict[Path, int] = {}
        self.partial: dict[Path, bytes] = {}
        self.tails: dict[str, list[str]] = {}  # file stem -> last lines, for failure reasons
        self.stop_event = threading.Event()

    def run(self) -> None:
        while not self.stop_event.is_set():
            self.drain()
            self.stop_event.wait(0.1)

    def stop(self) -> None:
        self.stop_event.set()
        self.join(5)
        self.drain(final=True)

    def drain(self, final: bool = False) -> None:
        for path in sorted(self.directory.glob("*.log")):
            label = self.prefix(path.stem)
            if label is None:
                continue
            try:
                with open(path, "rb") as f:
                    f.seek(self.offsets.get(path, 0))
                    data = f.read()
            except OSError:
                continue
            if not data and not (final and self.partial.get(path)):
                continue
            self.offsets[path] = self.offsets.get(path, 0) + len(data)
            data = self.partial.pop(path, b"") + data
            lines = data.split(b"\n")
            rest = lines.pop()
            if rest and final:
                lines.append(rest)
            elif rest:
                self.partial[path] = rest
            show = self.shown(path.stem)
            for raw in lines:
                text = raw.decode("utf-8", errors="replace").rstrip("\r")
                self.sink.line(f"[{label}] {text}", echo=show)
                self.metrics.feed(text, label)
                tail = self.tails.setdefault(path.stem, [])
                tail.append(text)
                del tail[:-20]

    def last_line(self, stem: str) -> str | None:
        for text in reversed(self.tails.get(stem, [])):
            if text.strip():
                return text.strip()
        return None


