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
    see xg2_plugin/_frontend_build.py."""

    def finalize_options(self):
        fb = _frontend_build()
        compiled = os.environ.get("XG2_PURE_PYTHON") != "1" and self._frontend(fb)
        super().finalize_options()
        if compiled:
            # the stamp goes where the extensions go: the source tree (in place,
            # editable installs) or the build directory (wheels)
            target = "xg2_plugin" if self.inplace else os.path.join(self.build_lib, "xg2_plugin")
            os.makedirs(target, exist_ok=True)
            with open(os.path.join(target, "_frontend_stamp.py"), "w") as f:
                f.write(fb.stamp_text("xg2_plugin"))

    def _frontend(self, fb) -> bool:
        try:
            from mypyc.build import mypycify
        except ImportError:
            return False
        # (before build_ext's own finalize_options, which prepares every extension)
        # (separate: each module with its own runtime library, inside the package)
        exts = mypycify([f"xg2_plugin/{name}.py" for name in fb.COMPILED], opt_level="3", separate=True)
        self.distribution.ext_modules = list(self.distribution.ext_modules or []) + list(exts)
        return True

setup(cffi_modules=["xg2_plugin/_build.py:ffibuilder"], cmdclass={"build_ext": BuildExt})
