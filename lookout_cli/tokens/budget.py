"""Context budgets: how many tokens a chat may use, what to keep free, when to compact.

The rules are Hull's (seeds/003, SPEC §3): a model with a separate input limit keeps
``min(20,000, max output)`` free; a model with one window shared by prompt and output
keeps its full output allowance, up to 32,000; a configured ``reserved`` overrides both.
Compaction is due when usage reaches ``threshold_percent`` (if set) or the room left
falls to the reserve, whichever comes first.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from lookout_cli.core.dataclass import dataclass
from lookout_cli.core.errors import LookoutError
from lookout_cli.core.units import parse_percent, parse_size
from lookout_cli.tokens.models import Model

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (ARCHITECTURE.md)
if TYPE_CHECKING:
    from typing import Any

INPUT_LIMIT_RESERVE = 20_000  # opencode's COMPACTION_BUFFER, Hull's rule for input-limit models
OUTPUT_RESERVE_CAP = 32_000  # opencode's OUTPUT_TOKEN_MAX, Hull's cap for one-window models
DEFAULT_SUMMARY_SHARE = 0.85  # summary point of a model whose maker gives none
STEP_SHARE = 1 / 3  # the tool calls of one step share about a third of the budget

def parse_budget(text: str | int, window: int) -> int:
    """A budget in tokens: a size (``"200k"``) or a share of ``window`` (``"80%"``)."""
    if isinstance(text, str) and text.strip().endswith("%"):
        value = int(window * parse_percent(text) / 100)
    else:
        value = parse_size(text)
    if value <= 0:
        raise LookoutError(f"a budget must be more than 0 tokens, got {text!r}")
    return value


def reserve(model: Model, reserved: int | str | None = None) -> int:
    """Tokens to keep free for the reply, by Hull's rule (``reserved`` overrides it)."""
    if reserved is not None:
        return parse_size(reserved)
    if model.has_input_limit:
        out = model.max_output if model.max_output is not None else INPUT_LIMIT_RESERVE
        return min(INPUT_LIMIT_RESERVE, out)
    out = model.max_output if model.max_output is not None else OUTPUT_RESERVE_CAP
    return min(out, OUTPUT_RESERVE_CAP)


@dataclass(frozen=True)
class Budget:
    """How much of ``model``'s context a chat may fill, and where the marks are.

    ``limit`` is the prompt tokens the chat may use: the ``budget`` setting, else the
    model's input limit, else its window. Percentages are of ``limit``.
    """

    model: Model
    limit: int
    reserve: int
    summary_point: int
    threshold_percent: float | None = None

    @classmethod
    def from_settings(
        cls,
        model: Model,
        budget: int | str | None = None,
        threshold_percent: int | float | str | None = None,
        reserved: int | str | None = None,
    ) -> Budget:
        """Build from a model and the settings: ``budget``, ``threshold_percent``, ``reserved``."""
        window = model.prompt_limit
        limit = parse_budget(budget, window) if budget is not None else window
        pct = parse_percent(threshold_percent) if threshold_percent is not None else None
        # However small the budget, at least half of it stays usable: otherwise a budget
        # below the reserve would make compaction due at every turn.
        keep = min(reserve(model, reserved), limit // 2)
        own = model.summary_point
        point = own if own is not None and own <= limit else int(limit * DEFAULT_SUMMARY_SHARE)
        return cls(model, limit, keep, point, pct)

    @classmethod
    def from_config(cls, model: Model, settings: Mapping[str, Any] | None) -> Budget:
        """Build from a config table holding ``budget``, ``threshold_percent``, ``reserved``."""
        settings = settings or {}
        return cls.from_settings(
            model,
            budget=settings.get("budget"),
            threshold_percent=settings.get("threshold_percent"),
            reserved=settings.get("reserved"),
        )

    @property
    def due_at(self) -> int:
        """The fewest used tokens at which compaction is due."""
        at = self.limit - self.reserve
        if self.threshold_percent is not None:
            at = min(at, math.ceil(self.limit * self.threshold_percent / 100))
        return at

    def due(self, used: int) -> bool:
        """Compaction is due: ``threshold_percent`` reached, or room left ≤ the reserve."""
        if self.threshold_percent is not None and used * 100 >= self.limit * self.threshold_percent:
            return True
        return self.limit - used <= self.reserve

    def remaining(self, used: int) -> int:
        """Tokens left before the limit (negative when over it)."""
        return self.limit - used

    def percent(self, used: int) -> float:
        """``used`` as a percentage of the limit."""
        return used * 100 / self.limit

    @property
    def step_share(self) -> int:
        """Tokens the tool calls of one step share between them: a third of the budget."""
        return int(self.limit * STEP_SHARE)
