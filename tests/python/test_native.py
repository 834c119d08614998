"""Build and run the C tests of the native core (tests/native/*.c).

Each C test program is compiled from native/src/*.c plus the test file with the
machine's gcc, into a pytest temporary directory:

  san    -fsanitize=address,undefined   test_vocab, test_grammar, test_matcher, test_history
  fault  -DXG2_FAULT_INJECTION (plus the sanitizers when they work)   test_faults

Every C test function is one pytest item (the program runs with the test's
name as its argument).  An item fails if the program exits non-zero, or if its
output has an AddressSanitizer / LeakSanitizer / UBSan report -- except UBSan's
"null pointer passed as argument ... declared to never be null" (qsort/memcpy
with a NULL pointer and a zero count): those are collected from every run and
reported by one item of their own, test_native_no_null_pointer_arguments, so
that they do not hide what each test checks.

gcc is required: without it every item fails (with a message saying so); nothing
is skipped.  If the sanitizers do not work on the machine, the programs are built
without them (a warning says so) and still run.
"""

import concurrent.futures
import os
import re
import shutil
import subprocess
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NATIVE = ROOT / "native"
TESTS = ROOT / "tests" / "native"

COMMON_FLAGS = [
    "-std=c11",
    "-D_GNU_SOURCE",
    "-O1",
    "-g",
    f"-I{NATIVE / 'include'}",
    f"-I{NATIVE / 'src'}",
    f"-I{TESTS}",
    "-Wall",
    "-Wno-unused-parameter",
    "-Wno-unused-function",
]
SANITIZE_FLAGS = ["-fsanitize=address,undefined", "-fno-omit-frame-pointer"]

# Which build each program uses.
PROGRAMS = {
    "test_vocab": "san",
    "test_grammar": "san",
    "test_matcher": "san",
    "test_budgets": "san",
    "test_history": "san",
    "test_faults": "fault",
}

RUN_ENV = {
    # Leaks are errors; a huge allocation returns NULL (as malloc would) instead
    # of aborting, so the library's own out-of-memory paths run.
    "ASAN_OPTIONS": "detect_leaks=1:halt_on_error=1:allocator_may_return_null=1:abort_on_error=0",
    # Report every UB finding with a stack, keep running to collect them all.
    "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=0",
}
SANITIZER_REPORT = re.compile(r"ERROR: AddressSanitizer|ERROR: LeakSanitizer|runtime error:")
NONNULL_REPORT = re.compile(
    r"^(?P<site>\S+:\d+:\d+): runtime error: null pointer passed as argument \d+, which is declared to never be null",
    re.M,
)
# site -> the first test that hit it, filled by test_native.
_NONNULL_SITES = {}
TEST_TIMEOUT_S = 180


def _test_names(program):
    """The C tests of a program: the T_(name) entries of its RUN_TESTS call."""
    text = (TESTS / f"{program}.c").read_text(encoding="utf-8")
    call = text[text.index("RUN_TESTS(") :]
    return re.findall(r"\bT_\((\w+)\)", call)


def _find_gcc():
    gcc = shutil.which(os.environ.get("XG2_TEST_CC") or "gcc")
    if not gcc:
        pytest.fail(
            "gcc was not found on PATH. The native C tests (tests/native) need gcc to build "
            "native/src/*.c with the test programs; install gcc (it is required on CI).",
            pytrace=False,
        )
    return gcc


def _run(cmd, **kw):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace", **kw)


def _sanitizers_work(gcc, workdir):
    """Compile and run a tiny program with the sanitizers (leak check included)."""
    src = workdir / "probe.c"
    src.write_text(
        "#include <stdlib.h>\n#include <string.h>\n"
        "int main(void) { char *p = malloc(8); memset(p, 1, 8); int r = p[3] - 1; free(p); return r; }\n"
    )
    exe = workdir / "probe"
    r = _run([gcc, *SANITIZE_FLAGS, str(src), "-o", str(exe)])
    if r.returncode != 0:
        return False, r.stdout
    r = _run([str(exe)], env={**os.environ, **RUN_ENV}, timeout=60)
    return r.returncode == 0 and not SANITIZER_REPORT.search(r.stdout), r.stdout


