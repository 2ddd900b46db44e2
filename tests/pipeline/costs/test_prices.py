"""Prices: the Price List API (stubbed: moto does not serve it), the shipped table, overrides."""

from __future__ import annotations

import json

import boto3
import pytest
from botocore.stub import Stubber

from pipeline.costs import prices
from pipeline.errors import UserError


def product(usagetype: str, usd: str) -> str:
    return json.dumps({
        "product": {"productFamily": "ML Instance", "attributes": {
            "usagetype": usagetype, "instanceName": "ml.p3.2xlarge", "regionCode": "eu-west-1"}},
        "terms": {"OnDemand": {"T1": {"priceDimensions": {"D1": {
            "unit": "Hrs", "pricePerUnit": {"USD": usd}}}}}},
    })


def pricing_stub(price_list: list[str]):
    client = boto3.client("pricing", region_name="us-east-1", aws_access_key_id="x",
                          aws_secret_access_key="y")
    stubber = Stubber(client)
    stubber.add_response("get_products", {"PriceList": price_list, "FormatVersion": "aws_v1"}, {
        "ServiceCode": "AmazonSageMaker",
        "Filters": [{"Type": "TERM_MATCH", "Field": "regionCode", "Value": "eu-west-1"},
                    {"Type": "TERM_MATCH", "Field": "instanceName", "Value": "ml.p3.2xlarge"}],
    })
    return client, stubber


def test_the_api_price_of_the_training_usage_type_is_used():
    client, stubber = pricing_stub([product("EU-Host:ml.p3.2xlarge", "4.0"),
                                    product("EU-Train:ml.p3.2xlarge", "4.284")])
    with stubber:
        price = prices.PriceBook(pricing_client=client).get("ml.p3.2xlarge", "eu-west-1")
    assert price.usd_per_hour == pytest.approx(4.284)
    assert "Price List API" in price.source and "EU-Train:ml.p3.2xlarge" in price.source


def test_an_api_failure_falls_back_to_the_table_and_says_so_once():
    client = boto3.client("pricing", region_name="us-east-1", aws_access_key_id="x",
                          aws_secret_access_key="y")
    stubber = Stubber(client)
    stubber.add_client_error("get_products", "AccessDeniedException", "no pricing:GetProducts")
    book = prices.PriceBook(pricing_client=client)
    with stubber:
        price = book.get("ml.c5.xlarge", "us-east-1")
        assert book.get("ml.m5.xlarge", "us-east-1").usd_per_hour == pytest.approx(0.23)  # not asked again
    assert price.usd_per_hour == pytest.approx(0.204)
    assert "as of" in price.source
    assert "AccessDeniedException" in book.api_problem


def test_a_missing_price_names_what_to_pass():
    with pytest.raises(prices.PriceMissing) as error:
        prices.PriceBook().get("ml.c5.xlarge", "ap-east-1")
    assert str(error.value).endswith("pass --price ml.c5.xlarge=USD_PER_HOUR")
    assert "\n" not in str(error.value)


def test_overrides_win_and_bad_ones_are_one_line():
    assert prices.PriceBook({"ml.c5.xlarge": 0.1}).get("ml.c5.xlarge", "us-east-1").usd_per_hour == 0.1
    with pytest.raises(UserError, match="expected INSTANCE_TYPE=USD_PER_HOUR"):
        prices.parse_overrides(["ml.c5.xlarge"])
