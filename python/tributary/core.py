"""Online learners with River's conventions (learn_one / predict_one), over
the library's learner API (python/src/module.cc)."""
import json
import numbers
import threading

import numpy as np

from . import _tributary

# What a document may be: raw text (tokenized exactly as `tributary convert`
# does), a dict term -> count, or, for a model with features (gaussian,
# mmnb, ...), a dict feature name -> value.


def _label_name(y):
    """The class name of a label: str as is, an integer as its decimal text.
    Anything else (a float, None, a list...) is refused: a count model's
    classes are names."""
    if isinstance(y, str):
        return y
    if isinstance(y, (bool, np.bool_)):
        raise TypeError("a label must be str or int, found bool %r" % (y,))
    if isinstance(y, (numbers.Integral, np.integer)):
        return str(int(y))
    raise TypeError("a label must be str or int, found %s %r" % (type(y).__name__, y))


def _features_spec(features):
    """features: a list of names (real features), or a dict name -> "real",
    "count" or a list of categories (categorical)."""
    if features is None:
        return None
    if isinstance(features, dict):
        items = features.items()
    else:
        items = [(f, "real") for f in features]
    out = []
    for name, kind in items:
        if isinstance(kind, str):
            out.append((str(name), kind, []))
        else:
            out.append((str(name), "categorical", [str(c) for c in kind]))
    return out


