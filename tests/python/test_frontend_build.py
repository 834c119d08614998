"""The compiled JSON Schema front-end is used only while it matches its source
(xg2_plugin/_frontend_build.py)."""

import importlib
import importlib.machinery
import os
import subprocess
import sys

import pytest

import xg2_plugin
from xg2_plugin import _frontend_build as FB


def _fake_package(tmp_path, name):
    """A package whose json_schema has a source and, beside it, an 'extension'
    that cannot load (so a test sees which of the two the import takes)."""
    pkg = tmp_path / name
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "json_schema.py").write_text("WHERE = 'source'\n")
    (pkg / ("json_schema" + importlib.machinery.EXTENSION_SUFFIXES[0])).write_bytes(b"not a shared object")
    return pkg


def _import_fresh(tmp_path, fullname):
    sys.path.insert(0, str(tmp_path))
    try:
        return importlib.import_module(fullname)
    finally:
        sys.path.remove(str(tmp_path))


@pytest.fixture
def restore_imports():
    """Puts sys.meta_path back and forgets the fake packages afterwards."""
    before = list(sys.meta_path)
    yield
    sys.meta_path[:] = before
    for m in [m for m in sys.modules if m.startswith("fb_")]:
        del sys.modules[m]


def test_a_stale_extension_gives_way_to_its_source(tmp_path, restore_imports):
    pkg = _fake_package(tmp_path, "fb_stale_pkg")
    stale = FB.use_current_sources("fb_stale_pkg", str(pkg), {"json_schema": "0" * 64})
    assert stale == ["fb_stale_pkg.json_schema"]
    module = _import_fresh(tmp_path, "fb_stale_pkg.json_schema")
    assert module.WHERE == "source" and module.__file__.endswith("json_schema.py")


def test_a_current_extension_is_kept(tmp_path, restore_imports):
    pkg = _fake_package(tmp_path, "fb_current_pkg")
    stamp = {"json_schema": FB.source_hash(str(pkg / "json_schema.py"))}
    before = list(sys.meta_path)
    assert FB.use_current_sources("fb_current_pkg", str(pkg), stamp) == []
    assert sys.meta_path == before
    # the import goes to the (here broken) extension, as Python's own order has it
    with pytest.raises(ImportError):
        _import_fresh(tmp_path, "fb_current_pkg.json_schema")


def test_the_stamp_text_records_each_source(tmp_path):
    pkg = _fake_package(tmp_path, "fb_stamp_pkg")
    ns = {}
    exec(FB.stamp_text(str(pkg), ("json_schema",)), ns)
    assert ns["SOURCES"] == {"json_schema": FB.source_hash(str(pkg / "json_schema.py"))}


def test_the_package_uses_the_extensions_exactly_when_all_are_current():
    """All or none: the compiled modules call each other natively, so one stale extension
    sends every compiled module to its source (a current one beside a stale sibling crashed)."""
    pkg_dir = os.path.dirname(xg2_plugin.__file__)
    current = []
    for name in FB.COMPILED:
        src = os.path.join(pkg_dir, name + ".py")
        has_ext = any(os.path.exists(os.path.join(pkg_dir, name + s))
                      for s in importlib.machinery.EXTENSION_SUFFIXES)
        current.append(has_ext and xg2_plugin._stamp().get(name) == FB.source_hash(src))
    use_compiled = all(current) and os.environ.get("XG2_PURE_PYTHON") != "1"
    for name in FB.COMPILED:
        module = importlib.import_module(f"xg2_plugin.{name}")
        assert (not module.__file__.endswith(".py")) == use_compiled, name


def test_pure_python_on_request():
    code = "import importlib; print(*(importlib.import_module('xg2_plugin.' + n).__file__ for n in %r))" % (FB.COMPILED,)
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "XG2_PURE_PYTHON": "1"},
                         capture_output=True, text=True, check=True)
    files = out.stdout.split()
    assert len(files) == len(FB.COMPILED) and all(f.endswith(".py") for f in files), files
