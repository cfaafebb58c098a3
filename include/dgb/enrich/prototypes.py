"""Taxonomy prototypes of the offline classifier: the texts that stand for each taxonomy node,
their vectors (computed once and cached), and the node score over them.

Every taxonomy node gets SEVERAL prototype texts (``"<label>. <description>"``, its keywords in
chunks of :data:`KEYWORD_CHUNK`, each example headline); a node scores the mean of the top-k
cosines (:data:`TOP_K` per level, :func:`topk_mean`) over the prototypes of its whole subtree.
Prototype vectors are computed once per (texts hash, embedder, dimension), kept in memory and,
with a cache folder, on disk (``<state_dir>/cache/local-classifier/``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dgb.enrich.text import normalize_ws
from dgb.taxonomy import Taxonomy

log = logging.getLogger(__name__)

PROTOTYPE_VERSION = "proto-1"  # bump when prototype construction changes (invalidates caches)
KEYWORD_CHUNK = 5
TOP_K = {1: 10, 2: 4, 3: 3}  # top-k mean per level
ENCODE_BATCH = 512  # texts per encode call (prototypes and articles alike)


@dataclass
class Prototypes:
    texts: list[str]
    owner: list[str]  # taxonomy code each prototype belongs to
    digest: str


def build_prototypes(taxonomy: Taxonomy) -> Prototypes:
    texts: list[str] = []
    owner: list[str] = []

    def add(code: str, text: str) -> None:
        text = normalize_ws(text)
        if text:
            texts.append(text)
            owner.append(code)

    for theme in taxonomy:
        add(theme.code, f"{theme.label}. {theme.description}")
        kws = list(theme.keywords)
        for i in range(0, len(kws), KEYWORD_CHUNK):
            add(theme.code, ", ".join(kws[i : i + KEYWORD_CHUNK]))
        for example in theme.examples:
            add(theme.code, example)
    payload = json.dumps([PROTOTYPE_VERSION, owner, texts], ensure_ascii=False)
    return Prototypes(texts, owner, hashlib.sha256(payload.encode("utf-8")).hexdigest())


_memory_cache: dict[tuple[str, str, int], np.ndarray] = {}
_cache_lock = threading.Lock()


def _cache_file(cache_dir: Path, model: str, dim: int, digest: str) -> Path:
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", model).strip("_") or "model"
    return Path(cache_dir) / "local-classifier" / f"{safe}-{dim}-{digest[:16]}.npy"


def prototype_vectors(protos: Prototypes, embedder, cache_dir: Path | None = None) -> np.ndarray:
    """Prototype embeddings, computed once per (texts, model) and cached in memory / on disk."""
    key = (protos.digest, embedder.name, int(embedder.dim))
    with _cache_lock:
        cached = _memory_cache.get(key)
        if cached is not None:
            return cached
        path = _cache_file(cache_dir, embedder.name, embedder.dim, protos.digest) if cache_dir else None
        vectors = None
        if path is not None and path.is_file():
            try:
                loaded = np.load(path, allow_pickle=False)
                if loaded.shape == (len(protos.texts), embedder.dim):
                    vectors = loaded.astype(np.float32, copy=False)
            except (OSError, ValueError) as exc:
                log.warning("ignoring unreadable prototype cache %s: %s", path, exc)
        if vectors is None:
            vectors = np.asarray(embedder.encode(protos.texts, batch_size=ENCODE_BATCH), dtype=np.float32)
            if path is not None:
                try:
                    path.parent.mkdir(parents=True, exist_ok=True)
                    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
                    with open(tmp, "wb") as fh:
                        np.save(fh, vectors, allow_pickle=False)
                    os.replace(tmp, path)
                except OSError as exc:
                    log.warning("cannot write prototype cache %s: %s", path, exc)
        _memory_cache[key] = vectors
        return vectors


def topk_mean(sims: np.ndarray, k: int) -> np.ndarray:
    """Mean of the k largest values along the last axis."""
    n = sims.shape[-1]
    if n <= k:
        return sims.mean(axis=-1)
    return np.partition(sims, n - k, axis=-1)[..., n - k :].mean(axis=-1)
