"""Builds the Python package `tributary` with CMake (see pyproject.toml).

The extension module and the built-in plugins come from the project's own
CMake build (python/CMakeLists.txt), configured in build-python/ of the
source tree (or $TRIBUTARY_PYTHON_BUILD_DIR) with the interpreter that runs
this script, so a second `pip install .` only relinks what changed.
"""
import glob
import os
import re
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))


def project_version():
    with open(os.path.join(ROOT, "CMakeLists.txt"), encoding="utf-8") as f:
        m = re.search(r"project\(Tributary VERSION ([0-9.]+)", f.read())
    if not m:
        raise RuntimeError("CMakeLists.txt: no project(Tributary VERSION x.y.z)")
    return m.group(1)


class CMakeExtension(Extension):
    def __init__(self, name):
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        build_dir = os.environ.get("TRIBUTARY_PYTHON_BUILD_DIR", os.path.join(ROOT, "build-python"))
        jobs = os.environ.get("TRIBUTARY_BUILD_JOBS", str(os.cpu_count() or 1))
        configure = [
            "cmake", "-S", ROOT, "-B", build_dir,
            "-DCMAKE_BUILD_TYPE=Release",
            "-DTRIBUTARY_BUILD_TESTS=OFF",
            "-DTRIBUTARY_BUILD_BENCH=OFF",
            "-DTRIBUTARY_BUILD_PYTHON=ON",
            "-DPython_EXECUTABLE=" + sys.executable,
        ]
        if shutil.which("ninja") and not os.path.exists(os.path.join(build_dir, "CMakeCache.txt")):
            configure += ["-G", "Ninja"]
        subprocess.check_call(configure)
        subprocess.check_call(["cmake", "--build", build_dir, "--target", "_tributary", "-j", jobs])
        built = glob.glob(os.path.join(build_dir, "python", "_tributary*.so"))
        if len(built) != 1:
            raise RuntimeError("expected one _tributary*.so in %s/python, found %s" % (build_dir, built))
        target = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copyfile(built[0], target)
        plugin_dir = os.path.join(os.path.dirname(target), "plugins")
        shutil.rmtree(plugin_dir, ignore_errors=True)
        os.makedirs(plugin_dir)
        plugins = glob.glob(os.path.join(build_dir, "lib", "tributary", "plugins", "*.so"))
        if not plugins:
            raise RuntimeError("no built-in plugin in %s/lib/tributary/plugins" % build_dir)
        for p in plugins:
            shutil.copyfile(p, os.path.join(plugin_dir, os.path.basename(p)))


setup(
    version=project_version(),
    package_dir={"": "python"},
    packages=["tributary"],
    ext_modules=[CMakeExtension("tributary._tributary")],
    cmdclass={"build_ext": CMakeBuild},
    zip_safe=False,
)
