"""A minimal PNG encoder (8-bit grayscale or RGB): standard library only.

``pipeline/`` must not import TensorFlow, and the default image data set has to be written
on a bare machine. The bytes depend only on the pixels (fixed filter and zlib level), so the
same image always has the same S3 ETag and PreprocessData's step cache stays warm.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence

_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_COLOUR_TYPES = {1: 0, 3: 2}  # channels -> PNG colour type (0 grayscale, 2 truecolour)


def encode_png(rows: Sequence[bytes | bytearray], width: int, channels: int = 1) -> bytes:
    """``rows``: one ``bytes`` per scanline, ``width x channels`` samples of 0..255 each."""
    if channels not in _COLOUR_TYPES:
        raise ValueError(f"channels must be 1 (grayscale) or 3 (RGB), not {channels}")
    if width < 1 or not rows:
        raise ValueError(f"a PNG needs at least one row and column (got {len(rows)} x {width})")
    stride = width * channels
    for i, row in enumerate(rows):
        if len(row) != stride:
            raise ValueError(f"row {i} has {len(row)} samples; expected {stride} (width x channels)")
    header = struct.pack(">IIBBBBB", width, len(rows), 8, _COLOUR_TYPES[channels], 0, 0, 0)
    # Filter type 0 (None) on every scanline: simplest, and deterministic.
    raw = b"".join(b"\x00" + bytes(row) for row in rows)
    return (
        _SIGNATURE
        + _chunk(b"IHDR", header)
        + _chunk(b"IDAT", zlib.compress(raw, 9))
        + _chunk(b"IEND", b"")
    )


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
