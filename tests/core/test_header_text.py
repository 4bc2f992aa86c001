"""A track header's line of text turned into a curve's fields: the name and unit kept where two readings agree
whatever Tesseract's confidence in them, scale ends where both readings agree and one of them is sure, brackets
read for a unit's parentheses, a scale end's minus sign that Tesseract dropped found on the scan, a line
whose name is unread still giving its scale ends, and an unread end read again as a number where its pair
checks it."""

from __future__ import annotations

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from veernet_core.digitise.layout.headers import (
    END_CONFIDENCE,
    MIN_CONFIDENCE,
    NAME_CONFIDENCE,
    SIGN_TEXT_PX,
    UNANIMOUS_TEXT_PX,
    CurveHeader,
    LineSample,
    Reading,
    agreed,
    check_ends,
    curves_in,
    joined_entries,
    line_samples,
    line_style,
    reread_end,
    reread_unit,
    reread_words,
    samples_above,
    unit_text,
    with_reread,
)
from veernet_core.digitise.layout.labels import TextBox
from veernet_core.digitise.layout.ocr import Word

BOX = TextBox(top=100, bottom=180, left=50, right=649)  # 600 px wide
WIDTH, HEIGHT = BOX.right - BOX.left + 1, BOX.bottom - BOX.top + 1


def _word(text: str, left: float, confidence: float, width: float | None = None, top: float = 20.0,
          height: float = 18.0) -> Word:
    return Word(text, confidence, left, top, width if width is not None else 12.0 * len(text), height, 1)


def _line(left: str, name: str, unit: str, right: str, confidences: tuple[float, float, float, float]) -> list[Word]:
    return [_word(left, 10, confidences[0]), _word(name, 260, confidences[1]), _word(unit, 320, confidences[2]),
            _word(right, WIDTH - 10 - 12 * len(right), confidences[3])]


def test_a_name_and_unit_that_both_readings_agree_on_are_read_however_unsure_tesseract_is() -> None:
    low = (NAME_CONFIDENCE + MIN_CONFIDENCE) / 2
    first = curves_in(_line("0.2", "ILD", "(OHMM)", "2000", (0.9, low, low, 0.9)), BOX)
    second = curves_in(_line("0.2", "ILD", "(OHMM)", "2000", (0.9, low, low, 0.9)), BOX)
    [curve] = agreed(first, second)
    assert (curve.mnemonic.value, curve.unit.value, curve.left.value, curve.right.value) == ("ILD", "OHMM", 0.2, 2000.0)
    assert curve.mnemonic.confidence == low  # the proposal shows how unsure the reading was

    for other in ("LD", "ILM"):  # a name is kept only where both readings say the same, however sure each is
        [curve] = agreed(first, curves_in(_line("0.2", other, "(OHMM)", "2000", (0.9, 0.9, 0.9, 0.9)), BOX))
        # the line is still a curve, its name left for the person, its unit and scale ends read
        assert (curve.mnemonic.value, curve.unit.value) == (None, "OHMM")
        assert (curve.left.value, curve.right.value) == (0.2, 2000.0)


def test_words_tesseract_gives_no_confidence_name_nothing_and_unsure_numbers_are_left_empty() -> None:
    assert curves_in(_line("GR", "(API)", "", "", (NAME_CONFIDENCE / 2, 0.9, 0.0, 0.0))[:2], BOX) == []
    [named] = curves_in(_line("0.2", "ILD", "(OHMM)", "2000", (0.9, NAME_CONFIDENCE / 2, 0.9, 0.9)), BOX)
    assert named.mnemonic.value is None and named.left.value == 0.2  # a line with scale ends but no name read
    unsure = (END_CONFIDENCE - 0.05, 0.9, 0.9, END_CONFIDENCE - 0.05)
    [curve] = curves_in(_line("0.2", "ILD", "(OHMM)", "2000", unsure), BOX)
    assert curve.mnemonic.value == "ILD" and curve.left.value is None and curve.right.value is None


def test_a_scale_end_is_kept_where_both_readings_agree_and_one_of_them_is_sure() -> None:
    doubt = (MIN_CONFIDENCE + END_CONFIDENCE) / 2
    sure = curves_in(_line("0", "GR", "(API)", "150", (0.9, 0.9, 0.9, 0.9)), BOX)
    unsure = curves_in(_line("0", "GR", "(API)", "150", (doubt, 0.9, 0.9, doubt)), BOX)
    assert (unsure[0].left.value, unsure[0].right.value) == (0.0, 150.0)  # a reading keeps what it may agree on
    for first, second in ((sure, unsure), (unsure, sure)):
        [curve] = agreed(first, second)
        assert (curve.left.value, curve.right.value) == (0.0, 150.0)
    [neither] = agreed(unsure, unsure)  # neither reading is sure
    assert (neither.mnemonic.value, neither.left.value, neither.right.value) == ("GR", None, None)
    other = curves_in(_line("8", "GR", "(API)", "158", (0.9, 0.9, 0.9, 0.9)), BOX)
    [differ] = agreed(sure, other)  # both sure, but of different numbers
    assert (differ.left.value, differ.right.value) == (None, None)


