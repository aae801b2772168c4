"""The price table (prices.yaml beside this module, overridable in the policy) and what a tally cost by it.

A model is priced by its own row only: exactly its name, or its name with a release date after it. Anything
else has no price, and a cost that needs one is not given: "price unknown", never an estimate by a neighbour.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from majordomus.policy import PRICE_KINDS, Policy, price_row
from majordomus.usage.tally import Tokens

TABLE = Path(__file__).with_name("prices.yaml")
DATED = re.compile(r"(?P<model>.+?)(?:-\d{8}|-\d{4}-\d{2}-\d{2}|@\d{8})")


@dataclass(frozen=True)
class Price:
    """Dollars per 1M tokens of each kind, and where the row comes from (`as_of` date, or `policy`)."""

    input: float
    output: float
    cache_read: float
    cache_write: float
    as_of: str
    source: str  # table | policy

    def cost(self, tokens: Tokens) -> float:
        return (tokens.input * self.input + tokens.output * self.output + tokens.cache_read * self.cache_read
                + tokens.cache_write * self.cache_write) / 1_000_000


def overrides(policy: Policy) -> dict[str, Price]:
    """The policy's `usage.prices` rows (policy.py checked them), which win over the table's."""
    return {name: Price(**{k: row[k] for k in PRICE_KINDS}, as_of=row.get("as_of", "policy"), source="policy")
            for name, row in policy.prices}


@lru_cache(maxsize=1)
def table() -> dict[str, Price]:
    import yaml

    doc = yaml.safe_load(TABLE.read_text(encoding="utf-8"))
    problems: list[str] = []
    rows = {name: price_row(row, f"prices.yaml row {name}", problems) for name, row in doc["models"].items()}
    if problems:  # the shipped table is checked by its test; a broken row here is a bug of ours
        raise ValueError("; ".join(problems))
    return {name: Price(**{k: row[k] for k in PRICE_KINDS}, as_of=row["as_of"], source="table")
            for name, row in rows.items() if row is not None}


def price_of(model: str, overrides: dict[str, Price]) -> Price | None:
    rows = table()
    for name in (model, *(m.group("model") for m in [DATED.fullmatch(model)] if m)):
        found = overrides.get(name) or rows.get(name)
        if found is not None:
            return found
    return None
