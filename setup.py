"""The native core (lachesis/node/native/*.cpp, C++17 behind pybind11) built at install with the machine's compiler.

Optional: where no C++ compiler is present the install still succeeds and the package runs on its Python
reference (docs/design.md §5, "Native core"); everything else is declared in pyproject.toml.
"""

from glob import glob

from pybind11.setup_helpers import ParallelCompile, Pybind11Extension, build_ext
from setuptools import setup

core = Pybind11Extension("lachesis.node._core", sorted(glob("lachesis/node/native/*.cpp")), cxx_std=17,
                         extra_compile_args=["-O3", "-fno-fast-math", "-ffp-contract=off"])
# the core's sources compiled at once on every core (LACHESIS_BUILD_JOBS=N: N at a time)
ParallelCompile("LACHESIS_BUILD_JOBS").install()
core.optional = True  # a failed compile leaves the reference path, never a failed install

setup(ext_modules=[core], cmdclass={"build_ext": build_ext})
