"""The LLM client: OpenAI-compatible chat completions, tolerant JSON parsing."""

from memory_tencentdb.llm.client import TASKS, LLMClient, LLMError, LLMTimeout, Reply
from memory_tencentdb.llm.jsonparse import JSONParseError, JSONTruncated, parse_json

__all__ = [
    "TASKS",
    "JSONParseError",
    "JSONTruncated",
    "LLMClient",
    "LLMError",
    "LLMTimeout",
    "Reply",
    "parse_json",
]
