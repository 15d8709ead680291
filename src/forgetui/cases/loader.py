"""Load case files: every broken case is reported with file, line and field; the rest still load.

The case-set revision (stored in every run's fingerprint) is a content hash of every case file
that was read, so two runs with the same revision asked exactly the same questions.
"""

from __future__ import annotations

import hashlib
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from pydantic import ValidationError

from ..tomlfile import key_lines, line_of
from .longctx import apply_to
from .schema import Case


def builtin_cases_dir() -> Path:
    """The shipped library: inside the wheel (forgetui/_data/cases) or the source tree's cases/."""
    package = Path(__file__).resolve().parents[1]
    for candidate in (package / "_data" / "cases", package.parents[1] / "cases"):
        if candidate.is_dir():
            return candidate
    return package.parents[1] / "cases"


def library_dirs(config: Any) -> list[Path]:
    """The built-in library, then the user's ``case_dirs`` from the config."""
    return [builtin_cases_dir(), *(Path(d).expanduser() for d in getattr(config, "case_dirs", []))]


@dataclass
class CaseLibrary:
    cases: list[Case] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # "file:line: id: field: why"
    revision: str = ""
    files: int = 0

    def by_id(self, case_id: str) -> Case | None:
        return next((c for c in self.cases if c.id == case_id), None)

    def sets(self) -> dict[str, int]:
        """Named set -> number of cases (categories and "full" included)."""
        counts: dict[str, int] = {}
        for case in self.cases:
            for name in case.in_sets():
                counts[name] = counts.get(name, 0) + 1
        return dict(sorted(counts.items()))

    def select(self, tokens: Iterable[str]) -> list[Case]:
        """Cases matching any token: a set or category name, "full", "hard"/"easy", "tag:X",
        "id:X" or a bare id. A token starting with "-" removes what it matches. Library order."""
        chosen: set[str] = set()
        removed: set[str] = set()
        for raw in tokens:
            token = raw.strip()
            target = removed if token.startswith("-") else chosen
            token = token.lstrip("-")
            target.update(c.id for c in self.cases if _matches(c, token))
        return [c for c in self.cases if c.id in chosen and c.id not in removed]

    def unknown_tokens(self, tokens: Iterable[str]) -> list[str]:
        return [t for t in tokens if not any(_matches(c, t.strip().lstrip("-")) for c in self.cases)]


def _matches(case: Case, token: str) -> bool:
    if token.startswith("tag:"):
        return token[4:] in case.tags
    if token.startswith("id:"):
        return case.id == token[3:]
    if token == "hard":
        return case.hard
    if token == "easy":
        return not case.hard
    return token in case.in_sets() or token == case.id


def load_library(dirs: Iterable[Path] | None = None) -> CaseLibrary:
    """Load every ``*.toml`` under the given folders (default: the built-in library)."""
    from ..grading.registry import parse_params

    lib = CaseLibrary()
    digest = hashlib.sha256()
    seen: dict[str, str] = {}
    for root in (list(dirs) if dirs is not None else [builtin_cases_dir()]):
        root = Path(root).expanduser()
        if not root.is_dir():
            lib.problems.append(f"{root}: case folder not found")
            continue
        for path in sorted(root.rglob("*.toml")):
            raw = path.read_bytes()
            digest.update(str(path.relative_to(root)).encode() + b"\0" + raw + b"\0")
            lib.files += 1
            for case in _load_file(path, raw, lib.problems):
                where = f"{case.source}:{case.line}" if case.line else case.source
                if case.id in seen:
                    lib.problems.append(f"{where}: {case.id}: id already used in {seen[case.id]}")
                    continue
                try:
                    case.params = parse_params(case.grader_kind, {k: v for k, v in case.grader.items() if k != "kind"})
                except ValueError as exc:
                    lib.problems.append(f"{where}: {case.id}: grader: {exc}")
                    continue
                seen[case.id] = where
                lib.cases.append(case)
    lib.revision = digest.hexdigest()[:16]
    return lib


def _load_file(path: Path, raw: bytes, problems: list[str]) -> list[Case]:
    try:
        source = raw.decode("utf-8")
        data = tomllib.loads(source)
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        problems.append(f"{path}: cannot parse: {exc}")
        return []
    entries = data.get("case")
    extra = sorted(set(data) - {"case"})
    lines = key_lines(source)
    if extra:
        problems.append(f"{path}:{line_of(lines, (extra[0],)) or 1}: unknown top-level key '{extra[0]}' (cases go in [[case]] tables)")
    if not isinstance(entries, list):
        problems.append(f"{path}: no [[case]] tables")
        return []
    out = []
    for index, entry in enumerate(entries):
        line = line_of(lines, ("case", index))
        generated = None
        if isinstance(entry, dict) and "generate" in entry:
            case_id = entry.get("id", f"case #{index + 1}")
            if "prompt" in entry or "messages" in entry:
                problems.append(f"{path}:{line}: {case_id}: give either generate or prompt/messages, not both")
                continue
            try:
                entry = dict(entry)
                generated = apply_to(entry)
            except (ValidationError, ValueError, TypeError) as exc:
                problems.append(f"{path}:{line_of(lines, ('case', index, 'generate')) or line}: {case_id}: generate: {exc}")
                continue
        try:
            case = Case.model_validate(entry)
        except ValidationError as exc:
            case_id = entry.get("id", f"case #{index + 1}") if isinstance(entry, dict) else f"case #{index + 1}"
            for err in exc.errors():
                loc = ("case", index, *err["loc"])
                where = line_of(lines, loc) or line
                field_name = ".".join(str(p) for p in err["loc"]) or "(case)"
                problems.append(f"{path}:{where}: {case_id}: {field_name}: {err['msg']}")
            continue
        case.source = str(path)
        case.line = line
        case.generated = generated
        out.append(case)
    return out


def describe_case(case: Case) -> dict[str, Any]:
    """What ``forgetui cases show`` prints, as data."""
    return {
        "id": case.id,
        "category": case.category,
        "hard": case.hard,
        "title": case.title,
        "tags": case.tags,
        "sets": sorted(case.in_sets()),
        "source": f"{case.source}:{case.line}",
        "messages": case.chat_messages(),
        "max_tokens": case.max_tokens,
        "grader": case.grader,
        "verify": case.verify.model_dump(),
    }
