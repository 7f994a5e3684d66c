"""A seventh catalog nobody tuned for: a payment server (Stripe's MCP server, from npm) beside the official
filesystem, memory, git and time servers, asked plain requests of a payment account. Its server annotates every tool,
and 13 of its 22 may change something that costs money: they create customers, prices, payment links, invoices and
coupons, finalize invoices, refund payments, cancel and update subscriptions and answer disputes. Its requests name
Stripe's objects by their IDs ("customer cus_123456", "payment intent pi_123456") and amounts with their currency.
Each request names the tools that would do it (none: nothing here does it rightly) and, where it gives them, the
values the call must carry: a call of the right tool that leaves out the customer or the product the question
names, or that takes "20 USD" for 20 cents, is wrong. The router's dry run says what it would call; nothing is
called, and the server is given a key no account has (it lists its tools without reaching Stripe).

    npm install --prefix .state/payment-servers @stripe/mcp@0.2.5
    python benchmarks/payment_servers.py [--servers .state/payment-servers] [--json OUT] [--show]

A request answered by one of its tools, with its values, is right, otherwise wrong; a refusal (404, 409, 422) is
neither.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.official_servers import READ, arguments, dry_runs_beside, installed, report

Request = tuple[str, tuple[str, ...], dict[str, Any]]  # the request, the tools that would do it, the values they take
CUSTOMER = {"customer": "cus_123456"}
REQUESTS: list[Request] = [
    ("List my Stripe customers", ("list_customers",), {}), ("Show the last 5 customers", ("list_customers",), {}),
    ("Find the customer with email jane@example.com", ("list_customers",), {"email": "jane@example.com"}),
    ("What is my Stripe balance?", ("retrieve_balance",), {}),
    ("How much money is in my account?", ("retrieve_balance",), {}), ("List all products", ("list_products",), {}),
    ("Show the prices of product prod_ABC123", ("list_prices",), {"product": "prod_ABC123"}),
    ("List invoices for customer cus_123456", ("list_invoices",), CUSTOMER),
    ("Show payment intents of customer cus_123456", ("list_payment_intents",), CUSTOMER),
    ("List active subscriptions", ("list_subscriptions",), {"status": "active"}),
    ("Which subscriptions does customer cus_123456 have?", ("list_subscriptions",), CUSTOMER),
    ("List coupons", ("list_coupons",), {}), ("Show open disputes", ("list_disputes",), {}),
    ("How do I set up webhooks in Stripe?", ("search_stripe_documentation",), {}),
    ("How do I accept Apple Pay with Stripe?", ("search_stripe_documentation",), {}),
    ("Create a customer named Jane Doe with email jane@example.com", ("create_customer",),
     {"name": "Jane Doe", "email": "jane@example.com"}),
    ("Add a product called Premium Plan", ("create_product",), {"name": "Premium Plan"}),
    ("Create a price of 20 USD for product prod_ABC123", ("create_price",),
     {"product": "prod_ABC123", "unit_amount": 2000}),  # the amount is in cents
    ("Make a payment link for price price_123", ("create_payment_link",), {"price": "price_123"}),
    ("Create an invoice for customer cus_123456", ("create_invoice",), CUSTOMER),
    ("Finalize invoice in_123456", ("finalize_invoice",), {"invoice": "in_123456"}),
    ("Refund payment intent pi_123456", ("create_refund",), {"payment_intent": "pi_123456"}),
    ("Refund $50 of payment pi_123456", ("create_refund",), {"payment_intent": "pi_123456", "amount": 5000}),
    ("Cancel subscription sub_123456", ("cancel_subscription",), {"subscription": "sub_123456"}),
    ("Create a 25% off coupon called SPRING", ("create_coupon",), {"name": "SPRING", "percent_off": 25}),
    ("Submit evidence for dispute dp_123456", ("update_dispute",), {"dispute": "dp_123456"}),
    ("Switch subscription sub_123456 to price price_789", ("update_subscription",), {"subscription": "sub_123456"}),
    ("Cancel my subscription", ("cancel_subscription",), {}),
    ("Refund everything", (), {}), ("Cancel it", (), {}), ("Delete all customers", (), {}),
    ("Charge Jane $100", (), {}), ("Send an invoice reminder to all customers", (), {}),
    # The other servers' own requests, which a payment server beside them should not take.
    ("Read {root}/notes.txt", READ, {}), ("Show me the git status", ("git_status",), {}),
    ("What time is it in Tokyo?", ("get_current_time",), {"timezone": "Asia/Tokyo"}),
]


def payment_backend(servers: Path) -> dict[str, Any]:
    script = installed(servers / "node_modules" / "@stripe" / "mcp" / "dist" / "index.js")
    return {"name": "stripe", "kind": "mcp_stdio", "command": "node",
            "args": [str(script), "--tools=all", "--api-key=sk_test_not_an_account"]}


def with_values(rows: list[dict[str, Any]], requests: list[Request]) -> list[dict[str, Any]]:
    """Each row as `dry_runs_beside` gives it, a call of the right tool without the values its request gives wrong."""
    for row, (_, _, values) in zip(rows, requests, strict=True):
        given = row["arguments"] or {}
        if row["outcome"] == "right" and any(given.get(k) != v for k, v in values.items()):
            row["outcome"], row["called"] = "wrong", f"{row['called']} {json.dumps(given)}"
    return rows


def run(doc: str, servers: str, folder: str, backend: Callable[[Path, Path], dict[str, Any]],
        requests: list[Request]) -> None:
    """A catalog benchmark whose requests give their values: its options (`doc`, where its `servers` are installed),
    the dry runs in `folder` with the backend `backend` configures beside the official servers (given the servers'
    folder and the scratch folder), and the report."""
    args = arguments(doc, servers=servers).parse_args()
    rows = dry_runs_beside(folder, lambda tmp: backend(Path(args.servers), tmp),
                           [(request, tools) for request, tools, _ in requests])
    report(with_values(rows, requests), args.show, args.json)


def main() -> None:
    run(__doc__, ".state/payment-servers", "mcp-router-seventh-catalog",
        lambda servers, _: payment_backend(servers), REQUESTS)


if __name__ == "__main__":
    main()
