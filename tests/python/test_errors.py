"""The status-code table and the exception hierarchy, checked for every code."""

import pytest

import ctxkeel
from ctxkeel import _ext

# Every code of CK_STATUS_LIST in csrc/include/ctxkeel.h, and the ones CK_IS_INPUT_ERROR
# accepts. A code added to the header without reaching the binding fails here.
EXPECTED = {
    "CK_OK": 0, "CK_ENOMEM": -1, "CK_EINVAL": -2, "CK_ESYNTAX": -3, "CK_ETYPE": -4,
    "CK_EMISSING": -5, "CK_EUTF8": -6, "CK_EFORMAT": -7, "CK_ETOOBIG": -8, "CK_EIO": -9,
    "CK_ECLOSED": -10, "CK_EBUSY": -11, "CK_ETIMEDOUT": -12, "CK_ECANCELED": -13,
    "CK_ESUMMARY": -14, "CK_ESTATE": -15, "CK_ECONFLICT": -16, "CK_EOVERFLOW": -17,
}
INPUT_CODES = {"CK_EINVAL", "CK_ESYNTAX", "CK_ETYPE", "CK_EMISSING", "CK_EUTF8", "CK_EFORMAT",
               "CK_ETOOBIG"}


def test_status_codes_cover_the_list():
    assert {name: value for name, (value, _) in ctxkeel.STATUS_CODES.items()} == EXPECTED
    assert list(ctxkeel.STATUS_CODES) == sorted(EXPECTED, key=lambda n: -EXPECTED[n])
    assert all(isinstance(text, str) and text for _, text in ctxkeel.STATUS_CODES.values())
    assert ctxkeel.STATUS_CODES["CK_ETYPE"] == (-4, "value has the wrong type")


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_code_raises_its_exception(name):
    value, text = ctxkeel.STATUS_CODES[name]
    if name == "CK_OK":
        assert _ext._raise_status(value) is None
        return
    if name == "CK_ENOMEM":
        with pytest.raises(MemoryError):
            _ext._raise_status(value)
        return
    with pytest.raises(ctxkeel.Error) as info:
        _ext._raise_status(value)
    err = info.value
    assert err.code == name
    assert str(err) == "ctxkeel: " + text
    assert err.index is None and err.where is None and err.offset is None
    if name in INPUT_CODES:
        assert type(err) is ctxkeel.InputError and isinstance(err, ValueError)
    elif name == "CK_EOVERFLOW":
        assert type(err) is ctxkeel.ContextOverflowError and not isinstance(err, ValueError)
    else:
        assert type(err) is ctxkeel.Error and not isinstance(err, ValueError)


def test_unknown_status_code():
    for bad in (1, -18, -1000, 2**40):
        with pytest.raises((ValueError, OverflowError)):
            _ext._raise_status(bad)


def test_hierarchy():
    assert issubclass(ctxkeel.Error, Exception)
    assert not issubclass(ctxkeel.Error, ValueError)
    assert issubclass(ctxkeel.InputError, ctxkeel.Error)
    assert issubclass(ctxkeel.InputError, ValueError)
    assert issubclass(ctxkeel.ContextOverflowError, ctxkeel.Error)
    assert not issubclass(ctxkeel.ContextOverflowError, ValueError)
    assert ctxkeel.ContextOverflowError.__module__ == "ctxkeel"
    assert ctxkeel.ContextOverflowError is ctxkeel._ext.ContextOverflowError
    assert ctxkeel.Error.__module__ == "ctxkeel" and ctxkeel.InputError.__name__ == "InputError"


def test_attributes_default_to_none():
    err = ctxkeel.Error("raised by hand")
    assert (err.code, err.index, err.where, err.offset) == (None, None, None, None)
    sub = ctxkeel.InputError("x")
    assert sub.code is None


def test_input_error_caught_as_value_error():
    with pytest.raises(ValueError):
        ctxkeel.check_pairs([{"content": "no role"}])
