"""One rule table per SGLang release line (engines/sglang/rules.py, issue 38): each release is planned by the row of
its line, the doctor reads a dump's row from its argument names, and no other module compares era strings."""

from __future__ import annotations

import re

import pytest

from paths import ROOT
from specbench.engines.sglang.rules import RULES, V0512, V0515, V0523, rules_for, rules_for_dump

SRC = ROOT / "src" / "specbench"


@pytest.mark.parametrize("version, row", [((0, 5, 0), V0512), ((0, 5, 12), V0512), ((0, 5, 13), V0515),
                                          ((0, 5, 15), V0515), ((0, 5, 17), V0515), ((0, 5, 18), V0523),
                                          ((0, 5, 23), V0523), ((0, 6, 1), V0523)])
def test_each_release_is_planned_by_the_row_of_its_line(version, row):
    assert rules_for(version) is row


def test_the_rows_are_ordered_and_name_the_release_read():
    assert [r.upto for r in RULES] == sorted(r.upto for r in RULES)
    assert [r.era for r in RULES] == ["v0512", "v0515", "v0523"]
    assert all(rules_for(tuple(int(x) for x in r.read.split(".")[:3])) is r for r in RULES)


def test_a_dump_names_its_row():
    assert rules_for_dump({"mamba_scheduler_strategy": "auto"}) is V0512
    assert rules_for_dump({"mamba_radix_cache_strategy": "auto"}) is V0515
    assert rules_for_dump({"tp_size": 1}) is None


def test_no_module_compares_era_strings():
    era = re.compile(r"""["'](v05\d\d|<=0\.5\.13|>=0\.5\.14)["']""")
    hits = [f"{p.relative_to(SRC)}:{i}" for p in SRC.rglob("*.py") if p.name != "rules.py"
            for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
            if era.search(line.split("#", 1)[0])]  # code, not a comment naming the rows
    assert hits == []
