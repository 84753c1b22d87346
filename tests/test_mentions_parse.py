"""Finding @-mentions in prompt text (lookout_cli.mentions.parse)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lookout_cli.mentions.parse import CHAT, PATH, find_mentions, parse_target


def one(text, **kw):
    found = find_mentions(text, **kw)
    assert len(found) == 1, found
    return found[0]


@pytest.mark.parametrize(
    "text, path, start, end",
    [
        ("@src/app.py#L10-L40", "src/app.py", 10, 40),
        ("@src/app.py#L10-40", "src/app.py", 10, 40),
        ("@src/app.py#10-40", "src/app.py", 10, 40),
        ("@src/app.py:10-40", "src/app.py", 10, 40),
        ("@src/app.py#L7", "src/app.py", 7, 7),
        ("@src/app.py#7", "src/app.py", 7, 7),
        ("@src/app.py:7", "src/app.py", 7, 7),
        ("look at @src/app.py:10-40.", "src/app.py", 10, 40),
        ("(see @src/app.py#L1-2)", "src/app.py", 1, 2),
    ],
)
def test_line_range_spellings(text, path, start, end):
    m = one(text)
    assert (m.kind, m.path, m.start, m.end, m.heading) == (PATH, path, start, end, None)


def test_plain_path_and_trailing_punctuation():
    for text in ("@src/app.py", "@src/app.py.", "@src/app.py,", "@src/app.py:", "@src/app.py!?", "(@src/app.py)"):
        m = one(text)
        assert m.path == "src/app.py" and m.start is None, text
    assert one("@src/app.py").raw == "@src/app.py"


def test_parentheses_inside_a_path_are_kept():
    assert one("@docs/a(1).md").path == "docs/a(1).md"


def test_heading_fragment():
    m = one("read @README.md#installation first")
    assert (m.path, m.heading, m.start) == ("README.md", "installation", None)


def test_quoted_paths_with_spaces_and_ranges():
    m = one('open @"docs/My Notes.md" now')
    assert (m.path, m.quoted, m.start) == ("docs/My Notes.md", True, None)
    m = one("open @'docs/My Notes.md'#L3-5")
    assert (m.path, m.start, m.end) == ("docs/My Notes.md", 3, 5)
    m = one('@"a b.txt":4.')
    assert (m.path, m.start, m.end, m.raw) == ("a b.txt", 4, 4, '@"a b.txt":4')
    m = one('@"My Doc.md"#Getting-started')
    assert (m.path, m.heading) == ("My Doc.md", "Getting-started")


def test_unclosed_quote_is_not_a_mention():
    assert find_mentions('@"never closed') == []


def test_folder():
    m = one("list @src/lib/ please")
    assert (m.path, m.folder) == ("src/lib/", True)


@pytest.mark.parametrize("word", ["workspace", "git", "selection", "problems", "editors"])
def test_keywords(word):
    m = one(f"with @{word}, thanks")
    assert m.kind == word and m.path is None


def test_keyword_prefix_is_a_path():
    m = one("@git/hooks/pre-commit")
    assert m.kind == PATH and m.path == "git/hooks/pre-commit"


def test_chat_mentions():
    m = one("continue from @chat:old/session.jsonl")
    assert (m.kind, m.path) == (CHAT, "old/session.jsonl")
    m = one('from @chat:"my chats/a b.jsonl" please')
    assert (m.kind, m.path) == (CHAT, "my chats/a b.jsonl")


@pytest.mark.parametrize(
    "text",
    [
        "mail me@example.com",
        "npx create-next-app@latest todo",
        "see https://example.com/@user/a.py",
        "www.example.com/@x.py",
        "use `@src/app.py` in code",
        "``@double.py``",
        "```\n@fenced.py\n```",
        "~~~python\n@fenced.py\n~~~",
        "lone @ sign",
        "at the end @",
        "key=@value.txt",
    ],
)
def test_not_mentions(text):
    assert find_mentions(text) == []


def test_fenced_block_ends():
    found = find_mentions("```\n@in.py\n```\nand @out.py")
    assert [m.path for m in found] == ["out.py"]


def test_bare_words_need_to_exist():
    text = "thanks @alice, see @dataclass and @Makefile"
    assert [m.path for m in find_mentions(text)] == ["alice", "dataclass", "Makefile"]
    assert [m.path for m in find_mentions(text, exists=lambda p: p == "Makefile")] == ["Makefile"]
    # a dot, a slash, a range or quotes make it a path whatever exists
    assert [m.path for m in find_mentions("@v1.2 @a/b @c:3", exists=lambda p: False)] == ["v1.2", "a/b", "c"]


def test_de_duplication_keeps_first_spelling():
    found = find_mentions("@a.py @./a.py @a.py#L1-2 @a.py:1-2 @a.py#L1-L2")
    assert [(m.raw, m.start) for m in found] == [("@a.py", None), ("@a.py#L1-2", 1)]


def test_order_and_offsets():
    text = "x @b.py y @a.py"
    found = find_mentions(text)
    assert [m.path for m in found] == ["b.py", "a.py"]
    assert [text[m.offset] for m in found] == ["@", "@"]


def test_scoped_package_path_keeps_inner_at():
    assert one("@node_modules/@types/x/index.d.ts").path == "node_modules/@types/x/index.d.ts"


def test_preceding_punctuation_allowed():
    assert [m.path for m in find_mentions('"@a.py" [@b.py] {@c.py} *@d.py*')] == ["a.py", "b.py", "c.py", "d.py"]


def test_root_spellings():
    assert one("@/").path == "/"
    assert one("@./").path == "./"
    assert find_mentions("end @.") == []


def test_parse_target():
    assert parse_target("src/a.py#L10-20") == parse_target("src/a.py:10-20")
    t = parse_target("src/a.py:10-20")
    assert (t.path, t.start, t.end) == ("src/a.py", 10, 20)
    assert parse_target("README.md#usage").heading == "usage"
    assert parse_target("x.py").start is None


def test_slash_command_arguments():
    text = "<command-name>/review</command-name>\n<command-args>@src/app.py#L3</command-args>"
    m = one(text)
    assert (m.path, m.start) == ("src/app.py", 3)


_ALPHABET = st.sampled_from(list("ab/.:#L-09 @\"'`\n()[]~*<>") + ["src/", "@a.py", "```", "https://", "@git"])


@settings(max_examples=300, deadline=None)
@given(st.lists(_ALPHABET, max_size=40).map("".join))
def test_any_text_parses_and_every_mention_starts_at_an_at(text):
    found = find_mentions(text)
    keys = [m.key for m in found]
    assert len(keys) == len(set(keys))
    for m in found:
        assert text[m.offset] == "@" and text.startswith(m.raw, m.offset)
        assert m.start is None or (m.end is not None and m.start >= 0)
