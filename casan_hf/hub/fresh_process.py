"""Python code run in a new process in which `import casan_hf` fails, as on a machine that only has `transformers`:
what users of a shared checkpoint get with `trust_remote_code=True`. The push's load check runs in one
(`push.check_loads_without_casan_hf`), and so do the tests of shared folders."""

import os
import subprocess
import sys
import textwrap


BLOCK_CASAN_HF = """
import sys

class _BlockCasanHf:
    def find_spec(self, name, path=None, target=None):
        if name == "casan_hf" or name.startswith("casan_hf."):
            raise ImportError("casan_hf is not installed in this process")

sys.meta_path.insert(0, _BlockCasanHf())
try:
    import casan_hf  # noqa: F401
except ImportError:
    pass
else:
    raise SystemExit("casan_hf is importable: the fresh process proves nothing")
"""


def run_without_casan_hf(code, workdir, timeout=600, python=sys.executable, env=None, args=()):
    """Runs `code` (with the command-line arguments `args`) with casan_hf blocked, in `workdir`, with its own
    remote-code module cache; returns stdout. `python` is the interpreter: another environment's runs the folder
    with that environment's transformers. The process is offline unless `env` (variables set on top) says
    otherwise, as a Hub server's does. A RuntimeError with its output when it fails."""
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "HF_MODULES_CACHE": str(os.path.join(workdir, "hf_modules")),
        **(env or {}),
    }
    env.pop("PYTHONPATH", None)
    result = subprocess.run(
        [str(python), "-c", BLOCK_CASAN_HF + textwrap.dedent(code), *map(str, args)],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if result.returncode != 0:
        raise RuntimeError(f"fresh process failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
    return result.stdout
