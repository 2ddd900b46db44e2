"""A Transform job's records: an input object split (``SplitType``), filtered
(``InputFilter``), packed into requests (``BatchStrategy``, ``MaxPayloadInMB``), and the
answers split back into one output per record, joined with their input (``JoinSource``),
filtered (``OutputFilter``) and assembled (``AssembleWith``), as SageMaker batch transform
does ("Associate Prediction Results with Input Records" in its developer guide).
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass

from pipeline.local.jobs import jsonpath

CSV_TYPE = "text/csv"
JOINED_OUTPUT_KEY = "SageMakerOutput"  # SageMaker: a JSON input record's joined answer
MEGABYTE = 1024 * 1024


@dataclass(frozen=True)
class Settings:
    content_type: str | None
    accept: str | None
    split_type: str  # Line | None (RecordIO and TFRecord are not read locally)
    batch_strategy: str  # SingleRecord | MultiRecord
    max_payload_bytes: int  # 0: no limit (SageMaker: MaxPayloadInMB 0, for streaming)
    assemble_with: str  # Line | None
    input_filter: str
    output_filter: str
    join_input: bool

    @property
    def per_record(self) -> bool:
        """Whether outputs must be matched to their records (join, filter)."""
        return self.join_input or self.output_filter != "$"


def split(data: bytes, split_type: str) -> list[bytes]:
    if split_type == "Line":
        return [line for line in data.splitlines() if line.strip()]
    return [data] if data else []


def _is_csv(content_type: str | None) -> bool:
    return (content_type or "").split(";")[0].strip().lower() == CSV_TYPE


def _parse(record: bytes, content_type: str | None):
    """A record as the filters read it; one that Python's parsers refuse (a CSV value over
    csv's field limit, JSON nested past the recursion limit) is a ValueError naming why."""
    text = record.decode("utf-8")
    try:
        if _is_csv(content_type):
            return next(csv.reader([text]), [])
        return json.loads(text)
    except csv.Error as error:
        raise ValueError(f"a CSV record the filters cannot read: {error} (one value over "
                         f"{csv.field_size_limit()} characters)") from None
    except RecursionError:
        raise ValueError("a JSON record nests deeper than the parser reads (about 1000 levels)") from None


def _serialize(value, content_type: str | None) -> bytes:
    if _is_csv(content_type) and isinstance(value, list) and all(not isinstance(v, (list, dict)) for v in value):
        out = io.StringIO()
        csv.writer(out, lineterminator="").writerow(value)
        return out.getvalue().encode()
    if _is_csv(content_type) and not isinstance(value, (list, dict)):
        return str(value).encode()
    return json.dumps(value, separators=(",", ":")).encode()


def filter_input(record: bytes, settings: Settings) -> bytes:
    if settings.input_filter == "$":
        return record
    value = _parse(record, settings.content_type)
    return _serialize(jsonpath.apply(settings.input_filter, value, "InputFilter"), settings.content_type)


def batches(records: list[bytes], settings: Settings) -> list[list[int]]:
    """Record indices per request: one each (SingleRecord), or as many as fit in
    ``MaxPayloadInMB`` joined by newlines (MultiRecord)."""
    limit = settings.max_payload_bytes
    for index, record in enumerate(records):
        if limit and len(record) > limit:
            raise ValueError(f"record {index + 1} is {len(record) / MEGABYTE:.2f} MB, over MaxPayloadInMB "
                             f"{limit // MEGABYTE}: raise MaxPayloadInMB or split the input (SplitType Line)")
    if settings.batch_strategy != "MultiRecord":
        return [[i] for i in range(len(records))]
    out: list[list[int]] = []
    size = 0
    for index, record in enumerate(records):
        if out and (not limit or size + 1 + len(record) <= limit):
            out[-1].append(index)
            size += 1 + len(record)
        else:
            out.append([index])
            size = len(record)
    return out


def body(records: list[bytes], indices: list[int]) -> bytes:
    return b"\n".join(records[i] for i in indices)


def per_record(answer: bytes, count: int, where: str) -> list:
    """One output per record of a request: TF Serving's ``predictions`` (or ``outputs``)
    list, else the answer's lines, else (one record) the whole answer."""
    try:
        doc = json.loads(answer)
    except (ValueError, RecursionError):
        doc = None
    if isinstance(doc, dict):
        for key in ("predictions", "outputs"):
            if isinstance(doc.get(key), list) and len(doc[key]) == count:
                return doc[key]
    if isinstance(doc, list) and len(doc) == count and count > 1:
        return doc
    lines = [line for line in answer.splitlines() if line.strip()]
    if len(lines) == count and count > 1:
        return [_loads_or_text(line) for line in lines]
    if count == 1:
        return [doc if doc is not None else answer.decode("utf-8", "replace").strip()]
    raise ValueError(f"{where}: the answer to {count} records holds no list of {count} predictions or "
                     f"{count} lines, so JoinSource/OutputFilter cannot match them to their records; "
                     "use BatchStrategy SingleRecord")


def _loads_or_text(line: bytes):
    try:
        return json.loads(line)
    except (ValueError, RecursionError):
        return line.decode("utf-8", "replace")


def joined(record: bytes, output, settings: Settings) -> bytes:
    """One record's output line: joined with its (unfiltered) input and filtered as asked."""
    value = output
    if settings.join_input:
        source = _parse(record, settings.content_type)
        if isinstance(source, dict):
            value = {**source, JOINED_OUTPUT_KEY: output}
        elif isinstance(source, list):
            value = [*source, *(output if isinstance(output, list) else [output])]
        else:
            value = [source, output]
    value = jsonpath.apply(settings.output_filter, value, "OutputFilter")
    return _serialize(value, settings.accept)  # a CSV line where Accept is text/csv, else JSON


def assemble(parts: list[bytes], assemble_with: str) -> bytes:
    """The ``.out`` object: Line puts each part on a line of its own; None concatenates."""
    if assemble_with == "Line":
        return b"".join(p if p.endswith(b"\n") else p + b"\n" for p in parts)
    return b"".join(parts)
