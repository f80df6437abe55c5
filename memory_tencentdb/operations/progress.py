"""Progress bars for long commands (reindex, import, export, purge): tqdm on stderr, silent when
stderr is not a terminal (pipes, CI, ``export > file`` keeps its stdout clean either way)."""

from __future__ import annotations

import sys
from typing import Any


class _Quiet:
    def update(self, n: int = 1) -> None: ...

    def set_description(self, text: str) -> None: ...

    def close(self) -> None: ...

    def __enter__(self) -> _Quiet:
        return self

    def __exit__(self, *exc: Any) -> None: ...


def bar(desc: str, total: int | None = None, unit: str = "it", enabled: bool | None = None) -> Any:
    """A progress bar (a context manager with ``update(n)``)."""
    if enabled is None:
        enabled = sys.stderr.isatty()
    if not enabled:
        return _Quiet()
    try:
        from tqdm import tqdm
    except ImportError:  # pragma: no cover - a dependency, but never fatal
        return _Quiet()

    class _Finished(tqdm):
        """Shows the last count before it clears: tqdm skips a refresh within ``mininterval``
        of the previous one, so a short job (one file) could vanish at 0%."""

        def close(self) -> None:
            if not self.disable and self.n != self.last_print_n:
                self.refresh()
            super().close()

    return _Finished(total=total, desc=desc, unit=unit, file=sys.stderr, leave=False)
