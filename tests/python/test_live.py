"""tributary.LiveClassifier: the library's LiveModel from Python threads."""
import os
import threading

import pytest

import tributary


def _stream(n, seed):
    import random
    rnd = random.Random(seed)
    topics = ["sport", "cooking", "weather"]
    out = []
    for _ in range(n):
        k = rnd.randrange(3)
        words = [("%sword%d" % (topics[k], rnd.randrange(30))) if rnd.random() < 0.7
                 else "common%d" % rnd.randrange(20) for _ in range(6 + rnd.randrange(8))]
        out.append((" ".join(words), topics[k]))
    return out


def test_learns_and_predicts_from_threads_at_once():
    train, test = _stream(3000, 1), _stream(300, 2)
    live = tributary.LiveClassifier(publish_every=50)
    done = threading.Event()
    errors = []

    def predictor(i):
        last = 0
        try:
            while not done.is_set():
                label, version = live.predict_versioned(test[i % len(test)][0])
                assert version >= last, (version, last)
                assert version % 50 == 0
                last = version
                i += 7
        except Exception as e:  # reported in the main thread
            errors.append(e)

    threads = [threading.Thread(target=predictor, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for text, label in train:
        live.learn_one(text, label)
    done.set()
    for t in threads:
        t.join()
    assert not errors, errors
    assert live.publish() == 3000
    right = sum(live.predict_one(text) == label for text, label in test)
    assert right / len(test) >= 0.9
    assert live.predict_versioned({"sportword3": 2})[1] == 3000


def test_durable_mode_keeps_what_was_learned(tmp_path):
    d = str(tmp_path / "live")
    live = tributary.LiveClassifier(data_dir=d)
    for text, label in _stream(200, 3):
        live.learn_one(text, label)
    del live  # no checkpoint: as after a crash, the log has every document
    again = tributary.LiveClassifier(data_dir=d)
    assert again.version == 200
    # The live learner (the default) came back whole from its log.
    s = again.stats()
    assert s["labelled"] == 200 and len(s["candidates"]) == 3, s
    assert tributary.LiveClassifier(select="off").stats() is None
    # A second handle on the directory in use is refused, naming the holder.
    with pytest.raises(tributary.IOError, match="is in use.*LiveModel"):
        tributary.LiveClassifier(data_dir=d)
    # Group commit: a batch in the log at once, all or nothing.
    batch = _stream(100, 4)
    with pytest.raises(tributary.InvalidDocument, match="document #3.*no words"):
        again.learn_many([t for t, _ in batch[:3]] + ["..."], [y for _, y in batch[:4]])
    assert again.acknowledged == 200
    assert again.learn_many([t for t, _ in batch], [y for _, y in batch]) == 100
    assert again.acknowledged == 300
    again.checkpoint()
    assert os.path.exists(os.path.join(d, "model.trib"))
    path = str(tmp_path / "copy.trib")
    assert again.save(path) == 200
    assert sorted(tributary.load(path).classes) == ["cooking", "sport", "weather"]


def test_bad_input_is_refused_naming_it():
    live = tributary.LiveClassifier()
    with pytest.raises(tributary.InvalidDocument, match=r"expected text \(str\) or a dict, found float"):
        live.learn_one(3.5, "a")
    # One document constructor for Classifier and LiveClassifier (FillInput ->
    # InputDocument): the same refusals in the same words.
    for bad, message in [({"w": "x"}, "the count of term 'w' must be a number"), ({3: 1.0}, "terms must be str")]:
        with pytest.raises(tributary.InvalidDocument, match=message):
            live.learn_one(bad, "a")
        with pytest.raises(tributary.InvalidDocument, match=message):
            tributary.Classifier().learn_one(bad, "a")
    with pytest.raises(tributary.InvalidDocument, match="no content|empty|nothing"):
        live.learn_one("...", "a")
    with pytest.raises(TypeError):
        live.learn_one("text", 1.5)


def test_the_python_tutorial_runs_as_written():
    """docs/tutorials/embedding-python.md: its python blocks, in order."""
    import re
    root = os.path.join(os.path.dirname(__file__), "..", "..")
    page = open(os.path.join(root, "docs", "tutorials", "embedding-python.md")).read()
    blocks = re.findall(r"^```python\n(.*?)^```", page, flags=re.S | re.M)
    assert len(blocks) >= 2
    scope = {}
    for b in blocks:
        exec(compile(b, "embedding-python.md", "exec"), scope)


def test_the_module_holds_no_server_or_broker_code():
    # The module links the stream format only (python/CMakeLists.txt:
    # tributary_format), not the server with its Redis (hiredis) and Kafka
    # sources: none of their code or strings are in it.
    import tributary._tributary as native

    with open(native.__file__, "rb") as f:
        data = f.read()
    for marker in (b"tributary serve", b"redisCommandArgv", b"rd_kafka_new", b"XREADGROUP"):
        assert marker not in data, marker
    # ... while what it does link is there (a check that can fail).
    assert b"LearnBatch" in data
