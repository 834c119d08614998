"""Builds a C program from native/src/*.c plus extra sources with gcc (the fuzz driver
under ASan/UBSan, the thread stress under TSan), compiling the core's files in
parallel.  Used by test_fuzz_smoke.py and test_thread_stress.py."""

from __future__ import annotations

import concurrent.futures
import os
import shutil
import subprocess
from pathlib import Path
from typing import Sequence

import pytest

ROOT = Path(__file__).resolve().parents[2]
NATIVE = ROOT / "native"
BASE_FLAGS = ["-std=c11", "-D_GNU_SOURCE", "-O1", "-g", f"-I{NATIVE / 'include'}", f"-I{NATIVE / 'src'}",
              "-fno-omit-frame-pointer"]
ASAN_UBSAN = ["-fsanitize=address,undefined"]
TSAN = ["-fsanitize=thread"]
ASAN_ENV = {
    "ASAN_OPTIONS": "detect_leaks=1:halt_on_error=1:allocator_may_return_null=1:abort_on_error=0",
    "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1",
}
# halt_on_error: the first race fails the run; second_deadlock_stack for lock reports.
TSAN_ENV = {"TSAN_OPTIONS": "halt_on_error=1:second_deadlock_stack=1:history_size=4"}


def run(cmd, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          errors="replace", **kw)


def build(out_dir: Path, name: str, extra_sources: Sequence[Path], sanitize: Sequence[str]) -> Path:
    """Compile and link; pytest.fail with the compiler's output if that fails."""
    gcc = shutil.which(os.environ.get("XG2_TEST_CC") or "gcc")
    if not gcc:
        pytest.fail("gcc is required to build the native fuzz driver and stress program", pytrace=False)
    flags = BASE_FLAGS + list(sanitize)
    obj_dir = out_dir / f"{name}.obj"
    obj_dir.mkdir(parents=True, exist_ok=True)
    sources = sorted(NATIVE.glob("src/*.c")) + [Path(s) for s in extra_sources]

    def compile_one(src: Path):
        obj = obj_dir / (src.stem + ".o")
        return src, obj, run([gcc, *flags, "-c", str(src), "-o", str(obj)])

    with concurrent.futures.ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        results = list(pool.map(compile_one, sources))
    for src, _, r in results:
        if r.returncode != 0:
            pytest.fail(f"compiling {src} failed:\n{r.stdout[-4000:]}", pytrace=False)
    exe = out_dir / name
    r = run([gcc, *flags, *(str(o) for _, o, _ in results), "-o", str(exe), "-pthread"])
    if r.returncode != 0:
        pytest.fail(f"linking {name} failed:\n{r.stdout[-4000:]}", pytrace=False)
    return exe
