"""What a question asks of a clock, and which tools can answer it: a time other than now ("yesterday at noon"),
a tool that tells only the time now (`get_current_time`), a parameter that takes a date."""

from __future__ import annotations

import re
from typing import Any

from router.schemas import properties_of
from router.stages.written import words_of
from router.values import Capability

_DATE_WORD = re.compile(r"(?:^|_)(?:date|day|datetime|when)(?:$|_|[A-Z])|(?:Date|Day)(?:[A-Z]|$)")  # snake or camel


def takes_date(name: str, spec: dict[str, Any]) -> bool:
    """Whether a parameter takes the date itself (named for one, or a date by its format)."""
    return bool(_DATE_WORD.search(name)) or spec.get("format") in ("date", "date-time")


# Another time than now, as a question says it: a day relative to today, a weekday, a part of a day or a time of
# day ("What was the time in Tokyo yesterday at noon?", "Convert 3pm London time to ..."), a time from now ("in 3
# hours"), a date written with slashes, a holiday, the sun's hours; and the time of something that happens ("What time
# does the sun set in Paris?", "What time will it be ...", "What time was it ..."), which a clock does not know.
# Written dates by name are `timezones.dates_in`'s. A question that also says now ("Is it after 5pm in London now?")
# asks about now; "3 hours from now" does not.
_COUNT = (r"(?:\d+(?:\.\d+)?|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|twenty|"
          r"thirty|forty(?:-five)?|forty five|fifty|sixty|ninety|a few|a couple of|several|half an?)")
_SPAN = r"(?:secs?|seconds?|mins?|minutes?|hrs?|hours?|days?|weeks?|months?|years?)"
_ANOTHER_TIME = re.compile(
    r"\b(?:yesterday|tomorrow|tonight|ago|noon|midnight|(?:mon|tues|wednes|thurs|fri|satur|sun)days?|"
    r"(?:last|next) (?:night|week|month|year)|this (?:morning|afternoon|evening)|(?:later|earlier) (?:today|tonight|"
    rf"on|this)|in {_COUNT} {_SPAN}|(?:plus|minus) {_COUNT} {_SPAN}|"
    rf"{_COUNT} {_SPAN} (?:from (?:right )?now|later|earlier|before|after)|sunrise|sunset|sun (?:rises?|sets?)|dawn|"
    r"dusk|(?:start|end|beginning) of the (?:day|week|month|year)|christmas(?! island)|new year'?s?|easter(?! island)|"
    r"what time (?:do(?! (?:you|they|we|people) have)|does|did|will|would|should|shall|can|could|was|were|are|"
    r"is (?!it\b|in\b|at\b|there\b)))\b"
    r"|(?<![\d.:])\d{1,2}(?::\d{2}(?![\d:])|\s*[ap]\.?m\b)|(?<![\w/.])\d{1,4}/\d{1,2}(?:/\d{2,4})?(?![\w/]|[\s-]*hours?\b)",
    re.I)
_SAYS_NOW = re.compile(r"\b(?:(?<!from )(?<!from right )now|yet|still|currently|at the moment)\b", re.I)
_NOW = re.compile(r"\b(?:current|now)\b", re.I)
_CLOCK_WORDS = frozenset({"time", "datetime", "clock", "now"})
_ZONE_LIKE = re.compile(r"zone|tz|locat|city|place|country|region|format", re.I)


def tells_the_time_now(cap: Capability) -> bool:
    """Whether the tool tells the time now: its name speaks of the current time or a clock (`get_current_time`,
    `getCurrentDatetime`, `now`), and it takes nothing but where (a zone, a place) or how to show it, so it
    cannot tell another time."""
    words = set(words_of(cap.name))
    if cap.kind != "tool" or not words & _CLOCK_WORDS:
        return False
    if not ({"current", "now"} & words or _NOW.search(cap.description)):
        return False
    return all(_ZONE_LIKE.search(f"{n} {spec.get('description', '')}") and not takes_date(n, spec)
               for n, spec in properties_of(cap.input_schema).items())


def asks_another_time(question: str) -> bool:
    """Whether the question speaks of another time than now (a written date aside: `timezones.dates_in`)."""
    return bool(_ANOTHER_TIME.search(question)) and not _SAYS_NOW.search(question)


# A tool that answers as of now ("Get real-time exchange rates", `latest_get`), taking no date, range or period: it
# cannot answer about another day, and asked for one it would answer about today. One that also speaks of other times
# ("current weather and forecasts", "historical and live rates") may.
_AS_OF_NOW = re.compile(r"\b(?:real[- ]?time|current(?:ly)?|latest|live|right now|now)\b", re.I)
_OTHER_TIMES = re.compile(r"histor|forecast|past|future|previous|archiv|timeline|series|range|period|\bdates?\b", re.I)
_PERIOD_WORDS = frozenset({"start", "end", "since", "until", "from", "to", "period", "range", "year", "month", "week",
                           "days", "history", "before", "after"})


def answers_as_of_now(cap: Capability) -> bool:
    """Whether the tool only answers as of now: its name or description says so (real-time, current, latest), and
    nothing of it speaks of other times or takes a date or a period."""
    words = set(words_of(cap.name))
    if not (_AS_OF_NOW.search(cap.description) or words & {"current", "latest", "now", "live", "realtime"}):
        return False
    if _OTHER_TIMES.search(f"{cap.name} {cap.description}"):
        return False
    return not any(takes_date(n, spec) or _PERIOD_WORDS & set(words_of(n))
                   for n, spec in properties_of(cap.input_schema).items())


# Another day than today, as a question says it beside a written date (`timezones.dates_in`): a day relative to
# today, or a year by itself ("the rate in 2019"; not "the 2019 models").
_ANOTHER_DAY = re.compile(
    rf"\b(?:yesterday|tomorrow|{_COUNT} {_SPAN} ago|(?:last|next|previous|coming) (?:week|month|year|weekend)|"
    r"(?:in|for|during|from|of|since|until) (?:19|20)\d\d(?=\s*(?:[.,;:!?)]|$)|\s+(?:and|or|to|until)\b))", re.I)


def asks_another_day(question: str) -> bool:
    """Whether the question speaks of another day than today in words (a written date aside)."""
    return bool(_ANOTHER_DAY.search(question))
