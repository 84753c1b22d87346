"""Image headers and sizes, without decoding pixels (no pillow here).

A transcript carries images as base64. Counting them means knowing each image's width
and height, which sit in the first bytes of every format lookout accepts (PNG, JPEG,
GIF, WebP), so only a prefix of the base64 is ever decoded. Token costs follow each
provider's published formula (research/memory-mentions.md §3); base64 is never
tokenised as text.
"""

from __future__ import annotations

import binascii
import struct

from lookout_cli.core.dataclass import dataclass
from lookout_cli.core.errors import LookoutError

MEDIA_TYPES = {
    "png": "image/png",
    "jpeg": "image/jpeg",
    "gif": "image/gif",
    "webp": "image/webp",
}


class ImageError(LookoutError):
    """The bytes are not an image lookout can read the size of."""


@dataclass(frozen=True)
class ImageInfo:
    """What an image header says. ``orientation`` is the EXIF tag (JPEG only; 1 = as stored)."""

    format: str  # "png", "jpeg", "gif", "webp"
    media_type: str
    width: int  # as stored, before any EXIF rotation
    height: int
    orientation: int = 1

    @property
    def display_size(self) -> tuple[int, int]:
        """Width and height as shown: EXIF orientations 5-8 swap the sides."""
        if self.orientation in (5, 6, 7, 8):
            return self.height, self.width
        return self.width, self.height


class _NeedMore(Exception):
    """The header runs past the bytes we have; ``need`` is the total length required."""

    def __init__(self, need: int) -> None:
        super().__init__(need)
        self.need = need


def _info(fmt: str, width: int, height: int, orientation: int = 1) -> ImageInfo:
    if width <= 0 or height <= 0:
        raise ImageError(f"{fmt.upper()} header gives an empty size ({width}x{height})")
    return ImageInfo(fmt, MEDIA_TYPES[fmt], width, height, orientation)


def _need(data: bytes, end: int) -> None:
    if len(data) < end:
        raise _NeedMore(end)


def _png(data: bytes) -> ImageInfo:
    # Chunks after the 8-byte signature; IHDR is first, except in Apple's CgBI variant.
    pos = 8
    for _ in range(4):
        _need(data, pos + 8)
        length, kind = struct.unpack(">I4s", data[pos : pos + 8])
        if kind == b"IHDR":
            _need(data, pos + 16)
            width, height = struct.unpack(">II", data[pos + 8 : pos + 16])
            return _info("png", width, height)
        pos += 12 + length
    raise ImageError("PNG has no IHDR chunk at its start")


# SOF0-SOF15 carry the frame size; C4 (DHT), C8 (JPG) and CC (DAC) share the range.
_SOF = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}
# Markers that stand alone, without a length: TEM, RST0-7.
_STANDALONE = frozenset([0x01, *range(0xD0, 0xD8)])


def _jpeg(data: bytes) -> ImageInfo:
    # Walk the segments by their lengths: scanning for a SOF byte pattern would find the
    # thumbnail JPEG that an EXIF block (APP1, up to 64 KB) often embeds.
    pos = 2
    orientation = 1
    while True:
        _need(data, pos + 2)
        if data[pos] != 0xFF:
            raise ImageError(f"JPEG segment marker expected at byte {pos}")
        marker = data[pos + 1]
        if marker == 0xFF:  # fill byte
            pos += 1
            continue
        if marker in _STANDALONE:
            pos += 2
            continue
        if marker in (0xD9, 0xDA):  # EOI or start of scan before any frame header
            raise ImageError("JPEG has no frame header (SOF) before its image data")
        _need(data, pos + 4)
        (length,) = struct.unpack(">H", data[pos + 2 : pos + 4])
        if length < 2:
            raise ImageError(f"JPEG segment at byte {pos} has a bad length {length}")
        if marker in _SOF:
            _need(data, pos + 9)
            height, width = struct.unpack(">HH", data[pos + 5 : pos + 9])
            if height == 0:
                raise ImageError("JPEG height is defined later in the scan (DNL); unsupported")
            return _info("jpeg", width, height, orientation)
        if marker == 0xE1:
            _need(data, pos + 2 + length)
            orientation = _exif_orientation(data[pos + 4 : pos + 2 + length]) or orientation
        pos += 2 + length


