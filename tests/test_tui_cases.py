"""The case browser (mode "cases"): the pure filter, the detail text, and the screen through Pilot."""

from __future__ import annotations

import io
import json
import textwrap
from pathlib import Path

import pytest
from textual.containers import VerticalScroll
from textual.widgets import DataTable, Input, Static

from forgetui.cases import commands
from forgetui.cases.loader import CaseLibrary, describe_case, load_library
from forgetui.cases.schema import CATEGORIES, Case
from forgetui.config import Config
from forgetui.tui.app import ForgetApp
from forgetui.tui.screens.cases import (MAX_MESSAGE_CHARS, CasesScreen, detail_text, filter_cases,
                                        parse_filter)


@pytest.fixture(scope="module")
def lib() -> CaseLibrary:
    library = load_library()
    assert len(library.cases) > 20 and not library.problems
    return library


def ids(cases) -> list[str]:
    return [c.id for c in cases]


# ------------------------------------------------------------------- pure filter
def test_parse_filter_splits_tokens_from_words() -> None:
    query = parse_filter("  Median cat:Coding tag:python easy foo category:math set:quick ")
    assert query.words == ["median", "foo"]
    assert query.categories == ["coding", "math"]
    assert query.tags == ["python"]
    assert query.sets == ["quick"]
    assert query.difficulty == "standard"
    assert parse_filter("hard").difficulty == "hard"
    assert parse_filter("") == ([], [], [], [], None)
    assert parse_filter("cat: tag:") == ([], [], [], [], None)  # half-typed tokens filter nothing


def test_filter_tokens_agree_with_library_select(lib: CaseLibrary) -> None:
    cases = lib.cases
    assert ids(filter_cases(cases, "")) == ids(cases)
    assert ids(filter_cases(cases, "hard")) == ids(lib.select(["hard"]))
    assert ids(filter_cases(cases, "easy")) == ids(lib.select(["easy"]))
    assert ids(filter_cases(cases, "standard")) == ids(lib.select(["easy"]))
    assert ids(filter_cases(cases, "tag:python")) == ids(lib.select(["tag:python"]))
    assert ids(filter_cases(cases, "set:quick")) == ids(lib.select(["quick"]))
    assert 0 < len(lib.select(["quick"])) < len(cases)
    coding = [c for c in cases if c.category == "coding"]
    assert 0 < len(coding) < len(cases)
    assert ids(filter_cases(cases, "cat:coding")) == ids(coding)
    assert ids(filter_cases(cases, "", category="coding")) == ids(coding)
    # AND of tokens: the intersection of what select gives for each
    both = {c.id for c in lib.select(["tag:python"])} & {c.id for c in lib.select(["hard"])} \
        & {c.id for c in coding}
    got = ids(filter_cases(cases, "cat:coding tag:python hard"))
    assert set(got) == both and 0 < len(got) < len(coding)
    assert ids(filter_cases(cases, "tag:python", category="coding", difficulty="hard")) == got
    # the cycling difficulty and a contradicting text token give nothing
    assert filter_cases(cases, "easy", difficulty="hard") == []
    assert filter_cases(cases, "cat:nosuchcategory") == []


def test_free_words_match_id_title_tags_and_prompt(lib: CaseLibrary) -> None:
    cases = lib.cases
    assert "quick.code.median" in ids(filter_cases(cases, "MEDIAN"))  # id, case-insensitive
    assert ids(filter_cases(cases, "median_of_list")) == ["quick.code.median"]  # only in the prompt
    pets = lib.by_id("quick.logic.pets")
    assert pets is not None and pets.title
    assert "quick.logic.pets" in ids(filter_cases(cases, pets.title.split()[1]))  # a title word
    assert set(ids(filter_cases(cases, "complexity"))) >= set(ids(lib.select(["tag:complexity"])))
    # every word must match (AND), in any field
    assert ids(filter_cases(cases, "median_of_list python")) == ["quick.code.median"]
    assert filter_cases(cases, "median_of_list zzzznotthere") == []
    # a precomputed index gives the same answer
    from forgetui.tui.screens.cases import search_text
    index = {c.id: search_text(c) for c in cases}
    assert ids(filter_cases(cases, "final answer hard", haystacks=index)) == \
        ids(filter_cases(cases, "final answer hard"))


# ----------------------------------------------------------------- detail text
def old_run_show_output(case: Case) -> str:
    """What ``forgetui cases show`` printed before show_text existed (kept here as the reference)."""
    out = io.StringIO()
    info = describe_case(case)
    print(f"{info['id']}  [{info['category']}, {'hard' if info['hard'] else 'easy'}]  {info['source']}", file=out)
    print(f"sets: {', '.join(info['sets'])}   tags: {', '.join(info['tags']) or '-'}   max_tokens: {info['max_tokens']}", file=out)
    for message in info["messages"]:
        print(f"\n--- {message['role']} ---\n{message['content']}", file=out)
    print("\n--- grader ---\n" + json.dumps(info["grader"], indent=2, ensure_ascii=False), file=out)
    if info["verify"]["reference"]:
        print("\n--- reference answer ---\n" + info["verify"]["reference"], file=out)
    return out.getvalue()


