from __future__ import annotations

import pytest

from router.retrieval.text import STOP_WORDS, clauses, question_tokens, split_identifier, stem, tokenize, words


@pytest.mark.parametrize(
    ("identifier", "expected"),
    [
        ("get_current_time", "get current time"),
        ("getCurrentTime", "get Current Time"),
        ("get-current-time", "get current time"),
        ("HTTPServerError", "HTTP Server Error"),
        ("files/read.v2", "files read v2"),
    ],
)
def test_split_identifier_breaks_snake_camel_kebab_and_paths_into_words(
    identifier: str, expected: str
) -> None:
    assert split_identifier(identifier) == expected


def test_words_lower_cases_and_keeps_stop_words() -> None:
    assert words("The getCurrentTime Tool") == ["the", "get", "current", "time", "tool"]


def test_camel_case_tool_name_and_prose_question_share_tokens() -> None:
    assert tokenize("searchRepositories") == tokenize("search repositories") == ["search", "repository"]


def test_tokenize_drops_stop_words_and_single_letters_but_keeps_digits() -> None:
    assert tokenize("What time is it in Tokyo?") == ["time", "tokyo"]
    assert tokenize("x plus 5 and a b2") == ["plu", "5", "b2"]
    assert {"what", "is", "it", "the", "please"} <= STOP_WORDS


@pytest.mark.parametrize(
    ("word", "expected"),
    [
        ("running", "run"),  # doubled consonant undone
        ("stopped", "stop"),
        ("queries", "query"),  # -ies -> -y
        ("repositories", "repository"),
        ("searches", "search"),
        ("tools", "tool"),
        ("is", "is"),  # short words are left alone
        ("2024", "2024"),  # numbers are left alone
        ("bus", "bus"),
    ],
)
def test_stem_removes_common_suffixes(word: str, expected: str) -> None:
    assert stem(word) == expected


def test_stem_keeps_at_least_three_letters() -> None:
    # "sing" minus "ing" would leave one letter; it stays whole.
    assert stem("sing") == "sing"
    assert stem("bring") == "bring"


def test_singular_and_plural_of_a_word_ending_in_ss_share_a_stem() -> None:
    assert stem("class") == stem("classes")
    assert stem("process") == stem("processes")
    assert tokenize("process") == tokenize("processes")


def test_cjk_characters_are_indexed_one_by_one() -> None:
    tokens = tokenize("東京の時間")
    assert tokens == ["東", "京", "の", "時", "間"]
    # and a question in Japanese shares tokens with a Japanese description
    assert set(tokenize("東京")) <= set(tokenize("東京の時間を教えて"))


def test_words_of_every_script_are_whole_and_accents_do_not_split_or_separate_them() -> None:
    assert tokenize("Build my résumé") == tokenize("build my resume") == ["build", "resume"]
    assert tokenize("weather in Zürich") == ["weath", "zurich"]  # not "rich": no calculator's "sum" in "résumé"
    assert tokenize("погода в Москве") == ["погода", "москве"]
    assert tokenize("서울 날씨") == ["서", "울", "날", "씨"]  # a Hangul syllable is not taken apart
    assert tokenize("हिन्दी भाषा में मौसम") == ["हिन्दी", "भाषा", "में", "मौसम"]  # vowel signs are part of words
    assert tokenize("\ufb01le \uff12 items") == ["file", "2", "item"]  # a ligature, a full-width digit


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        # a path's directories and name go; its extension stays
        ("save the report to /root/markdown/bitcoin_report.md.", ["save", "report", "md"]),
        ("read ~/docs/q3/sales.xlsx and ./src/main.py", ["read", "xlsx", "py"]),
        ("list the files in /var/log/nginx", ["list", "fil"]),
        # a URL reads as its site (a URL on example), and a one-segment route is a word
        ("fetch https://example.org/pricing/plans", ["fetch", "url", "example"]),
        ("redirect to /login", ["redirect", "login"]),
    ],
)
def test_question_tokens_keep_only_the_extension_of_a_file_path(question: str, expected: list[str]) -> None:
    assert question_tokens(question) == expected



def test_a_percent_sign_after_a_number_is_read_as_a_word() -> None:
    from router.retrieval.text import spelled

    assert question_tokens("What's 7% of 300?") == ["7", "percent", "300"]
    assert spelled("7 % of 300, 50%") == "7 percent of 300, 50 percent" and spelled("100% sure") == "100 percent sure"


@pytest.mark.parametrize(("question", "read"), [
    ("What is 17 times 23?", "What is 17 multiplied by 23?"), ("17 * 23", "17 multiplied by 23"),
    ("17 x 23", "17 multiplied by 23"), ("2^10 / 4", "2 to the power of 10 divided by 4"),
    ("(3 + 4) * 12", "(3 plus 4) multiplied by 12"), ("2**8", "2 to the power of 8"),
    # Not operators: a size, a date, a phone number, a count of times.
    ("a 1920x1080 screen", "a 1920x1080 screen"), ("due 12/25/2024", "due 12/25/2024"),
    ("call +1 555 0100", "call +1 555 0100"), ("3 times a day", "3 times a day"),
])
def test_an_operator_between_numbers_is_read_as_its_words(question: str, read: str) -> None:
    from router.retrieval.text import spelled

    assert spelled(question) == read


def test_a_web_address_is_read_as_the_site_it_is_on() -> None:
    from router.retrieval.text import spelled

    assert spelled("Navigate to https://news.ycombinator.com") == "Navigate to a URL on news ycombinator"
    assert spelled("Open https://www.example.com/a?b=c.") == "Open a URL on example."  # the sentence keeps its stop
    assert spelled("Go to example.com, then stop") == "Go to a URL on example, then stop"
    assert spelled("Fetch http://127.0.0.1:8000/x") == "Fetch a URL"  # an address by number names no site
    assert spelled("Email bob@example.com about notes.txt") == "Email bob@example.com about notes.txt"
    # Neither retriever reads the address's pieces: the model drowned the request's words in them.
    assert question_tokens("Summarize https://github.com/a/b/blob/main/x.py") == ["summarize", "url", "github"]


@pytest.mark.timeout(10)  # minutes before: each space of a long run began a match that ran to its end
def test_a_long_run_of_spaces_is_split_into_steps_in_one_pass() -> None:
    assert clauses("a" + " " * 200_000 + "b") == []
    assert clauses("find the weather in Paris   and then   save it to a file") == [
        "find the weather in Paris", "save it to a file"]
