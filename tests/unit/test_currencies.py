"""Currencies a question names, filling the currency parameters of real servers' schemas (LiveMCPBench's exchange
rate server, ToolAlpaca's currency APIs)."""

from __future__ import annotations

from typing import Any

import pytest

from router.values import Capability
from tests.unit.helpers import derives

# Exchange Rate MCP Server (LiveMCPBench), and a converter whose ToolAlpaca schema marks nothing required.
EXCHANGE_RATE = Capability(backend="exchange", name="exchange_rate", read_only=True, input_schema={
    "type": "object", "required": ["baseCurrency", "targetCurrency"], "properties": {
        "baseCurrency": {"type": "string", "description": "The base currency code (e.g., NOK, USD)"},
        "targetCurrency": {"type": "string", "description": "The target currency code (e.g., EUR, USD)"},
        "date": {"type": "string", "description": "Optional date in YYYY-MM-DD format."}}})
CURRENCY_CONVERT = Capability(backend="CurrencyBeacon", name="convert_get", read_only=True, input_schema={
    "type": "object", "properties": {
        "from": {"description": "Required. string. The base currency you would like to use for your rates."},
        "to": {"description": "string. The currency you would like to convert to."}}})
LATEST = Capability(backend="CurrencyBeacon", name="latest_get", read_only=True, input_schema={
    "type": "object", "properties": {
        "base": {"description": "Required. string. The base currency you would like to use for your rates."},
        "symbols": {"description": "string. A list of currencies you want to see the rates for."}}})


@pytest.mark.parametrize(("cap", "question", "arguments"), [
    # "exchange_rate needs the argument 'baseCurrency'" for "the current exchange rate of RMB to USD".
    (EXCHANGE_RATE, "Take the current exchange rate of RMB to USD", {"baseCurrency": "CNY", "targetCurrency": "USD"}),
    (EXCHANGE_RATE, "Convert 100 USD to EUR", {"baseCurrency": "USD", "targetCurrency": "EUR"}),
    (EXCHANGE_RATE, "How many EUR is 100 USD?", {"baseCurrency": "USD", "targetCurrency": "EUR"}),  # the amount's
    (EXCHANGE_RATE, "What is the euro worth in yen?", {"baseCurrency": "EUR", "targetCurrency": "JPY"}),
    (EXCHANGE_RATE, "Convert 100 dollars to euros", None),  # which dollar is not said
    (EXCHANGE_RATE, "How is the eurozone doing?", None),  # "eur" is part of a word
    # Called with nothing before; a currency named twice is one currency, and a list of them takes none.
    (CURRENCY_CONVERT, "Convert 500 Euros to US dollars: from EUR to USD", {"from": "EUR", "to": "USD"}),
    (LATEST, "Rates for USD against EUR, GBP and EUR", {"base": "USD", "symbols": "EUR,GBP"}),
    # A currency the router did not know left its place to the next one: "THB to USD" gave USD as the base.
    (LATEST, "Rates for THB to USD", {"base": "THB", "symbols": "USD"}),
    (LATEST, "Rates for the US dollar against the Euro, British pound, and Japanese yen",
     {"base": "USD", "symbols": "EUR,GBP,JPY"}),
    (Capability(backend="fx", name="rates", read_only=True, input_schema={"type": "object", "properties": {
        "base": {"type": "string", "description": "The base currency"},
        "currencies": {"type": "array", "items": {"type": "string"}}}}),
     "Rates of the yen against USD and EUR", {"base": "JPY", "currencies": ["USD", "EUR"]}),
])
def test_a_currency_named_by_its_code_or_a_name_of_one_currency_fills_a_currency_parameter(
        cap: Capability, question: str, arguments: dict[str, Any] | None) -> None:
    derives(cap, question, arguments)
