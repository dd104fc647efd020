"""What the adapters share: the options they pass on, the summarizer they call, and the
conversion of LangChain message objects to the core's langchain dialect and back."""

import importlib
import inspect

from .._compactor import Compactor, _check_signature, _is_async_callable
from .._ext import HttpSummarizer

# Compactor.compact's keywords; the adapters hand over the history themselves.
_COMPACT_OPTIONS = frozenset(
    name for name, p in inspect.signature(Compactor.compact).parameters.items()
    if p.kind is inspect.Parameter.KEYWORD_ONLY)


def require(module, package):
    """``import module``, or an ImportError that names the pip package to install."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError("ctxkeel.integrations needs %s for this adapter: pip install %s"
                          % (module, package)) from exc


def check_compactor(compactor, adapter, dialect):
    """A Compactor that reads what the adapter hands it: format "auto" or ``dialect``."""
    if not isinstance(compactor, Compactor):
        raise TypeError("ctxkeel: %s takes a ctxkeel.Compactor, not %s"
                        % (adapter, type(compactor).__name__))
    fmt = compactor.options.get("format", "auto")
    if fmt not in ("auto", dialect):
        raise ValueError("ctxkeel: %s hands the compactor %s messages, but it was made with "
                         "format=%r (use \"auto\" or %r)" % (adapter, dialect, fmt, dialect))


class Options:
    """The per-call options of an adapter: ``summarize`` in its sync and async forms, and the
    rest of Compactor.compact's keywords as given."""

    __slots__ = ("sync", "asyn", "rest")

    def __init__(self, adapter, options):
        unknown = sorted(set(options) - _COMPACT_OPTIONS)
        if unknown:
            raise TypeError("ctxkeel: %s got unknown option(s) %s (Compactor.compact takes %s)"
                            % (adapter, ", ".join(unknown), ", ".join(sorted(_COMPACT_OPTIONS))))
        rest = dict(options)
        summarize = rest.pop("summarize", None)
        self.sync, self.asyn = _summarizers(summarize)
        self.rest = rest

    def call(self, asynchronous, converted=None, **given):
        """The keywords of one compact() (or acompact()): the adapter's own (``given``, such
        as the request's tools) yield to the user's; with ``converted``, the summarizer sees
        the original message objects."""
        summarize = self.asyn if asynchronous else self.sync
        if converted is not None:
            summarize = converted.request_messages(summarize)
        given.update(self.rest)
        given["summarize"] = summarize
        return given


def _is_chat_model(obj):
    """A LangChain chat model or any Runnable taking messages: ``invoke`` and ``ainvoke``."""
    return (not isinstance(obj, HttpSummarizer) and callable(getattr(obj, "invoke", None))
            and callable(getattr(obj, "ainvoke", None)))


def _summarizers(summarize):
    """(for compact, for acompact): the summarizer as given, or a LangChain chat model turned
    into a function and a coroutine function asking it for the checkpoint."""
    if summarize is None or not _is_chat_model(summarize):
        if summarize is not None and not callable(summarize):
            raise TypeError("ctxkeel: summarize must be a function, a coroutine function, an "
                            "HttpSummarizer or a LangChain chat model, not %s"
                            % type(summarize).__name__)
        _check_signature(summarize)
        return summarize, summarize
    model = summarize

    def summarize_with_model(request):
        return reply_text(model.invoke(summary_prompt(request)))

    async def asummarize_with_model(request):
        return reply_text(await model.ainvoke(summary_prompt(request)))

    return summarize_with_model, asummarize_with_model


def summary_prompt(request):
    """The summary request as chat input any LangChain chat model takes: (role, text) pairs."""
    return [("system", request["system"]), ("human", request["prompt"])]


def reply_text(reply):
    """The text of a chat model's reply: its ``text`` (a property in langchain-core 1, a
    method before), else its content's text parts. Anything else goes to the compactor, which
    records it as a fallback."""
    text = getattr(reply, "text", None)
    if callable(text) and not isinstance(text, str):
        text = text()
    if isinstance(text, str):
        return str(text)
    content = getattr(reply, "content", reply)
    if isinstance(content, list):
        return "".join(item if isinstance(item, str) else str(item.get("text", ""))
                       for item in content if isinstance(item, (str, dict)))
    return content


# ---- LangChain messages <-> the core's langchain dialect ------------------------------------

# The type of a message chunk's dict (model_dump gives the class name) as the core reads it.
_CHUNK_TYPES = {"AIMessageChunk": "ai", "HumanMessageChunk": "human",
                "SystemMessageChunk": "system", "ToolMessageChunk": "tool",
                "ChatMessageChunk": "chat", "FunctionMessageChunk": "function"}


def to_dict(message):
    """A LangChain message as the core's langchain dialect reads it: its model_dump (every
    field kept, so an edited copy rebuilds the same message), a chunk typed as its message."""
    if isinstance(message, dict):  # already a dict: the core reads it as it is
        return message
    data = message.model_dump()
    kind = _CHUNK_TYPES.get(data.get("type"))
    if kind is not None:
        data["type"] = kind
    return data


class Converted:
    """A list of LangChain messages as dicts for the core, and the way back: a view's dict that
    is one of these is its original message object (the same object), any other (an edited
    copy, the checkpoint, a stub) a new message built from it."""

    __slots__ = ("dicts", "_origin")

    def __init__(self, messages):
        self.dicts = [to_dict(m) for m in messages]
        self._origin = {id(d): m for d, m in zip(self.dicts, messages)}

    def original(self, data):
        """The message object ``data`` was made from, or None for a dict the core built."""
        return self._origin.get(id(data))

    def back(self, view):
        core = require("langchain_core.messages", "langchain-core")
        out = []
        for data in view:
            message = self._origin.get(id(data))
            if message is None:
                message = core.messages_from_dict([{"type": data["type"], "data": data}])[0]
            out.append(message)
        return out

    def request_messages(self, fn):
        """``fn`` seeing the summary request's span as the original message objects (a
        coroutine function stays one)."""
        if fn is None or isinstance(fn, HttpSummarizer):
            return fn
        origin = self._origin

        def remap(request):
            request = dict(request)
            request["messages"] = [origin.get(id(d), d) for d in request["messages"]]
            return request

        if _is_async_callable(fn):
            async def awith_messages(request):
                return await fn(remap(request))

            return awith_messages

        def with_messages(request):
            return fn(remap(request))

        return with_messages
