"""Which images to clear so a request stays within the provider's per-request limits and carries at
most half its image budget (pure planning)."""

from __future__ import annotations

from collections.abc import Callable

from lookout_cli.core.dataclass import dataclass, field
from lookout_cli.core.saved import SavedStore, human_size
from lookout_cli.formats.clearing import clear_cost, is_cleared
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


def _utf8_bytes(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def request_limits(view: View, live: list[Item], provider: str) -> tuple[int | None, int | None, str]:
    """The provider's per-request limits on the images: how many, how many bytes (None: no
    published limit), and what the report calls the byte limit. A limit on the whole request
    leaves the images what the rest of it (text, tool calls and results) does not take."""
    from lookout_cli.images.costs import limits_for

    limits = limits_for(provider)
    caps = []
    if limits.max_request_image_bytes is not None:
        caps.append((limits.max_request_image_bytes,
                     f"{provider}'s limit of {human_size(limits.max_request_image_bytes)} of images a request"))
    if limits.max_request_bytes is not None:
        images = {id(i) for i in live}
        rest = sum(_utf8_bytes(i.text) for i in view.items if id(i) not in images)
        caps.append((max(0, limits.max_request_bytes - rest),
                     f"{provider}'s limit of {human_size(limits.max_request_bytes)} a request"))
    max_bytes, label = min(caps, default=(None, ""))
    return limits.max_images, max_bytes, label


def plan_clearing(view: View, budget: int, keep_recent: int, provider: str, store: SavedStore,
                  count: Callable[[str], int]) -> ImagePlan:
    """Pick the images to clear, oldest first.

    Once the images exceed ``budget``, the oldest ones the agent has seen (and that no rule
    protects) go until half of it is left: whatever their token cost while the bytes are over
    the budget, below it only those that cost more tokens (``count``) than their placeholder.
    The provider's per-request limits (how many images, how many bytes) are hard: a request past
    them is refused, so past them protected images go too, oldest first. An image that is no
    larger than its placeholder in bytes nor in tokens goes only for the image count (clearing
    it would gain nothing)."""
    from lookout_cli.images.costs import image_item_tokens

    calls = view.calls()
    live = [i for i in view.items if i.kind == IMAGE and i.image is not None and i.image.data and not is_cleared(i)]
    plan = ImagePlan()
    for number, item in enumerate(live, 1):
        plan.images.append(ImageChoice(item, image_name(item, calls, number), len(item.image.data), 0))
    max_images, max_bytes, bytes_limit = request_limits(view, live, provider)
    count_limit = f"{provider}'s limit of {max_images} images a request"
    carried, images = plan.total, len(plan.images)

    def over_a_hard_limit() -> str:
        if max_images is not None and images > max_images:
            return count_limit
        if max_bytes is not None and carried > max_bytes:
            return bytes_limit
        return ""

    over_budget = carried > budget
    if not over_budget and not over_a_hard_limit():
        return plan
    keep = protected(view, live, keep_recent)
    last_reply = max((i.message for i in view.items if i.role in ASSISTANT_ROLES), default=-1)
    for choice in plan.images:
        choice.why = keep.get(id(choice.item)) or ("not seen by the agent yet" if choice.item.message >= last_reply else "")
    budget_limit = f"the {human_size(budget)} budget"
    # Oldest first; the protected images are the newest, so they go last, and for a hard limit only.
    for choice in plan.images:
        limit = over_a_hard_limit()
        if not limit and over_budget and not choice.why and carried > budget // 2:
            limit = budget_limit
        if limit:
            choice.tokens = image_item_tokens(choice.item, provider)
            choice.note = clear_cost(store, choice.item, choice.what, count, choice.tokens)
        if limit and limit != count_limit and choice.tokens <= choice.note:
            # Over a byte limit, an image goes whatever its token cost, unless its placeholder
            # is no smaller either; once the bytes fit, making room down to half the budget is
            # not worth a line that costs more tokens.
            making_room = limit == budget_limit and carried <= budget
            if making_room or choice.bytes <= clear_cost(store, choice.item, choice.what, _utf8_bytes, choice.tokens):
                choice.why, limit = f"a placeholder would cost at least as much (about {choice.note:,} tokens)", ""
        if not limit:
            choice.why = choice.why or "the request is within its limits and half the budget"
            plan.kept.append(choice)
            continue
        choice.why = limit
        plan.clear.append(choice)
        carried -= choice.bytes
        images -= 1
    return plan
