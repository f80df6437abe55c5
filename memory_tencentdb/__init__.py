"""memory-tencentdb: layered long-term memory and context offload for AI agents."""

__version__ = "0.1.0"
