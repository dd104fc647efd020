"""``CompactionMiddleware(compactor, **options)``: ctxkeel as a LangChain v1 ``AgentMiddleware``.

    from langchain.agents import create_agent
    from ctxkeel.integrations.langchain import CompactionMiddleware

    agent = create_agent(model, tools, middleware=[CompactionMiddleware(Compactor(128_000))])

It wraps the model call (``wrap_model_call`` and ``awrap_model_call``): before every call the
request's messages, its system message in front, are compacted and the model is handed the
view; the graph state is not touched, so it keeps the full history. Messages the view leaves
unchanged are the state's own objects; the checkpoint, stubs and edited copies are new
messages of LangChain's own classes. The request's tools count against the window (as OpenAI
tool schemas) unless ``tools=`` is given. ``options`` are Compactor.compact's keywords
(``summarize=`` may also be a LangChain chat model). ``last_result`` is the CompactionResult of
the latest call.

This module imports without LangChain; ``CompactionMiddleware`` is built on first use and
needs ``pip install langchain`` (v1).
"""

from ._common import Converted, Options, check_compactor, require

__all__ = ["CompactionMiddleware"]

_built = {}


def __getattr__(name):
    if name != "CompactionMiddleware":
        raise AttributeError("module %r has no attribute %r" % (__name__, name))
    if name not in _built:
        _built[name] = _build()
    return _built[name]


def _tool_schema(convert, tool):
    """A tool as the OpenAI schema whose tokens the core counts; a provider's built-in tool
    (a dict LangChain cannot convert) as it is."""
    try:
        return convert(tool)
    except Exception:
        if isinstance(tool, dict):
            return tool
        raise


def _build():
    middleware = require("langchain.agents.middleware", "langchain")
    convert = require("langchain_core.utils.function_calling", "langchain-core")

    class CompactionMiddleware(middleware.AgentMiddleware):
        """Compacts what the model sees on every model call of ``create_agent``'s loop."""

        def __init__(self, compactor, **options):
            super().__init__()
            check_compactor(compactor, "CompactionMiddleware", "langchain")
            self.compactor = compactor
            self.last_result = None
            self._options = Options("CompactionMiddleware", options)
            self._tools = ((), [])  # the request's tools last seen, and their schemas

        def _schemas(self, tools):
            seen, schemas = self._tools
            if len(seen) != len(tools) or any(a is not b for a, b in zip(seen, tools)):
                schemas = [_tool_schema(convert.convert_to_openai_tool, t) for t in tools]
                self._tools = (tuple(tools), schemas)
            return schemas

        def _prepare(self, request, asynchronous):
            system = request.system_message
            messages = list(request.messages)
            if system is not None:
                messages.insert(0, system)
            converted = Converted(messages)
            options = self._options.call(asynchronous, converted,
                                         tools=self._schemas(request.tools or []) or None)
            return converted, system, options

        def _finish(self, request, converted, system, result):
            self.last_result = result
            view = converted.back(result.messages)
            changes = {"messages": view}
            if system is not None and view and getattr(view[0], "type", None) == "system":
                # The system message is pinned, so it leads the view; it goes back where
                # the request keeps it (the same object unless the core edited it).
                changes["messages"] = view[1:]
                if view[0] is not system:
                    changes["system_message"] = view[0]
            return request.override(**changes)

        def wrap_model_call(self, request, handler):
            converted, system, options = self._prepare(request, False)
            result = self.compactor.compact(converted.dicts, **options)
            return handler(self._finish(request, converted, system, result))

        async def awrap_model_call(self, request, handler):
            converted, system, options = self._prepare(request, True)
            result = await self.compactor.acompact(converted.dicts, **options)
            return await handler(self._finish(request, converted, system, result))

    CompactionMiddleware.__module__ = __name__
    CompactionMiddleware.__qualname__ = "CompactionMiddleware"
    return CompactionMiddleware
