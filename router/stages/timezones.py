"""Which IANA time zone a place in a question names: a zone's city ("Tokyo", "New York"), the zone itself
("Europe/Paris"), or a country whose zones all keep one clock ("India", "the UK", "Germany").

Countries come from the time zone database's own tables (`iso3166.tab`, `zone.tab`), read from the
`tzdata` package or the system's zoneinfo folder. A country of several clocks (the United States,
China with Xinjiang, Spain with the Canaries) names none: which of its zones was meant would be a guess.
"""

from __future__ import annotations

import zoneinfo
from collections import defaultdict
from datetime import datetime
from functools import lru_cache
from importlib import resources
from pathlib import Path

# Names the database's country table does not use, for countries it lists under another.
_ALSO = {"United Kingdom": "GB", "England": "GB", "Scotland": "GB", "Wales": "GB", "Great Britain": "GB",
         "Czechia": "CZ", "Holland": "NL", "UAE": "AE"}


# Names of more than one place a user may mean (the country or the US state; a fixed offset that is an hour
# off New York's clock all summer): none is taken for a zone.
AMBIGUOUS = frozenset({"georgia", "est", "mst", "hst", "edt", "cst", "cdt", "pst", "pdt", "ist", "bst"})


def zone_named(name: str, proper: bool) -> str | None:
    """The zone `name` (lower-case words) names; a country only when written as a proper noun (`proper`):
    "a turkey" is not Turkey."""
    if name in AMBIGUOUS:
        return None
    return _zones().get(name) or (_proper_names().get(name) if proper else None)


@lru_cache(maxsize=1)
def _zones() -> dict[str, str]:
    """Each zone by its full name, and each zone of the database's own table (`zone.tab`) by its city. The old
    names kept for compatibility give no city: "North" (Australia/North), "Eastern" (Canada/Eastern) and
    "Petersburg" (America/Indiana/Petersburg, for Saint Petersburg) made zones of "North Carolina",
    "Eastern Europe" and Russia's second city."""
    listed = _table("zone.tab")
    cities = {row[2] for row in _rows(listed)} if listed else None
    out: dict[str, str] = {"utc": "UTC", "gmt": "GMT"}
    for zone in sorted(zoneinfo.available_timezones()):
        if zone.startswith(("Etc/", "SystemV/", "posix/", "right/")) or "/" not in zone:
            continue
        out.setdefault(zone.lower(), zone)
        if cities is None or zone in cities:
            out.setdefault(zone.rsplit("/", 1)[-1].replace("_", " ").lower(), zone)
    return out


@lru_cache(maxsize=1)
def _proper_names() -> dict[str, str]:
    """Countries, then the database's old names without a region ("Japan", "Turkey", "Navajo")."""
    out = dict(_countries())
    for zone in zoneinfo.available_timezones():
        if "/" not in zone:
            out.setdefault(zone.lower(), zone)
    return out


def _table(name: str) -> str | None:
    try:
        return resources.files("tzdata").joinpath("zoneinfo", name).read_text(encoding="utf-8")
    except (ModuleNotFoundError, FileNotFoundError):
        pass
    for folder in zoneinfo.TZPATH:
        path = Path(folder) / name
        if path.is_file():
            return path.read_text(encoding="utf-8")
    return None


def _rows(text: str) -> list[list[str]]:
    return [line.split("\t") for line in text.splitlines() if line and not line.startswith("#")]


def _clock(zone: str, year: int) -> tuple:
    """A zone's offsets in January and July: two zones with the same keep one clock."""
    tz = zoneinfo.ZoneInfo(zone)
    return tuple(datetime(year, month, 1, 12, tzinfo=tz).utcoffset() for month in (1, 7))


def _names(listed: str) -> list[str]:
    """"Britain (UK)" -> Britain, UK; "Korea (South)" -> South Korea."""
    if "(" not in listed:
        return [listed]
    main, _, rest = listed.partition("(")
    inner = rest.rstrip(")").strip()
    return [main.strip(), inner] if inner.isupper() else [f"{inner} {main.strip()}"]


@lru_cache(maxsize=1)
def _countries() -> dict[str, str]:
    countries, zones = _table("iso3166.tab"), _table("zone.tab")
    if countries is None or zones is None:
        return {}
    zones_of: dict[str, list[str]] = defaultdict(list)
    for row in _rows(zones):
        zones_of[row[0]].append(row[2])
    year = datetime.now().year
    names = [(name, code) for code, listed in _rows(countries) for name in _names(listed)]
    out: dict[str, str] = {}
    for name, code in [*names, *((name, code) for name, code in _ALSO.items())]:
        listed = zones_of.get(code, [])
        try:
            if listed and len({_clock(z, year) for z in listed}) == 1:
                out.setdefault(name.lower(), listed[0])
        except zoneinfo.ZoneInfoNotFoundError:
            continue
    return out
