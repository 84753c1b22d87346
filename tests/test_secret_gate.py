"""The secret gate on realistic text: secrets of many kinds, as people paste them into a memory
or a chat, must be refused; look-alikes that fill agent transcripts (hashes, UUIDs, digests,
base64 images, placeholders, variable references, ports, versions, paths) must pass.

Vendor-shaped tokens are built at run time from a seeded generator, so this file holds no live-
looking token a push-protection scanner would stop; the rest is written out as people write it.
"""

from __future__ import annotations

import base64
import random
import string

import pytest
from test_secrets import ALNUM, HEX, UPPER32, b64url

from lookout_cli.core import secrets

R = random.Random(32)  # its own seed: the values here do not depend on test_secrets' draws
B64 = ALNUM + "+/"
URLSAFE = ALNUM + "-_"


def rnd(n: int, alphabet: str = ALNUM) -> str:
    return "".join(R.choice(alphabet) for _ in range(n))


# (kind, text): every one must be refused.
SECRETS = [
    # cloud keys
    ("aws-access-key-id", "AWS key AKIA" + rnd(16, UPPER32) + " for the uploads bucket"),
    ("aws-access-key-id", "temporary creds ASIA" + rnd(16, UPPER32)),
    ("aws-docs-example", "AKIAIOSFODNN7EXAMPLE"),  # real-shaped: people paste it next to real keys
    ("aws-docs-example", "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
    ("aws-secret-access-key", "aws_secret_access_key=" + rnd(40, B64)),
    ("aws-secret-access-key", "the secret is " + rnd(40, B64)),
    ("aws-secret-access-key", "AWS_SECRET_ACCESS_KEY: " + rnd(40, B64)),
    ("azure-storage-key", "DefaultEndpointsProtocol=https;AccountName=prod;AccountKey=" + rnd(86, B64) + "=="),
    ("google-api-key", "maps key AIza" + rnd(35, URLSAFE)),
    ("google-oauth-client-secret", "client secret GOCSPX-" + rnd(28, URLSAFE)),
    ("digitalocean-token", "doctl auth init -t dop_v1_" + rnd(64, HEX)),
    # AI providers
    ("anthropic-api-key", "ANTHROPIC_API_KEY=sk-ant-api03-" + rnd(93, URLSAFE) + "AA"),
    ("openai-api-key", "OpenAI key: sk-proj-" + rnd(74, URLSAFE)),
    ("openai-api-key", "old style key sk-" + rnd(48)),
    ("huggingface-token", "huggingface-cli login --token hf_" + rnd(34, string.ascii_letters)),
    # source hosting and packages
    ("github-pat", "push with gh" + "p_" + rnd(36)),
    ("github-pat", "token gh" + "p_" + rnd(36)),
    ("github-oauth", "gh auth token printed gh" + "o_" + rnd(36)),
    ("github-fine-grained-pat", "github_pat_" + rnd(22) + "_" + rnd(59)),
    ("gitlab-token", "GITLAB_TOKEN=glpat-" + rnd(20, URLSAFE)),
    ("npm-token", "//registry.npmjs.org/:_authToken=npm_" + rnd(36)),
    ("pypi-token", "twine upload -p pypi-AgEIcHlwaS5vcmc" + rnd(70, URLSAFE)),
    # messaging and payments
    ("slack-token", "bot token xoxb-" + rnd(11, string.digits) + "-" + rnd(13, string.digits) + "-" + rnd(24)),
    ("slack-webhook-url", "alerts go to https://hooks.slack.com/services/T" + rnd(10, string.ascii_uppercase)
     + "/B" + rnd(10, string.ascii_uppercase) + "/" + rnd(24)),
    ("stripe-secret-key", "STRIPE_KEY=sk_" + "live_" + rnd(24)),
    ("sendgrid-api-key", "SG." + rnd(22, URLSAFE) + "." + rnd(43, URLSAFE)),
    ("telegram-bot-token", "bot " + rnd(9, string.digits) + ":AA" + rnd(33, URLSAFE)),
    ("twilio-api-key", "twilio SK" + rnd(32, HEX)),
    # tokens in headers
    ("jwt", "session " + b64url({"alg": "HS256", "typ": "JWT"}) + "." + b64url({"sub": "42"}) + "."
     + rnd(43, URLSAFE)),
    ("bearer-hex", "curl -H 'Authorization: Bearer " + rnd(40, HEX) + "' https://api.internal/v1/jobs"),
    ("bearer-hex", "use Bearer " + rnd(64, HEX) + " for the staging API"),
    ("bearer-opaque", "Authorization: Bearer " + rnd(40, URLSAFE + ".")),
    ("basic-auth", "Authorization: Basic " + base64.b64encode(b"deploy:Zq8!vLr2mKx").decode()),
    ("api-token-hex", "API_TOKEN=" + rnd(32, HEX)),
    ("api-token-hex", '{"api_key": "' + rnd(40, HEX) + '", "region": "eu-west-1"}'),
    ("api-token-hex", "x-api-key: " + rnd(32, HEX)),
    # keys and passwords
    ("private-key", "-----BEGIN RSA " + "PRIVATE KEY-----\nMIIEow" + rnd(64, B64) + "\n-----END RSA"),
    ("private-key", "-----BEGIN OPENSSH " + "PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA" + rnd(64, B64)),
    ("age-secret-key", "AGE-SECRET-KEY-1" + rnd(58, "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L")),
    ("hashicorp-vault-token", "VAULT_TOKEN=hvs." + rnd(90, URLSAFE)),
    ("url-credentials", "DATABASE_URL=postgres://app:" + rnd(14) + "@db.internal:5432/app"),
    ("url-credentials", "mongodb+srv://admin:Xk29fLq!w@cluster0.abcde.mongodb.net/prod"),
    ("env-password", "DB_PASSWORD=Winter2024!"),
    ("env-password", "export SECRET_KEY='" + rnd(50, ALNUM + "!@#%^&*") + "'"),
    ("password-in-prose", "the admin password is Tr0ub4dor&3"),
    ("password-in-prose", "wifi password: correct-horse-9battery"),
    ("user-password-pair", "admin / P@ssw0rd2024!"),
    ("user-password-pair", "login root / Sup3r$ecret"),
    ("cli-password", "mysql -uroot -pS3cr3tPass db"),
    ("cli-password", "mysqldump -u backup -p'Hx7#kq2Lm' shop > shop.sql"),
    ("cli-password", "curl -u admin:Gr8pw!2024 https://ci.internal/api"),
    ("cli-password", "sshpass -p 'Kj3$mmQ9z' ssh deploy@web1"),
    ("cli-password", "psql --password=Pg_S3cret99 -h db"),
]

# text that must pass
LOOK_ALIKES = [
    # ids, hashes, digests
    "request id 123e4567-e89b-12d3-a456-426614174000",
    "fixed in commit 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b",
    "see https://github.com/org/repo/commit/9f86d081884c7d659a2feaa0c55ad015a3bf4f1b",
    "short sha 9f86d08 and branch fix/9f86d08-retry",
    "3a6eb0790f39ac87c94f3856b2dd2c5d110e6811602261a9a923d3bb23adc8b7  lookout-1.4.0.tar.gz",
    "sha256: " + rnd(64, HEX),
    "image python@sha256:" + rnd(64, HEX),
    "ETag: \"33a64df551425fcc55e4d42a148795d9f25f89d4\"",
    "object id 507f1f77bcf86cd799439011",
    "Host key fingerprint is SHA256:uNiVztksCsDhcc0u9e8BujQXVUpKZIDTMczCvj3tD2s",
    "integrity sha512-" + rnd(86, B64) + "==",
    "token_hash=" + rnd(64, HEX),
    "session_token: 123e4567-e89b-12d3-a456-426614174000",
    # base64 images
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk" + rnd(400, B64) + "==",
    "![chart](data:image/jpeg;base64,/9j/4AAQSkZJRgABAQAAAQABAAD" + rnd(300, B64) + ")",
    # placeholders and references
    "password: <redacted>",
    '"password": "********"',
    "export API_KEY=$API_KEY",
    'token = os.environ["TOKEN"]',
    "OPENAI_API_KEY=sk-...",
    "api_key = 'your-api-key-here'",
    "Authorization: Bearer <token>",
    "Authorization: Bearer $TOKEN",
    "AWS_SECRET_ACCESS_KEY: ${{ secrets.AWS_SECRET_ACCESS_KEY }}",
    "GITHUB_TOKEN=ghp_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
    "the masked key sk-ant-…AbCd is the one to rotate",
    "GitHub tokens start with ghp_ and AWS keys with AKIA",
    "secretKeyRef: {name: db, key: password}",
    "password = getpass.getpass()",
    "secret = secrets.token_hex(32)",
    # command lines without the secret in them
    "mysql -u root -p shop",
    "mysql -uroot -p$MYSQL_PWD shop",
    "curl -u $USER:$PASS https://ci.internal/api",
    'sshpass -p "$DEPLOY_PASS" ssh deploy@web1',
    "docker login -u ci --password-stdin ghcr.io",
    "python -m pytest -p no:cacheprovider -q",
    # ports, versions, paths, prose
    "the API listens on localhost:8080 and https://api.example.com:8443/v1",
    "upgrade to v1.2.3-rc.1+build.5114f85 and node 20.11.1",
    "keys live in /home/ann/.ssh/id_ed25519 and ~/.aws/credentials",
    "read / write access, TCP/IP, and/or 1 / 2 of the hosts",
    "input / Output2024 folder",
    "max_tokens=4096 and PASSWORD_MIN_LENGTH = 12",
    "The password was rotated yesterday; the new one is in 1Password",
    "colors #ff00aa and #00ff00, IPv6 fe80::1ff:fe23:4567:890a",
    "mail ann.lee+ci@example.com, repo git@github.com:org/repo.git",
]


def _kinds() -> list[str]:
    return sorted({kind for kind, _ in SECRETS})


def test_the_set_is_big_and_varied():
    assert len(SECRETS) >= 40 and len(_kinds()) >= 20
    assert len(LOOK_ALIKES) >= 40


@pytest.mark.parametrize("kind,text", SECRETS, ids=[f"{i}-{k}" for i, (k, _) in enumerate(SECRETS)])
def test_secret_is_refused(kind, text):
    assert secrets.scan(text), f"missed a {kind}"


@pytest.mark.parametrize("text", LOOK_ALIKES, ids=[f"alike-{i}" for i in range(len(LOOK_ALIKES))])
def test_look_alike_passes(text):
    assert secrets.scan(text) == [], [f.describe() for f in secrets.scan(text)]


def test_preview_never_shows_the_secret():
    """A finding's preview shows a few characters of each end, never the value."""
    for _, text in SECRETS:
        for f in secrets.scan(text):
            value = text[f.start:f.end]
            assert value not in f.preview and len(f.preview.replace("…", "")) <= max(8, len(value) // 2)


def test_a_private_key_block_is_masked_whole():
    """Masking left the key's body after its first line in the text a chat or memory kept."""
    body = [rnd(64, B64) for _ in range(12)] + [rnd(20, B64) + "=="]
    block = "-----BEGIN RSA PRIVATE KEY-----\n" + "\n".join(body) + "\n-----END RSA PRIVATE KEY-----"
    out, found = secrets.redact(f"the deploy key:\n{block}\nuse it for staging")
    assert [f.rule for f in found] == ["private-key"]
    assert not [line for line in body if line in out], out
    assert out.endswith("\nuse it for staging")
