"""Every format the default redaction rules cover, one row each: what a log writes, what must
stay readable, what must vanish. The same rows hold line by line (``Redactor.lines``), as a
kernel log is read: a key written over several lines is hidden in each of them. Prose close to
a key (``token: expired``) is left alone. A format a rule gains is a row here first."""

from __future__ import annotations

import base64
from dataclasses import dataclass

import pytest

from remedy.redaction import DEFAULT_RULES, Redactor
from remedy.redaction.rules import MAX_TEXT

JWT = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ1c2VyLTQyIn0.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
AZURE_KEY = base64.b64encode(bytes(range(64))).decode()  # 88 characters, as Azure's are
SAS_SIG = "AbC%2Bdef0123GhIjKlMnOpQrStUvWxYz4567%3D"
PEM_BODY = (
    "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7",
    "AoIBAQC7VJTUt9Us8cKjMzEfYyjiWA4R",
)


@dataclass(frozen=True)
class Format:
    kind: str  # the marker's: [REDACTED:kind]
    text: str  # as a log writes it; a newline separates the lines of one log
    kept: tuple[str, ...]  # must remain readable
    gone: tuple[str, ...]  # must vanish


def row(kind: str, text: str, kept: str | tuple[str, ...], gone: str | tuple[str, ...]) -> Format:
    return Format(kind, text, _many(kept), _many(gone))


def _many(said: str | tuple[str, ...]) -> tuple[str, ...]:
    return (said,) if isinstance(said, str) else said


def kernel(*lines: str) -> str:
    """Lines as dmesg prints them, each behind its timestamp."""
    return "\n".join(f"[12345.{678901 + i}] {line}" for i, line in enumerate(lines))


FORMATS = [
    row("authorization", f"GET /v2 Authorization: Bearer {JWT}", "Authorization: Bearer ", JWT),
    row("authorization", "authorization=Basic dXNlcjpodW50ZXIy", "authorization=Basic ", "dXNlcjp"),
    row("basic-auth", "proxy sent Basic dXNlcjpodW50ZXIy upstream", "upstream", "dXNlcjp"),
    row(
        "api-key-header",
        "curl -H 'X-Api-Key: 7d1c2f0a9b8e4d3c' https://api.example.com/v1",
        ("X-Api-Key: ", "https://api.example.com/v1"),
        "7d1c2f0a9b8e4d3c",
    ),
    row(
        "url-password",
        "connecting to postgres://app:Sup3rS3cret@10.20.30.40:5432/metrics",
        ("postgres://app:", "@10.20.30.40:5432/metrics"),
        "Sup3rS3cret",
    ),
    row("jwt", f"session {JWT} expired", ("session ", " expired"), JWT),
    row(
        "private-key",
        f"key:\n-----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY[0]}\n-----END RSA PRIVATE KEY-----\nok",
        ("key:\n", "\nok"),
        PEM_BODY[0],
    ),
    row("private-key", f"cut\n-----BEGIN PRIVATE KEY-----\n{PEM_BODY[0][:30]}", "cut\n", "MIIEvQ"),
    row(
        "private-key",
        f"{PEM_BODY[0]}\n{PEM_BODY[1]}\n-----END PRIVATE KEY-----\nok",
        "\nok",
        PEM_BODY,
    ),
    row("aws-access-key", "key AKIAIOSFODNN7EXAMPLE used", ("key ", " used"), "AKIAIOSFODNN7"),
    row(
        "aws-secret-key",
        "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "AWS_SECRET_ACCESS_KEY=",
        "wJalrXUtnFEMI",
    ),
    row("github-token", "push with ghp_" + "a1" * 18, "push with ", "ghp_a1a1"),
    row("github-token", "github_pat_" + "B2" * 15 + " denied", " denied", "github_pat_B2"),
    row("slack-token", "notify xoxb-1234567890-abcdefABCDEF failed", " failed", "xoxb-12345"),
    row("gitlab-token", "denied for glpat-xY7zK9mN2pQ4rS6tU8vW", "denied for ", "glpat-xY7z"),
    row("huggingface-token", "token hf_aBcDeFgHiJkLmNoPqRsTuVwXyZ012345 ok", " ok", "hf_aBcD"),
    row("api-key", "OPENAI sk-proj-" + "Z9" * 12, "OPENAI ", "sk-proj-Z9"),
    row("api-key", "stripe rk_live_4eC39HqLyjWDarjt rejected", " rejected", "rk_live_4eC"),
    row("api-key", "maps AIzaSyA-1234567890abcdefghijklmnopqrstu", "maps ", "AIzaSyA-12"),
    row("secret", "db password=hunter2 port=5432", ("password=", " port=5432"), "hunter2"),
    row("secret", "client_secret = 's3 cr3t' next", ("client_secret = '", "' next"), "s3 cr3t"),
    row("secret", '{"password": "hunt3r!", "user": "ml"}', ('{"password": "', '"user"'), "hunt3r"),
    row("secret", "db:\n  password: yamlPa55word\n  user: ml", ("password: ", "user: ml"), "yaml"),
    row("secret", "mysql -u root --password fl4gPassw0rd -h db", ("--password ", "-h db"), "fl4g"),
    row("email", "paging dana.ops@example.org now", ("paging ", " now"), "dana.ops"),
    # New: Azure connection strings and SAS tokens.
    row(
        "azure-key",
        "DefaultEndpointsProtocol=https;AccountName=acct;"
        f"AccountKey={AZURE_KEY};EndpointSuffix=core.windows.net",
        ("AccountName=acct;AccountKey=", ";EndpointSuffix=core.windows.net"),
        AZURE_KEY[:40],
    ),
    row(
        "azure-key",
        "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=RootManageSharedAccessKey;"
        f"SharedAccessKey={AZURE_KEY[:44]}",
        ("SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=",),
        AZURE_KEY[:40],
    ),
    row(
        "azure-sas",
        f"GET https://acct.blob.core.windows.net/c/b?sv=2022-11-02&ss=b&sig={SAS_SIG}&se=2026",
        ("?sv=2022-11-02&ss=b&sig=", "&se=2026"),
        SAS_SIG[:20],
    ),
    # New: YAML's and INI's "token: …" with a value that looks like one.
    row("secret", "auth:\n  token: ghz9Xw2kLmN4pQ7rT1vY\n", "token: ", "ghz9Xw2k"),
    row("secret", "[aws]\naccess_key: AbCdEfGh12345678", "access_key: ", "AbCdEfGh1234"),
    row(
        "secret",
        "api_key: 'k3y'\nsecret: \"sh0rt one\"",
        ("api_key: '", 'secret: "'),
        ("k3y", "sh0rt"),
    ),
    # New: a PEM key in the kernel log, each line behind its timestamp or syslog header.
    row(
        "private-key",
        kernel(
            "-----BEGIN PRIVATE KEY-----", *PEM_BODY, "-----END PRIVATE KEY-----", "usb 1-1: ok"
        ),
        ("[12345.678901] ", "[12345.678905] usb 1-1: ok"),
        PEM_BODY,
    ),
    row(
        "private-key",
        "\n".join(
            f"Dec  1 03:00:00 gpu-7 kernel: {line}"
            for line in (*PEM_BODY, "-----END PRIVATE KEY-----", "NVRM: loading")
        ),
        "Dec  1 03:00:00 gpu-7 kernel: NVRM: loading",
        PEM_BODY,
    ),
    row(
        "private-key",
        f"6,1201,5678,-;{PEM_BODY[1]}\n6,1202,5679,-;-----END PRIVATE KEY-----",
        (),
        PEM_BODY[1],
    ),
]

# Prose beside the keys: none of it may change.
PROSE = [
    "token: expired",
    "token: expired, please re-authenticate",
    "token: refreshed ok",
    "secret: none",
    "failed to read secret: not found",
    "secret: kubernetes.io/service-account-token",
    "api_key: not-set-in-this-config",
    "token: 1700000000000000000",
    "SharedAccessKeyName=RootManageSharedAccessKey",
    'audit: type=1701 auid=1000 pid=4242 comm="python3" sig=11 res=1',
    "[12345.678901] nvidia-nvlink: Nvlink Core is being initialized, major device number 234",
]


def check(out: str, case: Format) -> None:
    assert f"[REDACTED:{case.kind}]" in out
    for secret in case.gone:
        assert secret not in out
    for kept in case.kept:
        assert kept in out


@pytest.mark.parametrize("case", FORMATS, ids=[f"{c.kind}:{c.text[:24]}" for c in FORMATS])
def test_each_format_is_hidden_and_its_context_kept(case: Format) -> None:
    out = Redactor().text(case.text)
    check(out, case)
    assert Redactor().text(out) == out  # a marker is never redacted again


@pytest.mark.parametrize("case", FORMATS, ids=[f"{c.kind}:{c.text[:24]}" for c in FORMATS])
def test_each_format_is_hidden_line_by_line_as_a_log_is_read(case: Format) -> None:
    lines = case.text.split("\n")
    out = Redactor().lines(lines)
    assert len(out) == len(lines)
    check("\n".join(out), case)


def test_every_default_rule_has_its_row() -> None:
    assert {r.name for r in DEFAULT_RULES} == {c.kind for c in FORMATS}


@pytest.mark.parametrize("text", PROSE)
def test_prose_beside_the_keys_is_left_alone(text: str) -> None:
    assert Redactor().text(text) == text
    assert Redactor().lines([text, text]) == [text, text]


def test_a_key_over_the_lines_of_a_kernel_log_is_hidden_in_each_line() -> None:
    before = ["[1.000001] NVRM: loading NVIDIA UNIX x86_64 Kernel Module", ""]
    key = kernel("-----BEGIN PRIVATE KEY-----", *PEM_BODY, "-----END PRIVATE KEY-----")
    lines = [*before, *key.split("\n"), "[1.000002] mail ops@example.com"]
    out = Redactor().lines(lines)
    assert out[:2] == before  # untouched lines stay as they were, empty ones too
    assert out[2] == "[12345.678901] [REDACTED:private-key]"
    assert out[3:6] == ["[REDACTED:private-key]"] * 3
    assert out[6] == "[1.000002] mail [REDACTED:email]"
    # Each line on its own (``texts``) is no key: the base64 lines go through.
    assert PEM_BODY[0] in "\n".join(Redactor().texts(lines))


def test_a_log_longer_than_one_text_is_redacted_in_groups_that_each_hide_their_part() -> None:
    filler = "[1.0] nvidia: " + "." * 985  # 1,000 characters with its newline, no base64
    fits = MAX_TEXT // 1000
    key = kernel("-----BEGIN PRIVATE KEY-----", *PEM_BODY * 6, "-----END PRIVATE KEY-----")
    lines = [filler] * fits + key.split("\n") + [filler] * 3
    # The first group ends inside the key: its start in one, its end in the next.
    head = key.split("\n")[:2]
    assert 1000 * fits + len(head[0]) + len(head[1]) + 2 <= MAX_TEXT < 1000 * fits + len(key) + 1
    out = Redactor().lines(lines)
    assert len(out) == len(lines)
    assert out[fits] == "[12345.678901] [REDACTED:private-key]"
    assert out[fits + 1 : fits + 14] == ["[REDACTED:private-key]"] * 13
    assert out[:fits] == [filler] * fits and out[-3:] == [filler] * 3
