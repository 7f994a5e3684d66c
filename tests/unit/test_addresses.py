"""Street addresses, routes and labelled codes read from a question for the parameters that take them."""

from __future__ import annotations

import pytest

from router.errors import ArgumentsRequired
from router.stages.arguments import derive_arguments
from tests.unit.test_arguments import tool

_LINE = {"type": "string"}
VERIFY = tool("verifyUSAddress", {"type": "object", "required": ["addressLine1", "city", "state", "zipCode"],
                                  "properties": {"addressLine1": _LINE, "addressLine2": _LINE, "city": _LINE,
                                                 "state": _LINE, "zipCode": _LINE}}, backend="lob")
GEOCODE = tool("maps_geocode", {"type": "object", "required": ["address"], "properties": {
    "address": {"type": "string", "description": "The address to geocode"}}}, backend="maps")
DIRECTIONS = tool("maps_directions", {"type": "object", "required": ["origin", "destination"], "properties": {
    "origin": _LINE, "destination": _LINE,
    "mode": {"type": "string", "enum": ["driving", "walking", "bicycling", "transit"]}}}, backend="maps")
MATRIX = tool("maps_distance_matrix", {"type": "object", "required": ["origins", "destinations"], "properties": {
    "origins": {"type": "array", "items": _LINE}, "destinations": {"type": "array", "items": _LINE}}},
              backend="maps")


@pytest.mark.parametrize(("question", "parts"), [
    ("Is this address deliverable? Here's the address: 123 Main St, Apt 4B, New York, NY, 10001.",
     {"addressLine1": "123 Main St", "addressLine2": "Apt 4B", "city": "New York", "state": "NY", "zipCode": "10001"}),
    ("Standardize 456 Elm Street, Suite 789, Los Angeles, CA 90012",
     {"addressLine1": "456 Elm Street", "addressLine2": "Suite 789", "city": "Los Angeles", "state": "CA",
      "zipCode": "90012"}),
    ("Verify 987 Oak St, San Francisco, CA, 94107", {"addressLine1": "987 Oak St", "city": "San Francisco",
                                                     "state": "CA", "zipCode": "94107"}),
])
def test_a_street_address_fills_the_parameters_for_its_parts(question: str, parts: dict[str, str]) -> None:
    # Before, a 422: no rule read an address, and its numbers were no operands.
    assert derive_arguments(VERIFY, question)[0] == parts


@pytest.mark.parametrize("question", [
    "Verify my address in Boston, MA 02110",  # no street: the city, state and ZIP code of what?
    "Verify 123 Main St",  # a street without a city, state or ZIP code the call requires
    "Is the weather nice in New York, NY?",
])
def test_parts_come_only_from_a_street_address_the_question_writes(question: str) -> None:
    derived = derive_arguments(VERIFY, question)
    assert isinstance(derived, ArgumentsRequired)


def test_a_parameter_for_a_whole_address_takes_all_of_it() -> None:
    assert derive_arguments(GEOCODE, "Geocode 1600 Amphitheatre Parkway, Mountain View")[0] == {
        "address": "1600 Amphitheatre Parkway, Mountain View"}
    assert derive_arguments(GEOCODE, "Where is 221B Baker Street?")[0] == {"address": "221B Baker Street"}
    email = tool("send", {"type": "object", "required": ["address"], "properties": {
        "address": {"type": "string", "description": "The e-mail address to write to"}}})
    assert isinstance(derive_arguments(email, "Write to 123 Main St, Springfield"), ArgumentsRequired)


@pytest.mark.parametrize(("question", "origin", "destination"), [
    ("Directions from Paris to Lyon by train", "Paris", "Lyon"),
    ("Walking directions from the Louvre to Notre Dame", "the Louvre", "Notre Dame"),
    ("How long does it take to drive from Boston to New York?", "Boston", "New York"),
    ("What is the distance between Berlin and Munich?", "Berlin", "Munich"),
])
def test_a_route_fills_its_ends(question: str, origin: str, destination: str) -> None:
    args = derive_arguments(DIRECTIONS, question)[0]
    assert (args["origin"], args["destination"]) == (origin, destination)
    assert derive_arguments(MATRIX, question)[0] == {"origins": [origin], "destinations": [destination]}


def test_walking_directions_walk() -> None:
    assert derive_arguments(DIRECTIONS, "Walking directions from the Louvre to Notre Dame")[0]["mode"] == "walking"


@pytest.mark.parametrize("question", ["Open from Monday to Friday", "Move it from draft to published",
                                      "Shift from 9am to 5pm"])
def test_what_is_no_route_fills_no_end(question: str) -> None:
    assert isinstance(derive_arguments(DIRECTIONS, question), ArgumentsRequired)


ICAO = tool("getAirport", {"type": "object", "required": ["icao_code"], "properties": {
    "icao_code": {"type": "string", "description": "The ICAO code of the target airport"}}})
FAA = tool("charts_get", {"type": "object", "required": ["apt"], "properties": {
    "apt": {"type": "string", "description": "FAA or ICAO airport identifier (KAVL or AVL)"}}})


@pytest.mark.parametrize(("question", "icao", "apt"), [
    ("Get me the charts for Los Angeles International Airport (ICAO: KLAX)", "KLAX", "KLAX"),
    ("Find the details of Asheville Regional Airport using its FAA identifier, AVL", None, "AVL"),
    ("Which airport has the ICAO code KSFO?", "KSFO", "KSFO"),
    # Several codes for a parameter that takes one, or none at all.
    ('Retrieve the airports with the ICAO code "EDDH" and "EDDF"', None, None),
    ("Compare JFK (ICAO: KJFK) and LaGuardia (ICAO: KLGA)", None, None),
    ('Get the ICAO code and website of the airport named "Frankfurt Airport"', None, None),
])
def test_a_code_labelled_with_its_standard_fills_a_parameter_that_names_it(question: str, icao: str | None,
                                                                           apt: str | None) -> None:
    for capability, parameter, code in ((ICAO, "icao_code", icao), (FAA, "apt", apt)):
        derived = derive_arguments(capability, question)
        if code is None:
            assert isinstance(derived, ArgumentsRequired)
        else:
            assert derived[0] == {parameter: code}