def test_cases_show_output_is_unchanged(lib: CaseLibrary, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(commands, "library_for_cli", lambda: lib)
    for case in lib.cases:
        out = io.StringIO()
        assert commands.run_show(out, case.id) == 0
        assert out.getvalue() == old_run_show_output(case), case.id


def test_detail_text_has_prompt_grader_reference_and_clips_long_prompts(lib: CaseLibrary) -> None:
    median = lib.by_id("quick.code.median")
    assert median is not None and median.verify.reference
    text = detail_text(median)
    assert median.title in text and "median_of_list" in text
    assert median.verify.reference.strip() in text and '"kind": "exec"' in text
    tool = next(c for c in lib.cases if c.verify.reference_calls)
    assert "--- reference tool calls ---" in detail_text(tool)
    assert json.dumps(tool.verify.reference_calls[0]["name"]) in detail_text(tool)
    long = max(lib.cases, key=lambda c: sum(len(m["content"]) for m in c.chat_messages()))
    full = long.chat_messages()[-1]["content"]
    assert len(full) > MAX_MESSAGE_CHARS
    shown = detail_text(long)
    assert "characters not shown" in shown and len(shown) < MAX_MESSAGE_CHARS + 5000
    assert full.splitlines()[0] in shown and full.splitlines()[-1] in shown  # start and end kept
    assert "characters not shown" not in commands.show_text(long)


# ------------------------------------------------------------------------ screen
async def opened(app: ForgetApp, pilot) -> CasesScreen:
    for _ in range(200):
        screen = app.screen
        if isinstance(screen, CasesScreen) and screen.library is not None:
            await pilot.pause()
            return screen
        await pilot.pause(0.05)
    raise AssertionError("the case library did not load")


def table_ids(screen: CasesScreen) -> list[str]:
    table = screen.query_one("#cases-table", DataTable)
    return [str(table.get_row_at(i)[0]) for i in range(table.row_count)]


def status(screen: CasesScreen) -> str:
    return str(screen.query_one("#cases-status", Static).content)


@pytest.mark.parametrize("size", [(80, 24), (200, 60)])
async def test_table_lists_every_case_and_layout_fits(home: Path, lib: CaseLibrary, size) -> None:
    app = ForgetApp(start_mode="cases")
    async with app.run_test(size=size) as pilot:
        screen = await opened(app, pilot)
        assert table_ids(screen) == ids(lib.cases)
        assert f"{len(lib.cases)} of {len(lib.cases)} cases" in status(screen)
        assert screen.detail_id == lib.cases[0].id
        table = screen.query_one("#cases-table", DataTable)
        pane = screen.query_one("#cases-detail-pane", VerticalScroll)
        assert table.region.height >= 3 and pane.region.height >= 3
        if size[0] >= 120:
            assert screen.has_class("-wide")
            assert pane.region.x > table.region.x and pane.region.y == table.region.y - 2
        else:
            assert screen.has_class("-narrow")
            assert pane.region.y > table.region.y and pane.region.x == 0
        # walk the table to the end (long-context cases included) and back
        await pilot.press("pagedown", "ctrl+end")
        await pilot.pause()
        assert screen.detail_id == lib.cases[-1].id
        await pilot.press("ctrl+home")
        await pilot.pause()
        assert screen.detail_id == lib.cases[0].id


async def test_typing_a_filter_narrows_the_table(home: Path, lib: CaseLibrary) -> None:
    app = ForgetApp(start_mode="cases")
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await opened(app, pilot)
        await pilot.press("slash")
        assert isinstance(app.focused, Input) and app.focused.id == "cases-filter"
        await pilot.press(*"cat:coding hard")
        await pilot.pause()
        want = {c.id for c in lib.select(["hard"])} & {c.id for c in lib.cases if c.category == "coding"}
        assert table_ids(screen) == ids(filter_cases(lib.cases, "cat:coding hard"))
        assert set(table_ids(screen)) == want and 0 < len(want) < len(lib.cases)
        assert f"{len(want)} of {len(lib.cases)} cases" in status(screen)
        assert screen.category is None  # "c" went into the box, not to the category key
        await pilot.press(*" median_of_list")
        await pilot.pause()
        assert table_ids(screen) == []
        assert "no case matches" in screen.detail_plain
        await pilot.press("enter")  # back to the table
        assert isinstance(app.focused, DataTable)


async def test_c_and_d_cycle_and_escape_clears(home: Path, lib: CaseLibrary) -> None:
    app = ForgetApp(start_mode="cases")
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await opened(app, pilot)
        present = [c for c in CATEGORIES if any(k.category == c for k in lib.cases)]
        seen = []
        for category in present:
            await pilot.press("c")
            await pilot.pause()
            assert screen.category == category
            assert table_ids(screen) == [c.id for c in lib.cases if c.category == category]
            assert f"category {category}" in status(screen)
            seen.append(category)
        await pilot.press("c")  # and round to all again
        await pilot.pause()
        assert screen.category is None and table_ids(screen) == ids(lib.cases)

        await pilot.press("d")
        await pilot.pause()
        assert screen.difficulty == "hard" and table_ids(screen) == ids(lib.select(["hard"]))
        await pilot.press("d")
        await pilot.pause()
        assert screen.difficulty == "standard" and table_ids(screen) == ids(lib.select(["easy"]))
        await pilot.press("c")
        await pilot.pause()
        assert table_ids(screen) == ids(filter_cases(lib.cases, "", present[0], "standard"))
        assert "no filters" not in status(screen)

        await pilot.press("slash", *"tag:python")
        await pilot.press("escape")
        await pilot.pause()
        assert screen.category is None and screen.difficulty is None
        assert screen.query_one("#cases-filter", Input).value == ""
        assert table_ids(screen) == ids(lib.cases)
        assert "no filters" in status(screen)
        assert isinstance(app.focused, DataTable)


async def test_cursor_moves_show_the_case_prompt_and_reference(home: Path, lib: CaseLibrary) -> None:
    app = ForgetApp(start_mode="cases")
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await opened(app, pilot)
        first = lib.cases[0]
        assert first.chat_messages()[-1]["content"].splitlines()[0] in screen.detail_plain
        await pilot.press("down", "down")
        await pilot.pause()
        case = lib.cases[2]
        assert screen.detail_id == case.id
        detail = screen.detail_plain
        assert case.id in detail
        for message in case.chat_messages():
            assert message["content"].strip()[:200] in detail
        assert case.verify.reference and case.verify.reference.strip()[:200] in detail
        assert first.id not in detail
        # the cursor stays on its case when a filter keeps it
        await pilot.press("slash", *case.id)
        await pilot.pause()
        assert table_ids(screen) == [case.id] and screen.detail_id == case.id


async def test_prompt_brackets_are_plain_text_and_user_case_dirs_load(home: Path, tmp_path: Path) -> None:
    extra = tmp_path / "mycases"
    extra.mkdir()
    (extra / "brackets.toml").write_text(textwrap.dedent('''\
        [[case]]
        id = "user.brackets"
        category = "reasoning"
        hard = true
        tags = ["markup"]
        prompt = "Say [bold]hi[/bold] then [/nonsense] and [red on]x[/]"
        [case.grader]
        kind = "exact"
        expected = "[b]"
        [case.verify]
        reference = "Answer: [b]"
        '''))
    app = ForgetApp(start_mode="cases", config=Config(case_dirs=[str(extra)]))
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await opened(app, pilot)
        assert "user.brackets" in table_ids(screen)
        await pilot.press("slash", *"tag:markup")
        await pilot.pause()
        assert table_ids(screen) == ["user.brackets"]
        assert "Say [bold]hi[/bold] then [/nonsense] and [red on]x[/]" in screen.detail_plain
        assert "Answer: [b]" in screen.detail_plain


async def test_palette_commands_filter_by_category_and_clear(home: Path, lib: CaseLibrary) -> None:
    app = ForgetApp(start_mode="cases")
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await opened(app, pilot)
        commands_ = {c.title: c for c in screen.palette_commands()}
        assert "Cases: clear filters" in commands_
        assert "Cases: filter by category math" in commands_
        commands_["Cases: filter by category math"].callback()
        await pilot.pause()
        assert screen.category == "math"
        assert table_ids(screen) == [c.id for c in lib.cases if c.category == "math"]
        commands_["Cases: clear filters"].callback()
        await pilot.pause()
        assert screen.category is None and table_ids(screen) == ids(lib.cases)
        assert "cat:coding" in CasesScreen.HELP and "tag:" in CasesScreen.HELP


async def test_a_library_of_1200_cases_filters(home: Path, lib: CaseLibrary) -> None:
    many = [c.model_copy(update={"id": f"{c.id}.v{n}"}) for n in range(18) for c in lib.cases][:1200]
    assert len(many) == 1200
    app = ForgetApp(start_mode="cases")
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await opened(app, pilot)
        screen.set_library(CaseLibrary(cases=many))
        await pilot.pause()
        assert screen.query_one("#cases-table", DataTable).row_count == 1200
        await pilot.press("slash", *"cat:math")
        await pilot.pause()
        assert table_ids(screen) == [c.id for c in many if c.category == "math"]
        assert f"{len(table_ids(screen))} of 1200 cases" in status(screen)
