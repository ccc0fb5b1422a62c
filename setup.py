"""The native core (lachesis/node/native/, C++17 behind pybind11) built at install with the machine's compiler.

Optional: where no C++ compiler is present the install still succeeds and the package runs on its Python
reference (docs/design.md §5, "Native core"); everything else is declared in pyproject.toml.  Each build writes its
record beside the module (lachesis/node/native/build_record.py), which the package checks before loading it.
"""

import importlib.util
from glob import glob
from pathlib import Path

from pybind11.setup_helpers import ParallelCompile, Pybind11Extension, build_ext
from setuptools import setup

NATIVE = Path(__file__).resolve().parent / "lachesis" / "node" / "native"
_spec = importlib.util.spec_from_file_location("build_record", NATIVE / "build_record.py")
build_record = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(build_record)

core = Pybind11Extension("lachesis.node._core", sorted(glob("lachesis/node/native/**/*.cpp", recursive=True)),
                         cxx_std=17, define_macros=[("LACHESIS_INTERFACE", str(build_record.INTERFACE))],
                         extra_compile_args=["-O3", "-fno-fast-math", "-ffp-contract=off"])
# the core's sources compiled at once on every core (LACHESIS_BUILD_JOBS=N: N at a time)
ParallelCompile("LACHESIS_BUILD_JOBS").install()
core.optional = True  # a failed compile leaves the reference path, never a failed install


class BuildWithRecord(build_ext):
    """build_ext, then each built module's record beside it, where it ends up (in place for an editable install)."""

    def run(self):
        super().run()
        for ext in self.extensions:
            out = Path(self.get_ext_fullpath(ext.name))
            if out.exists():
                build_record.write(out, NATIVE)


setup(ext_modules=[core], cmdclass={"build_ext": BuildWithRecord})
