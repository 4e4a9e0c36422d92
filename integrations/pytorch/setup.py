"""Build of the ``tidegate`` Python package: the torch.distributed backend.

The extension ``tidegate.torch._C`` is compiled against the PyTorch of the environment it is
installed into, so the build needs that environment's torch: install with
``pip install --no-build-isolation ./integrations/pytorch`` (the project's ``.venv`` sets this
in its ``pip.conf``, so a plain ``pip install`` works there).

libtidegate comes from the checkout this file lives in, built with CMake:

* ``TIDEGATE_BUILD_DIR`` names a configured CMake build directory to use; otherwise
* ``<checkout>/build`` when it is configured (``./run.sh build`` makes it); otherwise
* ``<checkout>/build-python`` is configured here (library only: no tests, no benchmarks).

Only the target ``tidegate_shared`` is built (a no-op when it is up to date). The library is
copied into the package (``tidegate/lib/libtidegate.so.0``) and the extension finds it through
its rpath (``$ORIGIN/../lib``), so the installed package does not depend on the build
directory.
"""

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from setuptools import setup

HERE = Path(__file__).resolve().parent
CHECKOUT = HERE.parents[1]
LIBRARY_SONAME = "libtidegate.so.0"

try:
    from torch.utils.cpp_extension import BuildExtension, CppExtension, include_paths
except ImportError:
    sys.exit(
        "tidegate's PyTorch backend compiles against the torch of the environment it is "
        "installed into, but this build environment has no torch (pip's build isolation?). "
        "Install torch first, then: pip install --no-build-isolation ./integrations/pytorch"
    )


def _run(command):
    print("tidegate setup:", " ".join(str(c) for c in command), flush=True)
    subprocess.run([str(c) for c in command], check=True)


def _library_build_dir():
    """The CMake build directory to take libtidegate from, configured if need be."""
    explicit = os.environ.get("TIDEGATE_BUILD_DIR")
    if explicit:
        build = Path(explicit).resolve()
        if not (build / "CMakeCache.txt").exists():
            sys.exit(f"TIDEGATE_BUILD_DIR={build} is not a configured CMake build directory")
        return build
    if (CHECKOUT / "build" / "CMakeCache.txt").exists():
        return CHECKOUT / "build"
    build = CHECKOUT / "build-python"
    if not (build / "CMakeCache.txt").exists():
        if not (CHECKOUT / "CMakeLists.txt").exists():
            sys.exit(
                f"{HERE} is not inside a tidegate checkout (no {CHECKOUT}/CMakeLists.txt); "
                "set TIDEGATE_BUILD_DIR to a configured tidegate build directory"
            )
        generator = ["-G", "Ninja"] if shutil.which("ninja") else []
        _run(["cmake", "-S", CHECKOUT, "-B", build, *generator,
              "-DCMAKE_BUILD_TYPE=RelWithDebInfo", "-DTIDEGATE_BUILD_TESTS=OFF",
              "-DTIDEGATE_BUILD_BENCH=OFF", "-DTIDEGATE_WITH_PYTORCH=OFF"])
    return build


def _built_library():
    """Path of libtidegate's real file, after bringing it up to date."""
    build = _library_build_dir()
    jobs = os.environ.get("MAX_JOBS", str(os.cpu_count() or 1))
    _run(["cmake", "--build", build, "--target", "tidegate_shared", "-j", jobs])
    library = build / LIBRARY_SONAME
    if not library.exists():
        sys.exit(f"the build in {build} made no {LIBRARY_SONAME}")
    return library.resolve()


class BuildWithLibrary(BuildExtension):
    """Builds libtidegate first, links the extension to it, and ships it in the package."""

    def build_extensions(self):
        library = _built_library()
        for extension in self.extensions:
            extension.extra_link_args += [str(library), "-Wl,-rpath,$ORIGIN/../lib"]
        super().build_extensions()
        package_lib = Path(self.get_ext_fullpath(self.extensions[0].name)).parent.parent / "lib"
        package_lib.mkdir(parents=True, exist_ok=True)
        shutil.copy2(library, package_lib / LIBRARY_SONAME)


# backend_unity.cc includes the sources that use ATen (csrc/backend_unity.cc says why).
SOURCES = ["csrc/backend_unity.cc", "csrc/completion_pool.cc", "csrc/module.cc", "csrc/session.cc"]


def _compile_flags():
    """The repository's warnings for our code; CI (CI=true or TIDEGATE_WERROR=1) makes them
    fatal. torch's and Python's headers are marked as system headers, so their own warnings
    (unused parameters, shadowing) neither show nor fail the build."""
    flags = ["-O2", "-g0",  # -g0: Python's CFLAGS ask for debug info, doubling compile time
             "-Wall", "-Wextra", "-Wpedantic", "-Wshadow", "-Wnon-virtual-dtor",
             "-Wno-missing-field-initializers"]
    for directory in include_paths() + [sysconfig.get_paths()["include"]]:
        flags += ["-isystem", directory]
    if os.environ.get("CI") == "true" or os.environ.get("TIDEGATE_WERROR") == "1":
        flags.append("-Werror")
    return flags


setup(
    ext_modules=[
        CppExtension(
            name="tidegate.torch._C",
            sources=SOURCES,
            include_dirs=[str(CHECKOUT / "include"), str(HERE / "csrc")],
            extra_compile_args={"cxx": _compile_flags()},
        )
    ],
    cmdclass={"build_ext": BuildWithLibrary.with_options(use_ninja=True)},
)
