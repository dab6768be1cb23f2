"""pyproject.toml and environment.yml list the same dependencies."""

import re
import tomllib

import yaml

from nlbudget import paths


def _name(req: str) -> str:
    return re.split(r"[<>=!~\[ ;]", req.strip(), maxsplit=1)[0].lower().replace("_", "-")


def test_environment_yml_matches_pyproject():
    root = paths.repo_root()
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    wanted = set(project["dependencies"]) | {r for extra in project["optional-dependencies"].values()
                                             for r in extra}
    env = yaml.safe_load((root / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    listed = {r for r in pip if not r.startswith("-e")}
    assert {_name(r): r for r in listed} == {_name(r): r for r in wanted}


def test_user_named_dependencies_are_declared():
    root = paths.repo_root()
    deps = {_name(r) for r in tomllib.loads((root / "pyproject.toml").read_text())["project"]["dependencies"]}
    assert {"torch", "transformers", "jupyter-book", "papermill", "matplotlib", "pandas",
            "sympy"} <= deps