class _Learner:
    """What the online learners share: the model handle, learning, saving,
    pickling (through the snapshot bytes) and the label map."""

    def __init__(self, family, loss, *, n=0, seed=1, schedule=None, loss_options=None, engine="sdem",
                 damping=0.0, classes=None, open_classes=True, features=None, vocabulary=None, hashed_dim=0,
                 select="off", **options):
        self._labels = {}
        self._model = _tributary.Model(
            family=family,
            loss=loss,
            options=dict(options),
            loss_options=dict(loss_options or {}),
            schedule=dict(schedule or {}),
            n=float(n or 0),
            seed=int(seed),
            engine=engine,
            damping=float(damping),
            classes=None if classes is None else [_label_name(c) for c in classes],
            open_classes=bool(open_classes),
            vocabulary=vocabulary,
            hashed_dim=int(hashed_dim),
            features=_features_spec(features),
            select=str(select),
        )
        for c in classes or []:
            self._labels.setdefault(_label_name(c), c)

    @classmethod
    def _wrap(cls, handle, labels=None):
        self = cls.__new__(cls)
        self._model = handle
        self._labels = dict(labels or {})
        return self

    # ---- learning

    def _names(self, ys):
        names = []
        for y in ys:
            if y is None:
                names.append(None)
                continue
            name = _label_name(y)
            self._labels.setdefault(name, y)
            names.append(name)
        return names

    def learn_one(self, x, y=None):
        """Learns one document (one sdEM or SEP step). x: text, a dict term ->
        count, or a dict feature -> value; y: its label (str or int), or None
        for a loss that needs none. New terms and new classes are added as
        they come. On error (InvalidDocument naming the document) nothing has
        been learned from it."""
        self._model.learn_one(x, None if y is None else self._names([y])[0])

    def learn_file(self, path, *, skip_bad=False):
        """Learns a stream file (`tributary convert`'s output) in its order,
        as `tributary train --select off --epochs 1` does. Returns
        {"learned", "skipped", "messages"}."""
        return self._model.learn_file(str(path), skip_bad)

    def learn_many(self, xs, ys=None, *, skip_bad=False):
        """Learns the documents in order, with the GIL released while
        learning. With skip_bad=True a bad document (InvalidDocument, a
        numeric failure) is counted and left out and the rest are learned;
        else the first one stops learning (the documents before it stay
        learned) and raises. Returns {"learned", "skipped", "messages"}."""
        xs = list(xs)
        names = None if ys is None else self._names(list(ys))
        return self._model.learn_many(xs, names, skip_bad)

    # ---- predicting

    def _scores(self, xs):
        return self._model.scores_many(list(xs))

    def _proba(self, xs):
        s = self._scores(xs)
        s = s - s.max(axis=1, keepdims=True)
        p = np.exp(s)
        return p / p.sum(axis=1, keepdims=True)

    def flush(self):
        """The end of a stream: the live learner (Classifier's default) learns
        the documents it holds back in its per-class sample (one labelled
        document in ten, at most 8 per class, kept to check its candidates on
        every class and learned when they leave the sample). `tributary
        train --in -` and `prequential --out` do this before saving; nothing
        for one learner."""
        self._model.flush()

    # ---- what the learner knows

    def stats(self):
        """What the learner knows of its own predictions: every labelled
        document learned (learn_one, learn_many, learn_csr) is first scored
        by the model as it was (test, then train). Returns a dict:
        ``documents``; ``accuracy`` and ``log_loss`` (mean -log p(y | x)) over
        all of them and ``window_accuracy`` / ``window_log_loss`` recently (a
        document's weight halves every 500 later ones); ``per_class``, one
        dict per class (``class``, ``documents``, ``recall``,
        ``window_recall``); ``most_confused`` (``class``, ``predicted``,
        ``documents``); ``drift_alarms``, the document counts after which
        ADWIN found the error rate risen (docs/design.md §15). With the live
        learner (Classifier's default, select="auto") also ``live``: its
        candidates (each one's cumulative and windowed accuracy and log-loss,
        its class-balanced accuracy on the held-out sample, whether it is
        served), the candidate served, switches and alarms (which are then
        ``drift_alarms``). Figures are None before any labelled document; they
        start again after load or fit, and are not saved with the model (the
        live learner's are)."""
        q = self._model.quality()
        for entry in q["per_class"]:
            entry["class"] = self._labels.get(entry["class"], entry["class"])
        for entry in q["most_confused"]:
            entry["class"] = self._labels.get(entry["class"], entry["class"])
            entry["predicted"] = self._labels.get(entry["predicted"], entry["predicted"])
        return q

    # ---- models

    @property
    def stats_digest(self):
        """CRC-32 of the statistics, as `tributary inspect` prints it: equal
        digests mean bit-identical models."""
        return self._model.stats_digest

    def info(self):
        """What `tributary inspect` shows: family, loss, classes, vocabulary,
        updates, schedule, digest."""
        return self._model.info()

    def save(self, path):
        """Writes a snapshot (atomically) in the program's format:
        `tributary eval --model path` reads it."""
        self._model.save(str(path))

    def to_bytes(self):
        """The snapshot's bytes (what save writes)."""
        return self._model.to_bytes()

    def __getstate__(self):
        return {"model": self._model, "labels": self._labels}

    def __setstate__(self, state):
        self._model = state["model"]
        self._labels = state["labels"]

    def __repr__(self):
        if "_model" not in self.__dict__:
            return "<%s (not constructed)>" % type(self).__name__
        i = self._model.info()
        return "%s(family=%r, loss=%r, updates=%d)" % (type(self).__name__, i["family"], i["loss"], i["updates"])


