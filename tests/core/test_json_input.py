"""The JSON input gate: each limit refuses with where and which limit; values within them pass unchanged."""

import pytest
from rest_framework.test import APIClient

from simia_web.accounts.services import user_token
from simia_web.core.json_input import JsonInvalid, JsonLimits, JsonRefused, json_parse, value_check

LIMITS = JsonLimits(max_bytes=300_000, max_depth=4, max_string=10, max_keys=3, max_items=3, max_values=1_000_000)


@pytest.mark.parametrize(
    "text,path,message",
    [
        ('{"a": [[[[1]]]]}', "a[0][0][0]", "nested deeper than 4 levels"),
        ('{"a": "' + "x" * 11 + '"}', "a", "a string longer than 10 characters"),
        ('{"a": 1, "b": 2, "c": 3, "d": 4}', "(root)", "an object with more than 3 keys"),
        ('{"a": [1, 2, 3, 4]}', "a", "an array of more than 3 items"),
        ('{"' + "k" * 11 + '": 1}', "(root)", "an object key that is not a string of at most 10 characters"),
    ],
)
def test_each_limit_names_where_it_is_broken(text, path, message):
    with pytest.raises(JsonRefused) as refused:
        json_parse(text, where="upload.json", limits=LIMITS)
    assert (refused.value.where, refused.value.path, refused.value.message) == ("upload.json", path, message)
    assert str(refused.value) == f"upload.json at {path}: {message}"


@pytest.mark.parametrize(
    "text,message",
    [
        ("9223372036854775808", "does not fit in 64 bits"),
        ("-9223372036854775809", "does not fit in 64 bits"),
        ("1" * 5000, "does not fit in 64 bits"),
        ("[1e400]", "is out of range"),
        ("NaN", "NaN is not a JSON number"),
        ("[Infinity]", "Infinity is not a JSON number"),
        ("[" * 100_000 + "]" * 100_000, "nested deeper than 4 levels"),
        (" " * 300_001, "larger than the limit of 300,000 bytes"),
        ("é" * 150_001, "larger than the limit of 300,000 bytes"),  # 300,002 bytes in 150,001 characters
    ],
)
def test_numbers_and_sizes_that_break_parsers_are_refused(text, message):
    with pytest.raises(JsonRefused, match=message):
        json_parse(text, limits=LIMITS)


def test_within_the_limits_values_pass_unchanged():
    assert json_parse(b'\xef\xbb\xbf{"a": [9223372036854775807, -1.5e300, "\\ud83d\\ude00"]}', limits=LIMITS) == {
        "a": [2**63 - 1, -1.5e300, "\U0001f600"]
    }


@pytest.mark.parametrize(
    "text, message",
    [
        ('["a\\u0000b"]', "NUL character"),
        ('{"k\\u0000": 1}', "object key that is a string with a NUL"),
        ('["\\ud800"]', "unpaired UTF-16 surrogate"),
    ],
)
def test_text_the_database_cannot_store_is_refused(text, message):
    """PostgreSQL's text and jsonb refuse NUL; UTF-8 cannot encode a lone surrogate."""
    with pytest.raises(JsonRefused, match=message):
        json_parse(text, limits=LIMITS)


@pytest.mark.parametrize("text", ["{", "[1,]", "{} {}", b"\xff"])
def test_text_that_is_not_json_is_invalid_rather_than_over_a_limit(text):
    with pytest.raises(JsonInvalid):
        json_parse(text, limits=LIMITS)


def test_values_built_in_memory_are_checked_too():
    with pytest.raises(JsonRefused, match="outside|does not fit"):
        value_check({"n": 2**70}, limits=LIMITS)
    with pytest.raises(JsonRefused, match="not a JSON number"):
        value_check([float("nan")], limits=LIMITS)


def test_rest_bodies_are_refused_at_the_byte_limit(users, settings):
    settings.SIMIA_JSON_MAX_BYTES = 1000
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {user_token(user=users['curator'])}")
    response = client.post("/api/v1/jobs/", '{"kind": "' + "x" * 2000 + '"}', content_type="application/json")
    assert response.status_code == 400 and response.json() == {"body": ["larger than the limit of 1,000 bytes"]}


def test_the_settings_limits_follow_a_change_of_the_settings(settings):
    json_parse('"' + "x" * 50 + '"')
    settings.SIMIA_JSON_MAX_STRING = 10
    with pytest.raises(JsonRefused, match="a string longer than 10 characters"):
        json_parse('"' + "x" * 50 + '"')


@pytest.mark.parametrize(
    "value,message",
    [
        ({"ok": 1, "a\x00": 1, "k" * 11: 1}, "an object key that is not a string of at most 10 characters"),
        ({"ok": 1, "a\x00": 1}, "an object key that is a string with a NUL character (\\u0000)"),
        ({"é\ud800": 1}, "an object key that is a string with an unpaired UTF-16 surrogate"),
        ({"a": ["fine", "x\x00"]}, "a string with a NUL character (\\u0000)"),
        ({"a": "\ud800"}, "a string with an unpaired UTF-16 surrogate"),
    ],
)
def test_keys_and_strings_are_refused_for_the_first_problem_named(value, message):
    """Every key's type and length is checked before any key's text; short ASCII text passes without more checks."""
    with pytest.raises(JsonRefused) as refused:
        value_check(value, limits=LIMITS)
    assert refused.value.message == message
