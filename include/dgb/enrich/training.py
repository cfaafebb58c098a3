"""Training and honest measurement of the local classifier's level-1 head on real labelled news.

One home for what ``scripts/train_classifier.py`` (fits the shipped head) and
``scripts/bench_classify.py`` (cross-validated figures) share:

* :func:`load_dev_data`: the development data (``../shared/data/classifier-dev``: ``real.jsonl``,
  ``labelled.jsonl``, ``weak.jsonl``) plus our own invented corpus, as :class:`DevArticle` rows;
* :func:`load_archive`: an operator's own labelled archive, the ``news`` rows production's
  classifier or Bedrock labelled (source ``archive``): the head is data-limited (the learning
  curve of ``scripts/bench_classify.py``), and a deployment that adopted production's database
  holds ~300k such articles;
* :func:`group_ids`: one group per article, by normalised title across ALL files (the same
  article appears whole and as excerpts, and in more than one file), so a split by group never
  trains and tests on the same article;
* :func:`fit_head` / :func:`out_of_fold_logits`: a multinomial logistic regression on the
  classifier's features (title, lead and body vectors, and the publishing agency as a prior),
  added to the taxonomy-prototype scores (which carry the themes with little or no training data);
* :func:`fit_scale`: the calibration (one temperature, fitted by likelihood on out-of-fold
  predictions of the real articles), so ``theme_confidence`` reads as a probability;
* :func:`rouge_l`: ROUGE-L (longest common subsequence of word tokens) for the summary.

scikit-learn is imported only by the fitting functions: classifying needs numpy alone.
"""

from __future__ import annotations

import itertools
import json
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dgb.config import REPO_ROOT
from dgb.enrich.contract import ArticleText
from dgb.enrich.head import L2_UNSEEN_LOGPROB, Head, agency_key
from dgb.enrich.lexical import Lexical, lexical_terms, lexical_text
from dgb.enrich.softmax import log_softmax

DEV_DATA = REPO_ROOT.parent / "shared" / "data" / "classifier-dev"
CORPUS = REPO_ROOT / "include" / "dgb" / "data" / "corpus" / "articles.jsonl"
SOURCES = ("real", "labelled", "weak")
#: training weight per source: weak labels are a coarse 10-way category mapped to level 1
SOURCE_WEIGHTS = {"real": 1.0, "labelled": 1.0, "weak": 0.5, "corpus": 1.0, "archive": 1.0}
#: sources whose labels are production's own answers on whole real articles: the calibration and
#: the hybrid threshold are fitted on these
PRODUCTION_LABELLED = ("real", "archive")
#: ``news.classifier`` values whose themes may train the head: production's classifier (rows an
#: adopted database brought) and Bedrock. Never ``local``: its own answers would teach it nothing.
ARCHIVE_CLASSIFIERS = ("production", "bedrock")
ARCHIVE_LIMIT = 50_000  # newest labelled articles read by default (~60 articles/s to embed)
REGULARISATION_C = 10.0  # inverse L2 strength of the logistic regression (vectors are unit-norm)
PROTO_ALPHA = 1.0  # weight of the prototype scores in the logits
PROTO_TEMPERATURE = 0.05  # prototype scores (cosines) are divided by this before adding
FOLDS = 5
AGENCY_WEIGHT = 1.0  # value of an agency indicator feature (its prior's regularisation)
AGENCY_MIN_ARTICLES = 2  # agencies with fewer distinct training articles get no prior
CLASS_BALANCE = 0.0  # rows of theme c weighted by (mean theme weight / weight of c) ** this
# (measured 0.3-1.0: no gain on real.jsonl, only on our corpus)
LEVEL2_C = 1.0  # level-2 part: inverse L2 strength (~290 real articles, ~70 codes)
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

    @property
    def weight(self) -> float:
        return SOURCE_WEIGHTS[self.source]


def _rows(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def load_dev_data(folder: Path | None = None, *, corpus: bool = True) -> list[DevArticle]:
    """The development articles of ``folder`` (default :data:`DEV_DATA`) and, with ``corpus``,
    our own corpus; FileNotFoundError naming the folder when a file is missing."""
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
                )
            )
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
    text = unicodedata.normalize("NFKD", title or "").encode("ascii", "ignore").decode("ascii").lower()
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
    sample_weight = weights[keep].astype(np.float64)
    if CLASS_BALANCE:
        totals = {c: sample_weight[y[keep] == c].sum() for c in set(y[keep])}
        mean = np.mean(list(totals.values()))
        sample_weight = sample_weight * np.array([(mean / totals[c]) ** CLASS_BALANCE for c in y[keep]])
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
    model.fit(A, y[keep], sample_weight=weights[keep].astype(np.float64))
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
    )


