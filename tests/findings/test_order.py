"""The order of two milestones (headtrace.findings.order): one rule, read by f3_gaps, the seed groups and
the headline. Hand-built brackets with known answers, censored and tied cases included."""
import math

import polars as pl

from headtrace.findings import order
from headtrace.findings import trajectory as T

INF = math.inf


def ms(lo, hi, left=False, right=False):
    return dict(lo_tokens=lo, tokens=hi, left_censored=left, right_censored=right)


def test_order_needs_disjoint_brackets():
    b = order.bounds_of_row
    assert order.order_of(b(ms(100, 200)), b(ms(200, 400))) == "earlier first"  # touching ends decide
    assert order.order_of(b(ms(100, 400)), b(ms(200, 800))) == "undecided"  # overlapping brackets
    assert order.order_of(b(ms(100, 200)), b(ms(100, 200))) == "undecided"  # the same bracket
    assert order.order_of(b(ms(400, 800)), b(ms(None, 100, left=True))) == "later first"
    assert order.order_of(b(ms(1600, None, right=True)), b(ms(1600, None, right=True))) == "undecided"
    assert order.order_of(None, b(ms(1, 2))) == "absent"


def test_a_censored_end_decides_the_order_and_says_so():
    circuit_at_first = (0.0, 20.0)  # (0, 20B]: already there at the first revision
    sink_seen = (209.0, 419.0)
    o = order.order_of(circuit_at_first, sink_seen)
    assert (o, order.basis_of(o, circuit_at_first, sink_seen)) == ("earlier first", "seen")
    sink_never = (768.0, INF)  # not met by the last revision (768K)
    circuit = (358.0, 512.0)
    o = order.order_of(circuit, sink_never)
    assert (o, order.basis_of(o, circuit, sink_never)) == ("earlier first", "censoring")
    both_at_first = ((0.0, 2.0), (0.0, 2.0))
    o = order.order_of(*both_at_first)
    assert (o, order.basis_of(o, *both_at_first)) == ("undecided", None)
    circuit_never, sink = (4.0, INF), (1.0, 2.0)
    o = order.order_of(circuit_never, sink)
    assert (o, order.basis_of(o, circuit_never, sink)) == ("later first", "censoring")


def test_f3_gaps_carries_the_order():
    rows = [  # model, milestone, revision, tokens, lo_revision, lo_tokens, left, right
        ("seen", "induction_3_heads", "s2", 200, "s1", 100, False, False),
        ("seen", "first_token_50pct", "s4", 800, "s3", 400, False, False),
        ("left", "induction_3_heads", "s1", 20, None, None, True, False),
        ("left", "first_token_50pct", "s3", 419, "s2", 209, False, False),
        ("never", "induction_3_heads", "s2", 512, "s1", 358, False, False),
        ("never", "first_token_50pct", None, None, "s3", 768, False, True),
        ("tie", "induction_3_heads", "s1", 2, None, None, True, False),
        ("tie", "first_token_50pct", "s1", 2, None, None, True, False),
    ]
    cols = ["model", "milestone", "revision", "tokens", "lo_revision", "lo_tokens", "left_censored", "right_censored"]
    gaps = T.f3_gaps(pl.DataFrame(rows, schema=cols, orient="row"))
    got = {r["model"]: (r["order"], r["order_basis"], r["gap_bound"]) for r in gaps.iter_rows(named=True)}
    assert got == {"seen": ("earlier first", "seen", "interval"),
                   "left": ("earlier first", "seen", "lower bound"),
                   "never": ("earlier first", "censoring", "lower bound"),
                   "tie": ("undecided", None, "unknown")}


def test_bounds_follow_the_censoring_flags_and_missing_ends():
    """(lo, hi] from a milestone's values: a censoring flag wins over a recorded value, a missing end is
    censored too (docstring of order.bounds)."""
    assert order.bounds(100, 200, False, False) == (100.0, 200.0)
    assert order.bounds(50, 200, True, False) == (0.0, 200.0)  # met at the first revision: from 0
    assert order.bounds(None, 200, False, False) == (0.0, 200.0)  # no lower end
    assert order.bounds(100, 200, False, True) == (100.0, INF)  # never met: no upper end
    assert order.bounds(100, None, False, False) == (100.0, INF)


