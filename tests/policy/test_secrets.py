"""The one redaction of credentials (issue 43, item 11): no password of a URL survives it,
written as a URL must be (percent-encoded) or as people write them (raw), alone or inside
a log line; the rest of the URL stays readable; a text with no credential is unchanged."""

from __future__ import annotations

from urllib.parse import quote, urlsplit

from hypothesis import given
from hypothesis import strategies as st

from middleware.policy.secrets import HIDDEN, MASK, redact_urls, shown

SCHEMES = st.sampled_from(["http", "https", "postgresql", "postgresql+psycopg", "s3", "redis"])
HOSTS = st.sampled_from(["gateway.internal", "127.0.0.1:8000", "[::1]:5432", "db", "h-1.example"])
PATHS = st.sampled_from(["", "/", "/v1", "/anthropic/v1?x=1", "/db#frag", "/models/c@2024"])
#: What a raw password may hold and still leave the URL's authority where httpx finds it.
RAW = st.text(
    st.characters(blacklist_characters="/?#", blacklist_categories=("Cs", "Zs", "Cc", "Zl", "Zp")),
    min_size=1,
    max_size=40,
)
USERS = st.text(st.characters(whitelist_categories=("Ll", "Lu", "Nd")), min_size=1, max_size=12)


def absent(secret: str, redacted: str, url: str, *, at: str) -> bool:
    """Whether ``secret`` is gone from ``redacted``, unless the rest of the URL holds it
    anyway (a password "db" on the host "db", a password "@" beside the "@" before the
    host: ``at`` is the password between its delimiters, which stay)."""
    rest = url.replace(at, at[0] + at[-1], 1)
    # The mask's own stars are not the secret ("*" is a token a user name can hold).
    return secret not in redacted.replace(MASK, "\0") or secret in rest


@given(SCHEMES, USERS, st.text(min_size=1, max_size=40), HOSTS, PATHS)
def test_no_encoded_password_survives(
    scheme: str, user: str, password: str, host: str, path: str
) -> None:
    encoded = quote(password, safe="")
    url = f"{scheme}://{quote(user, safe='')}:{encoded}@{host}{path}"
    redacted = redact_urls(url)
    assert absent(encoded, redacted, url, at=f":{encoded}@")
    assert absent(password, redacted, url, at=f":{encoded}@")
    assert redacted == f"{scheme}://{quote(user, safe='')}:{MASK}@{host}{path}"
    assert urlsplit(redacted).hostname == urlsplit(url).hostname


@given(
    scheme=SCHEMES,
    user=USERS,
    password=RAW,
    host=HOSTS,
    path=PATHS,
    before=st.text(max_size=20),
    after=st.text(max_size=20),
)
def test_no_raw_password_survives_in_a_log_line(
    *, scheme: str, user: str, password: str, host: str, path: str, before: str, after: str
) -> None:
    url = f"{scheme}://{user}:{password}@{host}{path}"
    line = f"{before} cannot reach the upstream {url}: {after}"
    redacted = redact_urls(line)
    assert absent(password, redacted, line, at=f":{password}@")
    assert host in redacted


#: A token of "@" and "*" alone reads as the mask and its delimiter: nothing to check.
TOKENS = RAW.filter(lambda token: ":" not in token and bool(set(token) - set(MASK + "@")))


@given(SCHEMES, TOKENS, HOSTS, PATHS)
def test_a_token_as_the_user_name_is_hidden_whole(
    scheme: str, token: str, host: str, path: str
) -> None:
    url = f"{scheme}://{token}@{host}{path}"
    redacted = redact_urls(url)
    assert absent(token, redacted, url, at=f"{token}@")
    assert redact_urls(redacted) == redacted


@given(st.text(max_size=200))
def test_a_text_without_user_information_is_unchanged(text: str) -> None:
    plain = text.replace("@", "")
    assert redact_urls(plain) == plain
    assert redact_urls(f"https://gateway/{plain}") == f"https://gateway/{plain}"


def test_policy_values_are_shown_without_their_credentials() -> None:
    policy = {
        "proxy": {
            "upstreams": {"openai": "https://me:hunter2@gw/v1"},
            "recall_token": "recall-0123456789abcdef",
            "status_token": None,
        },
        "spill": {"url": "s3://bucket/p", "storage_options": {"key": "AKIA", "secret": "s"}},
        "ledger": {"url": "postgresql://chat:pg-pass@db/ledger"},
        "names": ["ftp://a:b@c"],
    }
    assert shown("", policy) == {
        "proxy": {
            "upstreams": {"openai": "https://me:***@gw/v1"},
            "recall_token": HIDDEN,
            "status_token": None,
        },
        "spill": {"url": "s3://bucket/p", "storage_options": HIDDEN},
        "ledger": {"url": "postgresql://chat:***@db/ledger"},
        "names": ["ftp://a:***@c"],
    }
    assert shown("spill.storage_options", {}) == {}
