"""The memory pipeline: L0 messages -> L1 memories -> L2 scenes -> L3 persona, on a schedule.

``Pipeline`` (scheduler.py) is what the engine creates; it subscribes to captures and runs the
stages in the background. See the modules for each stage: ``l1`` (extraction and conflicts,
``rules`` without an LLM), ``scenes``/``l2`` (scene files), ``persona`` (L3), ``state`` (the
database tables that make it resumable) and ``layout`` (where a scope's files live).
"""

from memory_tencentdb.pipeline.layout import scope_root
from memory_tencentdb.pipeline.scheduler import Pipeline

__all__ = ["Pipeline", "scope_root"]
