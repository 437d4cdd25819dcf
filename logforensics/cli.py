"""Command line: argument parsing, output files and exit codes only.

Exit codes (documented in the README):
  0  analysis written
  1  unexpected internal error (a bug: please report it with the traceback)
  2  bad input: a named path missing or unreadable, or nothing recognisable
     (the analysis of the other inputs is still written)
  3  a --fail-on condition held (only when the inputs were fine: 2 wins)
"""

from __future__ import annotations

import datetime as dt
import sys
import time
from pathlib import Path

import click

from logforensics import __version__
from logforensics.analysis import SPILL_SHARE, Options, analyze
from logforensics.diagnose import Thresholds
from logforensics.diagnose.thresholds import option_name, threshold_fields
from logforensics.gates import evaluate, parse_condition
from logforensics.ingest import InputError
from logforensics.redact import redact as redact_analysis
from logforensics.tables import TablesError

EXIT_OK, EXIT_BAD_INPUT, EXIT_GATE = 0, 2, 3


def _utc(value: str | None, option: str) -> dt.datetime | None:
    if value is None:
        return None
    try:
        moment = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as exc:
        raise click.BadParameter(f"not an ISO 8601 time: {value!r}", param_hint=option) from exc
    if moment.tzinfo is None:
        raise click.BadParameter(f"give a zone, e.g. {value}Z or {value}+09:00", param_hint=option)
    return moment.astimezone(dt.timezone.utc)


class Progress:
    """Files read, lines, rate on stderr: only on a terminal, only after two seconds."""

    DELAY_S = 2.0

    def __init__(self, stream=None):
        self.stream = stream or sys.stderr
        self.started = time.monotonic()
        self.shown = False

    def __call__(self, done: int, total: int, lines: int) -> None:
        elapsed = time.monotonic() - self.started
        if not self.stream.isatty() or elapsed < self.DELAY_S:
            return
        rate = lines / elapsed if elapsed else 0
        end = "\n" if done == total else ""
        self.stream.write(
            f"\rread {done}/{total} files · {lines:,} lines · {rate:,.0f} lines/s{end}"
        )
        self.stream.flush()
        self.shown = True


def _conditions(values: tuple[str, ...]) -> list:
    try:
        return [parse_condition(v) for v in values]
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--fail-on") from exc


def _split_pairs(values: tuple[str, ...], option: str, shape: str) -> list[tuple[str, str]]:
    """`LEFT=RIGHT` option values; a malformed one is a usage error."""
    out = []
    for value in values:
        left, sep, right = value.partition("=")
        if not sep or not left or not right:
            raise click.BadParameter(f"expected {shape}, got {value!r}", param_hint=option)
        out.append((left, right))
    return out


def _ledger_path(value: Path | None) -> Path | None:
    from logforensics.report.ledger import LEDGER_FORMATS

    if value is not None and value.suffix.lower() not in LEDGER_FORMATS:
        raise click.BadParameter(
            f"{value}: name a {', '.join(LEDGER_FORMATS)} file", param_hint="--ledger"
        )
    return value


def _pairs(values: tuple[str, ...], option: str) -> dict[str, str]:
    return dict(_split_pairs(values, option, "ADDR=NAME"))


def _parse_instance(values: tuple[str, ...]) -> dict[Path, str]:
    # keyed by path: one instance may own several (rotated) files
    return {Path(path): name for name, path in _split_pairs(values, "--instance", "NAME=PATH")}


def _instance_labels(values: tuple[str, ...]) -> dict[str, str]:
    """--instance NAME=LABEL where LABEL is no file: a metrics label (pod, address) → NAME."""
    pairs = _split_pairs(values, "--instance", "NAME=PATH or NAME=LABEL")
    return {label: name for name, label in pairs if not Path(label).exists()}


def reading_options(command):
    """The options that say how to read the files' own clocks (`analyze` and `ingest` alike)."""
    options = (
        click.option(
            "--year",
            type=int,
            help="Year for yearless vLLM stamps (default: from a dated source, else this year).",
        ),
        click.option(
            "--server-tz", default="UTC", show_default=True, help="Zone of the servers' own stamps."
        ),
        click.option(
            "--client-tz", default="UTC", show_default=True, help="Zone of naive client timestamps."
        ),
        click.option(
            "--started-at",
            "started_at",
            callback=lambda ctx, param, value: _utc(value, "--started-at"),
            help="Wall time (ISO 8601) of the first request, for client files timed on a counter.",
        ),
        click.option(
            "--scraped-at",
            "scraped_at",
            callback=lambda ctx, param, value: _utc(value, "--scraped-at"),
            help="When a single saved /metrics snapshot was taken (ISO 8601), if the file does "
            "not say.",
        ),
    )
    for option in reversed(options):
        command = option(command)
    return command


