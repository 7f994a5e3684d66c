"""Which IANA time zone a place in a question names: a zone's city ("Tokyo", "New York"), the zone itself
("Europe/Paris"), or a country whose zones all keep one clock ("India", "the UK", "Germany"); never a place
that only begins like one ("North Carolina", "Jersey City") or is followed by another region ("Paris,
Texas"), nor a name of two places ("Georgia").

Countries come from the time zone database's own tables (`iso3166.tab`, `zone.tab`), read from the
`tzdata` package or the system's zoneinfo folder. A country of several clocks (the United States,
China with Xinjiang, Spain with the Canaries) names none: which of its zones was meant would be a guess.
"""

from __future__ import annotations

import re
import zoneinfo
from collections import defaultdict
from collections.abc import Callable
from datetime import date, datetime
from functools import lru_cache
from importlib import resources
from pathlib import Path

from router.stages.written import words_of

# Names the database's country table does not use, for countries it lists under another.
_ALSO = {"United Kingdom": "GB", "England": "GB", "Scotland": "GB", "Wales": "GB", "Great Britain": "GB",
         "Czechia": "CZ", "Holland": "NL", "UAE": "AE"}


# Names of more than one place a user may mean (the country or the US state; a fixed offset that is an hour
# off New York's clock all summer): none is taken for a zone.
AMBIGUOUS = frozenset({"georgia", "victoria", "samoa", "est", "mst", "hst", "edt", "cst", "cdt", "pst", "pdt", "ist",
                       "bst"})


def zone_named(name: str, proper: bool) -> str | None:
    """The zone `name` (lower-case words) names; a country only when written as a proper noun (`proper`):
    "a turkey" is not Turkey."""
    if name in AMBIGUOUS:
        return None
    return _zones().get(name) or (_proper_names().get(name) if proper else None)


_WORD_START = re.compile(r"(?<![A-Za-z_/+\-])[A-Za-z]")
_ZONE_WORDS = re.compile(r"[A-Za-z][A-Za-z_/+\-]*(?:\s+[A-Z][a-z]+){0,2}")


def zone_in(question: str, free: Callable[[tuple[int, int]], bool]) -> tuple[tuple[int, int], str] | None:
    """The first place in the question that names a zone, where `free` allows: its span and the zone."""
    best: tuple[int, tuple[int, int], str] | None = None
    # A match may start at any word, so that "in Tokyo" is also tried as "Tokyo"; not inside a longer name
    # ("Saint Petersburg" is not Petersburg, Indiana).
    for word in _WORD_START.finditer(question):
        if _INSIDE_NAME.search(question, max(0, word.start() - 40), word.start()):
            continue
        m = _ZONE_WORDS.match(question, word.start())
        if m is None:
            continue
        text = m.group(0)
        parts = text.split()
        # Longest prefix first: "New York City" -> "new york".
        for n in range(len(parts), 0, -1):
            zone = zone_named(" ".join(parts[:n]).lower(), proper=text[0].isupper())
            if zone is not None:
                end = m.start() + len(" ".join(parts[:n]))
                span = (m.start(), end)
                if (_same_place(parts[:n], parts[n:], zone) and not _elsewhere(question, m.end(), zone)
                        and not _name_goes_on(question, m.end(), zone)
                        and free(span) and (best is None or m.start() < best[0])):
                    best = (m.start(), span, zone)
                break
    return None if best is None else (best[1], best[2])


# A word that begins longer place names just before: "Saint Petersburg" is not Petersburg, Indiana.
_INSIDE_NAME = re.compile(r"\b(?:St|Ste|Saint|Sankt|San|Santa|Santo|Fort|Ft|Port|Mount|Mt|Lake|New|North|South|East|"
                          r"West|Little|Great|Upper|Lower|Grand|Cape|El|La|Las|Los|Le|Les|Des)\.?\s$")