class Classifier(_Learner):
    """An online classifier: naive Bayes families (multinomial, gaussian,
    mmnb, lda-classifier, ...) trained by sdEM under a loss (ncll, hinge or
    nll), one document at a time.

    The defaults are the library's (model_config.h), as for `tributary
    serve` and `tributary prequential`: the family's prior, the loss's own
    step schedule, n = 10000 (the length of a stream nobody knows; give n=
    when you know it), open classes, and an open vocabulary for the families
    that can grow one (multinomial: terms are added as they come), else
    terms hashed into 2^18 ids. Family options are keyword arguments
    (prior=3, topics=20, ...), as `--opt key=value` on the command line.

    For Gaussian or mixed naive Bayes give the features: features=["x", "y"]
    (real) or {"x": "real", "n": "count", "colour": ["red", "blue"]}.

    select="auto" (the default) learns with the live learner, as `tributary
    serve` does: the loss with its decaying step, the same loss with a step
    floor (memory 1000) and the generative NLL learner each test-then-train
    every labelled document, the one with the best recent accuracy predicts
    (checked on a per-class sample, so a stream grouped by class forgets no
    class), and ADWIN raises the steps after a drift (docs/design.md §15).
    It costs about three learners' time. select="off": one learner with the
    given settings. A loss that learns unlabelled documents (nll) learns
    alone; ``fit`` gives a model trained on a file's passes (one learner).
    """

    def __init__(self, family="multinomial", loss="ncll", select="auto", **kwargs):
        super().__init__(family, loss, select=select, **kwargs)

    @property
    def classes(self):
        """The classes learned so far, as given (str or int)."""
        return [self._labels.get(c, c) for c in self._model.classes]

    def predict_proba_one(self, x):
        """p(class | x) for every class learned so far, as a dict."""
        p = self._proba([x])[0]
        return dict(zip(self.classes, p.tolist()))

    def predict_one(self, x):
        """The most probable class (None before any class is known)."""
        if not self._model.classes:
            return None
        s = self._scores([x])[0]
        return self.classes[int(np.argmax(s))]

    def predict_many(self, xs):
        """The most probable class of each document (GIL released)."""
        xs = list(xs)
        if not xs:
            return []
        s = self._scores(xs)
        cls = self.classes
        return [cls[int(i)] for i in np.argmax(s, axis=1)]

    def predict_proba_many(self, xs):
        """p(class | x) for each document: an array (documents x classes) in
        the order of `classes`."""
        return self._proba(list(xs))


class _Latent(_Learner):
    """A model whose outputs are latent (topics, mixture components)."""

    def transform(self, xs):
        """Posterior over the outputs for each document: topic proportions
        E[theta | x] (LDA) or responsibilities p(k | x) (mixtures); an array
        (documents x outputs)."""
        return self._proba(list(xs))

    def transform_one(self, x):
        return self._proba([x])[0]

    def evaluate(self, xs):
        """What `tributary eval` reports for a latent model on these
        documents: perplexity (document completion where the family has it:
        the even-position tokens predict the odd ones), log p(x) per
        document, the outputs' weights; SEP families' approximate log
        evidence."""
        return self._model.evaluate_latent(list(xs))

    def perplexity(self, xs):
        """Perplexity of the documents as `tributary eval` defines it."""
        return self.evaluate(xs)["perplexity"]


class TopicModel(_Latent):
    """Online LDA (family "lda", sdEM under NLL = stochastic variational /
    CVB0 inference as in Hoffman et al. 2010), one document at a time.

    k: topics; further options as keyword arguments (alpha=, eta=,
    inference="cvb0"|"vi"|"gibbs", ...) as `--opt` on the command line. The
    vocabulary is hashed into 2^18 ids unless `vocabulary` (a list of terms)
    is given: LDA cannot grow its vocabulary (topics() names hashed terms by
    the words seen while learning).
    """

    def __init__(self, k=10, *, family="lda", **kwargs):
        kwargs.setdefault("open_classes", True)
        super().__init__(family, "nll", topics=int(k), **kwargs)
        self._names = {}

    def learn_one(self, x, y=None):
        self._remember(x)
        super().learn_one(x, y)

    def learn_many(self, xs, ys=None, *, skip_bad=False):
        xs = list(xs)
        for x in xs:
            self._remember(x)
        return super().learn_many(xs, ys, skip_bad=skip_bad)

    def _remember(self, x):
        # A hashed vocabulary keeps ids, not words: remember which word an id
        # was seen as, so that topics() can print words.
        if "_dim" not in self.__dict__:
            info = self._model.info()
            self._dim = info["vocabulary_size"] if info["vocabulary"] == "hashed" else 0
            self.__dict__.setdefault("_names", {})
        if not self._dim:
            return
        words = _tributary.tokenize(x) if isinstance(x, str) else x.keys() if isinstance(x, dict) else ()
        for w in words:
            if w not in self._seen:
                self._seen.add(w)
                self._names.setdefault(_tributary.hash_term(w, self._dim), w)

    @property
    def _seen(self):
        return self.__dict__.setdefault("_seen_words", set())

    def topics(self, top=10):
        """Each topic's `top` most probable terms: [[(term, p), ...], ...]."""
        vocab = self._model.vocabulary()
        out = []
        for k in range(self._model.info()["outputs"]):
            p = self._model.component_terms(k)
            ids = np.argsort(-p, kind="stable")[:top]
            names = [vocab[i] if i < len(vocab) else self.__dict__.get("_names", {}).get(int(i), "#%d" % i)
                     for i in ids]
            out.append(list(zip(names, p[ids].tolist())))
        return out

    def __getstate__(self):
        st = super().__getstate__()
        st["names"] = self.__dict__.get("_names", {})
        return st

    def __setstate__(self, state):
        super().__setstate__(state)
        self._names = state.get("names", {})


