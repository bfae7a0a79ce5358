"""experiments/results.py: the results page and the README's table are written from the reproductions' JSON."""

from __future__ import annotations

import json
from pathlib import Path

from experiments import results

MACHINE = {"cpu": "Some CPU", "family_model": "25/17", "isa": ["avx2"], "caches": {"L2": "1024K"},
           "logical_cores": 2, "torch": "2.0"}

OFFLOAD = {
    "command": "python -m experiments.eshratifar2018 --json", "machine": MACHINE, "experiment": "eshratifar2018",
    "paper": {"speedup_mean": 1.42, "speedup_max": 3.07, "speedup_max_at": "overfeat/3g", "energy_mean": 2.11,
              "energy_max": 4.26, "energy_max_at": "overfeat/3g",
              "alexnet_cloud_only_comm_share": {"3g": 0.99, "4g": 0.93, "wifi": 0.81},
              "cloud_limited_max_transfer_points": 4, "cloud_limited_max_at": "overfeat"},
    "devices": {"mobile": "measured 2026-01-01 on it", "cloud": "derived"},
    "rows": [{}] * 18,
    "edgeplan": {"speedup_mean": 1.25, "speedup_max": 2.0, "speedup_max_at": "vgg16/wifi", "energy_mean": 1.5,
                 "energy_max": 3.0, "energy_max_at": "vgg16/wifi", "patterns_as_expected": 12,
                 "alexnet_cloud_only_comm_share": {"3g": 0.999, "4g": 0.99, "wifi": 0.9},
                 "cloud_limited": [{"model": "chair", "transfer_points": 2}]},
}


def test_page_and_readme_table_are_written_from_the_json_files(tmp_path: Path) -> None:
    folder = tmp_path / "results"
    folder.mkdir()
    (folder / "eshratifar2018.json").write_text(json.dumps(OFFLOAD))
    (folder / "mulder2020.json").write_text(json.dumps({"command": "python -m experiments.mulder2020 --json",
                                                        "machine": MACHINE, "skipped": "no tables"}))
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n\n{results.README_START}\nold\n{results.README_END}\n\nend\n")
    page = tmp_path / "results.md"
    assert results.main(["--results", str(folder), "--out", str(page), "--readme", str(readme)]) == 0
    text = page.read_text()
    assert "| Fig. 4: mean speed-up over the better of mobile-only and cloud-only | 1.42x | 1.25x |" in text
    assert "python -m experiments.eshratifar2018 --json" in text and "Skipped: no tables." in text
    assert "Some CPU" in text and "2026-01-01" not in text
    assert all(len(line) <= 120 for line in text.splitlines())
    table = readme.read_text()
    assert "old" not in table and table.endswith("\n\nend\n")
    assert "| eshratifar2018 Fig. 4: mean speed-up | 1.42x | 1.25x | (1) |" in table
    assert "(1) `python -m experiments.eshratifar2018`" in table


def test_no_json_files_is_an_error(tmp_path: Path) -> None:
    assert results.main(["--results", str(tmp_path), "--out", str(tmp_path / "r.md")]) != 0


def test_a_result_not_in_this_run_keeps_its_earlier_section_and_rows(tmp_path: Path) -> None:
    folder = tmp_path / "results"
    folder.mkdir()
    (folder / "eshratifar2018.json").write_text(json.dumps(OFFLOAD))
    readme, page = tmp_path / "README.md", tmp_path / "results.md"
    earlier_row = "| mulder2020 Fig. 7 (intel): mean increase with NN2 | 0.39% | 0.214% |"
    readme.write_text(f"# x\n\n{results.README_START}\n| figure | paper | edgeplan | command |\n|---|---|---|---|\n"
                      f"{earlier_row} (1) |\n\n(1) `python -m experiments.mulder2020 --platforms intel`  \n"
                      f"{results.README_END}\n")
    title = results.SECTIONS["mulder2020"][0]
    page.write_text(f"# Results\n\n## {title}\n\nMachine: an earlier one.\n\n| a | b | c |\n\n"
                    "## Not in this run\n\n- x\n")
    assert results.main(["--results", str(folder), "--out", str(page), "--readme", str(readme)]) == 0
    text = page.read_text()
    assert f"## {title}" in text and "Machine: an earlier one." in text and "Some CPU" in text
    assert text.index(title) < text.index(results.SECTIONS["eshratifar2018"][0])  # in the sections' order
    assert "- x" not in text and "python -m experiments.parthasarathy2022" in text  # never run: listed as such
    table = readme.read_text()
    assert f"{earlier_row} (1) |" in table and "(1) `python -m experiments.mulder2020 --platforms intel`" in table
    assert "| eshratifar2018 Fig. 4: mean speed-up | 1.42x | 1.25x | (2) |" in table
