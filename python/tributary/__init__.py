"""Tributary: learn probabilistic models from live document streams, one
document at a time (sdEM: stochastic discriminative EM; SEP: stochastic
expectation propagation), from Python.

The classes here wrap the C++ library's learner API, the one the
``tributary`` program and server use: the same documents in the same order
with the same settings give the same model (``stats_digest``) whichever
front end learned them, and models are saved in the program's snapshot
format.

    >>> import tributary
    >>> clf = tributary.Classifier()            # multinomial NB, NCLL loss
    >>> clf.learn_one("free money now", "spam")
    >>> clf.learn_one("lunch at noon?", "ham")
    >>> clf.predict_one("free lunch")
    'ham'

Errors are exceptions (``tributary.Error`` and its subclasses) carrying the
library's message, which names the document and says what was expected.
"""
import os as _os

from . import _tributary

_tributary.set_builtin_plugin_dir(_os.path.join(_os.path.dirname(_os.path.abspath(__file__)), "plugins"))

from ._tributary import (  # noqa: E402
    CorruptionError,
    Error,
    InvalidArgument,
    InvalidDocument,
    IOError,
    NotFoundError,
    NumericError,
    PluginError,
    add_plugin,
    plugins,
    tokenize,
)
from . import plot  # noqa: E402
from .core import (  # noqa: E402
    Classifier,
    LiveClassifier,
    Mixture,
    TopicModel,
    from_bytes,
    load,
    prequential,
    read_stream,
    write_stream,
)

__version__ = _tributary.version()

__all__ = [
    "Classifier",
    "LiveClassifier",
    "TopicModel",
    "Mixture",
    "load",
    "prequential",
    "plot",
    "from_bytes",
    "read_stream",
    "write_stream",
    "tokenize",
    "plugins",
    "add_plugin",
    "Error",
    "InvalidArgument",
    "InvalidDocument",
    "CorruptionError",
    "NotFoundError",
    "PluginError",
    "NumericError",
    "IOError",
]