# A particle and a capitalized word after a place: a longer name ("Santiago de Compostela" is in Spain).
_NAME_GOES_ON = re.compile(r"\s+(?:de|del|de la|da|do|dos|das|di|du|am|an|im|von|van|der|sur|upon)\s+([A-Z][a-z]+)")


def _name_goes_on(question: str, end: int, zone: str) -> bool:
    """Whether the place is the start of a longer name, but for the zone's own country ("Santiago de Chile")."""
    m = _NAME_GOES_ON.match(question, end)
    return m is not None and zone not in _country_zones().get(m.group(1).lower(), ())


_CLOCK_WORDS = frozenset({"time", "standard", "daylight"})
_QUALIFIER = re.compile(r",\s*([A-Z][A-Za-z]+(?:\s+[A-Z][A-Za-z]+)?)")


def _same_place(name: list[str], dropped: list[str], zone: str) -> bool:
    """Whether a zone named by the first words of a longer name is the place the whole name means: "Tokyo
    Time", "New York City" and "Berlin Germany" are; "Jersey City", "Paris Texas" and "Panama City" are not."""
    if not dropped or all(w.lower() in _CLOCK_WORDS for w in dropped):
        return True
    if [w.lower() for w in dropped] == ["city"]:  # "Kuwait City" is Kuwait's; "Jersey City" is not Jersey's
        return len(name) > 1 or (name[0].lower() in _countries() and name[0].lower() != "jersey")
    return zone_named(" ".join(dropped).lower(), proper=True) == zone


def _elsewhere(question: str, end: int, zone: str) -> bool:
    """"Paris, Texas", "London, Ontario": a place name followed by a country or a US state or Canadian province
    that does not keep its clock names another place of the same name ("Sydney, Australia", "Chicago, IL" and
    "Kiev, Ukraine" are the zones' own; a word that names no region, "London, John", says nothing)."""
    m = _QUALIFIER.match(question, end)
    if m is None:
        return False
    region = m.group(1).lower() if len(m.group(1)) > 2 else m.group(1)
    countries = _country_zones()
    if region in _NORTH_AMERICA:
        zones = (*countries.get("united states", ()), *countries.get("canada", ()))
    else:
        zones = countries.get(region.lower(), ())
        if not zones:
            return False
    if zone in zones or zone.startswith(("US/", "Canada/")):
        return False
    if any(zone in others for others in countries.values()):
        return True  # another country's own zone ("Panama City, Florida" is not Panama's)
    year = datetime.now().year  # an old name ("Kiev", "America/Montreal"): the same place keeps the same clock
    try:
        return all(_clock(z, year) != _clock(zone, year) for z in zones)
    except zoneinfo.ZoneInfoNotFoundError:
        return True


# US states and Canadian provinces, by name and by postal code (a code counts in capitals only).
_NORTH_AMERICA = frozenset({*(n.lower() for n in (
    "Alabama Alaska Arizona Arkansas California Colorado Connecticut Delaware Florida Hawaii Idaho Illinois Indiana "
    "Iowa Kansas Kentucky Louisiana Maine Maryland Massachusetts Michigan Minnesota Mississippi Missouri Montana "
    "Nebraska Nevada Ohio Oklahoma Oregon Pennsylvania Tennessee Texas Utah Vermont Virginia Washington Wisconsin "
    "Wyoming Alberta Manitoba Ontario Quebec Saskatchewan Yukon Nunavut").split()),
    "new hampshire", "new jersey", "new mexico", "new york", "north carolina", "north dakota", "rhode island",
    "south carolina", "south dakota", "west virginia", "british columbia", "new brunswick", "nova scotia",
    "prince edward", "northwest territories", *(
    "AL AK AZ AR CA CO CT DE FL GA HI ID IL IN IA KS KY LA ME MD MA MI MN MS MO MT NE NV NH NJ NM NY NC ND OH OK OR "
    "PA RI SC SD TN TX UT VT VA WA WV WI WY DC AB BC MB NB NL NS NT NU ON PE QC SK YT").split()})


@lru_cache(maxsize=1)
def _zones() -> dict[str, str]:
    """Each zone by its full name and by its city. The compass and region words of the old names kept for
    compatibility are no city: "North" (Australia/North) and "Eastern" (Canada/Eastern) made zones of "North
    Carolina" and "Eastern Europe"."""
    out: dict[str, str] = {"utc": "UTC", "gmt": "GMT"}
    for zone in sorted(zoneinfo.available_timezones()):
        if zone.startswith(("Etc/", "SystemV/", "posix/", "right/")) or "/" not in zone:
            continue
        out.setdefault(zone.lower(), zone)
        city = zone.rsplit("/", 1)[-1].replace("_", " ").lower()
        if city not in _REGION_WORDS:
            out.setdefault(city, zone)
    return out


_REGION_WORDS = frozenset({"north", "south", "east", "west", "central", "eastern", "western", "mountain", "pacific",
                           "atlantic", "general", "continental", "insular", "arctic"})


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
def _country_zones() -> dict[str, tuple[str, ...]]:
    """Each country's name (lower case) and its zones, of one clock or several, in the table's order."""
    countries, zones = _table("iso3166.tab"), _table("zone.tab")
    if countries is None or zones is None:
        return {}
    zones_of: dict[str, list[str]] = defaultdict(list)
    for row in _rows(zones):
        zones_of[row[0]].append(row[2])
    names = [(name, code) for code, listed in _rows(countries) for name in _names(listed)]
    out: dict[str, tuple[str, ...]] = {}
    for name, code in [*names, *_ALSO.items()]:
        if zones_of.get(code):
            out.setdefault(name.lower(), tuple(zones_of[code]))
    return out


@lru_cache(maxsize=1)
def _country_codes() -> tuple[dict[str, str], re.Pattern[str] | None]:
    """Each country's name (lower case) and its ISO 3166 code, and a pattern of the names, longest first."""
    countries = _table("iso3166.tab")
    if countries is None:
        return {}, None
    codes: dict[str, str] = {}
    for code, listed in _rows(countries):  # in the code's order: "UK" is Britain's before the Virgin Islands' (UK)
        for name in _names(listed):
            codes.setdefault(name.lower(), code)
    codes.update({name.lower(): code for name, code in (*_ALSO.items(), ("USA", "US"), ("US", "US"))})
    names = sorted((n for n in codes if n not in AMBIGUOUS), key=len, reverse=True)
    return codes, re.compile(rf"\b(?:{'|'.join(map(re.escape, names))})\b", re.I)


_CODE = re.compile(r"\bcode\b|\biso\b|alpha-?2|(?:two|2)[- ](?:letter|character)", re.I)


def takes_country_code(name: str, description: str) -> bool:
    """Whether a parameter is for a country's code: `countryCode`, `country_code`, or `country` described as a code
    ("ISO 3166", "two-letter")."""
    words = words_of(name)
    return words[-2:] == ["country", "code"] or (words[-1:] == ["country"] and bool(_CODE.search(description)))


def country_in(question: str, free: Callable[[tuple[int, int]], bool]) -> tuple[tuple[int, int], str] | None:
    """The span and ISO 3166 code of the first country the question names as a proper noun ("China", "the United
    States"; "a turkey" is none, nor "New Jersey"), where `free`."""
    codes, pattern = _country_codes()
    for m in pattern.finditer(question) if pattern is not None else ():
        name = m.group(0)
        if name.split()[-1][0].isupper() and not _INSIDE_NAME.search(question, max(0, m.start() - 8), m.start()) \
                and free(m.span()):
            return m.span(), codes[name.lower()]
    return None


