"""cffi builder for the native core (API mode, out of line).

The header native/include/xg2.h is the whole ABI; its declarations are fed to
cdef() verbatim, minus preprocessor lines other than integer #defines.
"""

import os
import re

from cffi import FFI

_HERE = os.path.dirname(os.path.abspath(__file__))
_ROOT = os.path.dirname(_HERE)
_INCLUDE = os.path.join(_ROOT, "native", "include")
_SRC = os.path.join(_ROOT, "native", "src")


def _cdef_text() -> str:
    with open(os.path.join(_INCLUDE, "xg2.h"), encoding="utf-8") as f:
        text = f.read()
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    lines = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            if re.match(r"#define\s+XG2_\w+\s+-?\d+\s*$", stripped):
                lines.append(stripped)
            continue
        lines.append(line)
    return "\n".join(lines)


def _sources():
    return sorted(
        os.path.relpath(os.path.join(_SRC, name), _ROOT)
        for name in os.listdir(_SRC)
        if name.endswith(".c")
    )


ffibuilder = FFI()
ffibuilder.cdef(_cdef_text())
ffibuilder.set_source(
    "xg2_plugin._native",
    '#include "xg2.h"',
    sources=_sources(),
    include_dirs=[os.path.relpath(_INCLUDE, _ROOT)],
    extra_compile_args=[
        "-std=c11",
        "-O2",
        "-D_GNU_SOURCE",
        "-fvisibility=hidden",
        "-Wall",
        "-Wno-unused-parameter",
        # (a missing prototype otherwise builds a library that fails to load: an undefined symbol)
        "-Werror=implicit-function-declaration",
    ],
    extra_link_args=["-pthread"],
)

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
