"""tributary.TopicModel and tributary.Mixture: learned online, evaluated as
`tributary eval` evaluates them."""
import json

import numpy as np
import pytest

import tributary


def test_topic_model_learns_transforms_and_evaluates_like_eval(fortunes, cli, tmp_path):
    xs, _ = fortunes["train"]
    tm = tributary.TopicModel(k=6)
    assert tm.learn_many(xs[:5000])["learned"] == 5000
    topics = tm.topics(top=7)
    assert len(topics) == 6 and all(len(t) == 7 for t in topics)
    # Hashed ids are printed as the words they were seen as.
    assert all(isinstance(w, str) and not w.startswith("#") for t in topics for w, _ in t)
    assert all(p1 >= p2 for t in topics for (_, p1), (_, p2) in zip(t, t[1:]))
    theta = tm.transform(xs[5000:5020])
    assert theta.shape == (20, 6)
    np.testing.assert_allclose(theta.sum(axis=1), 1.0, rtol=1e-9)
    held = xs[5000:6000]
    ev = tm.evaluate(held)
    assert ev["perplexity_kind"] == "document_completion" and np.isfinite(ev["perplexity"])
    tm.save(tmp_path / "lda.trib")
    tributary.write_stream(tmp_path / "held.pb", held)
    want = json.loads(cli("eval", "--model", tmp_path / "lda.trib", "--in", tmp_path / "held.pb", "--json"))
    assert ev["log_likelihood_per_document"] == pytest.approx(want["log_likelihood_per_document"], rel=1e-12)
    assert ev["perplexity"] == pytest.approx(want["perplexity"], rel=1e-12)
    # More learning lowers the perplexity of held-out documents.
    fresh = tributary.TopicModel(k=6)
    fresh.learn_many(xs[:200])
    assert fresh.perplexity(held) > ev["perplexity"]
    back = tributary.load(tmp_path / "lda.trib")
    assert isinstance(back, tributary.TopicModel) and back.stats_digest == tm.stats_digest


def test_mixture_by_sep_on_a_closed_vocabulary(fortunes):
    xs, _ = fortunes["train"]
    counts = {}
    for x in xs[:3000]:
        for w in tributary.tokenize(x):
            counts[w] = counts.get(w, 0) + 1
    vocab = sorted(counts, key=lambda w: (-counts[w], w))[:300]
    m = tributary.Mixture("emsd-mixture", components=3, vocabulary=vocab)
    r = m.learn_many(xs[:3000], skip_bad=True)  # documents with none of the 300 words are refused, named
    assert r["learned"] > 2500 and r["skipped"] == 3000 - r["learned"]
    assert all("no terms" in msg for msg in r["messages"])
    ev = m.evaluate([x for x in xs[3000:3200] if any(w in counts for w in tributary.tokenize(x))][:100])
    assert ev["log_evidence_documents"] > 0 and np.isfinite(ev["log_evidence"])
    assert sum(ev["weights"]) == pytest.approx(1.0)
    resp = m.transform(["the the the of"])
    assert resp.shape == (1, 3) and resp.sum() == pytest.approx(1.0)


def test_mmnb_on_mixed_features_as_mixture_and_as_classifier():
    """Mixed-membership naive Bayes over a real, a count and a categorical
    feature, given as dicts (a missing value as None or left out)."""
    rng = np.random.default_rng(7)
    feats = {"x": "real", "n": "count", "colour": ["red", "blue"]}
    xs, ys = [], []
    for i in range(1500):
        a = i % 2 == 0
        xs.append({"x": float(rng.normal(-2.0 if a else 2.0, 1.0)), "n": int(rng.poisson(1 if a else 6)),
                   "colour": ("red" if rng.random() < 0.8 else "blue") if a else ("blue" if rng.random() < 0.8 else "red")})
        ys.append("a" if a else "b")
    xs[5]["x"] = None       # missing
    del xs[6]["colour"]     # missing
    mix = tributary.Mixture("mmnb", components=2, features=feats)
    mix.learn_many(xs)
    resp = mix.transform(xs[:200])
    # The two components separate the two kinds of documents.
    hard = resp.argmax(axis=1)
    agree = np.mean(hard == np.array([0 if y == "a" else 1 for y in ys[:200]]))
    assert max(agree, 1 - agree) > 0.9
    assert np.isfinite(mix.evaluate(xs[:100])["log_likelihood_per_document"])
    clf = tributary.Classifier("mmnb", loss="nll", discriminative=True, components=2, features=feats,
                               classes=["a", "b"], open_classes=False)
    clf.learn_many(xs[:1000], ys[:1000])
    acc = np.mean(np.array(clf.predict_many(xs[1000:])) == np.array(ys[1000:]))
    assert acc > 0.9
    with pytest.raises(tributary.InvalidDocument, match="'n'"):
        clf.learn_one({"x": 0.0, "n": "many", "colour": "red"}, "a")
