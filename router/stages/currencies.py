"""Currencies a question names, for the parameters that take them: by ISO 4217 code in capitals ("100 USD",
"EUR/USD"; "eur" is part of a word), or by a name that means one currency only ("euros", "the US dollar", "Thai
baht"; not "dollars" or "pesos", which several countries use).

    currencies_in("Convert 500 euros to USD", free, set())    # [((8, 13), "EUR"), ((17, 20), "USD")]
    takes_currency("baseCurrency", "")                        # True; "symbols" ("A list of currencies"): a list
"""

from __future__ import annotations

import re
from collections.abc import Callable

from router.stages.written import words_of

# The active ISO 4217 codes, and bitcoin's and ether's, without those that are also words or common abbreviations
# written in capitals (ALL, BOB, CUP, GEL, MAD, MOP, PEN, SOS, TOP; AMD, BSD, CDF, CVE, IRR, MDL, MNT, NIO, NPR, PHP,
# SAR, SDG, SHP, STN, SVC): a question about a PHP script, a SAR image or CVE-2021-44228 names no currency.
_CODES = frozenset("""
    AED AFN ANG AOA ARS AUD AWG AZN BAM BBD BDT BGN BHD BIF BMD BND BRL BTN BWP BYN BZD CAD CHF CLP CNY COP CRC CZK
    DJF DKK DOP DZD EGP ERN ETB EUR FJD FKP GBP GHS GIP GMD GNF GTQ GYD HKD HNL HTG HUF IDR ILS INR IQD ISK JMD
    JOD JPY KES KGS KHR KMF KPW KRW KWD KYD KZT LAK LBP LKR LRD LSL LYD MGA MKD MMK MRU MUR MVR MWK MXN MYR MZN
    NAD NGN NOK NZD OMR PAB PGK PKR PLN PYG QAR RON RSD RUB RWF SBD SCR SEK SGD SLE SRD SSP SYP SZL THB TJS
    TMT TND TRY TTD TWD TZS UAH UGX USD UYU UZS VES VND VUV WST XAF XAG XAU XCD XOF XPF YER ZAR ZMW ZWL BTC ETH
    """.split())
# Names of one currency each; RMB is the yuan's everyday name, CNY its code.
_NAMES = {
    r"(?:US|U\.S\.|American)\s+dollars?": "USD", r"Canadian\s+dollars?": "CAD", r"Australian\s+dollars?": "AUD",
    r"New\s+Zealand\s+dollars?": "NZD", r"Hong\s+Kong\s+dollars?": "HKD", r"Singapore\s+dollars?": "SGD",
    r"euros?": "EUR", r"British\s+pounds?|pounds?\s+sterling": "GBP", r"(?:Japanese\s+)?yen": "JPY",
    r"(?:Chinese\s+)?yuan|renminbi|RMB": "CNY", r"Swiss\s+francs?": "CHF", r"Indian\s+rupees?": "INR",
    r"(?:Thai\s+)?baht": "THB", r"(?:South\s+)?Korean\s+won": "KRW", r"(?:Russian\s+)?(?:rubles?|roubles?)": "RUB",
    r"Mexican\s+pesos?": "MXN", r"Brazilian\s+(?:reais|real)": "BRL", r"Turkish\s+lira": "TRY", r"bitcoins?": "BTC",
}
_NAMED = [(re.compile(pattern, re.I), code) for pattern, code in _NAMES.items()]
# The codes grouped by first letter ("A(?:ED|FN|...)"): one alternation of them all cost 35 µs a question.
_BY_LETTER = "|".join(f"{a}(?:{'|'.join(sorted(c[1:] for c in _CODES if c[0] == a))})"
                      for a in sorted({c[0] for c in _CODES}))
CURRENCY = re.compile(rf"(?<![A-Za-z])(?:{_BY_LETTER})(?![A-Za-z])|(?i:\b(?:{'|'.join(_NAMES)})\b)")
_ONE_CURRENCY = re.compile(r"\bcurrency\b(?!\s+(?:codes|pairs)\b)", re.I)
_CURRENCIES = re.compile(r"\bcurrencies\b|\bcurrency\s+(?:codes|symbols)\b", re.I)
_ROLES = frozenset({"base", "from", "to", "source", "target", "quote"})


