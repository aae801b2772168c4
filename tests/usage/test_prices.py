"""The price table: every row a price, a model priced by its own row only (exactly, or with its release date),
the policy's rows over the table's, and a broken row a sentence."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from majordomus.policy import validate_raw
from majordomus.usage import prices
from majordomus.usage.prices import Price, price_of
from majordomus.usage.tally import Tokens


def test_every_row_of_the_shipped_table_is_a_dated_price_of_its_own_model() -> None:
    rows = yaml.safe_load(prices.TABLE.read_text())["models"]
    table = prices.table()
    assert set(table) == set(rows) and len(table) >= 20
    for name, row in table.items():
        assert row.source == "table" and len(row.as_of) == 10 and row.as_of.startswith("20"), name
        assert price_of(name, {}) is row
        assert price_of(f"{name}-20251001", {}) is row and price_of(f"{name}@20251001", {}) is row


@pytest.mark.parametrize("model", ["gpt-5-turbo", "claude-sonnet-4-5-preview", "gemini-2.5-pro-exp", "claude",
                                   "my-gpt-5", "gpt-5-2025", "claude-opus-5-5", ""])
def test_a_model_without_its_own_row_has_no_price(model: str) -> None:
    assert price_of(model, {}) is None


def test_a_neighbours_row_never_prices_a_model_that_has_its_own() -> None:
    assert price_of("gpt-5-mini", {}) == prices.table()["gpt-5-mini"] != prices.table()["gpt-5"]


def test_the_cost_is_each_kind_at_its_own_price() -> None:
    row = prices.table()["claude-sonnet-4-5"]
    assert row.cost(Tokens(input=1_000_000, output=0, cache_read=0, cache_write=0)) == pytest.approx(3.0)
    assert row.cost(Tokens(10, 100, 2000, 400)) == pytest.approx((10 * 3 + 100 * 15 + 2000 * 0.3 + 400 * 3.75) / 1e6)


def test_a_row_of_the_policy_wins_over_the_tables_and_its_cache_prices_default_to_its_input() -> None:
    policy = validate_raw({"usage": {"prices": {"gpt-5": {"input": 2, "output": 4}}}}, Path("policy.yaml"))
    assert policy.problems == ()
    found = price_of("gpt-5-2025-08-07", prices.overrides(policy))
    assert found == Price(2.0, 4.0, 2.0, 2.0, as_of="policy", source="policy")


@pytest.mark.parametrize("block, sentence", [
    ({"prices": {"m": {"input": -1, "output": 1}}}, "usage.prices.m.input must be a number"),
    ({"prices": {"m": {"input": 1}}}, "usage.prices.m.output must be a number"),
    ({"prices": {"m": {"input": 1, "output": 2, "cahce_read": 1}}}, "unknown key(s) cahce_read"),
    ({"prices": {"m": {"input": True, "output": 2}}}, "usage.prices.m.input must be a number"),
    ({"prices": {"m": {"input": float("nan"), "output": 2}}}, "usage.prices.m.input must be a number"),
    ({"prices": {"m": 3}}, "usage.prices.m must be a mapping"),
    ({"prices": ["m"]}, "usage.prices must be a mapping"),
    ({"price": {}}, "usage must be a mapping with one key, prices"),
])
def test_a_broken_price_row_is_a_sentence_naming_it_and_the_row_is_left_out(block: object, sentence: str) -> None:
    policy = validate_raw({"usage": block}, Path("policy.yaml"))
    assert any(sentence in p for p in policy.problems), policy.problems
    assert policy.prices == ()
