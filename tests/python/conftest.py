"""Fixtures of the Python package's tests (scripts/python_test.sh runs them
against the package installed in a fresh venv, and the program built in
$TRIBUTARY_BUILD_DIR for the side-by-side checks)."""
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="session")
def cli():
    """Runs the `tributary` program; returns its stdout."""
    exe = os.path.join(os.environ.get("TRIBUTARY_BUILD_DIR", os.path.join(ROOT, "build")), "bin", "tributary")
    assert os.path.exists(exe), "the program is not built: %s (set TRIBUTARY_BUILD_DIR)" % exe

    def run(*args):
        r = subprocess.run([exe, *map(str, args)], capture_output=True, text=True)
        assert r.returncode == 0, "tributary %s failed: %s" % (" ".join(map(str, args)), r.stderr)
        return r.stdout

    return run


def read_tsv(path):
    xs, ys = [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            y, x = line.rstrip("\n").split("\t", 1)
            xs.append(x)
            ys.append(y)
    return xs, ys


@pytest.fixture(scope="session")
def fortunes(tmp_path_factory):
    """Debian's fortunes as a stratified train/test split (the same script and
    seed as the program's tests): paths and (texts, labels) of both."""
    d = tmp_path_factory.mktemp("fortunes")
    subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "scripts", "fortunes_to_tsv.py"), "--train",
                    str(d / "train.tsv"), "--test", str(d / "test.tsv")], check=True, capture_output=True)
    return {
        "dir": d,
        "train": read_tsv(d / "train.tsv"),
        "test": read_tsv(d / "test.tsv"),
    }
