def call(i, name="bash", args='{"cmd":"ls"}', text=None):
    return {"role":"assistant","content":text,"tool_calls":[{"id":"call_%s"%i,"type":"function","function":{"name":name,"arguments":args}}]}
def res(i, text):
    return {"role":"tool","tool_call_id":"call_%s"%i,"content":text}
SYS={"role":"system","content":"You are a coding agent. Work in /repo."}
TASK={"role":"user","content":"The test tests/test_parse.py fails. Fix src/parse.py. Never edit vendor/."}
loop=[SYS,TASK]
for i in range(3):
    loop+= [call(i, args='{"cmd":"pytest -x tests/test_parse.py"}', text="Run the failing test (try %d)."%i), res(i, "FAILED tests/test_parse.py::test_dates - ValueError: bad month\n1 failed")]
loop.append({"role":"assistant","content":"The month parser is off by one; fixing src/parse.py next."})
case('openai','agent-loop','A valid Chat Completions loop comes back unchanged and auto-detects.','openai',loop,detected='openai')

case('openai','missing-result','A call without a result gets a stub result right after it.','openai',
  [SYS,TASK,call(1),{"role":"user","content":"go on"}])
case('openai','orphan-and-late','An orphan result is dropped; a late result moves right behind its call.','openai',
  [SYS,TASK,res('ghost','orphaned output'),call(1),{"role":"user","content":"hurry"},res(1,"done")])
case('openai','parallel-and-duplicates','Parallel calls keep their results in order; a second result for one call is dropped; a reused id pairs turn by turn.','openai',
  [SYS,TASK,
   {"role":"assistant","content":None,"tool_calls":[
     {"id":"a","type":"function","function":{"name":"read","arguments":"{\"path\":\"a.py\"}"}},
     {"id":"b","type":"function","function":{"name":"read","arguments":"{\"path\":\"b.py\"}"}}]},
   res('x','x'), {"role":"tool","tool_call_id":"a","content":"A"},{"role":"tool","tool_call_id":"b","content":"B"},{"role":"tool","tool_call_id":"b","content":"B again"},
   call(0), res(0,"first"), call(0), res(0,"second")])
uf=[SYS,{"role":"user","name":"alice","content":[{"type":"text","text":"Look at this screenshot."},{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo=","detail":"low"}}],"x-trace":{"span":7}},
    {"role":"assistant","content":"Reading it.","refusal":None,"annotations":[],"tool_calls":[{"id":"call_9","type":"function","function":{"name":"ocr","arguments":"{}"}}],"x-internal":[1,2,3]},
    {"role":"user","content":"wait"},
    {"role":"tool","tool_call_id":"call_9","content":[{"type":"text","text":"TEXT: Hello"}],"x-cost":0.25}]
case('openai','unknown-fields','Unknown fields and content lists survive a repair that moves a result; the image part is kept.','openai',uf)
big="\n".join("src/module_%03d.py:%d: warning: unused import os"%(i,i*7) for i in range(600))
comp=[SYS,TASK]
mid="\n".join("tests/test_%02d.py::test_case_%d PASSED"%(j,j) for j in range(60))
for i in range(10):
    comp+=[call(i, name="bash", args='{"cmd":"ruff check src"}', text="Lint pass %d."%i), res(i, big if i in (1,8) else mid)]
comp.append({"role":"user","content":"Summarize what is left."})
case('openai','compact-offload','A compaction offloads the large outputs, folds the old turns into a checkpoint and keeps the tail.','openai',comp,compact_opts={"context_window":4000,"keep_tail":4})
case('openai','bad-content','A content that is neither a string nor a list is refused, naming the place.','openai',
  [SYS,{"role":"user","content":42}],error={"code":"ETYPE","where":"messages[1].content"})
case('openai','missing-name','A tool call without a function name is refused, naming the field.','openai',
  [SYS,{"role":"assistant","content":None,"tool_calls":[{"id":"c","type":"function","function":{"arguments":"{}"}}]}],error={"code":"EMISSING","where":"messages[1].tool_calls[0].function.name"})
case('openai','object-arguments','Arguments given as an object (as some SDK objects dump them) are read as their JSON and kept as given.','openai',
  [SYS,TASK,{"role":"assistant","content":None,"tool_calls":[{"id":"c","type":"function","function":{"name":"edit","arguments":{"path":"src/parse.py","line":12}}}]},{"role":"tool","tool_call_id":"c","content":"ok"}])
