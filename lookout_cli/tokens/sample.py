"""Tokens of the turns a summary replaces, estimated from a sample instead of tokenized.

A summary replaces everything before the turns it keeps, whatever their tokens, so on a long
transcript ``compact`` needs those turns' tokens only for figures: the context before, what
the summary replaced, the calibration against the provider's count. Tokenizing them is most of
a compaction's time (a 100 MB session holds 25 million tokens; the kept turns and the note a
few tens of thousands), so past ``ABOVE_CHARS`` characters they are priced at the tokens per
character of a sample: ``POINTS`` windows of ``WINDOW`` characters spread evenly over their
joined text, so a text is sampled in proportion to its length and the ratio's mean is the
ratio of the whole. The sample is the same on every run (no randomness, no cache), so a
compaction's figures and note do not depend on what was counted before.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

ABOVE_CHARS = 4_000_000  # about a million tokens: tokenizing them takes half a second here
POINTS = 512
WINDOW = 4_096  # 512 of them: 2 M characters counted, at most


def per_char(texts: Sequence[str], count: Callable[[str], int], points: int = POINTS, window: int = WINDOW) -> float:
    """Tokens per character of ``texts`` taken together, from ``points`` windows of ``window``
    characters counted with ``count`` (0.0 for no text)."""
    total = sum(map(len, texts))
    if not total:
        return 0.0
    if total <= points * window:  # no fewer characters to count than the sample's
        return sum(count(t) for t in texts if t) / total
    stride = total / points
    ratios = []
    point, offset = stride / 2, 0  # the next sample point, and where the current text starts
    for text in texts:
        size = len(text)
        while point < offset + size:
            start = max(0, min(int(point - offset) - window // 2, size - window))
            part = text[start:start + window]
            ratios.append(count(part) / len(part))
            point += stride
        offset += size
    return sum(ratios) / len(ratios)


def priced(text: str, rate: float) -> int:
    """A text's tokens at ``rate`` tokens a character (at least one for any text)."""
    return max(1, round(len(text) * rate)) if text else 0
