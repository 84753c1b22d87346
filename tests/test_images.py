"""Image headers read without decoding, against real images made with pillow; token formulas."""

from __future__ import annotations

import base64
import io
import struct

import pytest
from PIL import Image

from lookout_cli.core.errors import LookoutError
from lookout_cli.images import costs
from lookout_cli.images import probe as images
from lookout_cli.images.probe import ImageError, ImageInfo


def _img(mode: str, size: tuple[int, int]) -> Image.Image:
    im = Image.new("RGB", size)
    # Some structure so encoders do real work (and JPEG/WebP are not trivially tiny).
    px = im.load()
    for x in range(0, size[0], max(1, size[0] // 37)):
        for y in range(0, size[1], max(1, size[1] // 23)):
            px[x, y] = ((x * 7) % 256, (y * 13) % 256, (x + y) % 256)
    im = im.convert(mode)
    if mode == "RGBA":  # real transparency: WebP must then use its extended (VP8X) form
        alpha = Image.new("L", size, 255)
        alpha.paste(128, (0, 0, max(1, size[0] // 2), max(1, size[1] // 2)))
        im.putalpha(alpha)
    return im


def _save(im: Image.Image, fmt: str, **kw) -> bytes:
    buf = io.BytesIO()
    im.save(buf, fmt, **kw)
    return buf.getvalue()


SIZES = [(1, 1), (17, 3000), (641, 480), (1920, 1080), (4000, 3)]

CASES = []
for size in SIZES:
    CASES += [
        ("png", "RGB", size, {}),
        ("png", "RGBA", size, {}),
        ("jpeg", "RGB", size, {}),
        ("gif", "P", size, {}),
        ("webp", "RGB", size, {"lossless": False}),
        ("webp", "RGB", size, {"lossless": True}),
        ("webp", "RGBA", size, {"lossless": False}),
    ]
CASES += [
    ("png", "L", (300, 200), {}),
    ("png", "1", (33, 9), {}),
    ("png", "P", (500, 499), {}),
    ("jpeg", "L", (123, 456), {}),
    ("jpeg", "CMYK", (64, 65), {}),
    ("jpeg", "RGB", (800, 600), {"progressive": True}),
    ("webp", "RGB", (16383, 2), {"lossless": True}),
    ("webp", "RGB", (2, 16383), {"lossless": False}),
]


@pytest.mark.parametrize(("fmt", "mode", "size", "kw"), CASES, ids=lambda v: str(v))
def test_probe_matches_pillow(fmt, mode, size, kw):
    data = _save(_img(mode, size), fmt.upper(), **kw)
    info = images.probe(data)
    assert info == ImageInfo(fmt, images.MEDIA_TYPES[fmt], *size)
    assert Image.open(io.BytesIO(data)).size == size  # pillow agrees
    assert images.probe_base64(base64.b64encode(data).decode()) == info


def test_webp_variants_are_each_covered():
    rgb = _img("RGB", (300, 200))
    chunks = {
        _save(rgb, "WEBP", lossless=False)[12:16],
        _save(rgb, "WEBP", lossless=True)[12:16],
        _save(_img("RGBA", (300, 200)), "WEBP", lossless=False)[12:16],
    }
    assert chunks == {b"VP8 ", b"VP8L", b"VP8X"}
    animated = io.BytesIO()
    red = Image.new("RGB", (300, 200), "red")
    rgb.save(animated, "WEBP", save_all=True, append_images=[red], duration=100)
    assert animated.getvalue()[12:16] == b"VP8X"
    assert images.probe(animated.getvalue()) == ImageInfo("webp", "image/webp", 300, 200)


def test_jpeg_progressive_uses_sof2_and_png_needs_only_its_first_bytes():
    data = _save(_img("RGB", (800, 600)), "JPEG", progressive=True)
    assert b"\xff\xc2" in data and b"\xff\xc0" not in data
    png = _save(_img("RGB", (1234, 567)), "PNG")
    assert images.probe(png[:24]).width == 1234


def test_animated_gif():
    frames = [_img("P", (90, 70)) for _ in range(3)]
    buf = io.BytesIO()
    frames[0].save(buf, "GIF", save_all=True, append_images=frames[1:], duration=50, loop=0)
    assert images.probe(buf.getvalue()) == ImageInfo("gif", "image/gif", 90, 70)


def _app1_with_thumbnail(orientation: int, pad: int) -> bytes:
    """An EXIF APP1 segment: IFD0 with Orientation, then an embedded thumbnail JPEG + padding."""
    thumb = _save(_img("RGB", (16, 8)), "JPEG")
    tiff = b"II*\x00" + struct.pack("<I", 8)
    tiff += struct.pack("<H", 1) + struct.pack("<HHIHH", 0x0112, 3, 1, orientation, 0)
    tiff += struct.pack("<I", 0)  # no next IFD
    payload = b"Exif\x00\x00" + tiff + thumb + b"\x00" * pad
    return b"\xff\xe1" + struct.pack(">H", len(payload) + 2) + payload


def test_jpeg_walks_past_exif_with_a_thumbnail_and_reads_orientation():
    main = _save(_img("RGB", (1200, 900)), "JPEG")
    app1 = _app1_with_thumbnail(orientation=6, pad=60_000)
    data = main[:2] + app1 + main[2:]
    with Image.open(io.BytesIO(data)) as im:  # a valid JPEG pillow reads, EXIF included
        assert im.size == (1200, 900)
        assert im.getexif().get(0x0112) == 6
    info = images.probe(data)
    assert (info.width, info.height, info.orientation) == (1200, 900, 6)
    assert info.display_size == (900, 1200)

    # base64: the frame header is ~62 KB in, past the first prefix; it grows, but stops early.
    b64 = base64.b64encode(data + b"\x00" * 2_000_000).decode()
    decoded: list[int] = []
    real = images.binascii.a2b_base64

    def spy(s, *a, **k):
        out = real(s, *a, **k)
        decoded.append(len(out))
        return out

    images.binascii.a2b_base64 = spy
    try:
        assert images.probe_base64(b64) == info
    finally:
        images.binascii.a2b_base64 = real
    assert len(decoded) >= 2, "one prefix cannot reach the SOF"
    assert max(decoded) < 200_000


def test_pillow_written_exif_orientation():
    im = _img("RGB", (640, 480))
    exif = Image.Exif()
    exif[0x0112] = 8
    data = _save(im, "JPEG", exif=exif.tobytes())
    info = images.probe(data)
    assert (info.width, info.height, info.orientation, info.display_size) == (640, 480, 8, (480, 640))


def test_probe_base64_reads_a_prefix_only_and_accepts_data_urls():
    png = _save(_img("RGB", (2000, 1000)), "PNG")
    b64 = base64.b64encode(png).decode()
    decoded: list[int] = []
    real = images.binascii.a2b_base64
    images.binascii.a2b_base64 = lambda s, *a, **k: decoded.append(len(s)) or real(s, *a, **k)
    try:
        assert images.probe_base64(b64).width == 2000
        assert images.probe_base64("data:image/png;base64," + b64).height == 1000
    finally:
        images.binascii.a2b_base64 = real
    assert max(decoded) <= 4096 < len(b64)
    wrapped = "\n".join(b64[i : i + 76] for i in range(0, len(b64), 76))  # MIME line breaks
    assert images.probe_base64(wrapped).width == 2000


def test_bad_input_gives_clear_errors():
    with pytest.raises(ImageError, match="not a PNG, JPEG, GIF or WebP"):
        images.probe(b"%PDF-1.7 this is not an image at all")
    with pytest.raises(ImageError, match="ends before its size"):
        images.probe(_save(_img("RGB", (50, 50)), "PNG")[:12])
    with pytest.raises(ImageError, match="ends before its size"):
        images.probe(b"\xff\xd8\xff")
    with pytest.raises(ImageError, match="no frame header"):
        images.probe(b"\xff\xd8\xff\xe0\x00\x04ab\xff\xda\x00\x02")
    with pytest.raises(ImageError):
        images.probe_base64(base64.b64encode(b"GIF89a").decode())
    with pytest.raises(ImageError, match="empty size"):
        images.probe(b"GIF89a" + struct.pack("<HH", 0, 10) + b"\x00" * 10)
    assert issubclass(ImageError, LookoutError)


@pytest.mark.parametrize("n", range(0, 40))
def test_decoded_size_from_length_and_padding(n):
    raw = bytes(range(256))[:n] * 1
    b64 = base64.b64encode(raw).decode()
    assert images.decoded_size(b64) == n
    assert images.decoded_size(b64.rstrip("=")) == n  # unpadded
    assert images.decoded_size("data:image/png;base64," + b64) == n
    assert images.decoded_size(base64.encodebytes(raw).decode()) == n  # with newlines


# --- token formulas: hand calculations (research/memory-mentions.md §3) -------------------


@pytest.mark.parametrize(
    ("w", "h", "tokens"),
    [
        (1024, 1024, 1398),  # 1048576/750 = 1398.1
        (500, 500, 333),  # 250000/750
        (1920, 1080, 1600),  # long side to 1568 (1568x882 = 1844 tok) then capped at 1600
        (200, 200, 53),  # 40000/750 = 53.3
        (1092, 1092, 1590),  # 1192464/750 = 1589.95, under both limits
        (4000, 3000, 1600),  # 1568x1176 = 2458.6 tokens -> capped
        (1568, 300, 627),  # 470400/750 = 627.2, long side exactly at the limit
        (3136, 600, 627),  # halved to 1568x300
        (1, 1, 1),
    ],
)
def test_anthropic_tokens(w, h, tokens):
    assert costs.image_tokens("anthropic", w, h) == tokens
    assert costs.image_tokens("anthropic", h, w) == tokens


@pytest.mark.parametrize(
    ("w", "h", "tokens"),
    [
        (1024, 1024, 765),  # -> 768x768, 2x2 tiles: 85 + 170*4
        (2048, 4096, 1105),  # -> 1024x2048 -> 768x1536, 2x3 tiles
        (1920, 1080, 1105),  # -> 1365x768, 3x2 tiles
        (500, 500, 255),  # never scaled up: 1 tile
        (512, 512, 255),
        (513, 513, 765),  # 2x2 tiles
        (4096, 8192, 1105),  # fit 2048: 1024x2048 -> 768x1536
        (768, 4000, 765),  # fit 2048: 393x2048, short side under 768 stays: 1x4 tiles
    ],
)
def test_openai_tokens(w, h, tokens):
    assert costs.image_tokens("openai", w, h) == tokens
    assert costs.image_tokens("openai", w, h, detail="high") == tokens
    assert costs.image_tokens("openai", w, h, detail="low") == 85


@pytest.mark.parametrize(
    ("w", "h", "tokens"),
    [
        (384, 384, 258),  # both sides <= 384
        (100, 20, 258),
        (385, 100, 258),  # one 768 tile
        (1024, 1024, 1032),  # 2x2 tiles
        (1920, 1080, 1548),  # 3x2 tiles
        (768, 768, 258),
        (769, 768, 516),
    ],
)
def test_gemini_tokens(w, h, tokens):
    assert costs.image_tokens("gemini", w, h) == tokens
    assert costs.image_tokens("google", w, h) == tokens


def test_token_function_rejects_bad_arguments():
    with pytest.raises(LookoutError, match="unknown image provider 'mistral'"):
        costs.image_tokens("mistral", 10, 10)
    with pytest.raises(LookoutError, match="detail"):
        costs.image_tokens("openai", 10, 10, detail="ultra")
    with pytest.raises(LookoutError, match="positive"):
        costs.image_tokens("anthropic", 0, 10)
    assert costs.image_tokens("Claude", 500, 500) == 333
    assert costs.image_tokens("codex", 500, 500) == 255


def test_provider_limits():
    a = costs.limits_for("anthropic")
    assert a.max_base64_bytes == 5_242_880
    assert (a.max_side, a.max_side_many, a.many_images, a.max_images) == (8000, 2000, 20, 100)
    assert a.recommended_long_side == 1568
    o = costs.limits_for("openai")
    assert (o.max_images, o.max_image_bytes, o.max_request_image_bytes) == (500, 20_000_000, 50_000_000)
    assert costs.limits_for("gemini").max_side is None
    assert set(costs.PROVIDER_LIMITS) == {"anthropic", "openai", "gemini"}
