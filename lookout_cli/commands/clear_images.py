"""``lookout clear-images``: keep the image bytes a request carries within a budget."""

from __future__ import annotations

import click

from lookout_cli.core.errors import LookoutError
from lookout_cli.core.saved import human_size
from lookout_cli.core.units import parse_size
from lookout_cli.flags import filter_options
from lookout_cli.formats.clearing import clear_item
from lookout_cli.formats.view import IMAGE
from lookout_cli.images.budget import ALWAYS_KEEP_RECENT, DEFAULT_BUDGETS, plan_clearing
from lookout_cli.images.costs import image_provider
from lookout_cli.images.repair import repair_images
from lookout_cli.options import Run
from lookout_cli.tokens.tokenizer import TokenCounter


@click.command(epilog="""\b
Examples:
  lookout clear-images session.jsonl > lighter.jsonl
  lookout clear-images --budget 8MB -i session.jsonl
  lookout clear-images --repair --provider anthropic < broken.jsonl > fixed.jsonl
  lookout mentions < chat.jsonl | lookout clear-images | lookout compact > next.jsonl

\b
Default budgets (base64 bytes one request may carry), half of what the provider takes:
  anthropic 16 MB  (API requests are refused past 32 MB)
  openai    25 MB  (up to 50 MB of images per request)
  gemini    10 MB  (inline data is limited to 20 MB per request)

Whatever the budget, a request stays within the provider's own limits (anthropic: 100 images
and 32 MB a request; openai: 500 images and 50 MB of images; gemini: none published).

Reads the whole transcript (it must know which images the agent has seen), then writes it.
Cleared images are saved first; `lookout restore` puts them back.
""")
@click.option("--budget", "budget_text", metavar="SIZE",
              help="Image bytes one request may carry (e.g. 16MB) [config: images.budget].")
@click.option("--provider", type=click.Choice(sorted(DEFAULT_BUDGETS)),
              help="Whose limits apply (default: from the transcript's model, else its format).")
@click.option("--keep-recent", type=click.IntRange(0), default=None,
              help="The most recent images that always stay [default: 5].")
@click.option("--repair", is_flag=True,
              help="Shrink (or clear) images that break the provider's per-image limits: size, dimensions.")
@filter_options(side_effects=True)
def clear_images(run: Run, budget_text: str | None, provider: str | None, keep_recent: int | None,
                 repair: bool) -> None:
    """Clear the oldest images the agent has seen once a request carries too many image bytes.

    Over the budget, the oldest seen images go, whatever their token cost, until half of it is
    left; below the budget, an image that costs no more tokens than the line that would replace
    it stays. The images in the current request, in the agent's latest step, and the five most
    recent always stay, unless the request would break the provider's limit on images or bytes
    a request (then the oldest go, whichever they are). Each cleared image leaves a line with its
    name, size and the saved file that shows it again; Claude Code's second copy of a tool's
    image is cleared with it. A shrunk image (--repair) is followed by a note naming the saved
    original. The report names the limits that applied.
    """
    transcript = run.load()
    report: dict = {"command": "clear-images", "format": transcript.format, "cleared": [], "repaired": []}
    if transcript.adapter is None or not transcript.lines:
        run.finish(transcript, report)
        return
    view = transcript.view()
    provider = provider or image_provider(run.setting("model") or view.model, view.format)
    budget_text = budget_text or run.setting("images.budget")
    try:
        budget = parse_size(str(budget_text)) if budget_text else DEFAULT_BUDGETS[provider]
    except LookoutError as exc:
        raise click.BadParameter(str(exc), param_hint="--budget") from None
    keep = keep_recent if keep_recent is not None else run.number("images.keep_recent", None, ALWAYS_KEEP_RECENT, int, minimum=0)
    if not transcript.adapter.can_write and (repair or any(i.kind == IMAGE for i in view.items)):
        run.warn(f"the {transcript.format} format is read-only here; images are reported, not cleared")
        run.finish(transcript, report)
        return

    if repair:
        report["repaired"] = repair_images(run, transcript, provider)
        view = transcript.view()

    plan = plan_clearing(view, budget, keep, provider, run.store, TokenCounter.for_model(view.model).count)
    for choice in plan.clear:
        cleared = clear_item(run.store, transcript, choice.item, choice.what, tokens=choice.tokens)
        report["cleared"].append({"name": choice.name, "bytes": cleared.nbytes, "tokens": choice.tokens,
                                  "why": choice.why, "saved": str(cleared.content.path)})
    report.update(budget=budget, provider=provider, before_bytes=plan.total,
                  after_bytes=plan.total - sum(c.bytes for c in plan.clear),
                  freed_tokens=sum(c.tokens - c.note for c in plan.clear),
                  limits=list(dict.fromkeys(c.why for c in plan.clear)),
                  kept=[{"name": k.name, "bytes": k.bytes, "why": k.why} for k in plan.kept])
    run.finish(transcript, report, changes=len(plan.clear) + len(report["repaired"]),
               tell=lambda: _say(run, report, plan))  # said once the transcript is written


def _say(run: Run, report: dict, plan) -> None:
    verb = "would clear" if run.dry_run else "cleared"
    images = sum(1 for _ in plan.images)
    if not plan.clear:
        run.say(f"clear-images: {images} image(s), {human_size(plan.total)} of a "
                f"{human_size(report['budget'])} budget; nothing to clear")
    else:
        run.say(f"clear-images: {verb} {len(plan.clear)} of {images} image(s): "
                f"{human_size(report['before_bytes'])} -> {human_size(report['after_bytes'])} "
                f"(budget {human_size(report['budget'])}), " + _tokens(report["freed_tokens"]))
        run.say(f"  limits applied: {'; '.join(report['limits'])}")
    for kept in plan.kept:
        run.reporter.debug(f"kept {kept.name} ({human_size(kept.bytes)}): {kept.why}")
    for fixed in report["repaired"]:
        run.say(f"  repaired {fixed['name']}: {fixed['what']}")


def _tokens(freed: int) -> str:
    # Over the budget even an image cheaper in tokens than its placeholder goes: bytes come first.
    return f"about {freed:,} tokens freed" if freed >= 0 else f"the placeholders cost about {-freed:,} tokens more"
