"""forgetui: which of my models should do which job?"""

import sys as _sys

__version__ = "0.1.0"

# httpx imports its command-line tool (click, rich, pygments) whenever those happen to be
# installed; the demo extra brings click in, and then every engine import would load rich (~60 ms,
# and a UI library in the engine). forgetui never uses httpx's CLI, so mark it unavailable: httpx
# catches the ImportError and skips it. Only the engine-side process is affected.
_sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]
