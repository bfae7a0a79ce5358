"""Write ``docs/results.md`` from the reproductions' JSON files (``make reproduce`` writes them to ``out/results``).

Every number in the page is read from those files; each table names the command that made it and the machine it
ran on. A reproduction with no file in the folder keeps its section of the page (and its rows of the README's table)
as an earlier run wrote them, with that run's machine; one the page never had is listed as not run. Run as
``python -m experiments.results [--results out/results] [--out docs/results.md]``.
"""

from __future__ import annotations

import json
import re
import sys
import textwrap
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import click

from experiments._cli import describe

__all__ = ["main", "readme_table", "render", "update_readme"]

Row = tuple[str, str, str]  # figure, paper, edgeplan


def _pct(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}%"


def _x(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}x"


def _eshratifar2018(d: Mapping[str, Any]) -> list[Row]:
    paper, ours = d["paper"], d["edgeplan"]
    limited = max(ours["cloud_limited"], key=lambda c: c["transfer_points"], default=None)
    rows: list[Row] = [
        ("Fig. 4: mean speed-up over the better of mobile-only and cloud-only", _x(paper["speedup_mean"]),
         _x(ours["speedup_mean"])),
        ("Fig. 4: largest speed-up (where)", f"{_x(paper['speedup_max'])} {paper['speedup_max_at']}",
         f"{_x(ours['speedup_max'])} {ours['speedup_max_at']}"),
        ("Fig. 4: mean mobile-energy reduction", _x(paper["energy_mean"]), _x(ours["energy_mean"])),
        ("Fig. 4: largest energy reduction (where)", f"{_x(paper['energy_max'])} {paper['energy_max_at']}",
         f"{_x(ours['energy_max'])} {ours['energy_max_at']}"),
        ("latency-optimal patterns as the paper expects", f"{len(d['rows'])} of {len(d['rows'])}",
         f"{ours['patterns_as_expected']} of {len(d['rows'])}"),
    ]
    for net in ("3g", "4g", "wifi"):
        rows.append((f"Fig. 3: AlexNet cloud-only, share of time spent transferring ({net})",
                     _pct(100 * paper["alexnet_cloud_only_comm_share"][net], 0),
                     _pct(100 * ours["alexnet_cloud_only_comm_share"][net])))
    if limited is not None:
        rows.append(("Fig. 5: most transfer points with the cloud limited to half its time (Wi-Fi)",
                     f"{paper['cloud_limited_max_transfer_points']} ({paper['cloud_limited_max_at']})",
                     f"{limited['transfer_points']} ({limited['model']})"))
    return rows


def _li2023(d: Mapping[str, Any]) -> list[Row]:
    paper, rows = d["paper"], []
    floor = d.get("noise_floor") or {}
    groups = (floor.get("groups") or {"synthetic": floor}) if floor else {}
    for m, r in d["5.1"].items():
        rows.append((f"§5.1 synthetic NAS space, {m}: MAPE on synthetic:900-999 (trained on 0-899)",
                     _pct(paper["5.1"].get(m)), _pct(r["mape"], 2)))
    if groups.get("synthetic"):
        rows.append(("noise floor: two measurements of the same synthetic networks", "-",
                     _pct(groups["synthetic"]["mape"], 2)))
    for m, r in d.get("5.3", {}).items():
        rows.append((f"§5.3 {r['models']} zoo CNNs, {m}, trained on the 900 synthetic networks",
                     _pct(paper["5.3"].get(m)), _pct(r["mape"], 2)))
    for m, r in d.get("5.3-wide", {}).items():
        rows.append((f"§5.3 zoo CNNs, {m}, trained on the 900 and edgeplan's synthetic spaces", "-",
                     _pct(r["zoo"]["mape"], 2)))
    if groups.get("zoo"):
        rows.append(("noise floor: two measurements of the same zoo CNNs", "-", _pct(groups["zoo"]["mape"], 2)))
    five = d.get("5.5", {})
    if "gbdt@30" in five:
        rows.append(("§5.5 GBDT trained on 30 synthetic networks: MAPE on synthetic",
                     _pct(paper["5.5"]["gbdt@30"]), _pct(five["gbdt@30"]["synthetic"], 2)))
    if "lasso@30" in five:
        rows.append(("§5.5 Lasso trained on 30 synthetic networks: MAPE on the zoo CNNs",
                     _pct(paper["5.5"]["lasso@30 real"]), _pct(five["lasso@30"]["zoo"], 2)))
    nn = d.get("5.6", {})
    biggest = max(nn, key=lambda k: int(k.split("@")[1]), default=None)
    if biggest is not None:
        rows.append((f"§5.6 nn-Meter-like baseline ({biggest}): MAPE synthetic / zoo", "above the paper's",
                     f"{_pct(nn[biggest]['synthetic'], 2)} / {_pct(nn[biggest]['zoo'], 2)}"))
    return rows