def _exif_orientation(app1: bytes) -> int | None:
    """The Orientation tag (0x0112) of IFD0 in an APP1 Exif payload, if present and sane."""
    if not app1.startswith(b"Exif\0\0") or len(app1) < 14:
        return None
    tiff = app1[6:]
    order = {b"II": "<", b"MM": ">"}.get(tiff[:2])
    if order is None:
        return None
    try:
        (ifd,) = struct.unpack(order + "I", tiff[4:8])
        (entries,) = struct.unpack(order + "H", tiff[ifd : ifd + 2])
        for i in range(entries):
            at = ifd + 2 + 12 * i
            tag, typ, _count = struct.unpack(order + "HHI", tiff[at : at + 8])
            if tag == 0x0112 and typ == 3:  # SHORT
                (value,) = struct.unpack(order + "H", tiff[at + 8 : at + 10])
                return value if 1 <= value <= 8 else None
    except struct.error:
        return None  # a truncated or broken EXIF block: the size is still good
    return None


def _gif(data: bytes) -> ImageInfo:
    _need(data, 10)
    width, height = struct.unpack("<HH", data[6:10])
    return _info("gif", width, height)


def _webp(data: bytes) -> ImageInfo:
    _need(data, 30)
    chunk = data[12:16]
    if chunk == b"VP8 ":
        # Lossy: a 3-byte frame tag, the start code, then 14-bit sizes (2 bits of scale).
        if data[23:26] != b"\x9d\x01\x2a":
            raise ImageError("WebP VP8 frame has no start code")
        width, height = struct.unpack("<HH", data[26:30])
        return _info("webp", width & 0x3FFF, height & 0x3FFF)
    if chunk == b"VP8L":
        # Lossless: signature 0x2f, then width-1 and height-1 in 14 bits each.
        if data[20] != 0x2F:
            raise ImageError("WebP VP8L stream has no signature")
        (bits,) = struct.unpack("<I", data[21:25])
        return _info("webp", (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1)
    if chunk == b"VP8X":
        # Extended: the canvas size, width-1 and height-1 in 24 bits each.
        width = int.from_bytes(data[24:27], "little") + 1
        height = int.from_bytes(data[27:30], "little") + 1
        return _info("webp", width, height)
    raise ImageError(f"WebP has an unknown first chunk {chunk!r}")


def _probe(data: bytes) -> ImageInfo:
    if data[:8] == b"\x89PNG\r\n\x1a\n":
        return _png(data)
    if data[:3] == b"\xff\xd8\xff":
        return _jpeg(data)
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return _gif(data)
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return _webp(data)
    if len(data) < 12:
        raise _NeedMore(12)
    raise ImageError("not a PNG, JPEG, GIF or WebP image")


def probe(data: bytes) -> ImageInfo:
    """Format and size from an image's first bytes (the whole image, or a prefix of it).

    Raises ImageError when the bytes are no image we know or end before the size.
    """
    try:
        return _probe(data)
    except _NeedMore:
        raise ImageError(
            f"image data ends before its size is known ({len(data)} bytes)"
        ) from None


def _strip_data_url(b64: str) -> str:
    # "data:image/png;base64,...." as OpenAI image_url parts carry it.
    if b64.startswith("data:"):
        comma = b64.find(",", 0, 256)
        if comma != -1:
            return b64[comma + 1 :]
    return b64


_WHITESPACE = " \t\r\n"


def _decode_prefix(b64: str, chars: int) -> bytes:
    """Decode about the first ``chars`` base64 characters, ignoring whitespace."""
    part = b64[:chars]
    if any(c in part for c in _WHITESPACE):
        part = "".join(part.split())
    part = part[: len(part) - len(part) % 4]
    try:
        return binascii.a2b_base64(part)
    except (binascii.Error, ValueError) as e:
        raise ImageError(f"image base64 is invalid ({e})") from None


def probe_base64(b64: str) -> ImageInfo:
    """Like ``probe`` on base64 text (or a data: URL), decoding only what the header needs.

    Starts with a 4 KB prefix; a JPEG whose frame header sits behind a large EXIF or
    ICC block asks for more, and only that much more is decoded.
    """
    b64 = _strip_data_url(b64)
    chars = 4096
    while True:
        data = _decode_prefix(b64, chars)
        try:
            return _probe(data)
        except _NeedMore as more:
            if chars >= len(b64):
                raise ImageError(
                    f"image data ends before its size is known ({len(data)} bytes)"
                ) from None
            # Bytes to chars is 4/3; whitespace in the text can only need a further round.
            chars = max(chars * 2, (more.need + 2) // 3 * 4 + 1024)


def decoded_size(b64: str) -> int:
    """Bytes that the base64 text (or data: URL) decodes to, from its length and padding."""
    b64 = _strip_data_url(b64)
    n = len(b64)
    for c in _WHITESPACE:
        n -= b64.count(c)
    body = b64.rstrip(_WHITESPACE)
    pad = len(body) - len(body.rstrip("="))
    return (n - pad) * 3 // 4
