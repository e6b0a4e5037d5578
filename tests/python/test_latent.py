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
