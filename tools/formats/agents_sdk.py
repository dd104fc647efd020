# The OpenAI Agents SDK for JS's own items, read natively by the 'responses' dialect: camelCase
# callId, function_call_result with a string or structured output, reasoning with content /
# rawContent, computer_call_result. python3 tools/formats/gen.py tools/formats/agents_sdk.py
def log(i, lines=400):
    return "\n".join("step %d line %d: worker=%d state=ok bytes=%d" % (i, n, n % 7, n * 31)
                     for n in range(lines))
def call(i, name="readLog", args=None):
    return {"type":"function_call","id":"fc_%d"%i,"callId":"call_%d"%i,"name":name,
            "arguments":args or '{"step":%d}'%i,"status":"completed"}
def result(i, output, name="readLog"):
    return {"type":"function_call_result","callId":"call_%d"%i,"name":name,
            "status":"completed","output":output}
def reasoning(i, text):
    return {"type":"reasoning","id":"rs_%d"%i,"content":[{"type":"input_text","text":text}],
            "providerData":{"encryptedContent":"enc-%d"%i}}
def said(i, text):
    return {"type":"message","id":"msg_%d"%i,"role":"assistant","status":"completed",
            "content":[{"type":"output_text","text":text}]}
SYS={"type":"message","role":"system","content":"You are a careful log reader."}
TASK={"role":"user","content":"Find the step whose log reports the checksum mismatch."}

hist=[SYS, TASK]
for i in range(1, 7):
    hist.append(said(i, "Reading step %d." % i))
    hist.append(call(i))
    out = log(i) if i % 2 else {"type":"text","text":log(i)}
    hist.append(result(i, out))
hist.append({"role":"user","content":"Which step was it?"})
case("responses","sdk-offload",
     "Agents SDK items (callId, function_call_result with string and {type:'text'} outputs): an offloaded result comes back as a copy of the SDK's item, a string output as a string and a structured one as {type:'text', text: placeholder}.",
     "auto", hist, detected="responses", compact_opts={"context_window":6000,"keep_tail":7})

case("responses","sdk-stub",
     "An Agents SDK call without its result: the stub is a function_call_result with the call's callId and name, status completed and output {type:'text', text}.",
     "auto", [TASK, said(1, "Reading."), call(1), call(2, name="grep", args='{"pattern":"mismatch"}'),
              result(2, "no match", name="grep")], detected="responses")

hist=[SYS, TASK]
for i in range(1, 6):
    hist.append({"type":"reasoning","id":"rs_%d"%i,
                 "content":[{"type":"input_text","text":"Step %d: the counters look plausible, checking the workers next. " % i * 8}],
                 "rawContent":[{"type":"reasoning_text","text":"raw thoughts %d" % i}]})
    hist.append(call(2*i))
    hist.append(call(2*i+1, name="readMeta", args='{"step":%d}' % i))
    hist.append(result(2*i+1, {"type":"text","text":"meta %d: ok" % i}, name="readMeta"))
    hist.append(result(2*i, log(i, 200)))
hist.append({"type":"computer_call","id":"cu_1","callId":"call_cu","action":{"type":"screenshot"},"status":"completed"})
hist.append({"type":"computer_call_result","callId":"call_cu","output":{"type":"computer_screenshot","data":"iVBORw0KGgo="}})
hist.append({"role":"user","content":"Which step was it?"})
case("responses","sdk-reasoning-parallel",
     "Agents SDK reasoning items (content and rawContent read as their text) before parallel calls whose results come back in another order, and a computer_call_result: the folded turns take their reasoning along, the kept ones stay whole and valid.",
     "auto", hist, detected="responses", compact_opts={"context_window":2500,"keep_tail":6})

img={"type":"input_image","image":"data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="}
hist=[TASK, said(1, "Taking a screenshot with its log."), call(1, name="screenshot"),
      result(1, [{"type":"input_text","text":log(1)}, img], name="screenshot"),
      said(2, "Reading the next one."), call(2), result(2, log(2, 20)),
      {"role":"user","content":"Which step was it?"}]
case("responses","sdk-image-result",
     "An Agents SDK result whose output is a list of a long input_text and an input_image: offloaded, the output is an input_text placeholder with the SDK's own image item beside it.",
     "auto", hist, detected="responses", compact_opts={"context_window":3000,"keep_tail":5})

case("responses","sdk-bad-call-id",
     "An Agents SDK result whose callId is not a string is refused, naming the SDK's key.",
     "responses", [TASK, {"type":"function_call_result","callId":7,"name":"readLog",
                          "status":"completed","output":"ok"}],
     error={"code":"ETYPE","where":"messages[1].callId"})
case("responses","sdk-output-no-text",
     "An Agents SDK result whose {type:'text'} output has no text is refused, naming the field.",
     "responses", [TASK, call(1), {"type":"function_call_result","callId":"call_1","name":"readLog",
                                   "status":"completed","output":{"type":"text"}}],
     error={"code":"EMISSING","where":"messages[2].output.text"})