def test_a_line_whose_name_neither_reading_has_is_a_curve_where_they_agree_on_a_scale_end() -> None:
    smudged = curves_in(_line("6", "cAL1", "(1N)", "16", (0.9, 0.9, 0.9, 0.9)), BOX)
    assert [(c.mnemonic.value, c.left.value, c.right.value) for c in smudged] == [(None, 6.0, 16.0)]
    [curve] = agreed(smudged, smudged)
    assert (curve.mnemonic.value, curve.unit.value, curve.left.value, curve.right.value) == (None, None, 6.0, 16.0)
    inch = curves_in(_line("6", "cAL1", "(IN)", "16", (0.9, 0.9, 0.9, 0.9)), BOX)
    assert agreed(inch, inch)[0].unit.value == "IN"  # a known unit both readings read is kept without its name
    assert agreed(inch, smudged)[0].unit.value is None  # without the name, both readings must read it
    assert agreed(smudged, curves_in(_line("8", "cAL1", "(1N)", "18", (0.9, 0.9, 0.9, 0.9)), BOX)) == []
    assert curves_in(_line("X", "cAL1", "(1N)", "Y", (0.9, 0.9, 0.9, 0.9)), BOX) == []  # no name, no number


def test_marks_tesseract_hangs_on_a_scale_end_are_read_through_and_a_decimal_comma_is_a_point() -> None:
    for left, right, ends in (("\u20180", "150.", (0.0, 150.0)), ('"6,', "16\u00b0", (6.0, 16.0)),
                              ("1.95.", "2.95:", (1.95, 2.95)), ("2", "20000-", (2.0, 20000.0)),
                              ("0,2", "2000", (0.2, 2000.0)), ("-0,15", "0,45", (-0.15, 0.45))):
        [curve] = curves_in(_line(left, "ILD", "(OHMM)", right, (0.9, 0.9, 0.9, 0.9)), BOX)
        assert (curve.left.value, curve.right.value) == ends, (left, right)
    [thousands] = curves_in(_line("0", "GR", "(API)", "1,000", (0.9, 0.9, 0.9, 0.9)), BOX)
    assert thousands.right.value is None  # not read as 1.0
    for zero in ("O", "o", "Q", "Oo", "oO"):  # a lone zero read as a letter
        [curve] = curves_in(_line(zero, "GR", "(API)", "150", (0.9, 0.9, 0.9, 0.9)), BOX)
        assert (curve.mnemonic.value, curve.left.value, curve.right.value) == ("GR", 0.0, 150.0), zero
    [letters] = curves_in(_line("Oa", "GR", "(API)", "150", (0.9, 0.9, 0.9, 0.9)), BOX)
    assert letters.left.value is None


def test_brackets_read_for_a_units_parentheses_and_punctuation_after_a_name_are_read_through() -> None:
    for unit in ("(OHMM}", "{OHMM)", "[OHMM]"):
        [curve] = curves_in(_line("0.2", "SFLU,", unit, "2000", (0.9, 0.9, 0.9, 0.9)), BOX)
        assert (curve.mnemonic.value, curve.unit.value) == ("SFLU", "OHMM")
    [glued] = curves_in(_line("1.95", "RHOB{G/C3}", "", "2.95", (0.9, 0.9, 0.0, 0.9))[:2], BOX)
    assert (glued.mnemonic.value, glued.unit.value) == ("RHOB", "G/C3")
    [unknown] = curves_in(_line("0", "GR", "(APT)", "150", (0.9, 0.9, 0.9, 0.9)), BOX)
    assert unknown.unit.value is None  # not a unit: left for the person, never the nearest one


def test_marks_hung_on_a_name_are_read_through_and_before_it_only_where_tesseract_is_sure() -> None:
    for word, unit, name in (("SP.(MV)", "", "SP"), ("RHOB-", "(G/C3)", "RHOB"), ("DT.", "(US/F).", "DT"),
                             ("RHOB,{G/C3)", "", "RHOB")):
        [curve] = curves_in(_line("0", word, unit, "10", (0.9, 0.3, 0.9, 0.9)), BOX)
        assert curve.mnemonic.value == name, word
        assert curve.unit.value in {"MV", "G/C3", "US/F"}, word
    for word in ("\u2018ILD", "\u201cCALI", "_DT", "-MSFL", "~GR"):
        [sure] = curves_in(_line("0", word, "(OHMM)", "10", (0.9, MIN_CONFIDENCE, 0.9, 0.9)), BOX)
        assert sure.mnemonic.value == word[1:], word
        # an unsure word with a mark before it is often misread whole ("\u2018DEF" for "PEF"): not a name
        [unsure] = curves_in(_line("0", word, "(OHMM)", "10", (0.9, MIN_CONFIDENCE - 0.1, 0.9, 0.9)), BOX)
        assert unsure.mnemonic.value is None, word