class NativeBuild:
    """Compiles native/src/*.c once per configuration and links every program,
    all up front on a thread pool; a failed build fails only its own items."""

    def __init__(self, tmp):
        self.tmp = tmp
        self.gcc = _find_gcc()
        self.sanitizers, probe_out = _sanitizers_work(self.gcc, tmp)
        if not self.sanitizers:
            warnings.warn(
                "AddressSanitizer/UBSan do not work on this machine; the native tests run "
                "without sanitizers.\n" + probe_out[-2000:]
            )
        san = SANITIZE_FLAGS if self.sanitizers else []
        self.flags = {
            "san": COMMON_FLAGS + san,
            "fault": COMMON_FLAGS + san + ["-DXG2_FAULT_INJECTION"],
        }
        self.programs = {}  # name -> executable path
        self.errors = {}  # name -> build log
        self._build_all()

    def _build_all(self):
        sources = sorted(NATIVE.glob("src/*.c"))
        configs = sorted(set(PROGRAMS.values()))
        for config in configs:
            (self.tmp / config).mkdir(parents=True, exist_ok=True)

        def compile_one(job):
            config, src = job
            obj = self.tmp / config / (src.stem + ".o")
            return config, src, obj, _run([self.gcc, *self.flags[config], "-c", str(src), "-o", str(obj)])

        def link_one(name):
            config = PROGRAMS[name]
            if config in failed:
                return name, None, failed[config]
            exe = self.tmp / config / name
            r = _run(
                [self.gcc, *self.flags[config], str(TESTS / f"{name}.c"), *map(str, objects[config]),
                 "-o", str(exe), "-pthread"]
            )
            return name, exe, (None if r.returncode == 0 else f"building {name} ({config}) failed:\n{r.stdout}")

        objects = {config: [] for config in configs}
        failed = {}
        workers = max(2, os.cpu_count() or 2)
        with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
            jobs = [(config, src) for config in configs for src in sources]
            for config, src, obj, r in pool.map(compile_one, jobs):
                if r.returncode != 0:
                    failed.setdefault(config, f"compiling {src.relative_to(ROOT)} ({config}) failed:\n{r.stdout}")
                objects[config].append(obj)
            for name, exe, err in pool.map(link_one, list(PROGRAMS)):
                if err:
                    self.errors[name] = err
                else:
                    self.programs[name] = exe

    def program(self, name):
        if name in self.errors:
            pytest.fail(self.errors[name], pytrace=False)
        return self.programs[name]


@pytest.fixture(scope="session")
def native_build(tmp_path_factory):
    return NativeBuild(tmp_path_factory.mktemp("xg2_native"))


CASES = [(program, test) for program in PROGRAMS for test in _test_names(program)]


def _run_program(native_build, program, test):
    exe = native_build.program(program)
    try:
        r = _run([str(exe), test], env={**os.environ, **RUN_ENV}, timeout=TEST_TIMEOUT_S, cwd=ROOT)
    except subprocess.TimeoutExpired as e:
        out = e.stdout if isinstance(e.stdout, str) else (e.stdout or b"").decode("utf-8", "replace")
        pytest.fail(f"{program} {test}: timed out after {TEST_TIMEOUT_S} s\n{out[-6000:]}", pytrace=False)
    for m in NONNULL_REPORT.finditer(r.stdout):
        site = os.path.relpath(m.group("site"), ROOT) if os.path.isabs(m.group("site")) else m.group("site")
        _NONNULL_SITES.setdefault(site, f"{program}:{test}")
    return r


@pytest.mark.parametrize("program,test", CASES, ids=[f"{p}:{t}" for p, t in CASES])
def test_native(native_build, program, test):
    r = _run_program(native_build, program, test)
    out = r.stdout
    problems = []
    if r.returncode != 0:
        problems.append(f"exit status {r.returncode}")
    other = NONNULL_REPORT.sub("", out)
    found = sorted(set(m.group(0) for m in SANITIZER_REPORT.finditer(other)))
    if found:
        problems.append("sanitizer report: " + ", ".join(found))
    if problems:
        if len(out) > 12000:
            out = out[:6000] + "\n[...]\n" + out[-6000:]
        pytest.fail(f"{program} {test}: {'; '.join(problems)}\n{out}", pytrace=False)


def test_native_no_null_pointer_arguments(native_build):
    """No NULL pointer reaches a nonnull libc argument (qsort, memcpy, ...), even
    with a zero count: C11 7.1.4 makes that undefined, and gcc assumes such
    pointers are non-NULL afterwards.  Collected from the test_native runs; when
    this item runs alone it runs two programs itself."""
    if not native_build.sanitizers:
        pytest.fail("needs the sanitizer build, which does not work on this machine", pytrace=False)
    if not _NONNULL_SITES:
        _run_program(native_build, "test_vocab", "mask_matches_accept_token_raw")
        _run_program(native_build, "test_matcher", "custom_stop_tokens")
    if _NONNULL_SITES:
        lines = [f"  {site}  (first hit by {test})" for site, test in sorted(_NONNULL_SITES.items())]
        pytest.fail(
            "UBSan: a NULL pointer was passed to a nonnull argument at:\n" + "\n".join(lines),
            pytrace=False,
        )


def test_native_test_list_is_complete():
    """Every TEST(...) in the C files is registered in its RUN_TESTS call."""
    for program in PROGRAMS:
        text = (TESTS / f"{program}.c").read_text(encoding="utf-8")
        defined = set(re.findall(r"^TEST\((\w+)\)", text, flags=re.M))
        assert defined == set(_test_names(program)), program