def test_bounds_of_a_row_read_its_flags_or_infer_them():
    b = order.bounds_of_row
    assert b(None) is None
    assert b(dict(lo_tokens=50, tokens=200, left_censored=True, right_censored=False)) == (0.0, 200.0)
    assert b(dict(lo_tokens=100, tokens=200, left_censored=False, right_censored=True)) == (100.0, INF)
    # without a right_censored column: censored exactly when no revision met it
    assert b(dict(lo_tokens=100, tokens=200, left_censored=False)) == (100.0, 200.0)
    assert b(dict(lo_tokens=768, tokens=None, left_censored=False)) == (768.0, INF)
    # an f3_gaps row's halves, by prefix
    gap = dict(later_lo_tokens=400, later_tokens=800, later_left_censored=False, later_right_censored=False,
               earlier_lo_tokens=10, earlier_tokens=200, earlier_left_censored=True, earlier_right_censored=False)
    assert b(gap, "later_") == (400.0, 800.0) and b(gap, "earlier_") == (0.0, 200.0)


def test_the_mirror_case_touching_and_seen():
    earlier, later = (200.0, 400.0), (100.0, 200.0)  # the later milestone's bracket ends where the other's begins
    o = order.order_of(earlier, later)
    assert (o, order.basis_of(o, earlier, later)) == ("later first", "seen")


def test_f3_gaps_says_which_case_each_gap_is():
    """gap_case, the first that applies: the earlier milestone never met, the later one never met, the earlier
    one at the first revision, both at one revision, an interval (the headline words it from this column)."""
    rows = [  # model, milestone, revision, tokens, lo_revision, lo_tokens, left, right
        ("seen", "induction_3_heads", "s2", 200, "s1", 100, False, False),
        ("seen", "first_token_50pct", "s4", 800, "s3", 400, False, False),
        ("left", "induction_3_heads", "s1", 20, None, None, True, False),
        ("left", "first_token_50pct", "s3", 419, "s2", 209, False, False),
        ("never", "induction_3_heads", "s2", 512, "s1", 358, False, False),
        ("never", "first_token_50pct", None, None, "s3", 768, False, True),
        ("tie", "induction_3_heads", "s1", 2, None, None, True, False),  # both at the first revision
        ("tie", "first_token_50pct", "s1", 2, None, None, True, False),
        ("same", "induction_3_heads", "s2", 200, "s1", 100, False, False),  # both at a later revision
        ("same", "first_token_50pct", "s2", 200, "s1", 100, False, False),
        ("none", "induction_3_heads", None, None, "s2", 200, False, True),  # no circuit, a sink all the same
        ("none", "first_token_50pct", "s2", 200, "s1", 100, False, False),
        ("nothing", "induction_3_heads", None, None, "s2", 200, False, True),
        ("nothing", "first_token_50pct", None, None, "s2", 200, False, True),
    ]
    cols = ["model", "milestone", "revision", "tokens", "lo_revision", "lo_tokens", "left_censored", "right_censored"]
    gaps = T.f3_gaps(pl.DataFrame(rows, schema=cols, orient="row"))
    got = {r["model"]: (r["gap_case"], r["order"], r["gap_lo"], r["gap_hi"]) for r in gaps.iter_rows(named=True)}
    assert got == {"seen": ("interval", "earlier first", 400 / 200, 800 / 100),
                   "left": ("earlier at first revision", "earlier first", 209 / 20, None),
                   "never": ("later never met", "earlier first", 768 / 512, None),
                   "tie": ("earlier at first revision", "undecided", None, None),
                   "same": ("same revision", "undecided", 100 / 200, 200 / 100),
                   "none": ("earlier never met", "later first", None, None),
                   "nothing": ("earlier never met", "undecided", None, None)}
    assert set(gaps["gap_case"]) <= set(T.GAP_CASES)


def test_gap_case_infers_censoring_a_row_does_not_carry():
    """A table without censoring columns: never met = no revision, at the first revision = met with no
    revision before it; a censoring flag, where present, wins."""
    assert T.gap_case(dict(earlier_revision="a", earlier_lo_revision=None, later_revision="b")) == \
        "earlier at first revision"
    assert T.gap_case(dict(earlier_revision="b", earlier_lo_revision="a", later_revision="c")) == "interval"
    assert T.gap_case(dict(earlier_revision="b", earlier_lo_revision="a", later_revision="b")) == "same revision"
    assert T.gap_case(dict(earlier_revision="b", earlier_lo_revision="a", later_revision="c",
                           later_right_censored=True)) == "later never met"
    assert T.gap_case(dict(earlier_revision="b", earlier_lo_revision=None, earlier_left_censored=False,
                           later_revision="c")) == "interval"
    assert T.gap_case(dict(earlier_revision=None, later_revision=None)) == "earlier never met"
