"""Languages the sandbox runs, and the host toolchain each one needs.

Toolchains are taken from ``/usr`` only (the sandbox binds ``/usr`` read-only and nothing under a
home directory), so Python is always the system ``/usr/bin/python3 -I``, never a venv or pyenv shim.
Paths in ``compile``/``run`` use placeholders filled in per run: ``{src}`` (the read-only source
directory) and ``{build}`` (a private, writable build directory).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

#: Address space that V8 needs to start at all (it fails at 512 MiB: "Failed to reserve virtual
#: memory for CodeRange"); research note A2, verified at 2 GiB.
NODE_MEMORY_FLOOR = 2 << 30


@dataclass(frozen=True)
class Toolchain:
    language: str
    #: The file the source is written to, inside {src}.
    source_name: str
    #: Host paths that must exist (all under /usr or /bin, which the sandbox binds).
    needs: tuple[str, ...]
    run: tuple[str, ...]
    compile: tuple[str, ...] | None = None
    #: The address-space limit is raised to at least this.
    memory_floor: int = 0

    def missing(self) -> list[str]:
        return [path for path in self.needs if not os.path.exists(path)]

    def available(self) -> bool:
        return not self.missing()


TOOLCHAINS: dict[str, Toolchain] = {
    "python": Toolchain(
        "python", "main.py", ("/usr/bin/python3",), ("/usr/bin/python3", "-I", "{src}/main.py")
    ),
    "sh": Toolchain("sh", "main.sh", ("/bin/sh",), ("/bin/sh", "{src}/main.sh")),
    "c": Toolchain(
        "c",
        "main.c",
        ("/usr/bin/gcc",),
        ("{build}/main",),
        compile=("/usr/bin/gcc", "-O2", "-pipe", "-o", "{build}/main", "{src}/main.c", "-lm"),
    ),
    "cpp": Toolchain(
        "cpp",
        "main.cpp",
        ("/usr/bin/g++",),
        ("{build}/main",),
        compile=("/usr/bin/g++", "-O2", "-pipe", "-std=gnu++17", "-o", "{build}/main", "{src}/main.cpp", "-lm"),
    ),
    "node": Toolchain(
        "node", "main.js", ("/usr/bin/node",), ("/usr/bin/node", "{src}/main.js"), memory_floor=NODE_MEMORY_FLOOR
    ),
}

ALIASES = {
    "python3": "python",
    "py": "python",
    "shell": "sh",
    "c++": "cpp",
    "cxx": "cpp",
    "javascript": "node",
    "js": "node",
}


def resolve(language: str) -> Toolchain | None:
    name = language.strip().lower()
    return TOOLCHAINS.get(ALIASES.get(name, name))


def describe_toolchains() -> dict[str, str | None]:
    """language -> the main executable found, or None."""
    out: dict[str, str | None] = {}
    for name, tool in TOOLCHAINS.items():
        main = (tool.compile or tool.run)[0]
        out[name] = main if tool.available() else None
    return out
