"""The client's request ids held off the analysis where nothing but the report reads them:
every id back on its own row, on real recordings and on rows a stage reordered."""

from __future__ import annotations

import polars as pl
import pytest

from logforensics.analysis import Options, analyze, parse_context
from logforensics.held import Held, ids_joined
from logforensics.ingest.inputs import load
from tests.conftest import corpus, incident_inputs


def client_rows() -> pl.DataFrame:
    return pl.DataFrame(
        {
            "request_id": ["req-1", None, "req-3", "req-4"],
            "ok": [True, False, True, True],
            "source": [11, 12, 13, 14],
        }
    )


def test_a_held_column_is_one_null_while_held_and_its_own_values_after():
    frame = client_rows()
    without, held = Held.take(frame, "request_id")
    assert without["request_id"].null_count() == 4
    assert without.drop("request_id").equals(frame.drop("request_id"))
    assert len(held.parquet) > 0
    assert held.restore(without).equals(frame)


def test_rows_reordered_filtered_or_unknown_take_their_own_keys_value():
    frame = client_rows()
    without, held = Held.take(frame, "request_id")
    assert held.restore(without[[3, 0, 2, 1]])["request_id"].to_list() == [
        "req-4",
        "req-1",
        "req-3",
        None,
    ]
    fewer = without[[3, 0, 2]].with_columns(pl.Series("source", [14, 11, 99]))
    back = held.restore(fewer)
    assert back["request_id"].to_list() == ["req-4", "req-1", None]
    assert back.columns == frame.columns  # (in its place, not appended)


def test_a_key_held_twice_is_refused_not_guessed():
    frame = client_rows().with_columns(pl.Series("source", [11, 11, 13, 14]))
    without, held = Held.take(frame, "request_id")
    with pytest.raises(pl.exceptions.ComputeError):
        held.restore(without.reverse())


@pytest.mark.parametrize("name", ["field-high-rate", "aiperf-restart", "prefill-bound"])
def test_recorded_clients_ids_come_back_on_their_rows(name):
    """Recordings whose engines log no ids (vLLM's default logging): the analysis holds the
    client's ids and gives each back to its own request, as the client's file has it."""
    paths = incident_inputs(corpus(name))
    loaded = load(paths, parse_context(paths, Options())[0])
    assert not ids_joined(loaded.tables)  # (the held path, not the one that reads ids)
    client = loaded.tables["client_requests"].select("source", "request_id")
    assert client["request_id"].null_count() < client.height

    analysis = analyze(paths)

    assert analysis.tables["client_requests"].equals(loaded.tables["client_requests"])
    got = analysis.requests.select("source", "request_id").sort("source")
    assert got.equals(client.sort("source"))
