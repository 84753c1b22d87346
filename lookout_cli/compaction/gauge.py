"""How ``compact`` counts: the same counter, models file and budget as ``lookout measure``, and
the text of cleared output read back from the saved-output store."""

from __future__ import annotations

import hashlib
import re

from lookout_cli.core import progress
from lookout_cli.core.saved import MARKER, SavedStore, original_tokens
from lookout_cli.formats.view import TOOL_RESULT, Item, View
from lookout_cli.images.costs import image_provider
from lookout_cli.tokens import sample as head_sample

SAVED_PATH_RE = re.compile(r"It is saved in (.+?\.(?:txt|jsonl|bin))(?=[;.\]])")


class Gauge:
    """Counts the way ``lookout measure`` does: the same counter, models file and budget."""

    def __init__(self, options, view: View, store: SavedStore | None = None,
                 originals: dict[str, str] | None = None) -> None:
        from lookout_cli.meter import analysis as meter
        from lookout_cli.tokens.cache import counter_for

        self.meter = meter
        self.model = options.model or view.model
        self.counter = counter_for(self.model, exact=not options.estimate, jobs=options.jobs)  # measure's counts reused
        self.jobs = options.jobs  # for the first view: later ones differ from it by a few placeholders
        self.settings = meter.Settings(model=options.model, budget=options.budget, estimate=options.estimate,
                                       now=options.now, models_config=options.models_config,
                                       threshold_percent=options.threshold_percent, reserved=options.reserved)
        self.model_info = meter.lookup_model(self.model, options.models_config)
        self.provider = image_provider(self.model, view.format)
        self.store = store
        self.originals = originals if originals is not None else {}
        self.rate: float | None = None  # tokens per character of the texts priced by a sample
        self.priced = 0  # how many texts that is

    def measure(self, view: View, tokens: list[int] | None = None):
        """The meter of ``view``, whose items' tokens are ``tokens.tokenizer`` when known."""
        tokens = self.tokens(view) if tokens is None else tokens
        m = self.meter.measure(view, self.settings, counter=self.counter, model_info=self.model_info, tokens=tokens,
                               points=False)
        self._recalibrate(view, m, tokens)
        return m

    def _recalibrate(self, view: View, m, tokens: list[int]) -> None:
        """The provider's last count predates what lookout cleared before it, so the calibration
        must compare it with the estimate of what the provider saw: cleared parts count at their
        original size (named in the placeholder, or read back from the store)."""
        if m.calibration is None or m.last is None or not m.last.estimate:
            return
        usage = self.meter.last_usage(view)
        response = self.meter.locate(view, usage) if usage is not None else None
        if response is None:
            return
        extra = 0
        for item, t in zip(view.items[: response.start], tokens):
            if item.kind == TOOL_RESULT and MARKER in item.text:
                extra += max(0, self.original_tokens(item, t) - t)
        if not extra:
            return
        ratio = self.meter.calibration_ratio(m.last.prompt, m.last.estimate + extra)
        setup = sum(p.tokens for p in m.parts if p.group == "setup")
        m.calibration = ratio
        m.used = self.meter.context_used(view, tokens, setup, _inferred(m), ratio)

    def original_tokens(self, item: Item, tokens: int) -> int:
        """The tokens of a cleared item's original (``tokens.tokenizer``, its own, when it names none)."""
        named = original_tokens(item.text)
        if named is not None:
            return named
        text = saved_text(self.store, item, self.originals) if self.store is not None else item.text
        return tokens if text is item.text else self.counter.count(text)

    def tokens(self, view: View, priced_before: int = 0) -> list[int]:
        """The tokens of ``view``'s items; those of the first ``priced_before`` (but the setup)
        priced at the tokens per character of a sample of them (``tokens.sample``)."""
        later = getattr(self.counter, "count_later", None)
        if self.jobs > 1 and later is not None:  # the texts no cache knows, counted in processes first
            with progress.stage(f"counting tokens in {self.jobs} processes"):
                later([i.text for i in self.meter.uncounted(view, priced_before)], jobs=self.jobs)()
            self.jobs = 1  # (not hashed and looked up once more for every later view)
        if not priced_before:
            return self.meter.item_tokens(view, self.counter, self.provider)
        if self.rate is None:  # the same texts for the whole run: sampled once
            from lookout_cli.tokens.tokenizer import exact_length

            texts = [i.text for i in self.meter.priced_items(view, priced_before)]
            self.rate = head_sample.per_char(texts, exact_length(self.counter.encoding))
            self.priced = len(texts)
        rate = self.rate
        return self.meter.item_tokens(view, self.counter, self.provider, priced_before,
                                      lambda text: head_sample.priced(text, rate))


def _scale(m) -> float:
    """Provider tokens per counted token (the calibration ``measure`` applies)."""
    ratio = m.calibration
    return ratio if ratio and 0.25 <= ratio <= 4 else 1.0


def _inferred(m) -> int:
    return sum(p.tokens for p in m.parts if p.basis == "inferred")


def saved_text(store: SavedStore, item: Item, known: dict[str, str] | None = None) -> str:
    """An item's text as the agent first saw it: cleared output comes back from the store."""
    if item.kind != TOOL_RESULT or MARKER not in item.text:
        return item.text
    match = SAVED_PATH_RE.search(item.text)
    if not match:
        return item.text
    path = match.group(1)
    folder, name = path.rsplit("/", 2)[-2:]
    sha = folder + name.split(".", 1)[0]
    if not re.fullmatch(r"[0-9a-f]{64}", sha):
        return item.text
    if known and sha in known:
        return known[sha]
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError:
        data = store.get(sha)
    if data is None or hashlib.sha256(data).hexdigest() != sha:
        return item.text
    try:  # saved with surrogatepass (``clearing``): the same text, lone surrogates and all
        return data.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        return data.decode("utf-8", "replace")
