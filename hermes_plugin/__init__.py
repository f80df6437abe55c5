"""memory-tencentdb as a Hermes memory provider (MemoryProvider ``memory_tencentdb``).

Install: symlink this folder to ``$HERMES_HOME/plugins/memory_tencentdb`` and set
``memory: {provider: memory_tencentdb}`` in ``$HERMES_HOME/config.yaml``
(``scripts/install-hermes.sh`` does both). Everything else is found automatically.
Standard library + httpx only; the engine runs in the gateway process, never in Hermes.
"""

from __future__ import annotations

from typing import Any

from . import hooks
from .provider import MemoryTencentdbProvider

__all__ = ["MemoryTencentdbProvider", "register"]


def register(ctx: Any) -> None:
    """Hermes entry point: hand over a (cheap, inert) provider and attach the tool hook.

    With offload switched on (``offload`` in memory_tencentdb.json), the offload seams are
    attached too; with it off nothing else is registered, so Hermes sends what it always sent.
    """
    if hasattr(ctx, "register_memory_provider"):
        ctx.register_memory_provider(MemoryTencentdbProvider())
    hooks.install(ctx)
    try:
        from .config import Settings

        if Settings.load().offload:
            from . import offload_middleware

            offload_middleware.install()
    except Exception:  # noqa: BLE001 - registration never breaks Hermes's start
        import logging

        logging.getLogger("hermes_memory_tencentdb").warning(
            "memory_tencentdb: offload seams not attached", exc_info=True
        )