def test_a_misread_scale_end_that_looks_like_a_name_does_not_take_the_names_place() -> None:
    line = [_word("O02.", 10, 0.53), _word("ILM", 260, 0.86), _word("(OHMM)", 320, 0.86), _word("2000", 540, 0.96)]
    [curve] = curves_in(line, BOX)
    assert curve.mnemonic.value == "ILM" and curve.left.value is None and curve.right.value == 2000.0


def _printed(text: str, right: int, size: int = 24) -> tuple[np.ndarray, Word]:
    """A header line's ink with `text` printed right-aligned at column `right`, and the word Tesseract would
    give for its digits alone (the box of the digits' ink, the sign dropped from its text)."""
    face = ImageFont.load_default(size=size)
    image = Image.new("L", (WIDTH, HEIGHT), 255)
    ImageDraw.Draw(image).text((right, 30), text, fill=0, font=face, anchor="rm")
    digits = Image.new("L", (WIDTH, HEIGHT), 255)
    ImageDraw.Draw(digits).text((right, 30), text.lstrip("-"), fill=0, font=face, anchor="rm")
    ink = np.asarray(image) < 128
    rows, columns = np.nonzero(np.asarray(digits) < 128)
    left, top = float(columns.min()), float(rows.min())
    word = Word(text.lstrip("-"), 0.9, left, top, float(columns.max() + 1) - left, float(rows.max() + 1) - top, 1)
    return ink, word


def _right_end(ink: np.ndarray, end: Word) -> float | None:
    line = [_word("0.45", 10, 0.9), _word("NPHI", 250, 0.9), _word("(V/V)", 310, 0.9), end]
    [curve] = curves_in(line, BOX, ink)
    value = curve.right.value
    assert value is None or isinstance(value, float)
    return value


def test_a_minus_sign_tesseract_dropped_is_read_off_the_scan() -> None:
    for size in (16, 24, 40):
        ink, word = _printed("-0.15", WIDTH - 10, size)
        assert _right_end(ink, word) == -0.15, size
        # Tesseract's box may hold the minus it dropped
        minus = np.flatnonzero(ink[:, :round(word.left)].any(axis=0))
        wide = Word(word.text, word.confidence, float(minus.min()), word.top, word.left + word.width - minus.min(),
                    word.height, 1)
        assert _right_end(ink, wide) == -0.15, size
        plain, word = _printed("0.15", WIDTH - 10, size)
        assert _right_end(plain, word) == 0.15, size


def test_a_speck_a_dash_of_a_rule_or_a_border_before_a_number_is_no_minus() -> None:
    ink, word = _printed("0.15", WIDTH - 40, 24)
    digit = word.width / 4
    middle = round(word.top + word.height / 2)
    x = round(word.left - digit / 2)
    speck = ink.copy()
    speck[middle - 1:middle + 2, x - 1:x + 2] = True  # as long as thick
    assert _right_end(speck, word) == 0.15
    low = ink.copy()
    low[round(word.top + word.height) - 2:round(word.top + word.height), x - 6:x + 2] = True  # at the digits' foot
    assert _right_end(low, word) == 0.15
    border = ink.copy()
    border[:, x] = True  # a track's border, top to bottom
    assert _right_end(border, word) == 0.15
    far = ink.copy()
    far[middle - 1:middle + 1, x - round(2 * digit) - 6:x - round(2 * digit)] = True  # a dash well before the number
    assert _right_end(far, word) == 0.15
    signed, word = _printed("-80", WIDTH - 40, 24)
    written = Word("-80", 0.9, word.left - digit, word.top, word.width + digit, word.height, 1)
    assert _right_end(signed, written) == -80.0  # a sign Tesseract read is kept as read


def test_scale_ends_that_cannot_be_the_tracks_are_left_empty_not_guessed() -> None:
    [curve] = curves_in(_line("1", "ILM", "(OHMM)", "40000", (0.9, 0.9, 0.9, 0.9)), BOX)
    assert check_ends(curve, True, 4).left.value is None and check_ends(curve, True, 4).right.value is None
    [fits] = curves_in(_line("1", "ILM", "(OHMM)", "10000", (0.9, 0.9, 0.9, 0.9)), BOX)
    assert (check_ends(fits, True, 4).left.value, check_ends(fits, True, 4).right.value) == (1.0, 10000.0)
    assert check_ends(fits, True, 3).right.value is None  # three decades on the grid, four between the ends
    [equal] = curves_in(_line("20", "SP", "(MV)", "20", (0.9, 0.9, 0.9, 0.9)), BOX)
    assert check_ends(equal, False, None).left.value is None
    [linear] = curves_in(_line("-80", "SP", "(MV)", "20", (0.9, 0.9, 0.9, 0.9)), BOX)
    assert (check_ends(linear, False, None).left.value, check_ends(linear, False, None).right.value) == (-80.0, 20.0)