def _li2023_nb201(d: Mapping[str, Any]) -> list[Row]:
    h, r = d["mean_help"], d["mean_random"]
    n = len(d["devices"])
    return [(f"mean Spearman over {n} devices, HELP's 10 architectures", "0.93 (HELP)", f"{h['spearman']:.3f}"),
            (f"mean MAPE over {n} devices, HELP's 10 architectures", "-", _pct(h["mape"])),
            (f"mean Spearman, {d['samples']} random architectures, {d['seeds']} draws", "-",
             f"{r['spearman']:.3f}"),
            (f"mean MAPE, {d['samples']} random architectures, {d['seeds']} draws", "-", _pct(r["mape"]))]


def _mulder2020(d: Mapping[str, Any]) -> list[Row]:
    paper, rows = d["paper"], []
    for platform, s in d["summary"].items():
        rows.append((f"Fig. 7 ({platform}): mean inference-time increase, NN2 selection vs measured optimum",
                     _pct(paper["fig7_mean_increase_pct"], 2), _pct(s["mean_increase_pct"], 3)))
        rows.append((f"Fig. 7 ({platform}): worst increase (network)", _pct(paper["fig7_worst_increase_pct"], 1),
                     f"{_pct(s['worst_increase_pct'], 3)} ({s['worst_network']})"))
    for r in d["results"]:
        if r["network"] in ("vgg19", "googlenet"):
            rows.append((f"Table 4 ({r['platform']}): {r['network']} optimisation time with the model",
                         f"{paper['table4_model_ms'][r['network']]:.0f} ms",
                         f"{r['model_ms_median']:.1f} ms (profiling: {r['profiling_s']:.0f} s)"))
    return rows


def _parthasarathy2022(d: Mapping[str, Any]) -> list[Row]:
    verdict = {True: "holds", False: "does not hold", None: "not measured"}
    rows: list[Row] = [(c["claim"].split(" (")[0], c["paper"].replace(" below greedy at 50 nodes", " below"),
                        f"{c['measured'].split(' (')[0]}, {verdict[c['holds']]}") for c in d["claims"]]
    t = d["timings"]
    if d.get("own_ratio") is not None:
        rows.append(("edgeplan's planner / optimal placement of Alg. 1's cuts", "-", f"{d['own_ratio']:.4f}"))
    if t.get("own_median_s") is not None:
        rows.append((f"edgeplan's planner at {t['nodes']} nodes, median / max time", "-",
                     f"{t['own_median_s']:.3f} s / {t['own_max_s']:.3f} s"))
    if t.get("exact_median_s") is not None:
        rows.append((f"exact placement at {t['nodes']} nodes: median time, proven", "-",
                     f"{t['exact_median_s']:.3f} s, {t['exact_proven']}/{t['exact_count']}"))
    return rows