def threshold_options(command):
    """One option a `Thresholds` field (`--kv-full-pct` for `kv_full_pct`), its help and
    default taken from the field: a new threshold is an option without touching this file."""
    for f in reversed(threshold_fields()):
        command = click.option(
            option_name(f.name),
            f.name,
            type=float,
            default=f.default,
            show_default=True,
            help=f.metadata["help"],
        )(command)
    return command


@click.group()
@click.version_option(__version__, prog_name="logforensics")
def cli() -> None:
    """Post-mortem of a failed LLM load test, from the logs you already have."""


@cli.command("analyze")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option(
    "-o", "--html", "html_out", type=click.Path(path_type=Path), help="Write the HTML report here."
)
@click.option(
    "--json",
    "json_out",
    type=click.Path(path_type=Path),
    help="Write the JSON report here ('-' for stdout).",
)
@click.option(
    "--md", "md_out", type=click.Path(path_type=Path), help="Write the Markdown summary here."
)
@click.option(
    "--ledger",
    "ledger_out",
    type=click.Path(path_type=Path),
    callback=lambda ctx, param, value: _ledger_path(value),
    help="Write every request's hop ledger here: .parquet, .csv or .jsonl.",
)
@click.option(
    "--instance",
    "instances",
    multiple=True,
    metavar="NAME=PATH|LABEL",
    help="Name the instance a log belongs to (default: the file's name), or the instance a "
    "Prometheus series' pod or instance label describes.",
)
@click.option(
    "--prometheus",
    "prometheus_url",
    metavar="URL",
    help="Read the engine metrics of the test window from this Prometheus server "
    "(e.g. http://prometheus:9090).",
)
@click.option(
    "--from",
    "prometheus_from",
    callback=lambda ctx, param, value: _utc(value, "--from"),
    help="Start of the window asked of --prometheus (ISO 8601; default: the client files' "
    "first request, less 2 minutes).",
)
@click.option(
    "--to",
    "prometheus_to",
    callback=lambda ctx, param, value: _utc(value, "--to"),
    help="End of that window (default: the client files' last request, plus 2 minutes).",
)
@click.option(
    "--upstream",
    "upstreams",
    multiple=True,
    metavar="ADDR=NAME",
    help="Say which instance a proxy's upstream address is (default: judged by timing).",
)
@reading_options
@click.option(
    "--offset", "offset_s", type=float, help="Force the client→server clock offset, in seconds."
)
@threshold_options
@click.option(
    "--redact",
    is_flag=True,
    help="Replace prompts, request ids and client addresses with stable placeholders.",
)
@click.option(
    "--fail-on",
    "fail_on",
    multiple=True,
    metavar="CONDITION",
    callback=lambda ctx, param, values: _conditions(values),
    help="Exit 3 when a condition holds, e.g. 'unreached>0', 'success<0.99', 'p95>5s', 'bottleneck!=none'.",
)
@click.option(
    "--cache",
    "cache_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Keep parsed tables as Parquet here; a re-run with other options skips parsing.",
)
@click.option(
    "--tables",
    "tables_dirs",
    multiple=True,
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    help="Analyse these datasets (written by `logforensics ingest --tables`) instead of PATHS; "
    "repeat for several.",
)
@click.option(
    "--spill/--no-spill",
    default=None,
    help="Parse file by file into a dataset in a temporary folder and analyse from it, "
    "holding a few files' tables while parsing, not all (default: when the input is over "
    f"{round(SPILL_SHARE * 100)}% of this machine's memory).",
)
@click.option("-q", "--quiet", is_flag=True, help="No progress display on stderr.")
def analyze_command(
    paths,
    html_out,
    json_out,
    md_out,
    ledger_out,
    instances,
    prometheus_url,
    prometheus_from,
    prometheus_to,
    upstreams,
    year,
    server_tz,
    client_tz,
    started_at,
    scraped_at,
    offset_s,
    redact,
    fail_on,
    cache_dir,
    tables_dirs,
    spill,
    quiet,
    **thresholds,
) -> None:
    """Analyse logs (files or folders, .gz too) and write the reports.

    Every file's format is sniffed; the verdict is printed in one line. With
    --tables, the datasets `logforensics ingest` wrote are analysed instead.
    """
    if bool(paths) == bool(tables_dirs):
        raise click.UsageError("give PATHS or --tables DIR (one or the other)")
    from logforensics.report import RENDERERS, build_report
    from logforensics.report.jsonout import contract
    from logforensics.report.ledger import build_ledger, write_ledger

    options = Options(
        year=year,
        server_tz=server_tz,
        client_tz=client_tz,
        offset_s=offset_s,
        client_anchor=started_at,
        scraped_at=scraped_at,
        instance_names=_parse_instance(instances),
        instance_labels=_instance_labels(instances),
        prometheus_url=prometheus_url,
        prometheus_from=prometheus_from,
        prometheus_to=prometheus_to,
        upstreams=_pairs(upstreams, "--upstream"),
        cache_dir=cache_dir,
        tables=list(tables_dirs),
        spill=spill,
        progress=None if quiet else Progress(),
        thresholds=Thresholds(**thresholds),
    )
    try:
        analysis = analyze(list(paths), options)
    except (InputError, TablesError) as exc:
        click.echo(f"logforensics: error: {exc}", err=True)
        sys.exit(EXIT_BAD_INPUT)
    if redact:
        analysis = redact_analysis(analysis)
    for error in analysis.errors:
        click.echo(f"logforensics: error: {error}", err=True)
    usable = [f for f in analysis.inputs if f.format]
    if not usable:
        click.echo("logforensics: error: nothing recognisable in the inputs", err=True)
        sys.exit(EXIT_BAD_INPUT)
    ledger = build_ledger(analysis) if ledger_out else None
    if ledger_out:
        write_ledger(ledger, ledger_out)
        click.echo(f"wrote {ledger_out}", err=True)
    targets = {"html": html_out, "json": json_out, "md": md_out}
    report = (
        build_report(analysis, ledger, str(ledger_out) if ledger_out else None)
        if any(targets.values())
        else None
    )
    if report is not None:
        write_outputs(RENDERERS, targets, report)
    v = analysis.verdict
    t = analysis.totals()
    click.echo(
        f"verdict: {v.bottleneck.value} (confidence {v.confidence:.2f}) — "
        f"{t['sent']} sent, {t['succeeded']} ok, {t['failed']} failed, {t['unreached']} never reached an instance",
        err=_to_stdout(html_out, json_out, md_out),
    )
    if analysis.errors:  # unreliable inputs outrank a gate's result
        sys.exit(EXIT_BAD_INPUT)
    if fail_on and report is None:
        report = build_report(analysis, ledger, str(ledger_out) if ledger_out else None)
    held = evaluate(fail_on, contract(report.summary)) if fail_on else []
    for condition in held:
        click.echo(f"logforensics: fail-on: {condition}", err=True)
    sys.exit(EXIT_GATE if held else EXIT_OK)


