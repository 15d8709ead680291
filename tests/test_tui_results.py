"""The Results screen (stored runs, one run's summary, marking) and the Compare screen, via Pilot.

The runs are made once per module by the real headless path against the loopback fake server:
``alpha`` (one model that fails every quick case), ``beta`` (two models; ``fake/n`` answers the
JSON case correctly, ``fake/p`` does not) and ``gamma`` (one model, one case).
"""

from __future__ import annotations

import io
import json
import re
import shutil
import sys
import types
from pathlib import Path

import pytest
from textual.screen import Screen

from forgetui.headless import run_headless
from forgetui.paths import locations
from forgetui.report.compare import compare_models
from forgetui.report.stats import interval_text, rate_text
from forgetui.store import RunStore
from forgetui.tui.app import ForgetApp
from forgetui.tui.screens.compare import CompareScreen
from forgetui.tui.screens.results import DocsLoaded, ResultsScreen
from tests.conftest import profile_text
from tests.fakeserver import FakeServer, Script
from tests.tui_helpers import wait_until

JSON_ANSWER = ('{"title": "The Salt Cartographers", "authors": ["Ines Varga", "Tobias Lund"], '
               '"year": 2017, "pages": 344, "available": false}')
SIZES = [(80, 24), (200, 60)]


@pytest.fixture(scope="module")
def made_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    """name -> run.json of three runs made by ``run_headless``; their directories under ``root``."""
    root = tmp_path_factory.mktemp("results-home")
    scripts = {"m": Script(gap_s=0.001), "p": Script(gap_s=0.001),
               "n": Script(gap_s=0.001, answers={"THE SALT CARTOGRAPHERS": JSON_ANSWER})}
    plan = (("alpha", ["fake/m"], '["quick"]'), ("beta", ["fake/n", "fake/p"], '["quick"]'),
            ("gamma", ["fake/m"], '["quick.json.record"]'))
    with pytest.MonkeyPatch.context() as mp, FakeServer(scripts=scripts, max_lifetime_s=120) as server:
        mp.setenv("FORGETUI_HOME", str(root))
        for name, targets, select in plan:
            profile = root / f"{name}.toml"
            profile.write_text(profile_text(server.base_url, targets, name=name,
                                            extra=f"[cases]\nselect = {select}"))
            code = run_headless(profile, stdout=io.StringIO(), stderr=io.StringIO())
            assert code in (0, 1), f"headless run {name} failed with {code}"
        docs = {d["name"]: d for d in RunStore(locations().runs_dir).list_runs()}
    assert set(docs) == {"alpha", "beta", "gamma"}
    docs["_root"] = {"runs_dir": str(root / "data" / "runs")}
    return docs


@pytest.fixture
def runs(home: Path, made_runs: dict[str, dict]) -> dict[str, dict]:
    """The module's runs, copied into this test's FORGETUI_HOME."""
    shutil.copytree(made_runs["_root"]["runs_dir"], locations().runs_dir)
    return {k: v for k, v in made_runs.items() if not k.startswith("_")}


async def _listed(app: ForgetApp, pilot, rows: int | None = None) -> ResultsScreen:
    """Wait until the Results screen has listed the runs (and has ``rows`` rows, if given)."""
    for _ in range(200):
        await pilot.pause(0.02)
        screen = app.screen
        if isinstance(screen, ResultsScreen) and screen._listed_at > float("-inf") and not screen._listing:
            if rows is None or screen.table.row_count == rows:
                return screen
    raise AssertionError("the run list never loaded")


async def _detail_shows(screen: ResultsScreen, pilot, run_id: str) -> str:
    for _ in range(200):
        await pilot.pause(0.02)
        if screen.shown == run_id and run_id in screen.detail_text():
            return screen.detail_text()
    raise AssertionError(f"the detail pane never showed {run_id}: {screen.detail_text()[:200]!r}")


async def _screen_of(app: ForgetApp, pilot, kind: type) -> Screen:
    for _ in range(200):
        await pilot.pause(0.02)
        if isinstance(app.screen, kind):
            return app.screen
    raise AssertionError(f"{kind.__name__} never showed; the screen is {type(app.screen).__name__}")


async def _go_to(screen: ResultsScreen, pilot, run_id: str) -> None:
    delta = screen.table.get_row_index(run_id) - screen.table.cursor_row
    screen.table.focus()
    for _ in range(abs(delta)):
        await pilot.press("down" if delta > 0 else "up")
    assert screen.current_run_id() == run_id


