"""The JSON Schema front-end compiled to C with mypyc, when the build can.

The front-end's modules (COMPILED: the converter, its regex and automata layers,
the fragment memo) stay plain Python and are also compiled, at build time, into
extension modules of the same names (mypyc, a build requirement), which run them
about 1.6x faster -- the front-end was half of a large schema's compile time.
Python imports an extension before its source, so the build records each
source's hash (``_frontend_stamp.py``), and the package uses an extension only
while its source is the one it was built from: an edited or updated source runs
as written until the next build.

``XG2_PURE_PYTHON=1`` at build time skips the compilation; at run time it makes
the package load the sources even where the extensions are current."""

import hashlib
import importlib.machinery
import importlib.util
import os
import sys

# The modules of xg2_plugin the build compiles, by runtime library: the converter's
# modules call each other on every schema, so they share one (calls inside a library
# are direct; across libraries they go through a table: a library per module made the
# front-end ~3% slower on 1,500 MaskBench schemas).
GROUPS = (
    ("json_schema", ("json_schema", "json_schema_common", "json_schema_check", "json_schema_negation",
                     "json_schema_objects", "json_schema_arrays")),
    ("json_schema_regex", ("json_schema_regex",)),
    ("json_schema_dfa", ("json_schema_dfa",)),
    ("json_schema_fragments", ("json_schema_fragments",)),
)
COMPILED = tuple(name for _, names in GROUPS for name in names)


def source_hash(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def stamp_text(package_dir: str, names=COMPILED) -> str:
    """The stamp module's text for the sources in package_dir."""
    lines = ['"""Written by the build: the sources its compiled modules were made from."""', "", "SOURCES = {"]
    for name in names:
        lines.append(f"    {name!r}: {source_hash(os.path.join(package_dir, name + '.py'))!r},")
    lines.append("}")
    return "\n".join(lines) + "\n"


class _SourceFirst:
    """A meta path finder that loads the named modules from their sources."""

    def __init__(self, sources: dict) -> None:
        self.sources = sources  # module name -> source path

    def find_spec(self, fullname, path=None, target=None):
        src = self.sources.get(fullname)
        return None if src is None else importlib.util.spec_from_file_location(fullname, src)


def use_current_sources(package: str, package_dir: str, stamp: dict) -> list:
    """Make the compiled modules whose extension is missing its stamp or was
    built from another source (or all, under XG2_PURE_PYTHON=1) load from their
    source; returns their names.  (Run by the package before it imports them.)"""
    pure = os.environ.get("XG2_PURE_PYTHON") == "1"
    compiled, any_stale = {}, pure
    for name in COMPILED:
        src = os.path.join(package_dir, name + ".py")
        if not os.path.exists(src):
            continue  # installed without its source: the extension is all there is
        if not any(os.path.exists(os.path.join(package_dir, name + s)) for s in importlib.machinery.EXTENSION_SUFFIXES):
            continue  # not compiled: the source loads anyway
        compiled[f"{package}.{name}"] = src
        any_stale = any_stale or stamp.get(name) != source_hash(src)
    # All or none: the compiled modules call each other's native functions, so a current
    # extension beside a sibling that now runs as source crashed (a segfault, not an error).
    stale = compiled if any_stale else {}
    if stale:
        sys.meta_path.insert(0, _SourceFirst(stale))
    return sorted(stale)
