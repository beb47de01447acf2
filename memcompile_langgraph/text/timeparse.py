"""Session-time parsing and claim event-time normalization (the tau and t fields of Eq. 2, App. B.1).

`parse_session_time` turns a recorded session time into ISO 8601. `normalize_event_time` resolves the first
time expression of a claim against that anchor. Its output formats, and the conventions where English is
ambiguous:

- a day: "2023-05-07"; a month: "2023-04"; a year: "2022"; a season: "2022-summer" (the year the season starts
  in, so winter 2022 is Dec 2022 - Feb 2023; the year prefix keeps prefix matching on years working);
- a week: "week of 2023-05-01", always the Monday of that Monday-Sunday week;
- "last <weekday>" is the latest such day strictly before the anchor, "next <weekday>" the first strictly after
  it, "this <weekday>" that day of the anchor's own week; "last/this/next weekend" and "N weekends ago" give the
  Saturday of the previous/current/next (N-th previous) week;
- "a couple of" counts 2, "a few" and "several" count 3, "a"/"an" count 1;
- "last <season>" is the latest such season that ended before the anchor month, "next <season>" the first
  that starts after it, "this <season>" the one in the anchor's year;
- an ongoing state dates from its start: "I've had them for 3 years now", "I've been playing for a month" said
  on 2022-01-23 give "2019" and "2021-12" (the statement's time minus the duration, at the duration's unit);
- vague expressions ("recently", "the other day", "lately") and bare weekdays give "" (no reliable date).

"" is returned when the text has no resolvable expression, or only relative ones and no anchor.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from datetime import date, datetime, timedelta, timezone
from functools import lru_cache

from dateutil import parser as _dateutil_parser

_MONTHS = {
    name: i + 1
    for i, names in enumerate(
        [
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ]
    )
    for name in names
}
_WEEKDAYS = {
    name: i
    for i, names in enumerate(
        [
            ("monday", "mon"),
            ("tuesday", "tue", "tues"),
            ("wednesday", "wed"),
            ("thursday", "thu", "thur", "thurs"),
            ("friday", "fri"),
            ("saturday", "sat"),
            ("sunday",),
        ]
    )
    for name in names
}
_SEASON_START = {"spring": 3, "summer": 6, "fall": 9, "autumn": 9, "winter": 12}
_SEASON_LABEL = {"autumn": "fall"}
_COUNTS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "couple": 2,
    "few": 3,
    "several": 3,
}


def _alternation(words) -> str:
    return "|".join(sorted(words, key=len, reverse=True))


_MONTH = _alternation(_MONTHS)
_MONTH_FULL = _alternation(n for n in _MONTHS if len(n) > 3 or n == "may")
_WEEKDAY = _alternation(_WEEKDAYS)
_SEASON = _alternation(_SEASON_START)
_COUNT = r"\d{1,3}|(?:a\s+)?couple(?:\s+of)?|(?:a\s+)?few|several|an?|" + _alternation(
    w for w in _COUNTS if w not in ("a", "an", "couple", "few", "several")
)
_ORD = r"(?:st|nd|rd|th)?"
# how much a duration is hedged by ("for about 3 years now"); the count is read as said
_ABOUT = r"(?:(?:about|almost|nearly|over|around|roughly|more\s+than|less\s+than|just\s+(?:under|over))\s+)?"
_YEAR = r"(?:19|20)\d{2}"

# One alternation scanned once per claim; at a given position the more specific alternatives come first.
# The leading word-start check lets the scan skip positions inside words without trying every alternative.
_EXPRESSION = re.compile(
    r"\b(?=\w)(?:"
    + "|".join(
        [
            rf"(?P<iso>\b(?P<iso_y>{_YEAR})[-/](?P<iso_m>\d{{1,2}})[-/](?P<iso_d>\d{{1,2}})\b)",
            rf"(?P<dmy>\b(?P<dmy_d>\d{{1,2}}){_ORD}\s+(?:of\s+)?(?P<dmy_m>{_MONTH})\b\.?"
            rf"(?:(?:,\s*|\s+)(?P<dmy_y>{_YEAR})\b)?)",
            rf"(?P<mdy>\b(?P<mdy_m>{_MONTH})\.?\s+(?P<mdy_d>\d{{1,2}}){_ORD}\b(?!:)(?:(?:,\s*|\s+)(?P<mdy_y>{_YEAR})\b)?)",
            rf"(?P<my>\b(?P<my_m>{_MONTH})\.?,?\s+(?:of\s+)?(?P<my_y>{_YEAR})\b)",
            rf"(?P<sy>\b(?P<sy_s>{_SEASON})\s+(?:of\s+)?(?P<sy_y>{_YEAR})\b)",
            # an ongoing state, from its start: "for N units now", or a perfect tense ("have been/had ... for N
            # units") within the same clause; before "ago" and "in N units", which it contains no part of
            rf"(?P<dur>\b(?:(?:have|has|(?<=['’])ve)\s+(?:not\s+)?(?:been|had|known|\w+ed)\b(?:\s+[\w'’]+){{0,5}}?\s+)?"
            rf"for\s+{_ABOUT}(?:the\s+(?:past|last)\s+)?(?P<dur_n>{_COUNT})\s+(?P<dur_u>day|week|month|year)s?"
            rf"(?P<dur_now>\s+now)?\b)",
            rf"(?P<ago>\b(?P<ago_n>{_COUNT})\s+(?P<ago_u>day|week|weekend|month|year)s?\s+ago\b)",
            rf"(?P<ahead>\bin\s+(?P<ahead_n>{_COUNT})\s+(?P<ahead_u>day|week|month|year)s?\b)",
            r"(?P<dby>\bthe\s+day\s+before\s+yesterday\b)",
            r"(?P<dat>\bthe\s+day\s+after\s+tomorrow\b)",
            r"(?P<rel>\b(?P<rel_w>this\s+past|last|this|next|past)\s+"
            r"(?P<rel_u>week|weekend|month|year|night|morning|afternoon|evening))\b",
            rf"(?P<wd>\b(?P<wd_w>this\s+past|last|this|next|coming)\s+(?P<wd_d>{_WEEKDAY})\b)",
            rf"(?P<sea>\b(?P<sea_w>last|this|next|past)\s+(?P<sea_s>{_SEASON})\b)",
            rf"(?P<mon>\b(?P<mon_w>in|during|since|until|by|through|early|mid|late|last|next|this|of)\s+"
            rf"(?:(?:early|mid|late|the\s+end\s+of|the\s+beginning\s+of)\s+|mid-)?(?P<mon_m>{_MONTH_FULL})\b"
            rf"(?!\.?,?\s+(?:of\s+)?{_YEAR}\b|\s*\d))",
            r"(?P<day>\b(?P<day_w>yesterday|today|tonight|tomorrow)\b)",
            rf"(?P<yr>\b(?:in|since|from|during|of|by|until|around|back\s+in|in\s+the\s+year)\s+"
            rf"(?P<yr_y>{_YEAR})\b(?!-))",
        ]
    )
    + ")",
    re.IGNORECASE,
)
# Every alternative needs one of these words (or a digit); most claims have none and skip the scan.
_TRIGGERS = frozenset(
    [*_MONTHS, *_WEEKDAYS, *_SEASON_START, *"0123456789", "ago", "yesterday", "today", "tonight", "tomorrow"]
    + [f"{unit}{s}" for unit in ("day", "week", "weekend", "month", "year") for s in ("", "s")]
    + ["night", "morning", "afternoon", "evening"]
)
_TRIGGER_TOKEN = re.compile(r"[a-z]+|\d")

_LOCOMO_TIME = re.compile(
    rf"^(\d{{1,2}}):(\d{{2}})\s*([ap])\.?\s*m\.?\s+on\s+(\d{{1,2}}){_ORD}\s+([a-z]+)\.?,?\s+(\d{{4}})$", re.I
)
_SLASH_TIME = re.compile(r"^(\d{4})/(\d{1,2})/(\d{1,2})(?:\s*\([a-z]{2,9}\))?(?:\s+(\d{1,2}):(\d{2}))?$", re.I)
_DAY_MONTH_YEAR = re.compile(rf"^(?:[a-z]+,?\s+)?(\d{{1,2}}){_ORD}\s+([a-z]+)\.?,?\s+(\d{{4}})$", re.I)
_MONTH_DAY_YEAR = re.compile(rf"^(?:[a-z]+,?\s+)?([a-z]+)\.?\s+(\d{{1,2}}){_ORD},?\s+(\d{{4}})$", re.I)
_HAS_YEAR = re.compile(r"\b\d{4}\b")


def parse_session_time(raw: str) -> str | None:
    """A recorded session time as ISO 8601 ("2023-05-08T13:56:00"), or None when it cannot be read.

    Accepts LoCoMo ("1:56 pm on 8 May, 2023"), LongMemEval ("2023/05/20 (Sat) 02:21"), ISO 8601 (offsets and
    "Z" are kept, as "+00:00") and plain dates ("8 May 2023", "May 8, 2023", "2023/05/08"); date-only inputs
    get midnight.
    """
    if not isinstance(raw, str) or not raw.strip():
        return None
    return _parse_session_time(raw.strip())


@lru_cache(maxsize=4096)
def _parse_session_time(raw: str) -> str | None:
    try:
        moment = _parse_known_formats(raw)
        if moment is None and _HAS_YEAR.search(raw):
            moment = _dateutil_parser.parse(raw)
        return moment.isoformat() if moment else None  # inside: an offset of 24 h or more fails only here
    except (ValueError, OverflowError, TypeError):
        return None


@lru_cache(maxsize=4096)
def session_moment(iso: str) -> str:
    """A parsed session time as it orders against others: one with a UTC offset as the same moment in UTC (offset
    dropped), so times given in different zones compare by when they were; one without an offset as it is."""
    try:
        when = datetime.fromisoformat(iso)
        return iso if when.tzinfo is None else when.astimezone(timezone.utc).replace(tzinfo=None).isoformat()
    except (ValueError, OverflowError):  # a row edited by hand, or a moment at the end of the calendar
        return iso


def _parse_known_formats(raw: str) -> datetime | None:
    if m := _LOCOMO_TIME.match(raw):
        hour, minute, half, day, month, year = m.groups()
        hour = int(hour) % 12 + (12 if half.lower() == "p" else 0)
        return datetime(int(year), _month_number(month), int(day), hour, int(minute))
    if m := _SLASH_TIME.match(raw):
        year, month, day, hour, minute = m.groups()
        return datetime(int(year), int(month), int(day), int(hour or 0), int(minute or 0))
    if m := _DAY_MONTH_YEAR.match(raw):
        day, month, year = m.groups()
        return datetime(int(year), _month_number(month), int(day))
    if m := _MONTH_DAY_YEAR.match(raw):
        month, day, year = m.groups()
        return datetime(int(year), _month_number(month), int(day))
    try:
        return datetime.fromisoformat(raw)
    except ValueError:
        return None


def _month_number(name: str) -> int:
    number = _MONTHS.get(name.lower())
    if number is None:
        raise ValueError(f"unknown month {name!r}")
    return number


@lru_cache(maxsize=4096)
def _anchor_date(anchor: str | None) -> date | None:
    if not anchor:
        return None
    try:
        return date.fromisoformat(anchor[:10])
    except ValueError:
        parsed = parse_session_time(anchor)
        return date.fromisoformat(parsed[:10]) if parsed else None


def normalize_event_time(text: str, anchor_iso: str | None) -> str:
    """The first resolvable time expression of `text` as "YYYY-MM-DD", "YYYY-MM", "YYYY", "YYYY-<season>" or
    "week of YYYY-MM-DD" (Monday); "" when there is none. See the module docstring for the conventions."""
    if not text or _TRIGGERS.isdisjoint(_TRIGGER_TOKEN.findall(text.lower())):
        return ""
    anchor = _anchor_date(anchor_iso)
    for match in _EXPRESSION.finditer(text):
        try:
            assert match.lastgroup is not None  # every alternative of _EXPRESSION is a named group
            value = _RESOLVERS[match.lastgroup](match, anchor)
        except (ValueError, OverflowError):  # e.g. "31 February", or an anchor arithmetic overflow
            value = None
        if value:
            return value
    return ""


# A leap year, so that "February 29" named without a year resolves.
_YEARLESS_ANCHOR = date(2000, 1, 1)


def question_time(text: str) -> str:
    """The time a question names: a part of a month or a range of days as an interval of days ("the last week of
    August 2023" -> "2023-08-25/2023-08-31"); an absolute time as normalize_event_time gives it without an anchor
    ("in April 2022" -> "2022-04"); else a month or a day named without a year ("in June", "on April 10"), as ISO
    8601's year-less "--06" / "--04-10" (and "--11-08/--11-14"): a question asked after the conversation does not
    say which year it means, and relative words ("last May") need the time of asking, which a stored question does
    not have. "" when none."""
    if not text or _TRIGGERS.isdisjoint(_TRIGGER_TOKEN.findall(text.lower())):
        return ""
    if narrower := _part_or_range(text):
        return narrower
    value = normalize_event_time(text, None)
    if value:
        return value
    for match in _EXPRESSION.finditer(text):
        kind = match.lastgroup
        if kind in ("dmy", "mdy") or (kind == "mon" and _direction(match["mon_w"]) == 0):
            try:
                resolved = _RESOLVERS[kind](match, _YEARLESS_ANCHOR)
            except ValueError:  # "31 February"
                resolved = None
            if resolved:
                return "--" + resolved[5:]
    return ""


# Spans a question names that are narrower than what it names them by: a part of a month ("the second week of
# November", "the last week of August 2023", "the first half of September") and a range of days ("between August 11
# and August 15 2023"), as an ISO 8601 interval of days, year-less ("--11-08/--11-14") without a year.
_PART = re.compile(
    rf"\b(?P<which>first|second|third|fourth|last)\s+(?P<part>week|half)\s+of\s+(?P<month>{_MONTH_FULL})\b"
    rf"(?:,?\s+(?P<year>{_YEAR})\b)?",
    re.IGNORECASE,
)
_ORDINAL = {"first": 1, "second": 2, "third": 3, "fourth": 4}
_BETWEEN = re.compile(r"\b(?:between|from)\s*$", re.IGNORECASE)
_AND = re.compile(r"^\s*(?:and|to|until|through|-)\s*$", re.IGNORECASE)


def _part_or_range(text: str) -> str:
    if (m := _PART.search(text)) and m["month"][0].isupper():
        year = int(m["year"]) if m["year"] else 2001  # a year-less part: in a common year (February's last week)
        month, end = _MONTHS[m["month"].lower()], _month_end(year, _MONTHS[m["month"].lower()]).day
        which = m["which"].lower()
        if m["part"].lower() == "half":
            first, last = (1, 15) if which == "first" else (16, end)
        else:
            first = end - 6 if which == "last" else 7 * _ORDINAL[which] - 6
            last = min(first + 6, end)
        return _interval(date(year, month, first), date(year, month, last), bool(m["year"]))
    days = [(m, m.lastgroup) for m in _EXPRESSION.finditer(text) if m.lastgroup in ("dmy", "mdy")]
    for (a, kind_a), (b, kind_b) in zip(days, days[1:]):
        assert kind_a is not None and kind_b is not None
        if _BETWEEN.search(text[: a.start()]) and _AND.match(text[a.end() : b.start()]):
            named = a[f"{kind_a}_y"] or b[f"{kind_b}_y"]
            anchor = date(int(named), 1, 1) if named else _YEARLESS_ANCHOR
            try:
                first, last = _RESOLVERS[kind_a](a, anchor), _RESOLVERS[kind_b](b, anchor)
            except ValueError:
                return ""
            if first and last and first <= last:
                return _interval(date.fromisoformat(first), date.fromisoformat(last), bool(named))
    return ""


def _interval(first: date, last: date, with_year: bool) -> str:
    if with_year:
        return f"{first.isoformat()}/{last.isoformat()}"
    return f"--{first.isoformat()[5:]}/--{last.isoformat()[5:]}"


def year_spans(value: str, years: Iterable[int]) -> list[tuple[date, date]]:
    """The spans a time covers: its own (time_span), or for a year-less "--MM", "--MM-DD" or "--MM-DD/--MM-DD" its
    span in each of `years` (none where a day does not exist, e.g. February 29)."""
    span = time_span(value)
    if span is not None:
        return [span]
    if _YEARLESS_INTERVAL.match(value):
        first, last = value.split("/")
        pairs = [(time_span(f"{y:04d}-{first[2:]}"), time_span(f"{y:04d}-{last[2:]}")) for y in years]
        return [(a[0], b[1]) for a, b in pairs if a is not None and b is not None and a[0] <= b[1]]
    if not _YEARLESS.match(value):
        return []
    out = []
    for year in years:
        span = time_span(f"{year:04d}-{value[2:]}")
        if span is not None:
            out.append(span)
    return out


# --- resolvers: (match, anchor or None) -> normalized string, or None when not resolvable ---


def _day(d: date) -> str:
    return d.isoformat()


def _month(year: int, month: int) -> str:
    return f"{year:04d}-{month:02d}"


def _week(d: date) -> str:
    return f"week of {_monday(d).isoformat()}"


def _monday(d: date) -> date:
    return d - timedelta(days=d.weekday())


def _shift_month(year: int, month: int, delta: int) -> tuple[int, int]:
    index = year * 12 + month - 1 + delta
    return index // 12, index % 12 + 1


def _count(word: str) -> int:
    words = word.lower().split()
    return (
        int(words[0]) if words[0].isdecimal() else _COUNTS[words[1] if words[0] == "a" and len(words) > 1 else words[0]]
    )


def _resolve_iso(m, anchor):
    return _day(date(int(m["iso_y"]), int(m["iso_m"]), int(m["iso_d"])))


def _resolve_day_month(day: str, month: str, year: str | None, anchor: date | None) -> str | None:
    if year:
        number = int(year)
    elif anchor is not None:
        number = anchor.year
    else:
        return None
    return _day(date(number, _MONTHS[month.lower()], int(day)))


def _resolve_dmy(m, anchor):
    return _resolve_day_month(m["dmy_d"], m["dmy_m"], m["dmy_y"], anchor)


def _resolve_mdy(m, anchor):
    if m["mdy_m"].lower() == "may" and not m["mdy_m"][0].isupper():
        return None  # "I may 2 ..." is the modal verb
    return _resolve_day_month(m["mdy_d"], m["mdy_m"], m["mdy_y"], anchor)


def _resolve_my(m, anchor):
    return _month(int(m["my_y"]), _MONTHS[m["my_m"].lower()])


def _resolve_sy(m, anchor):
    season = m["sy_s"].lower()
    return f"{int(m['sy_y'])}-{_SEASON_LABEL.get(season, season)}"


def _resolve_dur(m, anchor):
    if not m["dur_now"] and not m.group("dur").lower().startswith(("have", "has", "ve")):
        return None  # "for two weeks" alone is how long, not since when
    return _offset(anchor, -_count(m["dur_n"]), m["dur_u"].lower())


def _resolve_ago(m, anchor):
    return _offset(anchor, -_count(m["ago_n"]), m["ago_u"].lower())


def _resolve_ahead(m, anchor):
    return _offset(anchor, _count(m["ahead_n"]), m["ahead_u"].lower())


def _offset(anchor: date | None, n: int, unit: str) -> str | None:
    if anchor is None:
        return None
    if unit == "day":
        return _day(anchor + timedelta(days=n))
    if unit == "week":
        return _week(anchor + timedelta(weeks=n))
    if unit == "weekend":
        return _day(_monday(anchor) + timedelta(weeks=n, days=5))
    if unit == "month":
        return _month(*_shift_month(anchor.year, anchor.month, n))
    year = anchor.year + n
    return f"{year:04d}" if 1 <= year <= 9999 else None  # four digits, as time_span reads a year


def _resolve_dby(m, anchor):
    return _day(anchor - timedelta(days=2)) if anchor else None


def _resolve_dat(m, anchor):
    return _day(anchor + timedelta(days=2)) if anchor else None


_DAY_OFFSETS = {"yesterday": -1, "today": 0, "tonight": 0, "tomorrow": 1}


def _resolve_day(m, anchor):
    return _day(anchor + timedelta(days=_DAY_OFFSETS[m["day_w"].lower()])) if anchor else None


def _direction(word: str) -> int:
    word = " ".join(word.lower().split())
    return -1 if word in ("last", "past", "this past") else 1 if word in ("next", "coming") else 0


def _resolve_rel(m, anchor):
    if anchor is None:
        return None
    step, unit = _direction(m["rel_w"]), m["rel_u"].lower()
    if unit in ("night", "morning", "afternoon", "evening"):
        return _day(anchor + timedelta(days=min(step, 0)))  # "last night" is the evening before
    return _offset(anchor, step, unit)


def _resolve_wd(m, anchor):
    if anchor is None:
        return None
    weekday, step = _WEEKDAYS[m["wd_d"].lower()], _direction(m["wd_w"])
    if step < 0:
        return _day(anchor - timedelta(days=(anchor.weekday() - weekday) % 7 or 7))
    if step > 0:
        return _day(anchor + timedelta(days=(weekday - anchor.weekday()) % 7 or 7))
    return _day(_monday(anchor) + timedelta(days=weekday))


def _resolve_sea(m, anchor):
    if anchor is None:
        return None
    season = m["sea_s"].lower()
    start, step = _SEASON_START[season], _direction(m["sea_w"])
    now = anchor.year * 12 + anchor.month - 1
    if step < 0:  # latest occurrence whose last month is before the anchor month
        year = (now - (start - 1) - 3) // 12
    elif step > 0:  # first occurrence starting after the anchor month
        year = (now - (start - 1)) // 12 + 1
    else:
        year = anchor.year - (1 if season == "winter" and anchor.month <= 2 else 0)
    return f"{year}-{_SEASON_LABEL.get(season, season)}"


def _resolve_mon(m, anchor):
    name = m["mon_m"]
    if not name[0].isupper():
        return None  # lower-case "may"/"march" are verbs far more often than months
    month = _MONTHS[name.lower()]
    if anchor is None:
        return None
    step = _direction(m["mon_w"]) if m["mon_w"].lower() in ("last", "next") else 0
    year = anchor.year
    if step < 0 and month >= anchor.month:
        year -= 1
    elif step > 0 and month <= anchor.month:
        year += 1
    return _month(year, month)


def _resolve_yr(m, anchor):
    return m["yr_y"]


_RESOLVERS = {
    "iso": _resolve_iso,
    "dmy": _resolve_dmy,
    "mdy": _resolve_mdy,
    "my": _resolve_my,
    "sy": _resolve_sy,
    "dur": _resolve_dur,
    "ago": _resolve_ago,
    "ahead": _resolve_ahead,
    "dby": _resolve_dby,
    "dat": _resolve_dat,
    "rel": _resolve_rel,
    "wd": _resolve_wd,
    "sea": _resolve_sea,
    "mon": _resolve_mon,
    "day": _resolve_day,
    "yr": _resolve_yr,
}


# --- spans: the days a normalized time covers ---

_ISO_DAY = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_YEARLESS = re.compile(r"^--\d{2}(?:-\d{2})?$")
_YEARLESS_INTERVAL = re.compile(r"^--\d{2}-\d{2}/--\d{2}-\d{2}$")
_INTERVAL = re.compile(r"^\d{4}-\d{2}-\d{2}/\d{4}-\d{2}-\d{2}$")
_ISO_MONTH = re.compile(r"^(\d{4})-(\d{2})$")
_SPAN_SEASON = re.compile(r"^(\d{4})-([a-z]+)$")


def _month_end(year: int, month: int) -> date:
    y, m = _shift_month(year, month, 1)
    return date(y, m, 1) - timedelta(days=1)


@lru_cache(maxsize=8192)
def time_span(value: str) -> tuple[date, date] | None:
    """The first and last day a normalize_event_time value covers (a session time's date too); None when it is
    empty or unreadable."""
    value = value.strip()
    try:
        if _INTERVAL.match(value):  # a range of days (question_time)
            start, end = date.fromisoformat(value[:10]), date.fromisoformat(value[11:])
            return (start, end) if start <= end else None
        if value.startswith("week of "):
            monday = date.fromisoformat(value[8:])
            return monday, monday + timedelta(days=6)
        if _ISO_DAY.match(value[:10]) and (len(value) == 10 or value[10] in "T "):
            day = date.fromisoformat(value[:10])
            return day, day
        if month := _ISO_MONTH.match(value):
            year, number = int(month[1]), int(month[2])
            return date(year, number, 1), _month_end(year, number)
        if value.isdecimal() and len(value) == 4:
            return date(int(value), 1, 1), date(int(value), 12, 31)
        if (season := _SPAN_SEASON.match(value)) and season[2] in _SEASON_START:
            year, first = int(season[1]), _SEASON_START[season[2]]
            last_year, last = _shift_month(year, first, 2)
            return date(year, first, 1), _month_end(last_year, last)
    except ValueError:
        return None
    return None


def spans_overlap(a: tuple[date, date], b: tuple[date, date]) -> bool:
    return a[0] <= b[1] and b[0] <= a[1]


_AS_OF = re.compile(r"\d{4}-\d\d-\d\d(?:[T ]\d\d:\d\d(?::\d\d)?(?:Z|[+-]\d\d:\d\d)?)?")


def validate_as_of(value: object) -> str | None:
    """The latest moment a statement may have been made to count (`as_of` of a query), as "YYYY-MM-DDTHH:MM:SS", with
    its UTC offset when it has one: a date means its whole day. None stays None (everything said counts); anything
    else is a one-line ValueError."""
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.isoformat(timespec="seconds")
    if isinstance(value, date):
        return f"{value.isoformat()}T23:59:59"
    text = value.strip() if isinstance(value, str) else ""
    if not _AS_OF.fullmatch(text):
        raise ValueError(f"as_of must be a date or a time in ISO 8601 (2024-03-31, 2024-03-31T18:00), got {value!r}")
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"as_of is not a real date or time: {value!r}") from None
    return when.isoformat(timespec="seconds") if len(text) > 10 else f"{text}T23:59:59"


def said_by_time(as_of: str) -> Callable[[str], bool]:
    """Stored session time -> whether it is not after `as_of` (validate_as_of's). Two times with UTC offsets compare as
    moments; otherwise by their clock readings: a time without an offset is read on the clock of the one it meets."""
    clock = as_of[:19]
    if not _has_offset(as_of):
        return lambda t: t[:19] <= clock
    moment = session_moment(as_of)
    return lambda t: session_moment(t) <= moment if _has_offset(t) else t[:19] <= clock


@lru_cache(maxsize=4096)
def _has_offset(iso: str) -> bool:
    try:
        return datetime.fromisoformat(iso).tzinfo is not None
    except ValueError:  # a row edited by hand: compared by its text
        return False