@pytest.mark.parametrize("size", SIZES)
async def test_no_runs_says_so(home: Path, size: tuple[int, int]) -> None:
    app = ForgetApp(start_mode="results")
    async with app.run_test(size=size) as pilot:
        screen = await _listed(app, pilot)
        assert screen.table.row_count == 0
        assert "No runs yet" in str(screen.query_one("#runs-status").content)
        assert "No runs are stored yet" in screen.detail_text()
        await pilot.press("c")  # nothing to compare: a warning, no screen
        await pilot.pause()
        assert app.screen is screen
        assert any("Nothing to compare" in (n.title or "") for n in app._notifications)


@pytest.mark.parametrize("size", SIZES)
async def test_runs_newest_first_and_the_highlighted_run_summary(runs: dict[str, dict], size) -> None:
    expected_order = [runs[n]["run_id"] for n in ("gamma", "beta", "alpha")]
    assert expected_order == [d["run_id"] for d in RunStore(locations().runs_dir).list_runs()]
    app = ForgetApp(start_mode="results")
    async with app.run_test(size=size) as pilot:
        screen = await _listed(app, pilot, rows=3)
        table = screen.table
        assert [row.value for row in table.rows] == expected_order
        assert table.get_row_at(0)[2] == "gamma" and table.get_row_at(1)[3] == "complete"
        assert table.get_row_at(1)[4] == "fake/n +1"
        alpha_cases = runs["alpha"]["models"][0]["cases_summary"]
        assert table.get_row_at(2)[5] == f"{alpha_cases['passed']}/{alpha_cases['total'] - alpha_cases['passed']}/0"
        assert "3 runs" in str(screen.query_one("#runs-status").content)
        # The newest run is shown at once; moving the cursor shows the next one.
        await _detail_shows(screen, pilot, runs["gamma"]["run_id"])
        await _go_to(screen, pilot, runs["beta"]["run_id"])
        text = await _detail_shows(screen, pilot, runs["beta"]["run_id"])
        beta = runs["beta"]
        assert "profile: beta" in text and f"case set: {beta['fingerprint']['case_set_revision']}" in text
        assert f"requests: {beta['totals']['ok']}/{beta['totals']['requests']} ok" in text
        for model in beta["models"]:
            assert f"== {model['model']} " in text
            section = text.split(f"== {model['model']} ", 1)[1].split("\n== ", 1)[0]
            for cat, c in model["cases_summary"]["by_category"].items():
                # As `forgetui report` shows it: pass / (pass + fail), its Wilson interval, errors apart.
                rate = re.escape(rate_text(c["pass"], c["pass"] + c["fail"]))
                interval = re.escape(interval_text(c["pass"], c["pass"] + c["fail"]))
                pattern = rf"^{cat}\s+{rate}\s+{interval}\s+{c['error']}\s+{c['skipped']}$"
                assert re.search(pattern, section, re.M), (pattern, section)
            decode = model["speed"]["prompts"][0]["summary"]["decode_tps"]["median"]
            assert re.search(rf"^short\s+2/2\s+.*{decode:.1f}", section, re.M), section
        # fake/n passed the JSON case, fake/p failed it with a reason.
        assert re.search(r"^  \[instruct\] quick.json.record: \S", text.split("== fake/p ", 1)[1], re.M)
        assert "quick.json.record" not in text.split("== fake/n ", 1)[1].split("== fake/p ", 1)[0]
        # Side by side when wide, stacked when narrow.
        runs_pane, detail = screen.query_one("#runs-pane"), screen.query_one("#detail-pane")
        if size[0] >= 120:
            assert detail.region.x > runs_pane.region.right - 1 and detail.region.y == runs_pane.region.y
        else:
            assert detail.region.y >= runs_pane.region.bottom and detail.region.x == runs_pane.region.x
        assert detail.region.height >= 5
        # enter focuses the summary, to scroll it.
        table.focus()
        await pilot.press("enter")
        assert app.focused is detail


