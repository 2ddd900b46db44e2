"""What an instance-hour costs: the AWS Price List API when it answers, else a dated table.

Order of precedence for each (instance type, region, job kind):

1. ``--price TYPE=USD_PER_HOUR`` given by the user (a negotiated rate, a Savings Plan);
2. the AWS Price List API (boto3 ``pricing``, served from us-east-1 only), product family of
   SageMaker with ``usagetype`` ``<REGION>-Train:<type>`` or ``-Processing:<type>``, On-Demand;
3. ``data/prices.json``: a few common types in a couple of regions, with its source and date.

Every price carries where it came from, and every report prints it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from pipeline.errors import UserError

TABLE = Path(__file__).resolve().parent / "data" / "prices.json"
PRICING_REGION = "us-east-1"  # the Price List API's endpoint (also ap-south-1, eu-central-1)
SERVICE_CODE = "AmazonSageMaker"
KIND_USAGE = {"Training": "Train", "Processing": "Processing"}


@dataclass(frozen=True)
class Price:
    usd_per_hour: float
    source: str


class PriceMissing(UserError):
    """No price for a type in a region: the message names what to pass."""


def missing_message(instance_type: str, region: str) -> str:
    return (f"no price for {instance_type} in {region} (not in the Price List API answer nor in "
            f"the shipped table {TABLE.name}): pass --price {instance_type}=USD_PER_HOUR")


@cache
def table() -> dict:
    return json.loads(TABLE.read_text())


def table_price(instance_type: str, region: str) -> Price | None:
    doc = table()
    value = doc["regions"].get(region, {}).get(instance_type)
    if value is None:
        return None
    return Price(float(value), f"table {doc['source']}, as of {doc['as_of']}")


def parse_overrides(items: list[str] | None) -> dict[str, float]:
    """``["ml.p3.2xlarge=3.1", ...]`` -> {type: USD/h}; one clear line for a bad item."""
    out = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        try:
            price = float(value)
        except ValueError:
            price = -1.0
        if not sep or not name.strip() or price < 0:
            raise UserError(f"--price {item!r}: expected INSTANCE_TYPE=USD_PER_HOUR, e.g. "
                            "--price ml.p3.2xlarge=3.825")
        out[name.strip()] = price
    return out


def region_usage_prefix(usagetype: str) -> str:
    return usagetype.split("-", 1)[0] if "-" in usagetype else ""


def api_price(client, instance_type: str, region: str, kind: str = "Training") -> Price | None:
    """On-Demand USD/hour from the Price List API (``client`` is a boto3 ``pricing`` client);
    None when it has no such product."""
    usage = f"{KIND_USAGE.get(kind, 'Train')}:{instance_type}"
    pages = client.get_paginator("get_products").paginate(
        ServiceCode=SERVICE_CODE,
        Filters=[
            {"Type": "TERM_MATCH", "Field": "regionCode", "Value": region},
            {"Type": "TERM_MATCH", "Field": "instanceName", "Value": instance_type},
        ],
    )
    for page in pages:
        for item in page.get("PriceList", []):
            product = json.loads(item) if isinstance(item, str) else item
            attributes = product.get("product", {}).get("attributes", {})
            if not str(attributes.get("usagetype", "")).endswith(usage):
                continue
            for term in product.get("terms", {}).get("OnDemand", {}).values():
                for dimension in term.get("priceDimensions", {}).values():
                    usd = dimension.get("pricePerUnit", {}).get("USD")
                    if usd is not None and float(usd) > 0:
                        return Price(float(usd), f"AWS Price List API ({SERVICE_CODE} "
                                                 f"{attributes.get('usagetype')}, On-Demand)")
    return None


class PriceBook:
    """Prices for one report: overrides, then the API (if a client was given and answers),
    then the table. Answers are remembered; an API failure is said once and not retried."""

    def __init__(self, overrides: dict[str, float] | None = None, pricing_client=None):
        self.overrides = dict(overrides or {})
        self.client = pricing_client
        self.api_problem: str | None = None
        self._cache: dict[tuple[str, str, str], Price | None] = {}

    def find(self, instance_type: str, region: str, kind: str = "Training") -> Price | None:
        if instance_type in self.overrides:
            return Price(self.overrides[instance_type], "--price given by the user")
        key = (instance_type, region, kind)
        if key not in self._cache:
            found = None
            if self.client is not None and self.api_problem is None:
                try:
                    found = api_price(self.client, instance_type, region, kind)
                except Exception as error:  # no credentials, no permission, no network
                    self.api_problem = f"Price List API unavailable ({type(error).__name__}: " \
                                       f"{str(error).splitlines()[0][:120]}); using the shipped table"
            self._cache[key] = found or table_price(instance_type, region)
        return self._cache[key]

    def get(self, instance_type: str, region: str, kind: str = "Training") -> Price:
        found = self.find(instance_type, region, kind)
        if found is None:
            raise PriceMissing(missing_message(instance_type, region))
        return found


def pricing_client(session=None):
    """A boto3 ``pricing`` client on the API's own endpoint, or None without credentials."""
    import boto3

    from pipeline import aws_clients

    session = session or boto3.session.Session()
    if session.get_credentials() is None:
        return None
    return aws_clients.client(session, "pricing", region=PRICING_REGION)
