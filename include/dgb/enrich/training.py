"""Training and honest measurement of the local classifier's level-1 head on real labelled news.

One home for what ``scripts/train_classifier.py`` (fits the shipped head) and
``scripts/bench_classify.py`` (cross-validated figures) share:

* :func:`load_dev_data`: the development data (``../shared/data/classifier-dev``: ``real.jsonl``,
  ``labelled.jsonl``, ``weak.jsonl`` and, when present, ``archive.jsonl``: whole articles with
  production's own label, from four agencies only) plus our own invented corpus, as
  :class:`DevArticle` rows;
* :func:`load_archive`: an operator's own labelled archive, the ``news`` rows production's
  classifier or Bedrock labelled (source ``archive``): the head is data-limited (the learning
  curve of ``scripts/bench_classify.py``), and a deployment that adopted production's database
  holds ~300k such articles;
* :func:`group_ids`: one group per article, by normalised title across ALL files (the same
  article appears whole and as excerpts, and in more than one file), so a split by group never
  trains and tests on the same article;
* :func:`fit_level1` / :func:`out_of_fold_logits`: a multinomial logistic regression on the
  classifier's features (title, lead and body vectors, and the publishing agency as a prior)
  and one on word counts, added to the taxonomy-prototype scores (which carry the themes with
  little or no training data). Rows are weighted so every theme weighs the same
  (:data:`CLASS_BALANCE`), and every whole training article is also trained on as an excerpt
  (:func:`excerpt_item`: title + first :data:`EXCERPT_CHARS` characters). The cross-validation
  scores ``real.jsonl`` only (folds by title); every other row is training data of every fold;
* the calibration (temperatures fitted by likelihood on out-of-fold predictions of the real
  articles, whole and as excerpts) lives in :mod:`dgb.enrich.calibration`, the measures in
  :mod:`dgb.enrich.measure`.

scikit-learn is imported only by the fitting functions: classifying needs numpy alone.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dgb.config import REPO_ROOT
from dgb.enrich import calibration
from dgb.enrich.contract import ArticleText
from dgb.enrich.head import Head, agency_key
from dgb.enrich.lexical import Lexical, lexical_terms, lexical_text
from dgb.enrich.softmax import log_softmax
from dgb.textfold import ascii_fold

DEV_DATA = REPO_ROOT.parent / "shared" / "data" / "classifier-dev"
CORPUS = REPO_ROOT / "include" / "dgb" / "data" / "corpus" / "articles.jsonl"
SOURCES = ("real", "labelled", "weak")
ARCHIVE_FILE = "archive.jsonl"  # optional: production-labelled whole articles of four agencies
#: training weight per source: weak labels are a coarse 10-way category mapped to level 1; the
#: whole articles of weak.jsonl were chosen by production's level-1 theme (their category agrees
#: with production on 8 of the 9 that real.jsonl also holds), so they weigh as real ones; its
#: excerpts teach nothing (weight 0): a coarse category is a noisy level-1 label for a short text
#: (excerpts 0.640 -> 0.650, macro recall on excerpts 0.554 -> 0.575 without them)
SOURCE_WEIGHTS = {"real": 1.0, "labelled": 1.0, "weak": 0.0, "corpus": 1.0, "archive": 1.0}
WEAK_WHOLE_WEIGHT = 1.0
#: the rows the cross-validation scores (every other row trains every fold)
SCORED_SOURCE = "real"
#: sources whose labels are production's own answers on whole real articles: the calibration and
#: the hybrid threshold are fitted on these
PRODUCTION_LABELLED = ("real", "archive")
#: ``news.classifier`` values whose themes may train the head: production's classifier (rows an
#: adopted database brought) and Bedrock. Never ``local``: its own answers would teach it nothing.
ARCHIVE_CLASSIFIERS = ("production", "bedrock")
ARCHIVE_LIMIT = 50_000  # newest labelled articles read by default (~60 articles/s to embed)
# inverse L2 strength of the logistic regression (vectors are unit-norm); 10 -> 3 with weak.jsonl's
# excerpts out: whole / excerpts / macro excerpts 0.690 / 0.640 / 0.554 -> 0.697 / 0.657 / 0.584
REGULARISATION_C = 3.0
PROTO_ALPHA = 1.0  # weight of the prototype scores in the logits
PROTO_TEMPERATURE = 0.05  # prototype scores (cosines) are divided by this before adding
FOLDS = 5
AGENCY_WEIGHT = 1.0  # value of an agency indicator feature (its prior's regularisation)
AGENCY_MIN_ARTICLES = 2  # agencies with fewer distinct training articles get no prior
CLASS_BALANCE = 1.0  # rows of theme c weighted by (mean theme weight / weight of c) ** this
# (0 -> 1: macro recall 0.57 -> 0.60, excerpts +0.02; the acceptance set is balanced over themes)
EXCERPT_CHARS = 500  # an excerpt: the title and this many first characters of the content
EXCERPT_WEIGHT = 0.5  # weight of each whole training article's excerpt view
LEVEL2_WEIGHT = 1.0  # weight of its log-probabilities next to the level-2 prototype scores
# the lexical part: a logistic regression over TF-IDF word counts, its log-probabilities added
# to the level-1 logits (real.jsonl, 5 grouped folds: 0.653 -> 0.680; 3 and 10 folds: +0.027)
LEX_C = 30.0
LEX_MIN_DF = 2  # words in fewer training articles are left out of the vocabulary
LEX_WEIGHT = 1.0


@dataclass
class DevArticle:
    """One labelled development article. ``l1`` is None when the label is outside our tree."""

    source: str  # real | labelled | weak | corpus | archive
    item: ArticleText
    l1: str | None
    l2_label: str | None = None  # real.jsonl: production's level-2 label
    l2: str | None = None  # labelled.jsonl: level-2 code (an OLDER production taxonomy)
    reference_summary: str | None = None
    excerpt: bool = False  # a part of an article (labelled.jsonl and weak.jsonl excerpts)
    agency_prior: bool = True  # False: its agency teaches no prior (a sample of four agencies)

    @property
    def weight(self) -> float:
        if self.source == "weak" and not self.excerpt:
            return WEAK_WHOLE_WEIGHT
        return SOURCE_WEIGHTS[self.source]


def _text(value) -> str | None:
    """A text field of a data file: None for a missing one (JSON null, or NaN from a data frame)."""
    if isinstance(value, float) and math.isnan(value):
        return None
    return value if isinstance(value, str) and value.strip() else None


def excerpt_item(item: ArticleText, chars: int = EXCERPT_CHARS) -> ArticleText:
    """A short text as readers and the acceptance check see it: the title and the first
    ``chars`` characters of the content (no subtitle, no lead)."""
    return ArticleText(item.unique_id, item.title, None, None, (item.content or "")[:chars], item.agency)


def content_chars(items: Sequence[ArticleText]) -> tuple[np.ndarray, np.ndarray]:
    """The content length of each item whole and as its :func:`excerpt_item`: what the head's
    two temperatures are fitted and applied by (:mod:`dgb.enrich.calibration`)."""
    whole = np.array([len(i.content or "") for i in items], dtype=np.int64)
    return whole, np.array([len(excerpt_item(i).content or "") for i in items], dtype=np.int64)


def _rows(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def load_dev_data(
    folder: Path | None = None, *, corpus: bool = True, archive: bool = True
) -> list[DevArticle]:
    """The development articles of ``folder`` (default :data:`DEV_DATA`), with ``archive`` its
    :data:`ARCHIVE_FILE` when present (:func:`load_archive_file`) and, with ``corpus``, our own
    corpus; FileNotFoundError naming the folder when a file is missing."""
    folder = Path(folder) if folder is not None else DEV_DATA
    out: list[DevArticle] = []
    for source in SOURCES:
        path = folder / f"{source}.jsonl"
        if not path.is_file():
            raise FileNotFoundError(f"development data file not found: {path}")
        for r in _rows(path):
            item = ArticleText(
                r.get("id"), r.get("title") or "", None, None, r.get("content") or "", r.get("agency")
            )
            label = r.get("l1_from_category") if source == "weak" else r.get("l1")
            out.append(
                DevArticle(
                    source,
                    item,
                    label or None,
                    l2_label=r.get("l2_label"),
                    reference_summary=r.get("reference_summary"),
                    l2=r.get("l2") or None,
                    excerpt=bool(r.get("excerpt")),
                )
            )
    if archive and (folder / ARCHIVE_FILE).is_file():
        out += load_archive_file(folder / ARCHIVE_FILE)
    if corpus:
        for a in _rows(CORPUS):
            item = ArticleText(
                a["url_slug"],
                a["title"],
                a.get("subtitle"),
                a.get("editorial_lead"),
                a["content"],
                a.get("agency"),
            )
            out.append(DevArticle("corpus", item, a["theme_l1"]))
    return out


def load_archive_file(path: Path, *, limit: int | None = None) -> list[DevArticle]:
    """``archive.jsonl``: whole articles exported from production's news table with its level-1
    label and stored summary, as ``archive`` rows WITHOUT an agency prior (the sample holds four
    agencies: their prior would mean nothing for the others); ``limit``: the first rows only."""
    out = []
    for r in _rows(Path(path))[:limit]:
        item = ArticleText(
            r.get("id"),
            _text(r.get("title")) or "",
            _text(r.get("subtitle")),
            _text(r.get("editorial_lead")),
            _text(r.get("content")) or "",
            _text(r.get("agency")),
        )
        out.append(
            DevArticle(
                "archive",
                item,
                _text(r.get("l1")),
                l2_label=_text(r.get("l2_label")),
                reference_summary=_text(r.get("reference_summary")),
                agency_prior=False,
            )
        )
    return out


def load_archive(conn, *, limit: int | None = ARCHIVE_LIMIT) -> list[DevArticle]:
    """The newest ``limit`` (None: all) articles of the ``news`` table whose level-1 theme came
    from :data:`ARCHIVE_CLASSIFIERS`, as ``archive`` rows (level-2 label included). ``conn`` is a
    psycopg connection (or a PostgresHook's); nothing is written."""
    if limit is not None and limit < 1:
        raise ValueError(f"archive limit must be a positive number of articles, got {limit!r}")
    with conn.cursor() as cur:
        cur.execute(
            "SELECT n.unique_id, n.title, n.subtitle, n.editorial_lead, coalesce(n.content, ''),"
            "       n.agency_key, t1.code, t2.label"
            "  FROM news n JOIN themes t1 ON t1.id = n.theme_l1_id"
            "  LEFT JOIN themes t2 ON t2.id = n.theme_l2_id"
            " WHERE n.classifier = ANY(%s)"
            " ORDER BY n.published_at DESC, n.id DESC" + (" LIMIT %s" if limit is not None else ""),
            (list(ARCHIVE_CLASSIFIERS), limit) if limit is not None else (list(ARCHIVE_CLASSIFIERS),),
        )
        rows = cur.fetchall()
    conn.rollback()  # a read: end the transaction psycopg opened
    return [
        DevArticle(
            "archive",
            ArticleText(uid, title or "", subtitle, lead, content, agency),
            l1,
            l2_label=l2_label,
        )
        for uid, title, subtitle, lead, content, agency, l1, l2_label in rows
    ]


FEATURE_CHUNK = 2_000  # articles embedded per call when training (bounds the sentence vectors held)


def training_features(
    classifier, items: Sequence[ArticleText], *, chunk: int = FEATURE_CHUNK, progress=None
) -> tuple[np.ndarray, np.ndarray]:
    """(X, proto) of :class:`~dgb.enrich.features.Features` for ``items``, computed ``chunk``
    articles at a time (an archive of 50,000 articles would otherwise hold every sentence vector
    at once); ``progress(done, total)`` is called after each chunk."""
    xs, protos = [], []
    for start in range(0, len(items), chunk):
        feats = classifier.features(items[start : start + chunk])
        xs.append(feats.X)
        protos.append(feats.proto)
        if progress is not None:
            progress(min(start + chunk, len(items)), len(items))
    if not xs:
        raise ValueError("no articles to compute features for")
    return np.concatenate(xs), np.concatenate(protos)


def title_key(title: str) -> str:
    """A title compared loosely: lower case, accents and punctuation removed."""
    text = ascii_fold(title or "").lower()
    return re.sub(r"[^a-z0-9]+", " ", text).strip()


def group_ids(articles: Sequence[DevArticle]) -> np.ndarray:
    """One integer per article; equal for rows with the same normalised title (any file)."""
    ids: dict[str, int] = {}
    return np.array([ids.setdefault(title_key(a.item.title), len(ids)) for a in articles], dtype=np.int64)


def grouped_folds(groups: np.ndarray, folds: int = FOLDS) -> list[np.ndarray]:
    """Deterministic test-index sets: groups dealt round-robin in order of first appearance."""
    order = {g: n for n, g in enumerate(dict.fromkeys(groups.tolist()))}
    fold_of = np.array([order[g] % folds for g in groups.tolist()])
    return [np.flatnonzero(fold_of == k) for k in range(folds)]


def agency_onehot(agencies: Sequence[str | None], vocabulary: Sequence[str]) -> np.ndarray:
    """(n, len(vocabulary)) indicator of each row's agency (all zero for an unknown one)."""
    index = {a: i for i, a in enumerate(vocabulary)}
    out = np.zeros((len(agencies), len(vocabulary)), dtype=np.float32)
    for n, agency in enumerate(agencies):
        i = index.get(agency_key(agency))
        if i is not None:
            out[n, i] = AGENCY_WEIGHT
    return out


def agency_vocabulary(agencies: Sequence[str | None], groups: np.ndarray) -> tuple[str, ...]:
    """Agencies seen in at least :data:`AGENCY_MIN_ARTICLES` distinct training articles (a prior
    learnt from one article would only memorise it), sorted."""
    seen: dict[str, set] = {}
    for agency, group in zip(agencies, groups.tolist()):
        if agency_key(agency):
            seen.setdefault(agency_key(agency), set()).add(group)
    return tuple(sorted(a for a, g in seen.items() if len(g) >= AGENCY_MIN_ARTICLES))


def _rows_per_code(model, codes: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """(W, b) of a fitted LogisticRegression with one row per code of ``codes``: a code it never
    saw gets W = 0 and the lowest bias minus 5. With two classes scikit-learn keeps one row
    (class 1 against class 0): the same softmax as rows -z/2 and +z/2."""
    coef, intercept = np.asarray(model.coef_), np.asarray(model.intercept_)
    if len(model.classes_) == 2 and coef.shape[0] == 1:
        coef, intercept = np.vstack([-coef / 2, coef / 2]), np.array([-intercept[0] / 2, intercept[0] / 2])
    W = np.zeros((len(codes), coef.shape[1]), dtype=np.float64)
    b = np.full(len(codes), float(intercept.min()) - 5.0)
    for row, code in enumerate(model.classes_):
        W[list(codes).index(code)] = coef[row]
        b[list(codes).index(code)] = intercept[row]
    return W, b


def balanced(weights: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """``weights`` with the rows of theme c multiplied by (mean theme total / total of c) **
    :data:`CLASS_BALANCE`: every theme weighs alike, so the head learns no class frequencies."""
    weights = weights.astype(np.float64)
    if not CLASS_BALANCE or not len(labels):
        return weights
    totals = {c: weights[labels == c].sum() for c in set(labels.tolist())}
    mean = np.mean(list(totals.values()))
    return weights * np.array([(mean / totals[c]) ** CLASS_BALANCE for c in labels.tolist()])


def fit_head(
    X: np.ndarray,
    labels: Sequence[str | None],
    weights: np.ndarray,
    codes: Sequence[str],
    agencies: Sequence[str | None] | None = None,
    groups: np.ndarray | None = None,
    *,
    C: float = REGULARISATION_C,
) -> tuple[np.ndarray, np.ndarray, tuple[str, ...], np.ndarray]:
    """(W, b, agency vocabulary, Wa) of a multinomial logistic regression, one row per code of
    ``codes`` (a code with no training row gets W = 0 and the lowest bias, so only its prototype
    score can choose it). With ``agencies`` (and ``groups``), agency indicators are features
    too: ``Wa`` is the agency prior (one column per agency of the vocabulary)."""
    from sklearn.linear_model import LogisticRegression

    y = np.array([lab if lab is not None else "" for lab in labels])
    keep = (y != "") & (weights > 0) & np.isin(y, list(codes))
    if len(set(y[keep])) < 2:
        raise ValueError("need training rows of at least two level-1 themes")
    vocab: tuple[str, ...] = ()
    design = X
    if agencies is not None and AGENCY_WEIGHT > 0:
        groups = groups if groups is not None else np.arange(len(X))
        vocab = agency_vocabulary([agencies[i] for i in np.flatnonzero(keep)], groups[keep])
        design = np.hstack([X, agency_onehot(agencies, vocab)])
    sample_weight = balanced(weights[keep], y[keep])
    model = LogisticRegression(C=C, max_iter=3000)
    model.fit(design[keep], y[keep], sample_weight=sample_weight)
    full, b = _rows_per_code(model, codes)
    W, Wa = full[:, : X.shape[1]], full[:, X.shape[1] :] * AGENCY_WEIGHT
    return W.astype(np.float32), b.astype(np.float32), vocab, Wa.astype(np.float32)


def fit_lexical(
    texts: Sequence[str],
    labels: Sequence[str | None],
    weights: np.ndarray,
    codes: Sequence[str],
    *,
    C: float = LEX_C,
) -> Lexical | None:
    """The lexical part (:class:`~dgb.enrich.lexical.Lexical`) fitted on the labelled rows of
    ``texts`` (each a :func:`~dgb.enrich.lexical.lexical_text`), one row per code of ``codes`` (a
    code without training rows gets W = 0 and the lowest bias); None with fewer than two themes."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression

    y = np.array([lab if lab is not None else "" for lab in labels])
    keep = np.flatnonzero((y != "") & (weights > 0) & np.isin(y, list(codes)))
    if len(set(y[keep])) < 2:
        return None
    vec = TfidfVectorizer(analyzer=lexical_terms, sublinear_tf=True, min_df=LEX_MIN_DF)
    A = vec.fit_transform([texts[i] for i in keep])
    model = LogisticRegression(C=C, max_iter=3000)
    model.fit(A, y[keep], sample_weight=balanced(weights[keep], y[keep]))
    W, b = _rows_per_code(model, codes)
    terms = tuple(str(t) for t in vec.get_feature_names_out())
    return Lexical(terms, vec.idf_.astype(np.float32), W.astype(np.float32), b.astype(np.float32))


def make_head(
    fitted: tuple,
    codes: Sequence[str],
    dim: int,
    *,
    scale: float = 1.0,
    embedder: str = "",
    meta: dict | None = None,
    level2: tuple | None = None,
    lexical: Lexical | None = None,
    short_scale: float | None = None,
    short_chars: int = 0,
    short_bias: np.ndarray | None = None,
) -> Head:
    W, b, vocab, Wa = fitted
    l2_codes, W2, b2 = level2 if level2 is not None else ((), None, None)
    return Head(
        tuple(codes),
        W,
        b,
        PROTO_ALPHA,
        PROTO_TEMPERATURE,
        scale,
        embedder,
        dim,
        meta or {},
        vocab,
        Wa,
        tuple(l2_codes),
        W2,
        b2,
        LEVEL2_WEIGHT,
        lexical,
        LEX_WEIGHT,
        short_scale,
        short_chars,
        short_bias,
    )


def short_bias(train: np.ndarray, articles: Sequence[DevArticle], codes: Sequence[str]) -> np.ndarray:
    """The head's ``short_bias`` from the training rows ``train`` (their labels and weights):
    :func:`dgb.enrich.calibration.prior_bias`."""
    rows = [articles[i] for i in np.asarray(train, dtype=np.int64)]
    return calibration.prior_bias([a.l1 for a in rows], [a.weight for a in rows], codes)


def prior_agencies(articles: Sequence[DevArticle]) -> list[str | None]:
    """Each article's agency for the agency prior: None where the row may teach none."""
    return [a.item.agency if a.agency_prior else None for a in articles]


def scored_rows(articles: Sequence[DevArticle]) -> np.ndarray:
    """The rows the cross-validation scores: those of :data:`SCORED_SOURCE` (real.jsonl), or,
    without any, the production-labelled ones, or every labelled one."""
    for sources in ((SCORED_SOURCE,), PRODUCTION_LABELLED, None):
        mask = np.array([a.l1 is not None and (sources is None or a.source in sources) for a in articles])
        if mask.any():
            return mask
    return np.zeros(len(articles), dtype=bool)


def fit_level1(
    train: np.ndarray,
    X: np.ndarray,
    articles: Sequence[DevArticle],
    codes: Sequence[str],
    *,
    excerpt_X: np.ndarray | None = None,
    C: float = REGULARISATION_C,
    lexical_part: bool = True,
    agency_prior: bool = True,
) -> tuple[tuple, Lexical | None]:
    """(fitted head arrays, lexical part) trained on the rows ``train`` of ``articles`` (``X``:
    their whole-article features) and, with ``excerpt_X`` (the features of each article's
    :func:`excerpt_item`), on the excerpt view of every whole one at :data:`EXCERPT_WEIGHT`.
    ``agency_prior=False``: no agency features at all (what the prior adds is measured so)."""
    train = np.asarray(train, dtype=np.int64)
    rows = [articles[i] for i in train]
    labels = [a.l1 for a in rows]
    weights = np.array([a.weight for a in rows], dtype=np.float64)
    agencies = prior_agencies(rows)
    groups = group_ids(articles)[train]
    texts = [lexical_text(a.item) for a in rows]
    design = X[train]
    if excerpt_X is not None and EXCERPT_WEIGHT > 0:
        whole = np.array([not a.excerpt for a in rows], dtype=bool)
        extra = train[whole]
        design = np.vstack([design, excerpt_X[extra]])
        labels += [articles[i].l1 for i in extra]
        weights = np.concatenate([weights, EXCERPT_WEIGHT * weights[whole]])
        agencies += [agencies[n] for n in np.flatnonzero(whole)]
        groups = np.concatenate([groups, groups[whole]])
        texts += [lexical_text(excerpt_item(articles[i].item)) for i in extra]
    fitted = fit_head(design, labels, weights, codes, agencies if agency_prior else None, groups, C=C)
    lexical = fit_lexical(texts, labels, weights, codes) if lexical_part else None
    return fitted, lexical


def out_of_fold_logits(
    X: np.ndarray,
    proto: np.ndarray,
    articles: Sequence[DevArticle],
    codes: Sequence[str],
    *,
    excerpt: tuple[np.ndarray, np.ndarray] | None = None,
    folds: int = FOLDS,
    C: float = REGULARISATION_C,
    lexical_part: bool = True,
    agency_prior: bool = True,
    agency_at_test: bool = True,
    train_share: float = 1.0,
    seed: int = 0,
    short_prior: bool = True,
    score: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray | None]:
    """(whole-article logits, excerpt logits or None) of every :func:`scored_rows` article from a
    head trained on everything outside its fold: the scored rows' title groups are dealt into
    ``folds``, and every other row (other files, the archive) whose title is not in the test
    fold trains every fold. Rows never scored stay zero. ``excerpt`` = (X, proto) of each
    article's :func:`excerpt_item`: trained on (augmentation) and scored too.
    ``lexical_part=False``: without the lexical part; ``agency_prior=False``: no agency features;
    ``agency_at_test=False``: the test rows' agency withheld (what the prior adds is measured so);
    ``train_share`` < 1: each head sees only that share of its training articles (whole title
    groups, drawn with ``seed``): a point of the learning curve (:func:`dgb.enrich.learning.learning_curve`);
    ``short_prior=False``: short inputs keep the class prior (no ``short_bias``); ``score``: a
    boolean mask of the rows to score instead of :func:`scored_rows`."""
    if not 0.0 < train_share <= 1.0:
        raise ValueError(f"train_share must be in (0, 1], got {train_share!r}")
    rng = np.random.default_rng(seed)
    groups = group_ids(articles)
    scored = np.flatnonzero(scored_rows(articles) if score is None else score)
    labelled = np.array([a.l1 is not None for a in articles])
    texts = [lexical_text(a.item) for a in articles]
    out = np.zeros((len(articles), len(codes)), dtype=np.float64)
    out_ex = np.zeros_like(out) if excerpt is not None else None
    ex_texts = [lexical_text(excerpt_item(a.item)) for a in articles] if excerpt is not None else []
    chars, ex_chars = content_chars([a.item for a in articles])
    for fold in grouped_folds(groups[scored], folds):
        test_groups = np.unique(groups[scored][fold])
        test = scored[fold]
        train = np.flatnonzero(labelled & ~np.isin(groups, test_groups))
        if train_share < 1.0:
            pool = np.unique(groups[train])
            drawn = rng.choice(pool, max(1, round(train_share * len(pool))), replace=False)
            train = train[np.isin(groups[train], drawn)]
        fitted, lexical = fit_level1(
            train,
            X,
            articles,
            codes,
            excerpt_X=excerpt[0] if excerpt is not None else None,
            C=C,
            lexical_part=lexical_part,
            agency_prior=agency_prior,
        )
        head = make_head(
            fitted,
            codes,
            X.shape[1] // 3,
            lexical=lexical,
            short_chars=calibration.SHORT_CHARS,
            short_bias=short_bias(train, articles, codes) if short_prior else None,
        )
        agencies = [articles[i].item.agency if agency_at_test else None for i in test]
        out[test] = head.logits(X[test], proto[test], agencies, [texts[i] for i in test], chars[test])
        if excerpt is not None:
            out_ex[test] = head.logits(
                excerpt[0][test], excerpt[1][test], agencies, [ex_texts[i] for i in test], ex_chars[test]
            )
    return out, out_ex


def softmax(z: np.ndarray) -> np.ndarray:
    return np.exp(log_softmax(np.asarray(z, dtype=np.float64)))
