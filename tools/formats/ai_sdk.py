# AI SDK cases written by gen.py (the older ai-sdk cases were written by hand).
dump="\n".join("line %d of the screen reader dump: button #%d 'Sign in'"%(i,i) for i in range(400))
png={"type":"media","data":"iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==","mediaType":"image/png"}
hist=[{"role":"system","content":"You drive a browser."},
      {"role":"user","content":"Log in to the staging dashboard."},
      {"role":"assistant","content":[{"type":"tool-call","toolCallId":"call_shot","toolName":"screenshot","input":{}}]},
      {"role":"tool","content":[{"type":"tool-result","toolCallId":"call_shot","toolName":"screenshot",
        "output":{"type":"content","value":[{"type":"text","text":dump},png]}}]},
      {"role":"assistant","content":"The login form is on screen."}]
case('ai-sdk','content-media-offload','An offloaded content output keeps its media beside the placeholder: output {type: content, value: [placeholder text, the media as they were]}.','ai-sdk',hist,
  compact_opts={"context_window":9000})
