"""The grid row's schema: the point's and the run's fields are declared, and a misspelt field or column fails."""

from __future__ import annotations

from dataclasses import asdict, fields

import pytest

from lachesis.evaluation import row
from lachesis.evaluation.grid import Point
from lachesis.node.simulator import RESULT_FIELDS, Lifetime, Measurement, OperatingPoint


def test_the_schema_holds_the_fields_of_the_point_the_run_the_drift_and_the_bound():
    point = set(asdict(Point("multi_agent", "1/7", "Llama-4-Maverick", "tight", "lachesis")))
    assert set(RESULT_FIELDS) | point <= row.FIELDS
    assert set(row.FLATTENED) <= row.FIELDS  # the sweep's own fields are checked where its tests write them


def test_a_runs_flat_record_names_every_field_of_its_three_parts_once():
    parts = [f.name for part in (OperatingPoint, Measurement, Lifetime) for f in fields(part)]
    assert len(parts) == len(set(parts)) and sorted(parts) == sorted(RESULT_FIELDS)


def test_a_misspelt_field_or_column_fails_naming_it():
    assert row.grid_row({"n_star": 3, "lifetime_years": 1.0}) == {"n_star": 3, "lifetime_years": 1.0}
    with pytest.raises(KeyError, match=r"no field 'lifetme_years'; known: .*lifetime_years"):
        row.grid_row({"lifetme_years": 1.0})
    assert row.columns("bytes_hbm", "lifetime_years") == ("bytes_hbm", "lifetime_years")
    with pytest.raises(KeyError, match="no column 'bytes_by_tier'"):
        row.columns("bytes_by_tier")  # a mapping field is read as its flattened columns
    with pytest.raises(KeyError, match="no field 'n_stars'"):
        row.fields("n_stars")
