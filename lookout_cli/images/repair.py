"""``clear-images --repair``: images that break a provider's hard limits make a session
unusable (every later request is refused). Shrink them, or clear them when they cannot fit."""

from __future__ import annotations

import base64
import binascii
from typing import Any

from lookout_cli.core.errors import LookoutError
from lookout_cli.core.saved import MARKER, human_size
from lookout_cli.formats import Transcript
from lookout_cli.formats.clearing import clear_item, is_cleared, save_record
from lookout_cli.formats.view import IMAGE, Item
from lookout_cli.images.costs import limits_for
from lookout_cli.images.fit import FittedImage, ImageError, fit_image


def _swap(node: Any, old: str, new: str, old_type: str | None, new_type: str) -> bool:
    """Replace an image's base64 everywhere it occurs in a record (bare, or in a data URL, and
    in every copy: Claude Code keeps a second one in toolUseResult), with its media type."""
    found = False
    if isinstance(node, dict):
        hit = False
        for key, value in node.items():
            if value == old:
                node[key], hit = new, True
            elif isinstance(value, str) and value.startswith("data:") and value.endswith(old):
                node[key], hit = f"data:{new_type};base64,{new}", True
            elif _swap(value, old, new, old_type, new_type):
                found = True
        if hit:
            for key in ("media_type", "type", "mime_type", "mimeType"):
                if old_type and node.get(key) == old_type:
                    node[key] = new_type
        found = found or hit
    elif isinstance(node, list):
        for index, value in enumerate(node):
            if value == old:
                node[index], found = new, True
            elif isinstance(value, str) and value.startswith("data:") and value.endswith(old):
                node[index], found = f"data:{new_type};base64,{new}", True
            elif _swap(value, old, new, old_type, new_type):
                found = True
    return found


def repair_images(run, transcript: Transcript, provider: str) -> list[dict]:
    """Fix every image over the provider's limits; return what was done to each."""
    view = transcript.view()
    images = [i for i in view.items if i.kind == IMAGE and i.image and i.image.data and not is_cleared(i)]
    limits = limits_for(provider)
    many = bool(limits.many_images and len(images) > limits.many_images)
    fixes: list[dict] = []
    # the last first: a note goes in after its image and moves the parts that follow it
    for number, item in reversed(list(enumerate(images, 1))):
        name = f"#{number} (message {item.message})"
        try:
            data = base64.b64decode(item.image.data, validate=False)
        except (binascii.Error, ValueError):
            fixes.append(_clear(run, transcript, item, name, "not valid base64"))
            continue
        try:
            fitted = fit_image(data, provider=provider, max_side=None, many_images=many)
        except ImageError as exc:
            fixes.append(_clear(run, transcript, item, name, str(exc)))
            continue
        if fitted.changed:
            fixes.append(_shrink(run, transcript, item, name, data, fitted, provider))
    transcript.invalidate()
    return fixes[::-1]


def _shrink(run, transcript: Transcript, item: Item, name: str, data: bytes, fitted: FittedImage,
            provider: str) -> dict:
    """Put the fitted image in the original's place, with a note after it that names the saved
    original and carries the line's restore marker; clear the image where no note can go."""
    line = save_record(run.store, item)
    original = run.store.put(data, fitted.source_media_type, tool=item.tool, call_id=item.call_id)
    what = (f"{fitted.source_width}x{fitted.source_height} {human_size(fitted.source_bytes)} -> "
            f"{fitted.width}x{fitted.height} {human_size(fitted.nbytes)} {fitted.media_type}")
    note = (f"[lookout shrank image {name} to fit {provider}'s limits ({what}). The original is saved "
            f"in {original.path}." + (f" {MARKER}{line.sha256}" if line else "") + "]")
    try:
        transcript.adapter.add_note(transcript, item, note)
    except LookoutError:
        return _clear(run, transcript, item, name, f"over its limits, and a shrunk copy cannot be noted here ({what})")
    _swap(item.record.edit(), item.image.data, fitted.b64(), item.image.media_type, fitted.media_type)
    return {"name": name, "saved": str(original.path), "what": what}


def _clear(run, transcript: Transcript, item: Item, name: str, reason: str) -> dict:
    cleared = clear_item(run.store, transcript, item, f"image {name}, which the provider would refuse ({reason})")
    return {"name": name, "saved": str(cleared.content.path), "what": f"cleared: {reason}"}
