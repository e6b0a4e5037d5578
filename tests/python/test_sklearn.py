"""tributary.sklearn.SdemClassifier: scikit-learn's own estimator checks, and
the program's accuracy on the same split."""
import json

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.feature_extraction.text import CountVectorizer
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import Pipeline
from sklearn.utils.estimator_checks import check_estimator

import tributary
from tributary.sklearn import SdemClassifier


def test_check_estimator_passes():
    check_estimator(SdemClassifier())


def test_check_estimator_passes_for_hinge_and_nll():
    check_estimator(SdemClassifier(loss="hinge"))
    check_estimator(SdemClassifier(loss="nll", select="off"))


@pytest.fixture(scope="module")
def program_accuracy(fortunes, cli):
    """The program's accuracy on the fortunes split: `convert` (two passes,
    a closed vocabulary), then `train` with its defaults, and `train
    --select off --n 10000` (one learner in arrival order)."""
    d = fortunes["dir"]
    cli("convert", "--format", "tsv", "--in", d / "train.tsv", "--out", d / "train.pb")
    cli("convert", "--format", "tsv", "--in", d / "test.tsv", "--out", d / "test.pb")
    out = {}
    for name, flags in [("default", []), ("off", ["--select", "off", "--epochs", "1", "--n", "10000"])]:
        cli("train", "--in", d / "train.pb", "--out", d / (name + ".trib"), "-q", *flags)
        out[name] = json.loads(cli("eval", "--model", d / (name + ".trib"), "--in", d / "test.pb", "--json"))["accuracy"]
    return out


def test_pipeline_fit_matches_the_program(fortunes, program_accuracy):
    xtr, ytr = fortunes["train"]
    xte, yte = fortunes["test"]
    pipe = Pipeline([("vec", CountVectorizer(analyzer=tributary.tokenize)), ("clf", SdemClassifier())])
    pipe.fit(xtr, ytr)
    acc = np.mean(pipe.predict(xte) == np.array(yte))
    assert abs(acc - program_accuracy["default"]) <= 0.005, (acc, program_accuracy)
    report = json.loads(pipe[-1].training_report_)
    assert report["mode"] == "offline" and report["kept"]


def test_partial_fit_matches_the_program(fortunes, program_accuracy):
    xtr, ytr = fortunes["train"]
    xte, yte = fortunes["test"]
    vec = CountVectorizer(analyzer=tributary.tokenize).fit(xtr)
    X = vec.transform(xtr)
    clf = SdemClassifier()
    classes = sorted(set(ytr))
    for i in range(0, X.shape[0], 1000):
        clf.partial_fit(X[i:i + 1000], ytr[i:i + 1000], classes=classes)
    acc = np.mean(clf.predict(vec.transform(xte)) == np.array(yte))
    assert abs(acc - program_accuracy["off"]) <= 0.005, (acc, program_accuracy)


def test_dense_and_sparse_give_the_same_model():
    rng = np.random.default_rng(3)
    X = rng.poisson(1.0, size=(300, 20)).astype(float)
    y = (X[:, 0] + X[:, 1] > X[:, 2] + X[:, 3]).astype(int)
    a = SdemClassifier().fit(X, y)
    b = SdemClassifier().fit(sp.csr_matrix(X), y)
    assert a.stats_digest_ == b.stats_digest_
    np.testing.assert_array_equal(a.predict_proba(X), b.predict_proba(sp.csc_matrix(X)))
    # decision_function ranks like predict_proba (what the declared-skipped
    # check_decision_proba_consistency tests, on counts).
    order_p = np.argsort(a.predict_proba(X)[:, 1], kind="stable")
    d = a.decision_function(X)
    assert np.all(np.diff(d[order_p]) >= -1e-12)


def test_grid_search_and_errors():
    rng = np.random.default_rng(4)
    X = rng.poisson(1.0, size=(200, 10)).astype(float)
    y = np.where(X[:, 0] > X[:, 1], "yes", "no")
    gs = GridSearchCV(SdemClassifier(select="off", epochs=3), {"prior": [1.0, 3.0], "loss": ["ncll", "nll"]}, cv=3)
    gs.fit(X, y)
    assert set(gs.best_params_) == {"prior", "loss"}
    clf = SdemClassifier().fit(X, y)
    with pytest.raises(ValueError, match="Negative values"):
        clf.predict(-X)
    with pytest.raises(ValueError, match="classes must be passed"):
        SdemClassifier().partial_fit(X, y)
    p = SdemClassifier().partial_fit(X[:10], y[:10], classes=["no", "yes"])
    with pytest.raises(ValueError, match="not among the classes"):
        p.partial_fit(X[:2], ["maybe", "yes"])
    with pytest.raises(tributary.NotFoundError, match="no family plugin named 'nope'"):
        SdemClassifier(family="nope").fit(X, y)


def test_sample_weight_counts_copies_and_zero_removes():
    rng = np.random.default_rng(5)
    X = rng.poisson(1.0, size=(120, 8)).astype(float)
    y = np.where(X[:, 0] + X[:, 1] > X[:, 2] + X[:, 3], "a", "b")
    # NLL: a row of weight k moves the statistics as k copies of it learned
    # in a row (exact averaging; the step counter then advances by one, not
    # k, so a whole weighted sequence is not exactly the replicated one).
    a = SdemClassifier(loss="nll", n=1000).partial_fit(X[:50], y[:50], classes=["a", "b"])
    b = SdemClassifier(loss="nll", n=1000).partial_fit(X[:50], y[:50], classes=["a", "b"])
    a.partial_fit(X[50:51], y[50:51], sample_weight=[3.0])
    b.partial_fit(X[[50, 50, 50]], y[[50, 50, 50]])
    np.testing.assert_allclose(a.predict_proba(X), b.predict_proba(X), rtol=1e-9)
    assert a.stats_digest_ != SdemClassifier(loss="nll", n=1000).partial_fit(X[:51], y[:51], classes=["a", "b"]).stats_digest_
    # Zero weight: as if the row were absent (fit with the Trainer too).
    w0 = np.ones(120)
    w0[::7] = 0
    c = SdemClassifier().fit(X, y, sample_weight=w0)
    d = SdemClassifier().fit(X[w0 > 0], y[w0 > 0])
    assert c.stats_digest_ == d.stats_digest_
    with pytest.raises(ValueError, match="finite and >= 0"):
        SdemClassifier().fit(X, y, sample_weight=-w0)
