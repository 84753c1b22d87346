"""Fitting images within a chat's and a provider's limits (lookout_cli.images.fit)."""

from __future__ import annotations

import base64
import io
import os

import pytest
from PIL import Image

from lookout_cli.core.errors import LookoutError
from lookout_cli.images.fit import (
    DEFAULT_MAX_SIDE,
    ImageError,
    fit_image,
    fits_bytes,
    probe,
    side_cap,
    sniff_media_type,
)


def make(w, h, fmt="PNG", mode="RGB", noise=False, **save):
    if noise:
        im = Image.frombytes(mode, (w, h), os.urandom(w * h * len(mode)))
    else:
        im = Image.new(mode, (w, h), (200, 30, 30, 255)[: len(mode)] if mode != "1" else 1)
    buf = io.BytesIO()
    im.save(buf, fmt, **save)
    return buf.getvalue()


@pytest.mark.parametrize("fmt, mt", [("PNG", "image/png"), ("JPEG", "image/jpeg"), ("GIF", "image/gif"),
                                     ("WEBP", "image/webp")])
def test_small_images_pass_untouched(fmt, mt):
    data = make(300, 200, fmt)
    assert sniff_media_type(data) == mt
    out = fit_image(data)
    assert out.data == data and not out.changed
    assert (out.width, out.height, out.media_type) == (300, 200, mt)


@pytest.mark.parametrize("fmt, mt", [("PNG", "image/png"), ("JPEG", "image/jpeg"), ("GIF", "image/gif"),
                                     ("WEBP", "image/webp")])
def test_large_images_scale_to_2048_keeping_format_and_aspect(fmt, mt):
    data = make(4096, 1024, fmt)
    out = fit_image(data)
    assert (out.width, out.height) == (2048, 512)
    assert out.media_type == mt and out.resized
    with Image.open(io.BytesIO(out.data)) as im:
        assert im.size == (2048, 512) and im.format == fmt
    assert (out.source_width, out.source_height) == (4096, 1024)


def test_boundary_2048_is_kept_2049_is_scaled():
    assert not fit_image(make(2048, 1000)).changed
    out = fit_image(make(2049, 1000))
    assert out.width == 2048 and out.height == round(1000 * 2048 / 2049)


def test_never_enlarges():
    out = fit_image(make(10, 5), max_side=4000)
    assert (out.width, out.height) == (10, 5) and not out.changed


def test_tall_image_and_custom_side():
    out = fit_image(make(300, 3000), max_side=1000)
    assert (out.width, out.height) == (100, 1000)


def test_many_images_caps_anthropic_at_2000():
    assert side_cap("anthropic", 2048, many_images=True) == 2000
    assert side_cap("anthropic", 2048) == 2048
    assert side_cap("openai", 2048, many_images=True) == 2048
    assert side_cap("anthropic", None) == 8000
    out = fit_image(make(2048, 1024), many_images=True)
    assert (out.width, out.height) == (2000, 1000)


def test_anthropic_5mb_base64_limit():
    assert fits_bytes(3_932_160, "anthropic")  # exactly 5,242,880 base64 characters
    assert not fits_bytes(3_932_161, "anthropic")
    assert fits_bytes(15_000_000, "openai")
    data = make(2000, 1500, "PNG", noise=True)  # incompressible: about 9 MB
    assert len(base64.b64encode(data)) > 5_242_880
    out = fit_image(data, provider="anthropic")
    assert out.base64_len <= 5_242_880 and len(out.b64()) == out.base64_len
    assert out.media_type == "image/jpeg" and any("JPEG" in n for n in out.notes)
    # OpenAI takes up to 20 MB: the same PNG goes as it is
    assert fit_image(data, provider="openai").data == data


def test_transparent_png_over_the_byte_limit_keeps_alpha():
    data = make(1500, 1100, "PNG", mode="RGBA", noise=True)
    out = fit_image(data, provider="anthropic")
    assert out.base64_len <= 5_242_880
    with Image.open(io.BytesIO(out.data)) as im:
        assert "A" in im.mode


def test_decompression_bomb_refused_before_decoding():
    data = make(10_000, 10_000, "PNG", mode="1")  # 100 megapixels, a few KB on disk
    assert len(data) < 100_000
    with pytest.raises(ImageError, match="decompression bomb"):
        fit_image(data)
    with pytest.raises(ImageError, match="decompression bomb"):
        fit_image(make(300, 300), max_pixels=300 * 300 - 1)


def test_not_an_image_and_corrupt():
    with pytest.raises(ImageError, match="not a PNG"):
        fit_image(b"hello")
    with pytest.raises(ImageError, match="unreadable"):
        fit_image(b"\x89PNG\r\n\x1a\n" + b"\0" * 40)
    assert sniff_media_type(b"BM\0\0") is None  # BMP is not accepted


def test_truncated_large_image_is_refused_cleanly():
    data = make(1000, 1000, "PNG", noise=True)[:50_000]
    with pytest.raises(ImageError):
        fit_image(data)


def test_animated_gif_keeps_first_frame_when_scaled():
    frames = [Image.new("RGB", (3000, 1000), c) for c in ((255, 0, 0), (0, 255, 0))]
    buf = io.BytesIO()
    frames[0].save(buf, "GIF", save_all=True, append_images=frames[1:])
    out = fit_image(buf.getvalue())
    assert out.media_type == "image/gif" and (out.width, out.height) == (2048, 683)
    assert any("first of 2 frames" in n for n in out.notes)


def test_exif_orientation_applied_when_reencoding():
    im = Image.new("RGB", (4000, 1000), (0, 0, 255))
    exif = Image.Exif()
    exif[0x0112] = 6  # rotate 90° clockwise to display
    buf = io.BytesIO()
    im.save(buf, "JPEG", exif=exif.tobytes())
    out = fit_image(buf.getvalue())
    assert (out.width, out.height) == (512, 2048)


def test_probe_reads_the_header_only():
    assert probe(make(640, 480, "WEBP")) == ("image/webp", 640, 480)
    assert probe(b"nope") is None
    assert DEFAULT_MAX_SIDE == 2048


def test_limits_come_from_the_shared_provider_table():
    from lookout_cli.images import costs, fit

    assert fit.limits_for is costs.limits_for  # one table of provider limits, not a copy
    assert side_cap("claude", None, many_images=True) == 2000  # the aliases costs accepts
    assert side_cap("gemini", None) is None and fits_bytes(10**9, "gemini")  # no published limit
    with pytest.raises(LookoutError, match="unknown image provider"):
        side_cap("nobody")
    assert set(fit.PROVIDERS) == {"anthropic", "openai", "gemini"}
