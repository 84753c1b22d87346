"""Fit an image within the size a chat accepts and the target provider's hard limits (pillow).

``fit_image`` never enlarges, keeps the aspect ratio, and keeps the original bytes untouched
when the image already fits. When it must change the image it scales it so the long side is at
most ``max_side`` (default 2048 px) and the provider's own cap (Anthropic: 8000 px, 2000 px when
a request carries more than 20 images), applies the EXIF orientation, and re-encodes in the same
format. If the encoded image is still over the provider's byte limit (Anthropic: 5 MB of
base64 per image) it lowers the quality, then changes format (PNG/GIF to JPEG, or WebP when the
image has transparency), then scales down further. Images whose header claims more than
``MAX_PIXELS`` pixels are refused before any decoding (decompression bombs).

Used by ``mentions`` (attaching images) and ``clear-images --repair`` (shrinking images that
break a provider's limits). pillow is imported inside the functions only.
"""

from __future__ import annotations

import base64
import io
import math
import warnings

from lookout_cli.core.dataclass import dataclass, field
from lookout_cli.images.costs import PROVIDER_LIMITS, limits_for

DEFAULT_MAX_SIDE = 2048
MAX_PIXELS = 89_478_485  # pillow's own DecompressionBombWarning threshold (~ 0.36 GB RGBA)
MIN_SIDE = 16  # give up shrinking below this long side

MEDIA_TYPES = {"PNG": "image/png", "JPEG": "image/jpeg", "GIF": "image/gif", "WEBP": "image/webp"}
FORMATS = {v: k for k, v in MEDIA_TYPES.items()}


PROVIDERS = tuple(sorted(PROVIDER_LIMITS))  # anthropic, gemini, openai


class ImageError(ValueError):
    """The image cannot be used: not an image, corrupt, a decompression bomb, or unfixable."""


@dataclass(slots=True)
class FittedImage:
    data: bytes  # the bytes to send (the original bytes when nothing had to change)
    media_type: str
    width: int
    height: int
    source_media_type: str
    source_width: int
    source_height: int
    source_bytes: int
    resized: bool = False
    reencoded: bool = False
    notes: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return self.resized or self.reencoded

    @property
    def nbytes(self) -> int:
        return len(self.data)

    @property
    def base64_len(self) -> int:
        return 4 * math.ceil(len(self.data) / 3)

    def b64(self) -> str:
        return base64.b64encode(self.data).decode("ascii")