def _gates(values: tuple[str, ...]) -> list[str]:
    from logforensics.compare import parse_gate

    try:
        for v in values:
            parse_gate(v)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from exc
    return list(values)


@cli.command("compare")
@click.argument("runs", nargs=-1, type=click.Path(exists=True, path_type=Path))
@click.option(
    "--baseline",
    "baselines",
    multiple=True,
    type=click.Path(exists=True, path_type=Path),
    help="A run of the baseline configuration; repeat for repetitions of it.",
)
@click.option(
    "--candidate",
    "candidates",
    multiple=True,
    type=click.Path(exists=True, path_type=Path),
    help="A run of the changed configuration; repeat for repetitions of it.",
)
@click.option(
    "--manifest",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A YAML or JSON file naming the runs (baseline: [...], candidate: [...], change: "
    "TEXT), paths relative to it.",
)
@click.option(
    "--change",
    metavar="TEXT",
    help="What was changed, as the conclusion names it (e.g. 'the second instance').",
)
@click.option("-o", "--html", "html_out", type=click.Path(path_type=Path), help="Write HTML here.")
@click.option(
    "--json", "json_out", type=click.Path(path_type=Path), help="Write JSON here ('-': stdout)."
)
@click.option("--md", "md_out", type=click.Path(path_type=Path), help="Write Markdown here.")
@click.option(
    "--margin",
    type=float,
    default=0.05,
    show_default=True,
    help="With repetitions: the success rate the candidate may lose and still be non-inferior.",
)
@click.option(
    "--fail-on",
    "fail_on",
    multiple=True,
    metavar="CONDITION",
    callback=lambda ctx, param, values: _gates(values),
    help="Exit 3 when it holds: regressed, bottleneck_changed, 'success_drop>5%', 'p95_ratio>1.2'.",
)
@reading_options
@threshold_options
def compare_command(
    runs, baselines, candidates, manifest, change, html_out, json_out, md_out, margin, fail_on,
    year, server_tz, client_tz, started_at, scraped_at, **thresholds,
) -> None:  # fmt: skip
    """Did the change help? Compare a BASELINE run with a CANDIDATE run.

    Each run is a folder or file of evidence (analysed as `analyze` would), a `--tables`
    dataset, or a JSON report this tool wrote. Give two runs, or --baseline and --candidate
    (each repeatable) for repetitions of each configuration.
    """
    from logforensics.compare import RENDERERS, ManifestError, build, held, read_manifest, read_run
    from logforensics.report import build_report
    from logforensics.report.jsonout import ReportVersionError

    if manifest is not None:
        if runs or baselines or candidates:
            raise click.UsageError("give a --manifest, or the runs, not both")
        try:
            baselines, candidates, named = read_manifest(manifest)
        except ManifestError as exc:
            click.echo(f"logforensics: error: {exc}", err=True)
            sys.exit(EXIT_BAD_INPUT)
        change = change or named
    if runs and (baselines or candidates):
        raise click.UsageError("give two RUNS, or --baseline and --candidate, not both")
    if runs:
        if len(runs) != 2:
            raise click.UsageError(
                "give two runs (BASELINE CANDIDATE); for repetitions use --baseline/--candidate"
            )
        baselines, candidates = (runs[0],), (runs[1],)
    if not baselines or not candidates:
        raise click.UsageError("give at least one --baseline and one --candidate run")

    def analyse(path: Path, dataset: bool):
        options = Options(
            year=year,
            server_tz=server_tz,
            client_tz=client_tz,
            client_anchor=started_at,
            scraped_at=scraped_at,
            thresholds=Thresholds(**thresholds),
            tables=[path] if dataset else [],
        )
        return build_report(analyze([] if dataset else [path], options)).summary

    read, failed = {}, []
    for path in dict.fromkeys([*baselines, *candidates]):
        try:
            read[path] = read_run(path, analyse)
        except (InputError, TablesError, ReportVersionError) as exc:
            failed.append(f"{path}: {exc}" if str(path) not in str(exc) else str(exc))
    for message in failed:  # every unreadable run named, not only the first
        click.echo(f"logforensics: error: {message}", err=True)
    if failed:
        sys.exit(EXIT_BAD_INPUT)
    comparison = build(
        [read[p] for p in baselines],
        [read[p] for p in candidates],
        change,
        margin,
        Thresholds(**thresholds),
    )
    write_outputs(RENDERERS, {"html": html_out, "json": json_out, "md": md_out}, comparison)
    for sentence in comparison.conclusion:
        click.echo(sentence, err=_to_stdout(html_out, json_out, md_out))
    # a run whose own inputs were faulty is compared, but said so, and exits 2 as analyze does
    faulty = [f"{path}: {error}" for path, run in read.items() for error in run.summary.errors]
    for message in faulty:
        click.echo(f"logforensics: error: in a run's inputs: {message}", err=True)
    holding = held(fail_on, comparison)
    for condition in holding:
        click.echo(f"logforensics: fail-on: {condition}", err=True)
    sys.exit(EXIT_BAD_INPUT if faulty else EXIT_GATE if holding else EXIT_OK)


def write_outputs(renderers, targets: dict[str, Path | None], data) -> None:
    """Each renderer's text (`RENDERERS`: kind, render) to its target: a file, or stdout for
    `-`; a kind without a target is not rendered."""
    for kind, render in renderers:
        out = targets.get(kind)
        if out is None:
            continue
        text = render(data)
        if str(out) == "-":
            click.echo(text, nl=False)
            continue
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text, encoding="utf-8")
        click.echo(f"wrote {out}", err=True)


