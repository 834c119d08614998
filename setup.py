import hashlib
import importlib.util
import os

from setuptools import setup
from setuptools.command.build_ext import build_ext


def _frontend_build():
    """xg2_plugin/_frontend_build.py, loaded by path (the package itself needs
    the native module this build makes)."""
    spec = importlib.util.spec_from_file_location("_frontend_build", os.path.join("xg2_plugin", "_frontend_build.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_CORE_STAMP = os.path.join("xg2_plugin", "_native_stamp.txt")  # (in place: what the core was built from)


class BuildExt(build_ext):
    """The native core (cffi), and the JSON Schema front-end compiled with mypyc
    where mypyc is installed (a build requirement) and XG2_PURE_PYTHON is not 1:
    see xg2_plugin/_frontend_build.py.

    mypyc runs in run(), not in finalize_options(): pip's metadata hooks
    (get_requires_for_build_*, prepare_metadata_for_build_*) and the metadata
    step of the build itself finalize build_ext too (sdist's file list asks it
    for its sources), and each ran mypyc's type check and C generation for
    nothing -- four times in one ``pip install -e .``.  In place (editable
    installs, ``build_ext --inplace``) it is skipped altogether while the
    extensions beside the sources were built from exactly these sources (the
    stamp), so a second ``pip install -e`` with nothing changed rebuilds nothing;
    the native core likewise (_native_stamp.txt)."""

    def run(self):
        if os.environ.get("XG2_PURE_PYTHON") != "1":
            self._frontend(_frontend_build())
        core = self._core_stamp()
        if self.inplace and self._core_current(core):
            # (cffi writes its C file anew into a fresh build directory, so
            # distutils' timestamps would rebuild the core every time)
            self.extensions = [e for e in self.extensions if e.name != "xg2_plugin._native"]
        super().run()
        if self.inplace:
            with open(_CORE_STAMP, "w") as f:
                f.write(core)

    @staticmethod
    def _core_stamp() -> str:
        """A hash of everything the native core is built from."""
        digest = hashlib.sha256()
        paths = [os.path.join("xg2_plugin", "_build.py")] + sorted(
            os.path.join(d, n) for d in ("native/src", "native/include") for n in os.listdir(d))
        for path in paths:
            with open(path, "rb") as f:
                digest.update(path.encode() + b"\0" + f.read() + b"\0")
        return digest.hexdigest() + "\n"

    def _core_current(self, stamp: str) -> bool:
        if not os.path.exists(_CORE_STAMP) or not os.path.exists(self.get_ext_filename("xg2_plugin._native")):
            return False
        with open(_CORE_STAMP) as f:
            return f.read() == stamp

    def _frontend(self, fb) -> None:
        try:
            from mypyc.build import mypycify
        except ImportError:
            return
        if self.inplace and self._frontend_current(fb):
            return
        # (separate: each group of modules with its own runtime library, inside the package)
        groups = [([f"xg2_plugin/{name}.py" for name in names], f"xg2_plugin.{lib}") for lib, names in fb.GROUPS]
        exts = list(mypycify([path for paths, _ in groups for path in paths], opt_level="3", separate=groups))
        self._add_extensions(exts)
        # the stamp goes where the extensions go: the source tree (in place,
        # editable installs) or the build directory (wheels)
        target = "xg2_plugin" if self.inplace else os.path.join(self.build_lib, "xg2_plugin")
        os.makedirs(target, exist_ok=True)
        with open(os.path.join(target, "_frontend_stamp.py"), "w") as f:
            f.write(fb.stamp_text("xg2_plugin"))

    def _add_extensions(self, exts) -> None:
        """Extensions added after finalize_options, prepared as setuptools'
        finalize_options prepares each (these are plain extensions: no shared
        library, no stub).  (Finalizing the command a second time is not an
        option: distutils' finalize_options is not idempotent.)"""
        self.distribution.ext_modules = list(self.distribution.ext_modules or []) + exts
        self.extensions = list(self.extensions or []) + exts
        self.check_extensions_list(self.extensions)
        for ext in exts:
            ext._full_name = self.get_ext_fullname(ext.name)
            self.ext_map[ext._full_name] = self.ext_map[ext._full_name.split(".")[-1]] = ext
            ext._links_to_dynamic = ext._needs_stub = False
            ext._file_name = self.get_ext_filename(ext._full_name)

    def _frontend_current(self, fb) -> bool:
        """Whether every compiled module's extension and runtime library sit in
        the source tree, stamped with the current source's hash."""
        stamp = os.path.join("xg2_plugin", "_frontend_stamp.py")
        if not os.path.exists(stamp):
            return False
        with open(stamp) as f:
            if f.read() != fb.stamp_text("xg2_plugin"):
                return False
        modules = list(fb.COMPILED) + [lib + "__mypyc" for lib, _ in fb.GROUPS]
        return all(os.path.exists(self.get_ext_filename(f"xg2_plugin.{module}")) for module in modules)


setup(cffi_modules=["xg2_plugin/_build.py:ffibuilder"], cmdclass={"build_ext": BuildExt})
