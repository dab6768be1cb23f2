"""The code that computes a thing, as one digest: the modules of the package it starts from and
every module of the package they import in turn (the import closure), each read as its tokens
without comments, blank lines or a top-level `SETTINGS` table (`code`), with the versions of
Python and of the packages that compute (`key`). No hand-kept list of source files: a module
enters a key because something in the closure imports it.

The build keys a chapter's measurements on it (`book.inputs`); the budget tool keys its stages
on it (`tools.budget.Stages`).
"""

from __future__ import annotations

import hashlib
import io
import platform
import re
import tokenize
from importlib import metadata
from pathlib import Path

from nlbudget.assets import memo

#: The packages whose versions enter a key: those that compute the numbers.
COMPUTING = ("torch", "transformers", "numpy")


def package_dir() -> Path:
    """The `nlbudget` package's folder."""
    return Path(__file__).resolve().parent.parent


def source(path: Path) -> str:
    """A module's source as a key reads it (the one place files are read)."""
    return Path(path).read_text(encoding="utf-8")


_FROM = re.compile(r"^[ \t]*from[ \t]+([\w.]+)[ \t]+import[ \t]+(\([^)]*\)|[^\n]*)", re.M)
_IMPORT = re.compile(r"^[ \t]*import[ \t]+([^\n]*)", re.M)


def import_statements(src: str) -> list[tuple[str, list[str] | None]]:
    """(module, imported names) of every `from m import a, b` — names None for `import m` — read
    from the lines of `src` (not with `ast`: CPython 3.11's parser can raise SystemError on a
    long-running interpreter's deep stack; a test holds the two readings equal on every module
    and notebook)."""
    out: list[tuple[str, list[str] | None]] = []
    for m in _FROM.finditer(src):
        body = re.sub(r"#[^\n]*", "", m.group(2)).strip("()\\ \t\n")
        out.append((m.group(1), [n.split()[0] for n in body.replace("\\\n", " ").split(",")
                                 if n.strip()]))
    for m in _IMPORT.finditer(src):
        for name in re.sub(r"#.*", "", m.group(1)).split(","):
            if name.strip():
                out.append((name.split()[0], None))
    return out


def package_imports(src: str, pkg: Path) -> set[Path]:
    """The package's module files that `src` imports (at the top or inside a function)."""
    out: set[Path] = set()

    def add(name: str) -> bool:
        first, _, rest = name.partition(".")
        if first != "nlbudget":
            return False
        rel = Path(*rest.split(".")) if rest else None
        for f in ((pkg / rel.with_suffix(".py"), pkg / rel / "__init__.py") if rel
                  else (pkg / "__init__.py",)):
            if f.is_file():
                out.add(f)
                return True
        return False

    for module, names in import_statements(src):
        if names is None:
            add(module)
        for name in names or ():
            add(f"{module}.{name}") or add(module)
    return out


def closure(roots, stop=()) -> set[Path]:
    """`roots` and every module of the package they import in turn, with the packages'
    `__init__` files on the way, not entering the modules in `stop` (unless a root)."""
    pkg, roots = package_dir(), [Path(r).resolve() for r in roots]
    stop = {Path(s).resolve() for s in stop}
    todo, seen = list(roots), {pkg / "__init__.py"}
    while todo:
        f = todo.pop()
        if f in seen or (f in stop and f not in roots):
            continue
        seen.add(f)
        todo.extend(package_imports(source(f), pkg))
        todo.extend(p / "__init__.py" for p in f.parents if pkg in p.parents)
    return seen


def code(src: str) -> str:
    """What of a module's source a result depends on: its tokens, without comments, blank
    lines and the `SETTINGS` table at the top level (a chapter's settings enter its inputs per
    profile, so resizing the `ci` budget leaves committed `full` results fresh, and rewording
    a comment reruns nothing)."""
    out: list[str] = []
    depth, skipping = 0, False
    toks = list(tokenize.generate_tokens(io.StringIO(src).readline))
    for i, t in enumerate(toks):
        if t.type in (tokenize.COMMENT, tokenize.NL):
            continue
        if (t.type == tokenize.NAME and t.string == "SETTINGS" and t.start[1] == 0
                and i + 1 < len(toks) and toks[i + 1].string == "="):
            skipping = True
        if skipping:
            if t.type == tokenize.OP and t.string in "([{":
                depth += 1
            elif t.type == tokenize.OP and t.string in ")]}":
                depth -= 1
            elif t.type == tokenize.NEWLINE and depth == 0:
                skipping = False
            continue
        out.append(f"{t.type}:{t.string}")
    return "\n".join(out)


def files_digest(files) -> str:
    """The modules `files`, each by its path in the package and its `code`."""
    pkg, h = package_dir(), hashlib.sha256()
    for f in sorted(files):
        h.update(f.relative_to(pkg).as_posix().encode() + b"\0" + code(source(f)).encode()
                 + b"\0")
    return h.hexdigest()


def versions() -> dict[str, str]:
    """Python's version and those of the packages that compute (`COMPUTING`)."""
    out = {"python": platform.python_version()}
    for name in COMPUTING:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "absent"
    return out


def key(files, *parts) -> str:
    """The key of what the modules `files` (an import `closure`) compute from `parts`
    (strings, or what `memo.key` digests: tensors, modules, settings): their code, the
    versions and the parts."""
    return memo.key(files_digest(files), sorted(versions().items()), *parts)