def _settings(d: Mapping[str, Any]) -> str:
    """What a run covered, where its rows do not say it."""
    if d.get("experiment") == "parthasarathy2022":
        c = d["config"]
        return (f"{len(c['models'])} models, {c['memories_mb']} MB, {c['nodes']} nodes, {c['classes']} classes, "
                f"{c['runs']} clusters each; Fig. 10: {c['fig10_nodes']} nodes, {c['fig10_memory_mb']} MB, "
                f"{c['fig10_trials']} clusters.")
    if d.get("experiment") == "li2023":
        return (f"Dataset {d['scenario']}: {d['train']} training and {d['test']} test synthetic networks, {d['zoo']} "
                f"zoo CNNs; latency = the {d['statistic']} over runs.")
    if d.get("experiment") == "eshratifar2018":
        mobile = re.sub(r" \d{4}-\d{2}-\d{2}", "", d["devices"]["mobile"])  # the page states no dates
        mobile = re.sub(r"\(Store [^)]*\)", "(measured on this machine, kept in its Store)", mobile)  # no local path
        return f"Mobile: {mobile}. Cloud: {d['devices']['cloud']}."
    return ""


#: Per experiment: the title of its section and the function that reads its rows.
SECTIONS: dict[str, tuple[str, Callable[[Mapping[str, Any]], list[Row]]]] = {
    "li2023": ("li2023: latency prediction from per-operation predictors", _li2023),
    "li2023-nb201": ("li2023 / HELP: few-shot calibration on NAS-Bench-201 devices", _li2023_nb201),
    "mulder2020": ("mulder2020: primitive selection with a performance model", _mulder2020),
    "eshratifar2018": ("eshratifar2018: mobile-cloud offloading", _eshratifar2018),
    "eshratifar2018-paper-regime": ("eshratifar2018 with the mobile slowed to the paper's regime", _eshratifar2018),
    "parthasarathy2022": ("parthasarathy2022: edge-cluster partition and placement", _parthasarathy2022),
}


def _headlines(stem: str, d: Mapping[str, Any]) -> list[Row]:
    """The one or two figures of a result that the README shows."""
    if "skipped" in d:
        return []
    name = d.get("experiment") or stem
    if name == "li2023":
        rows = []
        if "gbdt" in d["5.1"]:
            rows.append(("li2023 §5.1: synthetic networks, GBDT, MAPE", _pct(d["paper"]["5.1"]["gbdt"]),
                         _pct(d["5.1"]["gbdt"]["mape"], 2)))
        if "lasso" in d.get("5.3", {}):
            rows.append(("li2023 §5.3: zoo CNNs, Lasso, MAPE", _pct(d["paper"]["5.3"]["lasso"]),
                         _pct(d["5.3"]["lasso"]["mape"], 2)))
        return rows
    if name == "li2023-nb201":
        return [("HELP few-shot, NAS-Bench-201 devices: Spearman", "0.93", f"{d['mean_help']['spearman']:.3f}")]
    if name == "mulder2020":
        return [(f"mulder2020 Fig. 7 ({p}): mean increase with NN2", _pct(d["paper"]["fig7_mean_increase_pct"], 2),
                 _pct(s["mean_increase_pct"], 3)) for p, s in d["summary"].items()]
    if name == "eshratifar2018":
        regime = " (paper's regime)" if "paper-regime" in d.get("command", "") else ""
        return [(f"eshratifar2018 Fig. 4: mean speed-up{regime}", _x(d["paper"]["speedup_mean"]),
                 _x(d["edgeplan"]["speedup_mean"])),
                (f"eshratifar2018 Fig. 4: mean energy reduction{regime}", _x(d["paper"]["energy_mean"]),
                 _x(d["edgeplan"]["energy_mean"]))]
    if name == "parthasarathy2022":
        return [(f"parthasarathy2022 {c['claim'].split(' (')[0]}", c["paper"], c["measured"].split(" (")[0])
                for c in d["claims"][:1] + d["claims"][3:4]]
    return []


README_START = "<!-- results: written by `python -m experiments.results`; do not edit -->"
README_END = "<!-- /results -->"