def sniff_media_type(data: bytes) -> str | None:
    """PNG, JPEG, GIF or WebP from the magic bytes; None for anything else."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def side_cap(provider: str = "anthropic", max_side: int | None = DEFAULT_MAX_SIDE, many_images: bool = False) -> int | None:
    """The largest long side allowed for one image."""
    lim = limits_for(provider)
    caps = [c for c in (max_side, lim.max_side) if c]
    if many_images and lim.max_side_many:
        caps.append(lim.max_side_many)
    return min(caps) if caps else None


def fits_bytes(nbytes: int, provider: str) -> bool:
    lim = limits_for(provider)
    if lim.max_base64_bytes is not None and 4 * math.ceil(nbytes / 3) > lim.max_base64_bytes:
        return False
    if lim.max_image_bytes is not None and nbytes > lim.max_image_bytes:
        return False
    return True


def fit_image(
    data: bytes,
    *,
    provider: str = "anthropic",
    max_side: int | None = DEFAULT_MAX_SIDE,
    many_images: bool = False,
    max_pixels: int = MAX_PIXELS,
) -> FittedImage:
    """Return the image as it may be sent; raise ImageError when it cannot be."""
    from PIL import Image

    media_type = sniff_media_type(data)
    if media_type is None:
        raise ImageError("not a PNG, JPEG, GIF or WebP image")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)  # checked below
            im = Image.open(io.BytesIO(data))
            width, height = im.size
    except Image.DecompressionBombError as exc:
        raise ImageError(f"decompression bomb refused ({exc})") from None
    except Exception as exc:  # pillow raises many kinds on corrupt input
        raise ImageError(f"unreadable image ({type(exc).__name__}: {exc})") from None
    if width <= 0 or height <= 0:
        raise ImageError("image has no pixels")
    if width * height > max_pixels:
        raise ImageError(
            f"decompression bomb refused: {width}x{height} is {width * height:,} pixels, over the limit of {max_pixels:,}"
        )
    frames = getattr(im, "n_frames", 1) or 1
    cap = side_cap(provider, max_side, many_images)
    fitted = FittedImage(
        data=data,
        media_type=media_type,
        width=width,
        height=height,
        source_media_type=media_type,
        source_width=width,
        source_height=height,
        source_bytes=len(data),
    )
    too_big = cap is not None and max(width, height) > cap
    if not too_big and fits_bytes(len(data), provider):
        # Nothing to change: the original bytes go as they are, once they are known to decode
        # (a truncated image would make the provider reject every later request).
        try:
            im.load()
        except Exception as exc:
            raise ImageError(f"unreadable image, truncated or corrupt ({exc})") from None
        return fitted
    try:
        return _reencode(im, fitted, cap, provider, frames)
    except ImageError:
        raise
    except Exception as exc:
        raise ImageError(f"cannot decode image ({type(exc).__name__}: {exc})") from None


def _target_size(width: int, height: int, cap: int | None) -> tuple[int, int]:
    if cap is None or max(width, height) <= cap:
        return width, height
    scale = cap / max(width, height)
    w = max(1, min(cap, round(width * scale)))
    h = max(1, min(cap, round(height * scale)))
    return w, h


def _reencode(im, fitted: FittedImage, cap: int | None, provider: str, frames: int) -> FittedImage:
    from PIL import Image, ImageOps

    fmt = FORMATS[fitted.source_media_type]
    if frames > 1:
        fitted.notes.append(f"animated image: first of {frames} frames kept")
    if fmt == "JPEG":
        # Decode at a reduced scale when it is far larger than needed (saves memory and time).
        want = _target_size(*im.size, cap)
        im.draft("RGB", want)
    im.seek(0)
    im.load()
    im = ImageOps.exif_transpose(im)  # the pixels as the user sees them; EXIF is not kept
    w, h = _target_size(im.width, im.height, cap)
    if (w, h) != im.size:
        im = im.resize((w, h), Image.Resampling.LANCZOS)
        fitted.resized = True
    has_alpha = im.mode in ("RGBA", "LA", "PA") or (im.mode == "P" and "transparency" in im.info)

    attempts: list[tuple[str, int | None]] = []
    if fmt in ("JPEG", "WEBP"):
        attempts += [(fmt, q) for q in (90, 80, 65, 50)]
    else:
        attempts.append((fmt, None))
        attempts += [("WEBP", q) for q in (90, 75, 60)] if has_alpha else [("JPEG", q) for q in (90, 80, 65)]

    current = im
    while True:
        for out_fmt, quality in attempts:
            data = _encode(current, out_fmt, quality)
            if fits_bytes(len(data), provider):
                if out_fmt != fmt:
                    fitted.notes.append(f"re-encoded as {out_fmt} to fit the size limit")
                fitted.data = data
                fitted.media_type = MEDIA_TYPES[out_fmt]
                fitted.width, fitted.height = current.size
                fitted.reencoded = True
                fitted.resized = max(current.size) < max(fitted.source_width, fitted.source_height)
                return fitted
        # Still too large at the lowest quality: scale down and try again.
        nw, nh = max(1, int(current.width * 0.75)), max(1, int(current.height * 0.75))
        if max(nw, nh) < MIN_SIDE:
            raise ImageError("image cannot be made small enough for the provider's size limit")
        current = current.resize((nw, nh), Image.Resampling.LANCZOS)
        fitted.resized = True


def _encode(im, fmt: str, quality: int | None) -> bytes:
    buf = io.BytesIO()
    img = im
    if fmt == "JPEG":
        if img.mode not in ("RGB", "L"):
            img = _flatten(img)
        img.save(buf, "JPEG", quality=quality or 90, optimize=True)
    elif fmt == "WEBP":
        if img.mode not in ("RGB", "RGBA"):
            img = img.convert("RGBA" if "A" in img.mode or "transparency" in img.info else "RGB")
        img.save(buf, "WEBP", quality=quality or 90, method=4)
    elif fmt == "PNG":
        if img.mode == "CMYK":
            img = img.convert("RGB")
        img.save(buf, "PNG")
    elif fmt == "GIF":
        img.save(buf, "GIF")
    else:  # pragma: no cover - FORMATS has only the four above
        raise ImageError(f"cannot write {fmt}")
    return buf.getvalue()


def _flatten(img):
    """RGB on white for formats without transparency."""
    from PIL import Image

    if img.mode in ("RGBA", "LA", "PA") or (img.mode == "P" and "transparency" in img.info):
        rgba = img.convert("RGBA")
        bg = Image.new("RGB", rgba.size, (255, 255, 255))
        bg.paste(rgba, mask=rgba.getchannel("A"))
        return bg
    return img.convert("RGB")


def probe(data: bytes) -> tuple[str, int, int] | None:
    """(media type, width, height) from the header, without decoding the pixels."""
    from PIL import Image

    media_type = sniff_media_type(data)
    if media_type is None:
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with Image.open(io.BytesIO(data)) as im:
                return media_type, im.width, im.height
    except Exception:
        return None
