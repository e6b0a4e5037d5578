"""scikit-learn estimators over Tributary's learner.

SdemClassifier takes count matrices (dense arrays or scipy.sparse, e.g. from
CountVectorizer): column j is term j. ``fit`` is `tributary train` on a file:
with a discriminative loss (ncll, hinge) and select="auto" it tries a few
priors (and margins) and the generative NLL learner on shuffled passes and
keeps the one that predicts a held-out part of the TRAINING data best
(trainer.h); ``partial_fit`` is one learner in arrival order, as the server
learns (n = 10000 unless given). sample_weight is each document's weight in
the library: it scales an NCLL / hinge step, and under NLL makes the step
the one of that many copies learned in a row; weight 0 leaves the row out.
"""
import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import _check_sample_weight, check_is_fitted, check_non_negative

from . import _tributary


def _csr(X):
    X = sp.csr_matrix(X, dtype=np.float64)
    X.sort_indices()
    return X.indptr.astype(np.int64), X.indices.astype(np.int64), X.data


class SdemClassifier(ClassifierMixin, BaseEstimator):
    """Naive Bayes over counts trained by sdEM (stochastic discriminative EM).

    Parameters
    ----------
    family : str, default="multinomial"
        Family plugin (name or path to a .so).
    loss : {"ncll", "hinge", "nll"} or a path, default="ncll"
        NCLL: conditional log-likelihood (logistic-regression-like);
        hinge: max-margin; nll: generative naive Bayes (exact averaging).
    prior : float or None, default=None
        The family's Dirichlet pseudo-count. None: the family's default, and
        with select="auto" a small grid is tried on held-out training data.
    options, loss_options : dict or None
        Further family / loss options (as --opt / --loss-opt).
    select : {"auto", "off"}, default="auto"
        fit: "auto" chooses among candidate settings on a validation split of
        the training data (never the test data); "off" trains one learner.
    epochs : int or None, default=None
        fit: passes over the data. None: chosen by validation (select="auto"
        with ncll/hinge), else 1.
    n : float or None, default=None
        sdEM's effective data-set size. None: fit uses the number of
        samples, partial_fit 10000 (the length of a stream nobody knows).
    seed : int, default=1
        Shuffling and candidate search.
    """

    def __init__(self, family="multinomial", loss="ncll", prior=None, options=None, loss_options=None,
                 select="auto", epochs=None, n=None, seed=1):
        self.family = family
        self.loss = loss
        self.prior = prior
        self.options = options
        self.loss_options = loss_options
        self.select = select
        self.epochs = epochs
        self.n = n
        self.seed = seed

    # ---- set-up

    def _family_options(self):
        opts = dict(self.options or {})
        if self.prior is not None:
            opts["prior"] = self.prior
        return opts

    def _check_params(self):
        if self.select not in ("auto", "off"):
            raise ValueError("select=%r: expected 'auto' or 'off'" % (self.select,))
        if self.epochs is not None and (not isinstance(self.epochs, (int, np.integer)) or self.epochs < 1):
            raise ValueError("epochs=%r: expected an integer >= 1 or None" % (self.epochs,))

    def _check_X(self, X, reset):
        X = self._validate_data(X, accept_sparse="csr", dtype=np.float64, reset=reset)
        check_non_negative(X, "SdemClassifier (input X)")
        return X

    # The model's classes are named by their index in classes_ ("0", "1",
    # ...), in that (sorted) order, and its terms by their column: what
    # `tributary convert` (two passes: classes sorted, a closed vocabulary)
    # then `tributary train` make of the same documents. fit then gives the
    # program's model: the validation split and shuffles follow the class
    # order (tests/python: equal accuracy on fortunes).

    def _new_model(self, n):
        return _tributary.Model(
            family=self.family, loss=self.loss, options=self._family_options(),
            loss_options=dict(self.loss_options or {}), schedule={}, n=float(n), seed=int(self.seed),
            engine="sdem", damping=0.0, classes=[str(i) for i in range(len(self.classes_))], open_classes=False,
            vocabulary=[str(j) for j in range(self.n_features_in_)], hashed_dim=0, features=None)

    def _encode(self, y):
        index = {c: i for i, c in enumerate(self.classes_)}
        try:
            return [str(index[v]) for v in y]
        except KeyError as e:
            raise ValueError("label %r is not among the classes %r given to the first partial_fit"
                             % (e.args[0], list(self.classes_))) from None

    # ---- fitting

    @staticmethod
    def _weights(X, y, sample_weight):
        """Validated weights, and the rows to keep: a document of weight 0
        contributes nothing, so it is left out (exactly as if absent, the
        validation split of fit included); None when no weights were given."""
        if sample_weight is None:
            return X, y, None
        w = _check_sample_weight(sample_weight, X, dtype=np.float64)
        if np.any(w < 0) or not np.all(np.isfinite(w)):
            raise ValueError("sample_weight must be finite and >= 0")
        keep = w > 0
        if not keep.all():
            X, y, w = X[keep], np.asarray(y)[keep], w[keep]
        return X, y, w

    def fit(self, X, y, sample_weight=None):
        """Trains on (X, y) from scratch, as `tributary train` on a file.
        sample_weight scales each document's step (its weight in the
        library); documents of weight 0 are left out."""
        self._check_params()
        X, y = self._validate_data(X, y, accept_sparse="csr", dtype=np.float64, reset=True)
        check_non_negative(X, "SdemClassifier (input X)")
        check_classification_targets(y)
        X, y, w = self._weights(X, y, sample_weight)
        if X.shape[0] == 0:
            raise ValueError("fit: every sample has weight 0")
        self.classes_ = np.unique(y)
        labels = self._encode(y)
        n = float(self.n) if self.n else float(X.shape[0])
        discriminative = self.loss in ("ncll", "hinge")
        if self.select == "auto" and discriminative:
            model, report = _tributary.train_offline(
                family=self.family, loss=self.loss, options=self._family_options(),
                loss_options=dict(self.loss_options or {}), schedule={}, n=n, seed=int(self.seed),
                classes=[str(i) for i in range(len(self.classes_))],
                vocabulary=[str(j) for j in range(self.n_features_in_)], hashed_dim=0, features=None, xs=None,
                ys=labels, csr=_csr(X), epochs=int(self.epochs or 0), threads=0, skip_bad=False, weights=w)
            self.model_ = model
            self.training_report_ = report
        else:
            self.model_ = self._new_model(n)
            indptr, indices, data = _csr(X)
            epochs = int(self.epochs or 1)
            rng = np.random.default_rng(self.seed)
            X = sp.csr_matrix(X)
            for e in range(epochs):
                if epochs > 1:
                    order = rng.permutation(X.shape[0])
                    Xe = X[order]
                    Xe.sort_indices()
                    self.model_.learn_csr(Xe.indptr.astype(np.int64), Xe.indices.astype(np.int64), Xe.data,
                                          [labels[i] for i in order], weights=None if w is None else w[order])
                else:
                    self.model_.learn_csr(indptr, indices, data, labels, weights=w)
            self.training_report_ = None
        return self

    def partial_fit(self, X, y, classes=None, sample_weight=None):
        """Learns (X, y) in arrival order, one document at a time, from where
        the model is (a new one on the first call, which needs `classes`)."""
        self._check_params()
        first = not hasattr(self, "classes_")
        if first and classes is None:
            raise ValueError("classes must be passed on the first call to partial_fit")
        X, y = self._validate_data(X, y, accept_sparse="csr", dtype=np.float64, reset=first)
        check_non_negative(X, "SdemClassifier (input X)")
        check_classification_targets(y)
        if first:
            self.classes_ = np.unique(classes)
            self.model_ = self._new_model(float(self.n) if self.n else 0.0)
            self.training_report_ = None
        elif classes is not None and not np.array_equal(np.unique(classes), self.classes_):
            raise ValueError("classes=%r differs from the classes of the first partial_fit %r"
                             % (list(classes), list(self.classes_)))
        X, y, w = self._weights(X, y, sample_weight)
        if X.shape[0] == 0:
            return self
        indptr, indices, data = _csr(X)
        self.model_.learn_csr(indptr, indices, data, self._encode(y), weights=w)
        return self

    # ---- predicting

    def _joint(self, X):
        check_is_fitted(self, "model_")
        X = self._check_X(X, reset=False)
        indptr, indices, data = _csr(X)
        return self.model_.scores_csr(indptr, indices, data)

    def predict_log_proba(self, X):
        s = self._joint(X)
        m = s.max(axis=1, keepdims=True)
        return s - (m + np.log(np.exp(s - m).sum(axis=1, keepdims=True)))

    def predict_proba(self, X):
        """p(class | x), columns in the order of classes_."""
        return np.exp(self.predict_log_proba(X))

    def decision_function(self, X):
        """log p(class | x) (samples x classes); for two classes, the log-odds
        of classes_[1] (positive: classes_[1] is predicted)."""
        lp = self.predict_log_proba(X)
        if lp.shape[1] == 2:
            return lp[:, 1] - lp[:, 0]
        return lp

    def predict(self, X):
        s = self._joint(X)
        return self.classes_[np.argmax(s, axis=1)]

    @property
    def stats_digest_(self):
        check_is_fitted(self, "model_")
        return self.model_.stats_digest

    def save(self, path):
        """The snapshot, in the program's format (classes named 0..C-1 in the
        order of classes_)."""
        check_is_fitted(self, "model_")
        self.model_.save(str(path))

    def _more_tags(self):
        return {
            # Counts: a negative entry is refused (check_non_negative), and
            # the checks feed non-negative data (X - X.min()).
            "requires_positive_X": True,
            # check_classifiers_train wants > 83 % training accuracy on three
            # standardized 2-D blobs shifted into the positive quadrant. A
            # multinomial over two columns sees only their proportion
            # x1 / (x1 + x2), and the three blobs overlap in proportion:
            # scikit-learn's own MultinomialNB scores 0.793 on that data, as
            # this estimator does (measured; the 2-class problem: 0.955 both).
            "poor_score": True,
            "_xfail_checks": {
                # Fits blobs centred at (2, 2) and (4, 4) with unit spread
                # without shifting them (it ignores requires_positive_X):
                # about 3 % of the entries are negative, which no count model
                # takes. The property it tests (predict_proba and
                # decision_function rank alike) holds: decision_function is
                # log p(c1|x) - log p(c0|x), monotone in p(c1|x); a test of
                # our own checks it on counts.
                "check_decision_proba_consistency": "negative entries: counts cannot be negative",
            },
        }
