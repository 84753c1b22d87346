"""clear-images keeps every request within the provider's per-request limits (Anthropic: 100
images, 32 MB) and within the byte budget whatever the images cost in tokens (issue 32, item 4).

Every image is pillow noise, so it is large in bytes; the transcripts are Claude Code sessions and
Anthropic message lists run through the installed ``lookout``, and ``lookout restore`` must give
each input back byte for byte.
"""

from __future__ import annotations

import base64
import io
import json
import os

import pytest
from conftest import run_lookout
from PIL import Image
from test_clear_images import Builder, images_in

MB = 1_000_000


def noise(size: tuple[int, int], fmt: str = "PNG") -> tuple[bytes, str]:
    """A real image of random pixels: PNG keeps every byte of noise (4 a pixel in RGBA), JPEG
    at quality 95 most of them."""
    mode = "RGBA" if fmt == "PNG" else "RGB"
    out = io.BytesIO()
    Image.frombytes(mode, size, os.urandom(size[0] * size[1] * len(mode))).save(out, fmt, quality=95)
    return out.getvalue(), f"image/{fmt.lower()}"


def chat(fmt: str, images: list[tuple[bytes, str]], together: bool = False) -> bytes:
    """One image a turn, each answered (the agent has seen it), then a new prompt; or, with
    ``together``, every image in that new prompt (none seen yet)."""
    builder = Builder(fmt)
    if together:
        builder.prompt("look at all of these", images)
        return builder.bytes()
    for n, image in enumerate(images):
        builder.prompt(f"look at picture {n}", [image])
        builder.reply(f"I see picture {n}")
    builder.prompt("and now?")
    return builder.bytes()


def clear(data: bytes, tmp_path, *args: str) -> tuple[bytes, dict]:
    """Run clear-images, check the contract (restore gives the input back, a second run changes
    nothing), and return its output and JSON report."""
    report = tmp_path / "report.json"
    result = run_lookout("clear-images", "--report", str(report), *args, input=data)
    assert result.returncode == 0, result.stderr.decode()
    assert run_lookout("restore", input=result.stdout).stdout == data
    assert run_lookout("clear-images", *args, input=result.stdout).stdout == result.stdout
    return result.stdout, json.loads(report.read_text())


def image_bytes(data: bytes) -> int:
    """The base64 bytes of the images a request made from this transcript carries."""
    return sum(len(i.image.data) for i in images_in(data))


@pytest.mark.parametrize("fmt", ["claude-code", "anthropic"])
@pytest.mark.parametrize("together", [False, True], ids=["seen", "all-in-the-current-request"])
def test_at_most_100_images_a_request(fmt, together, tmp_path):
    """101 images (1.7 MB, well within the budget) got "nothing to clear"; Anthropic refuses a
    request with more than 100. Past the limit even the images the agent has not seen go."""
    images = [noise((64, 64)) for _ in range(101)]
    data = chat(fmt, images, together)
    assert image_bytes(data) < 16 * MB
    out, report = clear(data, tmp_path, "--repair")
    left = {i.image.data for i in images_in(out)}
    assert len(left) == 100
    assert base64.b64encode(images[0][0]).decode() not in left  # the oldest went
    assert report["limits"] == ["anthropic's limit of 100 images a request"]
    # Gemini publishes no such limit: nothing goes
    assert run_lookout("clear-images", "--provider", "gemini", input=data).stdout == data


@pytest.mark.parametrize("fmt", ["claude-code", "anthropic"])
def test_a_request_stays_under_32_mb_whatever_the_budget(fmt, tmp_path):
    """36 MB of images, all protected (--keep-recent) and within a generous --budget, stayed
    as they were: Anthropic refuses a request over 32 MB."""
    images = [noise((600, 500), "PNG") for _ in range(23)]
    data = chat(fmt, images)
    assert 36 * MB < image_bytes(data) < 37 * MB
    out, report = clear(data, tmp_path, "--budget", "64MB", "--keep-recent", "100")
    assert image_bytes(out) < 32 * MB
    assert report["limits"] == ["anthropic's limit of 32.0 MB a request"]


@pytest.mark.parametrize("fmt", ["claude-code", "anthropic"])
def test_token_cheap_images_are_cleared_when_the_bytes_are_over_budget(fmt, tmp_path):
    """72 MB of strips of 2000x80 px (850 KB each, but 131 tokens once Anthropic scales them to
    1568 px: fewer than a placeholder) were all kept against the 16 MB default budget."""
    images = [noise((2000, 80), "PNG") for _ in range(85)]
    data = chat(fmt, images)
    assert image_bytes(data) > 72 * MB
    out, report = clear(data, tmp_path, "--repair")
    assert image_bytes(out) <= 16 * MB
    assert report["limits"] == ["anthropic's limit of 32.0 MB a request", "the 16.0 MB budget"]
    assert all(c["tokens"] == 131 for c in report["cleared"])


@pytest.mark.parametrize("fmt", ["claude-code", "anthropic"])
def test_small_pixel_large_byte_images_are_cleared_down_to_the_budget(fmt, tmp_path):
    """Images of 160x160 px (34 tokens) but 50 to 140 KB each were all kept ("a placeholder
    would cost at least as much"), leaving 2 MB against a 1 MB budget."""
    images = [noise((160, 160), "PNG" if n % 2 else "JPEG") for n in range(24)]
    data = chat(fmt, images)
    assert image_bytes(data) > 2 * MB
    out, report = clear(data, tmp_path, "--budget", "1MB")
    assert image_bytes(out) <= 1 * MB
    assert report["limits"] == ["the 1.0 MB budget"]
    assert all(c["tokens"] < 100 for c in report["cleared"])  # cheap in tokens, cleared for bytes
