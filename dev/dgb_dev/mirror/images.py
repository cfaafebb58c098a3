"""Image encoders of the mirror: tiny valid JPEG and PNG files of one flat colour, written with the
standard library alone, so pages' image URLs return real images and nothing is stored on disk."""

from __future__ import annotations

import struct
import zlib


def _huffman_codes(counts: list[int], symbols: list[int]) -> dict[int, tuple[int, int]]:
    codes, code, k = {}, 0, 0
    for length, n in enumerate(counts, start=1):
        for _ in range(n):
            codes[symbols[k]] = (code, length)
            code, k = code + 1, k + 1
        code <<= 1
    return codes


def make_jpeg(level: int, size: int = 16) -> bytes:
    """A valid baseline greyscale JPEG of one flat colour (quant table of 1s, DC-only blocks)."""

    def seg(marker: int, payload: bytes) -> bytes:
        return bytes([0xFF, marker]) + struct.pack(">H", len(payload) + 2) + payload

    dc_counts, dc_syms = [0, 1, 5, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0], list(range(12))
    ac_counts, ac_syms = [1] + [0] * 15, [0]  # a single symbol: end-of-block
    dc_codes = _huffman_codes(dc_counts, dc_syms)
    bits: list[int] = []

    def put(value: int, length: int) -> None:
        bits.extend((value >> i) & 1 for i in range(length - 1, -1, -1))

    prev, dc = 0, 8 * (max(0, min(255, level)) - 128)
    for _ in range((size // 8) ** 2):
        diff, prev = dc - prev, dc
        cat = abs(diff).bit_length()
        put(*dc_codes[cat])
        if cat:
            put(diff if diff > 0 else diff + (1 << cat) - 1, cat)
        put(0, 1)  # EOB
    bits.extend([1] * (-len(bits) % 8))
    data = bytearray()
    for i in range(0, len(bits), 8):
        byte = int("".join(map(str, bits[i : i + 8])), 2)
        data.append(byte)
        if byte == 0xFF:
            data.append(0)
    return b"".join(
        [
            b"\xff\xd8",
            seg(0xE0, b"JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"),
            seg(0xDB, b"\x00" + bytes([1] * 64)),
            seg(0xC0, struct.pack(">BHHB", 8, size, size, 1) + bytes([1, 0x11, 0])),
            seg(
                0xC4,
                b"\x00" + bytes(dc_counts) + bytes(dc_syms) + b"\x10" + bytes(ac_counts) + bytes(ac_syms),
            ),
            seg(0xDA, bytes([1, 1, 0x00, 0, 63, 0])),
            bytes(data),
            b"\xff\xd9",
        ]
    )


def make_png(rgb: tuple[int, int, int], size: int = 16) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    raw = b"".join(b"\x00" + bytes(rgb) * size for _ in range(size))
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )
