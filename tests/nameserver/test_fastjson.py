"""fastjson's dialect: bare integer map keys (legacy) versus BrowserCompatible JSON (spec §3.3)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nameserver.protocol import fastjson

ROUTE = {
    "brokerDatas": [{"brokerAddrs": {1: "10.0.0.6:10911", 0: "10.0.0.5:10911"},
                     "brokerName": "broker-a", "cluster": "DefaultCluster"}],
    "filterServerTable": {},
    "orderTopicConf": None,
    "queueDatas": [{"brokerName": "broker-a", "perm": 6, "readQueueNums": 4, "topicSysFlag": 0,
                    "writeQueueNums": 4}],
}
# The spec's TopicRouteData example, compacted, in both of its forms.
ROUTE_LEGACY = ('{"brokerDatas":[{"brokerAddrs":{0:"10.0.0.5:10911",1:"10.0.0.6:10911"},'
                '"brokerName":"broker-a","cluster":"DefaultCluster"}],"filterServerTable":{},'
                '"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"topicSysFlag":0,'
                '"writeQueueNums":4}]}')
ROUTE_STANDARD = ROUTE_LEGACY.replace('{0:"', '{"0":"').replace(',1:"', ',"1":"')


def stringified(obj):
    """What any reader yields for integer map keys: JSON object keys are strings."""
    if isinstance(obj, dict):
        return {str(k): stringified(v) for k, v in obj.items() if v is not None}
    if isinstance(obj, (list, tuple)):
        return [stringified(v) for v in obj]
    return obj


# --- dumps ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("standard, expected", [(False, ROUTE_LEGACY), (True, ROUTE_STANDARD)],
                         ids=["legacy", "standard"])
def test_route_data_matches_spec_example(standard, expected):
    assert fastjson.dumps(ROUTE, standard=standard) == expected


@pytest.mark.parametrize("obj, legacy, standard", [
    ({"brokerAddrs": {1: "b", 0: "a"}},
     '{"brokerAddrs":{0:"a",1:"b"}}', '{"brokerAddrs":{"0":"a","1":"b"}}'),
    ({10: "x", 2: "y", -1: "z"}, '{-1:"z",2:"y",10:"x"}', '{"-1":"z","2":"y","10":"x"}'),
    ({"b": 1, "a": 2, "C": 3}, '{"C":3,"a":2,"b":1}', '{"C":3,"a":2,"b":1}'),
    ({"a": None, "b": [None, 1], "c": {"d": None}}, '{"b":[null,1],"c":{}}', '{"b":[null,1],"c":{}}'),
    ({"t": True, "f": False, "n": -3, "x": 1.5, "l": (1, "2")},
     '{"f":false,"l":[1,"2"],"n":-3,"t":true,"x":1.5}',
     '{"f":false,"l":[1,"2"],"n":-3,"t":true,"x":1.5}'),
    # fastjson's BrowserCompatible hex digits are upper case (IOUtils.DIGITS; fastjson's own test
    # Issue743 expects "\\u4E0D\\u5403"), unlike Python's json.
    ({"remark": "主题 é"}, '{"remark":"主题 é"}', '{"remark":"\\u4E3B\\u9898 \\u00E9"}'),
    ({"s": "😀"}, '{"s":"😀"}', '{"s":"\\uD83D\\uDE00"}'),  # UTF-16 pair, as Java writes it
    ({"q": 'a"b\\c\nd\te\x01'},
     '{"q":"a\\"b\\\\c\\nd\\te\\u0001"}', '{"q":"a\\"b\\\\c\\nd\\te\\u0001"}'),
    ({}, "{}", "{}"),
    ([], "[]", "[]"),
], ids=["brokerAddrs", "int order", "sorted keys", "nulls", "scalars", "non-ascii", "astral",
        "escapes", "empty map", "empty list"])
def test_dumps_both_forms(obj, legacy, standard):
    assert fastjson.dumps(obj, standard=False) == legacy
    assert fastjson.dumps(obj, standard=True) == standard
    assert fastjson.dumps(obj) == standard  # the default is the standard form
    assert json.loads(standard) == stringified(obj)  # the standard form is real JSON


@pytest.mark.parametrize("obj", [{"b": b"bytes"}, {"s": {1, 2}}, [object()]],
                         ids=["bytes", "set", "object"])
def test_dumps_refuses_unknown_types(obj):
    with pytest.raises(TypeError, match="cannot serialise"):
        fastjson.dumps(obj)


def test_legacy_form_is_not_json_but_standard_is():
    with pytest.raises(ValueError):
        json.loads(fastjson.dumps({0: "a"}, standard=False))
    assert json.loads(fastjson.dumps({0: "a"}, standard=True)) == {"0": "a"}


# --- loads ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    (ROUTE_LEGACY, stringified(ROUTE)),
    (ROUTE_STANDARD, stringified(ROUTE)),
    ('{ 0 : "a" ,\n 1:"b"}', {"0": "a", "1": "b"}),
    ('{-5:"neg",123456789012:"long"}', {"-5": "neg", "123456789012": "long"}),
    ('[{0:{1:{2:[3]}}}]', [{"0": {"1": {"2": [3]}}}]),
    ('{0:"a,1:b"}', {"0": "a,1:b"}),
    ('{0:"127.0.0.1:9876;127.0.0.2:9876",1:",2:"}',
     {"0": "127.0.0.1:9876;127.0.0.2:9876", "1": ",2:"}),
    ('{"k":"{5:x}",7:"\\",8:\\""}', {"k": "{5:x}", "7": '",8:"'}),
    ('{"a":1,2:3,"b":[4,5]}', {"a": 1, "2": 3, "b": [4, 5]}),
    ('{"addr":"127.0.0.1:9876","n":10}', {"addr": "127.0.0.1:9876", "n": 10}),
], ids=["spec legacy", "spec standard", "whitespace", "negative and long", "nested",
        "comma colon in value", "addresses", "escaped quotes", "mixed keys", "plain json"])
def test_loads_reads_both_forms(text, expected):
    assert fastjson.loads(text) == expected
    assert fastjson.loads(text.encode()) == expected


def test_loads_leaves_digits_inside_strings_alone():
    # A value that looks like a legacy map must come back verbatim, quotes and all.
    value = '{0:"a",1:"b"} ,1:x "2":y'
    text = fastjson.dumps({"m": {0: value}, "s": value}, standard=False)
    assert fastjson.loads(text) == {"m": {"0": value}, "s": value}


@pytest.mark.parametrize("text", ['{0:"a"', '{a:1}', '{0:}', '{"x":"unterminated}', ""])
def test_loads_still_rejects_broken_json(text):
    with pytest.raises(ValueError):
        fastjson.loads(text)


# --- property ------------------------------------------------------------------------------------

# Biased towards what could fool a key-quoting regex: digits, colons, commas, braces, quotes.
tricky_text = st.text(alphabet=st.sampled_from('0123456789:,{}[]"\\ -\n') | st.characters(),
                      max_size=20)
long_keys = st.integers(-(2 ** 63), 2 ** 63 - 1)


@settings(max_examples=200, deadline=None)
@given(addrs=st.dictionaries(long_keys, tricky_text, max_size=6),
       name=tricky_text)
def test_legacy_round_trip_stringifies_keys(addrs, name):
    obj = {"brokerAddrs": addrs, "brokerName": name, "list": [addrs]}
    expected = {"brokerAddrs": {str(k): v for k, v in addrs.items()}, "brokerName": name,
                "list": [{str(k): v for k, v in addrs.items()}]}
    legacy = fastjson.dumps(obj, standard=False)
    assert fastjson.loads(legacy) == expected
    assert fastjson.loads(fastjson.dumps(obj, standard=True)) == expected
    assert fastjson.loads(fastjson.dumps(addrs, standard=False)) == expected["brokerAddrs"]
    if addrs:  # the legacy form really has the quirk: bare keys, not valid JSON
        with pytest.raises(ValueError):
            json.loads(legacy)


# --- fastjson's own escaping and map order (issue 19) ---------------------------------------------

@pytest.mark.parametrize("text, plain, browser", [
    ("a/b", '"a/b"', '"a\\/b"'),  # BrowserCompatible escapes '/', the default does not
    ("\x0b\x1f", '"\\u000B\\u001F"', '"\\u000B\\u001F"'),  # C0 controls: upper-case hex
    ("\b\f\n\r\t", '"\\b\\f\\n\\r\\t"', '"\\b\\f\\n\\r\\t"'),
    ("\x7f\x80\xa0\xa1", '"\\u007F\\u0080\\u00A0\xa1"', '"\\u007F\\u0080\\u00A0\\u00A1"'),  # U+007F..U+00A0
    ("\u2028\u2029", '"\\u2028\u2029"', '"\\u2028\\u2029"'),
    ("é主😀", '"é主😀"', '"\\u00E9\\u4E3B\\uD83D\\uDE00"'),
])
def test_string_escapes(text, plain, browser):
    assert fastjson.quote_plain(text) == plain
    assert fastjson.quote_browser_compatible(text) == browser
    assert json.loads(plain) == text == json.loads(browser)


def test_a_java_map_keeps_its_order_unless_map_sort_field():
    obj = {"z": fastjson.JavaMap({2: "x", 1: "y"}), "m": fastjson.JavaMap({"b": 1, "a": None, "c": 2})}
    # Bean fields sorted; maps as they iterate, null values dropped.
    assert fastjson.dumps(obj, standard=False) == '{"m":{"b":1,"c":2},"z":{2:"x",1:"y"}}'
    assert fastjson.dumps(obj, standard=True) == '{"m":{"b":1,"c":2},"z":{"1":"y","2":"x"}}'