def takes_currency(name: str, description: str) -> bool:
    """Whether a parameter takes one currency: named for one (`baseCurrency`, `to_currency`), or a base, from or to
    described as one ("The base currency you would like to use"); not a list ("symbols": "A list of currencies")."""
    words = words_of(name)
    return (bool(words) and words[-1] == "currency") or (words[:1] == words[-1:] and words[0] in _ROLES
                                                        and bool(_ONE_CURRENCY.search(description)))


def takes_currencies(name: str, description: str) -> bool:
    """Whether a parameter takes a list of currencies (`currencies`; `symbols`: "A list of currencies")."""
    words = words_of(name)
    return bool(words) and (words[-1] == "currencies" or (words[-1].endswith("s") and bool(_CURRENCIES.search(
        description))))


def currencies_in(question: str, free: Callable[[tuple[int, int]], bool],
                  taken: set[str]) -> list[tuple[tuple[int, int], str]]:
    """The span and code of each currency the question names where `free`, in order, once each, other than those
    `taken` ("500 euros ... from EUR to USD" gives EUR, then USD)."""
    found: list[tuple[tuple[int, int], str]] = []
    for m in CURRENCY.finditer(question):
        code = currency_code(m.group(0))
        if code is not None and code not in taken and free(m.span()):
            found.append((m.span(), code))
            taken = taken | {code}
    return found


def currency_code(text: str) -> str | None:
    """The code of the currency `text` names, as `CURRENCY` matches it, else None."""
    if text in _CODES:
        return text
    return next((code for pattern, code in _NAMED if pattern.fullmatch(text)), None)


# ISO 4217's minor units: none for these, three for these, two for the rest (and for any dollar, euro or pound).
_NO_MINOR = frozenset("BIF CLP DJF GNF ISK JPY KMF KRW PYG RWF UGX VND VUV XAF XOF XPF".split())
_THREE_MINOR = frozenset("BHD IQD JOD KWD LYD OMR TND".split())
_IN_MINOR_UNITS = re.compile(r"\bcents\b|\bsmallest (?:currency )?unit|\bminor (?:currency )?units?\b|"
                             r"\blowest denomination\b", re.I)
_CENTS_AFTER = re.compile(r"\s*(?:cents?|\u00a2)(?!\w)", re.I)
_SYMBOL_BEFORE = re.compile(r"(?:US\$|\$|\u20ac|\u00a3)\s*$")  # dollars, euros, pounds: two minor digits each
_DOLLARS_AFTER = re.compile(r"\s*(?:dollars?|bucks)\b", re.I)


def takes_minor_units(name: str, description: str) -> bool:
    """Whether a parameter takes an amount of money in minor units: "The unit amount of the price in cents"."""
    return "cents" in words_of(name) or bool(_IN_MINOR_UNITS.search(description))


def in_minor_units(question: str, span: tuple[int, int], amount: float) -> int | None:
    """The amount at `span` in its currency's minor units ("$20" or "20 USD" is 2000, "20 JPY" 20, "150 cents" 150),
    or None where the question writes no currency beside it: a bare "20" may be dollars or cents."""
    start, end = span
    if _CENTS_AFTER.match(question, end):
        return int(amount) if float(amount).is_integer() else None
    after = CURRENCY.match(question, end + len(question[end:]) - len(question[end:].lstrip()))
    before = re.search(rf"(?:{CURRENCY.pattern})\s*$", question[max(0, start - 40):start])
    code = currency_code(after.group(0)) if after else currency_code(before.group(0).strip()) if before else None
    if code is None and not (_SYMBOL_BEFORE.search(question, 0, start) or _DOLLARS_AFTER.match(question, end)):
        return None
    digits = 0 if code in _NO_MINOR else 3 if code in _THREE_MINOR else 2
    minor = round(amount * 10 ** digits, 6)
    return int(minor) if float(minor).is_integer() else None  # "$1.005" is no whole number of cents
