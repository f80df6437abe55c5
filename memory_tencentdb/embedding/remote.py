"""An OpenAI-compatible ``/embeddings`` endpoint (OpenAI, Azure-style proxies, Ollama, vLLM...)."""

from __future__ import annotations

import math
import threading
from typing import Any
from urllib.parse import urlsplit

import httpx
import numpy as np

from .errors import EmbeddingError, normalise, truncate

BATCH_SIZE = 256
"""Most servers cap one request at 256 or more inputs."""


class OpenAIEmbedder:
    """``POST {base_url}/embeddings`` with ``{input, model, dimensions?}``; no retries.

    Callers decide the fallback (recall goes keyword-only for the turn, writes keep the row
    without a vector until it is re-embedded), so a failure surfaces at once as
    :class:`EmbeddingError` naming the status and the start of the body.
    """

    name = "openai"

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str = "",
        dimensions: int = 0,
        send_dimensions: bool = True,
        timeout_ms: int = 10000,
        max_input_chars: int = 5000,
        provider: str = "openai",
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        if not base_url or not model:
            raise ValueError("an OpenAI-compatible embedder needs base_url and model")
        self.base_url = base_url.rstrip("/")
        self.url = self.base_url + "/embeddings"
        host = urlsplit(self.base_url).netloc
        if not host:
            raise ValueError(f"embedding.base_url {base_url!r} is not an http(s) URL")
        self.model = model
        self.provider = provider
        self.configured_dimensions = max(0, int(dimensions))
        self.dim = self.configured_dimensions
        self.send_dimensions = bool(send_dimensions) and self.configured_dimensions > 0
        self.max_input_chars = int(max_input_chars)
        self.timeout_s = max(0.001, int(timeout_ms) / 1000.0)
        self.model_id = f"openai:{host}:{model}:{self.configured_dimensions}"
        self.state = "ready"
        self.error: str | None = None
        headers = {"Content-Type": "application/json"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        self._client = httpx.Client(headers=headers, timeout=self.timeout_s, transport=transport)
        self._lock = threading.Lock()  # guards dim; requests themselves run concurrently

    def __repr__(self) -> str:
        return f"<OpenAIEmbedder {self.model_id}>"

    def warm(self) -> None:
        """Nothing to load; the first request tells the vector size if it was not configured."""

    def close(self) -> None:
        self._client.close()

    def embed(self, texts: list[str]) -> np.ndarray:
        texts = truncate(list(texts), self.max_input_chars)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        parts = [self._request(texts[i : i + BATCH_SIZE]) for i in range(0, len(texts), BATCH_SIZE)]
        out = normalise(np.concatenate(parts, axis=0))
        with self._lock:
            if self.dim == 0:
                self.dim = int(out.shape[1])
            elif out.shape[1] != self.dim:
                what = "embedding.dimensions is" if self.configured_dimensions else "it first gave"
                raise EmbeddingError(
                    f"{self.url} returned {out.shape[1]}-dim vectors but {what} {self.dim}"
                )
        return out

    def _request(self, batch: list[str]) -> np.ndarray:
        body: dict[str, Any] = {"input": batch, "model": self.model}
        if self.send_dimensions:
            body["dimensions"] = self.configured_dimensions
        try:
            resp = self._client.post(self.url, json=body)
        except httpx.TimeoutException as e:
            raise EmbeddingError(
                f"embedding request to {self.url} timed out after {self.timeout_s * 1000:.0f} ms"
            ) from e
        except httpx.HTTPError as e:
            raise EmbeddingError(
                f"embedding request to {self.url} failed: {type(e).__name__}: {e}"
            ) from e
        if resp.status_code // 100 != 2:
            raise EmbeddingError(
                f"embedding request to {self.url} failed: HTTP {resp.status_code}: "
                f"{resp.text[:300]}"
            )
        try:
            data = resp.json()["data"]
            rows = sorted(data, key=lambda d: int(d.get("index", 0)))
            vectors = [[_finite(x) for x in row["embedding"]] for row in rows]
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise EmbeddingError(
                f"embedding response from {self.url} is malformed ({type(e).__name__}: {e}): "
                f"{resp.text[:300]}"
            ) from e
        if len(vectors) != len(batch):
            raise EmbeddingError(
                f"embedding response from {self.url} has {len(vectors)} vectors "
                f"for {len(batch)} inputs"
            )
        if not vectors or len({len(v) for v in vectors}) != 1 or not vectors[0]:
            raise EmbeddingError(
                f"embedding response from {self.url} has empty or mixed-size vectors"
            )
        return np.asarray(vectors, dtype=np.float32)


def _finite(x: Any) -> float:
    """A JSON number as a float, with null/NaN/Inf (which some servers emit) as 0."""
    try:
        f = float(x)
    except (TypeError, ValueError):
        return 0.0
    return f if math.isfinite(f) else 0.0