def test_a_linear_tracks_ends_over_an_uncommon_span_are_left_empty() -> None:
    for left, right in (("0", "150"), ("0.45", "-0.15"), ("1.95", "2.95"), ("140", "40"), ("6", "16"),
                        ("0", "120"), ("-160", "40"), ("0", "0.25")):
        [curve] = curves_in(_line(left, "XX", "(API)", right, (0.9, 0.9, 0.9, 0.9)), BOX)
        checked = check_ends(curve, False, 10)
        assert (checked.left.value, checked.right.value) == (float(left), float(right)), (left, right)
    for left, right in (("-88", "20"), ("0", "158"), ("0.45", "-9.15"), ("9", "150"), ("0", "26")):
        [curve] = curves_in(_line(left, "XX", "(API)", right, (0.9, 0.9, 0.9, 0.9)), BOX)
        checked = check_ends(curve, False, 10)  # a digit misread: which one is for the person
        assert (checked.left.value, checked.right.value) == (None, None), (left, right)
    [one] = curves_in(_line("0", "GR", "(API)", "", (0.9, 0.9, 0.9, 0.0))[:3], BOX)
    assert check_ends(one, False, 10).left.value == 0.0  # a lone end has nothing to be checked against


def test_a_known_unit_one_reading_has_is_kept_where_the_other_read_none_but_not_where_they_differ() -> None:
    both = curves_in(_line("6", "CALI", "(IN)", "16", (0.9, 0.9, 0.9, 0.9)), BOX)
    lost = curves_in(_line("6", "CALI", "(UN)", "16", (0.9, 0.9, 0.9, 0.9)), BOX)  # not a unit: none read
    assert lost[0].unit.value is None
    assert agreed(both, lost)[0].unit.value == "IN" and agreed(lost, both)[0].unit.value == "IN"
    other = curves_in(_line("6", "CALI", "(MM)", "16", (0.9, 0.9, 0.9, 0.9)), BOX)
    assert agreed(both, other)[0].unit.value is None  # two known units: which one is for the person
    assert agreed(lost, lost)[0].unit.value is None


def test_where_the_readings_differ_on_an_end_the_one_the_other_end_fits_is_kept_if_only_one_does() -> None:
    def ends(first: tuple[str, str, float, float], second: tuple[str, str, float, float], log: bool | None,
             decades: int | None) -> tuple[object, object]:
        a = curves_in(_line(first[0], "DT", "(US/F)", first[1], (first[2], 0.9, 0.9, first[3])), BOX)
        b = curves_in(_line(second[0], "DT", "(US/F)", second[1], (second[2], 0.9, 0.9, second[3])), BOX)
        [curve] = agreed(a, b, log, decades)
        return curve.left.value, curve.right.value

    assert ends(("1400", "40", 0.9, 0.9), ("140", "40", 0.9, 0.9), False, 10) == (140.0, 40.0)
    assert ends(("140", "40", 0.9, 0.9), ("1400", "40", 0.9, 0.9), False, 10) == (140.0, 40.0)
    assert ends(("0.2", "2000", 0.9, 0.9), ("2", "2000", 0.9, 0.9), True, 4) == (0.2, 2000.0)  # decades
    assert ends(("1", "10060", 0.9, 0.9), ("1", "10000", 0.9, 0.9), True, 4) == (1.0, 10000.0)
    # both fit ("9" or "0" before "10"): the end is the person's, the one both read is kept
    assert ends(("9", "10", 0.9, 0.9), ("0", "10", 0.4, 0.9), False, 10) == (None, 10.0)
    # the only one that fits is unsure, or none fits: one of the line's numbers is misread, both are left
    assert ends(("6", "158", 0.9, 0.9), ("8", "158", 0.4, 0.9), False, 10) == (None, None)
    assert ends(("7", "158", 0.9, 0.9), ("6", "158", 0.9, 0.9), False, 10) == (None, None)
    assert ends(("1400", "40", 0.9, 0.9), ("140", "40", 0.9, 0.9), None, None) == (None, 40.0)  # no grid to fit


def test_a_minus_read_as_a_word_of_its_own_just_before_a_scale_end_is_its_sign() -> None:
    def right_end(words: list[Word]) -> object:
        [curve] = curves_in([_word("0.45", 10, 0.9), _word("NPHI", 250, 0.9), _word("(V/V)", 310, 0.9), *words], BOX)
        return curve.right.value

    number = _word("0.15", 540, 0.9)  # four digits' width 48: a digit 12 px
    assert right_end([_word("-", 526, 0.4, width=8), number]) == -0.15
    assert right_end([_word("\u2014", 528, 0.4, width=8), number]) == -0.15
    assert right_end([_word("-", 500, 0.4, width=8), number]) == 0.15  # 32 px before it: part of something else
    assert right_end([_word("-", 526, 0.4, width=8, top=60.0), number]) == 0.15  # on another row
    assert right_end([number]) == 0.15


