"""Which images to clear so a request carries at most half its image budget (pure planning)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from lookout_cli.formats.clearing import is_cleared
from lookout_cli.formats.view import ASSISTANT_ROLES, IMAGE, TOOL_CALL, Item, View, arguments

MB = 1_000_000
# Half of what each provider accepts in one request, so text and tools keep their room.
DEFAULT_BUDGETS = {"anthropic": 16 * MB, "openai": 25 * MB, "gemini": 10 * MB}
ALWAYS_KEEP_RECENT = 5


@dataclass(slots=True)
class ImageChoice:
    item: Item
    name: str
    bytes: int  # base64 bytes the request carries for it
    tokens: int
    why: str = ""
    note: int = 0  # tokens of the placeholder that clearing it leaves

    @property
    def what(self) -> str:
        """What its placeholder calls it."""
        return f"image {self.name}"


@dataclass(slots=True)
class ImagePlan:
    images: list[ImageChoice] = field(default_factory=list)
    clear: list[ImageChoice] = field(default_factory=list)
    kept: list[ImageChoice] = field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(i.bytes for i in self.images)


def provider_of(model: str | None, configured: str | None = None) -> str:
    """The provider whose limits apply, from the model name (Anthropic when unknown)."""
    from lookout_cli.tokens.models import lookup

    provider = lookup(configured or model).provider or "anthropic"
    return provider if provider in DEFAULT_BUDGETS else "anthropic"


def image_name(item: Item, calls: dict[str, Item], number: int) -> str:
    """A name the agent recognises: the file a tool read, else its place in the chat."""
    call = calls.get(item.call_id or "")
    if call is not None:
        args = arguments(call)
        for key in ("file_path", "path", "filename", "file"):
            if isinstance(args.get(key), str):
                return args[key]
        return f"#{number} from {call.tool or 'a tool'}"
    return f"#{number} ({item.image.media_type or 'image'}, in message {item.message})"


def protected(view: View, images: list[Item], keep_recent: int) -> dict[int, str]:
    """Images that always stay, by id, with the reason."""
    why: dict[int, str] = {}
    assistant = [i.message for i in view.items if i.role in ASSISTANT_ROLES]
    last_reply = max(assistant, default=-1)
    step_calls = {i.call_id for i in view.items if i.kind == TOOL_CALL and i.message == last_reply}
    for item in images:
        if item.message > last_reply:
            why[id(item)] = "in the current request"
        elif item.call_id in step_calls:
            why[id(item)] = "in the agent's latest step"
    for item in images[-keep_recent:] if keep_recent else []:
        why.setdefault(id(item), f"one of the {keep_recent} most recent")
    return why


def plan_clearing(view: View, budget: int, keep_recent: int, provider: str,
                  note_cost: Callable[[ImageChoice], int]) -> ImagePlan:
    """Once the images exceed ``budget``, pick the oldest seen ones until half of it is left.
    ``note_cost`` prices the placeholder that would clear an image: an image that costs no more
    tokens than that stays (clearing it would grow the context)."""
    from lookout_cli.images.costs import image_item_tokens

    calls = view.calls()
    live = [i for i in view.items if i.kind == IMAGE and i.image is not None and i.image.data and not is_cleared(i)]
    plan = ImagePlan()
    for number, item in enumerate(live, 1):
        plan.images.append(ImageChoice(item, image_name(item, calls, number), len(item.image.data), 0))
    if plan.total <= budget:
        return plan
    keep = protected(view, live, keep_recent)
    last_reply = max((i.message for i in view.items if i.role in ASSISTANT_ROLES), default=-1)
    carried = plan.total
    for choice in plan.images:  # oldest first
        reason = keep.get(id(choice.item))
        if reason is None and choice.item.message >= last_reply:
            reason = "not seen by the agent yet"
        if reason is None and carried > budget // 2:
            choice.tokens = image_item_tokens(choice.item, provider)
            choice.note = note_cost(choice)
            if choice.tokens <= choice.note:
                reason = f"a placeholder would cost at least as much (about {choice.note:,} tokens)"
        if reason or carried <= budget // 2:
            choice.why = reason or "the request is within half the budget"
            plan.kept.append(choice)
            continue
        plan.clear.append(choice)
        carried -= choice.bytes
    return plan