class Mixture(_Latent):
    """A mixture family (emsd-mixture, edcm-mixture, multinomial-mixture,
    gaussian mixtures by mmnb...) with `components` components, learned by
    SEP (engine="sep", the families with SEP hooks), EP, ADF or sdEM."""

    def __init__(self, family="emsd-mixture", components=2, *, engine="auto", **kwargs):
        loss = kwargs.pop("loss", "nll")
        super().__init__(family, loss, components=int(components), engine=engine, **kwargs)


def prequential(learner, xs, ys, *, every=1000):
    """Test-then-train over the documents (as `tributary prequential`): each
    document is first predicted by the model as it is, then learned. Returns
    the program's --json shape: {"documents", "accuracy", "ncll", "curve":
    [{"documents", "accuracy", "window_accuracy", "ncll", "window_ncll"},
    ...]} with a point every `every` documents (and at the end), which
    tributary.plot.learning_curve draws."""
    xs = list(xs)
    names = learner._names(list(ys))
    correct, ncll = learner._model.prequential_many(xs, names)
    curve = []
    n = len(xs)
    last = 0
    for end in list(range(every, n + 1, every)) + ([n] if n % every else []):
        curve.append({
            "documents": end,
            "accuracy": float(correct[:end].mean()),
            "window_accuracy": float(correct[last:end].mean()),
            "ncll": float(ncll[:end].mean()),
            "window_ncll": float(ncll[last:end].mean()),
        })
        last = end
    return {
        "documents": n,
        "accuracy": float(correct.mean()) if n else float("nan"),
        "ncll": float(ncll.mean()) if n else float("nan"),
        "curve": curve,
    }


def load(path):
    """A model saved by save() or by the program (`tributary train --out`):
    a Classifier for class outputs, a TopicModel (lda) or Mixture for latent
    ones."""
    handle = _tributary.Model.load(str(path))
    return _wrap_handle(handle)


def from_bytes(data):
    """A model from snapshot bytes (to_bytes(), or a file's content)."""
    return _wrap_handle(_tributary.Model.from_bytes(bytes(data)))


def _wrap_handle(handle):
    info = handle.info()
    if not info["latent"]:
        return Classifier._wrap(handle)
    if info["family"] == "lda":
        return TopicModel._wrap(handle)
    return Mixture._wrap(handle)


def read_stream(path):
    """The documents of a stream file as (x, y, id) tuples, x being the text,
    a dict term -> count or a dict feature -> value, y the label or None.
    The reader's header() gives the stream's schema."""
    return _tributary.StreamReader(str(path))


