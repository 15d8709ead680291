"""Command line: parse arguments, dispatch. Heavy modules are imported only by the command that needs them."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import __version__
from .errors import ExitCode, ForgetuiError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="forgetui",
        description="Benchmark language models behind OpenAI-compatible servers: speed and ability.",
    )
    parser.add_argument("--version", action="version", version=f"forgetui {__version__}")
    parser.add_argument("--run", metavar="PROFILE", type=Path, help="run a profile headless")
    _run_options(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    run = sub.add_parser("run", help="run a profile headless (same as --run)")
    run.add_argument("profile", type=Path)
    _run_options(run)

    cfg = sub.add_parser("config", help="user config: --init writes a commented template")
    cfg.add_argument("--init", action="store_true", help="write a starter config.toml")
    cfg.add_argument("--force", action="store_true", help="overwrite an existing config")

    loc = sub.add_parser("locate", help="print where forgetui keeps things")
    loc.add_argument("what", choices=["config", "runs", "themes", "data", "cache"])

    sub.add_parser("runs", help="list stored runs, newest first")

    rec = sub.add_parser("recover", help="re-run the rows of a stored run that ended empty, truncated or in "
                         "a request failure, and merge them into that run")
    rec.add_argument("run_id", metavar="RUN", help="the run id (see 'forgetui runs')")
    rec.add_argument("--allow-unsandboxed", action="store_true", help="see forgetui run --help")

    jdg = sub.add_parser("judge", help="(re)judge the judged cases of a stored run from their stored answers "
                         "(the answering model is not asked again)")
    jdg.add_argument("run_id", metavar="RUN", help="the run id (see 'forgetui runs')")
    jdg.add_argument("--judge", metavar="PROVIDER/MODEL", dest="judge_model",
                     help="judge with this model instead of the configured [judge] model")
    jdg.add_argument("--force", action="store_true", help="use the judge even if it fails calibration")

    rep = sub.add_parser("report", help="a report of stored runs: pass rates with intervals, speed, cost, "
                         "every failure and error")
    rep.add_argument("run_ids", nargs="+", metavar="RUN", help="run ids (see 'forgetui runs')")
    rep.add_argument("--format", dest="report_format", choices=["md", "json", "csv"], default="md")
    rep.add_argument("-o", "--output", type=Path, metavar="FILE", help="write here (atomically) instead of stdout")

    tui = sub.add_parser("tui", help="open the TUI (what plain `forgetui` does), optionally running a profile")
    tui.add_argument("profile", nargs="?", type=Path, help="a profile to run at once")
    tui.add_argument("--resume", metavar="RUN_ID", help="continue an interrupted run of that profile")
    tui.add_argument("--screen", choices=["models", "run", "results", "cases"], default=None,
                     help="the screen to open (default: models, or run with a profile)")
    tui.add_argument("--allow-unsandboxed", action="store_true", help="see forgetui run --help")

    demo = sub.add_parser("demo", help="run the quick profile against the embedded SmolLM2-135M model")
    demo.add_argument("--headless", action="store_true",
                      help="no TUI: progress on stderr, summary on stdout (the default when not on a terminal)")
    serve = sub.add_parser("serve-demo", help="serve the embedded demo model and print its URL")
    serve.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: a free one)")

    cases = sub.add_parser("cases", help="the case library: list, show, verify")
    cases_sub = cases.add_subparsers(dest="cases_command", metavar="ACTION", required=True)
    clist = cases_sub.add_parser("list", help="list cases")
    clist.add_argument("--category")
    clist.add_argument("--hard", action="store_true")
    cshow = cases_sub.add_parser("show", help="one case: prompt, grader, reference")
    cshow.add_argument("case_id")
    cverify = cases_sub.add_parser("verify", help="prove every case right (references pass, wrong answers fail)")
    cverify.add_argument("select", nargs="*", help="sets, categories, tags or ids (default: all)")

    sandbox = sub.add_parser("sandbox", help="the bubblewrap sandbox that runs model-written code")
    sandbox.add_argument("action", choices=["check"], help="check: what works and what does not, with fixes")

    sub.add_parser("status", help="providers up or down, sandbox, cases, where things live")
    sub.add_parser("models", help="every model of every configured provider, with its facts")

    cmp_ = sub.add_parser("compare", help="model A against model B: McNemar verdict, flipped cases, speed "
                          "(two runs, or --model-a/--model-b of one run)")
    cmp_.add_argument("compare_runs", nargs="+", metavar="RUN", help="RUN_A RUN_B, or one RUN")
    cmp_.add_argument("--model-a", metavar="MODEL")
    cmp_.add_argument("--model-b", metavar="MODEL")
    cmp_.add_argument("--json", dest="as_json", action="store_true", help="print the comparison as JSON")
    recm = sub.add_parser("recommend", help="rank the models of stored runs for a job, with speed and "
                          "the trade-off (--job weights: the job table)")
    recm.add_argument("recommend_runs", nargs="*", metavar="RUN")
    recm.add_argument("--job", default="general", help="coding, tools, agent, long-context, instructions, "
                      "reasoning, math, injection, chat, general (default), or weights")
    recm.add_argument("--json", dest="as_json", action="store_true", help="print the ranking as JSON")

    bench = sub.add_parser("bench", help="ad-hoc benchmark of one model, without a profile file")
    bench.add_argument("target", help="PROVIDER/MODEL, the provider from your config")
    bench.add_argument("--quick", action="store_true", help="fewer, shorter requests")
    bench.add_argument("--speed-only", action="store_true", help="speed benchmark only, no cases")
    bench.add_argument("--cases", metavar="SET", help="case sets to run, comma-separated (default: quick)")
    bench.add_argument("--json-out", metavar="FILE", type=Path)
    bench.add_argument("--allow-unsandboxed", action="store_true", help="see forgetui run --help")
    return parser


def _run_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--resume", metavar="RUN_ID", help="continue an interrupted run")
    parser.add_argument("--allow-unsandboxed", action="store_true",
                        help="run code cases with rlimits only when bubblewrap is unusable "
                             "(every such result is marked unsandboxed)")
    parser.add_argument("--json-out", metavar="FILE", type=Path, help="also write the whole run as one JSON file")


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``forgetui`` command; returns (and exits with) an ExitCode."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code = _dispatch(parser, args)
    except ForgetuiError as exc:
        print(f"forgetui: {exc.message}", file=sys.stderr)
        code = int(exc.exit_code)
    except KeyboardInterrupt:
        code = int(ExitCode.INTERRUPTED)
    if argv is None:
        sys.exit(code)
    return code


def _dispatch(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    profile = args.run if args.command is None else getattr(args, "profile", None)
    if args.command == "run" or (args.command is None and args.run is not None):
        from .headless import run_headless

        return run_headless(profile, resume=args.resume, json_out=args.json_out,
                            allow_unsandboxed=args.allow_unsandboxed)
    if args.command == "config":
        return _config(args)
    if args.command == "locate":
        return _locate(args.what)
    if args.command == "runs":
        return _runs()
    if args.command == "recover":
        from .recover_cmd import run_recover

        return run_recover(args.run_id, allow_unsandboxed=args.allow_unsandboxed)
    if args.command == "report":
        from .report_cmd import run_report

        return run_report(args.run_ids, args.report_format, args.output)
    if args.command == "judge":
        from .judge_cmd import run_judge_command

        return run_judge_command(args.run_id, judge_model=args.judge_model, force=args.force)
    if args.command == "demo":
        from .demo_cmd import run_demo

        return run_demo(headless=args.headless or not _on_terminal())
    if args.command == "tui":
        return run_tui(args.profile, resume=args.resume, screen=args.screen,
                       allow_unsandboxed=args.allow_unsandboxed)
    if args.command == "serve-demo":
        from .demo_cmd import serve_demo

        return serve_demo(args.port)
    if args.command == "cases":
        from .cases import commands

        if args.cases_command == "list":
            return commands.run_list(sys.stdout, args.category, args.hard)
        if args.cases_command == "show":
            return commands.run_show(sys.stdout, args.case_id)
        return commands.run_verify(sys.stdout, args.select)
    if args.command == "sandbox":
        from .sandbox import check_report

        code, text = check_report()
        print(text)
        return code
    if args.command == "status":
        from .status import run_status

        return run_status(sys.stdout)
    if args.command == "models":
        from .status import run_models

        return run_models(sys.stdout)
    if args.command in ("compare", "recommend"):
        from .compare_cmd import run_compare, run_recommend

        if args.command == "compare":
            return run_compare(args.compare_runs, args.model_a, args.model_b, as_json=args.as_json)
        return run_recommend(args.recommend_runs, args.job, as_json=args.as_json)
    if args.command == "bench":
        from .demo_cmd import run_bench

        return run_bench(args.target, quick=args.quick, cases=args.cases, json_out=args.json_out,
                         speed_only=args.speed_only, allow_unsandboxed=args.allow_unsandboxed)
    if _on_terminal():
        return run_tui()
    parser.print_help(sys.stderr)
    print("\nforgetui: no terminal here for the TUI; use 'forgetui --run PROFILE' for a headless run.",
          file=sys.stderr)
    return int(ExitCode.USAGE)


def _on_terminal() -> bool:
    return sys.stdin.isatty() and sys.stdout.isatty()


def run_tui(profile: Path | None = None, resume: str | None = None, screen: str | None = None,
            allow_unsandboxed: bool = False) -> int:
    """Open the Textual app. Refresh and animation defaults are set before Textual is imported,
    because Textual reads them at import time."""
    import os

    ssh = bool(os.environ.get("SSH_CONNECTION") or os.environ.get("SSH_TTY"))
    # Frames per second cap: Textual's default 60 is more than a terminal over SSH needs.
    os.environ.setdefault("TEXTUAL_FPS", "15" if ssh else "30")
    if ssh:
        os.environ.setdefault("TEXTUAL_ANIMATIONS", "none")
    if profile is not None and not profile.is_file():
        raise ForgetuiError(f"{profile}: file not found")
    from .tui.app import ForgetApp

    app = ForgetApp(start_mode=screen or ("run" if profile else "models"), profile_path=profile,
                    resume=resume, allow_unsandboxed=allow_unsandboxed)
    app.run()
    return int(app.return_code or 0)


def _config(args: argparse.Namespace) -> int:
    from .config import config_template, load_config
    from .paths import locations
    from .store import atomic_write_bytes

    path = locations().config_file
    if not args.init:
        load_config(path)  # validates; raises with file and line on problems
        print(f"{path}: {'ok' if path.exists() else 'not created yet (forgetui config --init)'}")
        return int(ExitCode.OK)
    if path.exists() and not args.force:
        raise ForgetuiError(f"{path} exists; use --force to overwrite it")
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, config_template().encode())
    print(f"Wrote {path}")
    return int(ExitCode.OK)


def _locate(what: str) -> int:
    from .paths import locations

    loc = locations()
    print({
        "config": loc.config_file,
        "runs": loc.runs_dir,
        "themes": loc.themes_dir,
        "data": loc.data_dir,
        "cache": loc.cache_dir,
    }[what])
    return int(ExitCode.OK)


def _runs() -> int:
    from .paths import locations
    from .store import RunStore

    runs = RunStore(locations().runs_dir).list_runs()
    if not runs:
        print("No runs yet.")
    for doc in runs:
        totals = doc.get("totals", {})
        print(f"{doc.get('run_id')}  {doc.get('status', '?'):<11}  {doc.get('created_at', '')}  "
              f"{totals.get('ok', 0)}/{totals.get('requests', 0)} ok  {doc.get('name', '')}")
    return int(ExitCode.OK)
