"""The case library: schema, loader and selection. The case FILES live in the top-level cases/."""

from .loader import CaseLibrary, load_library
from .schema import CATEGORIES, Case

__all__ = ["CATEGORIES", "Case", "CaseLibrary", "load_library"]
