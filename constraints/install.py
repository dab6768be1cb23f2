"""tox's install command (tox.ini `install_command`): `pip install` with PyTorch's CPU index
first where the CUDA build would be wasted.

PyPI's Linux wheel of torch is the CUDA build (17 nvidia-*/triton wheels, 3–4 GB); the CPU
build is ~190 MB and is what the book computes with. On Linux, with no NVIDIA driver
(`nvidia-smi` not found), no index of the user's own (PIP_INDEX_URL unset) and
NLBUDGET_TORCH_INDEX not `pypi`, this adds PyTorch's CPU index as an extra index: pip then
prefers `torch==2.13.0+cpu` there to PyPI's `2.13.0` (the lock's `==2.13.0` admits both). The
index is added only if it answers within a few seconds, so a machine that cannot reach it (a
mirror, a closed network, a local wheel) installs as before, without pip's retries.
Everything else is pip's own: `python constraints/install.py ARGS` is `pip install ARGS`.
"""

import os
import shutil
import subprocess
import sys
import urllib.request

CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def wants_cpu_index(env=os.environ, platform=sys.platform, which=shutil.which) -> bool:
    """Whether the CUDA build would be what pip picks and a waste: Linux, no NVIDIA driver, no
    index of the user's own, not turned off."""
    return (platform.startswith("linux") and which("nvidia-smi") is None
            and not env.get("PIP_INDEX_URL") and env.get("NLBUDGET_TORCH_INDEX") != "pypi")


def reachable(url: str, timeout: float = 5.0) -> bool:
    try:
        urllib.request.urlopen(urllib.request.Request(url + "/torch/", method="HEAD"),
                               timeout=timeout).close()
        return True
    except (OSError, ValueError):
        return False


def command(args: list[str], env=os.environ, **probe) -> list[str]:
    """The pip command for `args`: `python -m pip install [--extra-index-url CPU] args`."""
    extra = []
    if wants_cpu_index(env, **probe) and reachable(CPU_INDEX):
        extra = ["--extra-index-url", CPU_INDEX]
        print(f"[nlbudget] torch: PyTorch's CPU build ({CPU_INDEX}); no NVIDIA driver found",
              file=sys.stderr)
    return [sys.executable, "-m", "pip", "install", *extra, *args]


if __name__ == "__main__":
    sys.exit(subprocess.call(command(sys.argv[1:])))
