"""The one rounding rule for printed statistics (headtrace.core.rounding): a p-value up, an interval's ends
outward, so that nothing printed claims more than was computed."""
from __future__ import annotations

import math

import pytest

from headtrace.core.rounding import directed, fmt_p, fmt_share_bound, fmt_share_interval
from headtrace.findings import agreement
from headtrace.report import format as F


@pytest.mark.parametrize("p,text", [(1 / 12, "0.084"), (1 / 3024, "0.00034"), (0.0498, "0.050"), (0.0083, "0.0083"),
                                    (0.493, "0.50"), (0.05, "0.05"), (0.5, "0.5"), (1 / 21, "0.048"), (0.999, "1"), (3.66e-14, "3.7e-14"), (1e-5, "1.0e-05"), (1.0, "1"),
                                    (None, "?"), (math.nan, "?")])
def test_a_p_value_is_rounded_up(p, text):
    assert fmt_p(p) == text


@pytest.mark.parametrize("p", [1 / 12, 1 / 3024, 0.0498, 0.0083, 0.493, 1 / 21, 0.123456, 2e-7])
def test_a_printed_p_is_never_below_the_computed_one(p):
    assert float(fmt_p(p)) >= p and float(fmt_p(p)) - p < 10 ** (math.floor(math.log10(p)) - 1) + 1e-15


def test_a_share_interval_is_rounded_outward():
    # 0.4571 to the nearest is 46%; as a lower end it prints 45%, as an upper end 46%
    assert fmt_share_bound(0.4571, "lo") == "45%" and fmt_share_bound(0.4571, "hi") == "46%"
    assert fmt_share_interval(0.4571, 0.7512) == "45% to 76%"
    assert fmt_share_bound(0.538, "lo", 1) == "53.8%" and fmt_share_bound(0.538, "hi", 1) == "53.8%"  # exact stays
    assert fmt_share_bound(0.5, "lo") == "50%" and fmt_share_bound(None, "hi") == "?"
    with pytest.raises(ValueError):
        fmt_share_bound(0.5, "up")


def test_one_rule_under_the_report_s_bounds():
    """report.format's outward bounds are the same directed rounding (no second copy)."""
    assert F._directed is directed
    assert F.fmt_bound(26.4, "hi") == "27×" and F.fmt_bound(12.67, "lo") == "12×"


def test_the_agreement_p_is_rounded_up():
    """Two identical 1-head sets of a 12-head layer: P = 1/12, printed 0.084 (not 0.083, the nearest)."""
    row = {"jaccard": 1.0, "null_mean": 1 / 12, "beyond_chance": False, "p_value": 1 / 12}
    assert agreement.verdict(row).endswith("P = 0.084)")


def test_the_group_page_s_tables_round_p_up_and_bounds_outward():
    import polars as pl

    from headtrace.report import group_html
    html = group_html._table(pl.DataFrame({"p_value": [1 / 12], "gap_lo": [5.13456], "gap_hi": [26.4321],
                                           "jaccard": [0.66666]}), ["p_value", "gap_lo", "gap_hi", "jaccard"])
    assert "<td>0.084</td>" in html and "<td>5.134</td>" in html and "<td>26.44</td>" in html
    assert "<td>0.6667</td>" in html  # a point value: the nearest
