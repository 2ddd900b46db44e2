"""``tf.train.Example`` records read without TensorFlow: the protobuf wire format of the three
messages the processing step writes (``training_entry/input/examples.py``), decoded by hand.

    Example  { Features features = 1; }
    Features { map<string, Feature> feature = 1; }        (map entries: key = 1, value = 2)
    Feature  { oneof kind { BytesList bytes_list = 1; FloatList float_list = 2; Int64List int64_list = 3; } }
    BytesList { repeated bytes value = 1; }  FloatList { repeated float value = 1 [packed]; }
    Int64List { repeated int64 value = 1 [packed]; }

(tensorflow/core/example/example.proto and feature.proto.) The PyTorch image has no TensorFlow,
and protobuf's generated classes would need TensorFlow's .proto files: 60 lines of wire format
are the smaller dependency. Standard library only.
"""

from __future__ import annotations

import struct

Value = list  # list[bytes] | list[float] | list[int]


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data):
            raise ValueError("truncated varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise ValueError("varint longer than 64 bits")


def _fields(data: bytes):
    """(field number, wire type, value) of one message: bytes for length-delimited fields,
    an int for varints, raw bytes for fixed32/64."""
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(data, pos)
        elif wire == 2:
            size, pos = _varint(data, pos)
            if pos + size > len(data):
                raise ValueError("truncated length-delimited field")
            value, pos = data[pos:pos + size], pos + size
        elif wire == 5:
            value, pos = data[pos:pos + 4], pos + 4
        elif wire == 1:
            value, pos = data[pos:pos + 8], pos + 8
        else:
            raise ValueError(f"wire type {wire} is not used by tf.train.Example")
        yield number, wire, value


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _feature(data: bytes) -> Value:
    for number, _, body in _fields(data):
        if number == 1:  # BytesList
            return [v for n, _, v in _fields(body) if n == 1]
        if number == 2:  # FloatList: packed (wire 2) or not (wire 5)
            out: list[float] = []
            for n, wire, v in _fields(body):
                if n == 1:
                    out.extend(struct.unpack(f"<{len(v) // 4}f", v) if wire == 2 else struct.unpack("<f", v))
            return out
        if number == 3:  # Int64List: packed (wire 2) or not (wire 0)
            out_i: list[int] = []
            for n, wire, v in _fields(body):
                if n != 1:
                    continue
                if wire == 0:
                    out_i.append(_signed(v))
                else:
                    pos = 0
                    while pos < len(v):
                        item, pos = _varint(v, pos)
                        out_i.append(_signed(item))
            return out_i
    return []


def parse_example(record: bytes) -> dict[str, Value]:
    """Feature name -> its values, from one serialized ``tf.train.Example``."""
    features: dict[str, Value] = {}
    for number, _, body in _fields(record):
        if number != 1:
            continue
        for entry_number, _, entry in _fields(body):
            if entry_number != 1:
                continue
            key, value = None, b""
            for n, _, v in _fields(entry):
                if n == 1:
                    key = v.decode("utf-8")
                elif n == 2:
                    value = v
            if key is not None:
                features[key] = _feature(value)
    return features
