"""What an image costs and what a provider accepts: each provider's token formula
(research/memory-mentions.md §3; base64 is never tokenized as text), whose formula applies to a
transcript, and the hard per-image and per-request limits."""

from __future__ import annotations

import math

from lookout_cli.core.dataclass import dataclass
from lookout_cli.core.errors import LookoutError

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (ARCHITECTURE.md)
if TYPE_CHECKING:  # pragma: no cover - the meter prices items without importing the view to run
    from lookout_cli.formats.view import Item

# --- token costs (research/memory-mentions.md §3) -------------------------------------

_PROVIDERS = {
    "anthropic": "anthropic",
    "claude": "anthropic",
    "openai": "openai",
    "gpt": "openai",
    "codex": "openai",
    "gemini": "gemini",
    "google": "gemini",
}


def _provider(name: str) -> str:
    try:
        return _PROVIDERS[name.strip().lower()]
    except KeyError:
        raise LookoutError(
            f"unknown image provider {name!r} (known: anthropic, openai, gemini)"
        ) from None


def anthropic_size(width: int, height: int) -> tuple[float, float]:
    """The size Anthropic bills after its resize: long side 1568 px, then ~1,600 tokens.

    Anthropic vision docs, as research/memory-mentions.md §3 gives the estimator:
    s = min(1, 1568/max(w,h)); then if w*h/750 > 1600, s2 = sqrt(1600*750/(w*h)).
    """
    w, h = float(width), float(height)
    s = min(1.0, 1568 / max(w, h))
    w, h = w * s, h * s
    if w * h / 750 > 1600:
        s2 = math.sqrt(1600 * 750 / (w * h))
        w, h = w * s2, h * s2
    return w, h


def _anthropic(width: int, height: int) -> int:
    # tokens ≈ w*h/750 after the resize. §3 examples: 1024² → 1,398; 1920×1080 → ~1,600;
    # 500² → 333.
    w, h = anthropic_size(width, height)
    return max(1, round(w * h / 750))


def _tiles(length: float, tile: int) -> int:
    # A side of exactly 1024.0000001 px after float scaling is still two tiles.
    return max(1, math.ceil(length / tile - 1e-9))


def _openai(width: int, height: int, detail: str) -> int:
    # Tile models (gpt-4o, gpt-4.1, gpt-4.5, o-series), OpenAI "Calculating costs" via §3:
    # low detail is a 512×512 version, 85 tokens. Otherwise fit inside 2048×2048, scale
    # down (never up) so the shortest side is 768, then 85 + 170 per 512-px tile.
    # §3 examples: 1024² → 765; 2048×4096 → 1,105; 1920×1080 → 1,105; 500² → 255.
    if detail == "low":
        return 85
    w, h = float(width), float(height)
    s = min(1.0, 2048 / max(w, h))
    w, h = w * s, h * s
    s = min(1.0, 768 / min(w, h))
    w, h = w * s, h * s
    return 85 + 170 * _tiles(w, 512) * _tiles(h, 512)


def _gemini(width: int, height: int) -> int:
    # Gemini 2.0+ (ai.google.dev tokens docs via §3): both sides ≤ 384 px → 258 tokens;
    # otherwise 258 per 768×768 tile, ceil(w/768)·ceil(h/768)·258 (an upper bound;
    # 1024² → 1,032).
    if width <= 384 and height <= 384:
        return 258
    return 258 * _tiles(width, 768) * _tiles(height, 768)


def image_tokens(provider: str, width: int, height: int, detail: str = "auto") -> int:
    """Tokens one image of ``width``×``height`` px costs with ``provider``.

    ``provider`` is anthropic, openai or gemini (claude/gpt/codex/google are accepted).
    ``detail`` matters only for OpenAI: "low" is a flat 85; "high" and "auto" bill tiles
    (auto may pick low, so tiles are the upper bound).
    """
    if width <= 0 or height <= 0:
        raise LookoutError(f"image size must be positive, got {width}x{height}")
    detail = (detail or "auto").lower()
    if detail not in ("auto", "low", "high"):
        raise LookoutError(f"image detail must be auto, low or high, got {detail!r}")
    which = _provider(provider)
    if which == "anthropic":
        return _anthropic(width, height)
    if which == "openai":
        return _openai(width, height, detail)
    return _gemini(width, height)