@pytest.mark.parametrize("size", SIZES)
async def test_mark_two_runs_and_compare(runs: dict[str, dict], size) -> None:
    alpha, beta = runs["alpha"], runs["beta"]
    app = ForgetApp(start_mode="results")
    async with app.run_test(size=size) as pilot:
        screen = await _listed(app, pilot, rows=3)
        await _go_to(screen, pilot, alpha["run_id"])
        await pilot.press("space")
        await _go_to(screen, pilot, beta["run_id"])
        await pilot.press("space")
        assert screen.marked == [alpha["run_id"], beta["run_id"]]
        assert screen.table.get_cell(alpha["run_id"], "mark") == "A"
        assert screen.table.get_cell(beta["run_id"], "mark") == "B"
        await pilot.press("c")
        compare = await _screen_of(app, pilot, CompareScreen)
        # No model label in common: each run's first model, fake/m (all fail) against fake/n.
        expected = compare_models(alpha, "fake/m", beta, "fake/n")["differing"]
        assert [d["case_id"] for d in expected] == ["quick.json.record"]
        text = compare.text()
        assert re.search(rf"^A: fake/m .*run {alpha['run_id']}$", text, re.M), text
        assert re.search(rf"^B: fake/n .*run {beta['run_id']}$", text, re.M), text
        assert re.search(r"^quick\.json\.record\s+instruct\s+fail\s+pass$", text, re.M), text
        assert "1 case differ" in text and "WARNING" not in text
        assert re.search(r"^instruct\s+0/3\s+0%\s+1/3\s+33%$", text, re.M), text
        assert re.search(r"^all\s+\S+\s+\S+\s+\S+x\s+\S+s\s+\S+s\s+\S+x$", text, re.M), text
        await pilot.press("escape")
        assert await _screen_of(app, pilot, ResultsScreen) is screen
        # Unmarking works, and a third mark drops the oldest.
        await _go_to(screen, pilot, runs["gamma"]["run_id"])
        await pilot.press("space")
        assert screen.marked == [beta["run_id"], runs["gamma"]["run_id"]]
        assert screen.table.get_cell(alpha["run_id"], "mark") == ""
        assert screen.table.get_cell(beta["run_id"], "mark") == "A"


async def test_compare_two_models_of_one_run(runs: dict[str, dict]) -> None:
    beta = runs["beta"]
    app = ForgetApp(start_mode="results")
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await _listed(app, pilot, rows=3)
        await _go_to(screen, pilot, runs["gamma"]["run_id"])
        await pilot.press("c")  # gamma has one model and nothing is marked
        await pilot.pause()
        assert app.screen is screen
        await _go_to(screen, pilot, beta["run_id"])
        await pilot.press("c")
        compare = await _screen_of(app, pilot, CompareScreen)
        assert compare.result["a"]["model"] == "fake/n" and compare.result["b"]["model"] == "fake/p"
        assert re.search(r"^quick\.json\.record\s+instruct\s+pass\s+fail$", compare.text(), re.M)
        await pilot.press("escape")
        await _screen_of(app, pilot, ResultsScreen)


async def test_failures_opens_the_inspector_with_the_full_run(runs, monkeypatch) -> None:
    opened: list[dict] = []

    class FakeFailures(Screen):
        def __init__(self, doc: dict) -> None:
            super().__init__()
            opened.append(doc)

    module = types.ModuleType("forgetui.tui.screens.failures")
    module.FailuresScreen = FakeFailures  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "forgetui.tui.screens.failures", module)
    app = ForgetApp(start_mode="results")
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await _listed(app, pilot, rows=3)
        await _go_to(screen, pilot, runs["alpha"]["run_id"])
        await pilot.press("f")
        await _screen_of(app, pilot, FakeFailures)
        assert opened[0]["run_id"] == runs["alpha"]["run_id"]
        assert opened[0]["models"][0]["cases"][0]["response"] is not None  # the full run.json
        app.pop_screen()
        await pilot.pause()
        # Without the inspector module the key says so instead of failing.
        monkeypatch.setitem(sys.modules, "forgetui.tui.screens.failures", None)
        await pilot.press("f")
        await pilot.pause()
        assert app.screen is screen and len(opened) == 1
        assert any("failure inspector is not available" in n.message for n in app._notifications)


async def test_refresh_and_resume_pick_up_new_runs(runs: dict[str, dict]) -> None:
    store = RunStore(locations().runs_dir)
    app = ForgetApp(start_mode="results")
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await _listed(app, pilot, rows=3)
        with store.create("29990101-000000-late-0001") as handle:
            handle.write_run_json({"run_id": "29990101-000000-late-0001", "name": "late", "status": "running",
                                   "created_at": "2999-01-01T00:00:00+00:00", "models": []})
        await pilot.press("f5")
        await _listed(app, pilot, rows=4)
        assert screen.table.get_row_at(0)[2] == "late"
        # Coming back to the screen re-lists (after a short debounce).
        with store.create("29990102-000000-later-0002") as handle:
            handle.write_run_json({"run_id": "29990102-000000-later-0002", "name": "later", "status": "running",
                                   "created_at": "2999-01-02T00:00:00+00:00", "models": []})
        screen._listed_at -= 10  # as if the last listing were a while ago
        await app.push_screen(Screen())
        app.pop_screen()
        await _listed(app, pilot, rows=5)
        assert screen.table.get_row_at(0)[2] == "later"