@lru_cache(maxsize=1)
def _countries() -> dict[str, str]:
    """The countries whose zones all keep one clock, and the first of their zones."""
    year = datetime.now().year
    out: dict[str, str] = {}
    for name, listed in _country_zones().items():
        try:
            if len({_clock(z, year) for z in listed}) == 1:
                out[name] = listed[0]
        except zoneinfo.ZoneInfoNotFoundError:
            continue
    return out


# A calendar date a question gives: "March 30", "30 March 2027", "Mar. 30th", "2027-03-30" (a month's name
# capitalised: "may 3 people" is no date).
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_MONTH = rf"({'|'.join(_MONTHS)})[a-z]*\.?"
_DATES = re.compile(rf"\b(?:(\d{{4}})-(\d{{2}})-(\d{{2}})|{_MONTH}\s+(\d{{1,2}})(?:st|nd|rd|th)?(?:,?\s+(\d{{4}}))?|"
                    rf"(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH}(?:,?\s+(\d{{4}}))?)\b")


def dates_in(question: str, today: date) -> list[date]:
    """The calendar dates the question gives (a year left out is `today`'s)."""
    out = []
    for m in _DATES.finditer(question):
        g = m.groups()
        try:
            if g[0]:
                out.append(date(int(g[0]), int(g[1]), int(g[2])))
            else:
                month, day, year = (g[3], g[4], g[5]) if g[3] else (g[7], g[6], g[8])
                out.append(date(int(year or today.year), _MONTHS.index(month[:3]) + 1, int(day)))
        except ValueError:  # "February 30"
            continue
    return out


def gap_changes(zones: list[str], clock: str, day: date, now: datetime) -> tuple[str, str, float] | None:
    """Two of `zones` (canonical names) whose difference in offset from UTC at `clock` (HH:MM) on `day` is not the one
    they keep `now`, and by how many hours: a time converted between them as of today would be that far off on that
    day. (London and Paris change their clocks together; London and New York do not, nor London and Sydney.)"""
    try:
        hour, minute = map(int, clock.split(":"))
        first, *others = (zoneinfo.ZoneInfo(z) for z in zones)
        then = [datetime(day.year, day.month, day.day, hour, minute, tzinfo=tz).utcoffset() for tz in (first, *others)]
    except (ValueError, zoneinfo.ZoneInfoNotFoundError):
        return None
    current = [now.astimezone(tz).utcoffset() for tz in (first, *others)]
    for i, zone in enumerate(zones[1:], 1):
        a, b, c, d = then[0], then[i], current[0], current[i]
        if None not in (a, b, c, d) and (a - b) != (c - d):  # type: ignore[operator]
            return zones[0], zone, abs(((a - b) - (c - d)).total_seconds()) / 3600  # type: ignore[operator]
    return None


# A time of day: "9am", "11 p.m.", "14:30", "noon", "midnight"; a bare number is none.
_TIME = re.compile(r"\b(?:(\d{1,2})(?::(\d{2}))?\s*([ap])?(?(3)\.?\s?m\b\.?)|(noon|midday|midnight)\b)", re.I)


def time_of_day_in(question: str, free: Callable[[tuple[int, int]], bool]) -> tuple[tuple[int, int], str] | None:
    """The span and the time (HH:MM, 24 hours) of the first time of day the question gives where `free`."""
    for m in _TIME.finditer(question):
        if m.group(4):
            if free(m.span()):
                return m.span(), "00:00" if m.group(4).lower() == "midnight" else "12:00"
            continue
        hour, minute, meridiem = int(m.group(1)), int(m.group(2) or 0), (m.group(3) or "").lower()
        if not m.group(2) and not meridiem:
            continue  # a bare number is not a time
        if meridiem == "p" and hour < 12:  # "pm", "p.m.", "p m"
            hour += 12
        if meridiem == "a" and hour == 12:
            hour = 0
        if hour < 24 and minute < 60 and free(m.span()):
            return m.span(), f"{hour:02d}:{minute:02d}"
    return None
