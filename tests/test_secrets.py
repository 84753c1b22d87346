"""The secret gate: one positive per rule, and a corpus of look-alikes that must pass.

Token-shaped test values are built at run time from a seeded generator, so this file holds no
string that a secret scanner would flag.
"""

from __future__ import annotations

import base64
import json
import random
import string

import pytest

from lookout_cli.core import secrets

R = random.Random(20261129)
ALNUM = string.ascii_letters + string.digits
UPPER32 = string.ascii_uppercase + "234567"
HEX = "0123456789abcdef"


def rnd(n: int, alphabet: str = ALNUM) -> str:
    return "".join(R.choice(alphabet) for _ in range(n))


def b64url(obj: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")


POSITIVES = {
    "private-key": "key:\n-----BEGIN RSA " + "PRIVATE KEY-----\nMIIEow" + rnd(64, ALNUM + "+/") + "\n-----END RSA",
    "aws-access-key-id": "use AKIA" + rnd(16, UPPER32) + " for uploads",
    "aws-secret-access-key": "aws_secret_access_key = " + rnd(40, ALNUM + "/+"),
    "anthropic-api-key": "ANTHROPIC key sk-ant-api03-" + rnd(93, ALNUM + "-_") + "AA",
    "openai-api-key": "the key is sk-proj-" + rnd(74, ALNUM + "-_"),
    "github-pat": "push with gh" + "p_" + rnd(36),
    "github-fine-grained-pat": "github_pat_" + rnd(22) + "_" + rnd(59),
    "gitlab-token": "glpat-" + rnd(20, ALNUM + "-_"),
    "gitlab-runner-registration-token": "GR1348941" + rnd(20),
    "slack-token": "xoxb-" + rnd(11, string.digits) + "-" + rnd(13, string.digits) + "-" + rnd(24),
    "slack-app-token": "xapp-1-A" + rnd(10, string.ascii_uppercase + string.digits) + "-" + rnd(13, string.digits)
    + "-" + rnd(64, HEX),
    "slack-webhook-url": "https://hooks.slack.com/services/T" + rnd(10, string.ascii_uppercase) + "/B"
    + rnd(10, string.ascii_uppercase) + "/" + rnd(24),
    "stripe-secret-key": "sk_" + "live_" + rnd(24),
    "stripe-webhook-secret": "whsec_" + rnd(32),
    "google-api-key": "AIza" + rnd(35, ALNUM + "-_"),
    "google-oauth-client-secret": "GOCSPX-" + rnd(28, ALNUM + "-_"),
    "google-oauth-access-token": "ya29." + rnd(60, ALNUM + "-_"),
    "jwt": b64url({"alg": "HS256", "typ": "JWT"}) + "." + b64url({"sub": "42", "name": "Ann"}) + "." + rnd(43, ALNUM + "-_"),
    "npm-token": "npm_" + rnd(36),
    "pypi-token": "pypi-AgEIcHlwaS5vcmc" + rnd(70, ALNUM + "-_"),
    "huggingface-token": "hf_" + rnd(34, string.ascii_letters),
    "sendgrid-api-key": "SG." + rnd(22, ALNUM + "-_") + "." + rnd(43, ALNUM + "-_"),
    "twilio-api-key": "SK" + rnd(32, HEX),
    "digitalocean-token": "dop_v1_" + rnd(64, HEX),
    "shopify-token": "shpat_" + rnd(32, HEX),
    "databricks-token": "dapi" + rnd(32, HEX),
    "groq-api-key": "gsk_" + rnd(52),
    "xai-api-key": "xai-" + rnd(80),
    "linear-api-key": "lin_api_" + rnd(40),
    "atlassian-api-token": "ATATT3" + rnd(180, ALNUM + "-_"),
    "hashicorp-vault-token": "hvs." + rnd(90, ALNUM + "-_"),
    "age-secret-key": "AGE-SECRET-KEY-1" + rnd(58, "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L"),
    "telegram-bot-token": rnd(9, string.digits) + ":AA" + rnd(33, ALNUM + "-_"),
    "azure-storage-key": "DefaultEndpointsProtocol=https;AccountName=x;AccountKey=" + rnd(86, ALNUM + "+/") + "==",
    "url-credentials": "the db is postgres://app:" + rnd(14) + "@db.internal:5432/app",
    "authorization-header": "send Authorization: Bearer " + rnd(40, ALNUM + "._-"),
    "bearer-token": "call it with bearer " + rnd(40, ALNUM + "._-"),
    "secret-assignment": "DB_PASSWORD=" + rnd(16),
    "password-in-prose": "the admin password is Tr0ub4dor&3",
    "command-line-password": "mysql -uroot -pS3cr3tPass db",
    "user-password-pair": "admin / P@ssw0rd2024!",
}


def test_every_rule_has_a_positive():
    assert set(POSITIVES) == set(secrets.RULE_IDS)


@pytest.mark.parametrize("rule", secrets.RULE_IDS)
def test_one_positive_per_rule(rule):
    found = secrets.scan(POSITIVES[rule])
    assert [f.rule for f in found] == [rule], [f.describe() for f in found]
    finding = found[0]
    value = POSITIVES[rule][finding.start:finding.end]
    # the preview never shows the whole value, nor more than a quarter of a long one
    assert finding.preview != value
    assert "…" in finding.preview
    if rule != "private-key":
        shown = len(finding.preview.replace("…", ""))
        assert shown <= max(8, len(value) // 2)
    assert finding.rule in finding.describe()


@pytest.mark.parametrize("rule", secrets.RULE_IDS)
def test_allow_lets_one_rule_through(rule):
    assert not [f for f in secrets.scan(POSITIVES[rule], allow=[rule]) if f.rule == rule]


FALSE_POSITIVES = [
    # hashes, ids, digests
    "fixed in commit 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b",
    "short sha 9f86d08 and 1a2b3c4d5e",
    "request id 123e4567-e89b-12d3-a456-426614174000",
    "image sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "integrity sha512-" + "Q" * 10 + "z9Yx",
    "token_hash=9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "session_token: 123e4567-e89b-12d3-a456-426614174000",
    # data URLs (base64 images)
    "data:image/png;base64," + rnd(2000, ALNUM + "+/") + "==",
    "see ![x](data:image/jpeg;base64," + rnd(500, ALNUM + "+/") + ")",
    # documentation examples (AWS's example key pair is refused: see test_secret_gate.py)
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0"
    "IjoxNTE2MjM5MDIyfQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
    "OPENAI_API_KEY=sk-proj-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
    "export ANTHROPIC_API_KEY=<your-key>",
    "password=<your-password>",
    "secret_key: ${SECRET_KEY}",
    "api_key = 'your_api_key_here'",
    "token: $GITHUB_TOKEN",
    "ghp_" + "x" * 36,
    "sk-ant-…AbCd",
    # code and prose that mention secrets without holding one
    "No Firebase API key in the build",
    "apiKey: import.meta.env.VITE_FIREBASE_API_KEY",
    "The API key lives in OPENAI_API_KEY",
    "api_key = os.environ['OPENAI_API_KEY']",
    "const token = process.env.GITHUB_TOKEN",
    "token = get_token()",
    "password: str",
    "api_key: Optional[str] = None",
    "max_tokens=4096",
    "max_tokens: 200000",
    "token_budget = 200k",
    "export GITHUB_TOKEN=$(gh auth token)",
    "postgres://user:password@localhost/db",
    "https://user:${TOKEN}@github.com/org/repo.git",
    "git@github.com:org/repo.git",
    "ssh://git@github.com:22/org/repo.git",
    "the password is stored in 1Password",
    "The password was rotated yesterday",
    "password is required",
    "-----BEGIN OPENSSH " + "PRIVATE KEY----- is the header to look for",
    "Authorization: Bearer <token>",
    "Use a bearer token from the vault",
    "PASSWORD_FIELD=password",
    "settings.SECRET_KEY = config.secret_key",
    "the key=value pairs are separated by commas",
    "tokens: 1.5M across 40 files",
    "ask the task runner, skip the risk",
    "our pk_live_ publishable keys are fine to ship",
]


@pytest.mark.parametrize("text", FALSE_POSITIVES)
def test_false_positives_pass(text):
    assert secrets.scan(text) == [], [f.describe() for f in secrets.scan(text)]


def test_mask_keeps_little():
    assert secrets.mask("sk-ant-api03-" + "a" * 20 + "WXYZ", keep_prefix=7) == "sk-ant-…WXYZ"
    assert secrets.mask("hunter2") == "h…"
    assert secrets.mask("ab") == "…"


def test_redact_replaces_the_value():
    text = "deploy with " + POSITIVES["github-pat"].split()[-1] + " please"
    out, found = secrets.redact(text)
    assert found and found[0].rule == "github-pat"
    assert POSITIVES["github-pat"].split()[-1] not in out
    assert "[github-pat removed:" in out


def test_several_findings_in_order():
    text = POSITIVES["aws-access-key-id"] + " and " + POSITIVES["npm-token"]
    assert [f.rule for f in secrets.scan(text)] == ["aws-access-key-id", "npm-token"]