def test_an_unsure_word_that_is_no_number_before_a_scale_end_does_not_hide_it() -> None:
    line = [_word("x", 2, MIN_CONFIDENCE - 0.1), _word("0", 20, 0.9), _word("GR", 260, 0.9), _word("(API)", 300, 0.9),
            _word("150", 540, 0.9), _word("a", 590, MIN_CONFIDENCE - 0.1)]
    [curve] = curves_in(line, BOX)
    assert (curve.mnemonic.value, curve.left.value, curve.right.value) == ("GR", 0.0, 150.0)
    sure = [_word("x1", 2, 0.9), *line[1:]]  # a sure word first: the line's first word is no scale end
    assert curves_in(sure, BOX)[0].left.value is None


def _digits(text: str, confidence: float, left: float = 0.0) -> list[Word]:
    """What a reading of an end's box told to read digits gives: one word."""
    return [Word(text, confidence, left, 2.0, 12.0 * len(text), 18.0, 1)]


def test_the_words_in_a_lines_end_zones_are_kept_whatever_tesseract_read_them_as() -> None:
    """A lone "0" read as ")" at no confidence is no scale end, but its box is where the end is printed."""
    line = [_word(")", 10, 0.0), _word("GR", 260, 0.9), _word("(API)", 320, 0.9), _word("150", WIDTH - 46, 0.96)]
    [curve] = curves_in(line, BOX)
    assert curve.left.value is None and curve.right.value == 150.0
    left, right = curve.end_words
    assert left is not None and left.text == ")" and right is not None and right.text == "150"
    assert [(side, word.text) for side, word in reread_words(curve)] == [(0, ")")]  # only the unread end


def test_an_end_one_reading_missed_is_read_again_but_not_one_they_read_as_two_numbers() -> None:
    missed = curves_in([_word(")", 10, 0.0), _word("GR", 260, 0.9), _word("150", WIDTH - 46, 0.96)], BOX)
    read = curves_in([_word("0", 10, 0.87), _word("GR", 260, 0.9), _word("150", WIDTH - 46, 0.96)], BOX)
    [curve] = agreed(missed, read, log_grid=False)
    assert curve.left.value is None
    [(side, word)] = reread_words(curve)
    assert side == 0 and word.text == "0", "the word read as a number is the one kept"
    # Two readings of two numbers that both fit (a CALI's 6-16 and 8-16): a third reading would only break the tie.
    six = curves_in([_word("6", 10, 0.9), _word("CALI", 260, 0.9), _word("16", WIDTH - 34, 0.96)], BOX)
    eight = curves_in([_word("8", 10, 0.9), _word("CALI", 260, 0.9), _word("16", WIDTH - 34, 0.96)], BOX)
    [tied] = agreed(six, eight, log_grid=False)
    assert tied.left.value is None and reread_words(tied) == []


def test_an_end_read_again_is_the_number_both_new_readings_agree_on_one_of_them_sure() -> None:
    lone = _word(")", 10, 0.0)
    assert reread_end(lone, _digits("0", 0.9), _digits("0", 0.5), (0, 0), None, 18.0).value == 0.0
    assert reread_end(lone, _digits("0", 0.9), _digits("8", 0.9), (0, 0), None, 18.0).value is None
    assert reread_end(lone, _digits("0", MIN_CONFIDENCE - 0.01), _digits("0", 0.5), (0, 0), None, 18.0).value is None
    assert reread_end(lone, _digits("0", 0.9), _digits("0", END_CONFIDENCE - 0.01), (0, 0), None, 18.0).value is None
    assert reread_end(lone, [], _digits("0", 0.9), (0, 0), None, 18.0).value is None
    assert reread_end(lone, _digits("0.", 0.9), _digits("0.", 0.9), (0, 0), None, 18.0).value == 0.0
    assert reread_end(lone, _digits("-0.15", 0.9), _digits("-0.15", 0.9), (0, 0), None, 18.0).value == -0.15


def test_an_end_read_again_is_one_number_two_of_three_readings_read_and_none_contradicts() -> None:
    """A low-resolution "-80" read as a number by a first reading and "30" by both new ones is left empty, and
    so is a PEF's "0" both new ones read "9": which is right, nothing tells. Where the first reading's number and
    one new reading agree, one of them sure, the end is read though the other new reading read nothing."""
    minus_eighty = _word("-80", 10, 0.85)
    assert reread_end(minus_eighty, _digits("30", 0.7), _digits("30", 0.6), (0, 0), None, 18.0).value is None
    assert reread_end(minus_eighty, _digits("-80", 0.7), _digits("-80", 0.6), (0, 0), None, 18.0).value == -80.0
    zero = _word("0", 10, 0.73)
    assert reread_end(zero, _digits("9", 0.44), _digits("9", 0.75), (0, 0), None, 18.0).value is None
    assert reread_end(zero, _digits("0", 0.84), [], (0, 0), None, 18.0).value == 0.0
    assert reread_end(_word("0", 10, END_CONFIDENCE - 0.01), _digits("0", 0.84), [], (0, 0), None, 18.0).value is None
    assert reread_end(zero, _digits("0", 0.84), _digits("8", 0.9), (0, 0), None, 18.0).value is None


