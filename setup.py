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
    stamp), so a second ``pip install -e`` with nothing changed rebuilds nothing."""

    def run(self):
        if os.environ.get("XG2_PURE_PYTHON") != "1":
            self._frontend(_frontend_build())
        super().run()

    def _frontend(self, fb) -> None:
        try:
            from mypyc.build import mypycify
        except ImportError:
            return
        if self.inplace and self._frontend_current(fb):
            return
        # (separate: each module with its own runtime library, inside the package)
        exts = mypycify([f"xg2_plugin/{name}.py" for name in fb.COMPILED], opt_level="3", separate=True)
        self.distribution.ext_modules = list(self.distribution.ext_modules or []) + list(exts)
        self.finalize_options()  # (again: prepares the new extensions as it did the others)
        # the stamp goes where the extensions go: the source tree (in place,
        # editable installs) or the build directory (wheels)
        target = "xg2_plugin" if self.inplace else os.path.join(self.build_lib, "xg2_plugin")
        os.makedirs(target, exist_ok=True)
        with open(os.path.join(target, "_frontend_stamp.py"), "w") as f:
            f.write(fb.stamp_text("xg2_plugin"))

    def _frontend_current(self, fb) -> bool:
        """Whether every compiled module's extension and runtime library sit in
        the source tree, stamped with the current source's hash."""
        stamp = os.path.join("xg2_plugin", "_frontend_stamp.py")
        if not os.path.exists(stamp):
            return False
        with open(stamp) as f:
            if f.read() != fb.stamp_text("xg2_plugin"):
                return False
        for name in fb.COMPILED:
            for module in (name, name + "__mypyc"):
                if not os.path.exists(self.get_ext_filename(f"xg2_plugin.{module}")):
                    return False
        return True


setup(cffi_modules=["xg2_plugin/_build.py:ffibuilder"], cmdclass={"build_ext": BuildExt})