def readme_table(results: Sequence[tuple[str, Mapping[str, Any]]],
                 kept: Mapping[str, tuple[str, list[str]]] | None = None) -> list[str]:
    """The README's headline table (figure, paper, edgeplan, and the number of the command that reproduced it),
    then the commands, numbered; ``kept``: by result name, an earlier table's command and rows for the results not
    in ``results``."""
    lines, commands = ["| figure | paper | edgeplan | command |", "|---|---|---|---|"], []
    entries: list[tuple[str, str, list[str]]] = []
    for stem, data in results:
        rows = _headlines(stem, data)
        if rows:
            entries.append((stem, data.get("command", "?").replace(" --json", ""),
                            [f"| {_cell(f)} | {_cell(p)} | {_cell(e)} |" for f, p, e in rows]))
    entries += [(name, command, rows) for name, (command, rows) in (kept or {}).items()]
    order = {name: i for i, name in enumerate(SECTIONS)}
    for _, command, rows in sorted(entries, key=lambda e: order.get(e[0], 99)):
        commands.append(command)
        lines += [f"{row} ({len(commands)}) |" for row in rows]
    lines.append("")
    lines += [f"({i}) `{c}`  " for i, c in enumerate(commands, 1)]
    return lines


def _result_name(command: str) -> str:
    """The result a reproduction's command writes: ``python -m experiments.li2023 --nb201`` -> ``li2023-nb201``."""
    words = command.split()
    script = next((w.removeprefix("experiments.") for w in words if w.startswith("experiments.")), "?")
    options = [w.lstrip("-") for w in words if w.startswith("--")]
    variant = f"{script}-{options[0]}" if options else ""
    return variant if variant in SECTIONS else script


def _kept_rows(block: str, have: set[str]) -> dict[str, tuple[str, list[str]]]:
    """From an earlier README table: by result name, the command and rows (without their number) of the results
    not in ``have``."""
    commands = dict(re.findall(r"^\((\d+)\) `([^`]+)`", block, flags=re.M))
    out: dict[str, tuple[str, list[str]]] = {}
    for row, number in re.findall(r"^(\|.*\|) \((\d+)\) \|$", block, flags=re.M):
        command = commands.get(number)
        if command is not None and (name := _result_name(command)) not in have:
            out.setdefault(name, (command, []))[1].append(row)
    return out


def update_readme(path: Path, results: Sequence[tuple[str, Mapping[str, Any]]]) -> bool:
    """Replace the block between :data:`README_START` and :data:`README_END` of ``path``, keeping the rows of the
    results not in ``results``; False without the markers."""
    text = path.read_text(encoding="utf-8")
    start, end = text.find(README_START), text.find(README_END)
    if start < 0 or end < start:
        return False
    kept = _kept_rows(text[start:end], _names(results))
    block = "\n".join([README_START, *readme_table(results, kept), README_END])
    path.write_text(text[:start] + block + text[end + len(README_END):], encoding="utf-8")
    return True


WIDTH = 120


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _wrap(text: str) -> list[str]:
    return textwrap.wrap(text, WIDTH, break_on_hyphens=False) or [""]


def _section(stem: str, data: Mapping[str, Any]) -> list[str]:
    name = data.get("experiment") or stem
    title, rows_of = SECTIONS.get(stem) or SECTIONS.get(name) or (name, None)
    command = textwrap.wrap(data.get("command", "?"), WIDTH - 2, break_on_hyphens=False, break_long_words=False)
    lines = [f"## {title}", "", "```", " \\\n  ".join(command), "```", ""]
    if "skipped" in data or rows_of is None:
        return [*lines, *_wrap(f"Skipped: {data.get('skipped', 'no table for this experiment')}."), ""]
    lines += [*_wrap(f"Machine: {describe(data['machine'])}. {_settings(data)}".strip()), ""]
    table, long = ["| figure | paper | edgeplan |", "|---|---|---|"], []
    for f, p, e in rows_of(data):
        row = f"| {_cell(f)} | {_cell(p)} | {_cell(e)} |"
        if len(row) <= WIDTH:
            table.append(row)
        else:  # a Markdown row cannot wrap: said below the table instead
            long += _wrap(f"- {f}: paper {p}; edgeplan {e}")
    return [*lines, *table, "", *([*long, ""] if long else [])]