def test_on_small_text_only_a_zero_is_read_again() -> None:
    """Under SIGN_TEXT_PX a minus is a pixel or two thick and every reading may miss it."""
    lone = _word("O15", 300, 0.6)
    small, tall = SIGN_TEXT_PX - 0.5, SIGN_TEXT_PX
    assert reread_end(lone, _digits("0.15", 0.9), _digits("0.15", 0.9), (0, 0), None, small).value is None
    assert reread_end(lone, _digits("0.15", 0.9), _digits("0.15", 0.9), (0, 0), None, tall).value == 0.15
    assert reread_end(_word(")", 10, 0.0), _digits("0", 0.9), _digits("0", 0.9), (0, 0), None, small).value == 0.0


def test_an_end_read_again_is_kept_only_where_the_lines_two_ends_then_fit_the_tracks_grid() -> None:
    [curve] = curves_in([_word(")", 10, 0.0), _word("GR", 260, 0.9), _word("150", WIDTH - 46, 0.96)], BOX)
    zero, eight = Reading(0.0, 0.9), Reading(8.0, 0.9)
    assert with_reread(curve, {0: zero}, False, None).left == zero
    assert with_reread(curve, {0: eight}, False, None) == curve, "8 to 150 is no span a linear track is printed over"
    assert with_reread(curve, {0: zero}, None, None) == curve, "a track whose grid is unread checks nothing"
    [lone] = curves_in([_word(")", 10, 0.0), _word("GR", 260, 0.9), _word("(API)", 320, 0.9)], BOX)
    assert with_reread(lone, {0: zero}, False, None) == lone, "a lone end read again has nothing to check it"
    [log] = curves_in([_word(")", 10, 0.0), _word("ILD", 260, 0.9), _word("2000", WIDTH - 58, 0.96)], BOX)
    assert with_reread(log, {0: Reading(0.2, 0.9)}, True, 4).left.value == 0.2
    assert with_reread(log, {0: Reading(2.0, 0.9)}, True, 4) == log, "three decades on a grid of four"


def test_an_end_all_three_readings_read_alike_needs_less_confidence_on_tall_text_only() -> None:
    """An SP's "20" Tesseract doubts each time (0.27, 0.44, 0.49) is read on tall text; on small text a digit
    confused alike three times ("16" read "46") is not."""
    twenty = _word("20", WIDTH - 34, 0.27)
    tall, small = UNANIMOUS_TEXT_PX, UNANIMOUS_TEXT_PX - 0.5
    assert reread_end(twenty, _digits("20", 0.44), _digits("20", 0.49), (0, 0), None, tall).value == 20.0
    assert reread_end(twenty, _digits("20", 0.44), _digits("20", 0.49), (0, 0), None, small).value is None
    assert reread_end(twenty, _digits("20", 0.2), _digits("20", 0.25), (0, 0), None, tall).value is None
    assert reread_end(twenty, _digits("20", 0.44), [], (0, 0), None, tall).value is None, "two of three: one sure"


def test_a_unit_read_as_no_known_one_keeps_its_word_to_read_again() -> None:
    """A unit Tesseract read as letters of no known unit ("(APT)" for API): its word is kept, and the name's where the
    unit is glued to it; not where a reading read a known unit, nor where the readings read two."""
    missed = curves_in(_line("0", "GR", "(APT)", "150", (0.9, 0.9, 0.5, 0.9)), BOX)
    assert missed[0].unit.value is None and missed[0].unit_word is not None and missed[0].unit_word.text == "(APT)"
    glued = curves_in([_word("0", 10, 0.9), _word("GR(MY)", 260, 0.9), _word("150", WIDTH - 46, 0.9)], BOX)
    assert glued[0].unit_word is not None and glued[0].unit_word.text == "GR(MY)"
    [curve] = agreed(missed, missed, log_grid=False)
    assert curve.unit.value is None and curve.unit_word is not None and curve.unit_word.text == "(APT)"
    read = curves_in(_line("0", "GR", "(API)", "150", (0.9, 0.9, 0.5, 0.9)), BOX)
    assert read[0].unit_word is None
    assert agreed(missed, read, log_grid=False)[0].unit_word is None  # one reading read it: kept, nothing to read
    other = curves_in(_line("0", "GR", "(MV)", "150", (0.9, 0.9, 0.5, 0.9)), BOX)
    [tied] = agreed(read, other, log_grid=False)
    assert tied.unit.value is None and tied.unit_word is None  # two known units: for the person, not a third reading
    assert curves_in(_line("0", "GR", "", "150", (0.9, 0.9, 0.0, 0.9)), BOX)[0].unit_word is None  # no unit printed