def level2_targets(articles: Sequence[DevArticle], taxonomy) -> list[str | None]:
    """Production's level-2 label of each article as OUR level-2 code (a child of its level-1
    code with the same label, compared loosely), or None (no label, or no such child: the
    label only maps once our tree carries production's labels)."""
    codes = {(t.parent_code, title_key(t.label)): t.code for t in taxonomy.level(2)}
    return [codes.get((a.l1, title_key(a.l2_label))) if a.l1 and a.l2_label else None for a in articles]


def fit_level2(
    X: np.ndarray, targets: Sequence[str | None], *, C: float = LEVEL2_C
) -> tuple[tuple[str, ...], np.ndarray, np.ndarray] | None:
    """(codes, W2, b2) of a logistic regression over the level-2 codes seen in ``targets``, or
    None with fewer than two of them."""
    from sklearn.linear_model import LogisticRegression

    rows = [i for i, t in enumerate(targets) if t]
    if len({targets[i] for i in rows}) < 2:
        return None
    model = LogisticRegression(C=C, max_iter=3000)
    model.fit(X[rows], [targets[i] for i in rows])
    return (
        tuple(str(c) for c in model.classes_),
        model.coef_.astype(np.float32),
        model.intercept_.astype(np.float32),
    )


def out_of_fold_level2(
    X: np.ndarray, articles: Sequence[DevArticle], taxonomy, *, folds: int = FOLDS
) -> tuple[tuple[str, ...], np.ndarray] | None:
    """(level-2 codes, log-probabilities of every article from a level-2 part trained on the
    OTHER folds); codes a fold never saw get :data:`~dgb.enrich.head.L2_UNSEEN_LOGPROB`."""
    targets = level2_targets(articles, taxonomy)
    codes = tuple(sorted({t for t in targets if t}))
    if len(codes) < 2:
        return None
    out = np.full((len(articles), len(codes)), L2_UNSEEN_LOGPROB, dtype=np.float64)
    for test in grouped_folds(group_ids(articles), folds):
        train = np.setdiff1d(np.arange(len(articles)), test)
        fitted = fit_level2(X[train], [targets[i] for i in train])
        if fitted is None:
            continue
        head = Head(
            (),
            np.zeros((0, X.shape[1])),
            np.zeros(0),
            0.0,
            1.0,
            1.0,
            "",
            X.shape[1] // 3,
            {},
            l2_codes=fitted[0],
            W2=fitted[1],
            b2=fitted[2],
        )
        cols = [codes.index(c) for c in fitted[0]]
        out[np.ix_(test, cols)] = head.level2_logprobs(X[test])
    return codes, out


