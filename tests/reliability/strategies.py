"""Hypothesis strategies for hostile input: any JSON value, any Unicode (lone surrogates included), line breaks."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st

# the fast suite runs each property a few dozen to hundreds of times; MEMCOMPILE_HYPOTHESIS_SCALE=20 runs it longer
SCALE = int(os.environ.get("MEMCOMPILE_HYPOTHESIS_SCALE", "1"))


def examples(n: int) -> settings:
    """n examples (times SCALE), no deadline (a store write varies in time), no slow "explain" phase."""
    phases = (Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink)
    return settings(
        max_examples=n * SCALE,
        deadline=None,
        phases=phases,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )


# every code point str.splitlines() ends a line at, and the separators of a provenance header
LINE_BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
SEPARATORS = "|[]"
TURN_FIELDS = (
    "speaker",
    "text",
    "time",
    "session",
    "session_label",
    "dia_id",
    "image_caption",
    "image_query",
    "blip_caption",
    "query",
)

# every code point, surrogates too (what json.loads makes of "\ud800")
any_unicode = st.text(st.characters(exclude_categories=()), max_size=40)
# text dense in what forges headers: breaks, separators, header-like pieces, controls, joiners, surrogates
hostile_text = st.lists(
    st.one_of(
        st.sampled_from(
            [
                *LINE_BREAKS,
                *SEPARATORS,
                "\r\n",
                " | ",
                "] ",
                "[D9:9] ",
                " | session 9",
                "- ",
                "\u200d",
                "\u200c",
                "\u202e",
                "\x00",
                "\ufeff",
                "\ud800",
                "\udfff",
                "2024-01-01T10:00:00+25:00",
            ]
        ),
        any_unicode,
    ),
    max_size=8,
).map("".join)
json_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True, allow_infinity=True), any_unicode, hostile_text
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(any_unicode, inner, max_size=4)),
    max_leaves=12,
)
# a turn with any JSON value (or hostile Unicode) in any field, or not an object at all
hostile_turn = st.one_of(
    json_values,
    st.fixed_dictionaries({}, optional={f: st.one_of(json_values, hostile_text) for f in TURN_FIELDS}),
    st.fixed_dictionaries(
        {"speaker": st.one_of(any_unicode, hostile_text), "text": st.one_of(any_unicode, hostile_text)},
        optional={f: st.one_of(json_values, hostile_text) for f in TURN_FIELDS[2:]},
    ),
)
