"""The token budget of one /offload/assemble answer, kept in one place.

An answer is the host's list (as the levels left it) plus the offload's own messages: the
guide (sent as a system addition), the task canvas and the history head (a task's history
blocks or the "messages left" note). The levels (``levels.Shrinker``) keep the running total
of the list, and they must see the guide and the canvas while they run, so those are charged
to the levels' total; what changes after the levels ran (the head, a squeezed canvas, a short
guide) is kept beside it as ``extra``. ``total`` is always the two together, which is what the
answer reports as ``estimated_tokens`` and compares with the host's ``token_budget``.
"""

from __future__ import annotations

from collections.abc import Callable

from memory_tencentdb.offload.levels import OVERHEAD, Shrinker


class AssembleBudget:
    """What one answer may cost (``limit``) and what each of its parts costs now.

    ``parts`` holds the cost of each offload message by name (``guide``, ``canvas``,
    ``head``), so a part replaced later (the canvas squeezed to its newest step) changes the
    total by the difference, never counted twice or forgotten."""

    def __init__(
        self,
        limit: int,
        levels: Shrinker,
        count: Callable[[str], int],
        fixed: int,
        guide_tokens: int,
    ) -> None:
        self.limit = limit
        self.levels = levels
        self.count = count
        # The system prompt and the guide's room: in the levels' total from the start, so
        # ``list_tokens`` is the list's own part.
        self.fixed = fixed
        self.parts: dict[str, int] = {"guide": guide_tokens}
        self.extra = 0  # what changed after the levels ran (``seal``), beside their total
        self.sealed = False

    @property
    def total(self) -> int:
        """Tokens of the whole answer as it stands: the list, the system prompt, the offload's
        own messages."""
        return self.levels.total + self.extra

    def list_tokens(self) -> int:
        """The list's own tokens (without the system prompt and the guide), which sizes the
        compact canvas; asked while no canvas is charged."""
        return self.levels.total - self.fixed

    def cost(self, text: str, message: bool = True) -> int:
        """Tokens ``text`` adds: a message pays the per-message overhead the levels count
        (``OVERHEAD``), the guide (a system addition) only its text; nothing for no text."""
        if not text:
            return 0
        return self.count(text) + (OVERHEAD if message else 0)

    def tokens(self, name: str) -> int:
        """What the part ``name`` costs now (0 when it is not sent)."""
        return self.parts.get(name, 0)

    def put(self, name: str, text: str, message: bool = True) -> None:
        """Part ``name`` is now ``text`` ("" for none): the total changes by the difference.
        Before ``seal`` the change goes to the levels' total (they must see it: the canvas
        can tip the list into the emergency level); after it, to ``extra``."""
        new = self.cost(text, message)
        delta = new - self.parts.get(name, 0)
        self.parts[name] = new
        if self.sealed:
            self.extra += delta
        else:
            self.levels.total += delta

    def seal(self) -> None:
        """The levels are done with what they must see; later changes are kept beside their
        total, so ``fit_list`` can ask them for exactly the room the additions need."""
        self.sealed = True

    def fits(self, tokens: int) -> bool:
        """Whether ``tokens`` more still fit the limit."""
        return self.total + tokens <= self.limit

    def over(self) -> bool:
        """Whether the answer as it stands is over the limit."""
        return self.total > self.limit

    def fit_list(self) -> bool:
        """Ask the levels to leave room for what was added after they ran (the head, the
        canvas, the guide): units that may go leave until the whole fits. True if any left."""
        return self.levels.fit(self.limit - self.extra)
