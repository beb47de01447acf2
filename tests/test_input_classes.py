"""Inputs that used to be taken wrongly, by class: store keys in any Unicode form, value objects whose keys collide
once written as JSON, and reader views. Each is stored whole or refused in one line that says why, with nothing
stored; on SQLite and PostgreSQL records."""

import json
import unicodedata

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memcompile_langgraph.integrations.base_store import MemCompileStore

NS = ("tom",)
EXAMPLES = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
KEYS = st.sampled_from([True, False, None, 1, 0, 1.5, "true", "false", "null", "1", "0", "1.5", "text", "a"])


@pytest.fixture
def store(backend, tmp_path):
    mem = backend.where(tmp_path / "store").memory(dense=False)
    yield MemCompileStore(mem)
    mem.close()


def one_line_refusal(call) -> str:
    with pytest.raises(ValueError) as refused:
        call()
    message = str(refused.value)
    assert "\n" not in message and message, message
    return message


@EXAMPLES
@given(st.text(alphabet=st.sampled_from("ace\u0301\u0308\u00e9\u00eb\u00c5A\u030a o-"), min_size=1, max_size=8))
def test_a_store_key_in_any_unicode_form_is_kept_or_refused_saying_why(store, key):
    composed = unicodedata.normalize("NFC", key)
    if composed == key and key.strip() == key:
        store.put(NS, key, {"text": "I adopted a beagle."})
        item = store.get(NS, key)
        assert item is not None and item.key == key and item.value == {"text": "I adopted a beagle."}
        store.delete(NS, key)
        return
    message = one_line_refusal(lambda: store.put(NS, key, {"text": "I adopted a beagle."}))
    if composed != key and composed.strip() == composed:
        assert "decomposed Unicode (NFD)" in message and ascii(composed) in message
    assert store.get(NS, key) is None and store.get(NS, composed) is None


@EXAMPLES
@given(st.dictionaries(KEYS, st.integers(0, 9), min_size=1, max_size=6))
def test_a_value_whose_keys_collide_in_json_is_refused_never_cut(store, fields):
    written = [json.loads(json.dumps({k: 0})).popitem()[0] for k in fields]  # each key as JSON writes it
    value = {**fields, "text": "I adopted a beagle."} if "text" not in written else fields
    if len(set(written)) < len(written):
        message = one_line_refusal(lambda: store.put(NS, "k", value))
        assert "rename one" in message and store.get(NS, "k") is None
    else:
        store.put(NS, "k", value)
        kept = store.get(NS, "k").value
        assert len(kept) == len(value) and kept == json.loads(json.dumps(value))  # every field kept
        store.delete(NS, "k")


@EXAMPLES
@given(st.one_of(st.text(max_size=12), st.none(), st.integers(), st.sampled_from(["bundle", "raw", "claim", "Raw"])))
def test_a_view_is_one_of_the_views_or_refused_naming_them(store, view):
    mem = store.memory
    if not mem.turns("tom", limit=1):
        mem.add_turns([{"speaker": "Tom", "text": "I adopted a beagle named Biscuit."}], user_id="tom")
    if view in ("bundle", "raw", "claim"):
        assert "Biscuit" in mem.compile("What is the beagle called?", "tom", view=view).text
        return
    message = one_line_refusal(lambda: mem.compile("What is the beagle called?", "tom", view=view))
    assert message == f"view must be one of bundle, raw, claim; got {view!r}"