# --- hard limits -------------------------------------------------------------------


@dataclass(frozen=True)
class ProviderLimits:
    """What a provider refuses (None: the research found no published limit)."""

    max_base64_bytes: int | None  # per image, as sent
    max_image_bytes: int | None  # per image, decoded
    max_side: int | None  # px, any image
    max_side_many: int | None  # px, when a request carries more than many_images
    many_images: int | None
    max_images: int | None  # per request
    max_request_image_bytes: int | None
    max_request_bytes: int | None
    recommended_long_side: int | None  # px; larger is resized by the provider anyway
    formats: tuple[str, ...] = ("png", "jpeg", "gif", "webp")


# research/memory-mentions.md §0 and §3.
PROVIDER_LIMITS: dict[str, ProviderLimits] = {
    # "image exceeds 5 MB maximum: … > 5242880 bytes" (claude-code #2104, #11181) is the
    # base64 length; 8000×8000 px; 2000 px once a request has more than 20 images
    # (#2664, #15730); 100 images per request (the older docs page; newer says 600 for
    # non-200k models, so 100 is the safe bound); 32 MB per request.
    "anthropic": ProviderLimits(
        max_base64_bytes=5 * 1024 * 1024,
        max_image_bytes=None,
        max_side=8000,
        max_side_many=2000,
        many_images=20,
        max_images=100,
        max_request_image_bytes=None,
        max_request_bytes=32 * 1000 * 1000,
        recommended_long_side=1568,
    ),
    # OpenAI images guide: PNG, JPEG, WEBP, non-animated GIF; up to 20 MB per image,
    # 500 images and 50 MB of image bytes per request. High detail fits 2048 px anyway.
    "openai": ProviderLimits(
        max_base64_bytes=None,
        max_image_bytes=20 * 1000 * 1000,
        max_side=None,
        max_side_many=None,
        many_images=None,
        max_images=500,
        max_request_image_bytes=50 * 1000 * 1000,
        max_request_bytes=None,
        recommended_long_side=2048,
    ),
    # §3 gives Gemini's token rule but no hard limits; tiles are 768 px.
    "gemini": ProviderLimits(
        max_base64_bytes=None,
        max_image_bytes=None,
        max_side=None,
        max_side_many=None,
        many_images=None,
        max_images=None,
        max_request_image_bytes=None,
        max_request_bytes=None,
        recommended_long_side=None,
    ),
}


def limits_for(provider: str) -> ProviderLimits:
    """The hard limits of ``provider`` (same names as ``image_tokens`` accepts)."""
    return PROVIDER_LIMITS[_provider(provider)]


# --- an item of the view ---------------------------------------------------------------

def image_provider(model: str | None, fmt: str | None) -> str:
    """Whose image formula to use: the model's maker, else the format's usual provider."""
    name = (model or "").lower()
    if "claude" in name or name.startswith(("anthropic", "opus", "sonnet", "haiku")):
        return "anthropic"
    if "gemini" in name:
        return "gemini"
    if name.startswith(("gpt", "o1", "o3", "o4", "codex", "chatgpt")) or "openai" in name:
        return "openai"
    return {"codex": "openai", "openai": "openai", "gemini-cli": "gemini"}.get(fmt or "", "anthropic")


def image_dimensions(item: Item) -> tuple[int, int] | None:
    """An image's width and height from its header (no decoding), when its bytes are inline."""
    ref = item.image
    if ref is not None and ref.dims is not None:
        return ref.dims
    if ref is None or not ref.data:
        return None
    # imported here: only a transcript with images reads them
    from lookout_cli.images.probe import ImageError, probe_base64

    try:
        info = probe_base64(ref.data)
    except ImageError:
        return None
    return info.width, info.height


def image_item_tokens(item: Item, provider: str) -> int:
    """Tokens the provider charges for an image, by its formula from the image's size."""
    dims = image_dimensions(item)
    if dims is None:
        # a remote or unreadable image: the formula's value for a 1024 px square
        dims = (1024, 1024)
    return int(image_tokens(provider, dims[0], dims[1]))
