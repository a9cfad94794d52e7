from pipecat_harness.numbers import read_numbers, split_sentences, stem, tokenize


def numbers(text: str) -> list[float]:
    return [t.number.value for t in read_numbers(tokenize(text)) if t.number is not None]


def test_spoken_prices_are_read_with_their_groups() -> None:
    assert numbers("The basic detail is one forty-nine.") == [149]
    assert numbers("a hundred and forty-nine dollars") == [149]
    assert numbers("two hundred forty-nine") == [249]
    assert numbers("one forty-nine ninety-nine") == [149.99]
    tokens = [t for t in read_numbers(tokenize("nine thirty")) if t.number]
    assert tokens[0].number is not None and tokens[0].number.groups == (9, 30)


def test_digits_symbols_and_times() -> None:
    assert numbers("$149.99 or 1,299 euros") == [149.99, 1299]
    assert tokenize("6pm") == ["6", "pm"]
    assert tokenize("9 a.m.") == ["9", "am"]
    clock = read_numbers(tokenize("at 9:30"))[1].number
    assert clock is not None and clock.minutes == 30


def test_words_that_are_not_numbers_stay_words() -> None:
    assert numbers("oh sure, thanks") == []
    assert numbers("Could you spell that?") == []


def test_sentences_keep_decimals_and_am_pm() -> None:
    assert split_sentences("It is $149.99. We open at 9 a.m. on Monday! Ok") == [
        "It is $149.99.",
        "We open at 9 am on Monday!",
        "Ok",
    ]


def test_stem_joins_inflections() -> None:
    assert {stem(w) for w in ("cancelled", "canceled", "cancel")} == {"cancel"}
    assert stem("refunds") == stem("refunded") == "refund"
    assert stem("address") == stem("addresses") == "address"