async def test_a_late_answer_for_another_run_is_dropped(runs: dict[str, dict]) -> None:
    app = ForgetApp(start_mode="results")
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await _listed(app, pilot, rows=3)
        gamma = runs["gamma"]["run_id"]
        await _detail_shows(screen, pilot, gamma)
        stale = dict(runs["alpha"], name="STALE")
        screen.post_message(DocsLoaded("detail", [runs["alpha"]["run_id"]], {runs["alpha"]["run_id"]: stale}, None))
        await pilot.pause()
        assert screen.shown == gamma and "STALE" not in screen.detail_text()


def test_made_runs_are_real(made_runs: dict[str, dict]) -> None:
    """The fixture's runs have what the tests above rely on (so a change there fails loudly here)."""
    beta = made_runs["beta"]
    statuses = {m["model"]: {c["case_id"]: c["status"] for c in m["cases"]} for m in beta["models"]}
    assert statuses["fake/n"]["quick.json.record"] == "pass"
    assert statuses["fake/p"]["quick.json.record"] == "fail"
    assert json.loads(json.dumps(made_runs["gamma"]))["models"][0]["cases_summary"]["total"] == 1


async def test_compare_header_warns_about_different_case_sets(home: Path, made_runs: dict[str, dict]) -> None:
    alpha = made_runs["alpha"]
    other = json.loads(json.dumps(made_runs["beta"]))
    other["fingerprint"]["case_set_revision"] = "0000older0000"
    app = ForgetApp(start_mode="results")
    async with app.run_test(size=(80, 24)) as pilot:
        await _listed(app, pilot)
        await app.push_screen(CompareScreen(alpha, "fake/m", other, "fake/p"))
        compare = await _screen_of(app, pilot, CompareScreen)
        header = compare.query_one("#compare-header")
        assert header.has_class("-warn")
        revision = alpha["fingerprint"]["case_set_revision"]
        assert f"WARNING: different case-set revisions ({revision} vs 0000older0000)" in compare.text()
        await pilot.press("f1")  # the help screen knows this screen's keys
        await pilot.pause()
        assert "compare.back" in app.screen.text()
        await pilot.press("escape")
        await pilot.pause()
        await pilot.press("escape")
        assert await _screen_of(app, pilot, ResultsScreen)


def test_chart_points_take_each_models_newest_run_and_skip_incomplete_ones() -> None:
    from forgetui.tui.screens.chart import chart_points

    def model(label, passed, failed, tps):
        return {"model": label, "cases_summary": {"passed": passed, "failed": failed, "errors": 3},
                "speed": {"decode_tps": tps} if tps else None}

    newest = {"run_id": "new", "models": [model("a", 3, 1, 50.0), model("b", 0, 0, 80.0)]}
    older = {"run_id": "old", "models": [model("a", 1, 3, 40.0), model("c", 1, 1, None), model("d", 1, 0, 10.0)]}
    points, notes = chart_points([newest, older])
    assert {(p.label, p.speed, p.score) for p in points} == {("a", 50.0, 0.75), ("d", 10.0, 1.0)}
    assert notes["a"] == "75% (3/4) [30%, 95%], run new"  # errors left out of the rate


@pytest.fixture
def chart_run(home, fake, write_profile) -> None:
    """One stored run of two models with speed and two quick cases (the fake fails both)."""
    server = fake({"fast": Script(gap_s=0.001), "slow": Script(gap_s=0.004)})
    path = write_profile(profile_text(server.base_url, ["fake/fast", "fake/slow"], repeats=1, max_tokens=16,
                                      extra='[cases]\nselect = ["quick.json.record", "quick.logic.pets"]'))
    run_headless(path, stdout=io.StringIO(), stderr=io.StringIO())


async def test_chart_screen_opens_from_results(chart_run) -> None:
    from forgetui.tui.screens.chart import ChartScreen

    app = ForgetApp(start_mode="results")
    async with app.run_test(size=(100, 40)) as pilot:
        await wait_until(pilot, lambda: app.screen.summaries, what="runs listed")
        await pilot.press("g")
        await wait_until(pilot, lambda: isinstance(app.screen, ChartScreen), what="chart")
        screen = app.screen
        assert {p.label for p in screen.points} == {"fake/fast", "fake/slow"}
        text = str(screen.query_one("#chart").render())
        assert "fake/fast: 0% at" in text and "fake/slow: 0% at" in text and "0% (0/2)" in text
        await pilot.press("escape")
        await wait_until(pilot, lambda: not isinstance(app.screen, ChartScreen), what="back")