def _ordered(results: Sequence[tuple[str, Mapping[str, Any]]]) -> list[tuple[str, Mapping[str, Any]]]:
    order = {name: i for i, name in enumerate(SECTIONS)}
    return sorted(results, key=lambda r: (order.get(r[0], order.get(r[1].get("experiment", ""), 99)), r[0]))


def _script(name: str) -> str:
    """``li2023-nb201`` -> ``li2023 --nb201``: the script and option of a result file's name."""
    script, _, option = name.partition("-")
    return f"{script} --{option}" if option else script


def _names(results: Sequence[tuple[str, Mapping[str, Any]]]) -> set[str]:
    """The result names of ``(file stem, JSON object)`` pairs."""
    return {stem for stem, _ in results} | {str(d.get("experiment")) for _, d in results}


def _page_sections(page: str) -> dict[str, list[str]]:
    """An earlier page's sections, by title, each its lines up to the next section."""
    out: dict[str, list[str]] = {}
    title = None
    for line in page.splitlines():
        if line.startswith("## "):
            title = line[3:]
            out[title] = []
        if title is not None:
            out[title].append(line)
    return out


def render(results: Sequence[tuple[str, Mapping[str, Any]]], earlier: str = "") -> str:
    """The page for ``(file stem, JSON object)`` pairs, in :data:`SECTIONS`' order; a result not among them keeps
    its section of the ``earlier`` page."""
    lines = ["# Results", "",
             "Generated by `make reproduce`: each paper's script writes `out/results/NAME.json`, and",
             "`python -m experiments.results` writes this page from those files. Do not edit it by hand.", ""]
    have, old = _names(results), _page_sections(earlier)
    fresh = {stem if stem in SECTIONS else str(data.get("experiment", stem)): (stem, data)
             for stem, data in _ordered(results)}
    for name, (title, _) in SECTIONS.items():
        if name in fresh:
            lines += _section(*fresh.pop(name))
        elif title in old:
            lines += old[title]
    for stem, data in fresh.values():
        lines += _section(stem, data)
    missing = [name for name, (title, _) in SECTIONS.items() if name not in have and title not in old]
    if missing:
        lines += ["## Not in this run", "", "Run `make reproduce` (or the script) for:", ""]
        lines += [f"- {SECTIONS[name][0]}: `python -m experiments.{_script(name)}`" for name in missing]
        lines.append("")
    return "\n".join(lines)


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--results", "folder", type=click.Path(file_okay=False, path_type=Path), default=Path("out/results"),
              show_default=True, help="Folder of the reproductions' JSON files.")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=Path("docs/results.md"),
              show_default=True, help="The page to write.")
@click.option("--readme", type=click.Path(dir_okay=False, path_type=Path), default=Path("README.md"),
              show_default=True, help="Also write the headline table between this file's results markers.")
def cli(folder: Path, out: Path, readme: Path) -> None:
    """Write the results page from the reproductions' JSON files.

    Example: python -m experiments.results --results out/results --out docs/results.md
    """
    files = sorted(folder.glob("*.json"))
    if not files:
        raise click.UsageError(f"no JSON files in {folder}; run `make reproduce` first")
    results = []
    for path in files:
        try:
            results.append((path.stem, json.loads(path.read_text(encoding="utf-8"))))
        except json.JSONDecodeError as e:
            raise click.UsageError(f"{path} is not JSON ({e}); run its reproduction again") from e
    out.parent.mkdir(parents=True, exist_ok=True)
    earlier = out.read_text(encoding="utf-8") if out.is_file() else ""
    out.write_text(render(results, earlier), encoding="utf-8")
    click.echo(f"wrote {out} from {len(files)} files")
    if readme.is_file() and update_readme(readme, _ordered(results)):
        click.echo(f"wrote the results table of {readme}")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; errors on one line and a non-zero exit code."""
    from experiments._cli import run_command

    return run_command(cli, "experiments.results", argv)


if __name__ == "__main__":
    sys.exit(main())