def test_a_unit_read_again_is_the_known_unit_both_new_readings_read() -> None:
    assert unit_text([_word("(API)", 0, 0.9)]) == "API"
    assert unit_text([_word("GR", 0, 0.9), _word("[MV].", 30, 0.9)]) == "MV"  # a bracket read for a parenthesis
    assert unit_text([_word("MV)", 0, 0.9)]) is None  # no parenthesis opens: not read as a unit
    assert reread_unit([_word("(API)", 0, 0.9)], [_word("(API)", 0, 0.4)]) == Reading("API", 0.4)
    assert reread_unit([_word("GR(MV)", 0, 0.9)], [_word("(MV)", 20, 0.8)]).value == "MV"
    assert reread_unit([_word("(API)", 0, 0.9)], [_word("(APE)", 0, 0.9)]).value is None  # the readings differ
    assert reread_unit([_word("(6/C3)", 0, 0.9)], [_word("(6/C3)", 0, 0.9)]).value is None  # both alike, no unit
    assert reread_unit([_word("(API)", 0, 0.9)], []).value is None


def _two_lines(name_top: float, ends_top: float, end_word: str = "\u2014") -> list[Word]:
    """A legend entry printed on two lines: the name and unit centred, a dash of the sample under it read at its
    right end, and under the sample the two scale ends at the box's ends."""
    return [Word("GR", 0.9, 260, name_top, 24, 18, 1), Word("(GAPI)", 0.9, 290, name_top, 72, 18, 1),
            Word(end_word, 0.4, WIDTH - 30, name_top, 20, 18, 1),
            Word("0", 0.9, 10, ends_top, 12, 18, 2), Word("150", 0.9, WIDTH - 46, ends_top, 36, 18, 2)]


def test_a_name_over_its_sample_and_the_ends_under_it_are_one_curve() -> None:
    """A legend that prints the name and unit on one line and the scale ends on the next (under the sample) is
    read as one curve at the name's row, not as a named curve without ends and a nameless one with them; lines
    further apart than JOIN_HEIGHTS text heights, or a name line with a number at its end, stay two."""
    words = _two_lines(10.0, 55.0)
    read = agreed(curves_in(words, BOX), curves_in(words, BOX), False, None)
    assert [(c.mnemonic.value, c.left.value) for c in read] == [("GR", None), (None, 0.0)]
    [curve] = joined_entries(read)
    assert (curve.mnemonic.value, curve.unit.value, curve.left.value, curve.right.value) == ("GR", "GAPI", 0.0, 150.0)
    assert curve.row == read[0].row and curve.end_words == read[1].end_words
    far = _two_lines(10.0, 10.0 + 18.0 * 3.5)
    assert len(joined_entries(agreed(curves_in(far, BOX), curves_in(far, BOX), False, None))) == 2
    numbered = _two_lines(10.0, 55.0, end_word="200")  # the name's line has an end of its own: two entries
    assert len(joined_entries(agreed(curves_in(numbered, BOX), curves_in(numbered, BOX), False, None))) == 2


def test_a_decimal_read_without_its_point_is_left_unread() -> None:
    """"03" and "-01" are "0.3" and "-0.1" whose point Tesseract lost: no header prints a zero before a digit,
    so they are left for reading again, never proposed as 3 and -1."""
    line = [_word("03", 10, 0.9), _word("NPHI", 260, 0.9), _word("-01", WIDTH - 46, 0.9)]
    [curve] = curves_in(line, BOX)
    assert (curve.mnemonic.value, curve.left.value, curve.right.value) == ("NPHI", None, None)
    [curve] = curves_in([_word("0", 10, 0.9), _word("NPHI", 260, 0.9), _word("-0.1", WIDTH - 46, 0.9)], BOX)
    assert (curve.left.value, curve.right.value) == (0.0, -0.1)


def _header(row: float) -> CurveHeader:
    return CurveHeader(Reading("GR", 0.9), Reading(None, 0.0), Reading(None, 0.0), Reading(None, 0.0),
                       Reading(None, 0.0), row, 18.0)


def test_a_legend_that_draws_each_sample_over_its_text_is_read_so() -> None:
    """Where each curve's line sample is drawn over its text, a box's samples are found above the texts (one
    above the first text, none under the last), and each curve takes the sample over it: the first curve's
    dashed sample, not the second's solid one under its text."""
    rows = (130.0, 160.0)
    curves = [_header(BOX.top + r - BOX.top) for r in rows]
    over = [LineSample(115, 1.0, 2.0, 2.0), LineSample(145, 1.0, 2.0, 2.0)]
    under = [LineSample(145, 1.0, 2.0, 2.0), LineSample(175, 1.0, 2.0, 2.0)]
    assert samples_above(curves, over, BOX.top, BOX.bottom + 20)
    assert not samples_above(curves, under, BOX.top, BOX.bottom + 20)
    assert not samples_above(curves[:1], [LineSample(145, 1.0, 2.0, 2.0)], BOX.top, BOX.bottom + 20)
    ink = np.zeros((400, 800), dtype=bool)
    ink[115, BOX.left + 20:BOX.right - 20] = (np.arange(BOX.right - BOX.left - 40) % 24) < 14  # dashed, over GR
    ink[145, BOX.left + 20:BOX.right - 20] = True  # solid, over the second curve and under GR
    box = TextBox(top=BOX.top, bottom=BOX.bottom + 20, left=BOX.left, right=BOX.right)
    style, row = line_style(ink, box, curves[0], float(box.top), above=True)
    assert (style.value, row) == ("dashed", 115)
    style, row = line_style(ink, box, curves[1], curves[0].row, above=True)
    assert (style.value, row) == ("solid", 145)
    style, row = line_style(ink, box, curves[0], curves[1].row)  # read under its text: the other curve's
    assert (style.value, row) == ("solid", 145)