def out_of_fold_logits(
    X: np.ndarray,
    proto: np.ndarray,
    articles: Sequence[DevArticle],
    codes: Sequence[str],
    *,
    folds: int = FOLDS,
    C: float = REGULARISATION_C,
    lexical_part: bool = True,
    train_share: float = 1.0,
    seed: int = 0,
) -> np.ndarray:
    """Logits of every article from a head trained on the OTHER folds (grouped by title);
    ``lexical_part=False``: without the lexical part (what it adds is measured against this);
    ``train_share`` < 1: each head sees only that share of its training articles (whole title
    groups, drawn with ``seed``): a point of the learning curve (:func:`learning_curve`)."""
    if not 0.0 < train_share <= 1.0:
        raise ValueError(f"train_share must be in (0, 1], got {train_share!r}")
    rng = np.random.default_rng(seed)
    groups = group_ids(articles)
    labels = [a.l1 for a in articles]
    agencies = [a.item.agency for a in articles]
    weights = np.array([a.weight for a in articles])
    texts = [lexical_text(a.item) for a in articles]
    out = np.zeros((len(articles), len(codes)), dtype=np.float64)
    for test in grouped_folds(groups, folds):
        train = np.setdiff1d(np.arange(len(articles)), test)
        if train_share < 1.0:
            pool = np.unique(groups[train])
            drawn = rng.choice(pool, max(1, round(train_share * len(pool))), replace=False)
            train = train[np.isin(groups[train], drawn)]
        fitted = fit_head(
            X[train],
            [labels[i] for i in train],
            weights[train],
            codes,
            [agencies[i] for i in train],
            groups[train],
            C=C,
        )
        lexical = (
            fit_lexical([texts[i] for i in train], [labels[i] for i in train], weights[train], codes)
            if lexical_part
            else None
        )
        head = make_head(fitted, codes, X.shape[1] // 3, lexical=lexical)
        out[test] = head.logits(X[test], proto[test], [agencies[i] for i in test], [texts[i] for i in test])
    return out


LEARNING_SHARES = (0.25, 0.5, 1.0)
LEARNING_SEEDS = 3  # draws averaged per share below 1


def learning_curve(
    X: np.ndarray,
    proto: np.ndarray,
    articles: Sequence[DevArticle],
    codes: Sequence[str],
    rows: np.ndarray,
    *,
    shares: Sequence[float] = LEARNING_SHARES,
    folds: int = FOLDS,
    seeds: int = LEARNING_SEEDS,
) -> list[tuple[float, float]]:
    """(share, mean cross-validated level-1 agreement over the ``rows`` mask) when each head is
    trained on that share of its training articles: how much more labelled data would buy.
    Shares below 1 average ``seeds`` draws."""
    labels = np.array([a.l1 or "" for a in articles])
    out = []
    for share in shares:
        scores = []
        for seed in range(1 if share >= 1.0 else seeds):
            z = out_of_fold_logits(X, proto, articles, codes, folds=folds, train_share=share, seed=seed)
            pred = np.array([codes[j] for j in z.argmax(1)])
            scores.append(float((pred[rows] == labels[rows]).mean()))
        out.append((float(share), float(np.mean(scores))))
    return out


def fit_scale(logits: np.ndarray, labels: Sequence[str | None], codes: Sequence[str]) -> float:
    """The factor ``s`` minimising the negative log-likelihood of softmax(s * logits) over the
    rows whose label is a code (golden-section search on log s; deterministic)."""
    rows = [i for i, lab in enumerate(labels) if lab in codes]
    if not rows:
        raise ValueError("no labelled rows to calibrate on")
    z = logits[rows]
    target = np.array([list(codes).index(labels[i]) for i in rows])

    def nll(log_s: float) -> float:
        return float(-log_softmax(np.exp(log_s) * z)[np.arange(len(rows)), target].mean())

    lo, hi = np.log(1e-3), np.log(1e2)
    ratio = (np.sqrt(5) - 1) / 2
    a, b = hi - ratio * (hi - lo), lo + ratio * (hi - lo)
    fa, fb = nll(a), nll(b)
    for _ in range(80):
        if fa < fb:
            hi, b, fb = b, a, fa
            a = hi - ratio * (hi - lo)
            fa = nll(a)
        else:
            lo, a, fa = a, b, fb
            b = lo + ratio * (hi - lo)
            fb = nll(b)
    return float(np.exp((lo + hi) / 2))


def softmax(z: np.ndarray) -> np.ndarray:
    return np.exp(log_softmax(np.asarray(z, dtype=np.float64)))


def expected_calibration_error(confidence: np.ndarray, correct: np.ndarray, bins: int = 10) -> float:
    """Mean |accuracy - confidence| over equal-width confidence bins, weighted by bin size."""
    edges = np.linspace(0.0, 1.0, bins + 1)
    total = 0.0
    for lo, hi in itertools.pairwise(edges):
        sel = (confidence > lo) & (confidence <= hi)
        if sel.any():
            total += sel.sum() * abs(correct[sel].mean() - confidence[sel].mean())
    return float(total / max(1, len(confidence)))


def routing_table(
    confidence: np.ndarray, correct: np.ndarray, thresholds: Sequence[float]
) -> list[tuple[float, float, float]]:
    """Hybrid mode simulated: for each threshold, (threshold, share routed to Bedrock, overall
    agreement) when routed articles take the reference label (production's answer stands in
    for Bedrock's) and the others keep the local answer."""
    out = []
    for t in thresholds:
        routed = confidence < t
        agree = np.where(routed, True, correct)
        out.append((float(t), float(routed.mean()), float(agree.mean())))
    return out


def choose_threshold(confidence: np.ndarray, correct: np.ndarray, *, max_routed: float = 0.30) -> float:
    """The threshold with the best simulated overall agreement among those routing at most
    ``max_routed`` of the articles (on out-of-fold confidences)."""
    grid = np.round(np.arange(0.0, 1.0001, 0.01), 2)
    rows = [r for r in routing_table(confidence, correct, grid) if r[1] <= max_routed]
    return max(rows, key=lambda r: (r[2], -r[1]))[0]


# ----------------------------------------------------------------------------- summary overlap

_TOKEN = re.compile(r"\w+", re.UNICODE)


def tokens(text: str | None) -> list[str]:
    return _TOKEN.findall((text or "").lower())


def lcs_length(a: Sequence[str], b: Sequence[str]) -> int:
    """Length of the longest common subsequence of two token lists (O(len(a) x len(b)))."""
    if not a or not b:
        return 0
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0]
        for j, y in enumerate(b):
            cur.append(prev[j] + 1 if x == y else max(prev[j + 1], cur[j]))
        prev = cur
    return prev[-1]


def rouge_l(candidate: str | None, reference: str | None) -> tuple[float, float, float]:
    """ROUGE-L (precision, recall, F1) of ``candidate`` against ``reference`` over lower-cased
    word tokens; (0, 0, 0) when either is empty."""
    a, b = tokens(candidate), tokens(reference)
    lcs = lcs_length(a, b)
    if lcs == 0:
        return 0.0, 0.0, 0.0
    p, r = lcs / len(a), lcs / len(b)
    return p, r, 2 * p * r / (p + r)
