"""Payments as tools take them: an object named for its kind by its ID ("customer cus_123456"), for a parameter named
for the kind whose description says it takes the ID; amounts in cents only from an amount whose currency the question
writes; and an update that would change nothing refused. Schemas as Stripe's MCP server (npm `@stripe/mcp` 0.2.5)
lists them; each case was a call leaving out what the question named, or a refusal, on that server."""

from __future__ import annotations

import pytest

from router.errors import ArgumentsRequired
from router.stages.arguments import derive_arguments
from router.stages.names import kind_identified_by
from router.values import Capability


def _tool(tool: str, required: list[str], read_only: bool = False, **properties: dict) -> Capability:
    return Capability(backend="stripe", name=tool, read_only=read_only,
                      input_schema={"type": "object", "required": required, "properties": properties})


def _id_of(kind: str, to: str) -> dict:
    return {"type": "string", "description": f"The ID of the {kind} to {to}."}


LIMIT = {"type": "integer", "minimum": 1, "maximum": 100}
LIST_INVOICES = _tool("list_invoices", [], read_only=True, customer=_id_of("customer", "list invoices for"),
                      limit=LIMIT)
CREATE_PRICE = _tool("create_price", ["product", "unit_amount", "currency"], product=_id_of("product", "price"),
                     unit_amount={"type": "integer", "description": "The unit amount of the price in cents."},
                     currency={"type": "string", "description": "The currency of the price."})
REFUND = _tool("create_refund", ["payment_intent"], payment_intent=_id_of("PaymentIntent", "refund"),
               amount={"type": "integer", "description": "The amount to refund in cents."})


@pytest.mark.parametrize(("parameter", "description", "kind"), [
    ("payment_intent", "The ID of the PaymentIntent to refund.", "payment intent"),
    ("customer", "The ID of the customer to list invoices for.", "customer"),
    ("charge", "Only return disputes associated to the charge specified by this charge ID.", "charge"),
    ("channel_id", "", "channel"),
    ("customer", "The customer to bill.", None),  # no ID said
    ("name", "The name of the customer.", None),
    ("product", "The ID of the price the product has.", None),  # the ID of another kind
])
def test_a_parameter_named_for_its_kind_takes_an_identifier_where_its_description_says_so(
        parameter: str, description: str, kind: str | None) -> None:
    assert kind_identified_by(parameter, description) == kind


@pytest.mark.parametrize(("question", "customer"), [
    ("List invoices for customer cus_123456", "cus_123456"),
    ("List the invoices of the customer with ID cus_9", "cus_9"),
    ("List invoices for my best customer", None),  # no identifier: every invoice, as asked
    ("List invoices for customers cus_1 and cus_2", None),  # several: which is the caller's to say
])
def test_a_listing_is_filtered_by_the_object_the_question_names(question: str, customer: str | None) -> None:
    # It was called with nothing: every customer's invoices, for a question about one customer's.
    args, _ = derive_arguments(LIST_INVOICES, question)
    assert args.get("customer") == customer


@pytest.mark.parametrize(("question", "cents"), [
    ("Create a price of 20 USD for product prod_ABC123", 2000),  # was unit_amount 20: twenty cents
    ("Create a price of 19.99 USD for product prod_ABC123", 1999),
    ("Create a price of 20 euros for product prod_ABC123", 2000),
    ("Create a price of 500 JPY for product prod_ABC123", 500),  # the yen has no minor unit
    ("Create a price of 250 cents in USD for product prod_ABC123", 250),
    ("Create a price of 20 for product prod_ABC123", None),  # dollars or cents: unsaid
    ("Create a price of 1.005 USD for product prod_ABC123", None),  # no whole number of cents
])
def test_an_amount_in_cents_is_taken_only_with_its_currency(question: str, cents: int | None) -> None:
    derived = derive_arguments(CREATE_PRICE, question)
    if cents is None:
        assert isinstance(derived, ArgumentsRequired) and derived.details["missing"] == "unit_amount"
    else:
        assert derived[0]["unit_amount"] == cents and derived[0]["product"] == "prod_ABC123"


def test_an_optional_amount_in_cents_is_left_out_rather_than_guessed() -> None:
    assert derive_arguments(REFUND, "Refund $50 of payment intent pi_123456")[0] == {
        "payment_intent": "pi_123456", "amount": 5000}
    assert derive_arguments(REFUND, "Refund 50 of payment intent pi_123456")[0] == {"payment_intent": "pi_123456"}


def test_an_update_given_only_which_object_by_its_id_is_refused() -> None:
    # "Submit evidence for dispute dp_123456" was `update_dispute(dispute=dp_123456)`: it submits and changes nothing.
    update = _tool("update_dispute", ["dispute"], dispute={"type": "string", "description": "The ID of the dispute"},
                   evidence={"type": "object"}, submit={"type": "boolean"})
    refused = derive_arguments(update, "Submit evidence for dispute dp_123456")
    assert isinstance(refused, ArgumentsRequired) and "would change" in refused.message


@pytest.mark.parametrize(("question", "name"), [
    ("Create a customer named Jane Doe with email jane@example.com", "Jane Doe"),  # was a 422 asking for `name`
    ("Add a product called Premium Plan", "Premium Plan"),
    ('Add a product called "premium plan" please', "premium plan"),
    ("Create a customer named jane", "jane"),
    ("Add a product called premium plan", None),  # where the name ends is unsaid
    ("Create a customer named Jane Doe Smith junior", None),
])
def test_what_a_thing_is_called_names_it(question: str, name: str | None) -> None:
    create = _tool("create_customer", ["name"], name={"type": "string", "description": "The name of the customer"},
                   email={"type": "string", "format": "email"})
    derived = derive_arguments(create, question)
    assert (derived[0]["name"] if isinstance(derived, tuple) else None) == name


def test_a_share_is_no_amount_because_the_description_names_a_parameter_for_one() -> None:
    # "Create a 25% off coupon called SPRING" took 25 for `amount_off`, whose description names `percent_off`.
    coupon = _tool("create_coupon", ["name", "amount_off"], name={"type": "string"},
                   percent_off={"type": "number", "description": "The discount the coupon will apply"},
                   amount_off={"type": "number", "description": "The amount to subtract from an invoice total "
                                                                "(required if percent_off is not passed)"})
    refused = derive_arguments(coupon, "Create a 25% off coupon called SPRING")
    assert isinstance(refused, ArgumentsRequired) and refused.details["missing"] == "amount_off"
