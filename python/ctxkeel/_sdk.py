"""A provider SDK's message objects wherever ctxkeel takes messages.

The core reads dicts (and lists, strings, numbers). An agent loop built on an SDK holds that
SDK's pydantic objects too: ``messages.append(response.choices[0].message)`` with OpenAI, an
Anthropic ``{"role": "assistant", "content": response.content}`` (a list of blocks), or
LangChain's message classes. Each entry point hands its input to the core as it is first, so
a list of dicts costs nothing more; only when the core refuses it is it looked through for
such objects, which are then read as their ``model_dump()`` (LangChain's through the
langchain dialect's conversion), and a result maps each message made from one back to the
caller's own object.

An object that is neither (no ``model_dump()``) keeps the core's refusal, with its type named.
"""

from . import _ext
from ._ext import InputError

__all__ = ["check_pairs", "estimate_tokens", "plain", "repair_pairs", "SdkMessages", "through"]


def is_sdk_object(x):
    """A pydantic model of a provider's SDK (an OpenAI ChatCompletionMessage, an Anthropic
    TextBlock or ToolUseBlock...): what has model_dump() and is not plain data."""
    return not isinstance(x, (dict, list, tuple, str, bytes)) and \
        callable(getattr(x, "model_dump", None))


def _fail(where, text, cause=None):
    """An InputError placed at ``where`` ("messages[3]", "messages[3].content[1]")."""
    exc = InputError("ctxkeel: %s: %s" % (where, text))
    exc.code = "CK_ETYPE"
    exc.where = where
    if where.startswith("messages["):
        exc.index = int(where[len("messages["):where.index("]")])
    exc.__cause__ = cause
    return exc


def _dump(obj, where):
    """An SDK object as the plain data its model_dump() gives, without the fields left None,
    as the providers' request parameters take it."""
    try:
        data = obj.model_dump(mode="json", exclude_none=True)
    except Exception as exc:
        raise _fail(where, "%s.model_dump() raised %s: %s"
                    % (type(obj).__name__, type(exc).__name__, exc), exc) from exc
    if not isinstance(data, dict):
        raise _fail(where, "%s.model_dump() gave %s, not a dict"
                    % (type(obj).__name__, type(data).__name__))
    return data


def plain(message, where="message"):
    """``message`` with SDK objects as dicts: the message itself when it is one, else the items
    of its lists (content blocks, tool calls) that are; ``message`` itself when it holds none."""
    if is_sdk_object(message):
        return _dump(message, where)
    if not isinstance(message, dict):
        return message
    out = None
    for key, value in message.items():
        if isinstance(value, list) and any(is_sdk_object(x) for x in value):
            if out is None:
                out = dict(message)
            out[key] = [_dump(x, "%s.%s[%d]" % (where, key, k)) if is_sdk_object(x) else x
                        for k, x in enumerate(value)]
    return message if out is None else out


class SdkMessages:
    """A message list that holds SDK objects, as the dicts the core reads, and the way back:
    a view's message made from one of them is the caller's own object; edited copies, the
    checkpoint and stubs are dicts, which the SDKs take as well. LangChain message objects go
    through the langchain dialect's conversion instead, so that new messages are built with
    LangChain's classes."""

    __slots__ = ("dicts", "_origin")

    def __init__(self, dicts, origin):
        self.dicts = dicts
        self._origin = origin

    @classmethod
    def of(cls, messages):
        """The conversion of ``messages``, or None when it holds no SDK object."""
        if not isinstance(messages, (list, tuple)):
            return None
        if any(is_sdk_object(m) and type(m).__module__.startswith("langchain_core.")
               for m in messages):
            from .integrations._common import Converted
            return Converted(messages)
        dicts, origin = [], {}
        for k, m in enumerate(messages):
            d = plain(m, "messages[%d]" % k)
            if d is not m:
                origin[id(d)] = m
            dicts.append(d)
        return cls(dicts, origin) if origin else None

    def back(self, view):
        """``view`` with the caller's own message wherever one was made from it."""
        return [self._origin.get(id(d), d) for d in view]


def _named(exc, messages):
    """The core's refusal of ``messages``, with the type named when the message it points at
    is an object of a type the core cannot read (it sees only "not an object")."""
    index = getattr(exc, "index", None)
    if not isinstance(messages, (list, tuple)) or not isinstance(index, int) or \
            not 0 <= index < len(messages) or exc.where != "messages[%d]" % index:
        return exc
    m = messages[index]
    if isinstance(m, (dict, list, tuple, str, bytes, int, float, bool)) or m is None:
        return exc
    return _fail(exc.where, "expected a message dict (or an object with model_dump()), not %s"
                 % type(m).__name__, exc)


def through(call, messages):
    """``call(messages)``, and when the core refuses ``messages``, ``call`` of their SDK objects
    as dicts. Returns (what ``call`` returned, the SdkMessages or None)."""
    try:
        return call(messages), None
    except InputError as exc:
        sdk = SdkMessages.of(messages)
        if sdk is None:
            named = _named(exc, messages)
            if named is exc:
                raise
            raise named from exc
    return call(sdk.dicts), sdk


# ---- the module's message functions, taking SDK objects too --------------------------------

def estimate_tokens(x, *, estimator="default"):
    """The tokens of a str, a message, a message list or a tool-schema list (messages may be
    SDK objects), as the core's ``estimate_tokens``."""
    if is_sdk_object(x):
        x = SdkMessages.of([x]).dicts[0]
    elif isinstance(x, dict):
        try:
            return _ext.estimate_tokens(x, estimator=estimator)
        except InputError:
            d = plain(x)
            if d is x:
                raise
            x = d
    return through(lambda m: _ext.estimate_tokens(m, estimator=estimator), x)[0]


def check_pairs(messages, *, format="auto"):
    """Every tool-call pairing violation of ``messages`` (a list or tuple; SDK objects are
    read as their dump), as the core's ``check_pairs``."""
    return through(lambda m: _ext.check_pairs(m, format=format), messages)[0]


def repair_pairs(messages, *, format="auto"):
    """``messages`` without pairing violations, as the core's ``repair_pairs``: the unchanged
    messages are the caller's own objects (SDK objects included), never modified."""
    out, sdk = through(lambda m: _ext.repair_pairs(m, format=format), messages)
    return out if sdk is None else sdk.back(out)
