"""Short-term context offload: refs, JSONL rows, Mermaid canvases, levels L1 / L1.5 / L2 / L3.

The gateway calls :class:`OffloadService` (``service.py``); everything below it is plain
functions over files in one scope's directory (``layout.py``). Nothing here imports the gateway.
"""

from memory_tencentdb.offload.records import OffloadInputError, OffloadNotFound
from memory_tencentdb.offload.service import OffloadService

__all__ = ["OffloadInputError", "OffloadNotFound", "OffloadService"]
