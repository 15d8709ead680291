"""Pull the gradable part out of a model's response: the code, or the final answer.

Extraction is where most benchmark numbers go wrong (research notes: eval-anchors §0.2 and §10):
chain of thought graded as the answer, a usage example picked instead of the solution, a
truncated block run as if it were complete. So the rules here are explicit, and every result
says which rule picked it (``Extraction.method``) so a reviewer can tell "could not find the code"
from "the code was wrong". All functions are pure: no I/O, no execution.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

__all__ = [
    "CodeBlock",
    "Extraction",
    "extract_code",
    "fenced_blocks",
    "final_answer",
    "normalize_language",
    "strip_preamble",
    "strip_reasoning",
]

# --------------------------------------------------------------------------- reasoning

# <think>, <thinking>, <reasoning>, also the <|thinking|> / <|/thinking|> / </|thinking|> spelling.
_REASON_TAG = re.compile(r"<\|?(/?)\|?\s*(?:think|thinking|reasoning)\s*\|?>", re.IGNORECASE)


def strip_reasoning(text: str) -> str:
    """Remove reasoning blocks (``<think>``, ``<thinking>``, ``<reasoning>``) from a response.

    Closed blocks are cut out. An unclosed block drops everything after its opening tag: a
    truncated chain of thought is never graded (CrucibleForge once counted code dug out of
    cut-off reasoning as passes). A closing tag with no opening one (servers that swallow the
    opening tag: ``...</think>answer``) drops everything before it.
    """
    out: list[str] = []
    depth = 0
    pos = 0
    for match in _REASON_TAG.finditer(text):
        closing = bool(match.group(1))
        if not closing:
            if depth == 0:
                out.append(text[pos:match.start()])
            depth += 1
        elif depth > 0:
            depth -= 1
            if depth == 0:
                pos = match.end()
        else:
            # Stray close: what came before it was reasoning whose opening tag went missing.
            out = []
            pos = match.end()
    if depth == 0:
        out.append(text[pos:])
    return "".join(out).strip()


# --------------------------------------------------------------------------- preamble

_OPENERS = (
    r"sure|certainly|of course|absolutely|okay|ok|alright|all right|great|no problem|gladly|"
    r"happy to help|yes|understood|got it"
)
# "Sure!", "Certainly.", "Okay," alone on a line.
_INTERJECTION = re.compile(rf"^(?:{_OPENERS})\s*[!.,]*$", re.IGNORECASE)
# A chatter sentence that announces what follows: "Here is the code:", "Below is my solution."
# No colon inside, so "Here is the answer: 42" (which holds the answer) is never dropped.
_ANNOUNCE = re.compile(
    r"^(?:here(?:'s|\u2019s| is| are)|below (?:is|are)|the following|i(?:'ve| have) (?:written|implemented)|"
    r"i(?:'d| would) be (?:happy|glad)|i can help|let me|let's|here you go|there you go)\b[^:]*[:.!]?$",
    re.IGNORECASE,
)
# A bare label: "Answer:", "**Solution:**", "Code:".
_LABEL = re.compile(
    r"^(?:final answer|answer|solution|code|implementation|response|result)\s*:$", re.IGNORECASE
)
_OPENER_PREFIX = re.compile(rf"^(?:{_OPENERS})\s*[!.,]+\s*(.*)$", re.IGNORECASE)


def _is_preamble(line: str) -> bool:
    core = line.strip().strip("*_#> ").strip()
    if not core or len(core) > 200 or core.startswith(("```", "~~~")):
        return False
    if _INTERJECTION.match(core) or _LABEL.match(core):
        return True
    # "Sure! Here is your answer:" is an opener plus an announcement; "Sure. It is 42." is not.
    m = _OPENER_PREFIX.match(core)
    rest = m.group(1) if m else core
    return bool(_ANNOUNCE.match(rest) or (m and (_INTERJECTION.match(rest) or _LABEL.match(rest))))


def strip_preamble(text: str) -> str:
    """Drop lead-in chatter lines ("Sure! Here is your answer:", "Answer:") from the start.

    Only lines that carry nothing but chatter are dropped: "Sure. The answer is 42." stays,
    because the answer is in it.
    """
    lines = text.splitlines(keepends=True)
    i = 0
    while i < len(lines) and (not lines[i].strip() or _is_preamble(lines[i])):
        i += 1
    return "".join(lines[i:]).strip("\n")


# --------------------------------------------------------------------------- fences

_LANG_ALIASES = {
    "python": "python", "py": "python", "python3": "python", "py3": "python", "python2": "python",
    "ipython": "python", "pycon": "python", "sage": "python",
    "c": "c", "h": "c", "ansi-c": "c",
    "cpp": "cpp", "c++": "cpp", "cxx": "cpp", "cc": "cpp", "hpp": "cpp", "cplusplus": "cpp",
    "js": "node", "javascript": "node", "node": "node", "nodejs": "node", "mjs": "node",
    "cjs": "node", "ecmascript": "node",
    "sh": "sh", "bash": "sh", "shell": "sh", "zsh": "sh", "posix": "sh",
}


def normalize_language(name: str | None) -> str | None:
    """Map a fence info word or a case's language to its canonical name ("Python3" -> "python").

    Unknown names come back lowercased; empty ones as None.
    """
    if not name:
        return None
    word = name.strip().lower()
    # "language-python" (HTML class), "{.python}" (pandoc), "python:main.py" (file name suffix)
    word = word.removeprefix("language-").removeprefix("lang-").strip("{}.").split(":")[0]
    if not word:
        return None
    return _LANG_ALIASES.get(word, word)


@dataclass(frozen=True)
class CodeBlock:
    """One fenced block: canonical language (None when unlabeled), code, offset, closed or not."""

    language: str | None
    code: str
    start: int  # offset of the opening fence in the text that was scanned
    complete: bool  # False for a fence never closed (a truncated response)
    info: str = ""  # the raw info string, e.g. "python title=main.py"


_OPEN_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^\n]*?)[ \t]*$")


def _dedent(line: str, indent: int) -> str:
    # CommonMark: remove up to the opening fence's indentation from each content line, so code
    # inside a list item ("1. Code:\n   ```python") keeps its own relative indentation.
    n = 0
    while n < indent and n < len(line) and line[n] in " \t":
        n += 1
    return line[n:]


def fenced_blocks(text: str) -> list[CodeBlock]:
    """Every ``` or ~~~ fenced block in ``text``, in order.

    A block closes only at a line holding the same fence character, at least as many times as
    the opening, and nothing else, so a ```` fence can quote ``` lines and a backtick inside a
    code line never ends the block. An indented fence (in a list item) is dedented. The last
    block may be unterminated (``complete=False``), which is how a truncated response looks; as
    a concession to sloppy output, a code line ending in the exact opening fence closes it too.
    """
    blocks: list[CodeBlock] = []
    lines = text.splitlines(keepends=True)
    offsets = []
    pos = 0
    for line in lines:
        offsets.append(pos)
        pos += len(line)
    i = 0
    while i < len(lines):
        m = _OPEN_FENCE.match(lines[i].rstrip("\r\n"))
        if not m or (m.group("fence")[0] == "`" and "`" in m.group("info")):
            i += 1
            continue
        fence, info = m.group("fence"), m.group("info").strip()
        indent = len(m.group("indent").expandtabs(4))
        close = re.compile(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$")
        body: list[str] = []
        complete = False
        j = i + 1
        while j < len(lines):
            raw = lines[j].rstrip("\r\n")
            if close.match(raw):
                complete = True
                break
            body.append(_dedent(raw, indent))
            j += 1
        if not complete:
            # "    return x```": a closing fence glued to the last code line.
            for k, line in enumerate(body):
                stripped = line.rstrip()
                if stripped.endswith(fence) and not stripped.endswith(fence[0] * (len(fence) + 1)):
                    body = body[:k] + [stripped[: -len(fence)]]
                    complete = True
                    j = i + 1 + k
                    break
        word = info.split()[0] if info else ""
        blocks.append(CodeBlock(normalize_language(word), "\n".join(body).rstrip() + ("\n" if body else ""),
                                offsets[i], complete, info))
        i = j + 1
    return blocks


# --------------------------------------------------------------------------- definitions

_C_KEYWORDS = {"if", "for", "while", "switch", "return", "sizeof", "catch", "do", "else", "case"}


def _c_def_pattern(name: str) -> re.Pattern[str]:
    # A definition is "<type> name(params) [const|noexcept|override] {" — the "{" and the type
    # before the name tell it from a call ("x = solve(a);") or a prototype ("int solve(int);").
    return re.compile(
        rf"(?:[\w\]>*&]\s*[\s*&]|::)\s*(?P<name>{name})\s*\([^;{{}}()]*\)\s*"
        rf"(?:const\s*)?(?:noexcept\s*)?(?:override\s*)?(?:->\s*[\w:<>]+\s*)?\{{",
    )


def _py_tree(code: str) -> ast.Module | None:
    try:
        return ast.parse(code)
    except (SyntaxError, ValueError):
        return None


def _py_defines(code: str, name: str | None) -> bool:
    """Top-level ``def name`` / ``class name`` / ``name = ...``; any def or class when name is None."""
    tree = _py_tree(code)
    if tree is None:
        # Unparsable code can still be the intended answer (the grader reports the SyntaxError).
        if name is None:
            return re.search(r"^(?:async\s+)?(?:def|class)\s+\w+", code, re.MULTILINE) is not None
        n = re.escape(name)
        return re.search(rf"^(?:(?:async\s+)?def\s+{n}\s*\(|class\s+{n}\b|{n}\s*(?::[^=\n]*)?=(?!=))",
                         code, re.MULTILINE) is not None
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if name is None or node.name == name:
                return True
        elif name is not None and isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                return True
        elif name is not None and isinstance(node, (ast.Import, ast.ImportFrom)):
            if any((a.asname or a.name) == name for a in node.names):
                return True
    return False


def _c_defines(code: str, name: str | None) -> bool:
    for m in _c_def_pattern(re.escape(name) if name else r"[A-Za-z_]\w*").finditer(code):
        if m.group("name") not in _C_KEYWORDS:
            return True
    return False


def _js_defines(code: str, name: str | None) -> bool:
    n = re.escape(name) if name else r"[A-Za-z_$][\w$]*"
    return re.search(rf"\b(?:function\s*\*?\s*{n}\s*\(|class\s+{n}\b|(?:const|let|var)\s+{n}\s*=)",
                     code) is not None


def _sh_defines(code: str, name: str | None) -> bool:
    n = re.escape(name) if name else r"[A-Za-z_][\w-]*"
    return re.search(rf"^\s*(?:function\s+{n}\b|{n}\s*\(\)\s*\{{?)", code, re.MULTILINE) is not None


def defines(code: str, language: str, name: str | None) -> bool:
    """Whether ``code`` defines ``name`` (any function/class when ``name`` is None)."""
    lang = normalize_language(language)
    if lang == "python":
        return _py_defines(code, name)
    if lang in ("c", "cpp"):
        return _c_defines(code, name)
    if lang == "node":
        return _js_defines(code, name)
    if lang == "sh":
        return _sh_defines(code, name)
    return False


def _looks_like(code: str, language: str) -> bool:
    """Whether unlabeled text plausibly is code of ``language`` (never prose or program output)."""
    if language == "python":
        tree = _py_tree(code)
        # "42" or "Hello" parse as expressions; real code has at least one statement or a call.
        return tree is not None and any(
            not isinstance(n, ast.Expr) or isinstance(n.value, ast.Call) for n in tree.body)
    if language in ("c", "cpp"):
        return _c_defines(code, None) or bool(re.search(r"^\s*#include\b", code, re.MULTILINE))
    if language == "node":
        return _js_defines(code, None) or bool(re.search(r"\b(?:console\.log|require)\s*\(", code))
    if language == "sh":
        return code.startswith("#!") or _sh_defines(code, None)
    return False


# --------------------------------------------------------------------------- extraction

@dataclass(frozen=True)
class Extraction:
    """The code picked from a response (None when there is none), the rule that picked it, a note."""

    code: str | None
    method: str  # e.g. "fenced:python:last-defining", "whole:python", "none"
    note: str = ""


def _compatible(block_lang: str | None, lang: str) -> bool:
    # C is (nearly) valid C++, so a ```c block answers a C++ question; the reverse is not true.
    return block_lang == lang or (lang == "cpp" and block_lang == "c")


def extract_code(text: str, language: str, required_name: str | None = None) -> Extraction:
    """The code a response offers as its answer in ``language``.

    After stripping reasoning and preamble: fenced blocks of the right language come first,
    unlabeled fences (that look like that language) second; fences in other languages (shell
    transcripts, output) are ignored. Within that order the rules are, first match wins:

    1. the last complete block that defines ``required_name`` ("...:last-defining");
    2. the last complete block that defines any function or class, so a trailing usage example
       ("print(solve(3))") is not taken for the solution ("...:last-with-def");
    3. the last complete block ("...:last");
    4. the last unterminated block, for truncated responses ("...:unterminated");
    5. with no usable fence at all, the whole text if it parses as code ("whole:<lang>").

    Otherwise ``code`` is None and the note says why ("no code in response").
    """
    lang = normalize_language(language) or language
    body = strip_preamble(strip_reasoning(text))
    blocks = [b for b in fenced_blocks(body) if b.code.strip()]
    labeled = [b for b in blocks if _compatible(b.language, lang)]
    unlabeled = [b for b in blocks if b.language is None and _looks_like(b.code, lang)]

    for tier, group in ((lang, labeled), ("unlabeled", unlabeled)):
        complete = [b for b in group if b.complete]
        if required_name:
            for b in reversed(complete):
                if defines(b.code, lang, required_name):
                    return Extraction(b.code, f"fenced:{tier}:last-defining")
    for tier, group in ((lang, labeled), ("unlabeled", unlabeled)):
        complete = [b for b in group if b.complete]
        note = (f"no block defines {required_name!r}" if required_name else "")
        for b in reversed(complete):
            if defines(b.code, lang, None):
                return Extraction(b.code, f"fenced:{tier}:last-with-def", note)
        if complete:
            return Extraction(complete[-1].code, f"fenced:{tier}:last", note)
    for tier, group in ((lang, labeled), ("unlabeled", unlabeled)):
        if group:
            return Extraction(group[-1].code, f"fenced:{tier}:unterminated",
                              "the code fence is never closed (truncated response?)")

    if blocks:
        others = sorted({b.language or "unlabeled" for b in blocks})
        return Extraction(None, "none", f"no code in response (no {lang} block; fences: {', '.join(others)})")
    stripped = body.strip()
    if stripped and "```" not in stripped and "~~~" not in stripped and _looks_like(stripped, lang):
        return Extraction(stripped + "\n", f"whole:{lang}", "no code fence; the whole response is code")
    return Extraction(None, "none", "no code in response")


# --------------------------------------------------------------------------- final answer

def _boxed(text: str) -> list[tuple[int, str]]:
    """Contents of every ``\\boxed{...}`` (braces balanced), with their offsets."""
    found = []
    for m in re.finditer(r"\\(?:boxed|fbox)\s*\{", text):
        depth, i = 1, m.end()
        while i < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        if depth == 0:
            found.append((m.start(), text[m.end():i - 1]))
    return found


def _clean_answer(value: str) -> str:
    value = value.strip()
    boxed = _boxed(value)
    if boxed:
        value = boxed[-1][1]
    for _ in range(3):  # markup can nest: "**`42`**", "$\(42\)$"
        value = value.strip().strip("*_`").strip()
        value = re.sub(r"^\$+|\$+$", "", value).strip()
        value = re.sub(r"^\\\(|\\\)$|^\\\[|\\\]$", "", value).strip()
    value = re.sub(r"\s+", " ", value)
    # A sentence-ending period is not part of the answer ("42." -> "42", "3.5." -> "3.5").
    return value[:-1].rstrip() if value.endswith(".") and not value.endswith("..") else value


# "Final answer: 42", "**Answer:** 42", "Answer = 42", "ANSWER: 42"
_ANSWER_LINE = re.compile(
    r"^[\W_]*(?:final\s+)?answer\b[*_\s]*(?:is\b)?[*_\s]*[:=][*_\s]*(?P<value>.*)$",
    re.IGNORECASE | re.MULTILINE,
)
# "The answer is 42." / "So the final answer is **42**."
# The value ends at the sentence's end, so "3.5 m. Because ..." gives "3.5 m".
_ANSWER_IS = re.compile(r"\b(?:final\s+)?answer\s+is\s*:?\s*(?P<value>[^\n]+?)(?:\.\s|\.?[ \t]*$)",
                        re.IGNORECASE | re.MULTILINE)


def final_answer(text: str) -> str | None:
    """The response's stated final answer, or None when it states none.

    Recognised forms: "Final answer: 42", "**Answer:** 42", "Answer:" followed by the answer on
    the next line, ``\\boxed{42}`` and "The answer is 42."; when several appear, the last one in
    the text wins (models restate corrected answers at the end). Reasoning blocks are ignored.
    Markup (bold, backticks, ``$``) and a closing period are removed.
    """
    body = strip_reasoning(text)
    found: list[tuple[int, str]] = list(_boxed(body))
    for m in _ANSWER_LINE.finditer(body):
        value = m.group("value")
        if not _clean_answer(value):
            # "Answer:" on its own line: the answer is the next non-empty line.
            nxt = re.search(r"\S[^\n]*", body[m.end():])
            value = nxt.group(0) if nxt else ""
        found.append((m.start(), value))
    for m in _ANSWER_IS.finditer(body):
        found.append((m.start(), m.group("value")))
    for _, value in sorted(found, key=lambda f: f[0], reverse=True):
        cleaned = _clean_answer(value)
        if cleaned:
            return cleaned
    return None