def _size(text: str, option: str) -> int:
    """Bytes from `123`, `64K`, `256M`, `1G` (powers of 1024)."""
    units = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    number, unit = text.strip().upper().rstrip("IB") or "0", ""
    if number[-1:] in units:
        number, unit = number[:-1], number[-1]
    try:
        value = int(float(number) * units[unit])
    except ValueError:
        raise click.BadParameter(f"not a size: {text!r}", param_hint=option) from None
    if value <= 0:
        raise click.BadParameter(f"must be more than 0: {text!r}", param_hint=option)
    return value


def _to_stdout(*outputs) -> bool:
    """An output written to stdout (`-`): the one-line summary goes to stderr, not into it."""
    return any(str(out) == "-" for out in outputs if out is not None)


@cli.command("ingest")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--tables",
    "tables_dir",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Write the dataset into this (new or empty) folder.",
)
@click.option(
    "--instance",
    "instances",
    multiple=True,
    metavar="NAME=PATH",
    help="Name the instance a log belongs to (default: the file's name).",
)
@reading_options
@click.option(
    "--ray",
    "ray_address",
    is_flag=False,
    flag_value="",
    default=None,
    metavar="[ADDRESS]",
    help="One Ray task per file (needs the `ray` extra). ADDRESS as Ray's own (`auto`, "
    "`ray://head:10001`); without it a local cluster. Files and DIR at the same paths on "
    "every worker.",
)
@click.option(
    "--piece-size",
    "piece_size",
    default="256M",
    show_default=True,
    metavar="SIZE",
    help="With --ray: a text log bigger than twice this is cut into pieces of about this "
    "size (bytes, or with K, M, G), read by a task each.",
)
@click.option("-q", "--quiet", is_flag=True, help="No progress display on stderr.")
def ingest_command(
    paths,
    tables_dir,
    instances,
    year,
    server_tz,
    client_tz,
    started_at,
    scraped_at,
    ray_address,
    piece_size,
    quiet,
) -> None:
    """Parse files (each on its own) into a Parquet dataset for `analyze --tables`.

    Datasets written over parts of the files (on other machines too) are
    analysed together: `analyze --tables DIR1 --tables DIR2`. A run that stopped
    (or whose files failed) is finished by running it again: only the missing
    entries are written.
    """
    from logforensics import ray_ingest  # imports Ray only when called
    from logforensics.analysis import parse_context
    from logforensics.ingest.inputs import read
    from logforensics.tables import EntryWriter

    options = Options(
        year=year,
        server_tz=server_tz,
        client_tz=client_tz,
        client_anchor=started_at,
        scraped_at=scraped_at,
    )
    ctx, year_notes = parse_context(list(paths), options)
    year_note = year_notes[0] if year_notes else None
    progress = None if quiet else Progress()
    try:
        if ray_address is not None:
            done = ray_ingest.ingest(
                list(paths),
                tables_dir,
                ctx,
                _parse_instance(instances),
                ray_address or None,
                year_note,
                progress,
                _size(piece_size, "--piece-size"),
            )
            total, kept, lines, errors = done.files, done.kept, done.lines, done.errors
            if done.pieces:
                click.echo(
                    f"read in pieces: {len(done.pieces)} file(s), "
                    f"{sum(done.pieces.values())} pieces",
                    err=True,
                )
        else:
            # each file's entry written as its parse completes (its tables not held on)
            writer = EntryWriter(tables_dir, ctx)
            files = read(
                list(paths), ctx, _parse_instance(instances), progress=progress, sink=writer
            )
            total, errors = len(files.files), files.errors
            kept = total - writer.finish(files, year_note)
            lines = sum(p.result.lines for p in files.parsed if p.result)
    except TablesError as exc:
        click.echo(f"logforensics: error: {exc}", err=True)
        sys.exit(EXIT_BAD_INPUT)
    except ray_ingest.RayMissing as exc:
        raise click.UsageError(str(exc)) from exc
    for error in errors:
        click.echo(f"logforensics: error: {error}", err=True)
    earlier = f" ({kept} kept from an earlier run)" if kept else ""
    click.echo(f"wrote {tables_dir}: {total} files{earlier}, {lines:,} lines", err=True)
    sys.exit(EXIT_BAD_INPUT if errors else EXIT_OK)


@cli.command("detect")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object per file, as a list.")
@click.option(
    "--instance",
    "instances",
    multiple=True,
    metavar="NAME=PATH",
    help="Name the instance a log belongs to.",
)
@click.option("--year", type=int, help="Year for yearless stamps (default: this year).")
def detect_command(paths, as_json, instances, year) -> None:
    """Say what each file is: format(s), lines parsed/unparsed, time span, instance."""
    import json

    from logforensics.detect import detect_paths, render_detect_table
    from logforensics.ingest import ParseContext

    ctx = ParseContext(year=year or dt.date.today().year)
    rows = detect_paths(list(paths), ctx, _parse_instance(instances))
    if as_json:
        click.echo(json.dumps(rows, indent=2, ensure_ascii=False, default=str))
    else:
        click.echo(render_detect_table(rows))
    recognised = [r for r in rows if r["format"]]
    named_bad = [r for r in rows if not r["format"] and Path(r["path"]) in set(paths)]
    sys.exit(EXIT_BAD_INPUT if not recognised or named_bad else EXIT_OK)


def _register_commands() -> None:
    from logforensics.loadtest import loadtest_command

    cli.add_command(loadtest_command)


_register_commands()


def main() -> None:
    cli()


if __name__ == "__main__":
    main()