def test_a_unit_printed_bare_after_the_name_is_the_unit_and_never_the_name() -> None:
    """"GR API", "SP mV": a known unit printed without parentheses after the name is the curve's unit (in capitals),
    however much surer Tesseract is of it than of the name; a known unit alone on a line names no curve."""
    for unit, read in (("API", "API"), ("mV", "MV"), ("OHMM", "OHMM")):
        line = [_word("0", 10, 0.9), _word("GR", 260, 0.5), _word(unit, 300, 0.95), _word("150", WIDTH - 46, 0.9)]
        [curve] = agreed(curves_in(line, BOX), curves_in(line, BOX))
        assert (curve.mnemonic.value, curve.unit.value, curve.left.value, curve.right.value) == ("GR", read, 0.0, 150.0)
    assert curves_in([_word("OHMM", 300, 0.95)], BOX) == []
    [curve] = curves_in([_word("APIX", 260, 0.9), _word("API", 320, 0.9)], BOX)  # an unknown word is a name
    assert (curve.mnemonic.value, curve.unit.value) == ("APIX", "API")


def test_a_rule_between_legend_cells_is_no_line_sample() -> None:
    """A legend that rules each entry into a cell draws the rules from border to border, the samples stopping
    short of them: the rule under an entry is neither its sample nor a curve of its own; a dashed sample above
    it is read as the entry's."""
    box = TextBox(top=100, bottom=220, left=50, right=649)
    ink = np.zeros((400, 800), dtype=bool)
    ink[150, box.left + 20:box.right - 20] = (np.arange(box.right - box.left - 40) % 24) < 14  # the dashed sample
    ink[170, box.left - 3:box.right + 4] = True  # the cell's rule, into the borders
    gray = np.where(ink, 0, 255).astype(np.uint8)
    assert [sample.row for sample in line_samples(ink, gray, 255, box)] == [150]
    style, row = line_style(ink, box, _header(130.0), float(box.bottom))
    assert (style.value, row) == ("dashed", 150)
    ink[150] = False  # no sample at all: the rule is still none
    assert line_samples(ink, np.where(ink, 0, 255).astype(np.uint8), 255, box) == []
    assert line_style(ink, box, _header(130.0), float(box.bottom)) == (Reading(None, 0.0), None)


def test_the_last_curves_sample_close_over_the_boxs_bottom_is_its_own() -> None:
    """The last curve of a header has no text under it: its sample, drawn just over the box's bottom edge, is
    read (half a line of text is kept clear of a next curve's text, not of the box's edge); over its text, the
    first curve's sample just under the box's top is read alike."""
    box = TextBox(top=100, bottom=220, left=50, right=649)
    ink = np.zeros((400, 800), dtype=bool)
    ink[215, box.left + 20:box.right - 20] = (np.arange(box.right - box.left - 40) % 24) < 14
    style, row = line_style(ink, box, _header(195.0), float(box.bottom))
    assert (style.value, row) == ("dashed", 215)
    ink[:] = False
    ink[105, box.left + 20:box.right - 20] = True
    style, row = line_style(ink, box, _header(125.0), float(box.top), above=True)
    assert (style.value, row) == ("solid", 105)


def test_a_bare_unit_read_joined_to_the_name_is_split_off() -> None:
    """"CALI IN" read as one word "CALIIN", "TENS LB" as "TENSLB": the name and its unit; names that end in no
    known unit, or would leave a name of one letter, stay whole."""
    for word, name, unit in (("CALIIN", "CALI", "IN"), ("TENSLB", "TENS", "LB"), ("GRGAPI", "GR", "GAPI"),
                             ("ILDOHMM", "ILD", "OHMM"), ("MSFL", "MSFL", None), ("SFLU", "SFLU", None),
                             ("RMM", "RMM", None), ("NPHI", "NPHI", None)):
        [curve] = curves_in([_word("0", 10, 0.9), _word(word, 260, 0.9), _word("150", WIDTH - 46, 0.9)], BOX)
        assert (curve.mnemonic.value, curve.unit.value) == (name, unit), word
