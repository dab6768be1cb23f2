"""Packaging hook: a wheel carries the files the chapters read.

`pyproject.toml` holds the project's metadata; this file only adds, to a non-editable build, a
copy of the notebooks and the shipped data under `nlbudget/_shipped/` (laid out as in the
repository), so that `pip install nlbudget-*.whl` runs every chapter from any folder
(`nlbudget.paths.shipped`). An editable install reads them from the checkout instead.
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

#: What a wheel ships (globs relative to the repository): the chapters and exercises, the
#: claims table, the transcribed reference figures, the in-domain corpus with its licence and
#: recipe, and the committed results of the scales a CPU build does not make.
SHIPPED = ("notebooks/*.ipynb", "notebooks/exercises/*.ipynb", "data/claims.csv",
           "data/reference/*", "data/corpora/*", "data/results/paper/*.json",
           "data/results/full/*.json")


class BuildPyWithShipped(build_py):
    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return
        root = Path(__file__).resolve().parent
        target = Path(self.build_lib) / "nlbudget" / "_shipped"
        for pattern in SHIPPED:
            for src in sorted(root.glob(pattern)):
                if src.is_file() and "__pycache__" not in src.parts:
                    dst = target / src.relative_to(root)
                    dst.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(src, dst)


setup(cmdclass={"build_py": BuildPyWithShipped})