def write_stream(path, xs, ys=None, ids=None):
    """Writes documents (text or dict term -> count) and their labels as a
    stream with an open vocabulary and open classes, which `tributary train`
    and `tributary eval` read. Returns the number of documents."""
    xs = list(xs)
    if ys is not None:
        ys = [None if y is None else _label_name(y) for y in ys]
    return _tributary.write_stream(str(path), xs, ys, None if ids is None else [str(i) for i in ids])


class LiveClassifier:
    """A text classifier that learns and predicts at the same time, from
    several threads: the library's LiveModel (docs/embedding.md).

    ``learn_one`` may be called from any thread (one learns at a time);
    ``predict_one`` from any number of threads at once, each through its own
    reader (kept per thread), with the GIL released: predictions take no lock
    and never wait for learning. They see what was learned as of the last
    publication (every ``publish_every`` documents, and ``publish()``);
    ``predict_versioned`` says which (the number of documents learned).

    With ``data_dir`` every ``learn_one`` is in an fsynced write-ahead log
    before it returns (the server's guarantee): a LiveClassifier made again on
    the same directory has every document learned before, even after a
    crash; ``checkpoint()`` writes a snapshot there and drops the log it
    covers; ``learn_many`` logs a batch with one fsync. The directory is
    locked while the classifier lives: a second one on it (or a server) is
    refused with ``tributary.IOError`` naming the holder.

        >>> live = tributary.LiveClassifier()
        >>> live.learn_one("free money now", "spam")
        >>> live.publish()
        1
        >>> live.predict_one("money")          # from any thread
        'spam'
    """

    def __init__(self, family="multinomial", loss="ncll", *, classes=(), open_classes=True, n=0, seed=1,
                 publish_every=256, data_dir="", select="auto"):
        self._h = _tributary.LiveModel(family, loss, [str(c) for c in classes], bool(open_classes), float(n),
                                       int(seed), int(publish_every), str(data_dir), str(select))
        self._local = threading.local()

    def learn_one(self, x, y=None):
        """Learns one document: raw text or a dict term -> count, and its class."""
        self._h.learn_one(x, None if y is None else _label_name(y))

    def learn_many(self, xs, ys):
        """Learns a batch of documents with their classes, in order. Every
        document is checked first: a bad one raises, naming it, and nothing
        of the batch is learned. With ``data_dir`` the batch is in the log
        with one fsync (group commit: far more documents a second than
        ``learn_one``). Returns the number learned (a document over a growth
        limit is skipped)."""
        return self._h.learn_many(list(xs), [None if y is None else _label_name(y) for y in ys])

    def publish(self):
        """Makes everything learned so far visible to predictions; returns the version."""
        return self._h.publish()

    @property
    def version(self):
        """The newest published version (documents learned)."""
        return self._h.version

    @property
    def acknowledged(self):
        """Durable mode: documents in the fsynced log since the directory was made."""
        return self._h.acknowledged

    def _reader(self):
        r = getattr(self._local, "reader", None)
        if r is None:
            r = self._h.reader()
            self._local.reader = r
        return r

    def predict_versioned(self, x):
        """(predicted class, version of the model that predicted it)."""
        return self._reader().predict(x)

    def predict_one(self, x):
        """The predicted class of one document."""
        return self.predict_versioned(x)[0]

    def checkpoint(self):
        """Durable mode: a snapshot in ``data_dir``; the log it covers is dropped."""
        self._h.checkpoint()

    def save(self, path):
        """Saves the newest publication (a snapshot `tributary eval` reads); returns its version."""
        return self._h.save(str(path))

    def stats(self):
        """The live learner (select="auto", the default): its candidates
        (cumulative and windowed prequential accuracy and log-loss, the
        class-balanced accuracy on its held-out per-class sample, whether
        served), the candidate served, switches and drift alarms (labelled
        documents learned when each fired), as a dict; None for one learner
        (select="off")."""
        r = self._h.live_report()
        return json.loads(r) if r else None
