"""The secret gate: does a text look like it holds a password, key or token?

A hand-written rule table keyed on *documented* token formats (the prefixes and shapes each
vendor publishes), plus ``KEY=value`` with a secret-looking key, passwords in prose, bearer
headers and credentials inside URLs. Precision comes before recall: agent transcripts are full of
SHAs, UUIDs, digests and base64 images, so there is no generic entropy rule, and an allow-list
lets placeholders (``<your-token>``, ``${TOKEN}``, ``sk-...``) through. A bare hex string passes as a
hash unless what precedes it says it is a credential (``Bearer``, ``API_TOKEN=``).

Why hand-written rather than gitleaks' rule set: gitleaks targets source repositories, not what
people type into a memory or a chat. Converted to Python ``re`` and run on tests/test_secret_gate.py
it missed 26 of 53 secrets (passwords in prose, on command lines, user / password pairs, bearer
headers) with 2 false positives, and took 3.0 s per MB of transcript text.

``scan(text)`` returns every finding; a finding names its rule and carries a masked preview
(``sk-ant-…AbCd``). The value itself is never stored on the finding or printed.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator

from lookout_cli.core.dataclass import dataclass

__all__ = ["Finding", "Rule", "RULES", "RULE_IDS", "scan", "first", "mask", "is_allowed_value"]


@dataclass(frozen=True, slots=True)
class Finding:
    rule: str  # rule id, e.g. "github-pat"
    title: str  # what it looks like, e.g. "a GitHub personal access token"
    start: int  # offsets of the secret value inside the scanned text
    end: int
    preview: str  # masked: never the whole value

    def describe(self) -> str:
        return f"{self.title} (rule {self.rule}): {self.preview}"


@dataclass(frozen=True, slots=True)
class Rule:
    id: str
    title: str
    pattern: _Pattern
    group: int | str = 0  # the group holding the secret value; "value": the first group that matched
    keywords: tuple[str, ...] = ()  # cheap prefilter (lower case); empty = always run
    check: Callable[[str], bool] | None = None  # extra validation of the value
    keep_prefix: int = 4  # characters of the value the preview may show
    hex_is_secret: bool = False  # a hex value here is a token, unless named as a hash (token_hash=)
    lowered: bool = False  # the pattern runs on the lower-cased text: 8x faster than (?i) on a word list


# --- the allow-list ---------------------------------------------------------------------------

# Values vendors print in their own documentation.
DOC_EXAMPLES = frozenset(
    {
        # jwt.io's sample token
        "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0"
        "IjoxNTE2MjM5MDIyfQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
    }
)

# AWS's documented key pair is real-shaped and pasted next to real keys: refused, although it
# holds the word EXAMPLE.
REFUSED_EXAMPLES = frozenset({"AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"})

_PLACEHOLDER_WORDS = (
    "example",
    "sample",
    "placeholder",
    "redacted",
    "your_",
    "your-",
    "yourtoken",
    "yourkey",
    "changeme",
    "dummy",
    "fake",
    "xxxx",
    "****",
    "....",
    "…",
    "<",
    ">",
    "${",
    "{{",
    "%s",
    "%(",
)
_PLACEHOLDER_VALUES = frozenset(
    {
        "password",
        "passwd",
        "pass",
        "pwd",
        "secret",
        "token",
        "apikey",
        "api_key",
        "api-key",
        "key",
        "value",
        "none",
        "null",
        "nil",
        "true",
        "false",
        "undefined",
        "required",
        "optional",
        "string",
        "str",
        "hidden",
        "masked",
        "test",
        "testing",
        "foo",
        "bar",
        "foobar",
        "env",
        "environ",
    }
)
_HEX_RE = re.compile(r"[0-9a-fA-F]{7,128}")
_UUID_RE = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_DIGEST_RE = re.compile(r"(?:sha1|sha224|sha256|sha384|sha512|md5|blake2b|blake3)[:-][A-Za-z0-9+/=_-]+", re.I)
_VAR_REF_RE = re.compile(
    r"""^(?:
        \$[A-Za-z_][A-Za-z0-9_]*            # $VAR
      | \$\{[^}]*\}?                         # ${VAR}
      | %[A-Za-z_][A-Za-z0-9_]*%             # %VAR%
      | (?:process\.env|import\.meta\.env|os\.environ|os\.getenv|env|ENV|secrets|vars|settings|config)
        [.\[(].*                            # process.env.X, os.environ[...], secrets.X
      | [A-Z][A-Z0-9_]{2,}                   # the NAME of a variable, not its value
    )$""",
    re.X,
)
_DATA_URL_RE = re.compile(r"data:[\w.+-]+/[\w.+-]+(?:;[\w.+-]+=[\w.+-]+)*;base64,[A-Za-z0-9+/=]+")


def _entropy(value: str) -> float:
    counts = Counter(value)
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in counts.values()) if n else 0.0


def is_allowed_value(value: str, generic: bool = True, hex_is_secret: bool = False) -> bool:
    """True when a matched value is a documentation example, a placeholder, a hash, a UUID, a
    digest or a data URL rather than a live secret. ``generic`` (for the keyword rules, whose
    value has no vendor shape) also lets variable references and variable names through;
    ``hex_is_secret`` (the value follows ``Bearer`` or ``API_TOKEN=``) stops a hex value passing
    as a hash."""
    v = value.strip().strip("'\"`")
    if not v:
        return True
    if v in REFUSED_EXAMPLES:
        return False
    if v in DOC_EXAMPLES:
        return True
    low = v.lower()
    if low in _PLACEHOLDER_VALUES:
        return True
    if any(word in low for word in _PLACEHOLDER_WORDS):
        return True
    if generic and _VAR_REF_RE.match(v):
        return True
    if (_HEX_RE.fullmatch(v) and not hex_is_secret) or _UUID_RE.fullmatch(v) or _DIGEST_RE.fullmatch(v):
        return True
    if v.startswith("data:"):
        return True
    if len(set(v)) <= 2:  # "aaaaaaaa", "xxxxxxxx", "00000000"
        return True
    return False


def _is_code_or_word(value: str) -> bool:
    """Values after ``token =`` that are code or plain words, not secrets."""
    v = value.strip("'\"`")
    if any(c in v for c in "()[]{}"):
        return True  # a call, an index, a type annotation
    if re.fullmatch(r"[\d.,_]+[kKmMgG%]?[bB]?", v):
        return True  # numbers: max_tokens=4096, token_budget=200k
    if re.fullmatch(r"[a-z]+(?:[_.-][a-z]+)*", v) and len(v) < 24:
        return True  # an identifier or word: token=bearer, password=required_field
    if re.fullmatch(r"[A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)+", v):
        return True  # dotted name: settings.API_KEY, self.token
    if v.startswith(("http://", "https://", "/", "./", "~/")) and "@" not in v:
        return True  # a URL or path, not a credential
    return False


def _generic_value_ok(value: str) -> bool:
    """Validation for the keyword rules: long enough, not code, some variety in it."""
    v = value.strip("'\"`")
    return len(v) >= 6 and not _is_code_or_word(v) and _entropy(v) >= 2.0


def _mixed(value: str, kinds: int) -> bool:
    """At least ``kinds`` of: lower case, upper case, digits, other characters."""
    return sum((any(c.islower() for c in value), any(c.isupper() for c in value),
                any(c.isdigit() for c in value), any(not c.isalnum() for c in value))) >= kinds


def _password_shaped(value: str) -> bool:
    """What a password policy makes: all four kinds of character, one of them a symbol people
    pick for passwords (not the dots and dashes of versions and file names), no brackets."""
    return (_mixed(value, 4) and any(c in "!@#$%^&*?~+=" for c in value)
            and not any(c in "()[]{}<>\"'`\\" for c in value))


def _jwt_ok(value: str) -> bool:
    head = value.split(".", 1)[0]
    try:
        decoded = base64.urlsafe_b64decode(head + "=" * (-len(head) % 4))
        obj = json.loads(decoded)
    except (ValueError, binascii.Error, UnicodeDecodeError):
        return False
    return isinstance(obj, dict) and ("alg" in obj or "typ" in obj)


def _high_entropy(min_bits: float) -> Callable[[str], bool]:
    return lambda v: _entropy(v) >= min_bits


class _Pattern:
    """A rule's regular expression, compiled the first time a text holds one of the rule's
    keywords: the texts a command scans hold few of them, and compiling all 41 rules took
    10 ms of every ``compact`` (``re`` parses a pattern in Python)."""

    __slots__ = ("_compiled", "_flags", "_source")

    def __init__(self, source: str, flags: int) -> None:
        self._source, self._flags, self._compiled = source, flags, None

    def finditer(self, text: str) -> Iterator[re.Match]:
        if self._compiled is None:
            self._compiled = re.compile(self._source, self._flags)
        return self._compiled.finditer(text)


def _r(pattern: str, flags: int = 0) -> _Pattern:
    return _Pattern(pattern, flags)


# Secret characters of base62 / base64url tokens, with boundaries that do not split a token.
_B = r"(?<![A-Za-z0-9_\-])"  # left boundary
_E = r"(?![A-Za-z0-9_\-])"  # right boundary

_SECRET_KEY_NAME = (
    r"(?:secret|passw(?:or)?d|passwd|passphrase|pwd|token|api[_\-]?key|apikey|access[_\-]?key"
    r"|private[_\-]?key|client[_\-]?secret|auth[_\-]?key|credential|session[_\-]?key|signing[_\-]?key"
    r"|encryption[_\-]?key|master[_\-]?key|webhook[_\-]?secret)"
    r"[A-Za-z0-9_.\-]*"
)

RULES: tuple[Rule, ...] = (
    Rule(
        "private-key",
        "a private key block",
        _r(
            r"-----BEGIN[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----"
            r"(?:\s|\\[rn])*(?:[A-Za-z\-]+:[^\n]*(?:\n|\\n)(?:\s|\\[rn])*)*[A-Za-z0-9+/=]{32,}"
            # the rest of the block, so that masking it leaves none of the key behind
            r"(?:[\s\S]{0,16384}?-----END[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----)?"
        ),
        keywords=("private key",),
        keep_prefix=40,
    ),
    Rule(
        "aws-access-key-id",
        "an AWS access key ID",
        _r(r"(?<![A-Z0-9])(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA|APKA)[A-Z2-7]{16}(?![A-Z0-9])"),
        keywords=("akia", "asia", "abia", "acca", "agpa", "aida", "aroa", "aipa", "anpa", "anva", "apka"),
    ),
    Rule(
        "aws-secret-access-key",
        "an AWS secret access key",
        _r(r"(?i)(?:aws.{0,24}?(?:secret|private)|secret).{0,24}?[\s=:\"'`]+([A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])"),
        group=1,
        keywords=("aws", "secret"),
        check=lambda v: _entropy(v) >= 3.5 and _mixed(v, 3),
    ),
    Rule(
        "anthropic-api-key",
        "an Anthropic API key",
        _r(_B + r"sk-ant-(?:api\d\d|admin\d\d|sid\d\d|oat\d\d)-[A-Za-z0-9_\-]{20,}" + _E),
        keywords=("sk-ant-",),
        keep_prefix=7,
    ),
    Rule(
        "openai-api-key",
        "an OpenAI API key",
        _r(
            _B
            + r"sk-(?:(?:proj|svcacct|admin|None)-[A-Za-z0-9_\-]{20,}"
            + r"|[A-Za-z0-9]{20}T3BlbkFJ[A-Za-z0-9]{20}"
            + r"|[A-Za-z0-9]{48})"
            + _E
        ),
        keywords=("sk-",),
        keep_prefix=3,
    ),
    Rule(
        "github-pat",
        "a GitHub token",
        _r(_B + r"gh[pousr]_[A-Za-z0-9]{36,255}" + _E),
        keywords=("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
    ),
    Rule(
        "github-fine-grained-pat",
        "a GitHub fine-grained personal access token",
        _r(_B + r"github_pat_[A-Za-z0-9]{22}_[A-Za-z0-9]{59}" + _E),
        keywords=("github_pat_",),
        keep_prefix=11,
    ),
    Rule(
        "gitlab-token",
        "a GitLab token",
        _r(_B + r"(?:glpat|gldt|glrt|glptt|glft|glsoat|glimt|glagent|gloas)-[A-Za-z0-9_\-]{20,}" + _E),
        keywords=("glpat-", "gldt-", "glrt-", "glptt-", "glft-", "glsoat-", "glimt-", "glagent-", "gloas-"),
        keep_prefix=6,
    ),
    Rule(
        "gitlab-runner-registration-token",
        "a GitLab runner registration token",
        _r(_B + r"GR1348941[A-Za-z0-9_\-]{20}" + _E),
        keywords=("gr1348941",),
        keep_prefix=9,
    ),
    Rule(
        "slack-token",
        "a Slack token",
        _r(_B + r"xox[abposre]-(?:\d+-)+[A-Za-z0-9\-]{8,}" + _E),
        keywords=("xox",),
        keep_prefix=5,
    ),
    Rule(
        "slack-app-token",
        "a Slack app-level token",
        _r(_B + r"xapp-\d-[A-Z0-9]+-\d+-[a-f0-9]{32,}" + _E, re.I),
        keywords=("xapp-",),
        keep_prefix=5,
    ),
    Rule(
        "slack-webhook-url",
        "a Slack incoming webhook URL",
        _r(r"https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9+/]{40,}"),
        keywords=("hooks.slack.com",),
        keep_prefix=30,
    ),
    Rule(
        "stripe-secret-key",
        "a Stripe secret or restricted key",
        _r(_B + r"(?:sk|rk)_(?:live|test|prod)_[A-Za-z0-9]{16,}" + _E),
        keywords=("sk_live", "sk_test", "sk_prod", "rk_live", "rk_test", "rk_prod"),
        keep_prefix=8,
    ),
    Rule(
        "stripe-webhook-secret",
        "a Stripe webhook signing secret",
        _r(_B + r"whsec_[A-Za-z0-9]{24,}" + _E),
        keywords=("whsec_",),
        keep_prefix=6,
    ),
    Rule(
        "google-api-key",
        "a Google API key",
        _r(_B + r"AIza[0-9A-Za-z_\-]{35}" + _E),
        keywords=("aiza",),
    ),
    Rule(
        "google-oauth-client-secret",
        "a Google OAuth client secret",
        _r(_B + r"GOCSPX-[A-Za-z0-9_\-]{28}" + _E),
        keywords=("gocspx-",),
        keep_prefix=7,
    ),
    Rule(
        "google-oauth-access-token",
        "a Google OAuth access token",
        _r(_B + r"ya29\.[0-9A-Za-z_\-]{30,}" + _E),
        keywords=("ya29.",),
        keep_prefix=5,
    ),
    Rule(
        "jwt",
        "a JSON Web Token",
        _r(_B + r"eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{16,}" + _E),
        keywords=("eyj",),
        check=_jwt_ok,
        keep_prefix=3,
    ),
    Rule(
        "npm-token",
        "an npm access token",
        _r(_B + r"npm_[A-Za-z0-9]{36}" + _E),
        keywords=("npm_",),
    ),
    Rule(
        "pypi-token",
        "a PyPI upload token",
        _r(_B + r"pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_\-]{50,}" + _E),
        keywords=("pypi-ageicHlwas5vcmc".lower(),),
        keep_prefix=5,
    ),
    Rule(
        "huggingface-token",
        "a Hugging Face access token",
        _r(_B + r"hf_[A-Za-z]{34}" + _E),
        keywords=("hf_",),
        check=_high_entropy(3.5),
        keep_prefix=3,
    ),
    Rule(
        "sendgrid-api-key",
        "a SendGrid API key",
        _r(_B + r"SG\.[A-Za-z0-9_\-]{22}\.[A-Za-z0-9_\-]{43}" + _E),
        keywords=("sg.",),
        keep_prefix=3,
    ),
    Rule(
        "twilio-api-key",
        "a Twilio API key",
        _r(r"SK(?<![A-Za-z0-9]SK)[0-9a-f]{32}(?![A-Za-z0-9])"),  # "sk" is in every text: keep it fast
        keywords=("sk",),
        keep_prefix=2,
    ),
    Rule(
        "digitalocean-token",
        "a DigitalOcean token",
        _r(_B + r"do[por]_v1_[a-f0-9]{64}" + _E),
        keywords=("dop_v1_", "doo_v1_", "dor_v1_"),
        keep_prefix=7,
    ),
    Rule(
        "shopify-token",
        "a Shopify access token",
        _r(_B + r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}" + _E),
        keywords=("shpat_", "shpca_", "shppa_", "shpss_"),
        keep_prefix=6,
    ),
    Rule(
        "databricks-token",
        "a Databricks token",
        _r(_B + r"dapi[a-f0-9]{32}(?:-\d)?" + _E),
        keywords=("dapi",),
    ),
    Rule(
        "groq-api-key",
        "a Groq API key",
        _r(_B + r"gsk_[A-Za-z0-9]{48,}" + _E),
        keywords=("gsk_",),
    ),
    Rule(
        "xai-api-key",
        "an xAI API key",
        _r(_B + r"xai-[A-Za-z0-9]{70,}" + _E),
        keywords=("xai-",),
    ),
    Rule(
        "linear-api-key",
        "a Linear API key",
        _r(_B + r"lin_api_[A-Za-z0-9]{40}" + _E),
        keywords=("lin_api_",),
        keep_prefix=8,
    ),
    Rule(
        "atlassian-api-token",
        "an Atlassian API token",
        _r(_B + r"ATATT3[A-Za-z0-9_\-=]{150,}" + _E),
        keywords=("atatt3",),
        keep_prefix=6,
    ),
    Rule(
        "hashicorp-vault-token",
        "a HashiCorp Vault token",
        _r(_B + r"hv[sbr]\.[A-Za-z0-9_\-]{24,}" + _E),
        keywords=("hvs.", "hvb.", "hvr."),
    ),
    Rule(
        "age-secret-key",
        "an age secret key",
        _r(r"AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}"),
        keywords=("age-secret-key-1",),
        keep_prefix=16,
    ),
    Rule(
        "telegram-bot-token",
        "a Telegram bot token",
        _r(r"(?<![\w:])\d{8,10}:AA[A-Za-z0-9_\-]{33}" + _E),
        keywords=(":aa",),
        keep_prefix=4,
    ),
    Rule(
        "azure-storage-key",
        "an Azure storage account key",
        _r(r"(?i)AccountKey=([A-Za-z0-9+/]{86}==)"),
        group=1,
        keywords=("accountkey=",),
    ),
    Rule(
        "url-credentials",
        "a password inside a URL",
        _r(r"\b[a-zA-Z][a-zA-Z0-9+.\-]{1,20}://[^\s:/?#@\"'<>]{1,128}:([^\s/?#@\"'<>]{3,256})@[A-Za-z0-9.\-\[\]]+"),
        group=1,
        keywords=("://",),
        check=lambda v: not _is_code_or_word(v) or len(v) >= 12,
        keep_prefix=1,
    ),
    Rule(
        "authorization-header",
        "a credential in an Authorization header",
        _r(r"(?i)\b(?:authorization|proxy-authorization)\s*[:=]\s*[\"']?(?:bearer|basic|token|bot)\s+([A-Za-z0-9._~+/=\-]{16,})"),
        group=1,
        keywords=("authorization",),
        check=_generic_value_ok,
        keep_prefix=2,
        hex_is_secret=True,
    ),
    Rule(
        "bearer-token",
        "a bearer token",
        _r(r"(?<![\w-])[Bb]earer\s+([A-Za-z0-9._~+/\-]{24,}=*)"),
        group=1,
        keywords=("bearer",),
        check=lambda v: _generic_value_ok(v) and _entropy(v) >= 3.5,
        keep_prefix=2,
        hex_is_secret=True,
    ),
    Rule(
        "secret-assignment",
        "a secret assigned to a secret-looking name",
        _r(
            _SECRET_KEY_NAME + r"[\"']?\s*(?:=|:=|:|=>)\s*"
            r"(?:\"([^\"\s]{6,512})\"|'([^'\s]{6,512})'|`([^`\s]{6,512})`|([^\s\"'`,;]{6,512}))"
        ),
        group="value",
        keywords=(
            "secret",
            "pass",
            "pwd",
            "token",
            "key",
            "credential",
        ),
        check=_generic_value_ok,
        keep_prefix=1,
        hex_is_secret=True,
        lowered=True,
    ),
    Rule(
        "password-in-prose",
        "a password written in a sentence",
        _r(
            r"(?i)\b(?:password|passphrase|passcode|passwd|pin code)"
            r"(?:\s+(?:for|of|to)\s+[\w.@\-]+)?\s+(?:is|was|=|:|is\s+set\s+to|set\s+to)\s+[\"'`]?([^\s\"'`]{4,128})"
        ),
        group=1,
        keywords=("pass", "pin code"),
        check=lambda v: not _is_code_or_word(v.rstrip(".,;:!?")) and _entropy(v) >= 1.5,
        keep_prefix=1,
    ),
    Rule(
        "command-line-password",
        "a password on a command line",
        _r(
            # no leading \b: a pattern that starts with plain words is searched for 17x faster
            r"(?:(?:mysql|mysqldump|mysqladmin|mariadb|mariadb-dump)\b[^\n|;&]*?\s-p"  # -pSECRET: no space
            r"|sshpass\s+-p\s*|redis-cli\b[^\n|;&]*?\s-a\s+|--pass(?:word)?\s+"
            r"|curl\b[^\n|;&]*?\s(?:-u\s*|--user\s+)['\"]?[^\s:'\"]+:)"
            r"(?:'([^'\s]{3,128})'|\"([^\"\s]{3,128})\"|([^\s'\"]{3,128}))"
        ),
        group="value",
        keywords=("mysql", "mariadb", "sshpass", "redis-cli", "--pass", "curl"),
        check=lambda v: not _is_code_or_word(v),
        keep_prefix=1,
    ),
    Rule(
        "user-password-pair",
        "a user name and password",
        _r(r"[\w.@-] / ([^\s/]{8,64})(?!\S)"),  # admin / P@ssw0rd2024!
        group=1,
        keywords=(" / ",),
        check=_password_shaped,
        keep_prefix=1,
    ),
)

RULE_IDS = tuple(rule.id for rule in RULES)
# Rules whose value has no vendor shape: a variable name or reference there is not a secret.
GENERIC_RULES = frozenset(
    {"url-credentials", "authorization-header", "bearer-token", "secret-assignment", "password-in-prose",
     "command-line-password", "user-password-pair"}
)
# A name that says its hex value is a hash, not a token: token_hash=, api_key_sha256:
_HASH_NAME_RE = re.compile(r"(?i)hash|sha\d*|md5|digest|checksum|fingerprint|etag|commit")


def mask(value: str, keep_prefix: int = 4) -> str:
    """A preview that shows a little of each end: ``sk-ant-…AbCd``; never more than a
    quarter of a short value."""
    v = value.strip()
    if "\n" in v:
        v = v.split("\n", 1)[0]
    n = len(v)
    if n <= 8:
        return (v[:1] + "…") if n > 2 else "…"
    head = min(keep_prefix, max(1, n // 4))
    tail = 4 if n >= 16 else 0
    return f"{v[:head]}…{v[n - tail:] if tail else ''}"


def _value_of(rule: Rule, m: re.Match) -> tuple[str, int, int] | None:
    if rule.group == "value":
        for g in range(1, (m.lastindex or 0) + 1):
            if m.group(g) is not None:
                return m.group(g), m.start(g), m.end(g)
        return None
    g = rule.group
    if m.group(g) is None:
        return None
    return m.group(g), m.start(g), m.end(g)


def _name_before(text: str, match_start: int, value_start: int) -> str:
    """What names a value: the match up to it, and the rest of the word the match starts in
    (``sha256_`` of ``sha256_token=``)."""
    word_start = match_start
    while word_start > 0 and (text[word_start - 1].isalnum() or text[word_start - 1] in "_.-"):
        word_start -= 1
    return text[word_start:value_start]


def _blank_out(text: str, spans: Iterable[tuple[int, int]]) -> str:
    chars = list(text)
    for a, b in spans:
        for i in range(a, b):
            chars[i] = " "
    return "".join(chars)


def scan(text: str, allow: Iterable[str] = ()) -> list[Finding]:
    """Every secret-looking value in ``text``, in order, one finding per place.

    ``allow`` lists rule ids the caller deliberately lets through (``--allow-secret RULE``).
    """
    if not text:
        return []
    allowed_rules = set(allow)
    # Data URLs carry base64 images; never scan inside them.
    if "data:" in text:
        text = _blank_out(text, (m.span() for m in _DATA_URL_RE.finditer(text)))
    low = text.lower()
    if len(low) != len(text):  # a few characters lower-case to two ("İ"): keep offsets aligned
        low = "".join(c if len(c.lower()) != 1 else c.lower() for c in text)
    findings: list[Finding] = []
    taken: list[tuple[int, int]] = []
    for rule in RULES:
        if rule.id in allowed_rules:
            continue
        if rule.keywords and not any(k in low for k in rule.keywords):
            continue
        for m in rule.pattern.finditer(low if rule.lowered else text):
            got = _value_of(rule, m)
            if got is None:
                continue
            _, start, end = got
            value = text[start:end]
            hex_is_secret = rule.hex_is_secret and not _HASH_NAME_RE.search(_name_before(text, m.start(), start))
            if rule.id != "private-key" and is_allowed_value(value, rule.id in GENERIC_RULES, hex_is_secret):
                continue
            if rule.check is not None and not rule.check(value):
                continue
            if any(a < end and start < b for a, b in taken):
                continue  # a more specific rule already reported this place
            taken.append((start, end))
            if rule.id == "private-key":
                preview = m.group(0).split("-----", 3)[1].join(["-----", "-----…"])
            else:
                preview = mask(value, rule.keep_prefix)
            findings.append(Finding(rule.id, rule.title, start, end, preview))
    findings.sort(key=lambda f: f.start)
    return findings


def first(text: str, allow: Iterable[str] = ()) -> Finding | None:
    """The first secret-looking value in ``text``, or None."""
    found = scan(text, allow)
    return found[0] if found else None


def redact(text: str, allow: Iterable[str] = ()) -> tuple[str, list[Finding]]:
    """``text`` with every finding replaced by its masked preview, and the findings."""
    found = scan(text, allow)
    out = text
    for f in sorted(found, key=lambda f: f.start, reverse=True):
        out = out[: f.start] + f"[{f.rule} removed: {f.preview}]" + out[f.end :]
    return out, found
